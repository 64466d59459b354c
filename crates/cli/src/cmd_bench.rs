//! `flashscan bench …`: the articles' measurement tables, run on this machine.

use std::path::{Path, PathBuf};

use flashscan_bench::BenchError;

use crate::exit::{bad_input, bench_error};

#[derive(clap::Subcommand)]
pub enum BenchCommand {
    /// The CPU cost of I/O (seed 002): µs per page for scans at 1..323 rows per page, page
    /// eviction, and key lookups at 10..10,000 rows per query, sync vs prefetch.
    Costs(crate::cmd_bench_costs::BenchCostsArgs),
    /// Seed 001's table: size, and COUNT of 11 columns / SUM of 4 cold and warm, for the
    /// heap, row, page, columnstore and columnstore_archive formats of one table.
    Compression(crate::cmd_bench_compression::BenchCompressionArgs),
    /// Singleton (or K-row) inserts from N threads for S seconds through the embedded write
    /// path: rows/s, commits per log flush, commit latency, CPU µs per row.
    Inserts(crate::cmd_bench_inserts::BenchInsertsArgs),
    /// Seed 003's experiment: a cold scan alone, then beside a checkpoint of >= 1 GB at
    /// --max-async-io 1, 8, 32, 255 (pacing off and on): scan MB/s kept, checkpoint time.
    Checkpoint(crate::cmd_bench_checkpoint::BenchCheckpointArgs),
}

pub fn run(command: BenchCommand) -> anyhow::Result<()> {
    match command {
        BenchCommand::Costs(args) => crate::cmd_bench_costs::run_bench_costs(args),
        BenchCommand::Compression(args) => crate::cmd_bench_compression::run(args),
        BenchCommand::Inserts(args) => crate::cmd_bench_inserts::run(args),
        BenchCommand::Checkpoint(args) => crate::cmd_bench_checkpoint::run_bench(args),
    }
}

/// The printers of one benchmark's report (its text table, its CSV, its SVG chart), all
/// reading the same report struct.
pub struct ReportPrinters<R> {
    pub text: fn(&R) -> String,
    pub csv: fn(&R) -> String,
    pub chart: fn(&R, &Path) -> Result<(), BenchError>,
}

/// Where a report goes: the output flags of every `bench` command with a table.
#[derive(clap::Args)]
pub struct ReportOutput {
    /// Also write the results as CSV.
    #[arg(long, value_name = "FILE")]
    pub csv: Option<PathBuf>,
    /// Also write an SVG chart.
    #[arg(long, value_name = "FILE")]
    pub chart: Option<PathBuf>,
    /// Print the results as JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// Prints `report` on stdout (JSON, or its text table) and writes its CSV and chart where
/// the flags ask: the one output step of every `bench` command with a table.
pub fn print_report<R: serde::Serialize>(report: &R, output: &ReportOutput, printers: ReportPrinters<R>) -> anyhow::Result<()> {
    if output.json {
        crate::print_json(report)?;
    } else {
        print!("{}", (printers.text)(report));
    }
    if let Some(path) = &output.csv {
        std::fs::write(path, (printers.csv)(report)).map_err(|e| bad_input(format!("cannot write {}: {e}", path.display())))?;
    }
    if let Some(path) = &output.chart {
        (printers.chart)(report, path).map_err(bench_error)?;
    }
    Ok(())
}
