//! The live counters: once a second the sampler reads every file's I/O counters (the
//! process-wide ones in flashscan-io) and the server's admission counters, and keeps the
//! differences as one sample in a ring of recent seconds. Every sample says when it was
//! taken and over what interval; each delta has its cumulative total beside it.

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use flashscan_io::{process_file_stats_snapshot, FileStatsSnapshot};
use hdrhistogram::Histogram;
use serde::Serialize;

use crate::admission::Admission;

/// Query latencies are recorded in microseconds up to an hour, 3 significant digits.
const QUERY_LATENCY_US_MAX: u64 = 3_600_000_000;

#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct FileSample {
    pub file: String,
    pub reads: u64,
    pub bytes_read: u64,
    pub read_stall_us: u64,
    pub writes: u64,
    pub bytes_written: u64,
    pub write_stall_us: u64,
    pub reads_total: u64,
    pub bytes_read_total: u64,
    pub read_stall_us_total: u64,
    pub writes_total: u64,
    pub bytes_written_total: u64,
    pub write_stall_us_total: u64,
}

#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct Sample {
    /// When the sample was taken (end of its interval), Unix milliseconds.
    pub unix_ms: u64,
    /// The interval's length (about one second; longer when the machine is overloaded).
    pub interval_s: f64,
    // --- deltas over the interval ---
    pub reads: u64,
    pub bytes_read: u64,
    pub read_stall_us: u64,
    pub writes: u64,
    pub bytes_written: u64,
    pub read_iops: f64,
    pub read_mb_per_s: f64,
    pub read_latency_us_avg: f64,
    pub queries_started: u64,
    pub queries_completed: u64,
    pub queries_failed: u64,
    pub queries_canceled: u64,
    pub queue_timeouts: u64,
    pub connections_refused: u64,
    pub rows_sent: u64,
    // --- writes (zero on a database without a log) ---
    /// Statements (INSERT, COPY, COMMIT of a block) acknowledged after their flush.
    pub statements_committed: u64,
    pub rows_inserted: u64,
    /// Write-path transactions committed: statements of several connections share one.
    pub commits: u64,
    pub commits_per_s: f64,
    /// Durable log flushes (write + fdatasync) of the log writer.
    pub log_flushes: u64,
    pub log_flushes_per_s: f64,
    /// Mean time of the interval's log flushes (write + fdatasync), microseconds: the
    /// device's share of `wait_commit_ms`.
    pub log_flush_latency_us_avg: f64,
    pub log_bytes_written: u64,
    // --- the buffer pool (the process's one pool, which scans read through) ---
    pub pool_hits: u64,
    pub pool_misses: u64,
    pub pool_reads: u64,
    pub pool_evictions: u64,
    pub pool_hit_ratio: f64,
    // --- waits by kind, milliseconds spent in the interval (summed over threads) ---
    /// Reading pages (scans waiting for their reads).
    pub wait_io_ms: f64,
    /// Another thread's latch on a page in memory.
    pub wait_latch_ms: f64,
    /// Queries waiting for a slot (--max-active-queries).
    pub wait_queue_ms: f64,
    /// Statements waiting for their commit to be durable.
    pub wait_commit_ms: f64,
    /// Average I/O requests in flight over the interval (Little's law: the summed latency
    /// of the interval's completed I/Os divided by its length).
    pub io_queue_depth_avg: f64,
    pub queue_wait_ms: f64,
    /// Latency of the queries that ended in the interval (0 when none did).
    pub query_latency_ms_p50: f64,
    pub query_latency_ms_p99: f64,
    pub query_latency_ms_max: f64,
    // --- levels at the end of the interval ---
    pub queries_running: u64,
    pub queries_queued: u64,
    pub connections_open: u64,
    pub scan_buffer_mb_in_use: f64,
    /// Statements waiting for their commit at the end of the interval.
    pub writes_waiting: u64,
    // --- cumulative since the server started ---
    pub reads_total: u64,
    pub bytes_read_total: u64,
    pub read_stall_us_total: u64,
    pub queries_completed_total: u64,
    pub queries_failed_total: u64,
    pub rows_sent_total: u64,
    pub connections_total: u64,
    pub statements_committed_total: u64,
    pub rows_inserted_total: u64,
    pub commits_total: u64,
    pub log_flushes_total: u64,
    pub pool_hits_total: u64,
    pub pool_reads_total: u64,
    pub pool_evictions_total: u64,
    /// Per file, deltas and totals (files that did no I/O in the interval included).
    pub files: Vec<FileSample>,
}

