//! `flashscan bench inserts DB --threads N [--statements-per-commit K] [--rows-per-statement R]
//! [--durability strict|delayed] [--primary-key] [--seconds S]`: N threads, each running
//! one-row (R-row) INSERT statements, K per transaction, for S seconds through the
//! embedded write path. The three modes of seed 001's experiment (issue 31):
//! (a) `--durability delayed`: one row per commit, acknowledged before its flush;
//! (b) `--statements-per-commit 1000`: a transaction of 1,000 one-row statements, durable;
//! (c) the defaults: one row per durable commit, the threads filling each flush.
//! `--rows-per-commit K` (the bench before issue 31) is `--rows-per-statement K`.
//!
//! The API measured is `WritePath::prepare_insert` (flashscan-write): the table is looked up
//! and the page encoder made once per thread — a prepared INSERT, parsed and planned once,
//! or the article's stored procedure — and each `execute(batch)` is one statement of the
//! thread's open transaction (validated as a load validates, checked against the PRIMARY
//! KEY with `--primary-key`), each `commit()` one transaction through the very commit SQL
//! INSERT uses (every row logged, one commit record, durable — or, delayed, handed to the
//! log writer — before it returns, then visible). What SQL adds on top, parsing and
//! DataFusion planning per statement, is not measured here; bench/inserts measures it
//! over the wire with pgbench.
//!
//! The table is the article's (the Randal/Kejser insert benchmark): `c1 BIGINT` (each
//! thread appends to its own key range, `session × 10^10 + i`), `c2 TIMESTAMP`, `c3` 111
//! characters (CHAR(111)), `c4 INT`, `c5 INT`, `c6 BIGINT`, all NOT NULL: `bench_inserts`
//! as a plain heap, `bench_inserts_pk` with `c1` as PRIMARY KEY.
//!
//! Figures: rows and commits per second of wall time; commits per log flush from the log
//! writer's own counters (before/after); commit latency (the `commit` call) p50/p99 from a
//! per-thread HdrHistogram; CPU µs per row from the process's CPU time (getrusage: the
//! committers, the log writer and everything else in the process, building each statement's
//! batch included); with delayed durability the longest an acknowledged commit waited for
//! its flush (the log's own measure, `WalStats::delayed_unflushed_us_max`).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use arrow::array::{ArrayRef, Int32Array, Int64Array, StringArray, TimestampMicrosecondArray};
use arrow::datatypes::{Field, Schema, SchemaRef};
use arrow::record_batch::RecordBatch;
use flashscan_measure::{CpuTime, LatencyHistogram};
use flashscan_storage::column::TemporalUnit;
use flashscan_storage::{ColumnDef, ColumnType, KeyIndexDef};
use flashscan_write::{init_database, Durability, InitOptions, NewTable, WritePath};
use serde::Serialize;

use crate::error::BenchError;

/// The tables the bench writes, created if missing (the module comment has their shape;
/// the same in bench/inserts for SQLite, DuckDB and PostgreSQL).
pub const TABLE_NAME: &str = "bench_inserts";
pub const TABLE_NAME_PRIMARY_KEY: &str = "bench_inserts_pk";
/// The article's key ranges: session `s` appends `s × 10^10 + i`.
pub const KEY_RANGE_PER_SESSION: i64 = 10_000_000_000;
/// `c3`, CHAR(111): every row carries 111 characters.
pub const C3_BYTES: usize = 111;
/// Threads at most: each is an OS thread with its own histogram; 1024 is far past the
/// point where 2-64 cores stop gaining and keeps a typo (64000) from forking the machine.
pub const THREADS_MAX: usize = 1024;
/// Rows per commit at most (statements × rows per statement): a transaction's rows are
/// held in memory until their commit.
pub const ROWS_PER_COMMIT_MAX: usize = 100_000;
/// Longest run: an hour; a bench that runs longer is a mistake in the flag.
pub const SECONDS_MAX: f64 = 3600.0;
const WRITER_NAME: &str = "flashscan bench inserts";

#[derive(Debug, Clone)]
pub struct InsertsOptions {
    pub threads: usize,
    /// INSERT statements per transaction (1: one commit per statement).
    pub statements_per_commit: usize,
    /// Rows each statement carries (1: singleton inserts).
    pub rows_per_statement: usize,
    pub durability: Durability,
    /// `c1` as PRIMARY KEY (`bench_inserts_pk`, checked by every statement) or a plain heap.
    pub primary_key: bool,
    pub seconds: f64,
}

