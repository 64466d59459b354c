//! `flashscan bench inserts DB [--threads N] [--rows-per-commit K] [--seconds S]`: N threads,
//! each committing K rows per transaction for S seconds through the embedded write path.
//!
//! The API measured is `WritePath::prepare_insert` (flashscan-write): the table is looked up
//! and the page encoder made once per thread — like a prepared INSERT statement or a DuckDB
//! appender — and each `insert(batch)` is one transaction through the very commit SQL INSERT
//! uses (rows encoded and checked as a load checks them, every row logged, one commit record,
//! durable before it returns, then visible to scans). What SQL adds on top, parsing and
//! DataFusion planning per statement, is not measured here.
//!
//! Figures: rows and commits per second of wall time; commits per log flush from the log
//! writer's own counters (before/after); commit latency (the `insert` call) p50/p99 from a
//! per-thread HdrHistogram; CPU µs per row from the process's CPU time (getrusage: the
//! committers, the log writer and everything else in the process).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use arrow::array::{ArrayRef, Float64Array, Int32Array, Int64Array, StringArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::record_batch::RecordBatch;
use flashscan_measure::{CpuTime, LatencyHistogram};
use flashscan_storage::{ColumnDef, ColumnType};
use flashscan_write::{init_database, InitOptions, NewTable, WritePath};
use serde::Serialize;

use crate::error::BenchError;

/// The table the bench writes, created if missing. The same shape in bench/inserts for
/// SQLite and DuckDB: `(id BIGINT NOT NULL, thread INT NOT NULL, amount DOUBLE NOT NULL,
/// note VARCHAR NOT NULL)`, a 16-character note: a 40-byte row, a typical small OLTP row.
pub const TABLE_NAME: &str = "bench_inserts";
/// Threads at most: each is an OS thread with its own histogram; 1024 is far past the
/// point where 2-64 cores stop gaining and keeps a typo (64000) from forking the machine.
pub const THREADS_MAX: usize = 1024;
/// Rows per commit at most: one statement's rows are held in memory until their commit.
pub const ROWS_PER_COMMIT_MAX: usize = 100_000;
/// Longest run: an hour; a bench that runs longer is a mistake in the flag.
pub const SECONDS_MAX: f64 = 3600.0;
const WRITER_NAME: &str = "flashscan bench inserts";

#[derive(Debug, Clone)]
pub struct InsertsOptions {
    pub threads: usize,
    pub rows_per_commit: usize,
    pub seconds: f64,
}

impl Default for InsertsOptions {
    fn default() -> Self {
        InsertsOptions { threads: 1, rows_per_commit: 1, seconds: 10.0 }
    }
}

#[derive(Debug, Clone, Copy, Serialize)]
pub struct LatencyUs {
    pub p50: f64,
    pub p99: f64,
    pub max: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct InsertsReport {
    pub db: PathBuf,
    pub table: String,
    /// How the rows went in (the embedded API measured).
    pub api: String,
    pub threads: usize,
    pub rows_per_commit: usize,
    pub elapsed_s: f64,
    /// Rows whose commit returned (durable): the table has this many more rows.
    pub rows_committed: u64,
    pub commits: u64,
    pub rows_per_s: f64,
    pub commits_per_s: f64,
    pub log_flushes: u64,
    pub commits_per_flush: f64,
    pub commit_latency_us: LatencyUs,
    pub cpu_s: f64,
    pub cpu_us_per_row: f64,
    pub cpu_us_per_commit: f64,
    /// Rows in the table before this run (a reused table).
    pub table_rows_before: u64,
    /// Whether `flashscan init` had to make the database first.
    pub database_created: bool,
}

fn columns() -> Vec<ColumnDef> {
    let c = |name: &str, column_type| ColumnDef { name: name.into(), column_type, nullable: false };
    vec![c("id", ColumnType::Int64), c("thread", ColumnType::Int32), c("amount", ColumnType::Float64), c("note", ColumnType::Utf8)]
}

fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("thread", DataType::Int32, false),
        Field::new("amount", DataType::Float64, false),
        Field::new("note", DataType::Utf8, false),
    ]))
}

/// K rows of one thread, ids `thread << 40 | next..`: unique per thread and run position.
fn batch_of(schema: &SchemaRef, thread: usize, first: u64, rows: usize) -> Result<RecordBatch, BenchError> {
    let ids: Vec<i64> = (0..rows as u64).map(|i| ((thread as i64) << 40) | (first + i) as i64).collect();
    let amounts: Vec<f64> = ids.iter().map(|id| (*id % 100_000) as f64 / 100.0).collect();
    let notes: Vec<String> = ids.iter().map(|id| format!("note-{:011}", id % 100_000_000_000)).collect();
    let columns: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from(ids)),
        Arc::new(Int32Array::from(vec![thread as i32; rows])),
        Arc::new(Float64Array::from(amounts)),
        Arc::new(StringArray::from(notes)),
    ];
    Ok(RecordBatch::try_new(schema.clone(), columns)?)
}

fn validate(options: &InsertsOptions) -> Result<(), BenchError> {
    if !(1..=THREADS_MAX).contains(&options.threads) {
        return Err(BenchError::InvalidOption(format!("--threads {}: use 1 to {THREADS_MAX}", options.threads)));
    }
    if !(1..=ROWS_PER_COMMIT_MAX).contains(&options.rows_per_commit) {
        return Err(BenchError::InvalidOption(format!("--rows-per-commit {}: use 1 to {ROWS_PER_COMMIT_MAX}", options.rows_per_commit)));
    }
    if !(options.seconds > 0.0 && options.seconds <= SECONDS_MAX) {
        return Err(BenchError::InvalidOption(format!("--seconds {}: use more than 0 and at most {SECONDS_MAX}", options.seconds)));
    }
    Ok(())
}

