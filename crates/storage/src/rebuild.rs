//! `ALTER TABLE … REBUILD WITH (DATA_COMPRESSION = …)`: rewrite a table in another format.
//!
//! The table is read partition by partition (any heap format, through `HeapDecoder`),
//! re-encoded, and written beside the old one into new files (their names carry the new
//! catalog generation, so they never collide). Only once every new file is synced is the
//! catalog switched, by the loader's atomic commit (tmp, fsync, rename, fsync of the
//! directory); only then are the old files removed. Any error before the commit removes
//! the new files and leaves the old table as it was, visible and intact.
//!
//! The same copy changes a table's columns (`RebuildOptions::reshape`: SQL's ALTER TABLE
//! … ADD / DROP COLUMN, crates/write `alter.rs`): the rows are read, the columns kept are
//! taken as they are, new ones are filled, and the table is written with its new columns.

use std::path::{Path, PathBuf};
use std::time::Instant;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use arrow::array::{ArrayRef, RecordBatch};
use arrow::compute::concat_batches;

use crate::catalog::Catalog;
use crate::column::ColumnDef;
use crate::columnstore::{encode_row_group, ColumnStoreOptions, RowGroupReader, ROW_GROUP_ROWS_DEFAULT, ROW_GROUP_ROWS_MAX};
use crate::database::Database;
use crate::error::StorageError;
use crate::heap::reader::read_partition_live;
use crate::live_rows::DeletedRowSet;
use crate::load::batch_encoder::PagesMessage;
use crate::load::{abandon_intent, commit_table, lock_database, CatalogStep};
use crate::load::partition_writer::{PartitionWriter, WritePlan, WrittenTable};
use crate::heap::page_encoder::{HeapFormat, PageEncoder};
use crate::heap::Lsn;
use crate::table_meta::TableMeta;

/// The formats a table can be rebuilt into (`--compression`): every table format.
pub use crate::table_format::TableFormat as RebuildTarget;

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
    /// Column store only: rows per row group (default `ROW_GROUP_ROWS_DEFAULT`, ~1M).
    pub row_group_rows: Option<usize>,
    /// Write the rows into this table instead (created, or replaced if it exists), and
    /// keep the source table as it is: `CREATE TABLE … AS` in another format, used by
    /// `bench compression` to hold one copy per format.
    pub into_table: Option<String>,
    pub progress: Option<&'a (dyn Fn(RebuildProgress) + Sync)>,
    /// Change the table's columns while its rows are copied (ALTER TABLE).
    pub reshape: Option<Reshape<'a>>,
    /// Applied to the catalog the rebuild commits, in the same atomic commit (ALTER TABLE
    /// gives the table a new id there, and changes its defaults and sequences).
    pub catalog_change: Option<&'a (dyn Fn(&mut Catalog) -> Result<(), StorageError> + Sync)>,
}

/// The columns a rebuild writes when they are not the old table's (ALTER TABLE … ADD /
/// DROP COLUMN, ALTER COLUMN … TYPE / SET NOT NULL): a copied column whose type differs is
/// converted (CAST, an error on a value that does not fit), one that became NOT NULL is
/// checked.
pub struct Reshape<'a> {
    /// The table's columns after the rebuild.
    pub columns: Vec<ColumnDef>,
    /// For each of `columns`: the old table's column it copies, or `None` for a new one,
    /// whose values `fill` makes.
    pub sources: Vec<Option<usize>>,
    /// The values of the new columns, in order, for `n` rows (called once per batch read,
    /// from several threads for a column store).
    pub fill: &'a (dyn Fn(usize) -> Result<Vec<ArrayRef>, StorageError> + Sync),
}

#[derive(Debug, Clone)]
pub struct RebuildReport {
    pub table: String,
    pub old_format: String,
    pub new_format: String,
    /// Live rows written.
    pub row_count: u64,
    /// Rows DELETE or UPDATE had removed, left behind (their space reclaimed).
    pub deleted_rows_dropped: u64,
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
    Database::open(db_dir)?;
    let _lock = lock_database(db_dir)?;
    rebuild_table_locked(db_dir, table_name, target, options)
}

