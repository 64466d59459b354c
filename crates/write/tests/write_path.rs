//! The write path end to end without SQL: init, CREATE, INSERT as one durable transaction,
//! redo on reopen (also after kill -9 of a child process), checkpoint, a crash between the
//! checkpoint's page writes and its catalog commit, the one-writer lock, refusals.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;

use arrow::array::{Array, AsArray, Int32Array, Int64Array, StringArray};
use arrow::datatypes::{DataType, Field, Int32Type, Int64Type, Schema};
use arrow::record_batch::RecordBatch;
use flashscan_storage::{Catalog, ColumnDef, ColumnType};
use flashscan_write::{checkpoint, init_database, recover, unflushed_rows, CheckpointOptions, InitOptions, NewTable, WriteError, WritePath};

mod common;

const CHILD_ENV: &str = "FLASHSCAN_WRITE_TEST_CHILD_DB";

fn columns() -> Vec<ColumnDef> {
    vec![
        ColumnDef { name: "id".into(), column_type: ColumnType::Int64, nullable: false },
        ColumnDef { name: "qty".into(), column_type: ColumnType::Int32, nullable: false },
        ColumnDef { name: "note".into(), column_type: ColumnType::Utf8, nullable: true },
    ]
}

fn schema() -> Arc<Schema> {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("qty", DataType::Int32, false),
        Field::new("note", DataType::Utf8, true),
    ]))
}

/// Rows `from..to`: id, qty = id * 3 % 1000, note = "n{id}" (NULL for every 7th).
fn batch(from: i64, to: i64) -> RecordBatch {
    let ids: Vec<i64> = (from..to).collect();
    let qty: Vec<i32> = ids.iter().map(|i| (i * 3 % 1000) as i32).collect();
    let notes: Vec<Option<String>> = ids.iter().map(|i| if i % 7 == 0 { None } else { Some(format!("n{i}")) }).collect();
    RecordBatch::try_new(schema(), vec![Arc::new(Int64Array::from(ids)), Arc::new(Int32Array::from(qty)), Arc::new(StringArray::from(notes))]).unwrap()
}

type Row = (i64, i32, Option<String>);

fn rows_of(batches: &[RecordBatch]) -> Vec<Row> {
    let mut out = Vec::new();
    for b in batches {
        let id = b.column(0).as_primitive::<Int64Type>();
        let q = b.column(1).as_primitive::<Int32Type>();
        let n = arrow::compute::cast(b.column(2), &DataType::Utf8).unwrap();
        let n = n.as_string::<i32>();
        for r in 0..b.num_rows() {
            out.push((id.value(r), q.value(r), if n.is_null(r) { None } else { Some(n.value(r).to_string()) }));
        }
    }
    out.sort();
    out
}

fn expected(from: i64, to: i64) -> Vec<Row> {
    rows_of(&[batch(from, to)])
}

/// Every row of table `t`: its pages (the heap reader) plus its delta (replayed from the log).
fn all_rows(db: &Path) -> Vec<Row> {
    rows_of(&common::table_batches(db, "t"))
}

/// A new database (1 MiB log segments) with table `t` in 3 partitions.
fn new_db() -> common::TestDb {
    common::TestDb::new(&InitOptions { segment_size_bytes: Some(1 << 20), ..Default::default() }, &["t"], &columns(), 3)
}

/// `new_db` and its writer.
fn new_db_and_writer() -> (common::TestDb, WritePath) {
    let db = new_db();
    let wp = db.writer();
    (db, wp)
}

