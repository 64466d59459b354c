//! `DROP TABLE`: the table and its indexes leave the catalog (atomic commit) and their files
//! are listed as unreferenced; then those files are removed (`Catalog::commit_and_sweep`:
//! confined paths with names flashscan generates only). A crash between the two leaves the
//! files listed for the next writer's sweep, never a table with missing files.

use std::path::Path;

use crate::catalog::Catalog;
use crate::database::Database;
use crate::error::StorageError;
use crate::load::lock_database;

/// What a drop removed.
#[derive(Debug, Clone)]
pub struct DropReport {
    pub table: String,
    pub files_removed: usize,
    pub bytes_freed: u64,
}

pub fn drop_table(db_dir: &Path, table_name: &str) -> Result<DropReport, StorageError> {
    Database::open(db_dir)?;
    let _lock = lock_database(db_dir)?;
    let db = Database::open(db_dir)?;
    let table = db.table(table_name)?.clone();
    // As DROP TABLE in SQL: not while a view reads it (PostgreSQL's rule without CASCADE).
    db.catalog().refuse_drop_read_by_views("table", &table.name, &[])?;
    let mut next: Catalog = db.catalog().clone();
    crate::orphans::sweep_unreferenced(db_dir, &mut next)?;
    let index_bytes: u64 = next.indexes_on(&table.name).map(|i| i.size_bytes).sum();
    next.remove_table(&table.name);
    next.remove_owned_sequences(&table.name);
    next.generation += 1;
    let sweep = next.commit_and_sweep(db_dir)?;
    Ok(DropReport { table: table.name, files_removed: sweep.removed_count, bytes_freed: table.size_bytes + index_bytes })
}
