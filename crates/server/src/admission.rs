//! Fair under load: a fixed number of connections, a fixed number of queries running at
//! once (the rest wait in a FIFO queue with a timeout), and a global budget of scan read
//! buffers that running queries draw from. Every limit refuses with a PostgreSQL error
//! instead of hanging, and counts what it did for the sampler.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::cancel::QueryCancel;

/// Scan buffer budget unit: the semaphore counts MiB so that budgets up to terabytes fit
/// in its permit counter.
const SCAN_BUFFER_UNIT_BYTES: usize = 1 << 20;

#[derive(Debug, Default)]
pub struct AdmissionCounters {
    pub connections_open: AtomicUsize,
    pub connections_total: AtomicU64,
    pub connections_refused: AtomicU64,
    pub queries_running: AtomicUsize,
    pub queries_queued: AtomicUsize,
    pub queries_started: AtomicU64,
    pub queries_completed: AtomicU64,
    pub queries_failed: AtomicU64,
    pub queries_canceled: AtomicU64,
    pub queries_timed_out_in_queue: AtomicU64,
    /// Microseconds queries spent waiting for a slot, summed.
    pub queue_wait_us: AtomicU64,
    pub rows_sent: AtomicU64,
}

#[derive(Debug)]
pub struct Admission {
    connections: Arc<Semaphore>,
    pub max_connections: usize,
    queries: Arc<Semaphore>,
    pub max_active_queries: usize,
    scan_buffers: Arc<Semaphore>,
    scan_buffer_units_total: u32,
    scan_buffer_units_per_query: u32,
    pub queue_timeout: Duration,
    pub counters: AdmissionCounters,
}

/// A connection's place; dropping it frees the place.
#[derive(Debug)]
pub struct ConnectionSlot {
    _permit: OwnedSemaphorePermit,
    admission: Arc<Admission>,
}

impl Drop for ConnectionSlot {
    fn drop(&mut self) {
        self.admission.counters.connections_open.fetch_sub(1, Relaxed);
    }
}

/// A running query's slot and scan buffers; dropping it lets the next query in.
#[derive(Debug)]
pub struct QuerySlot {
    _query: OwnedSemaphorePermit,
    _scan_buffers: OwnedSemaphorePermit,
    admission: Arc<Admission>,
    pub queued_for: Duration,
}

impl Drop for QuerySlot {
    fn drop(&mut self) {
        self.admission.counters.queries_running.fetch_sub(1, Relaxed);
    }
}

#[derive(Debug, PartialEq, Eq)]
pub enum AdmissionRefusal {
    /// Waited `queue_timeout` without a slot.
    QueueTimeout { waited: Duration },
    Canceled,
}

impl Admission {
    pub fn new(
        max_connections: usize,
        max_active_queries: usize,
        queue_timeout: Duration,
        scan_buffer_budget_bytes: usize,
        scan_buffer_bytes_per_query: usize,
    ) -> Arc<Admission> {
        let units = |b: usize| u32::try_from(b.div_ceil(SCAN_BUFFER_UNIT_BYTES)).unwrap_or(u32::MAX).max(1);
        let total = units(scan_buffer_budget_bytes);
        // A query whose buffers alone exceed the budget still runs, alone: the budget then
        // serialises scans instead of refusing them forever.
        let per_query = units(scan_buffer_bytes_per_query).min(total);
        Arc::new(Admission {
            connections: Arc::new(Semaphore::new(max_connections)),
            max_connections,
            queries: Arc::new(Semaphore::new(max_active_queries)),
            max_active_queries,
            scan_buffers: Arc::new(Semaphore::new(total as usize)),
            scan_buffer_units_total: total,
            scan_buffer_units_per_query: per_query,
            queue_timeout,
            counters: AdmissionCounters::default(),
        })
    }

    /// A place for a new connection, or `None` when `max_connections` are open.
    pub fn try_connect(self: &Arc<Self>) -> Option<ConnectionSlot> {
        match self.connections.clone().try_acquire_owned() {
            Ok(permit) => {
                self.counters.connections_open.fetch_add(1, Relaxed);
                self.counters.connections_total.fetch_add(1, Relaxed);
                Some(ConnectionSlot { _permit: permit, admission: self.clone() })
            }
            Err(_) => {
                self.counters.connections_refused.fetch_add(1, Relaxed);
                None
            }
        }
    }