#[test]
fn insert_is_visible_after_reopen_and_checkpoint_moves_it_to_pages_once() {
    let (db, wp) = new_db_and_writer();
    assert_eq!(wp.insert("t", &[batch(0, 700), batch(700, 1000)]).unwrap(), 1000);
    assert_eq!(wp.insert("T", &[batch(1000, 1005)]).unwrap(), 5);
    assert_eq!(wp.delta("t").unwrap().row_count(), 1005);
    wp.close().unwrap();
    assert_eq!(unflushed_rows(&db, "t").unwrap(), 1005);
    assert_eq!(all_rows(&db), expected(0, 1005));

    let r = checkpoint(&db, &CheckpointOptions { max_async_io: 2, ..Default::default() }).unwrap();
    assert_eq!(r.rows_written, 1005);
    assert!(r.pages_written >= 3, "{r:?}");
    assert!(r.max_outstanding_writes >= 1 && r.max_outstanding_writes <= 2, "{r:?}");
    assert_eq!(unflushed_rows(&db, "t").unwrap(), 0);
    let catalog = Catalog::read(&db).unwrap();
    assert_eq!(catalog.tables["t"].row_count, 1005);
    assert_eq!(catalog.tables["t"].page_count(), r.pages_written);
    // Reopen: the rows come from pages only; the log's rows are before the redo point.
    let report = recover(&db, true).unwrap();
    assert_eq!(report.committed_rows_replayed, 0);
    assert_eq!(all_rows(&db), expected(0, 1005));

    // More rows after the checkpoint: pages + delta, and a second checkpoint adds runs.
    let wp = db.writer();
    wp.insert("t", &[batch(2000, 2100)]).unwrap();
    wp.close().unwrap();
    let mut want = expected(0, 1005);
    want.extend(expected(2000, 2100));
    want.sort();
    assert_eq!(all_rows(&db), want);
    checkpoint(&db, &CheckpointOptions::default()).unwrap();
    assert_eq!(all_rows(&db), want);
    assert_eq!(Catalog::read(&db).unwrap().tables["t"].row_count, 1105);
}

#[test]
fn a_failed_statement_leaves_nothing() {
    let (db, wp) = new_db_and_writer();
    wp.insert("t", &[batch(0, 10)]).unwrap();
    // NULL into NOT NULL qty, in the second batch of the statement: nothing of it stays.
    let bad = RecordBatch::try_new(
        Arc::new(Schema::new(vec![Field::new("id", DataType::Int64, false), Field::new("qty", DataType::Int32, true), Field::new("note", DataType::Utf8, true)])),
        vec![Arc::new(Int64Array::from(vec![100, 101])), Arc::new(Int32Array::from(vec![Some(1), None])), Arc::new(StringArray::from(vec![Some("a"), None]))],
    )
    .unwrap();
    let err = wp.insert("t", &[batch(50, 60), bad]).unwrap_err();
    assert!(err.to_string().contains("NOT NULL"), "{err}");
    assert!(err.is_user_input());
    assert_eq!(wp.delta("t").unwrap().row_count(), 10);
    wp.close().unwrap();
    assert_eq!(all_rows(&db), expected(0, 10));
}

/// The child: inserts, says so once the commit returned, then waits to be killed.
#[test]
fn child_process_entry() {
    let Ok(db) = std::env::var(CHILD_ENV) else { return };
    let wp = WritePath::open_writer(Path::new(&db), "test child").unwrap();
    wp.insert("t", &[batch(0, 300)]).unwrap();
    wp.insert("t", &[batch(300, 333)]).unwrap();
    println!("ACKED");
    use std::io::Write;
    std::io::stdout().flush().unwrap();
    std::thread::sleep(std::time::Duration::from_secs(120));
}

#[test]
fn kill_9_after_acknowledged_inserts_loses_nothing() {
    let db = new_db();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child_process_entry", "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, db.as_os_str())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let acked = lines.any(|l| l.map(|l| l.contains("ACKED")).unwrap_or(false));
    assert!(acked, "the child never acknowledged its inserts");
    // While the child lives, it holds the lock: a second writer is told who.
    let err = WritePath::open_writer(&db, "test").expect_err("second writer refused");
    assert!(matches!(err, WriteError::Locked { .. }), "{err}");
    assert!(err.to_string().contains("test child"), "{err}");
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    assert_eq!(all_rows(&db), expected(0, 333));
    let r = recover(&db, true).unwrap();
    assert_eq!(r.committed_rows_replayed, 333);
    assert_eq!(r.verified_rows, Some(333));
}

