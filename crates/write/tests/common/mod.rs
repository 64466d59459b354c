//! The write tests' kit: a new database with its tables in a temporary directory, the
//! test's writer, and a table's rows as a new reader sees them.
#![allow(dead_code)]

use std::ops::Deref;
use std::path::{Path, PathBuf};

use arrow::array::AsArray;
use arrow::datatypes::Int64Type;
use arrow::record_batch::RecordBatch;
use flashscan_storage::heap::reader::read_table;
use flashscan_storage::{ColumnDef, Database};
use flashscan_write::{init_database, InitOptions, NewTable, WritePath};
use tempfile::TempDir;

/// `init` at `db`, then `tables` created, each with `columns` and `partition_count` hash
/// partitions on `id`.
pub fn create_db(db: &Path, init: &InitOptions, tables: &[&str], columns: &[ColumnDef], partition_count: u32) {
    init_database(db, init).unwrap();
    let wp = writer(db);
    for t in tables {
        let table = NewTable { name: (*t).into(), columns: columns.to_vec(), partition_count: Some(partition_count), partition_by: Some("id".into()), if_not_exists: false, indexes: Vec::new(), ..Default::default() };
        wp.create_table(table).unwrap();
    }
    wp.close().unwrap();
}

/// The one writer a test opens on `db` (holder "test").
pub fn writer(db: &Path) -> WritePath {
    WritePath::open_writer(db, "test").unwrap()
}

/// A database made by `create_db` at `dir/db`; the temporary directory lives as long as
/// this. Derefs to the database's path.
pub struct TestDb {
    pub dir: TempDir,
    path: PathBuf,
}

impl TestDb {
    pub fn new(init: &InitOptions, tables: &[&str], columns: &[ColumnDef], partition_count: u32) -> TestDb {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db");
        create_db(&path, init, tables, columns, partition_count);
        TestDb { dir, path }
    }

    pub fn writer(&self) -> WritePath {
        writer(&self.path)
    }
}

impl Deref for TestDb {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.path
    }
}

impl AsRef<Path> for TestDb {
    fn as_ref(&self) -> &Path {
        &self.path
    }
}

/// Every row of `table` (all columns): its pages (the heap reader) plus its delta replayed
/// from the log, as a fresh open sees them.
pub fn table_batches(db: &Path, table: &str) -> Vec<RecordBatch> {
    let wp = WritePath::open(db).unwrap();
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
