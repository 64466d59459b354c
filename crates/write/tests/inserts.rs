//! Prepared inserts from many threads beside checkpoints (no row lost or doubled across the
//! redo point), and multi-statement transactions (all or nothing).

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use arrow::array::{Int32Array, Int64Array, StringArray};
use arrow::datatypes::{DataType, Field, Schema};
use arrow::record_batch::RecordBatch;
use flashscan_storage::{ColumnDef, ColumnType};
use flashscan_write::{CheckpointOptions, InitOptions, NewTable, Transaction};
use futures::executor::block_on;

mod common;

fn columns() -> Vec<ColumnDef> {
    vec![
        ColumnDef { name: "id".into(), column_type: ColumnType::Int64, nullable: false },
        ColumnDef { name: "qty".into(), column_type: ColumnType::Int32, nullable: false },
        ColumnDef { name: "note".into(), column_type: ColumnType::Utf8, nullable: true },
    ]
}

fn batch(from: i64, to: i64) -> RecordBatch {
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("qty", DataType::Int32, true),
        Field::new("note", DataType::Utf8, true),
    ]));
    let ids: Vec<i64> = (from..to).collect();
    let qty: Vec<i32> = ids.iter().map(|i| (i % 1000) as i32).collect();
    let notes: Vec<String> = ids.iter().map(|i| format!("n{i}")).collect();
    RecordBatch::try_new(schema, vec![Arc::new(Int64Array::from(ids)), Arc::new(Int32Array::from(qty)), Arc::new(StringArray::from(notes))]).unwrap()
}

fn null_qty_batch(id: i64) -> RecordBatch {
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("qty", DataType::Int32, true),
        Field::new("note", DataType::Utf8, true),
    ]));
    RecordBatch::try_new(schema, vec![Arc::new(Int64Array::from(vec![id])), Arc::new(Int32Array::from(vec![None::<i32>])), Arc::new(StringArray::from(vec!["x"]))]).unwrap()
}

/// A new database (1 MiB log segments) with `tables`, each in 3 partitions.
fn new_db(tables: &[&str]) -> common::TestDb {
    common::TestDb::new(&InitOptions { segment_size_bytes: Some(1 << 20), ..Default::default() }, tables, &columns(), 3)
}

/// Sorted ids of table `t`: its pages plus its delta replayed from the log (a fresh open).
fn ids(db: &Path, t: &str) -> Vec<i64> {
    common::sorted_ids(db, t)
}