#[derive(Debug, Default, Clone, Copy)]
struct CounterSnapshot {
    started: u64,
    completed: u64,
    failed: u64,
    canceled: u64,
    queue_timeouts: u64,
    refused: u64,
    rows_sent: u64,
    queue_wait_us: u64,
    statements_committed: u64,
    rows_inserted: u64,
    commits: u64,
    commit_wait_us: u64,
    log_flushes: u64,
    log_flush_time_us: u64,
    log_bytes: u64,
    pool: flashscan_buffer::BufferCountersSnapshot,
}

/// Where the write counters come from: the committer's and the log's.
pub struct WriteSource {
    pub counters: Arc<crate::writes::WriteCounters>,
    pub write: Arc<flashscan_write::WritePath>,
}

struct State {
    ring: VecDeque<Sample>,
    prev_files: HashMap<PathBuf, FileStatsSnapshot>,
    /// Process counters when the server started: totals count from there.
    base_files: HashMap<PathBuf, FileStatsSnapshot>,
    prev_counters: CounterSnapshot,
    /// Counters when counting started: the write and pool totals count from there.
    base_counters: CounterSnapshot,
    prev_at: Instant,
}

pub struct Sampler {
    db_dir: PathBuf,
    admission: Arc<Admission>,
    capacity: usize,
    state: Mutex<State>,
    latencies: Mutex<Histogram<u64>>,
    writes: Mutex<Option<WriteSource>>,
}

fn counters_of(a: &Admission, writes: Option<&WriteSource>) -> CounterSnapshot {
    let c = &a.counters;
    let (mut statements_committed, mut rows_inserted, mut commits, mut commit_wait_us, mut log_flushes, mut log_flush_time_us, mut log_bytes) = (0, 0, 0, 0, 0, 0, 0);
    if let Some(w) = writes {
        statements_committed = w.counters.statements_committed.load(Relaxed);
        rows_inserted = w.counters.rows_inserted.load(Relaxed);
        commits = w.counters.transactions_committed.load(Relaxed);
        commit_wait_us = w.counters.commit_wait_us.load(Relaxed);
        if let Some(stats) = w.write.wal_stats() {
            log_flushes = stats.flushes_count;
            log_flush_time_us = stats.flush_time_us;
            log_bytes = stats.bytes_written;
        }
    }
    CounterSnapshot {
        statements_committed,
        rows_inserted,
        commits,
        commit_wait_us,
        log_flushes,
        log_flush_time_us,
        log_bytes,
        pool: flashscan_buffer::BufferPool::global().snapshot(),
        started: c.queries_started.load(Relaxed),
        completed: c.queries_completed.load(Relaxed),
        failed: c.queries_failed.load(Relaxed),
        canceled: c.queries_canceled.load(Relaxed),
        queue_timeouts: c.queries_timed_out_in_queue.load(Relaxed),
        refused: c.connections_refused.load(Relaxed),
        rows_sent: c.rows_sent.load(Relaxed),
        queue_wait_us: c.queue_wait_us.load(Relaxed),
    }
}

fn unix_ms_now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
}

impl Sampler {
    pub fn new(db_dir: &Path, admission: Arc<Admission>, capacity: usize) -> Arc<Sampler> {
        let files: HashMap<PathBuf, FileStatsSnapshot> = process_file_stats_snapshot().into_iter().collect();
        // Constant, valid bounds (1 <= low, high >= 2 * low, sigfig <= 5): cannot fail.
        let latencies = Histogram::new_with_bounds(1, QUERY_LATENCY_US_MAX, 3).expect("constant histogram bounds");
        Arc::new(Sampler {
            db_dir: db_dir.to_path_buf(),
            capacity: capacity.max(1),
            state: Mutex::new(State {
                ring: VecDeque::with_capacity(capacity),
                prev_files: files.clone(),
                base_files: files,
                prev_counters: counters_of(&admission, None),
                base_counters: counters_of(&admission, None),
                prev_at: Instant::now(),
            }),
            admission,
            latencies: Mutex::new(latencies),
            writes: Mutex::new(None),
        })
    }

    /// Counts writes from now on (a database that takes writes).
    pub fn set_write_source(&self, source: WriteSource) {
        let mut w = self.writes.lock().unwrap_or_else(|p| p.into_inner());
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        st.prev_counters = counters_of(&self.admission, Some(&source));
        st.base_counters = st.prev_counters;
        *w = Some(source);
    }