    /// Waits (first come, first served: tokio's semaphore is fair) for a query slot and
    /// the query's scan buffers, at most `queue_timeout`, and gives up on a cancel.
    pub async fn admit(self: &Arc<Self>, cancel: &QueryCancel) -> Result<QuerySlot, AdmissionRefusal> {
        let started = Instant::now();
        // Counted out on every way out, the caller dropping this future included (a
        // statement_timeout or a client gone while queued): a count left behind would keep
        // `idle()` false for good.
        struct Queued<'a>(&'a AdmissionCounters);
        impl Drop for Queued<'_> {
            fn drop(&mut self) {
                self.0.queries_queued.fetch_sub(1, Relaxed);
            }
        }
        self.counters.queries_queued.fetch_add(1, Relaxed);
        let queued = Queued(&self.counters);
        let wait = async {
            let query = self.queries.clone().acquire_owned().await;
            let buffers = self.scan_buffers.clone().acquire_many_owned(self.scan_buffer_units_per_query).await;
            (query, buffers)
        };
        let outcome = tokio::select! {
            r = tokio::time::timeout(self.queue_timeout, wait) => match r {
                Ok((Ok(q), Ok(b))) => Ok((q, b)),
                // The semaphores are never closed; treat it as a timeout rather than panic.
                Ok(_) | Err(_) => Err(AdmissionRefusal::QueueTimeout { waited: started.elapsed() }),
            },
            _ = cancel.canceled() => Err(AdmissionRefusal::Canceled),
        };
        drop(queued);
        let queued_for = started.elapsed();
        self.counters.queue_wait_us.fetch_add(queued_for.as_micros() as u64, Relaxed);
        match outcome {
            Ok((query, buffers)) => {
                self.counters.queries_running.fetch_add(1, Relaxed);
                self.counters.queries_started.fetch_add(1, Relaxed);
                Ok(QuerySlot { _query: query, _scan_buffers: buffers, admission: self.clone(), queued_for })
            }
            Err(e) => {
                if matches!(e, AdmissionRefusal::QueueTimeout { .. }) {
                    self.counters.queries_timed_out_in_queue.fetch_add(1, Relaxed);
                }
                Err(e)
            }
        }
    }

    pub fn scan_buffer_budget_bytes(&self) -> usize {
        self.scan_buffer_units_total as usize * SCAN_BUFFER_UNIT_BYTES
    }

    pub fn scan_buffer_bytes_in_use(&self) -> usize {
        (self.scan_buffer_units_total as usize).saturating_sub(self.scan_buffers.available_permits()) * SCAN_BUFFER_UNIT_BYTES
    }

    /// True once no query runs or waits (for draining at shutdown).
    pub fn idle(&self) -> bool {
        self.counters.queries_running.load(Relaxed) == 0 && self.counters.queries_queued.load(Relaxed) == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn connections_past_the_limit_are_refused_and_freed_on_drop() {
        let a = Admission::new(2, 1, Duration::from_secs(1), 64 << 20, 16 << 20);
        let c1 = a.try_connect();
        let c2 = a.try_connect();
        assert!(c1.is_some() && c2.is_some());
        assert!(a.try_connect().is_none());
        drop(c1);
        assert!(a.try_connect().is_some());
        assert_eq!(a.counters.connections_refused.load(Relaxed), 1);
    }

    #[tokio::test]
    async fn a_query_waits_for_a_slot_then_times_out() {
        let a = Admission::new(10, 1, Duration::from_millis(100), 64 << 20, 16 << 20);
        let cancel = QueryCancel::new();
        let first = a.admit(&cancel).await.expect("first runs");
        let second = a.admit(&cancel).await;
        assert!(matches!(second, Err(AdmissionRefusal::QueueTimeout { .. })), "{second:?}");
        drop(first);
        assert!(a.admit(&cancel).await.is_ok());
        assert!(a.idle());
    }

    #[tokio::test]
    async fn the_scan_buffer_budget_limits_running_queries() {
        // Budget for two queries' buffers, four query slots: the third query waits.
        let a = Admission::new(10, 4, Duration::from_millis(100), 32 << 20, 16 << 20);
        let cancel = QueryCancel::new();
        let q1 = a.admit(&cancel).await.expect("q1");
        let _q2 = a.admit(&cancel).await.expect("q2");
        assert_eq!(a.scan_buffer_bytes_in_use(), 32 << 20);
        assert!(a.admit(&cancel).await.is_err());
        drop(q1);
        assert!(a.admit(&cancel).await.is_ok());
    }

    /// statement_timeout and a client gone while queued both drop the wait.
    #[tokio::test]
    async fn a_dropped_wait_leaves_the_queue() {
        let a = Admission::new(10, 1, Duration::from_secs(30), 64 << 20, 16 << 20);
        let cancel = QueryCancel::new();
        let first = a.admit(&cancel).await.expect("first");
        let waited = tokio::time::timeout(Duration::from_millis(50), a.admit(&cancel)).await;
        assert!(waited.is_err(), "still queued when dropped");
        assert_eq!(a.counters.queries_queued.load(Relaxed), 0);
        drop(first);
        assert!(a.idle());
    }

    #[tokio::test]
    async fn a_cancel_ends_the_wait() {
        let a = Admission::new(10, 1, Duration::from_secs(30), 64 << 20, 16 << 20);
        let cancel = QueryCancel::new();
        let _first = a.admit(&cancel).await.expect("first");
        let waiting = QueryCancel::new();
        let w2 = waiting.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(50)).await;
            w2.cancel();
        });
        assert_eq!(a.admit(&waiting).await.err(), Some(AdmissionRefusal::Canceled));
    }
}
