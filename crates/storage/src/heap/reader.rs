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
use crate::live_rows::{DeletedRowSet, LiveHeapDecoder};

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
    read_partition_live(db, table, partition, projection, &DeletedRowSet::default(), on_batch)
}

/// `read_partition` without the rows in `deleted` (the table's deleted rows file,
/// `DeletedRowSet::of_table`): what `rebuild` copies, so a rebuild reclaims their space.
pub fn read_partition_live(
    db: &Database,
    table: &TableMeta,
    partition: &PartitionMeta,
    projection: &[usize],
    deleted: &DeletedRowSet,
    on_batch: &mut dyn FnMut(RecordBatch) -> Result<(), StorageError>,
) -> Result<(), StorageError> {
    if table.is_column_store() {
        return crate::columnstore::table_reader::read_partition_row_groups(db, table, partition, projection, deleted, on_batch);
    }
    let mut decoder = LiveHeapDecoder::new(HeapDecoder::try_new(table, projection)?, deleted.clone());
    let filtered = |e| StorageError::Arrow { path: db.dir().to_path_buf(), source: e };
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
                decoder.push_page(page, page_id, &path, page_offset)?;
            }
            if decoder.rows_buffered() >= 64 * 1024 {
                on_batch(decoder.finish().map_err(filtered)?)?;
            }
            Ok(())
        })?;
    }
    if decoder.rows_buffered() > 0 {
        on_batch(decoder.finish().map_err(filtered)?)?;
    }
    Ok(())
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
