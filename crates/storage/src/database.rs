//! A database: a directory with a catalog and the data files it lists.

use std::path::{Path, PathBuf};

use crate::catalog::Catalog;
use crate::error::StorageError;
use crate::table_meta::{PageRun, TableMeta};

/// An open database (read side). Loads go through `load::load_*`, which commit a new
/// catalog; reopen to see them.
pub struct Database {
    dir: PathBuf,
    catalog: Catalog,
}

impl Database {
    pub fn open(dir: &Path) -> Result<Database, StorageError> {
        let catalog = Catalog::read(dir)?;
        Ok(Database { dir: dir.to_path_buf(), catalog })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn catalog(&self) -> &Catalog {
        &self.catalog
    }

    /// The table by name (case-insensitive).
    pub fn table(&self, name: &str) -> Result<&TableMeta, StorageError> {
        if let Some(t) = self.catalog.tables.get(name) {
            return Ok(t);
        }
        self.catalog.tables.values().find(|t| t.name.eq_ignore_ascii_case(name)).ok_or_else(|| StorageError::UnknownTable {
            name: name.to_string(),
            known: if self.catalog.tables.is_empty() {
                "(none)".to_string()
            } else {
                self.catalog.tables.keys().cloned().collect::<Vec<_>>().join(", ")
            },
        })
    }

    /// All tables, by name.
    pub fn tables(&self) -> impl Iterator<Item = &TableMeta> {
        self.catalog.tables.values()
    }

    /// Where a run's file is on disk.
    pub fn file_path(&self, run: &PageRun) -> PathBuf {
        self.resolve(&run.file)
    }

    /// A catalog path (a file name in the database directory, or absolute in a declared
    /// volume) on disk. `Catalog::read` refused the catalog unless every path in it is
    /// confined (`fs_safe`), so this join cannot leave the database and its volumes.
    pub fn resolve(&self, catalog_path: &str) -> PathBuf {
        debug_assert!(self.catalog.roots(&self.dir).is_ok_and(|r| r.confine(catalog_path, &String::new, Path::new("")).is_ok()));
        // join keeps an absolute path as is: files on other volumes are stored absolute.
        self.dir.join(catalog_path)
    }
}
