//! Queries compute on a tokio runtime of their own, away from the connections.
//!
//! tokio does not preempt a task: a worker runs a task until it returns `Pending`. A
//! DataFusion operator can compute for seconds inside one poll (a nested-loop join with a
//! predicate that rejects every pair returns nothing until its input ends), so with the
//! queries on the server's runtime two such queries on two workers froze everything else:
//! `select 1` from another client waited 9.8 s, a cancel request or a client's hang-up was
//! read only when a heavy query ended (bench/concurrency/responsiveness.py, docs/server.md
//! "Responsiveness while queries hold every core"). DataFusion's own advice is the same
//! split (its `thread_pools` example): the network on one runtime, the CPU-bound plans on
//! another.
//!
//! Here the connections, cancel requests, the hang-up checks and the group committer stay on
//! the server's runtime (its workers are never held by a plan); a query is planned there
//! (milliseconds at most, and its errors come before any row), and executed on this one:
//! `ExecutionPlan::execute` spawns the partitions' tasks on the runtime it is called on. It has a worker for every partition of every query that
//! may run at once (`--max-active-queries` × partitions), so an admitted query always finds
//! an idle worker: the operating system shares the cores among them, as it shares them among
//! PostgreSQL's backends. Batches cross to the connection's task through a channel of
//! [`BATCHES_IN_FLIGHT`].


use arrow::array::RecordBatch;
use datafusion::error::DataFusionError;
use datafusion::execution::SendableRecordBatchStream;
use futures::StreamExt;
use tokio::sync::mpsc;

/// Batches a query may compute ahead of its client: one being sent, one ready. More only
/// holds memory the query's pool does not see.
pub const BATCHES_IN_FLIGHT: usize = 2;
/// Workers at most, whatever `--max-active-queries` × partitions says: threads are cheap
/// while parked, but not free (a stack each).
pub const QUERY_WORKERS_MAX: usize = 512;

/// The runtime the queries' plans run on; shut down (without waiting) when dropped.
pub struct QueryRuntime {
    runtime: Option<tokio::runtime::Runtime>,
    pub workers: usize,
}

impl std::fmt::Debug for QueryRuntime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QueryRuntime").field("workers", &self.workers).finish()
    }
}

impl QueryRuntime {
    /// A worker per partition of every query that may run at once.
    pub fn for_queries(max_active_queries: usize, partitions: usize) -> std::io::Result<QueryRuntime> {
        let workers = max_active_queries.saturating_mul(partitions.max(1)).clamp(1, QUERY_WORKERS_MAX);
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(workers).thread_name("flashscan-query").enable_all().build()?;
        Ok(QueryRuntime { runtime: Some(runtime), workers })
    }

    /// Runs `execute` (a physical plan's `execute`, which spawns the plan's partition
    /// tasks on the current runtime) and polls its stream on the query runtime. Planning
    /// stays with the caller: it is short, and its errors come before any row. The returned
    /// stream owns the query: dropped, the query stops at its next await.
    pub fn start<F>(&self, execute: F) -> QueryStream
    where
        F: FnOnce() -> Result<SendableRecordBatchStream, DataFusionError> + Send + 'static,
    {
        let (tx, rx) = mpsc::channel(BATCHES_IN_FLIGHT);
        let runtime = self.runtime.as_ref().expect("the query runtime lives until dropped");
        let task = runtime.spawn(async move {
            let mut batches = match execute() {
                Ok(s) => s,
                Err(e) => {
                    let _ = tx.send(Err(e)).await;
                    return;
                }
            };
            while let Some(item) = batches.next().await {
                if tx.send(item).await.is_err() {
                    return; // the connection dropped the query
                }
            }
        });
        QueryStream { batches: rx, task, ended: false }
    }
}

impl Drop for QueryRuntime {
    fn drop(&mut self) {
        // Dropping a runtime blocks until its tasks end, which tokio refuses inside another
        // runtime (the server's); a query's tasks are aborted by their QueryStream anyway.
        if let Some(r) = self.runtime.take() {
            r.shutdown_background();
        }
    }
}

/// One query running on the query runtime.
pub struct QueryStream {
    batches: mpsc::Receiver<Result<RecordBatch, DataFusionError>>,
    task: tokio::task::JoinHandle<()>,
    /// The task's end was awaited (a JoinHandle is awaited once).
    ended: bool,
}

