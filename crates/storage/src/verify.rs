//! `flashscan verify` and `partitions --verify`: read every byte a table's catalog entry
//! points at and check it the way a scan would, reporting every failure (not only the
//! first) with the file, the offset and what to do.
//!
//! - heap tables: each data file's length; every page of every run through the scan's
//!   `HeapDecoder` (checksum, page id, header bounds, every row decoded); rows per partition
//!   against the catalog;
//! - column store tables: every row group's metadata (checksum, bounds, against the
//!   catalog) and every column segment decoded (checksum, header against the directory).
//!
//! Index nodes are checked by the index crate (`flashscan_index::verify`), which reports
//! into the same `VerifyReport`.

use std::fs::File;
use std::path::Path;

use serde::Serialize;

use crate::columnstore::RowGroupReader;
use crate::database::Database;
use crate::error::StorageError;
use crate::heap::decoder::HeapDecoder;
use crate::page_path::FileReader;
use crate::heap::PAGE_SIZE_BYTES;
use crate::table_meta::TableMeta;

/// Pages read per call while verifying: 1 MB.
const VERIFY_READ_PAGES: usize = 128;
/// Failures kept in a report: past this, only counted (a wholly damaged file would
/// otherwise print a line per page).
pub const VERIFY_FAILURES_MAX: usize = 1000;

/// What was checked.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct VerifyCounts {
    pub tables_count: u64,
    pub data_files_count: u64,
    pub heap_pages_count: u64,
    pub row_groups_count: u64,
    pub segments_count: u64,
    pub rows_count: u64,
    pub indexes_count: u64,
    pub index_nodes_count: u64,
}

/// One damaged place.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct VerifyFailure {
    /// The table (or `table.index` for an index).
    pub object: String,
    pub file: String,
    pub offset_bytes: u64,
    pub what: String,
    pub action: String,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct VerifyReport {
    pub counts: VerifyCounts,
    pub failures: Vec<VerifyFailure>,
    /// Failures past `VERIFY_FAILURES_MAX`, counted but not listed.
    pub failures_not_listed_count: u64,
}

impl VerifyReport {
    pub fn is_clean(&self) -> bool {
        self.failures.is_empty() && self.failures_not_listed_count == 0
    }

    pub fn fail(&mut self, object: &str, file: &Path, offset_bytes: u64, what: String, action: &str) {
        if self.failures.len() >= VERIFY_FAILURES_MAX {
            self.failures_not_listed_count += 1;
            return;
        }
        self.failures.push(VerifyFailure { object: object.to_string(), file: file.display().to_string(), offset_bytes, what, action: action.to_string() });
    }
}

const RELOAD: &str = "scans of this table fail until it is reloaded (or restored from a backup)";

/// Checks one table into `report`. Errors only when the check itself cannot run.
pub fn verify_table(db: &Database, table: &TableMeta, report: &mut VerifyReport) {
    report.counts.tables_count += 1;
    for f in &table.files {
        report.counts.data_files_count += 1;
        let path = db.resolve(&f.path);
        match std::fs::symlink_metadata(&path) {
            Ok(m) if !m.is_file() => report.fail(&table.name, &path, 0, "is not a regular file".into(), RELOAD),
            Ok(m) if m.len() < f.page_count * PAGE_SIZE_BYTES as u64 => {
                report.fail(&table.name, &path, m.len(), format!("data file is truncated: {} bytes, its {} pages need {}", m.len(), f.page_count, f.page_count * PAGE_SIZE_BYTES as u64), RELOAD)
            }
            Ok(_) => {}
            Err(e) => report.fail(&table.name, &path, 0, format!("cannot be opened: {e}"), RELOAD),
        }
    }
    if table.is_column_store() {
        verify_row_groups(db, table, report);
    } else {
        verify_heap(db, table, report);
    }
}

/// Reads `bytes.len()` bytes at `offset_bytes` of `path` through the page path (the one way
/// table files are read), after `open` checked the file is no link.
fn read_exact_at(_file: &File, path: &Path, bytes: &mut [u8], offset_bytes: u64) -> Result<(), StorageError> {
    let mut reader = FileReader::open_sized(&[path.to_path_buf()], bytes.len())?;
    let read = reader.read(0, offset_bytes, bytes.len() as u64)?;
    if read.len() != bytes.len() {
        return Err(StorageError::FileTruncated { file: path.to_path_buf(), expected_bytes: offset_bytes.saturating_add(bytes.len() as u64), actual_bytes: offset_bytes.saturating_add(read.len() as u64) });
    }
    bytes.copy_from_slice(&read);
    Ok(())
}

fn open(path: &Path) -> Result<File, StorageError> {
    crate::fs_safe::open_read_nofollow(path).map_err(|e| StorageError::io("opening data file", path, e))
}

