//! `flashscan bench checkpoint`: seed 003's experiment. A cold scan runs alone, then the
//! same cold scan runs beside a checkpoint of at least 1 GB of committed rows, at several
//! `--max-async-io` caps, with the checkpoint's pacing on and off. Per trial: the scan's
//! MB/s alone and during the checkpoint (over the checkpoint's own time window), the
//! checkpoint's time, write count, average write size and the most writes it had
//! outstanding.
//!
//! How the window is measured: the scan runs in a loop (each pass cold: O_DIRECT, its files
//! dropped from the page cache) on its own thread; the driver reads the process's
//! streaming-read byte counter (`flashscan_buffer::stream_activity`) at the window's start
//! and end. Alone, the window is `solo_window_s`, once just before and once just after the
//! checkpoint (the baseline is their mean); beside the checkpoint, it is exactly the
//! checkpoint call. Both start once the scan has run `warmup_s`, so neither window holds a
//! scan's start-up. The scan and the checkpoint share one process, so a paced checkpoint
//! sees the scan (pacing reads the same counters).
//!
//! The rows are made by INSERT through the write path (logged, committed): a table
//! `ckpt_bench` (id BIGINT, pad VARCHAR of ~1000 bytes) filled until its delta holds
//! `dirty_bytes`, dropped and made again before each trial.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow::array::{Int64Array, StringArray};
use arrow::datatypes::{DataType, Field, Schema};
use arrow::record_batch::RecordBatch;
use flashscan_buffer::stream_activity;
use flashscan_exec::{open_source, run_query, BuiltinQuery, CacheMode, ScanOptions};
use flashscan_measure::stats::median;
use flashscan_measure::CpuTime;
use flashscan_storage::column::{ColumnDef, ColumnType};
use flashscan_storage::Database;
use flashscan_write::{init_database, CheckpointOptions, InitOptions, NewTable, WriteLimits, WritePath};
use serde::Serialize;

use crate::error::BenchError;

/// The table the bench fills and checkpoints (dropped and made again per trial).
pub const BENCH_TABLE: &str = "ckpt_bench";
/// Bytes of the padding column per row: ~8 rows per 8 KB page, so 1 GB is ~1M log records.
const PAD_BYTES: usize = 1000;
/// Rows per Arrow batch and per INSERT statement (about 8 MB).
const ROWS_PER_STATEMENT: usize = 8192;

#[derive(Debug, Clone)]
pub struct CheckpointBenchOptions {
    /// The database the checkpoint writes (made with `flashscan init` here if missing).
    pub db: PathBuf,
    /// The database holding the table to scan (e.g. TPC-H lineitem from `flashscan load`).
    pub scan_db: PathBuf,
    pub scan_table: String,
    pub scan_query: String,
    pub scan: ScanOptions,
    /// Committed rows to checkpoint per trial, bytes of delta pages.
    pub dirty_bytes: u64,
    pub max_async_io: Vec<usize>,
    /// Pacing settings to measure (e.g. [false, true]).
    pub pace: Vec<bool>,
    pub rounds: usize,
    pub warmup_s: f64,
    pub solo_window_s: f64,
    /// `sync; echo 3 > /proc/sys/vm/drop_caches` before each trial (root only).
    pub drop_caches: bool,
}

/// One trial: a scan alone, then beside one checkpoint.
#[derive(Debug, Clone, Serialize)]
pub struct CheckpointTrial {
    pub round: usize,
    pub max_async_io: usize,
    pub pace: bool,
    /// Mean of the scan alone just before and just after the checkpoint.
    pub scan_solo_mb_per_s: f64,
    pub scan_solo_before_mb_per_s: f64,
    pub scan_solo_after_mb_per_s: f64,
    pub scan_during_mb_per_s: f64,
    /// During / alone, same trial.
    pub scan_kept_ratio: f64,
    pub checkpoint_s: f64,
    pub checkpoint_write_s: f64,
    pub checkpoint_mb_per_s: f64,
    pub writes: u64,
    pub avg_write_bytes: f64,
    pub max_outstanding_writes: u64,
    pub writes_paced: u64,
    pub pages_written: u64,
    pub dirty_bytes: u64,
    pub write_mode: String,
    pub engine: String,
    /// Process CPU seconds over the checkpoint window (scan and checkpoint together).
    pub cpu_s_during: f64,
    pub cpu_s_solo: f64,
    pub fill_s: f64,
}