impl QueryStream {
    /// The next batch; `None` at the end.
    pub async fn next(&mut self) -> Option<Result<RecordBatch, DataFusionError>> {
        let item = self.batches.recv().await;
        if item.is_none() && !self.ended {
            // The sender is gone, so the task is ending: at the end of its rows, or in a
            // panic of the plan, which must be an error, not a short answer.
            let end = (&mut self.task).await;
            self.ended = true;
            if let Err(e) = end {
                if e.is_panic() {
                    return Some(Err(DataFusionError::Execution(format!("the query stopped: {e}"))));
                }
            }
        }
        item
    }
}

impl Drop for QueryStream {
    fn drop(&mut self) {
        self.task.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::datatypes::Schema;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    use std::time::{Duration, Instant};
    use tokio::sync::oneshot;

    fn one_batch_stream() -> SendableRecordBatchStream {
        let schema = Arc::new(Schema::new(vec![arrow::datatypes::Field::new("x", arrow::datatypes::DataType::Int64, false)]));
        let batch = RecordBatch::try_new(schema.clone(), vec![Arc::new(arrow::array::Int64Array::from(vec![1, 2, 3]))]).unwrap();
        Box::pin(datafusion::physical_plan::stream::RecordBatchStreamAdapter::new(schema, futures::stream::iter(vec![Ok(batch)])))
    }

    /// The point of the module: a plan that holds its worker for a long time (a busy loop
    /// that never awaits) leaves the caller's runtime free.
    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn a_plan_that_never_yields_does_not_hold_the_callers_worker() {
        let queries = QueryRuntime::for_queries(1, 1).expect("runtime");
        let spinning = Arc::new(AtomicBool::new(true));
        let spin = spinning.clone();
        let mut stream = queries.start(move || {
            while spin.load(Ordering::Relaxed) {
                std::hint::spin_loop();
            }
            Ok(one_batch_stream())
        });
        // This runtime's one worker still runs timers and tasks while the plan spins.
        let started = Instant::now();
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(started.elapsed() < Duration::from_secs(5));
        assert!(tokio::spawn(async { 7 }).await.unwrap() == 7);
        spinning.store(false, Ordering::Relaxed);
        let batch = stream.next().await.expect("a batch").expect("ok");
        assert_eq!(batch.num_rows(), 3);
        assert!(stream.next().await.is_none());
        drop(queries);
    }

    #[tokio::test]
    async fn an_execute_error_is_the_first_item() {
        let queries = QueryRuntime::for_queries(2, 2).expect("runtime");
        assert_eq!(queries.workers, 4);
        let mut s = queries.start(|| Err(DataFusionError::Execution("cannot open the file".into())));
        assert!(s.next().await.expect("the error").unwrap_err().to_string().contains("cannot open the file"));
        assert!(s.next().await.is_none());
        drop(queries);
    }

    #[tokio::test]
    async fn a_dropped_stream_stops_its_query() {
        let queries = QueryRuntime::for_queries(1, 1).expect("runtime");
        let (dropped_tx, dropped_rx) = oneshot::channel::<()>();
        struct Signal(Option<oneshot::Sender<()>>);
        impl Drop for Signal {
            fn drop(&mut self) {
                let _ = self.0.take().map(|s| s.send(()));
            }
        }
        let s = queries.start(move || {
            let signal = Signal(Some(dropped_tx));
            let never = futures::stream::once(async move {
                let _signal = signal;
                futures::future::pending::<()>().await;
                Ok(RecordBatch::new_empty(Arc::new(Schema::empty())))
            });
            Ok(Box::pin(datafusion::physical_plan::stream::RecordBatchStreamAdapter::new(Arc::new(Schema::empty()), never)) as SendableRecordBatchStream)
        });
        drop(s);
        // Sent (dropped while pending) or closed (dropped before its first poll): either
        // way the plan's future is gone.
        let _ = tokio::time::timeout(Duration::from_secs(10), dropped_rx).await.expect("aborted in time");
        drop(queries);
    }

    #[tokio::test]
    async fn a_panicking_plan_is_an_error_not_an_end() {
        let queries = QueryRuntime::for_queries(1, 1).expect("runtime");
        let schema = Arc::new(Schema::empty());
        let mut s = queries.start(move || {
            let panicking = futures::stream::once(async {
                if true {
                    panic!("operator bug");
                }
                Ok::<RecordBatch, DataFusionError>(RecordBatch::new_empty(Arc::new(Schema::empty())))
            });
            Ok(Box::pin(datafusion::physical_plan::stream::RecordBatchStreamAdapter::new(schema, panicking)) as SendableRecordBatchStream)
        });
        let item = s.next().await.expect("an error, not the end");
        assert!(item.unwrap_err().to_string().contains("stopped"));
        drop(queries);
    }
}
