//! `flashscan bench inserts DB [--threads N] [--rows-per-commit K] [--seconds S] [--json]`:
//! the measuring lives in `flashscan_bench::inserts`; this file parses flags and prints.

use std::path::PathBuf;

use flashscan_bench::inserts::{self, InsertsOptions};

use crate::exit::bench_error;

#[derive(clap::Args)]
pub struct BenchInsertsArgs {
    /// Database directory (made by `flashscan init`; made here when it does not exist).
    pub db: PathBuf,
    /// Threads committing at once, each with its own prepared insert.
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
    /// Rows per transaction (1 = singleton inserts).
    #[arg(long, default_value_t = 1)]
    pub rows_per_commit: usize,
    /// How long the threads insert.
    #[arg(long, default_value_t = 10.0)]
    pub seconds: f64,
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: BenchInsertsArgs) -> anyhow::Result<()> {
    let options = InsertsOptions { threads: args.threads, rows_per_commit: args.rows_per_commit, seconds: args.seconds };
    let r = inserts::run(&args.db, &options).map_err(bench_error)?;
    if args.json {
        return crate::print_json(&r);
    }
    if r.database_created {
        println!("made database {} (flashscan init)", r.db.display());
    }
    println!("bench inserts: {} threads, {} row(s) per commit, {:.1} s, table {} ({} rows before)", r.threads, r.rows_per_commit, r.elapsed_s, r.table, r.table_rows_before);
    println!("  rows committed     {:>12}  ({:.0} rows/s)", r.rows_committed, r.rows_per_s);
    println!("  commits            {:>12}  ({:.0} commits/s)", r.commits, r.commits_per_s);
    println!("  log flushes        {:>12}  ({:.2} commits per flush)", r.log_flushes, r.commits_per_flush);
    println!("  commit latency     p50 {:.0} µs, p99 {:.0} µs, max {:.0} µs", r.commit_latency_us.p50, r.commit_latency_us.p99, r.commit_latency_us.max);
    println!("  CPU                {:.2} s: {:.1} µs per row, {:.1} µs per commit", r.cpu_s, r.cpu_us_per_row, r.cpu_us_per_commit);
    println!("  api                {}", r.api);
    Ok(())
}
