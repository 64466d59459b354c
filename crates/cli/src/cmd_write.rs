//! `flashscan init`, `checkpoint`, `recover`: the write path's commands (crates/write), and
//! what commands that read pages, not the log, call first.

use std::path::{Path, PathBuf};

use flashscan_write::{CheckpointOptions, InitOptions, MAX_ASYNC_IO_DEFAULT};
use crate::exit::write_error;


#[derive(clap::Args)]
pub struct InitArgs {
    /// Database directory (new, or an empty directory).
    pub db: PathBuf,
    /// Directories new data files go to, comma separated (the database directory by default).
    #[arg(long, value_delimiter = ',')]
    pub volumes: Vec<PathBuf>,
    /// Put the write-ahead log in this existing, empty directory (another volume).
    #[arg(long)]
    pub wal_dir: Option<PathBuf>,
    #[arg(long)]
    pub json: bool,
}

#[derive(clap::Args)]
pub struct CheckpointArgs {
    pub db: PathBuf,
    /// Most page writes outstanding at once (SQL Server's "Max Async IO"), 1 to 1024.
    #[arg(long, default_value_t = MAX_ASYNC_IO_DEFAULT)]
    pub max_async_io: usize,
    #[arg(long)]
    pub json: bool,
}

#[derive(clap::Args)]
pub struct RecoverArgs {
    pub db: PathBuf,
    /// Decode every replayed row (each delta page's checksum and row bounds checked).
    #[arg(long)]
    pub verify: bool,
    #[arg(long)]
    pub json: bool,
}

/// Makes the pages of `table` hold every committed change before `what`, a command that
/// reads pages and not the log, runs: changes still only in the log are checkpointed first
/// (the command owns the database while it runs; a running server is named and refused by
/// the checkpoint's lock). Says so on stderr, so the command's own output stays as it is.
pub fn checkpoint_if_unflushed(db: &Path, table: &str, what: &str) -> anyhow::Result<()> {
    let changes = flashscan_write::unflushed_rows(db, table).map_err(write_error)?;
    if changes == 0 {
        return Ok(());
    }
    let r = flashscan_write::checkpoint(db, &CheckpointOptions::default()).map_err(write_error)?;
    eprintln!(
        "{what}: checkpointed first: table {table} had {changes} committed changes only in the write-ahead log ({} rows -> {} pages, {:.3} s)",
        r.rows_written, r.pages_written, r.elapsed_s
    );
    Ok(())
}

pub fn init(args: InitArgs) -> anyhow::Result<()> {
    let options = InitOptions { volumes: args.volumes, wal_dir: args.wal_dir, segment_size_bytes: None };
    let r = flashscan_write::init_database(&args.db, &options).map_err(write_error)?;
    if args.json {
        return crate::print_json(&r);
    }
    println!("made database {} (id {}), write-ahead log in {}", r.db.display(), r.database_id, r.wal_dir.display());
    Ok(())
}

pub fn checkpoint(args: CheckpointArgs) -> anyhow::Result<()> {
    let options = CheckpointOptions { max_async_io: args.max_async_io, ..CheckpointOptions::default() };
    let r = flashscan_write::checkpoint(&args.db, &options).map_err(write_error)?;
    if args.json {
        return crate::print_json(&r);
    }
    println!(
        "checkpoint: {} rows of {} tables -> {} pages in {} new and {} appended files; {} writes of {:.0} KB on average, at most {} outstanding (cap {}); redo point {}; {:.3} s",
        r.rows_written,
        r.tables,
        r.pages_written,
        r.files_created,
        r.files_appended,
        r.writes,
        r.avg_write_bytes / 1024.0,
        r.max_outstanding_writes,
        r.max_async_io,
        r.redo_lsn,
        r.elapsed_s
    );
    Ok(())
}

pub fn recover(args: RecoverArgs) -> anyhow::Result<()> {
    let r = flashscan_write::recover(&args.db, args.verify).map_err(write_error)?;
    if args.json {
        return crate::print_json(&r);
    }
    println!(
        "recovered: {} log records scanned from LSN {} to {}; {} committed rows replayed ({} already in pages, {} of dropped tables); log end: {}",
        r.log_records_scanned, r.redo_lsn, r.end_lsn, r.committed_rows_replayed, r.rows_already_in_pages, r.rows_of_dropped_tables, r.log_end
    );
    for (table, rows) in &r.delta_rows {
        println!("  {table}: {rows} rows not yet in pages (written by `flashscan checkpoint`)");
    }
    if let Some(v) = r.verified_rows {
        println!("verified: {v} rows decode");
    }
    Ok(())
}
