//! `flashscan scan DB TABLE --query Q`: runs a built-in query at the device's speed and
//! prints its answer and where the time went (a table, or one JSON object with --json).
//! All figures come from `flashscan_exec::ScanReport`; this file only parses and prints.

use std::path::PathBuf;

use comfy_table::{presets::UTF8_FULL_CONDENSED, Cell, CellAlignment, Table};
use flashscan_exec::report_json::report_json;
use flashscan_exec::run::default_thread_count;
use flashscan_exec::{open_source, run_query, BuiltinQuery, CacheMode, ScanOptions, ScanReport};
use flashscan_io::EngineKind;
use flashscan_storage::Database;
use flashscan_workbench::size::parse_size_bytes;

use crate::exit::{bad_input, exec_error};

#[derive(clap::Args)]
pub struct ScanArgs {
    /// Database directory (made by `flashscan load`).
    #[arg(value_name = "DB")]
    pub db: PathBuf,
    /// Table to scan.
    #[arg(value_name = "TABLE")]
    pub table: String,
    /// Built-in query: count, count11, sum4, needle, q1.
    #[arg(long, short = 'q', default_value = "count")]
    pub query: String,
    /// Drop the table's files from the page cache first, then read with O_DIRECT.
    #[arg(long, conflicts_with = "warm")]
    pub cold: bool,
    /// Read through the page cache after one warm-up pass (all data from memory).
    #[arg(long)]
    pub warm: bool,
    /// Read the same files raw before and after the scan; report efficiency and a verdict.
    #[arg(long)]
    pub check: bool,
    /// Size of each read (64K to 8M).
    #[arg(long = "io-size", value_name = "SIZE", default_value = "1M")]
    pub io_size: String,
    /// Reads in flight per worker [default: heap tables find it while scanning (from 32,
    /// doubled while the rate still rises, at most 64); column stores 8].
    #[arg(long, value_name = "N")]
    pub depth: Option<u32>,
    /// Worker threads (default: one per core).
    #[arg(long, value_name = "N")]
    pub threads: Option<u32>,
    /// I/O engine: auto (io_uring, else psync), uring, psync.
    #[arg(long, default_value = "auto")]
    pub engine: String,
    /// For --query needle: the text to look for.
    #[arg(long, value_name = "TEXT")]
    pub needle: Option<String>,
    /// For --query needle: the string column to search.
    #[arg(long = "needle-column", value_name = "COLUMN")]
    pub needle_column: Option<String>,
    /// Print one JSON object instead of tables.
    #[arg(long)]
    pub json: bool,
}

fn parse_query(args: &ScanArgs) -> anyhow::Result<BuiltinQuery> {
    let mut query = BuiltinQuery::parse(&args.query).map_err(exec_error)?;
    if let BuiltinQuery::Needle(spec) = &mut query {
        if let Some(text) = &args.needle {
            if text.is_empty() {
                return Err(bad_input("--needle needs a non-empty text"));
            }
            spec.pattern = text.clone();
        }
        if let Some(column) = &args.needle_column {
            spec.column = column.clone();
        }
    } else if args.needle.is_some() || args.needle_column.is_some() {
        return Err(bad_input("--needle and --needle-column go with --query needle"));
    }
    Ok(query)
}

fn parse_options(args: &ScanArgs) -> anyhow::Result<ScanOptions> {
    let io_size_bytes = parse_size_bytes(&args.io_size).map_err(|e| bad_input(format!("--io-size {e}")))?;
    let engine_kind = match EngineKind::parse(&args.engine) {
        Some(EngineKind::Null) | None => {
            return Err(bad_input(format!("--engine {}: use auto, uring or psync", args.engine)));
        }
        Some(kind) => kind,
    };
    let options = ScanOptions {
        io_size_bytes: usize::try_from(io_size_bytes).map_err(|_| bad_input("--io-size too large"))?,
        queue_depth: args.depth.unwrap_or(flashscan_exec::depth::AUTO_DEPTH_START),
        auto_depth: args.depth.is_none(),
        thread_count: args.threads.unwrap_or_else(default_thread_count),
        cache_mode: if args.cold {
            CacheMode::Cold
        } else if args.warm {
            CacheMode::Warm
        } else {
            CacheMode::Direct
        },
        check: args.check,
        engine_kind,
    };
    options.validate().map_err(exec_error)?;
    Ok(options)
}

pub fn run(args: ScanArgs) -> anyhow::Result<()> {
    let query = parse_query(&args)?;
    let options = parse_options(&args)?;
    if !args.db.is_dir() {
        return Err(bad_input(format!("{} is not a directory: give the database directory made by `flashscan load`", args.db.display())));
    }
    crate::cmd_write::checkpoint_if_unflushed(&args.db, &args.table, "flashscan scan")?;
    let db = Database::open(&args.db).map_err(|e| exec_error(e.into()))?;
    let table = open_source(&db, &args.table).map_err(exec_error)?;
    let report = run_query(table.as_ref(), &query, &options).map_err(exec_error)?;
    if args.json {
        crate::print_json(&report_json(&report))?;
    } else {
        print_report(&report);
    }
    Ok(())
}

