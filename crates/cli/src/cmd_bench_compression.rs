//! `flashscan bench compression DB TABLE [--formats …] [--cold-only|--warm-only]
//! [--csv FILE] [--chart FILE]`: seed 001's comparison of storage formats, measured here.
//! The measuring, the table, the CSV and the chart live in `flashscan_bench::compression`;
//! this file parses flags and prints.

use std::path::PathBuf;

use flashscan_bench::chart::write_compression_chart;
use flashscan_bench::compression::{self, CompressionBenchOptions, CompressionReport, FORMATS};

use crate::cmd_bench::{print_report, ReportOutput, ReportPrinters};
use flashscan_exec::{BuiltinQuery, CacheMode, ScanOptions};

use crate::exit::{bad_input, bench_error, exec_error};

#[derive(clap::Args)]
pub struct BenchCompressionArgs {
    /// Database directory (made by `flashscan load`).
    pub db: PathBuf,
    /// The table to measure; its copies TABLE__FORMAT are made beside it and kept.
    pub table: String,
    /// Formats, comma separated: none,row,page,columnstore,columnstore_archive.
    #[arg(long, value_delimiter = ',', default_value = "none,row,page,columnstore,columnstore_archive")]
    pub formats: Vec<String>,
    /// Built-in queries, comma separated (count11 and sum4 as in the article; q1, count, needle too).
    #[arg(long, value_delimiter = ',', default_value = "count11,sum4")]
    pub queries: Vec<String>,
    /// Cold runs only (page cache dropped, O_DIRECT).
    #[arg(long, conflicts_with = "warm_only")]
    pub cold_only: bool,
    /// Warm runs only (data in the page cache).
    #[arg(long)]
    pub warm_only: bool,
    /// Rounds; figures are medians. Formats are interleaved within each round.
    #[arg(long, default_value_t = 3)]
    pub rounds: u32,
    /// Rebuild the format copies even if they exist.
    #[arg(long)]
    pub rebuild: bool,
    /// Column store rows per row group (default 1048576).
    #[arg(long, value_name = "ROWS")]
    pub row_group_rows: Option<usize>,
    #[command(flatten)]
    pub output: ReportOutput,
}

pub fn run(args: BenchCompressionArgs) -> anyhow::Result<()> {
    if !args.db.is_dir() {
        return Err(bad_input(format!("{} is not a directory: give the database directory made by `flashscan load`", args.db.display())));
    }
    for f in &args.formats {
        if !FORMATS.contains(&f.as_str()) {
            return Err(bad_input(format!("--formats {f:?}: choose from {}", FORMATS.join(", "))));
        }
    }
    let queries = args.queries.iter().map(|q| BuiltinQuery::parse(q)).collect::<Result<Vec<_>, _>>().map_err(exec_error)?;
    let cache_modes = if args.cold_only {
        vec![CacheMode::Cold]
    } else if args.warm_only {
        vec![CacheMode::Warm]
    } else {
        vec![CacheMode::Cold, CacheMode::Warm]
    };
    let options = CompressionBenchOptions {
        formats: args.formats.clone(),
        queries,
        cache_modes,
        rounds: args.rounds,
        scan: ScanOptions::default(),
        rebuild: args.rebuild,
        row_group_rows: args.row_group_rows,
    };
    let report = compression::run(&args.db, &args.table, &options, &mut |m| eprintln!("{m}")).map_err(bench_error)?;
    let printers = ReportPrinters { text: CompressionReport::to_text, csv: CompressionReport::to_csv, chart: write_compression_chart };
    print_report(&report, &args.output, printers)
}
