//! The index catalog: `DB/indexes.json`, beside the database catalog (which the storage
//! crate owns). Replaced atomically: write `indexes.json.tmp`, fsync, rename, fsync the
//! directory, so a reader sees the old list or the new one.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::btree::TreeMeta;
use crate::error::IndexError;

pub const INDEX_CATALOG_FILE_NAME: &str = "indexes.json";
pub const INDEX_CATALOG_FORMAT_VERSION: u32 = 1;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IndexMeta {
    pub name: String,
    pub table: String,
    pub columns: Vec<String>,
    /// Index file, relative to the database directory.
    pub file: String,
    pub tree: TreeMeta,
    pub size_bytes: u64,
    /// The table's load LSN when the index was built: a reload makes the index stale.
    pub table_load_lsn: u64,
    pub build_seconds: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IndexCatalog {
    pub format_version: u32,
    pub indexes: Vec<IndexMeta>,
}

impl Default for IndexCatalog {
    fn default() -> Self {
        IndexCatalog { format_version: INDEX_CATALOG_FORMAT_VERSION, indexes: Vec::new() }
    }
}

impl IndexCatalog {
    pub fn path(dir: &Path) -> PathBuf {
        dir.join(INDEX_CATALOG_FILE_NAME)
    }

    /// The catalog, or an empty one if the database has no indexes yet.
    pub fn read(dir: &Path) -> Result<IndexCatalog, IndexError> {
        let path = Self::path(dir);
        let bytes = match fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(IndexCatalog::default()),
            Err(e) => return Err(IndexError::file("reading", &path, e)),
        };
        let catalog: IndexCatalog = serde_json::from_slice(&bytes).map_err(|e| IndexError::CatalogCorrupt { path: path.clone(), reason: e.to_string() })?;
        if catalog.format_version != INDEX_CATALOG_FORMAT_VERSION {
            return Err(IndexError::CatalogCorrupt { path, reason: format!("format version {} (this build reads {INDEX_CATALOG_FORMAT_VERSION})", catalog.format_version) });
        }
        Ok(catalog)
    }

    pub fn find(&self, table: &str, name: &str) -> Result<&IndexMeta, IndexError> {
        self.indexes.iter().find(|i| i.table.eq_ignore_ascii_case(table) && i.name.eq_ignore_ascii_case(name)).ok_or_else(|| {
            let known: Vec<&str> = self.indexes.iter().filter(|i| i.table.eq_ignore_ascii_case(table)).map(|i| i.name.as_str()).collect();
            IndexError::UnknownIndex { table: table.into(), name: name.into(), known: if known.is_empty() { "(none)".into() } else { known.join(", ") } }
        })
    }

    pub fn write_atomic(&self, dir: &Path) -> Result<(), IndexError> {
        let bytes = serde_json::to_vec_pretty(self).map_err(|e| IndexError::InvalidArgument(format!("serializing the index catalog: {e}")))?;
        write_file_atomic(dir, INDEX_CATALOG_FILE_NAME, &bytes)
    }
}

/// tmp + fsync + rename + fsync(dir).
pub fn write_file_atomic(dir: &Path, name: &str, bytes: &[u8]) -> Result<(), IndexError> {
    let tmp = dir.join(format!("{name}.tmp"));
    let path = dir.join(name);
    let result = (|| {
        let mut f = OpenOptions::new().write(true).create(true).truncate(true).open(&tmp).map_err(|e| IndexError::file("creating", &tmp, e))?;
        f.write_all(bytes).map_err(|e| IndexError::file("writing", &tmp, e))?;
        f.sync_all().map_err(|e| IndexError::file("syncing", &tmp, e))?;
        fs::rename(&tmp, &path).map_err(|e| IndexError::file("renaming to", &path, e))?;
        File::open(dir).and_then(|d| d.sync_all()).map_err(|e| IndexError::file("syncing directory", dir, e))
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}
