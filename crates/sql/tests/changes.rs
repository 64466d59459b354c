//! UPDATE and DELETE through `flashscan sql`'s session, checked against a model: a seeded
//! random run of INSERTs, DELETEs, UPDATEs, transactions that commit or roll back,
//! checkpoints and reopenings, with the table compared after every step to the same
//! operations applied to a map in the test (the oracle). Refusals are one clear line and
//! change nothing.

use std::collections::BTreeMap;

use arrow::array::AsArray;
use arrow::datatypes::{DataType, Int64Type};
use flashscan_sql::FlashscanSession;
use flashscan_write::CheckpointOptions;

mod common;
use common::{fails, new_database, runtime, session, Rng};

fn run(rt: &tokio::runtime::Runtime, s: &FlashscanSession, sql: &str) -> u64 {
    let out = rt.block_on(s.run_one(sql)).unwrap_or_else(|e| panic!("{sql}: {e}"));
    // DML answers one row: the rows it changed.
    out.batches.first().filter(|b| b.num_rows() == 1 && b.num_columns() == 1).and_then(|b| arrow::compute::cast(b.column(0), &DataType::Int64).ok()).map(|c| c.as_primitive::<Int64Type>().value(0) as u64).unwrap_or(0)
}

/// The table as (id, v) pairs, and its count and sum asked separately (answered by
/// other paths: statistics, aggregates).
fn table(rt: &tokio::runtime::Runtime, s: &FlashscanSession) -> BTreeMap<i64, i64> {
    let out = rt.block_on(s.run_one("SELECT id, v FROM t")).unwrap();
    let mut rows = BTreeMap::new();
    for b in &out.batches {
        let (id, v) = (b.column(0).as_primitive::<Int64Type>(), b.column(1).as_primitive::<Int64Type>());
        for r in 0..b.num_rows() {
            assert!(rows.insert(id.value(r), v.value(r)).is_none(), "id {} appears twice", id.value(r));
        }
    }
    rows
}


/// A WHERE clause over `id` and what it selects, for the model.
fn predicate(rng: &mut Rng, max_id: i64) -> (String, Box<dyn Fn(i64) -> bool>) {
    let m = rng.below(5) as i64 + 2;
    let r = rng.below(m as u64) as i64;
    let lo = rng.below(max_id.max(1) as u64) as i64;
    let hi = lo + rng.below(60) as i64;
    (format!("id % {m} = {r} AND id BETWEEN {lo} AND {hi}"), Box::new(move |id| id % m == r && (lo..=hi).contains(&id)))
}

