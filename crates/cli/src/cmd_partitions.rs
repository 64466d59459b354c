//! `flashscan partitions DB TABLE [--json]`: rows and pages per partition, and the files
//! they live in (the sys.partitions / sys.database_files check).

use std::path::PathBuf;

use comfy_table::{presets::UTF8_FULL_CONDENSED, Table};
use flashscan_storage::{Database, PAGE_SIZE_BYTES};

use crate::exit::storage_error;

#[derive(clap::Args)]
pub struct PartitionsArgs {
    /// Database directory.
    pub db: PathBuf,
    /// Table name.
    pub table: String,
    /// Print JSON instead of tables.
    #[arg(long)]
    pub json: bool,
    /// Also read and check every page, row group and segment of the table, and every node
    /// of its indexes (as `flashscan verify DB TABLE`; names the file and offset of any damage).
    #[arg(long)]
    pub verify: bool,
}

#[derive(serde::Serialize)]
struct PartitionRow {
    index: u32,
    row_count: u64,
    page_count: u64,
    size_bytes: u64,
    filegroup: u32,
    run_count: usize,
    files: Vec<String>,
}

#[derive(serde::Serialize)]
struct Report<'a> {
    table: &'a str,
    format: &'a str,
    partition_by: &'a str,
    row_count: u64,
    page_count: u64,
    size_bytes: u64,
    interleave_bytes: u64,
    partitions: Vec<PartitionRow>,
    files: &'a [flashscan_storage::DataFileMeta],
}

pub fn run(args: PartitionsArgs) -> anyhow::Result<()> {
    let db = Database::open(&args.db).map_err(storage_error)?;
    let t = db.table(&args.table).map_err(storage_error)?;
    if args.verify {
        // On stderr: stdout stays the table (or pure JSON with --json); damage is the one
        // error line (every failure is listed by `flashscan verify`).
        let report = crate::cmd_verify::verify(&db, Some(&t.name));
        if report.is_clean() {
            eprintln!("{}", crate::cmd_verify::report_lines(&report)[0]);
        }
        if let Some(first) = report.failures.first() {
            // Exit 2 as every damaged-data error of the other commands (`verify` exits 1).
            return Err(crate::exit::bad_input(format!("{} damaged places in table {}, the first: {}", report.failures.len() as u64 + report.failures_not_listed_count, t.name, first.what)));
        }
    }
    let partitions: Vec<PartitionRow> = t
        .partitions
        .iter()
        .map(|p| {
            let mut files: Vec<String> = p.runs.iter().map(|r| r.file.clone()).collect();
            files.dedup();
            files.sort();
            files.dedup();
            PartitionRow {
                index: p.index,
                row_count: p.row_count,
                page_count: p.page_count,
                size_bytes: p.page_count * PAGE_SIZE_BYTES as u64,
                filegroup: p.filegroup,
                run_count: p.runs.len(),
                files,
            }
        })
        .collect();
    let report = Report {
        table: &t.name,
        format: &t.format,
        partition_by: &t.partition_by,
        row_count: t.row_count,
        page_count: t.page_count(),
        size_bytes: t.size_bytes,
        interleave_bytes: t.interleave_bytes,
        partitions,
        files: &t.files,
    };
    if args.json {
        return crate::print_json(&report);
    }
    println!(
        "table {} ({}, hash on {}): {} rows, {} pages, {:.1} MB, interleave {} KB",
        report.table,
        report.format,
        report.partition_by,
        report.row_count,
        report.page_count,
        report.size_bytes as f64 / 1e6,
        report.interleave_bytes / 1024
    );
    let mut parts = Table::new();
    parts.load_preset(UTF8_FULL_CONDENSED);
    parts.set_header(vec!["partition", "rows", "pages", "MB", "rows/page", "filegroup", "runs", "files"]);
    for p in &report.partitions {
        parts.add_row(vec![
            p.index.to_string(),
            p.row_count.to_string(),
            p.page_count.to_string(),
            format!("{:.1}", p.size_bytes as f64 / 1e6),
            format!("{:.1}", p.row_count as f64 / p.page_count.max(1) as f64),
            p.filegroup.to_string(),
            p.run_count.to_string(),
            p.files.len().to_string(),
        ]);
    }
    println!("{parts}");
    let mut files = Table::new();
    files.load_preset(UTF8_FULL_CONDENSED);
    files.set_header(vec!["file id", "file", "volume", "pages", "bytes"]);
    for f in report.files {
        files.add_row(vec![f.file_id.to_string(), f.path.clone(), f.volume.clone(), f.page_count.to_string(), f.size_bytes.to_string()]);
    }
    println!("{files}");
    Ok(())
}