/// [`rebuild_table`] for a caller that holds the database lock already (the write path:
/// ALTER TABLE), and has nothing of the table outside its pages (a checkpoint first).
pub fn rebuild_table_locked(db_dir: &Path, table_name: &str, target: RebuildTarget, options: &RebuildOptions) -> Result<RebuildReport, StorageError> {
    let started = Instant::now();
    // Re-read under the lock: another writer may have committed since `open`.
    let mut catalog: Catalog = Catalog::read(db_dir)?;
    crate::orphans::sweep_unreferenced(db_dir, &mut catalog)?;
    let db = Database::open(db_dir)?;
    let old = db.table(table_name)?.clone();
    if let Some(rows) = options.row_group_rows {
        if rows == 0 || rows > ROW_GROUP_ROWS_MAX {
            return Err(StorageError::InvalidArgument(format!("--row-group-rows {rows}: choose 1..={ROW_GROUP_ROWS_MAX}")));
        }
    }
    let target_name = options.into_table.as_deref().map_or_else(|| old.name.clone(), str::to_ascii_lowercase);
    // SQL indexes (kept in memory, read rows straight from uncompressed heap pages) go with
    // the table only where they can follow it: the same name, the plain heap.
    if !old.indexes.is_empty() && (target_name != old.name || target.catalog_name() != "heap") {
        let names: Vec<&str> = old.indexes.iter().map(|i| i.name.as_str()).collect();
        return Err(StorageError::InvalidArgument(format!(
            "table {} has SQL indexes ({}), which cover uncompressed heap tables under their own name: rebuild it as heap in place, or drop them first (DROP INDEX / ALTER TABLE … DROP CONSTRAINT)",
            old.name,
            names.join(", ")
        )));
    }
    if !crate::load::valid_table_name(&target_name) {
        return Err(StorageError::InvalidArgument(format!("table name {target_name:?}: use letters, digits and _")));
    }
    // What the commit makes unreferenced: the rebuilt table's own old files, or those of
    // the table replaced by `into_table`.
    let replaced = catalog.tables.get(&target_name).cloned();
    if replaced.as_ref().is_some_and(|r| r.name != old.name && r.source != format!("rebuild of {}", old.name)) {
        return Err(StorageError::InvalidArgument(format!(
            "table {target_name} exists and was not made from {} by a rebuild; flashscan will not replace it",
            old.name
        )));
    }
    let partition_count = old.partitions.len() as u32;
    if partition_count == 0 {
        return Err(StorageError::InvalidArgument(format!("table {} has no partitions", old.name)));
    }
    if options.reshape.is_some() && target_name != old.name {
        return Err(StorageError::InvalidArgument("a rebuild that changes columns rewrites the table in place (no --into)".into()));
    }
    let mut shaped = old.clone();
    let projection: Vec<usize> = match &options.reshape {
        None => (0..old.columns.len()).collect(),
        Some(r) => {
            let copied = r.sources.iter().filter_map(|s| *s);
            if r.columns.len() != r.sources.len() || r.columns.is_empty() || copied.clone().any(|i| i >= old.columns.len()) {
                return Err(StorageError::InvalidArgument(format!("table {}: a column change names columns the table does not have", old.name)));
            }
            shaped.columns = r.columns.clone();
            let mut p: Vec<usize> = copied.collect();
            p.sort_unstable();
            p.dedup();
            p
        }
    };
    let volumes = table_volumes(db_dir, old.files.iter().map(|f| f.path.clone()));
    let generation = catalog.generation + 1;
    let lsn = Lsn(catalog.next_lsn);
    let first_file_id = catalog.next_file_id;
    let next_file_id = u32::try_from(first_file_id as u64 + partition_count as u64 * volumes.len() as u64)
        .map_err(|_| StorageError::InvalidArgument("the database has used all 2^32 data file ids".into()))?;
    let database_id = format!("{:08x}", crc32c::crc32c(std::path::absolute(db_dir).unwrap_or_else(|_| db_dir.to_path_buf()).to_string_lossy().as_bytes()));
    let mut writer = PartitionWriter::new(WritePlan {
        db_dir: db_dir.to_path_buf(),
        table_name: target_name.clone(),
        partition_count,
        volumes,
        interleave_bytes: old.interleave_bytes,
        first_file_id,
        generation,
        lsn,
        external_prefix: format!("flashscan-{database_id}"),
        fault_after_pages: options.fault_after_pages,
    });

    // Rows DELETE and UPDATE removed are not copied: rebuilding is how their space comes back.
    let deleted = DeletedRowSet::of_table(db_dir, &old)?;
    // Never more than the table holds (`of_table` checks).
    let live_row_count = old.row_count - deleted.len();
    let catalog = crate::load::commit_intent(db_dir, &catalog, &writer.planned_paths()?)?;
    let source = Source { db: &db, old: &old, shaped: &shaped, projection: &projection, reshape: options.reshape.as_ref(), deleted: &deleted, live_row_count };
    let result = match target {
        RebuildTarget::Heap(format) => write_heap(&source, format, &mut writer, options),
        RebuildTarget::ColumnStore { archive } => {
            let column_store = ColumnStoreOptions { row_group_rows: options.row_group_rows.unwrap_or(ROW_GROUP_ROWS_DEFAULT), archive };
            write_column_store(&source, column_store, &mut writer, options)
        }
    };

    let written = match result {
        Ok(w) => w,
        Err(e) => {
            abandon_intent(db_dir, &catalog, &mut writer);
            return Err(e);
        }
    };
    if written.row_count != live_row_count {
        abandon_intent(db_dir, &catalog, &mut writer);
        return Err(StorageError::Worker(format!("rebuild wrote {} rows, the table has {live_row_count} live rows; the old table is kept", written.row_count)));
    }

    let mut table = shaped;
    table.partitions = written.partitions;
    table.filegroups = written.filegroups;
    table.files = written.files;
    table.size_bytes = written.size_bytes;
    table.format = target.catalog_name().to_string();
    table.load_lsn = lsn.0;
    table.row_count = written.row_count;
    // The new pages hold live rows only; the old deleted rows file goes with the old table.
    table.deleted_rows = None;
    if target_name != old.name {
        table.name = target_name.clone();
        table.source = format!("rebuild of {}", old.name);
    }
    let report = RebuildReport {
        table: target_name.clone(),
        old_format: old.format.clone(),
        new_format: table.format.clone(),
        row_count: table.row_count,
        deleted_rows_dropped: deleted.len(),
        old_size_bytes: old.size_bytes,
        new_size_bytes: table.size_bytes,
        old_page_count: old.page_count(),
        new_page_count: table.page_count(),
        seconds: 0.0,
    };
    let no_change = |_: &mut Catalog| Ok(());
    commit_table(db_dir, &catalog, table, CatalogStep { generation, next_file_id, lsn }, &mut writer, options.catalog_change.unwrap_or(&no_change))?;
    Ok(RebuildReport { seconds: started.elapsed().as_secs_f64(), ..report })
}

