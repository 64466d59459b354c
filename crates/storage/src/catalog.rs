//! The catalog file: every table of a database, persisted atomically.
//!
//! `catalog.json` is one header line followed by the body:
//! `{"magic":"flashscan-catalog","format_version":1,"body_bytes":N,"body_crc32c":C}\n<body JSON>`.
//! It is replaced by writing `catalog.json.tmp`, fsync, rename over `catalog.json`, fsync of
//! the directory: a reader sees the old catalog or the new one, never a mix.

use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::StorageError;
use crate::table_meta::TableMeta;

pub const CATALOG_FILE_NAME: &str = "catalog.json";
pub const CATALOG_TMP_FILE_NAME: &str = "catalog.json.tmp";
pub const CATALOG_MAGIC: &str = "flashscan-catalog";
pub const CATALOG_FORMAT_VERSION: u32 = 1;

#[derive(Debug, Serialize, Deserialize)]
struct CatalogHeader {
    magic: String,
    format_version: u32,
    body_bytes: u64,
    body_crc32c: u32,
}

/// The catalog body.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Catalog {
    /// Bumped on every commit; new data file names carry it so they never collide.
    pub generation: u64,
    /// The next database-wide data file id.
    pub next_file_id: u32,
    /// The next LSN to stamp on loaded pages.
    pub next_lsn: u64,
    pub tables: BTreeMap<String, TableMeta>,
}

impl Catalog {
    pub fn path(dir: &Path) -> PathBuf {
        dir.join(CATALOG_FILE_NAME)
    }

    pub fn exists(dir: &Path) -> bool {
        Self::path(dir).is_file()
    }

    /// Reads and verifies `dir/catalog.json`.
    pub fn read(dir: &Path) -> Result<Catalog, StorageError> {
        let path = Self::path(dir);
        if !dir.is_dir() {
            return Err(StorageError::NotADatabase { dir: dir.to_path_buf() });
        }
        let bytes = match fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(StorageError::NotADatabase { dir: dir.to_path_buf() }),
            Err(e) => return Err(StorageError::io("reading catalog", &path, e)),
        };
        let corrupt = |reason: String| StorageError::CatalogCorrupt { path: path.clone(), reason };
        let newline = bytes.iter().position(|&b| b == b'\n').ok_or_else(|| corrupt("no header line".into()))?;
        let header: CatalogHeader = serde_json::from_slice(&bytes[..newline]).map_err(|e| corrupt(format!("header: {e}")))?;
        if header.magic != CATALOG_MAGIC {
            return Err(corrupt(format!("magic {:?}", header.magic)));
        }
        if header.format_version != CATALOG_FORMAT_VERSION {
            return Err(corrupt(format!("format version {} (this build reads {CATALOG_FORMAT_VERSION})", header.format_version)));
        }
        let body = &bytes[newline + 1..];
        if body.len() as u64 != header.body_bytes {
            return Err(corrupt(format!("body is {} bytes, header says {}", body.len(), header.body_bytes)));
        }
        let crc = crc32c::crc32c(body);
        if crc != header.body_crc32c {
            return Err(corrupt(format!("checksum {crc:#010x}, header says {:#010x}", header.body_crc32c)));
        }
        serde_json::from_slice(body).map_err(|e| corrupt(format!("body: {e}")))
    }

    /// Replaces `dir/catalog.json` atomically with this catalog.
    pub fn write_atomic(&self, dir: &Path) -> Result<(), StorageError> {
        let body = serde_json::to_vec(self).map_err(|e| StorageError::Worker(format!("serializing catalog: {e}")))?;
        let header = CatalogHeader {
            magic: CATALOG_MAGIC.to_string(),
            format_version: CATALOG_FORMAT_VERSION,
            body_bytes: body.len() as u64,
            body_crc32c: crc32c::crc32c(&body),
        };
        let mut bytes = serde_json::to_vec(&header).map_err(|e| StorageError::Worker(format!("serializing catalog: {e}")))?;
        bytes.push(b'\n');
        bytes.extend_from_slice(&body);

        let tmp = dir.join(CATALOG_TMP_FILE_NAME);
        let result = (|| {
            let mut f = OpenOptions::new().write(true).create(true).truncate(true).open(&tmp).map_err(|e| StorageError::io("creating", &tmp, e))?;
            f.write_all(&bytes).map_err(|e| StorageError::io("writing", &tmp, e))?;
            f.sync_all().map_err(|e| StorageError::io("syncing", &tmp, e))?;
            let path = Self::path(dir);
            fs::rename(&tmp, &path).map_err(|e| StorageError::io("renaming catalog to", &path, e))?;
            sync_dir(dir)
        })();
        if result.is_err() {
            let _ = fs::remove_file(&tmp);
        }
        result
    }
}

/// fsync of a directory, so a rename or a new file in it survives a crash.
pub fn sync_dir(dir: &Path) -> Result<(), StorageError> {
    let d = File::open(dir).map_err(|e| StorageError::io("opening directory", dir, e))?;
    d.sync_all().map_err(|e| StorageError::io("syncing directory", dir, e))
}
