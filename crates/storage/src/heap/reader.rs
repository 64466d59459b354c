//! A plain reader of a table's pages (one 1 MB read at a time, in order, through the
//! buffer pool's streaming path — `page_path`): for tools, tests and checks. Column store
//! tables are read through `columnstore::table_reader`. Scans at device speed live in
//! flashscan-exec; this one favours simplicity.

use arrow::array::RecordBatch;

use crate::database::Database;
use crate::error::StorageError;
use crate::heap::decoder::HeapDecoder;
use crate::page_path::FileReader;
use crate::heap::PAGE_SIZE_BYTES;
use crate::table_meta::{PartitionMeta, TableMeta};
use crate::heap::PageId;
use crate::row_id::RowId;

/// Checks every data file of the table exists and is as long as the catalog says.
pub fn check_files(db: &Database, table: &TableMeta) -> Result<(), StorageError> {
    for f in &table.files {
        let path = db.resolve(&f.path);
        let len = std::fs::metadata(&path).map_err(|e| StorageError::io("opening data file", &path, e))?.len();
        let needed = f.page_count * PAGE_SIZE_BYTES as u64;
        if len < needed {
            return Err(StorageError::FileTruncated { file: path, expected_bytes: f.size_bytes, actual_bytes: len });
        }
    }
    Ok(())
}

/// Reads the pages of one partition (runs in order), handing `on_batch` a batch of the
/// projected columns every ~64K rows and at the end.
pub fn read_partition(
    db: &Database,
    table: &TableMeta,
    partition: &PartitionMeta,
    projection: &[usize],
    on_batch: &mut dyn FnMut(RecordBatch) -> Result<(), StorageError>,
) -> Result<(), StorageError> {
    read_partition_live(db, table, partition, projection, &[], on_batch)
}

/// `read_partition` without the rows named in `deleted` (row ids of the table's deleted
/// rows file, strictly ascending): what `rebuild` copies, so a rebuild reclaims their space.
pub fn read_partition_live(
    db: &Database,
    table: &TableMeta,
    partition: &PartitionMeta,
    projection: &[usize],
    deleted: &[u64],
    on_batch: &mut dyn FnMut(RecordBatch) -> Result<(), StorageError>,
) -> Result<(), StorageError> {
    debug_assert!(deleted.windows(2).all(|w| w[0] < w[1]), "deleted row ids strictly ascending");
    if table.is_column_store() {
        if !deleted.is_empty() {
            return Err(StorageError::InvalidArgument(format!("table {} is a column store with deleted rows, which this version does not write", table.name)));
        }
        return crate::columnstore::table_reader::read_partition_row_groups(db, table, partition, projection, on_batch);
    }
    let mut decoder = HeapDecoder::try_new(table, projection)?;
    // Per row decoded since the last batch: whether it is live (only when some row is deleted).
    let mut live = LiveRows::default();
    let Some(mut reader) = FileReader::open_distinct(partition.runs.iter().map(|run| db.file_path(run)))? else {
        return Ok(());
    };
    for run in &partition.runs {
        let path = db.file_path(run);
        let file_index = reader.file_index(&path)?;
        let length = run.page_count as u64 * PAGE_SIZE_BYTES as u64;
        reader.for_each_extent(file_index, run.offset_bytes, length, PAGE_SIZE_BYTES as u64, &mut |offset, bytes| {
            let first_page = (offset - run.offset_bytes) / PAGE_SIZE_BYTES as u64;
            for (i, page) in bytes.chunks_exact(PAGE_SIZE_BYTES).enumerate() {
                let page_offset = offset + (i * PAGE_SIZE_BYTES) as u64;
                let page_id = run.first_page_id + first_page + i as u64;
                let rows = decoder.push_page(page, page_id, &path, page_offset)?;
                live.push_page(deleted, PageId(page_id), rows);
            }
            if decoder.rows_buffered() >= 64 * 1024 {
                on_batch(live.filter(decoder.finish(), db.dir())?)?;
            }
            Ok(())
        })?;
    }
    if decoder.rows_buffered() > 0 {
        on_batch(live.filter(decoder.finish(), db.dir())?)?;
    }
    Ok(())
}

/// Which decoded rows are live, page by page, against a sorted list of deleted row ids.
#[derive(Default)]
struct LiveRows {
    keep: Vec<bool>,
    any_deleted: bool,
}

impl LiveRows {
    fn push_page(&mut self, deleted: &[u64], page: PageId, rows: u32) {
        if deleted.is_empty() {
            return;
        }
        // Row ids sort by (file, page, slot): the page's deleted rows are one range.
        let first = RowId::in_page(page, 0).map_or(u64::MAX, |id| id.0);
        let start = deleted.partition_point(|&id| id < first);
        let mut on_page = deleted[start..].iter().map(|&id| RowId(id)).take_while(|id| id.page() == Some(page)).filter_map(|id| id.slot()).peekable();
        for slot in 0..rows {
            let is_deleted = on_page.next_if(|&s| s as u32 == slot).is_some();
            self.any_deleted |= is_deleted;
            self.keep.push(!is_deleted);
        }
    }

    /// `batch` without its deleted rows (as is when none is).
    fn filter(&mut self, batch: RecordBatch, db_dir: &std::path::Path) -> Result<RecordBatch, StorageError> {
        let keep = std::mem::take(&mut self.keep);
        if !std::mem::take(&mut self.any_deleted) {
            return Ok(batch);
        }
        debug_assert_eq!(keep.len(), batch.num_rows(), "one live flag per decoded row");
        arrow::compute::filter_record_batch(&batch, &arrow::array::BooleanArray::from(keep))
            .map_err(|source| StorageError::Arrow { path: db_dir.to_path_buf(), source })
    }
}

/// Reads the whole table, partition by partition (heap pages or row groups), as batches of
/// the projected columns.
pub fn read_table(db: &Database, table: &TableMeta, projection: &[usize]) -> Result<Vec<RecordBatch>, StorageError> {
    let mut batches = Vec::new();
    for partition in &table.partitions {
        read_partition(db, table, partition, projection, &mut |b| {
            batches.push(b);
            Ok(())
        })?;
    }
    Ok(batches)
}
