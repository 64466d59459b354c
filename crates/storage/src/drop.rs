//! `DROP TABLE`: the table leaves the catalog (atomic commit), then its data files are
//! removed. A crash between the two leaves unreferenced files, never a table with missing
//! files; only files the catalog lists for this table are touched.

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
    let mut next: Catalog = db.catalog().clone();
    next.tables.remove(&table.name);
    next.generation += 1;
    next.write_atomic(db_dir)?;
    let mut files_removed = 0;
    for f in &table.files {
        if std::fs::remove_file(db.resolve(&f.path)).is_ok() {
            files_removed += 1;
        }
    }
    Ok(DropReport { table: table.name, files_removed, bytes_freed: table.size_bytes })
}
