//! `flashscan rebuild DB TABLE --compression none|row|page|columnstore|columnstore_archive`:
//! SQL Server's `ALTER TABLE … REBUILD WITH (DATA_COMPRESSION = …)`. Progress goes to
//! stderr; the sizes before and after go to stdout.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

use flashscan_storage::{rebuild_table, RebuildOptions, RebuildProgress, RebuildTarget};

use crate::exit::storage_error;
use crate::exit::bad_input;

const FAULT_ENV: &str = "FLASHSCAN_FAULT_AFTER_PAGES";

#[derive(clap::Args)]
pub struct RebuildArgs {
    /// Database directory.
    pub db: PathBuf,
    /// Table to rebuild.
    pub table: String,
    /// none (heap), row, page, columnstore or columnstore_archive.
    #[arg(long)]
    pub compression: String,
    /// Column store only: rows per row group (default 1048576, like SQL Server's).
    #[arg(long, value_name = "ROWS")]
    pub row_group_rows: Option<usize>,
    /// Write the rebuilt rows into a new table of this name and keep TABLE as it is.
    #[arg(long, value_name = "NEW_TABLE")]
    pub into: Option<String>,
}

pub fn run(args: RebuildArgs) -> anyhow::Result<()> {
    let target = RebuildTarget::parse(&args.compression).map_err(storage_error)?;
    let fault_after_pages = match std::env::var(FAULT_ENV) {
        Ok(v) => Some(v.parse().map_err(|_| bad_input(format!("{FAULT_ENV}={v:?} is not a number")))?),
        Err(_) => None,
    };
    // One progress line per ~5% of rows, not per batch.
    let last_percent = AtomicU64::new(u64::MAX);
    let progress = |p: RebuildProgress| {
        let percent = (p.rows_done * 100).checked_div(p.rows_total).unwrap_or(100);
        let step = percent / 5;
        if last_percent.swap(step, Ordering::Relaxed) != step {
            eprintln!(
                "rebuild: partition {}/{}, {} of {} rows ({percent}%), {} bytes written",
                p.partition_index + 1,
                p.partition_count,
                p.rows_done,
                p.rows_total,
                p.bytes_written
            );
        }
    };
    let options = RebuildOptions { fault_after_pages, row_group_rows: args.row_group_rows, into_table: args.into.clone(), progress: Some(&progress) };
    crate::cmd_write::refuse_if_unflushed(&args.db, &args.table, "flashscan rebuild")?;
    let r = rebuild_table(&args.db, &args.table, target, &options).map_err(storage_error)?;
    let ratio = if r.old_size_bytes == 0 { 0.0 } else { r.new_size_bytes as f64 / r.old_size_bytes as f64 };
    println!(
        "{}: {} rows rebuilt from {} to {} in {:.2} s: {} bytes ({} pages) -> {} bytes ({} pages), ratio {:.3}",
        r.table, r.row_count, r.old_format, r.new_format, r.seconds, r.old_size_bytes, r.old_page_count, r.new_size_bytes, r.new_page_count, ratio
    );
    Ok(())
}