    /// A query ended after `elapsed` (admission wait included).
    pub fn record_query(&self, elapsed: Duration) {
        let us = (elapsed.as_micros() as u64).clamp(1, QUERY_LATENCY_US_MAX);
        let mut h = self.latencies.lock().unwrap_or_else(|p| p.into_inner());
        let _ = h.record(us);
    }

    fn file_label(&self, path: &Path) -> String {
        path.strip_prefix(&self.db_dir).unwrap_or(path).display().to_string()
    }

    /// Takes one sample now and adds it to the ring.
    pub fn sample(&self) -> Sample {
        let files_now = process_file_stats_snapshot();
        let counters = {
            let w = self.writes.lock().unwrap_or_else(|p| p.into_inner());
            counters_of(&self.admission, w.as_ref())
        };
        let latencies = {
            let mut h = self.latencies.lock().unwrap_or_else(|p| p.into_inner());
            let q = |p: f64| if h.is_empty() { 0.0 } else { h.value_at_quantile(p) as f64 / 1000.0 };
            let r = (q(0.5), q(0.99), if h.is_empty() { 0.0 } else { h.max() as f64 / 1000.0 });
            h.reset();
            r
        };
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        let interval_s = now.duration_since(st.prev_at).as_secs_f64().max(1e-6);
        let mut s = Sample { unix_ms: unix_ms_now(), interval_s, ..Sample::default() };
        for (path, now_snap) in &files_now {
            let prev = st.prev_files.get(path).copied().unwrap_or_default();
            let base = st.base_files.get(path).copied().unwrap_or_default();
            let d = now_snap.since(&prev);
            let t = now_snap.since(&base);
            s.reads += d.reads_count;
            s.bytes_read += d.bytes_read;
            s.read_stall_us += d.read_stall_ns / 1000;
            s.writes += d.writes_count;
            s.bytes_written += d.bytes_written;
            s.reads_total += t.reads_count;
            s.bytes_read_total += t.bytes_read;
            s.read_stall_us_total += t.read_stall_ns / 1000;
            s.files.push(FileSample {
                file: self.file_label(path),
                reads: d.reads_count,
                bytes_read: d.bytes_read,
                read_stall_us: d.read_stall_ns / 1000,
                writes: d.writes_count,
                bytes_written: d.bytes_written,
                write_stall_us: d.write_stall_ns / 1000,
                reads_total: t.reads_count,
                bytes_read_total: t.bytes_read,
                read_stall_us_total: t.read_stall_ns / 1000,
                writes_total: t.writes_count,
                bytes_written_total: t.bytes_written,
                write_stall_us_total: t.write_stall_ns / 1000,
            });
        }
        s.read_iops = s.reads as f64 / interval_s;
        s.read_mb_per_s = s.bytes_read as f64 / 1e6 / interval_s;
        s.read_latency_us_avg = if s.reads == 0 { 0.0 } else { s.read_stall_us as f64 / s.reads as f64 };
        let p = st.prev_counters;
        s.queries_started = counters.started - p.started;
        s.queries_completed = counters.completed - p.completed;
        s.queries_failed = counters.failed - p.failed;
        s.queries_canceled = counters.canceled - p.canceled;
        s.queue_timeouts = counters.queue_timeouts - p.queue_timeouts;
        s.connections_refused = counters.refused - p.refused;
        s.rows_sent = counters.rows_sent - p.rows_sent;
        s.queue_wait_ms = (counters.queue_wait_us - p.queue_wait_us) as f64 / 1000.0;
        (s.query_latency_ms_p50, s.query_latency_ms_p99, s.query_latency_ms_max) = latencies;
        s.statements_committed = counters.statements_committed - p.statements_committed;
        s.rows_inserted = counters.rows_inserted - p.rows_inserted;
        s.commits = counters.commits - p.commits;
        s.commits_per_s = s.commits as f64 / interval_s;
        s.log_flushes = counters.log_flushes.saturating_sub(p.log_flushes);
        s.log_flushes_per_s = s.log_flushes as f64 / interval_s;
        let flush_time_us = counters.log_flush_time_us.saturating_sub(p.log_flush_time_us);
        s.log_flush_latency_us_avg = if s.log_flushes == 0 { 0.0 } else { flush_time_us as f64 / s.log_flushes as f64 };
        s.log_bytes_written = counters.log_bytes.saturating_sub(p.log_bytes);
        let pool = counters.pool.since(&p.pool);
        s.pool_hits = pool.hits_count;
        s.pool_misses = pool.misses_count;
        s.pool_reads = pool.reads_count;
        s.pool_evictions = pool.evictions_count;
        s.pool_hit_ratio = pool.hit_ratio();
        s.wait_io_ms = pool.io_wait_ns as f64 / 1e6;
        s.wait_latch_ms = pool.latch_wait_ns as f64 / 1e6;
        s.wait_queue_ms = s.queue_wait_ms;
        s.wait_commit_ms = (counters.commit_wait_us - p.commit_wait_us) as f64 / 1000.0;
        let io_busy_us: u64 = s.files.iter().map(|f| f.read_stall_us + f.write_stall_us).sum();
        s.io_queue_depth_avg = io_busy_us as f64 / 1e6 / interval_s;
        let base = st.base_counters;
        s.statements_committed_total = counters.statements_committed - base.statements_committed;
        s.rows_inserted_total = counters.rows_inserted - base.rows_inserted;
        s.commits_total = counters.commits - base.commits;
        s.log_flushes_total = counters.log_flushes.saturating_sub(base.log_flushes);
        let pool_total = counters.pool.since(&base.pool);
        s.pool_hits_total = pool_total.hits_count;
        s.pool_reads_total = pool_total.reads_count;
        s.pool_evictions_total = pool_total.evictions_count;
        s.writes_waiting = self.writes.lock().unwrap_or_else(|p| p.into_inner()).as_ref().map(|w| w.counters.statements_waiting.load(Relaxed) as u64).unwrap_or(0);
        let c = &self.admission.counters;
        s.queries_running = c.queries_running.load(Relaxed) as u64;
        s.queries_queued = c.queries_queued.load(Relaxed) as u64;
        s.connections_open = c.connections_open.load(Relaxed) as u64;
        s.scan_buffer_mb_in_use = self.admission.scan_buffer_bytes_in_use() as f64 / (1u64 << 20) as f64;
        s.queries_completed_total = counters.completed;
        s.queries_failed_total = counters.failed;
        s.rows_sent_total = counters.rows_sent;
        s.connections_total = c.connections_total.load(Relaxed);
        st.prev_files = files_now.into_iter().collect();
        st.prev_counters = counters;
        st.prev_at = now;
        if st.ring.len() == self.capacity {
            st.ring.pop_front();
        }
        st.ring.push_back(s.clone());
        s
    }

