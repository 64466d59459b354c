//! `flashscan drop DB TABLE`: remove a table (catalog first, atomically; then its files).

use std::path::PathBuf;

use flashscan_storage::drop_table;

use crate::exit::storage_error;

#[derive(clap::Args)]
pub struct DropArgs {
    /// Database directory.
    pub db: PathBuf,
    /// Table to drop.
    pub table: String,
}

pub fn run(args: DropArgs) -> anyhow::Result<()> {
    crate::cmd_write::checkpoint_if_unflushed(&args.db, &args.table, "flashscan drop")?;
    let r = drop_table(&args.db, &args.table).map_err(storage_error)?;
    println!("dropped {}: {} files removed, {:.1} MB freed", r.table, r.files_removed, r.bytes_freed as f64 / 1e6);
    Ok(())
}