/// Medians over the rounds of one (cap, pace) setting.
#[derive(Debug, Clone, Serialize)]
pub struct CheckpointSummary {
    pub max_async_io: usize,
    pub pace: bool,
    pub rounds: usize,
    pub scan_solo_mb_per_s: f64,
    pub scan_during_mb_per_s: f64,
    pub scan_kept_ratio: f64,
    pub checkpoint_s: f64,
    pub checkpoint_mb_per_s: f64,
    pub writes: f64,
    pub avg_write_bytes: f64,
    pub max_outstanding_writes: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct CheckpointBenchReport {
    pub scan_table: String,
    pub scan_query: String,
    pub scan_threads: u32,
    pub scan_depth: u32,
    pub scan_io_size_bytes: usize,
    pub dirty_bytes: u64,
    pub caches_dropped: bool,
    pub trials: Vec<CheckpointTrial>,
    pub summary: Vec<CheckpointSummary>,
}

fn drop_caches() -> Result<(), BenchError> {
    // SAFETY: sync(2) takes no arguments and cannot fail.
    unsafe { libc::sync() };
    std::fs::write("/proc/sys/vm/drop_caches", "3\n").map_err(|source| BenchError::System {
        what: "dropping the page cache (/proc/sys/vm/drop_caches; needs root — or pass --no-drop-caches: the scans read with O_DIRECT anyway)",
        source,
    })
}

fn schema() -> Arc<Schema> {
    Arc::new(Schema::new(vec![Field::new("id", DataType::Int64, false), Field::new("pad", DataType::Utf8, false)]))
}

fn batch(first_id: i64, rows: usize) -> Result<RecordBatch, BenchError> {
    let ids: Vec<i64> = (first_id..first_id + rows as i64).collect();
    // Distinct text per row (the id's digits repeated): nothing compresses it away.
    let pads: Vec<String> = ids.iter().map(|id| format!("{id:020}").repeat(PAD_BYTES / 20)).collect();
    Ok(RecordBatch::try_new(schema(), vec![Arc::new(Int64Array::from(ids)), Arc::new(StringArray::from(pads))])?)
}

/// Opens (or makes) the write database as the writer, with limits that let `dirty_bytes`
/// stay in memory and no automatic checkpoint (the bench runs its own).
fn open_db(options: &CheckpointBenchOptions) -> Result<WritePath, BenchError> {
    if !options.db.join("catalog.json").exists() {
        init_database(&options.db, &InitOptions::default())?;
    }
    let wp = WritePath::open_writer(&options.db, "flashscan bench checkpoint")?;
    wp.set_limits(WriteLimits {
        delta_bytes_max: options.dirty_bytes * 2 + (256 << 20),
        checkpoint_delta_bytes: u64::MAX,
        checkpoint_log_bytes: u64::MAX,
        checkpoint_interval: Duration::from_secs(u64::MAX / 4),
        auto_checkpoint: false,
        checkpoint: CheckpointOptions::default(),
    })?;
    Ok(wp)
}

/// Drops and makes the bench table, then inserts until its delta holds `dirty_bytes`.
fn fill(wp: &WritePath, dirty_bytes: u64) -> Result<f64, BenchError> {
    let started = Instant::now();
    wp.drop_table(BENCH_TABLE, true)?;
    let columns = vec![
        ColumnDef { name: "id".into(), column_type: ColumnType::Int64, nullable: false },
        ColumnDef { name: "pad".into(), column_type: ColumnType::Utf8, nullable: false },
    ];
    wp.create_table(NewTable { name: BENCH_TABLE.into(), columns, partition_count: Some(4), partition_by: Some("id".into()), if_not_exists: false, indexes: Vec::new(), ..Default::default() })?;
    let mut next_id = 0i64;
    while wp.delta_bytes()? < dirty_bytes {
        let b = batch(next_id, ROWS_PER_STATEMENT)?;
        next_id += ROWS_PER_STATEMENT as i64;
        wp.insert(BENCH_TABLE, &[b])?;
    }
    Ok(started.elapsed().as_secs_f64())
}

/// A scan looping on its own thread until told to stop; every pass cold.
struct ScanLoop {
    stop: Arc<AtomicBool>,
    handle: std::thread::JoinHandle<Result<u64, BenchError>>,
}

impl ScanLoop {
    fn start(options: &CheckpointBenchOptions) -> Result<ScanLoop, BenchError> {
        let query = BuiltinQuery::parse(&options.scan_query)?;
        let scan = ScanOptions { cache_mode: CacheMode::Cold, check: false, ..options.scan };
        scan.validate()?;
        let stop = Arc::new(AtomicBool::new(false));
        let db_dir = options.scan_db.clone();
        let table = options.scan_table.clone();
        let flag = stop.clone();
        let handle = std::thread::spawn(move || -> Result<u64, BenchError> {
            let db = Database::open(&db_dir)?;
            let source = open_source(&db, &table)?;
            let mut passes = 0u64;
            while !flag.load(Ordering::Acquire) {
                run_query(source.as_ref(), &query, &scan)?;
                passes += 1;
            }
            Ok(passes)
        });
        Ok(ScanLoop { stop, handle })
    }

