//! The index catalog: the `indexes` of the database's `catalog.json` (which the storage crate
//! owns), so indexes share the tables' checksum, atomic replace and lock. Creating or
//! dropping an index, and dropping or replacing its table, are commits of that one file.
//!
//! An `indexes.json` beside it comes from an earlier flashscan, which kept indexes there
//! without a checksum and outside the lock. It is refused, not migrated: trusting an
//! unchecksummed list (file paths included) once is the hole this closes, and an index is
//! rebuilt from its table in seconds. The error says what to do.

use std::path::{Path, PathBuf};

use flashscan_storage::catalog::IndexEntry;
use flashscan_storage::Catalog;
use serde::{Deserialize, Serialize};

use crate::btree::TreeMeta;
use crate::error::IndexError;

/// The index list of earlier versions, refused when present (see the module docs).
pub const LEGACY_INDEX_CATALOG_FILE_NAME: &str = "indexes.json";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IndexMeta {
    pub name: String,
    pub table: String,
    pub columns: Vec<String>,
    /// Index file, a file name in the database directory.
    pub file: String,
    pub tree: TreeMeta,
    pub size_bytes: u64,
    /// The table's load LSN when the index was built: a reload makes the index stale.
    pub table_load_lsn: u64,
    pub build_seconds: f64,
}

impl IndexMeta {
    pub fn from_entry(entry: &IndexEntry, catalog_path: &Path) -> Result<IndexMeta, IndexError> {
        let tree: TreeMeta = serde_json::from_value(entry.tree.clone())
            .map_err(|e| IndexError::CatalogCorrupt { path: catalog_path.to_path_buf(), reason: format!("index {:?}: tree: {e}", entry.name) })?;
        Ok(IndexMeta {
            name: entry.name.clone(),
            table: entry.table.clone(),
            columns: entry.columns.clone(),
            file: entry.file.clone(),
            tree,
            size_bytes: entry.size_bytes,
            table_load_lsn: entry.table_load_lsn,
            build_seconds: entry.build_seconds,
        })
    }

    pub fn to_entry(&self) -> Result<IndexEntry, IndexError> {
        Ok(IndexEntry {
            name: self.name.clone(),
            table: self.table.clone(),
            columns: self.columns.clone(),
            file: self.file.clone(),
            tree: serde_json::to_value(self.tree).map_err(|e| IndexError::InvalidArgument(format!("serializing index {}: {e}", self.name)))?,
            size_bytes: self.size_bytes,
            table_load_lsn: self.table_load_lsn,
            build_seconds: self.build_seconds,
        })
    }
}

/// The indexes of one catalog, read-only (writers go through `create`/`drop_index`, which
/// commit the storage catalog under its lock).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct IndexCatalog {
    pub indexes: Vec<IndexMeta>,
}

impl IndexCatalog {
    /// The catalog file the indexes live in.
    pub fn path(dir: &Path) -> PathBuf {
        Catalog::path(dir)
    }

    /// Refuses a database that still has an `indexes.json` of an earlier version.
    pub fn refuse_legacy(dir: &Path) -> Result<(), IndexError> {
        let legacy = dir.join(LEGACY_INDEX_CATALOG_FILE_NAME);
        if std::fs::symlink_metadata(&legacy).is_ok() {
            return Err(IndexError::CatalogCorrupt {
                path: legacy,
                reason: "indexes.json is from an earlier flashscan (no checksum, outside the lock); indexes now live in catalog.json. Delete indexes.json and its index_*.fsbt files, then recreate the indexes with flashscan index create".into(),
            });
        }
        Ok(())
    }

    /// The indexes of `catalog` (read from `dir`).
    pub fn from_catalog(dir: &Path, catalog: &Catalog) -> Result<IndexCatalog, IndexError> {
        Self::refuse_legacy(dir)?;
        let path = Self::path(dir);
        let indexes = catalog.indexes.iter().map(|e| IndexMeta::from_entry(e, &path)).collect::<Result<_, _>>()?;
        Ok(IndexCatalog { indexes })
    }

    /// Reads the database's catalog and its indexes.
    pub fn read(dir: &Path) -> Result<IndexCatalog, IndexError> {
        let catalog = Catalog::read(dir)?;
        Self::from_catalog(dir, &catalog)
    }

    pub fn find(&self, table: &str, name: &str) -> Result<&IndexMeta, IndexError> {
        self.indexes.iter().find(|i| i.table.eq_ignore_ascii_case(table) && i.name.eq_ignore_ascii_case(name)).ok_or_else(|| {
            let known: Vec<&str> = self.indexes.iter().filter(|i| i.table.eq_ignore_ascii_case(table)).map(|i| i.name.as_str()).collect();
            IndexError::UnknownIndex { table: table.into(), name: name.into(), known: if known.is_empty() { "(none)".into() } else { known.join(", ") } }
        })
    }
}
