//! `flashscan verify DB [TABLE] [--json]`: read every page, row group, segment and index node
//! and check each the way a scan or lookup would; print what was checked and every failure
//! (file, offset, what to do). Exit 0 when clean, 1 when anything is damaged.

use std::path::PathBuf;

use flashscan_storage::verify::{verify_table, VerifyReport};
use flashscan_storage::Database;

use crate::exit::storage_error;

#[derive(clap::Args)]
pub struct VerifyArgs {
    /// Database directory.
    pub db: PathBuf,
    /// Only this table (and its indexes).
    pub table: Option<String>,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Damage found: exit 1 (the data on disk failed, not the command line).
#[derive(Debug)]
struct Damaged(String);

impl std::fmt::Display for Damaged {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Damaged {}

/// Checks `table` (or every table) and the indexes on it.
pub fn verify(db: &Database, table: Option<&str>) -> VerifyReport {
    let mut report = VerifyReport::default();
    for t in db.tables().filter(|t| table.is_none_or(|name| t.name.eq_ignore_ascii_case(name))) {
        verify_table(db, t, &mut report);
    }
    flashscan_index::verify::verify_indexes(db, table, &mut report);
    report
}

/// The report as text: one line of counts, one line per failure.
pub fn report_lines(report: &VerifyReport) -> Vec<String> {
    let c = &report.counts;
    let mut lines = vec![format!(
        "checked {} tables: {} data files, {} heap pages, {} row groups, {} column segments, {} rows; {} indexes, {} index nodes",
        c.tables_count, c.data_files_count, c.heap_pages_count, c.row_groups_count, c.segments_count, c.rows_count, c.indexes_count, c.index_nodes_count
    )];
    for f in &report.failures {
        lines.push(format!("DAMAGED {} in {} at byte {}: {}; {}", f.object, f.file, f.offset_bytes, f.what, f.action));
    }
    if report.failures_not_listed_count > 0 {
        lines.push(format!("… and {} more failures not listed", report.failures_not_listed_count));
    }
    if report.is_clean() {
        lines.push("all checksums and structures match".into());
    }
    lines
}

pub fn print_report(report: &VerifyReport, json: bool) -> anyhow::Result<()> {
    if json {
        return crate::print_json(report);
    }
    for line in report_lines(report) {
        println!("{line}");
    }
    Ok(())
}

/// Exit 1 when anything is damaged.
pub fn exit_status(report: &VerifyReport) -> anyhow::Result<()> {
    if report.is_clean() {
        return Ok(());
    }
    let n = report.failures.len() as u64 + report.failures_not_listed_count;
    Err(anyhow::Error::new(Damaged(format!("{n} damaged places found (listed above)"))))
}

pub fn run(args: VerifyArgs) -> anyhow::Result<()> {
    let db = Database::open(&args.db).map_err(storage_error)?;
    if let Some(t) = &args.table {
        db.table(t).map_err(storage_error)?;
    }
    let report = verify(&db, args.table.as_deref());
    print_report(&report, args.json)?;
    exit_status(&report)
}