#[test]
fn prepared_inserts_from_threads_beside_checkpoints_keep_every_row_once() {
    let db = new_db(&["t"]);
    let wp = db.writer();
    const THREADS: i64 = 8;
    const COMMITS: i64 = 150;
    let done = AtomicBool::new(false);
    let mut checkpoints = 0;
    std::thread::scope(|s| {
        let writers: Vec<_> = (0..THREADS)
            .map(|t| {
                let wp = &wp;
                s.spawn(move || {
                    let mut p = wp.prepare_insert("t").unwrap();
                    for c in 0..COMMITS {
                        // One row per commit, except every 10th commit carries 3.
                        let id = t * 1_000_000 + c * 10;
                        let n = if c % 10 == 0 { 3 } else { 1 };
                        assert_eq!(p.insert(&batch(id, id + n)).unwrap(), n as u64);
                    }
                })
            })
            .collect();
        let wp = &wp;
        let done = &done;
        let checkpointer = s.spawn(move || {
            let mut n = 0;
            while !done.load(Ordering::Acquire) {
                wp.checkpoint(&CheckpointOptions::default()).unwrap();
                n += 1;
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            n
        });
        for w in writers {
            w.join().unwrap();
        }
        done.store(true, Ordering::Release);
        checkpoints = checkpointer.join().unwrap();
    });
    let stats = wp.wal_stats().unwrap();
    assert!(stats.commits_count >= (THREADS * COMMITS) as u64, "{stats:?}");
    wp.close().unwrap();
    assert!(checkpoints >= 1);
    let mut want: Vec<i64> = Vec::new();
    for t in 0..THREADS {
        for c in 0..COMMITS {
            let id = t * 1_000_000 + c * 10;
            want.extend(id..id + if c % 10 == 0 { 3 } else { 1 });
        }
    }
    want.sort();
    assert_eq!(ids(&db, "t"), want, "after {checkpoints} checkpoints beside the inserts");
}

#[test]
fn a_transaction_is_all_or_nothing() {
    let db = new_db(&["a", "b"]);
    let wp = db.writer();
    let mut txn = Transaction::new();
    assert_eq!(wp.stage_insert(&mut txn, "a", &[batch(0, 10)]).unwrap(), 10);
    assert_eq!(wp.stage_insert(&mut txn, "B", &[batch(100, 105)]).unwrap(), 5);
    // A bad statement fails alone and leaves the staged rows as they were.
    assert!(wp.stage_insert(&mut txn, "a", &[null_qty_batch(50)]).unwrap_err().to_string().contains("NULL"));
    assert!(wp.stage_insert(&mut txn, "nope", &[batch(0, 1)]).is_err());
    assert_eq!(txn.row_count(), 15);
    // Nothing visible before the commit.
    assert_eq!(wp.delta("a").unwrap().row_count(), 0);
    let commits_before = wp.wal_stats().unwrap().commits_count;
    assert_eq!(wp.commit_transaction(txn).unwrap(), 15);
    assert_eq!(wp.wal_stats().unwrap().commits_count, commits_before + 1, "one commit record for the whole block");
    // A rolled back (dropped) transaction writes nothing.
    let mut txn = Transaction::new();
    wp.stage_insert(&mut txn, "a", &[batch(1000, 1100)]).unwrap();
    assert_eq!(txn.rollback(), 100);
    // Rows staged for a table dropped and created again before the commit: refused whole.
    let mut txn = Transaction::new();
    wp.stage_insert(&mut txn, "b", &[batch(2000, 2001)]).unwrap();
    wp.stage_insert(&mut txn, "a", &[batch(3000, 3001)]).unwrap();
    wp.drop_table("b", false).unwrap();
    wp.create_table(NewTable { name: "b".into(), columns: columns(), partition_count: Some(2), partition_by: None, if_not_exists: false, indexes: Vec::new(), ..Default::default() }).unwrap();
    assert!(wp.commit_transaction(txn).unwrap_err().to_string().contains("dropped or created again"));
    wp.close().unwrap();
    assert_eq!(ids(&db, "a"), (0..10).collect::<Vec<_>>());
    assert!(ids(&db, "b").is_empty());
}

#[test]
fn a_prepared_insert_refuses_bad_rows_and_a_recreated_table() {
    let db = new_db(&["t"]);
    let wp = db.writer();
    let mut p = wp.prepare_insert("t").unwrap();
    assert_eq!(p.table().columns.len(), 3);
    p.insert(&batch(0, 2)).unwrap();
    assert!(p.insert(&null_qty_batch(7)).is_err());
    // The failed batch left nothing in the encoder: the next commit holds only its rows.
    p.insert(&batch(10, 11)).unwrap();
    assert!(wp.prepare_insert("missing").is_err());
    drop(p);
    let mut p = wp.prepare_insert("t").unwrap();
    wp.drop_table("t", false).unwrap();
    wp.create_table(NewTable { name: "t".into(), columns: columns(), partition_count: Some(1), partition_by: None, if_not_exists: false, indexes: Vec::new(), ..Default::default() }).unwrap();
    assert!(p.insert(&batch(20, 21)).is_err());
    drop(p);
    wp.close().unwrap();
    assert!(ids(&db, "t").is_empty());
}


/// The async caller's commit (`try_begin_commit` + `PendingCommit::durable`) from threads
/// beside checkpoints: while a checkpoint holds the commit gate the transaction is handed
/// back and committed on the thread instead; one commit in five is dropped without being
/// awaited (its drop finishes it), one in five waited for on the thread (`wait`). Every row is there exactly once after a fresh open —
/// none lost across a redo point, none left out by a dropped commit.
#[test]
fn awaited_and_dropped_pending_commits_keep_every_row_once_beside_checkpoints() {
    let db = new_db(&["t"]);
    let wp = db.writer();
    const THREADS: i64 = 4;
    const COMMITS: i64 = 120;
    let done = AtomicBool::new(false);
    let handed_back = std::sync::atomic::AtomicU64::new(0);
    std::thread::scope(|s| {
        let writers: Vec<_> = (0..THREADS)
            .map(|t| {
                let (wp, handed_back) = (&wp, &handed_back);
                s.spawn(move || {
                    for c in 0..COMMITS {
                        let id = t * 1_000_000 + c * 10;
                        let mut txn = Transaction::new();
                        wp.stage_insert(&mut txn, "t", &[batch(id, id + 2)]).unwrap();
                        match wp.try_begin_commit(txn).unwrap() {
                            Ok(pending) if c % 5 == 0 => drop(pending),
                            // The server's hybrid commit: waited for on the thread, leading
                            // the flush when none in flight covers it.
                            Ok(pending) if c % 5 == 1 => {
                                let _hint = pending.would_lead_flush();
                                assert_eq!(pending.wait().unwrap(), 2);
                            }
                            Ok(pending) => assert_eq!(block_on(pending.durable()).unwrap(), 2),
                            Err(txn) => {
                                handed_back.fetch_add(1, Ordering::Relaxed);
                                assert_eq!(wp.commit_transaction(txn).unwrap(), 2);
                            }
                        }
                    }
                })
            })
            .collect();
        let (wp, done) = (&wp, &done);
        let checkpointer = s.spawn(move || {
            while !done.load(Ordering::Acquire) {
                wp.checkpoint(&CheckpointOptions::default()).unwrap();
                std::thread::sleep(std::time::Duration::from_millis(3));
            }
        });
        for w in writers {
            w.join().unwrap();
        }
        done.store(true, Ordering::Release);
        checkpointer.join().unwrap();
    });
    eprintln!("{} of {} commits handed back by a checkpoint holding the gate", handed_back.load(Ordering::Relaxed), THREADS * COMMITS);
    wp.close().unwrap();
    let mut want: Vec<i64> = (0..THREADS).flat_map(|t| (0..COMMITS).flat_map(move |c| (t * 1_000_000 + c * 10)..(t * 1_000_000 + c * 10 + 2))).collect();
    want.sort();
    assert_eq!(ids(&db, "t"), want);
}

/// A prepared insert's transaction (issue 31): K one-row statements, one commit; a
/// statement that fails (NULL into NOT NULL, a repeated primary key) adds nothing and the
/// transaction keeps its earlier statements; rollback discards; the PRIMARY KEY is checked
/// against committed rows, the transaction's own earlier statements and the statement
/// itself.
#[test]
fn prepared_insert_transactions_of_single_row_statements_check_the_primary_key() {
    let db = new_db(&["t"]);
    let wp = db.writer();
    let pk = flashscan_storage::KeyIndexDef { name: "t_pkey".into(), columns: vec!["id".into()], unique: true, primary: true, constraint: true };
    wp.create_index("t", pk, false).unwrap();
    let mut p = wp.prepare_insert("t").unwrap();
    for id in 0..5 {
        assert_eq!(p.execute(&batch(id, id + 1)).unwrap(), 1);
    }
    assert!(p.execute(&null_qty_batch(99)).is_err(), "NULL into NOT NULL");
    let repeat = p.execute(&batch(3, 4)).unwrap_err();
    assert!(matches!(repeat, flashscan_write::WriteError::UniqueViolation { .. }), "{repeat}");
    assert_eq!(p.execute(&batch(10, 12)).unwrap(), 2);
    assert_eq!(p.commit().unwrap(), 7, "five one-row statements and one two-row statement: seven rows, one commit");
    // Against committed rows, and within one statement.
    assert!(matches!(p.execute(&batch(4, 5)).unwrap_err(), flashscan_write::WriteError::UniqueViolation { .. }));
    let twice = arrow::compute::concat_batches(&batch(20, 21).schema(), &[batch(20, 21), batch(20, 21)]).unwrap();
    assert!(matches!(p.execute(&twice).unwrap_err(), flashscan_write::WriteError::UniqueViolation { .. }));
    // Rolled back: nothing; the key is free again after.
    assert_eq!(p.execute(&batch(30, 31)).unwrap(), 1);
    assert_eq!(p.rollback(), 1);
    assert_eq!(p.insert(&batch(30, 31)).unwrap(), 1);
    let commits = wp.wal_stats().unwrap().commits_count;
    drop(p);
    wp.close().unwrap();
    assert_eq!(ids(&db, "t"), vec![0, 1, 2, 3, 4, 10, 11, 30]);
    assert!(commits >= 2, "{commits}");
}

/// Delayed durability through the write path: the commit returns before its flush, the rows
/// are visible at once, and the log writer makes them durable by itself (a fresh open after
/// a close finds them; the close flushes anyway, so the wait is checked on the live log).
#[test]
fn delayed_commits_are_visible_at_once_and_flushed_by_the_log_writer() {
    let db = new_db(&["t"]);
    let wp = db.writer();
    let mut p = wp.prepare_insert("t").unwrap();
    p.set_durability(flashscan_write::Durability::Delayed);
    for id in 0..50 {
        assert_eq!(p.insert(&batch(id, id + 1)).unwrap(), 1);
    }
    assert_eq!(wp.delta("t").map(|d| d.row_count()), Some(50), "visible once acknowledged");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        let stats = wp.wal_stats().unwrap();
        if stats.durable_lsn >= stats_end(&wp) {
            assert_eq!(stats.delayed_commits_count, 50);
            assert!(stats.delayed_unflushed_us_max > 0, "{stats:?}");
            break;
        }
        assert!(std::time::Instant::now() < deadline, "delayed commits never flushed: {stats:?}");
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    // One strict commit after them: durable, and so is everything before it.
    let mut txn = Transaction::new();
    wp.stage_insert(&mut txn, "t", &[batch(100, 101)]).unwrap();
    assert_eq!(wp.commit_transaction(txn).unwrap(), 1);
    drop(p);
    wp.close().unwrap();
    let mut want: Vec<i64> = (0..50).collect();
    want.push(100);
    assert_eq!(ids(&db, "t"), want);
}

/// One past the last log record appended now.
fn stats_end(wp: &flashscan_write::WritePath) -> flashscan_wal::Lsn {
    wp.wal_end_lsn().unwrap()
}