fn right(text: String) -> Cell {
    Cell::new(text).set_alignment(CellAlignment::Right)
}

fn print_report(r: &ScanReport) {
    let mut answer = Table::new();
    answer.load_preset(UTF8_FULL_CONDENSED).set_header(r.result.columns.clone());
    for row in &r.result.rows {
        answer.add_row(row.iter().map(|v| right(v.to_string())).collect::<Vec<_>>());
    }
    println!("{}", r.sql);
    println!("{answer}");
    if r.result.rows_total > r.result.rows.len() as u64 {
        println!("{} rows matched; the first {} shown", r.result.rows_total, r.result.rows.len());
    }

    let mut figures = Table::new();
    figures.load_preset(UTF8_FULL_CONDENSED).set_header(vec!["where the time went", "value"]);
    let mut add = |name: &str, value: String| {
        figures.add_row(vec![Cell::new(name), right(value)]);
    };
    add("table / format", format!("{} / {} ({} partitions)", r.table, r.format, r.partitions_count));
    add("cache", format!("{}: {}", r.cache, r.cache_actions.join("; ")));
    add("elapsed", format!("{:.3} s", r.figures.elapsed_s));
    add("rows", format!("{} ({:.1} M rows/s)", r.figures.rows_scanned, r.figures.rows_per_s / 1e6));
    if r.figures.deleted_rows_skipped > 0 {
        // Their bytes count in the MB/s above and bring no row: said, so the rate is not
        // read as useful work (rebuild leaves them behind).
        let read = r.figures.rows_scanned + r.figures.deleted_rows_skipped;
        add(
            "deleted rows",
            format!(
                "{} read and skipped ({:.0} % of the rows read; `flashscan rebuild` reclaims them)",
                r.figures.deleted_rows_skipped,
                r.figures.deleted_rows_skipped as f64 * 100.0 / read as f64
            ),
        );
    }
    add("pages / bytes", format!("{} pages, {:.1} MB", r.figures.pages_read, r.figures.bytes_read as f64 / 1e6));
    add("scan rate", format!("{:.0} MB/s", r.figures.mb_per_s));
    add(
        "read I/Os",
        format!("{} of {:.0} KiB avg ({} x {} KiB per worker, {} engine)", r.figures.read_ios_count, r.figures.read_io_size_bytes_avg / 1024.0, r.queue_depth, r.io_size_bytes / 1024, r.engine),
    );
    if !r.queue_depth_steps.is_empty() {
        let steps: Vec<String> = r.queue_depth_steps.iter().map(|s| format!("{} → {:.0} MB/s", s.depth, s.mb_per_s)).collect();
        add("depth search", format!("{}; kept {}", steps.join(", "), r.queue_depth));
    }
    add("CPU", format!("{:.3} s on {} threads, {:.2} µs per page", r.figures.cpu_s, r.threads, r.figures.cpu_us_per_page));
    add("decode", format!("{:.3} s, {:.2} µs per page", r.figures.decode_s, r.figures.decode_us_per_page));
    if r.skipped.row_groups_total > 0 {
        add(
            "row groups",
            format!("{} of {} skipped by min/max ({} rows not read)", r.skipped.row_groups_skipped, r.skipped.row_groups_total, r.skipped.rows_skipped),
        );
    }
    let total = r.figures.waits.total_s();
    for (kind, seconds) in r.figures.waits.by_kind() {
        let share = if total > 0.0 { seconds / total * 100.0 } else { 0.0 };
        add(&format!("  {kind}"), format!("{seconds:.3} s ({share:.0} %)"));
    }
    if let Some(c) = &r.check {
        add(
            "raw read rate",
            format!("{:.0} MB/s (before {:.0}, after {:.0}; {} x {} KiB in flight per worker)", c.raw_mb_per_s, c.raw_mb_per_s_before, c.raw_mb_per_s_after, c.raw_queue_depth, r.io_size_bytes / 1024),
        );
        add("efficiency", format!("{:.0} %", c.efficiency * 100.0));
        add("verdict", c.verdict.clone());
    }
    println!("{figures}");

    let mut files = Table::new();
    files.load_preset(UTF8_FULL_CONDENSED).set_header(vec!["file", "reads", "MB", "MB/s", "avg latency µs"]);
    for f in &r.figures.files {
        files.add_row(vec![
            Cell::new(&f.path),
            right(f.reads_count.to_string()),
            right(format!("{:.1}", f.bytes_read as f64 / 1e6)),
            right(format!("{:.0}", f.mb_per_s)),
            right(format!("{:.0}", f.read_latency_us_avg)),
        ]);
    }
    println!("{files}");
    for n in &r.notices {
        println!("note: {n}");
    }
}
