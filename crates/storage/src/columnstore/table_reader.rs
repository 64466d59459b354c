//! A plain reader of a column store table's row groups (one row group at a time, read in
//! 1 MB extents through the buffer pool's streaming path — `page_path`): for rebuilds,
//! tools, tests and checks. The scan at device speed, which reads only the
//! needed columns, lives in flashscan-exec (`columnstore_source`).

use std::path::Path;

use arrow::array::RecordBatch;

use super::row_group::RowGroupReader;
use crate::database::Database;
use crate::live_rows::{deleted_rows_of_group, row_group_first_pages, DeletedRowSet};
use crate::error::StorageError;
use crate::page_path::FileReader;
use crate::table_meta::{PartitionMeta, RowGroupMeta, TableMeta};

/// Reads a row group's metadata (header, directory, names) and checks it opens (checksum)
/// and agrees with the catalog. Returns the bytes, for `RowGroupReader::open`.
pub fn read_row_group_metadata(db_dir: &Path, table: &TableMeta, row_group: &RowGroupMeta) -> Result<Vec<u8>, StorageError> {
    // join keeps an absolute path (a file on another volume) as it is.
    let path = db_dir.join(&row_group.file);
    let mut reader = FileReader::open_sized(std::slice::from_ref(&path), row_group.metadata_bytes as usize)?;
    let bytes = reader.read(0, row_group.offset_bytes, row_group.metadata_bytes)?;
    let reader = RowGroupReader::open(&bytes, &path, row_group.offset_bytes)?;
    check_against_catalog(&reader, table, row_group, &path)?;
    Ok(bytes)
}

/// The row group's header must say what the catalog says: same rows, same size, same
/// columns in the same order with the same types. A mismatch is a wrong or stale file.
pub fn check_against_catalog(reader: &RowGroupReader, table: &TableMeta, row_group: &RowGroupMeta, path: &Path) -> Result<(), StorageError> {
    let corrupt = |reason: String| StorageError::PageCorrupt { file: path.to_path_buf(), page_id: 0, offset_bytes: row_group.offset_bytes, reason };
    if reader.row_count() as u64 != row_group.row_count || reader.total_bytes() != row_group.total_bytes {
        return Err(corrupt(format!(
            "row group holds {} rows in {} bytes, the catalog says {} rows in {} bytes",
            reader.row_count(),
            reader.total_bytes(),
            row_group.row_count,
            row_group.total_bytes
        )));
    }
    let expected = table.arrow_schema();
    let found = reader.schema();
    if found.fields().len() != expected.fields().len() {
        return Err(corrupt(format!("row group has {} columns, the table {}", found.fields().len(), expected.fields().len())));
    }
    for (f, e) in found.fields().iter().zip(expected.fields()) {
        if f.name() != e.name() || f.data_type() != e.data_type() {
            return Err(corrupt(format!("row group column {} {} does not match the table's {} {}", f.name(), f.data_type(), e.name(), e.data_type())));
        }
    }
    Ok(())
}

/// Reads the row groups of one partition in order, handing `on_batch` one batch of the
/// projected columns per row group, less the rows `deleted` names.
pub fn read_partition_row_groups(
    db: &Database,
    table: &TableMeta,
    partition: &PartitionMeta,
    projection: &[usize],
    deleted: &DeletedRowSet,
    on_batch: &mut dyn FnMut(RecordBatch) -> Result<(), StorageError>,
) -> Result<(), StorageError> {
    let position = table.partitions.iter().position(|p| p.index == partition.index).ok_or_else(|| StorageError::InvalidArgument(format!("table {}: a partition it does not hold", table.name)))?;
    let first_pages = if deleted.is_empty() { Vec::new() } else { row_group_first_pages(table).swap_remove(position) };
    for column in projection {
        if *column >= table.columns.len() {
            return Err(StorageError::InvalidArgument(format!("column {column} out of range: table {} has {}", table.name, table.columns.len())));
        }
    }
    let Some(mut reader) = FileReader::open_distinct(partition.row_groups.iter().map(|row_group| db.resolve(&row_group.file)))? else {
        return Ok(());
    };
    for (g, row_group) in partition.row_groups.iter().enumerate() {
        let path = db.resolve(&row_group.file);
        let file_index = reader.file_index(&path)?;
        let bytes = reader.read(file_index, row_group.offset_bytes, row_group.total_bytes)?;
        let reader = RowGroupReader::open(&bytes, &path, row_group.offset_bytes)?;
        check_against_catalog(&reader, table, row_group, &path)?;
        let batch = reader.read_columns(projection)?;
        let gone = match first_pages.get(g).copied().flatten() {
            Some(first) => deleted_rows_of_group(first, row_group.row_count, &mut |page, out| deleted.slots_on_page(page, out))
                .map_err(|reason| StorageError::PageCorrupt { file: path.clone(), page_id: 0, offset_bytes: row_group.offset_bytes, reason })?,
            None => Vec::new(),
        };
        on_batch(if gone.is_empty() { batch } else { without_rows(&batch, &gone).map_err(|source| StorageError::Arrow { path: path.clone(), source })? })?;
    }
    Ok(())
}

/// `batch` less the rows at `gone` (ascending positions).
pub fn without_rows(batch: &RecordBatch, gone: &[u32]) -> Result<RecordBatch, arrow::error::ArrowError> {
    let mut keep = arrow::array::BooleanBufferBuilder::new(batch.num_rows());
    keep.append_n(batch.num_rows(), true);
    for &row in gone {
        keep.set_bit(row as usize, false);
    }
    arrow::compute::filter_record_batch(batch, &arrow::array::BooleanArray::new(keep.finish(), None))
}