impl Default for InsertsOptions {
    fn default() -> Self {
        InsertsOptions { threads: 1, statements_per_commit: 1, rows_per_statement: 1, durability: Durability::Strict, primary_key: false, seconds: 10.0 }
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
    pub statements_per_commit: usize,
    pub rows_per_statement: usize,
    /// Rows per transaction: statements × rows per statement.
    pub rows_per_commit: usize,
    /// `strict` (acknowledged after the flush) or `delayed` (before it).
    pub durability: String,
    pub primary_key: bool,
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
    /// Delayed durability only: the longest an acknowledged commit waited for its flush to
    /// be durable (ms; an upper bound, see `WalStats::delayed_unflushed_us_max`): what a
    /// crash at the worst moment would have lost.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_unflushed_ms: Option<f64>,
    /// The longest single log flush of the run (its writes and fdatasync, ms) and the mean:
    /// the device's part of a commit's wait, and of `max_unflushed_ms`.
    pub log_flush_ms_max: f64,
    pub log_flush_ms_mean: f64,
    /// Log segments the run created (a new 16 MiB segment on the flush path lengthens that
    /// flush).
    pub log_segments_created: u64,
    /// Rows in the table before this run (a reused table).
    pub table_rows_before: u64,
    /// Whether `flashscan init` had to make the database first.
    pub database_created: bool,
}

fn columns() -> Vec<ColumnDef> {
    let c = |name: &str, column_type| ColumnDef { name: name.into(), column_type, nullable: false };
    vec![
        c("c1", ColumnType::Int64),
        c("c2", ColumnType::Timestamp { unit: TemporalUnit::Microsecond, with_time_zone: false }),
        c("c3", ColumnType::Utf8),
        c("c4", ColumnType::Int32),
        c("c5", ColumnType::Int32),
        c("c6", ColumnType::Int64),
    ]
}

fn schema() -> SchemaRef {
    Arc::new(Schema::new(columns().iter().map(|c| Field::new(&c.name, c.column_type.arrow_type(), false)).collect::<Vec<_>>()))
}

/// R rows of one session, keys `session × 10^10 + first ..`: the article's key ranges.
/// `c2` is the key's moment (µs after 2025-01-01), `c3` the same 111 characters for every
/// row, `c4`..`c6` derived from the key (the article's procedure fills them with constants
/// and the key; only the bytes per row matter to the insert path).
fn batch_of(schema: &SchemaRef, c3: &str, session: i64, first: i64, rows: usize) -> Result<RecordBatch, BenchError> {
    const EPOCH_2025_US: i64 = 1_735_689_600_000_000;
    let keys: Vec<i64> = (0..rows as i64).map(|i| session * KEY_RANGE_PER_SESSION + first + i).collect();
    let columns: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from(keys.clone())),
        Arc::new(TimestampMicrosecondArray::from_iter_values(keys.iter().map(|k| EPOCH_2025_US + k % KEY_RANGE_PER_SESSION))),
        Arc::new(StringArray::from_iter_values(std::iter::repeat_n(c3, rows))),
        Arc::new(Int32Array::from_iter_values(std::iter::repeat_n(session as i32, rows))),
        Arc::new(Int32Array::from_iter_values(keys.iter().map(|k| (k % 1000) as i32))),
        Arc::new(Int64Array::from(keys)),
    ];
    Ok(RecordBatch::try_new(schema.clone(), columns)?)
}

fn validate(options: &InsertsOptions) -> Result<(), BenchError> {
    if !(1..=THREADS_MAX).contains(&options.threads) {
        return Err(BenchError::InvalidOption(format!("--threads {}: use 1 to {THREADS_MAX}", options.threads)));
    }
    if options.statements_per_commit == 0 || options.rows_per_statement == 0 || options.statements_per_commit.saturating_mul(options.rows_per_statement) > ROWS_PER_COMMIT_MAX {
        return Err(BenchError::InvalidOption(format!(
            "--statements-per-commit {} × --rows-per-statement {}: each at least 1, at most {ROWS_PER_COMMIT_MAX} rows per commit",
            options.statements_per_commit, options.rows_per_statement
        )));
    }
    if !(options.seconds > 0.0 && options.seconds <= SECONDS_MAX) {
        return Err(BenchError::InvalidOption(format!("--seconds {}: use more than 0 and at most {SECONDS_MAX}", options.seconds)));
    }
    Ok(())
}

