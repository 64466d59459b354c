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
    /// Cluster host I of N (docs/cluster.md): refuse unless the database is that host. A
    /// rebuild keeps the table's partitions, so the host's table still holds only its own.
    #[arg(long)]
    pub host: Option<String>,
}

pub fn run(args: RebuildArgs) -> anyhow::Result<()> {
    let target = RebuildTarget::parse(&args.compression).map_err(storage_error)?;
    if let Some(h) = &args.host {
        check_host(&args.db, h)?;
    }
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
    let options = RebuildOptions { fault_after_pages, row_group_rows: args.row_group_rows, into_table: args.into.clone(), progress: Some(&progress), ..RebuildOptions::default() };
    crate::cmd_write::checkpoint_if_unflushed(&args.db, &args.table, "flashscan rebuild")?;
    let r = rebuild_table(&args.db, &args.table, target, &options).map_err(storage_error)?;
    let ratio = if r.old_size_bytes == 0 { 0.0 } else { r.new_size_bytes as f64 / r.old_size_bytes as f64 };
    let dropped = match r.deleted_rows_dropped {
        0 => String::new(),
        n => format!(" ({n} deleted rows left behind)"),
    };
    println!(
        "{}: {} rows rebuilt from {} to {} in {:.2} s{dropped}: {} bytes ({} pages) -> {} bytes ({} pages), ratio {:.3}",
        r.table, r.row_count, r.old_format, r.new_format, r.seconds, r.old_size_bytes, r.old_page_count, r.new_size_bytes, r.new_page_count, ratio
    );
    Ok(())
}

/// `--host I/N` given to a command over an existing database: it must be that host.
fn check_host(db: &std::path::Path, host: &str) -> anyhow::Result<()> {
    let slot = flashscan_storage::HostSlot::parse(host).map_err(storage_error)?;
    let catalog = flashscan_storage::Catalog::read(db).map_err(storage_error)?;
    match catalog.host.map(|p| p.slot()) {
        Some(s) if s == slot => Ok(()),
        Some(s) => Err(bad_input(format!("{}: this database is cluster host {s}, not {slot}: give --host {s}", db.display()))),
        None => Err(bad_input(format!("{}: not a cluster host database (loaded without --host): rebuild it without --host", db.display()))),
    }
}
