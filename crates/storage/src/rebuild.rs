//! `ALTER TABLE … REBUILD WITH (DATA_COMPRESSION = …)`: rewrite a table in another format.
//!
//! The table is read partition by partition (any heap format, through `HeapDecoder`),
//! re-encoded, and written beside the old one into new files (their names carry the new
//! catalog generation, so they never collide). Only once every new file is synced is the
//! catalog switched, by the loader's atomic commit (tmp, fsync, rename, fsync of the
//! directory); only then are the old files removed. Any error before the commit removes
//! the new files and leaves the old table as it was, visible and intact.

use std::path::{Path, PathBuf};
use std::time::Instant;

use crate::catalog::Catalog;
use crate::database::Database;
use crate::error::StorageError;
use crate::heap_reader::read_partition;
use crate::load::batch_encoder::PagesMessage;
use crate::load::lock_database;
use crate::load::partition_writer::{PartitionWriter, WritePlan};
use crate::page::page_encoder::{HeapFormat, PageEncoder};
use crate::page::Lsn;

/// The formats a table can be rebuilt into (`--compression`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RebuildTarget {
    Heap(HeapFormat),
    ColumnStore { archive: bool },
}

impl RebuildTarget {
    /// Parses `none|row|page|columnstore|columnstore_archive`.
    pub fn parse(s: &str) -> Result<RebuildTarget, StorageError> {
        Ok(match s.to_ascii_lowercase().as_str() {
            "none" => RebuildTarget::Heap(HeapFormat::Plain),
            "row" => RebuildTarget::Heap(HeapFormat::Row),
            "page" => RebuildTarget::Heap(HeapFormat::Page),
            "columnstore" => RebuildTarget::ColumnStore { archive: false },
            "columnstore_archive" => RebuildTarget::ColumnStore { archive: true },
            _ => return Err(StorageError::InvalidArgument(format!("--compression {s:?}: choose none, row, page, columnstore or columnstore_archive"))),
        })
    }
}

/// Where a rebuild is, for a progress line.
#[derive(Debug, Clone, Copy)]
pub struct RebuildProgress {
    pub partition_index: u32,
    pub partition_count: u32,
    pub rows_done: u64,
    pub rows_total: u64,
    pub bytes_written: u64,
}

#[derive(Default)]
pub struct RebuildOptions<'a> {
    /// Test hook: fail as if the disk were full after this many new pages.
    pub fault_after_pages: Option<u64>,
    pub progress: Option<&'a (dyn Fn(RebuildProgress) + Sync)>,
}

#[derive(Debug, Clone)]
pub struct RebuildReport {
    pub table: String,
    pub old_format: String,
    pub new_format: String,
    pub row_count: u64,
    pub old_size_bytes: u64,
    pub new_size_bytes: u64,
    pub old_page_count: u64,
    pub new_page_count: u64,
    pub seconds: f64,
}

/// The directory each of the table's files lives in: the database directory for relative
/// catalog paths, the file's parent for absolute ones (other volumes).
fn table_volumes(db_dir: &Path, paths: impl Iterator<Item = String>) -> Vec<PathBuf> {
    let mut volumes: Vec<PathBuf> = Vec::new();
    for p in paths {
        let path = Path::new(&p);
        let v = if path.is_absolute() { path.parent().map_or_else(|| db_dir.to_path_buf(), Path::to_path_buf) } else { db_dir.to_path_buf() };
        if !volumes.contains(&v) {
            volumes.push(v);
        }
    }
    if volumes.is_empty() {
        volumes.push(db_dir.to_path_buf());
    }
    volumes
}