    /// The last `seconds` samples, oldest first.
    pub fn history(&self, seconds: usize) -> Vec<Sample> {
        let st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let skip = st.ring.len().saturating_sub(seconds);
        st.ring.iter().skip(skip).cloned().collect()
    }

    pub fn latest(&self) -> Option<Sample> {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).ring.back().cloned()
    }

    /// Samples once a second until the task is dropped, off the async workers: reading
    /// the log's counters waits while a commit holds the write path.
    pub async fn run(self: Arc<Self>) {
        crate::every_period_blocking(Duration::from_secs(1), move || self.sample()).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sample_holds_the_interval_deltas_and_the_totals() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("t.p0.dat");
        let admission = Admission::new(10, 2, Duration::from_secs(1), 64 << 20, 16 << 20);
        let sampler = Sampler::new(dir.path(), admission.clone(), 3);
        let stats = flashscan_io::FileStats::counted_in_process(&path);
        stats.record_read(1 << 20, 2_000_000);
        sampler.record_query(Duration::from_millis(40));
        let first = sampler.sample();
        assert_eq!((first.reads, first.bytes_read, first.reads_total), (1, 1 << 20, 1));
        assert!((first.read_latency_us_avg - 2000.0).abs() < 1e-9);
        assert!(first.query_latency_ms_p50 >= 39.0 && first.query_latency_ms_p50 <= 41.0, "{}", first.query_latency_ms_p50);
        let f = first.files.iter().find(|f| f.file == "t.p0.dat").expect("the file by its name in the database");
        assert_eq!(f.bytes_read, 1 << 20);
        stats.record_read(1 << 20, 1_000_000);
        let second = sampler.sample();
        assert_eq!((second.reads, second.reads_total, second.bytes_read_total), (1, 2, 2 << 20));
        assert_eq!(second.query_latency_ms_p50, 0.0);
        assert!(second.interval_s > 0.0 && second.unix_ms >= first.unix_ms);
        for _ in 0..5 {
            sampler.sample();
        }
        assert_eq!(sampler.history(100).len(), 3, "the ring keeps its capacity");
    }
}