/// Opens (or makes, when `db` does not exist) the database as its writer and the table.
fn open(db: &Path) -> Result<(WritePath, bool, u64), BenchError> {
    let created = !db.exists();
    if created {
        init_database(db, &InitOptions::default())?;
    }
    let wp = WritePath::open_writer(db, WRITER_NAME)?;
    let catalog = wp.catalog()?;
    let before = match catalog.tables.get(TABLE_NAME) {
        Some(t) => {
            let want = columns();
            let same = t.columns.len() == want.len()
                && t.columns.iter().zip(&want).all(|(a, b)| a.name == b.name && a.column_type == b.column_type && a.nullable == b.nullable);
            if !same {
                return Err(BenchError::InvalidOption(format!(
                    "table {TABLE_NAME} in {} has other columns than the bench's (id BIGINT, thread INT, amount DOUBLE, note VARCHAR, all NOT NULL): drop it or use another database",
                    db.display()
                )));
            }
            t.row_count + wp.delta(TABLE_NAME).map(|d| d.row_count()).unwrap_or(0)
        }
        None => {
            wp.create_table(NewTable { name: TABLE_NAME.into(), columns: columns(), partition_count: None, partition_by: Some("id".into()), if_not_exists: false, indexes: Vec::new() })?;
            0
        }
    };
    Ok((wp, created, before))
}

struct ThreadResult {
    rows: u64,
    commits: u64,
    latency: LatencyHistogram,
}

/// Runs the bench; the rows stay in the table (durable, and readable by SQL afterwards).
pub fn run(db: &Path, options: &InsertsOptions) -> Result<InsertsReport, BenchError> {
    validate(options)?;
    let (wp, database_created, table_rows_before) = open(db)?;
    let schema = schema();
    let duration = Duration::from_secs_f64(options.seconds);
    let barrier = Barrier::new(options.threads + 1);
    let wal_before = wp.wal_stats().unwrap_or_default();
    let (results, elapsed_s, cpu) = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..options.threads)
            .map(|thread| {
                let (wp, schema, barrier) = (&wp, &schema, &barrier);
                scope.spawn(move || -> Result<ThreadResult, BenchError> {
                    // Prepared (and the histogram, ~100 KB zeroed) before the start line:
                    // the run's CPU time counts commits only.
                    let prepared = wp.prepare_insert(TABLE_NAME);
                    let mut r = ThreadResult { rows: 0, commits: 0, latency: LatencyHistogram::new() };
                    barrier.wait();
                    let mut prepared = prepared?;
                    let started = Instant::now();
                    while started.elapsed() < duration {
                        let batch = batch_of(schema, thread, r.rows, options.rows_per_commit)?;
                        let t0 = Instant::now();
                        r.rows += prepared.insert(&batch)?;
                        r.latency.record(t0.elapsed().as_nanos() as u64);
                        r.commits += 1;
                    }
                    Ok(r)
                })
            })
            .collect();
        barrier.wait();
        let cpu0 = CpuTime::now();
        let t0 = Instant::now();
        let results: Vec<_> = handles.into_iter().map(|h| h.join().map_err(|_| BenchError::ThreadPanicked("an insert thread")).and_then(|r| r)).collect();
        (results, t0.elapsed().as_secs_f64(), CpuTime::now().since(&cpu0))
    });
    let wal_after = wp.wal_stats().unwrap_or_default();
    let mut rows = 0u64;
    let mut commits = 0u64;
    let mut latency = LatencyHistogram::new();
    let mut first_error = None;
    for r in results {
        match r {
            Ok(r) => {
                rows += r.rows;
                commits += r.commits;
                latency.merge(&r.latency);
            }
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    // Stop the log writer whatever happened: acknowledged rows are durable already.
    let closed = wp.close();
    if let Some(e) = first_error {
        return Err(e);
    }
    closed?;
    let log_flushes = wal_after.flushes_count.saturating_sub(wal_before.flushes_count);
    let log_commits = wal_after.commits_count.saturating_sub(wal_before.commits_count);
    let summary = latency.summary();
    let cpu_s = cpu.total_ns() as f64 / 1e9;
    let per = |n: u64| if n == 0 { 0.0 } else { cpu.total_ns() as f64 / 1000.0 / n as f64 };
    Ok(InsertsReport {
        db: db.to_path_buf(),
        table: TABLE_NAME.into(),
        api: "embedded: WritePath::prepare_insert, one insert(batch) = one durable transaction (the commit SQL INSERT uses)".into(),
        threads: options.threads,
        rows_per_commit: options.rows_per_commit,
        elapsed_s,
        rows_committed: rows,
        commits,
        rows_per_s: rows as f64 / elapsed_s,
        commits_per_s: commits as f64 / elapsed_s,
        log_flushes,
        commits_per_flush: if log_flushes == 0 { 0.0 } else { log_commits as f64 / log_flushes as f64 },
        commit_latency_us: LatencyUs { p50: summary.p50, p99: summary.p99, max: summary.max },
        cpu_s,
        cpu_us_per_row: per(rows),
        cpu_us_per_commit: per(commits),
        table_rows_before,
        database_created,
    })
}
