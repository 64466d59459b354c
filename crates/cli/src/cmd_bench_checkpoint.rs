//! `flashscan bench checkpoint DB --scan-db SDB [--scan-table T] [--dirty 1G]
//! [--max-async-io 1,8,32,255] [--pace off,on] [--rounds N] [--json]`: seed 003's
//! experiment — a cold scan alone, then beside a checkpoint, per cap. The driver is
//! `flashscan_bench::checkpoint`; this file parses and prints.

use std::path::PathBuf;

use flashscan_bench::checkpoint::{run, CheckpointBenchOptions, CheckpointTrial};
use flashscan_exec::ScanOptions;
use flashscan_workbench::size::parse_size_bytes;

use crate::exit::{bad_input, bench_error};

#[derive(clap::Args)]
pub struct BenchCheckpointArgs {
    /// The database the checkpoint writes (made here with `flashscan init` if missing); the
    /// bench drops and makes its own table `ckpt_bench` in it.
    pub db: PathBuf,
    /// The database holding the table to scan (e.g. `flashscan load DIR --sf 1 --tables lineitem`).
    #[arg(long, value_name = "DIR")]
    pub scan_db: PathBuf,
    #[arg(long, default_value = "lineitem")]
    pub scan_table: String,
    /// Built-in query the scan runs (count, sum4, ...).
    #[arg(long, default_value = "count")]
    pub scan_query: String,
    /// Committed rows to checkpoint per trial (delta bytes).
    #[arg(long, default_value = "1G")]
    pub dirty: String,
    /// Caps to measure, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1,8,32,255")]
    pub max_async_io: Vec<usize>,
    /// Pacing settings to measure: off, on, or both (comma-separated).
    #[arg(long, value_delimiter = ',', default_value = "off,on")]
    pub pace: Vec<String>,
    #[arg(long, default_value_t = 5)]
    pub rounds: usize,
    /// Seconds the scan runs before each window opens.
    #[arg(long, default_value_t = 0.5)]
    pub warmup_seconds: f64,
    /// Length of the scan-alone window.
    #[arg(long, default_value_t = 3.0)]
    pub solo_seconds: f64,
    /// Do not drop the page cache before each trial (no root needed; scans use O_DIRECT).
    #[arg(long)]
    pub no_drop_caches: bool,
    /// Scan worker threads (default: one per core).
    #[arg(long)]
    pub threads: Option<u32>,
    #[arg(long)]
    pub json: bool,
}

fn line(t: &CheckpointTrial) -> String {
    format!(
        "round {} cap {:>4} pace {:<3}: scan {:>6.0} MB/s alone, {:>6.0} during ({:>3.0} %); checkpoint {:.2} s ({:.0} MB/s), {} writes of {:.0} KB, max outstanding {}, {} paced, {}",
        t.round,
        t.max_async_io,
        if t.pace { "on" } else { "off" },
        t.scan_solo_mb_per_s,
        t.scan_during_mb_per_s,
        t.scan_kept_ratio * 100.0,
        t.checkpoint_s,
        t.checkpoint_mb_per_s,
        t.writes,
        t.avg_write_bytes / 1024.0,
        t.max_outstanding_writes,
        t.writes_paced,
        t.write_mode,
    )
}

pub fn run_bench(args: BenchCheckpointArgs) -> anyhow::Result<()> {
    let dirty_bytes = parse_size_bytes(&args.dirty).map_err(|e| bad_input(format!("--dirty {e}")))?;
    let mut pace = Vec::new();
    for p in &args.pace {
        match p.as_str() {
            "on" => pace.push(true),
            "off" => pace.push(false),
            other => return Err(bad_input(format!("--pace {other}: use on, off, or off,on"))),
        }
    }
    let mut scan = ScanOptions::default();
    // The scan beside the checkpoint keeps the fixed depth its published figures were
    // measured at: the checkpoint paces its writes on the scan's reads in flight.
    scan.auto_depth = false;
    scan.queue_depth = flashscan_exec::limits::SCAN_QUEUE_DEPTH_DEFAULT;
    if let Some(t) = args.threads {
        scan.thread_count = t;
    }
    let options = CheckpointBenchOptions {
        db: args.db,
        scan_db: args.scan_db,
        scan_table: args.scan_table,
        scan_query: args.scan_query,
        scan,
        dirty_bytes,
        max_async_io: args.max_async_io,
        pace,
        rounds: args.rounds,
        warmup_s: args.warmup_seconds,
        solo_window_s: args.solo_seconds,
        drop_caches: !args.no_drop_caches,
    };
    let json = args.json;
    let report = run(&options, &mut |t| eprintln!("{}", line(t))).map_err(bench_error)?;
    if json {
        return crate::print_json(&report);
    }
    println!("medians over rounds; scan {} {} ({} threads); {:.0} MB dirty per checkpoint", report.scan_table, report.scan_query, report.scan_threads, report.dirty_bytes as f64 / 1e6);
    println!("cap   pace  rounds  scan alone MB/s  scan during MB/s  kept   checkpoint s  ckpt MB/s  writes  avg write KB  max outstanding");
    for s in &report.summary {
        println!(
            "{:>4}  {:<4}  {:>6}  {:>15.0}  {:>16.0}  {:>4.0} %  {:>12.2}  {:>9.0}  {:>6.0}  {:>12.0}  {:>15.0}",
            s.max_async_io,
            if s.pace { "on" } else { "off" },
            s.rounds,
            s.scan_solo_mb_per_s,
            s.scan_during_mb_per_s,
            s.scan_kept_ratio * 100.0,
            s.checkpoint_s,
            s.checkpoint_mb_per_s,
            s.writes,
            s.avg_write_bytes / 1024.0,
            s.max_outstanding_writes
        );
    }
    Ok(())
}