fn verify_heap(db: &Database, table: &TableMeta, report: &mut VerifyReport) {
    let projection: Vec<usize> = (0..table.columns.len()).collect();
    let mut buf = vec![0u8; VERIFY_READ_PAGES * PAGE_SIZE_BYTES];
    for partition in &table.partitions {
        let mut rows = 0u64;
        let mut damaged = false;
        for run in &partition.runs {
            let path = db.file_path(run);
            let file = match open(&path) {
                Ok(f) => f,
                Err(e) => {
                    report.fail(&table.name, &path, run.offset_bytes, e.to_string(), RELOAD);
                    damaged = true;
                    continue;
                }
            };
            let mut decoder = match HeapDecoder::try_new(table, &projection) {
                Ok(d) => d,
                Err(e) => {
                    report.fail(&table.name, &path, 0, e.to_string(), RELOAD);
                    return;
                }
            };
            let mut done = 0u64;
            while done < u64::from(run.page_count) {
                let n = (u64::from(run.page_count) - done).min(VERIFY_READ_PAGES as u64) as usize;
                let Some(offset) = done.checked_mul(PAGE_SIZE_BYTES as u64).and_then(|d| d.checked_add(run.offset_bytes)) else {
                    report.fail(&table.name, &path, run.offset_bytes, "run offset past 2^64".into(), RELOAD);
                    damaged = true;
                    break;
                };
                let bytes = &mut buf[..n * PAGE_SIZE_BYTES];
                if let Err(e) = read_exact_at(&file, &path, bytes, offset) {
                    report.fail(&table.name, &path, offset, e.to_string(), RELOAD);
                    damaged = true;
                    break;
                }
                for (i, page) in bytes.chunks_exact(PAGE_SIZE_BYTES).enumerate() {
                    report.counts.heap_pages_count += 1;
                    let page_offset = offset + (i * PAGE_SIZE_BYTES) as u64;
                    let page_id = run.first_page_id.wrapping_add(done + i as u64);
                    if let Err(e) = decoder.push_page(page, page_id, &path, page_offset) {
                        report.fail(&table.name, &path, page_offset, e.to_string(), RELOAD);
                        damaged = true;
                        // Start a clean decoder (the rows count no longer matters: the
                        // partition is reported damaged).
                        match HeapDecoder::try_new(table, &projection) {
                            Ok(d) => decoder = d,
                            Err(_) => return,
                        }
                    }
                }
                done += n as u64;
                if decoder.rows_buffered() >= 64 * 1024 {
                    rows += decoder.finish().num_rows() as u64;
                }
            }
            rows += decoder.finish().num_rows() as u64;
        }
        report.counts.rows_count += rows;
        if !damaged && rows != partition.row_count {
            let file = partition.runs.first().map(|r| db.file_path(r)).unwrap_or_else(|| db.dir().to_path_buf());
            report.fail(&table.name, &file, 0, format!("partition {} holds {rows} rows on disk, the catalog says {}", partition.index, partition.row_count), RELOAD);
        }
    }
}

fn verify_row_groups(db: &Database, table: &TableMeta, report: &mut VerifyReport) {
    for partition in &table.partitions {
        let mut rows = 0u64;
        let mut damaged = false;
        for row_group in &partition.row_groups {
            report.counts.row_groups_count += 1;
            let path = db.resolve(&row_group.file);
            let at = row_group.offset_bytes;
            let mut check = || -> Result<u64, StorageError> {
                let file = open(&path)?;
                // The length from the catalog is checked against the file before allocating.
                let file_bytes = file.metadata().map_err(|e| StorageError::io("checking", &path, e))?.len();
                let end = at.checked_add(row_group.total_bytes);
                if end.is_none_or(|end| end > file_bytes) {
                    return Err(StorageError::FileTruncated { file: path.clone(), expected_bytes: end.unwrap_or(u64::MAX), actual_bytes: file_bytes });
                }
                let mut bytes = vec![0u8; row_group.total_bytes as usize];
                read_exact_at(&file, &path, &mut bytes, at)?;
                let reader = RowGroupReader::open(&bytes, &path, at)?;
                crate::columnstore::table_reader::check_against_catalog(&reader, table, row_group, &path)?;
                let mut first_error = None;
                for column in 0..reader.column_count() {
                    report.counts.segments_count += 1;
                    if let Err(e) = reader.read_column(column) {
                        let (segment_offset, _) = reader.column_byte_range(column);
                        report.fail(&table.name, &path, at + segment_offset, StorageError::from(e).to_string(), RELOAD);
                        first_error.get_or_insert(());
                    }
                }
                if first_error.is_some() {
                    damaged = true;
                }
                Ok(reader.row_count() as u64)
            };
            match check() {
                Ok(n) => rows += n,
                Err(e) => {
                    damaged = true;
                    report.fail(&table.name, &path, at, e.to_string(), RELOAD);
                }
            }
        }
        report.counts.rows_count += rows;
        if !damaged && rows != partition.row_count {
            report.fail(&table.name, db.dir(), 0, format!("partition {} holds {rows} rows on disk, the catalog says {}", partition.index, partition.row_count), RELOAD);
        }
    }
}