/// What a rebuild copies: the old table's live rows, in the projected columns.
struct Source<'a> {
    db: &'a Database,
    old: &'a TableMeta,
    /// The table as written: the old one, or with `reshape`'s columns.
    shaped: &'a TableMeta,
    projection: &'a [usize],
    reshape: Option<&'a Reshape<'a>>,
    /// Its deleted rows (the deleted rows file), left behind.
    deleted: &'a DeletedRowSet,
    live_row_count: u64,
}

impl Source<'_> {
    /// Reads partition `p`'s live rows, in the columns the table is written with.
    fn read_partition(&self, p: usize, on_batch: &mut dyn FnMut(RecordBatch) -> Result<(), StorageError>) -> Result<(), StorageError> {
        read_partition_live(self.db, self.old, &self.old.partitions[p], self.projection, self.deleted, &mut |batch| match self.reshape {
            None => on_batch(batch),
            Some(r) => on_batch(self.reshaped(r, &batch)?),
        })
    }

    fn reshaped(&self, r: &Reshape, batch: &RecordBatch) -> Result<RecordBatch, StorageError> {
        let rows = batch.num_rows();
        let mut filled = (r.fill)(rows)?.into_iter();
        let mut columns = Vec::with_capacity(r.sources.len());
        for (source, def) in r.sources.iter().zip(&r.columns) {
            let column = match source {
                Some(i) => batch.column(self.projection.binary_search(i).map_err(|_| StorageError::Worker(format!("column {i} was not read")))?).clone(),
                None => filled.next().ok_or_else(|| StorageError::Worker(format!("no values for new column {}", def.name)))?,
            };
            // A column whose type changes (ALTER COLUMN … TYPE) is converted as CAST would,
            // failing on a value that does not fit rather than storing NULL.
            let wanted = def.column_type.arrow_type();
            let column = if column.data_type() == &wanted {
                column
            } else {
                let options = arrow::compute::CastOptions { safe: false, ..Default::default() };
                arrow::compute::cast_with_options(&column, &wanted, &options)
                    .map_err(|e| StorageError::InvalidArgument(format!("column \"{}\" of relation \"{}\" cannot be converted to {wanted}: {e}", def.name, self.old.name)))?
            };
            if column.len() != rows {
                return Err(StorageError::Worker(format!("column {}: {} values for {rows} rows", def.name, column.len())));
            }
            if !def.nullable && column.null_count() > 0 {
                return Err(StorageError::InvalidArgument(format!("column \"{}\" of relation \"{}\" contains null values, which NOT NULL forbids: give the column a DEFAULT, or allow NULL", def.name, self.old.name)));
            }
            columns.push(column);
        }
        RecordBatch::try_new(self.shaped.arrow_schema(), columns).map_err(|e| StorageError::InvalidArgument(format!("table {}: the new columns do not fit: {e}", self.old.name)))
    }
}