#[test]
fn crash_between_checkpoint_writes_and_catalog_commit_neither_loses_nor_duplicates() {
    let (db, wp) = new_db_and_writer();
    wp.insert("t", &[batch(0, 500)]).unwrap();
    let err = wp.checkpoint(&CheckpointOptions { max_async_io: 4, stop_before_catalog_commit: true, ..Default::default() }).unwrap_err();
    assert!(err.to_string().contains("before the catalog commit"), "{err}");
    drop(wp); // the crash: pages written and synced, catalog not committed
    let orphans: Vec<_> = std::fs::read_dir(&db).unwrap().filter_map(|e| e.ok()).filter(|e| e.file_name().to_string_lossy().ends_with(".dat")).collect();
    assert!(!orphans.is_empty(), "the checkpoint wrote its files before stopping");
    assert_eq!(Catalog::read(&db).unwrap().tables["t"].page_count(), 0);
    assert_eq!(all_rows(&db), expected(0, 500));
    let r = checkpoint(&db, &CheckpointOptions::default()).unwrap();
    assert_eq!(r.orphans_removed, orphans.len());
    assert_eq!(r.rows_written, 500);
    assert_eq!(all_rows(&db), expected(0, 500));
    assert_eq!(Catalog::read(&db).unwrap().tables["t"].row_count, 500);
}

#[test]
fn crash_between_catalog_commit_and_checkpoint_end_skips_rows_already_in_pages() {
    let (db, wp) = new_db_and_writer();
    wp.insert("t", &[batch(0, 200)]).unwrap();
    wp.close().unwrap();
    // Save the log's control file before the checkpoint, put it back after: as if the
    // process died after the catalog commit, before checkpoint_end reached the control file.
    let control = db.join("wal").join("wal.control");
    let before = std::fs::read(&control).unwrap();
    checkpoint(&db, &CheckpointOptions::default()).unwrap();
    std::fs::write(&control, before).unwrap();
    let r = recover(&db, false).unwrap();
    assert_eq!(r.rows_already_in_pages, 200, "{r:?}");
    assert_eq!(r.committed_rows_replayed, 0);
    assert_eq!(all_rows(&db), expected(0, 200));
}

#[test]
fn drop_and_init_refusals() {
    let db = new_db();
    // init refuses an existing database, a missing and a foreign --wal-dir.
    let err = init_database(&db, &InitOptions::default()).unwrap_err().to_string();
    assert!(err.contains("already a flashscan database"), "{err}");
    let err = init_database(&db.dir.path().join("db2"), &InitOptions { wal_dir: Some(db.dir.path().join("nowhere")), ..Default::default() }).unwrap_err().to_string();
    assert!(err.contains("does not exist"), "{err}");
    let err = init_database(&db.dir.path().join("db3"), &InitOptions { wal_dir: Some(db.join("wal")), ..Default::default() }).unwrap_err().to_string();
    assert!(err.contains("another database"), "{err}");
    assert!(!db.dir.path().join("db2").exists() && !db.dir.path().join("db3").exists());

    let wp = db.writer();

    // DROP: rows of the dropped table never come back in a new table of the same name.
    wp.insert("t", &[batch(0, 50)]).unwrap();
    assert!(wp.drop_table("t", false).unwrap());
    wp.create_table(NewTable { name: "t".into(), columns: columns(), partition_count: Some(2), partition_by: None, if_not_exists: false, indexes: Vec::new(), ..Default::default() }).unwrap();
    wp.insert("t", &[batch(900, 905)]).unwrap();
    wp.close().unwrap();
    let r = recover(&db, true).unwrap();
    assert_eq!(r.rows_of_dropped_tables, 50);
    assert_eq!(all_rows(&db), expected(900, 905));
}

/// A cluster host's database holds only its host's partitions: SQL writes there would put
/// rows in partitions other hosts own (and the next open would call the catalog corrupt),
/// so CREATE, INSERT and DROP are refused in one line, and the database still opens.
#[test]
fn a_cluster_host_refuses_writes_and_stays_readable() {
    let db = new_db();
    let mut catalog = Catalog::read(&db).unwrap();
    let owned: Vec<u32> = (0..3).filter(|p| p % 2 == 0).collect();
    catalog.host = Some(flashscan_storage::host_place::HostPlace { index: 0, count: 2, partitions: [("t".to_string(), owned)].into_iter().collect() });
    catalog.write_atomic(&db).unwrap();

    let wp = db.writer();
    let insert = wp.insert("t", &[batch(0, 10)]).unwrap_err();
    let create = wp
        .create_table(NewTable { name: "u".into(), columns: columns(), partition_count: Some(2), partition_by: Some("id".into()), if_not_exists: false, indexes: Vec::new(), ..Default::default() })
        .unwrap_err();
    let drop = wp.drop_table("t", false).unwrap_err();
    for (err, what) in [(&insert, "INSERT into t"), (&create, "CREATE TABLE"), (&drop, "DROP TABLE")] {
        assert!(matches!(err, WriteError::NotSupported(_)), "{err:?}");
        assert!(err.is_user_input());
        let line = err.to_string();
        assert!(line.starts_with(what) && line.contains("host 0 of 2") && line.contains("--host 0/2") && !line.contains('\n'), "{line}");
    }
    wp.close().unwrap();
    let after = Catalog::read(&db).unwrap();
    assert!(after.tables.contains_key("t") && !after.tables.contains_key("u"));
    assert_eq!(unflushed_rows(&db, "t").unwrap(), 0);
    assert!(all_rows(&db).is_empty());
}