/// Rebuilds `table_name` in `db_dir` into `target` and commits it.
pub fn rebuild_table(db_dir: &Path, table_name: &str, target: RebuildTarget, options: &RebuildOptions) -> Result<RebuildReport, StorageError> {
    let started = Instant::now();
    let format = match target {
        RebuildTarget::Heap(f) => f,
        RebuildTarget::ColumnStore { .. } => {
            return Err(StorageError::InvalidArgument(
                "rebuild into a column store is not built yet (row groups need a place in the catalog the scans agree on); use none, row or page".into(),
            ))
        }
    };
    let db = Database::open(db_dir)?;
    let _lock = lock_database(db_dir)?;
    // Re-read under the lock: another writer may have committed since `open`.
    let db = Database::open(db.dir())?;
    let catalog: Catalog = db.catalog().clone();
    let old = db.table(table_name)?.clone();
    if !old.format.starts_with("heap") {
        return Err(StorageError::InvalidArgument(format!("table {} is stored as {:?}; rebuilding from that format is not built yet", old.name, old.format)));
    }
    let partition_count = old.partitions.len() as u32;
    if partition_count == 0 {
        return Err(StorageError::InvalidArgument(format!("table {} has no partitions", old.name)));
    }
    let volumes = table_volumes(db_dir, old.files.iter().map(|f| f.path.clone()));
    let generation = catalog.generation + 1;
    let lsn = Lsn(catalog.next_lsn);
    let first_file_id = catalog.next_file_id;
    let next_file_id = u32::try_from(first_file_id as u64 + partition_count as u64 * volumes.len() as u64)
        .map_err(|_| StorageError::InvalidArgument("the database has used all 2^32 data file ids".into()))?;
    let database_id = format!("{:08x}", crc32c::crc32c(std::path::absolute(db_dir).unwrap_or_else(|_| db_dir.to_path_buf()).to_string_lossy().as_bytes()));
    let mut writer = PartitionWriter::new(WritePlan {
        db_dir: db_dir.to_path_buf(),
        table_name: old.name.clone(),
        partition_count,
        volumes,
        interleave_bytes: old.interleave_bytes,
        first_file_id,
        generation,
        lsn,
        external_prefix: format!("flashscan-{database_id}"),
        fault_after_pages: options.fault_after_pages,
    });

    let projection: Vec<usize> = (0..old.columns.len()).collect();
    let mut rows_done = 0u64;
    let result = (|| {
        for (p, partition) in old.partitions.iter().enumerate() {
            let mut encoder = PageEncoder::new(&old.name, &old.columns, format);
            let send = |encoder: &mut PageEncoder, writer: &mut PartitionWriter| -> Result<(), StorageError> {
                if encoder.pages.is_empty() {
                    return Ok(());
                }
                let pages = std::mem::take(&mut encoder.pages);
                let row_count = std::mem::take(&mut encoder.rows_in_pages);
                writer.write(PagesMessage { partition: p as u32, pages, row_count })
            };
            read_partition(&db, &old, partition, &projection, &mut |batch| {
                encoder.push_batch(&batch)?;
                send(&mut encoder, &mut writer)?;
                rows_done += batch.num_rows() as u64;
                if let Some(progress) = options.progress {
                    progress(RebuildProgress { partition_index: p as u32, partition_count, rows_done, rows_total: old.row_count, bytes_written: writer.bytes_written() });
                }
                Ok(())
            })?;
            encoder.finish()?;
            send(&mut encoder, &mut writer)?;
        }
        writer.finish()
    })();
    let written = match result {
        Ok(w) => w,
        Err(e) => {
            writer.remove_created();
            return Err(e);
        }
    };
    if written.row_count != old.row_count {
        writer.remove_created();
        return Err(StorageError::Worker(format!("rebuild wrote {} rows, the table has {}; the old table is kept", written.row_count, old.row_count)));
    }

    let mut table = old.clone();
    table.partitions = written.partitions;
    table.filegroups = written.filegroups;
    table.files = written.files;
    table.size_bytes = written.size_bytes;
    table.format = format.catalog_name().to_string();
    table.load_lsn = lsn.0;
    let report = RebuildReport {
        table: old.name.clone(),
        old_format: old.format.clone(),
        new_format: table.format.clone(),
        row_count: table.row_count,
        old_size_bytes: old.size_bytes,
        new_size_bytes: table.size_bytes,
        old_page_count: old.page_count(),
        new_page_count: table.page_count(),
        seconds: 0.0,
    };
    let mut next = catalog.clone();
    next.generation = generation;
    next.next_file_id = next_file_id;
    next.next_lsn = lsn.0 + 1;
    next.tables.insert(old.name.clone(), table);
    if let Err(e) = next.write_atomic(db_dir) {
        writer.remove_created();
        return Err(e);
    }
    // Committed: the old files are no longer referenced.
    for f in &old.files {
        let _ = std::fs::remove_file(db.resolve(&f.path));
    }
    Ok(RebuildReport { seconds: started.elapsed().as_secs_f64(), ..report })
}