/// Writes the table's rows as heap pages (plain, row- or page-compressed), partition by
/// partition.
fn write_heap(source: &Source, format: HeapFormat, writer: &mut PartitionWriter, options: &RebuildOptions) -> Result<WrittenTable, StorageError> {
    let old = source.old;
    let partition_count = old.partitions.len() as u32;
    let mut rows_done = 0u64;
    for p in 0..old.partitions.len() {
        let mut encoder = PageEncoder::new(&old.name, &source.shaped.columns, format);
        let send = |encoder: &mut PageEncoder, writer: &mut PartitionWriter| -> Result<(), StorageError> {
            if encoder.pages.is_empty() {
                return Ok(());
            }
            let pages = std::mem::take(&mut encoder.pages);
            let row_count = std::mem::take(&mut encoder.rows_in_pages);
            writer.write(PagesMessage { partition: p as u32, pages, row_count })
        };
        source.read_partition(p, &mut |batch| {
            encoder.push_batch(&batch)?;
            send(&mut encoder, writer)?;
            rows_done += batch.num_rows() as u64;
            if let Some(progress) = options.progress {
                progress(RebuildProgress { partition_index: p as u32, partition_count, rows_done, rows_total: source.live_row_count, bytes_written: writer.bytes_written() });
            }
            Ok(())
        })?;
        encoder.finish()?;
        send(&mut encoder, writer)?;
    }
    writer.finish()
}

/// One encoded row group on its way from an encoding thread to the writer.
struct EncodedRowGroup {
    partition: u32,
    bytes: Vec<u8>,
    row_count: u64,
    metadata_bytes: u64,
}