/// Opens (or makes, when `db` does not exist) the database as its writer and the table.
fn open(db: &Path, table: &str, primary_key: bool) -> Result<(WritePath, bool, u64), BenchError> {
    let created = !db.exists();
    if created {
        init_database(db, &InitOptions::default())?;
    }
    let wp = WritePath::open_writer(db, WRITER_NAME)?;
    let catalog = wp.catalog()?;
    let indexes = if primary_key { vec![KeyIndexDef { name: format!("{table}_pkey"), columns: vec!["c1".into()], unique: true, primary: true, constraint: true }] } else { Vec::new() };
    let before = match catalog.tables.get(table) {
        Some(t) => {
            let want = columns();
            let same = t.columns.len() == want.len()
                && t.columns.iter().zip(&want).all(|(a, b)| a.name == b.name && a.column_type == b.column_type && a.nullable == b.nullable)
                && t.indexes.iter().any(|i| i.primary) == primary_key;
            if !same {
                return Err(BenchError::InvalidOption(format!(
                    "table {table} in {} has other columns than the bench's (c1 BIGINT{}, c2 TIMESTAMP, c3 VARCHAR, c4 INT, c5 INT, c6 BIGINT, all NOT NULL): drop it or use another database",
                    db.display(),
                    if primary_key { " PRIMARY KEY" } else { ", no primary key" }
                )));
            }
            t.row_count + wp.delta(table).map(|d| d.row_count()).unwrap_or(0)
        }
        None => {
            wp.create_table(NewTable { name: table.into(), columns: columns(), partition_count: None, partition_by: Some("c1".into()), if_not_exists: false, indexes, ..Default::default() })?;
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
    let table = if options.primary_key { TABLE_NAME_PRIMARY_KEY } else { TABLE_NAME };
    let (wp, database_created, table_rows_before) = open(db, table, options.primary_key)?;
    let schema = schema();
    let c3: String = "c3-".chars().chain(std::iter::repeat('x')).take(C3_BYTES).collect();
    // Keys go on after the rows already in the table: a reused table's earlier runs used
    // fewer than `table_rows_before` keys of each session's range.
    let first_key = table_rows_before as i64;
    let duration = Duration::from_secs_f64(options.seconds);
    let barrier = Barrier::new(options.threads + 1);
    let wal_before = wp.wal_stats().unwrap_or_default();
    let (results, elapsed_s, cpu) = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..options.threads)
            .map(|thread| {
                let (wp, schema, barrier, c3) = (&wp, &schema, &barrier, c3.as_str());
                let session = thread as i64 + 1;
                scope.spawn(move || -> Result<ThreadResult, BenchError> {
                    // Prepared (and the histogram, ~100 KB zeroed) before the start line:
                    // the run's CPU time counts commits only.
                    let prepared = wp.prepare_insert(table);
                    let mut r = ThreadResult { rows: 0, commits: 0, latency: LatencyHistogram::new() };
                    barrier.wait();
                    let mut prepared = prepared?;
                    prepared.set_durability(options.durability);
                    let mut next_key = first_key;
                    let started = Instant::now();
                    while started.elapsed() < duration {
                        for _ in 0..options.statements_per_commit {
                            let batch = batch_of(schema, c3, session, next_key, options.rows_per_statement)?;
                            next_key += prepared.execute(&batch)? as i64;
                        }
                        let t0 = Instant::now();
                        r.rows += prepared.commit()?;
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
        table: table.into(),
        api: "embedded: WritePath::prepare_insert, execute(batch) = one INSERT statement of the thread's transaction, commit() = one transaction (the commit SQL INSERT uses)".into(),
        threads: options.threads,
        statements_per_commit: options.statements_per_commit,
        rows_per_statement: options.rows_per_statement,
        rows_per_commit: options.statements_per_commit * options.rows_per_statement,
        durability: options.durability.name().into(),
        primary_key: options.primary_key,
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
        max_unflushed_ms: (options.durability == Durability::Delayed).then(|| wal_after.delayed_unflushed_us_max as f64 / 1000.0),
        log_flush_ms_max: wal_after.flush_us_max as f64 / 1000.0,
        log_flush_ms_mean: if log_flushes == 0 { 0.0 } else { wal_after.flush_time_us.saturating_sub(wal_before.flush_time_us) as f64 / 1000.0 / log_flushes as f64 },
        log_segments_created: wal_after.segments_created_count.saturating_sub(wal_before.segments_created_count),
        table_rows_before,
        database_created,
    })
}
