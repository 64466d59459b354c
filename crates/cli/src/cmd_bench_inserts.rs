//! `flashscan bench inserts DB --threads N [--statements-per-commit K] [--rows-per-statement R]
//! [--durability strict|delayed] [--primary-key] [--seconds S] [--json]`: the measuring lives
//! in `flashscan_bench::inserts`; this file parses flags and prints.

use std::path::PathBuf;

use flashscan_bench::inserts::{self, InsertsOptions};
use flashscan_write::Durability;

use crate::exit::bench_error;

#[derive(clap::Args)]
pub struct BenchInsertsArgs {
    /// Database directory (made by `flashscan init`; made here when it does not exist).
    pub db: PathBuf,
    /// Threads committing at once, each with its own prepared insert.
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
    /// INSERT statements per transaction (1,000: the lineage benchmark's mode).
    #[arg(long, default_value_t = 1)]
    pub statements_per_commit: usize,
    /// Rows each INSERT statement carries (1 = singleton inserts).
    #[arg(long, default_value_t = 1)]
    pub rows_per_statement: usize,
    /// Rows per transaction as one statement: the same as `--rows-per-statement K` (kept so
    /// runs before issue 31 can be repeated).
    #[arg(long, conflicts_with_all = ["statements_per_commit", "rows_per_statement"])]
    pub rows_per_commit: Option<usize>,
    /// `strict`: a commit returns once durable; `delayed`: before its log flush, which
    /// follows within 10 ms or 60 KB of log (what a crash may lose: docs/architecture.md).
    #[arg(long, default_value = "strict")]
    pub durability: String,
    /// c1 as PRIMARY KEY (table bench_inserts_pk, every statement checks the key) instead of
    /// a plain heap (bench_inserts).
    #[arg(long)]
    pub primary_key: bool,
    /// How long the threads insert.
    #[arg(long, default_value_t = 10.0)]
    pub seconds: f64,
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: BenchInsertsArgs) -> anyhow::Result<()> {
    let durability = Durability::from_name(&args.durability)
        .ok_or_else(|| bench_error(flashscan_bench::BenchError::InvalidOption(format!("--durability {}: use strict or delayed", args.durability))))?;
    let options = InsertsOptions {
        threads: args.threads,
        statements_per_commit: args.statements_per_commit,
        rows_per_statement: args.rows_per_commit.unwrap_or(args.rows_per_statement),
        durability,
        primary_key: args.primary_key,
        seconds: args.seconds,
    };
    let r = inserts::run(&args.db, &options).map_err(bench_error)?;
    if args.json {
        return crate::print_json(&r);
    }
    if r.database_created {
        println!("made database {} (flashscan init)", r.db.display());
    }
    println!(
        "bench inserts: {} threads, {} statement(s) of {} row(s) per commit, {} durability, {:.1} s, table {} ({} rows before)",
        r.threads, r.statements_per_commit, r.rows_per_statement, r.durability, r.elapsed_s, r.table, r.table_rows_before
    );
    println!("  rows committed     {:>12}  ({:.0} rows/s)", r.rows_committed, r.rows_per_s);
    println!("  commits            {:>12}  ({:.0} commits/s)", r.commits, r.commits_per_s);
    println!("  log flushes        {:>12}  ({:.2} commits per flush)", r.log_flushes, r.commits_per_flush);
    println!("  flush time         mean {:.2} ms, max {:.2} ms; {} log segment(s) created", r.log_flush_ms_mean, r.log_flush_ms_max, r.log_segments_created);
    println!("  commit latency     p50 {:.0} µs, p99 {:.0} µs, max {:.0} µs", r.commit_latency_us.p50, r.commit_latency_us.p99, r.commit_latency_us.max);
    if let Some(ms) = r.max_unflushed_ms {
        println!("  longest unflushed  {ms:.1} ms (an acknowledged commit waiting for its flush)");
    }
    println!("  CPU                {:.2} s: {:.1} µs per row, {:.1} µs per commit", r.cpu_s, r.cpu_us_per_row, r.cpu_us_per_commit);
    println!("  api                {}", r.api);
    Ok(())
}