/// A database made by `flashscan load` (no log) takes INSERT once a writer opens it: the
/// writer gives it a log (`add_log`), the loaded table takes rows, and they survive a
/// reopen (replayed from the new log).
#[test]
fn a_loaded_database_gets_a_log_at_its_first_writer() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    load_nation(&db);
    assert!(Catalog::read(&db).unwrap().write.is_none(), "a load makes no log");
    // A reader opens it without writing anything.
    let reader = WritePath::open(&db).unwrap();
    assert!(!reader.is_writer());
    assert!(!db.join("wal").exists(), "a reader adds no log");
    let loaded = common::table_batches(&db, "nation");
    let loaded_rows: usize = loaded.iter().map(|b| b.num_rows()).sum();
    assert_eq!(loaded_rows, 25);
    // The first writer adds the log, and the loaded table takes rows at once.
    reader.become_writer("test").unwrap();
    let meta = Catalog::read(&db).unwrap().write.expect("the writer gave it a log");
    assert_eq!(meta.wal_dir, "wal");
    assert_eq!(reader.insert("nation", &loaded).unwrap(), 25);
    reader.close().unwrap();
    let rows: usize = common::table_batches(&db, "nation").iter().map(|b| b.num_rows()).sum();
    assert_eq!(rows, 50, "the inserted rows are replayed from the new log");
    // Opening again keeps the same log.
    common::writer(&db).close().unwrap();
    assert_eq!(Catalog::read(&db).unwrap().write.unwrap().database_id, meta.database_id);
}

/// A crash between creating the log and the catalog commit that names it leaves an empty
/// log naming this database: the next writer adopts it. A log of another database (or
/// anything else at `wal/`) is refused and left as it was.
#[test]
fn a_half_added_log_is_adopted_and_a_foreign_one_refused() {
    use flashscan_wal::{DatabaseIdentity, Wal, WalConfig};
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    load_nation(&db);
    let label = std::path::absolute(&db).unwrap().to_string_lossy().into_owned();
    Wal::create(WalConfig::new(db.join("wal")), DatabaseIdentity { id: 0xabc, label }).unwrap().close().unwrap();
    let wp = WritePath::open(&db).unwrap();
    wp.become_writer("test").unwrap();
    wp.close().unwrap();
    assert_eq!(u128::from_str_radix(&Catalog::read(&db).unwrap().write.unwrap().database_id, 16).unwrap(), 0xabc);

    let other = tempfile::tempdir().unwrap();
    let db = other.path().join("db");
    load_nation(&db);
    Wal::create(WalConfig::new(db.join("wal")), DatabaseIdentity { id: 0xdef, label: "/elsewhere/db".into() }).unwrap().close().unwrap();
    let e = WritePath::open(&db).unwrap().become_writer("test").unwrap_err().to_string();
    assert!(e.contains("another database") && e.contains("/elsewhere/db") && !e.contains('\n'), "{e}");
    assert!(Catalog::read(&db).unwrap().write.is_none(), "nothing committed");
    assert_eq!(flashscan_wal::files::read_control(&db.join("wal")).unwrap().identity.id, 0xdef, "the foreign log is untouched");
}

/// TPC-H's nation (25 rows) loaded as a heap, as `flashscan load` does.
fn load_nation(db: &Path) {
    let source = flashscan_storage::load::tpch::tpch_source("nation", 0.01, 1).unwrap();
    let options = flashscan_storage::load::LoadOptions { partition_count: 2, threads: 1, ..Default::default() };
    flashscan_storage::load::load_table(db, source, &options).unwrap();
}
