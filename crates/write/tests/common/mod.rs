//! The write tests' kit: a table's rows as a new reader sees them.
#![allow(dead_code)]

use std::path::Path;

use arrow::array::AsArray;
use arrow::datatypes::Int64Type;
use arrow::record_batch::RecordBatch;
use flashscan_storage::heap::reader::read_table;
use flashscan_storage::Database;
use flashscan_write::WritePath;

/// Every row of `table` (all columns): its pages (the heap reader) plus its delta replayed
/// from the log, as a fresh open sees them.
pub fn table_batches(db: &Path, table: &str) -> Vec<RecordBatch> {
    let wp = WritePath::open(db).unwrap().unwrap();
    let catalog = wp.catalog().unwrap();
    let meta = &catalog.tables[table];
    let projection: Vec<usize> = (0..meta.columns.len()).collect();
    let mut batches = read_table(&Database::open(db).unwrap(), meta, &projection).unwrap();
    if let Some(delta) = wp.delta(table) {
        for p in 0..meta.partitions.len() {
            if let Some(b) = delta.decode(meta, p, &projection).unwrap() {
                batches.push(b);
            }
        }
    }
    batches
}

/// The ids (first column, BIGINT) of every row of `table`, sorted.
pub fn sorted_ids(db: &Path, table: &str) -> Vec<i64> {
    let mut ids: Vec<i64> = table_batches(db, table).iter().flat_map(|b| b.column(0).as_primitive::<Int64Type>().values().to_vec()).collect();
    ids.sort();
    ids
}
