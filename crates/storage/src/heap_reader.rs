//! A plain reader of a table's pages (pread, one run at a time): for tools, tests and
//! checks. Column store tables are read through `columnstore::table_reader`. Scans at device speed live in flashscan-exec; this one favours simplicity.

use std::fs::File;
use std::os::unix::fs::FileExt;

use arrow::array::RecordBatch;

use crate::database::Database;
use crate::error::StorageError;
use crate::heap_decoder::HeapDecoder;
use crate::page::PAGE_SIZE_BYTES;
use crate::table_meta::{PartitionMeta, TableMeta};

/// Pages read per call: 1 MB.
const READ_PAGES_MAX: usize = 128;

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
    if table.is_column_store() {
        return crate::columnstore::table_reader::read_partition_row_groups(db, table, partition, projection, on_batch);
    }
    let mut decoder = HeapDecoder::try_new(table, projection)?;
    let mut buf = vec![0u8; READ_PAGES_MAX * PAGE_SIZE_BYTES];
    for run in &partition.runs {
        let path = db.file_path(run);
        let file = File::open(&path).map_err(|e| StorageError::io("opening data file", &path, e))?;
        let mut done = 0u32;
        while done < run.page_count {
            let n = (run.page_count - done).min(READ_PAGES_MAX as u32) as usize;
            let offset = run.offset_bytes + done as u64 * PAGE_SIZE_BYTES as u64;
            let bytes = &mut buf[..n * PAGE_SIZE_BYTES];
            read_exact_at(&file, &path, bytes, offset)?;
            for (i, page) in bytes.chunks_exact(PAGE_SIZE_BYTES).enumerate() {
                let page_offset = offset + (i * PAGE_SIZE_BYTES) as u64;
                decoder.push_page(page, run.first_page_id + done as u64 + i as u64, &path, page_offset)?;
            }
            done += n as u32;
            if decoder.rows_buffered() >= 64 * 1024 {
                on_batch(decoder.finish())?;
            }
        }
    }
    if decoder.rows_buffered() > 0 {
        on_batch(decoder.finish())?;
    }
    Ok(())
}

/// Fills `bytes` from `offset` of `file`, or says the file is too short.
pub(crate) fn read_exact_at(file: &File, path: &std::path::Path, bytes: &mut [u8], offset: u64) -> Result<(), StorageError> {
    let mut filled = 0;
    while filled < bytes.len() {
        let got = file.read_at(&mut bytes[filled..], offset + filled as u64).map_err(|e| StorageError::io("reading", path, e))?;
        if got == 0 {
            let actual = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
            return Err(StorageError::FileTruncated { file: path.to_path_buf(), expected_bytes: offset + bytes.len() as u64, actual_bytes: actual });
        }
        filled += got;
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