#[test]
fn random_changes_checkpoints_and_reopenings_match_a_model() {
    for seed in [0x5eed_0001u64, 0x5eed_0002] {
        let (rt, dir) = (runtime(), tempfile::tempdir().unwrap());
        let db = new_database(dir.path());
        let mut s = session(&db);
        run(&rt, &s, "CREATE TABLE t (id BIGINT NOT NULL, v BIGINT NOT NULL) WITH (partitions = 2)");
        let mut model: BTreeMap<i64, i64> = BTreeMap::new();
        let mut rng = Rng(seed);
        let mut next_id = 0i64;
        let mut counts = [0u32; 7];
        for step in 0..80 {
            let op = rng.below(10);
            let what = match op {
                0..=2 => {
                    let n = rng.below(40) + 1;
                    let values: Vec<String> = (0..n).map(|i| format!("({}, {})", next_id + i as i64, (next_id + i as i64) * 10)).collect();
                    for i in 0..n as i64 {
                        model.insert(next_id + i, (next_id + i) * 10);
                    }
                    next_id += n as i64;
                    run(&rt, &s, &format!("INSERT INTO t VALUES {}", values.join(", ")));
                    counts[0] += 1;
                    "insert"
                }
                3 | 4 => {
                    let (sql, selects) = predicate(&mut rng, next_id);
                    let expected = model.keys().filter(|id| selects(**id)).count() as u64;
                    model.retain(|id, _| !selects(*id));
                    assert_eq!(run(&rt, &s, &format!("DELETE FROM t WHERE {sql}")), expected, "seed {seed:#x} step {step}: DELETE count");
                    counts[1] += 1;
                    "delete"
                }
                5 | 6 => {
                    let (sql, selects) = predicate(&mut rng, next_id);
                    let mut expected = 0;
                    for (id, v) in model.iter_mut() {
                        if selects(*id) {
                            *v = *v * 3 + 1;
                            expected += 1;
                        }
                    }
                    assert_eq!(run(&rt, &s, &format!("UPDATE t SET v = v * 3 + 1 WHERE {sql}")), expected, "seed {seed:#x} step {step}: UPDATE count");
                    counts[2] += 1;
                    "update"
                }
                7 => {
                    // Two statements on disjoint ids, committed or rolled back together.
                    let half = next_id / 2;
                    let commit = rng.below(2) == 0;
                    let mut next = model.clone();
                    next.retain(|id, _| !(*id < half && id % 2 == 0));
                    for (id, v) in next.iter_mut() {
                        if *id >= half && id % 3 == 0 {
                            *v += 7;
                        }
                    }
                    run(&rt, &s, "BEGIN");
                    run(&rt, &s, &format!("DELETE FROM t WHERE id < {half} AND id % 2 = 0"));
                    run(&rt, &s, &format!("UPDATE t SET v = v + 7 WHERE id >= {half} AND id % 3 = 0"));
                    run(&rt, &s, if commit { "COMMIT" } else { "ROLLBACK" });
                    if commit {
                        model = next;
                    }
                    counts[if commit { 3 } else { 4 }] += 1;
                    "transaction"
                }
                8 => {
                    s.write_path().checkpoint(&CheckpointOptions::default()).unwrap_or_else(|e| panic!("checkpoint: {e}"));
                    counts[5] += 1;
                    "checkpoint"
                }
                _ => {
                    drop(s);
                    s = session(&db);
                    counts[6] += 1;
                    "reopen"
                }
            };
            assert_eq!(table(&rt, &s), model, "seed {seed:#x} step {step} (after {what})");
            let count_and_sum = rt.block_on(s.run_one("SELECT count(*), coalesce(sum(v), 0) FROM t")).unwrap();
            let b = &count_and_sum.batches[0];
            let count = arrow::compute::cast(b.column(0), &DataType::Int64).unwrap().as_primitive::<Int64Type>().value(0);
            let sum = arrow::compute::cast(b.column(1), &DataType::Int64).unwrap().as_primitive::<Int64Type>().value(0);
            assert_eq!((count, sum), (model.len() as i64, model.values().sum::<i64>()), "seed {seed:#x} step {step}: count and sum (after {what})");
        }
        // Every kind of step ran at least once (else the run proves less than it claims).
        assert!(counts.iter().all(|c| *c > 0), "seed {seed:#x}: steps of each kind (insert, delete, update, commit, rollback, checkpoint, reopen): {counts:?}");
    }
}