    fn finish(self) -> Result<u64, BenchError> {
        self.stop.store(true, Ordering::Release);
        self.handle.join().map_err(|_| BenchError::ThreadPanicked("the scan thread"))?
    }
}

/// Bytes the process's scans read over `f`, with the seconds and CPU seconds it took.
fn window<R>(f: impl FnOnce() -> Result<R, BenchError>) -> Result<(R, f64, f64, f64), BenchError> {
    let bytes_before = stream_activity().read_bytes_total;
    let cpu_before = CpuTime::now();
    let started = Instant::now();
    let r = f()?;
    let seconds = started.elapsed().as_secs_f64();
    let cpu_s = CpuTime::now().since(&cpu_before).total_ns() as f64 / 1e9;
    let mb = (stream_activity().read_bytes_total - bytes_before) as f64 / 1e6;
    Ok((r, mb / seconds.max(1e-9), seconds, cpu_s))
}

fn trial(wp: &WritePath, options: &CheckpointBenchOptions, round: usize, max_async_io: usize, pace: bool) -> Result<CheckpointTrial, BenchError> {
    let fill_s = fill(wp, options.dirty_bytes)?;
    let dirty_bytes = wp.delta_bytes()?;
    if options.drop_caches {
        drop_caches()?;
    }
    let warmup = Duration::from_secs_f64(options.warmup_s);

    // The scan alone just before and just after the checkpoint: the device's speed drifts
    // by tens of percent within minutes here, so the baseline brackets the window.
    let solo = || -> Result<(f64, f64), BenchError> {
        let scan = ScanLoop::start(options)?;
        std::thread::sleep(warmup);
        let solo = window(|| {
            std::thread::sleep(Duration::from_secs_f64(options.solo_window_s));
            Ok(())
        });
        scan.finish()?;
        let (_, mb_per_s, _, cpu_s) = solo?;
        Ok((mb_per_s, cpu_s))
    };
    let (solo_before_mb_per_s, cpu_s_before) = solo()?;

    let scan = ScanLoop::start(options)?;
    std::thread::sleep(warmup);
    let ckpt_options = CheckpointOptions { max_async_io, pace, ..CheckpointOptions::default() };
    let during = window(|| Ok(wp.checkpoint(&ckpt_options)?));
    scan.finish()?;
    let (report, scan_during_mb_per_s, checkpoint_s, cpu_s_during) = during?;
    let (solo_after_mb_per_s, cpu_s_after) = solo()?;
    let scan_solo_mb_per_s = (solo_before_mb_per_s + solo_after_mb_per_s) / 2.0;
    let cpu_s_solo = (cpu_s_before + cpu_s_after) / 2.0;
    let bytes = report.writes as f64 * report.avg_write_bytes;
    Ok(CheckpointTrial {
        round,
        max_async_io,
        pace,
        scan_solo_mb_per_s,
        scan_solo_before_mb_per_s: solo_before_mb_per_s,
        scan_solo_after_mb_per_s: solo_after_mb_per_s,
        scan_during_mb_per_s,
        scan_kept_ratio: if scan_solo_mb_per_s > 0.0 { scan_during_mb_per_s / scan_solo_mb_per_s } else { 0.0 },
        checkpoint_s,
        checkpoint_write_s: report.write_s,
        checkpoint_mb_per_s: bytes / 1e6 / checkpoint_s.max(1e-9),
        writes: report.writes,
        avg_write_bytes: report.avg_write_bytes,
        max_outstanding_writes: report.max_outstanding_writes,
        writes_paced: report.writes_paced,
        pages_written: report.pages_written,
        dirty_bytes,
        write_mode: report.write_mode,
        engine: report.engine,
        cpu_s_during,
        cpu_s_solo,
        fill_s,
    })
}

fn validate(options: &CheckpointBenchOptions) -> Result<(), BenchError> {
    if options.max_async_io.is_empty() || options.max_async_io.iter().any(|&n| !(1..=flashscan_write::MAX_ASYNC_IO_MAX).contains(&n)) {
        return Err(BenchError::InvalidOption(format!("--max-async-io {:?}: give caps from 1 to {}", options.max_async_io, flashscan_write::MAX_ASYNC_IO_MAX)));
    }
    if options.pace.is_empty() {
        return Err(BenchError::InvalidOption("--pace: give on, off or both".into()));
    }
    if options.rounds == 0 {
        return Err(BenchError::InvalidOption("--rounds 0: give at least 1".into()));
    }
    if options.dirty_bytes == 0 {
        return Err(BenchError::InvalidOption("--dirty 0: give a size such as 1G".into()));
    }
    if !(options.solo_window_s > 0.0 && options.warmup_s >= 0.0) {
        return Err(BenchError::InvalidOption("--solo-seconds must be > 0 and --warmup-seconds >= 0".into()));
    }
    if !options.scan_db.join("catalog.json").is_file() {
        return Err(BenchError::InvalidOption(format!("--scan-db {}: no catalog.json there; load a table to scan first (`flashscan load DIR --sf 1 --tables lineitem`)", options.scan_db.display())));
    }
    if same_dir(&options.scan_db, &options.db) {
        return Err(BenchError::InvalidOption("--scan-db must be another database than DB (the bench drops and makes its own table in DB)".into()));
    }
    Ok(())
}

fn same_dir(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

/// Runs every trial (rounds x caps x pacing, interleaved: each round visits every setting)
/// and prints one line per trial through `progress`.
pub fn run(options: &CheckpointBenchOptions, progress: &mut dyn FnMut(&CheckpointTrial)) -> Result<CheckpointBenchReport, BenchError> {
    validate(options)?;
    let wp = open_db(options)?;
    let mut trials = Vec::new();
    for round in 1..=options.rounds {
        for &cap in &options.max_async_io {
            for &pace in &options.pace {
                let t = trial(&wp, options, round, cap, pace)?;
                progress(&t);
                trials.push(t);
            }
        }
    }
    wp.drop_table(BENCH_TABLE, true)?;
    wp.close()?;
    let mut summary = Vec::new();
    for &cap in &options.max_async_io {
        for &pace in &options.pace {
            let ts: Vec<&CheckpointTrial> = trials.iter().filter(|t| t.max_async_io == cap && t.pace == pace).collect();
            let m = |f: &dyn Fn(&CheckpointTrial) -> f64| median(ts.iter().map(|t| f(t)).collect());
            summary.push(CheckpointSummary {
                max_async_io: cap,
                pace,
                rounds: ts.len(),
                scan_solo_mb_per_s: m(&|t| t.scan_solo_mb_per_s),
                scan_during_mb_per_s: m(&|t| t.scan_during_mb_per_s),
                scan_kept_ratio: m(&|t| t.scan_kept_ratio),
                checkpoint_s: m(&|t| t.checkpoint_s),
                checkpoint_mb_per_s: m(&|t| t.checkpoint_mb_per_s),
                writes: m(&|t| t.writes as f64),
                avg_write_bytes: m(&|t| t.avg_write_bytes),
                max_outstanding_writes: m(&|t| t.max_outstanding_writes as f64),
            });
        }
    }
    Ok(CheckpointBenchReport {
        scan_table: options.scan_table.clone(),
        scan_query: options.scan_query.clone(),
        scan_threads: options.scan.thread_count,
        scan_depth: options.scan.queue_depth,
        scan_io_size_bytes: options.scan.io_size_bytes,
        dirty_bytes: options.dirty_bytes,
        caches_dropped: options.drop_caches,
        trials,
        summary,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bench_rows_are_distinct_and_sized() {
        let b = batch(7, 3).unwrap();
        assert_eq!(b.num_rows(), 3);
        let pads = b.column(1).as_any().downcast_ref::<StringArray>().unwrap();
        assert_eq!(pads.value(0).len(), PAD_BYTES);
        assert_ne!(pads.value(0), pads.value(1));
    }
}
