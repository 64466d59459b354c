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

use crate::column::{ColumnType, DECIMAL_PRECISION_MAX};
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
    /// Databases made by `flashscan init` (which take SQL writes): the log and redo point.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write: Option<crate::write_meta::WriteMeta>,
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
        let catalog: Catalog = serde_json::from_slice(body).map_err(|e| corrupt(format!("body: {e}")))?;
        for (name, table) in &catalog.tables {
            check_table(table).map_err(|reason| corrupt(format!("table {name:?}: {reason}")))?;
        }
        Ok(catalog)
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

/// What the JSON types alone do not rule out but the readers rely on: a column type Arrow
/// can build (a decimal of 1..=18 digits with its scale at most its precision; anything
/// else makes the scan's batches fail their own schema), and page and row totals that fit
/// a u64 (readers sum them).
fn check_table(table: &TableMeta) -> Result<(), String> {
    fn total(what: &str, mut counts: impl Iterator<Item = u64>) -> Result<(), String> {
        counts.try_fold(0u64, |sum, n| sum.checked_add(n)).map(drop).ok_or_else(|| format!("{what} add up past 2^64"))
    }
    total("partition page counts", table.partitions.iter().map(|p| p.page_count))?;
    total("partition row counts", table.partitions.iter().map(|p| p.row_count))?;
    total("row group row counts", table.partitions.iter().flat_map(|p| &p.row_groups).map(|g| g.row_count))?;
    total("run page counts", table.partitions.iter().flat_map(|p| &p.runs).map(|r| u64::from(r.page_count)))?;
    for column in &table.columns {
        if let ColumnType::Decimal { precision, scale } = column.column_type {
            if !(1..=DECIMAL_PRECISION_MAX).contains(&precision) || i16::from(scale) > i16::from(precision) {
                return Err(format!("column {:?} is decimal({precision}, {scale}): precision must be 1..={DECIMAL_PRECISION_MAX} and scale at most the precision", column.name));
            }
        }
    }
    Ok(())
}

/// fsync of a directory, so a rename or a new file in it survives a crash.
pub fn sync_dir(dir: &Path) -> Result<(), StorageError> {
    let d = File::open(dir).map_err(|e| StorageError::io("opening directory", dir, e))?;
    d.sync_all().map_err(|e| StorageError::io("syncing directory", dir, e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::column::ColumnDef;

    fn table_with(column_type: ColumnType) -> TableMeta {
        TableMeta {
            name: "t".into(),
            columns: vec![ColumnDef { name: "d".into(), column_type, nullable: true }],
            partitions: vec![],
            row_count: 0,
            format: "heap".into(),
            partition_by: "d".into(),
            filegroups: vec![],
            files: vec![],
            interleave_bytes: 65536,
            size_bytes: 0,
            source: "test".into(),
            load_lsn: 1,
        }
    }

    /// Found by fuzz/catalog: partition page counts summing past u64::MAX overflowed in
    /// `TableMeta::page_count` (a panic with overflow checks, a wrong count without).
    #[test]
    fn totals_past_u64_are_corrupt() {
        let dir = tempfile::tempdir().unwrap();
        let partition = |page_count| crate::PartitionMeta { index: 0, row_count: 1, page_count, filegroup: 0, runs: vec![], row_groups: vec![] };
        let mut table = table_with(ColumnType::Int64);
        table.partitions = vec![partition(u64::MAX), partition(1)];
        let mut catalog = Catalog::default();
        catalog.tables.insert("t".into(), table.clone());
        catalog.write_atomic(dir.path()).unwrap();
        let err = Catalog::read(dir.path()).unwrap_err().to_string();
        assert!(err.contains("page counts"), "{err}");
        table.partitions[0].page_count = u64::MAX - 1;
        catalog.tables.insert("t".into(), table);
        catalog.write_atomic(dir.path()).unwrap();
        assert_eq!(Catalog::read(dir.path()).unwrap().tables["t"].page_count(), u64::MAX);
    }

    /// Found by fuzz/catalog: a checksummed catalog with decimal(0, 0) was accepted, and the
    /// first scan of the table panicked in `HeapDecoder::finish` (Arrow rebuilt the column
    /// as decimal(38, 10), which no longer matched the schema).
    #[test]
    fn decimal_types_arrow_cannot_build_are_corrupt() {
        let dir = tempfile::tempdir().unwrap();
        for (precision, scale) in [(0u8, 0i8), (19, 2), (40, 2), (5, 6)] {
            let mut catalog = Catalog::default();
            catalog.tables.insert("t".into(), table_with(ColumnType::Decimal { precision, scale }));
            catalog.write_atomic(dir.path()).unwrap();
            let err = Catalog::read(dir.path()).unwrap_err();
            assert!(matches!(err, StorageError::CatalogCorrupt { .. }), "decimal({precision}, {scale}): {err}");
        }
        for (precision, scale) in [(1u8, 0i8), (15, 2), (18, 18), (10, -2)] {
            let mut catalog = Catalog::default();
            catalog.tables.insert("t".into(), table_with(ColumnType::Decimal { precision, scale }));
            catalog.write_atomic(dir.path()).unwrap();
            let read = Catalog::read(dir.path()).unwrap();
            let mut decoder = crate::HeapDecoder::new(&read.tables["t"], &[0]);
            assert_eq!(decoder.finish().num_rows(), 0);
        }
    }
}