/// Writes the table's rows as column store row groups. Partitions are read and encoded on
/// all cores (analysis and compression are the cost); one thread writes, in the order row
/// groups arrive, through a bounded queue so memory stays at a few row groups per core.
fn write_column_store(source: &Source, column_store: ColumnStoreOptions, writer: &mut PartitionWriter, options: &RebuildOptions) -> Result<WrittenTable, StorageError> {
    let old = source.old;
    let partition_count = old.partitions.len() as u32;
    let thread_count = std::thread::available_parallelism().map_or(1, |n| n.get()).min(old.partitions.len()).max(1);
    let next_partition = AtomicUsize::new(0);
    let failed = AtomicBool::new(false);
    let (sender, receiver) = std::sync::mpsc::sync_channel::<Result<EncodedRowGroup, StorageError>>(thread_count);
    let mut write_result: Result<(), StorageError> = Ok(());
    std::thread::scope(|scope| {
        for _ in 0..thread_count {
            let sender = sender.clone();
            let (next_partition, failed) = (&next_partition, &failed);
            scope.spawn(move || loop {
                let p = next_partition.fetch_add(1, Ordering::Relaxed);
                if p >= old.partitions.len() || failed.load(Ordering::Relaxed) {
                    return;
                }
                let result = encode_partition(source, p as u32, column_store, &|group| {
                    if failed.load(Ordering::Relaxed) {
                        return Err(StorageError::Worker("stopped: another partition failed".into()));
                    }
                    sender.send(Ok(group)).map_err(|_| StorageError::Worker("the writer stopped".into()))
                });
                if let Err(e) = result {
                    failed.store(true, Ordering::Relaxed);
                    let _ = sender.send(Err(e));
                    return;
                }
            });
        }
        drop(sender);
        let mut rows_done = 0u64;
        for message in receiver {
            let step = message.and_then(|group| {
                writer.write_row_group(group.partition, &group.bytes, group.row_count, group.metadata_bytes)?;
                rows_done += group.row_count;
                if let Some(progress) = options.progress {
                    progress(RebuildProgress { partition_index: group.partition, partition_count, rows_done, rows_total: source.live_row_count, bytes_written: writer.bytes_written() });
                }
                Ok(())
            });
            if let Err(e) = step {
                failed.store(true, Ordering::Relaxed);
                if write_result.is_ok() {
                    write_result = Err(e);
                }
            }
        }
    });
    write_result?;
    writer.finish()
}

/// Reads partition `p` and encodes its rows into row groups of `row_group_rows`, handing
/// each to `emit` as soon as it is full (and the last, partial one at the end).
fn encode_partition(source: &Source, p: u32, column_store: ColumnStoreOptions, emit: &dyn Fn(EncodedRowGroup) -> Result<(), StorageError>) -> Result<(), StorageError> {
    let db = source.db;
    let schema = source.shaped.arrow_schema();
    let mut pending: Vec<RecordBatch> = Vec::new();
    let mut pending_rows = 0usize;
    let flush = |pending: &mut Vec<RecordBatch>, rows: usize| -> Result<(), StorageError> {
        if rows == 0 {
            return Ok(());
        }
        let batch = concat_batches(&schema, pending.iter()).map_err(|source| StorageError::Arrow { path: db.dir().to_path_buf(), source })?;
        pending.clear();
        let bytes = encode_row_group(&batch, &column_store)?;
        let sizes = RowGroupReader::peek_sizes(&bytes, Path::new("<new row group>"), 0)?;
        emit(EncodedRowGroup { partition: p, bytes, row_count: rows as u64, metadata_bytes: sizes.metadata_bytes })
    };
    source.read_partition(p as usize, &mut |batch| {
        let mut start = 0;
        // Cut batches at row group boundaries, so every row group but the last is full.
        while start < batch.num_rows() {
            let take = (column_store.row_group_rows - pending_rows).min(batch.num_rows() - start);
            pending.push(batch.slice(start, take));
            pending_rows += take;
            start += take;
            if pending_rows == column_store.row_group_rows {
                flush(&mut pending, pending_rows)?;
                pending_rows = 0;
            }
        }
        Ok(())
    })?;
    flush(&mut pending, pending_rows)
}
