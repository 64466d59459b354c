//! Readers that do not merge the delta (`flashscan scan`, `lookup`, `rebuild`, `index
//! create`, `drop`, `load --replace`) ask here first: a table with committed rows still
//! only in the log is checkpointed by the command before it reads (crates/cli
//! `cmd_write::checkpoint_if_unflushed`), never read as if those rows did not exist.

use std::path::Path;

use flashscan_storage::Catalog;

use crate::error::WriteError;
use crate::write_path::read_only_scan;

/// Committed changes (rows inserted or deleted) of `table` logged after the redo point (0
/// for a database without a log).
pub fn unflushed_rows(db_dir: &Path, table: &str) -> Result<u64, WriteError> {
    if !Catalog::exists(db_dir) {
        return Ok(0);
    }
    let catalog = Catalog::read(db_dir)?;
    let Some(meta) = &catalog.write else { return Ok(0) };
    let Some(id) = meta.table_ids.iter().find(|(n, _)| n.eq_ignore_ascii_case(table)).map(|(_, id)| *id) else { return Ok(0) };
    let scan = read_only_scan(db_dir, meta)?;
    let mut rows = 0;
    for item in scan.redo() {
        let item = item?;
        if item.lsn().0 >= meta.redo_lsn && item.table_id() == id {
            rows += 1;
        }
    }
    Ok(rows)
}

/// `NotSupported` (naming `what`) when `table` has deleted rows: readers that read pages
/// directly (scan, lookup, rebuild, index create) do not skip them yet, and would answer
/// with rows a DELETE removed.
pub fn refuse_if_deleted_rows(db_dir: &Path, table: &str, what: &str) -> Result<(), WriteError> {
    if !Catalog::exists(db_dir) {
        return Ok(());
    }
    let catalog = Catalog::read(db_dir)?;
    let deleted = catalog.tables.iter().find(|(n, _)| n.eq_ignore_ascii_case(table)).and_then(|(_, t)| t.deleted_rows.as_ref()).map(|d| d.row_count).unwrap_or(0);
    if deleted > 0 {
        return Err(WriteError::NotSupported(format!(
            "table {table} has {deleted} deleted rows, which {what} does not skip yet: run `flashscan rebuild {db} {table}` first (it leaves them behind and reclaims their space), or query it with `flashscan sql` or over the wire", db = db_dir.display()
        )));
    }
    Ok(())
}