#[test]
fn refused_changes_change_nothing() {
    let (rt, dir) = (runtime(), tempfile::tempdir().unwrap());
    let db = new_database(dir.path());
    let s = session(&db);
    run(&rt, &s, "CREATE TABLE t (id BIGINT NOT NULL, v BIGINT NOT NULL)");
    run(&rt, &s, "INSERT INTO t VALUES (1, 10), (2, 20), (3, 30)");
    let before = table(&rt, &s);
    let null = fails(&rt, &s, "UPDATE t SET v = NULL WHERE id = 2");
    assert!(null.to_lowercase().contains("null"), "{null}");
    let returning = fails(&rt, &s, "DELETE FROM t WHERE id = 1 RETURNING id");
    assert!(returning.contains("RETURNING is answered over the wire"), "{returning}");
    let missing = fails(&rt, &s, "UPDATE t SET nope = 1");
    assert!(missing.to_lowercase().contains("nope"), "{missing}");
    // One column assigned twice in one statement: refused as PostgreSQL does, nothing dropped.
    let repeated = fails(&rt, &s, "UPDATE t SET v = 1, V = 2 WHERE id = 3");
    assert!(repeated.contains("multiple assignments to same column \"v\""), "{repeated}");
    // An isolation level flashscan does not provide is refused, never run as a weaker one.
    for sql in ["BEGIN ISOLATION LEVEL SERIALIZABLE", "START TRANSACTION ISOLATION LEVEL SERIALIZABLE, READ WRITE"] {
        let e = fails(&rt, &s, sql);
        assert!(e.contains("not supported yet"), "{sql}: {e}");
    }
    assert!(!s.in_transaction(), "a refused BEGIN opens no transaction");
    run(&rt, &s, "BEGIN ISOLATION LEVEL REPEATABLE READ");
    let e = fails(&rt, &s, "SET TRANSACTION ISOLATION LEVEL SERIALIZABLE");
    assert!(e.contains("not supported yet"), "{e}");
    run(&rt, &s, "ROLLBACK");
    // PostgreSQL's session settings are the server's: refused here, saying where they go.
    let e = fails(&rt, &s, "SET DateStyle = 'ISO'");
    assert!(e.contains("SET datestyle: not a setting of `flashscan sql`") && e.contains("flashscan serve"), "{e}");
    // A row changed twice in one block: the second change reads the first (own writes).
    run(&rt, &s, "BEGIN");
    run(&rt, &s, "UPDATE t SET v = v + 1 WHERE id = 3");
    run(&rt, &s, "UPDATE t SET v = v + 1 WHERE id = 3");
    run(&rt, &s, "SAVEPOINT a");
    run(&rt, &s, "DELETE FROM t WHERE id = 3");
    run(&rt, &s, "ROLLBACK TO SAVEPOINT a");
    assert_eq!(table(&rt, &s).get(&3), Some(&32), "the block reads its own changes");
    run(&rt, &s, "ROLLBACK");
    assert_eq!(table(&rt, &s), before, "nothing of a refused or rolled back change is visible");
    // A reader of pages, not of the log (`flashscan scan`), skips the deleted row once the
    // checkpoint has written it to the table's deleted rows file, as SQL does.
    run(&rt, &s, "DELETE FROM t WHERE id = 1");
    s.write_path().checkpoint(&CheckpointOptions::default()).unwrap();
    let storage = flashscan_storage::Database::open(&db).unwrap();
    assert_eq!(storage.table("t").unwrap().deleted_rows.as_ref().map(|d| d.row_count), Some(1));
    let pages = flashscan_exec::open_source(&storage, "t").unwrap();
    let options = flashscan_exec::ScanOptions { thread_count: 1, cache_mode: flashscan_exec::CacheMode::Warm, ..flashscan_exec::ScanOptions::default() };
    let count = flashscan_exec::run_query(pages.as_ref(), &flashscan_exec::BuiltinQuery::Count, &options).unwrap();
    assert_eq!(count.result.rows, vec![vec![flashscan_exec::Value::Int(2)]], "the pages' live rows");
    assert_eq!(count.figures.deleted_rows_skipped, 1);
    assert_eq!(table(&rt, &s).len(), 2, "SQL agrees");
}

/// A statement's snapshot taken before a DELETE commits still reads the deleted rows; one
/// taken after does not (the old versions stay in their pages, their deletion newer).
#[test]
fn an_older_snapshot_still_sees_deleted_rows() {
    let (rt, dir) = (runtime(), tempfile::tempdir().unwrap());
    let db = new_database(dir.path());
    let s = session(&db);
    run(&rt, &s, "CREATE TABLE t (id BIGINT NOT NULL, v BIGINT NOT NULL) WITH (partitions = 1)");
    run(&rt, &s, "INSERT INTO t SELECT value, value + 0 FROM generate_series(1, 100)");
    s.write_path().checkpoint(&CheckpointOptions::default()).unwrap();
    run(&rt, &s, "INSERT INTO t SELECT value, value + 0 FROM generate_series(101, 150)");
    let before = s.write_path().read_snapshot().unwrap();
    run(&rt, &s, "DELETE FROM t WHERE id % 2 = 0");
    let after = s.write_path().read_snapshot().unwrap();
    let (old, new) = (before.table("t").unwrap(), after.table("t").unwrap());
    assert_eq!((old.row_count(), new.row_count()), (150, 75));
    // The delta rows (101..150) as each snapshot decodes them.
    let delta_rows = |t: &flashscan_write::SnapshotTable| t.decode_delta(0, &[0], true).unwrap().map(|(b, ids)| (b.num_rows(), ids.len())).unwrap_or((0, 0));
    assert_eq!(delta_rows(old), (50, 50));
    assert_eq!(delta_rows(new), (25, 25));
}
