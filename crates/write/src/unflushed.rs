//! Readers that do not merge the delta (`flashscan scan`, `lookup`, `rebuild`, `index
//! create`, `drop`, `load --replace`) ask here first: a table with committed rows still
//! only in the log is checkpointed by the command before it reads (crates/cli
//! `cmd_write::checkpoint_if_unflushed`), never read as if those rows did not exist. The
//! checkpoint also writes the table's deleted rows file, which those readers skip
//! (flashscan_storage::live_rows).

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
