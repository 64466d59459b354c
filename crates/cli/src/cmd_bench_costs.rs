//! `flashscan bench costs DB [--csv FILE] [--chart FILE]`: the CPU cost structure of
//! database I/O on this machine — scans of 1…323 rows per page, key lookups of 10…10,000
//! rows per query, in memory and cold, 8 KB and 64 KB reads, sync and prefetching. The
//! synthetic tables live in DB/bench_costs and are reused by later runs. The measuring,
//! the table, the CSV and the chart live in `flashscan_bench::costs`; this file parses flags
//! and prints.

use std::path::PathBuf;

use flashscan_bench::chart::write_costs_chart;
use flashscan_bench::costs::{self, CostReport, CostsOptions};

use crate::cmd_bench::{print_report, ReportOutput, ReportPrinters};

use crate::exit::{bad_input, bench_error};

#[derive(clap::Args)]
pub struct BenchCostsArgs {
    /// Database directory (the bench writes its own tables under DB/bench_costs).
    pub db: PathBuf,
    /// Pages of each scan table.
    #[arg(long, default_value_t = 4096)]
    pub scan_pages: u64,
    /// Rows of the lookup table (20 per page).
    #[arg(long, default_value_t = 1_000_000)]
    pub lookup_rows: u64,
    /// Rows each lookup configuration reads (queries repeat up to this).
    #[arg(long, default_value_t = 20_000)]
    pub lookup_rows_target: u64,
    /// Reads in flight when prefetching.
    #[arg(long, default_value_t = 64)]
    pub depth: u32,
    #[command(flatten)]
    pub output: ReportOutput,
}

pub fn run_bench_costs(args: BenchCostsArgs) -> anyhow::Result<()> {
    std::fs::create_dir_all(&args.db).map_err(|e| bad_input(format!("cannot create {}: {e}", args.db.display())))?;
    let pool_bytes = ((args.lookup_rows / 20 + 4096) * 8192 * 5 / 4).max(64 << 20);
    let options = CostsOptions { scan_pages: args.scan_pages, lookup_rows: args.lookup_rows, lookup_rows_target: args.lookup_rows_target, depth: args.depth, pool_bytes };
    let report = costs::run(&args.db, &options, &mut |m| eprintln!("{m}")).map_err(bench_error)?;
    let printers = ReportPrinters { text: CostReport::to_text, csv: CostReport::to_csv, chart: write_costs_chart };
    print_report(&report, &args.output, printers)
}
