//! CREATE TABLE, INSERT, DROP through `flashscan sql`'s session on a database made by
//! `flashscan init`: answers compared with the rows inserted (the oracle is the test's own
//! list of rows), failed statements leave nothing, refusals are one clear line.

use std::path::PathBuf;

use arrow::array::{Array, AsArray};
use arrow::datatypes::{DataType, Int64Type};
use flashscan_sql::FlashscanSession;
use flashscan_write::{checkpoint, CheckpointOptions};

mod common;
use common::{fails, new_database, run, runtime, session};

/// A runtime, a new database, and a session on it in which table t (id, name, qty: the
/// columns `rows`, `expected` and `values` read and write) was created `with` these
/// options (a ` WITH (…)` clause, or nothing).
fn database_with_t(with: &str) -> (tokio::runtime::Runtime, tempfile::TempDir, PathBuf, FlashscanSession) {
    let (rt, dir) = (runtime(), tempfile::tempdir().unwrap());
    let db = new_database(dir.path());
    let s = session(&db);
    run(&rt, &s, &format!("CREATE TABLE t (id BIGINT NOT NULL, name VARCHAR, qty INT NOT NULL){with}"));
    (rt, dir, db, s)
}

/// (id, name, qty) rows of `SELECT id, name, qty FROM t ORDER BY id`.
fn rows(rt: &tokio::runtime::Runtime, s: &FlashscanSession, sql: &str) -> Vec<(i64, Option<String>, i64)> {
    let out = run(rt, s, sql);
    let mut v = Vec::new();
    for b in &out.batches {
        let id = arrow::compute::cast(b.column(0), &DataType::Int64).unwrap();
        let name = arrow::compute::cast(b.column(1), &DataType::Utf8).unwrap();
        let qty = arrow::compute::cast(b.column(2), &DataType::Int64).unwrap();
        let (id, name, qty) = (id.as_primitive::<Int64Type>(), name.as_string::<i32>(), qty.as_primitive::<Int64Type>());
        for r in 0..b.num_rows() {
            v.push((id.value(r), if name.is_null(r) { None } else { Some(name.value(r).to_string()) }, qty.value(r)));
        }
    }
    v
}

fn count(rt: &tokio::runtime::Runtime, s: &FlashscanSession, sql: &str) -> i64 {
    let out = run(rt, s, sql);
    let c = arrow::compute::cast(out.batches[0].column(0), &DataType::Int64).unwrap();
    c.as_primitive::<Int64Type>().value(0)
}

fn expected(n: i64) -> Vec<(i64, Option<String>, i64)> {
    (1..=n).map(|i| (i, if i % 5 == 0 { None } else { Some(format!("name{i}")) }, i * 10)).collect()
}

fn values(from: i64, to: i64) -> String {
    (from..=to)
        .map(|i| {
            let name = if i % 5 == 0 { "NULL".to_string() } else { format!("'name{i}'") };
            format!("({i}, {name}, {})", i * 10)
        })
        .collect::<Vec<_>>()
        .join(", ")
}

#[test]
fn create_insert_select_round_trip_then_checkpoint() {
    let (rt, _dir, db, s) = database_with_t(" WITH (partitions = 4, partition_by = 'id')");
    assert_eq!(s.table_names(), vec!["t".to_string()]);
    let out = run(&rt, &s, &format!("INSERT INTO t VALUES {}", values(1, 40)));
    let inserted = arrow::compute::cast(out.batches[0].column(0), &DataType::Int64).unwrap();
    assert_eq!(inserted.as_primitive::<Int64Type>().value(0), 40);
    run(&rt, &s, &format!("INSERT INTO t VALUES {}", values(41, 50)));
    assert_eq!(rows(&rt, &s, "SELECT id, name, qty FROM t ORDER BY id"), expected(50));
    assert_eq!(count(&rt, &s, "SELECT count(*) FROM t"), 50);
    // Partition pruning on the hash key still finds delta rows.
    assert_eq!(rows(&rt, &s, "SELECT id, name, qty FROM t WHERE id = 17"), vec![expected(50)[16].clone()]);
    // INSERT … SELECT, from the table itself.
    run(&rt, &s, "CREATE TABLE u (id BIGINT NOT NULL, name VARCHAR, qty BIGINT)");
    run(&rt, &s, "INSERT INTO u SELECT id, name, qty FROM t WHERE id <= 20");
    assert_eq!(rows(&rt, &s, "SELECT id, name, qty FROM u ORDER BY id"), expected(20));
    drop(s);

    // A new session replays the log.
    let s = session(&db);
    assert_eq!(rows(&rt, &s, "SELECT id, name, qty FROM t ORDER BY id"), expected(50));
    drop(s);
    // After a checkpoint: the same rows, from pages, no duplicates.
    let r = checkpoint(&db, &CheckpointOptions::default()).unwrap();
    assert_eq!(r.rows_written, 70);
    let s = session(&db);
    assert_eq!(rows(&rt, &s, "SELECT id, name, qty FROM t ORDER BY id"), expected(50));
    assert_eq!(count(&rt, &s, "SELECT count(*) FROM u"), 20);
    run(&rt, &s, &format!("INSERT INTO t VALUES {}", values(51, 60)));
    assert_eq!(rows(&rt, &s, "SELECT id, name, qty FROM t ORDER BY id"), expected(60));
    assert_eq!(count(&rt, &s, "SELECT count(*) FROM t"), 60);
    run(&rt, &s, "DROP TABLE u");
    assert_eq!(s.table_names(), vec!["t".to_string()]);
    assert!(fails(&rt, &s, "SELECT * FROM u").contains("not found"));
}

/// TRUNCATE empties tables in one catalog commit: rows in pages (after a checkpoint) and
/// rows only in the log alike, for good (a reopen replays nothing into the emptied table),
/// and the table takes rows again at once.
#[test]
fn truncate_empties_tables_for_good() {
    let (rt, _dir, db, s) = database_with_t(" WITH (partitions = 2)");
    run(&rt, &s, &format!("INSERT INTO t VALUES {}", values(1, 30)));
    // pgbench -i's storage parameter, at the value flashscan honours.
    run(&rt, &s, "CREATE TABLE u (id BIGINT NOT NULL, name VARCHAR, qty BIGINT) WITH (fillfactor = 100)");
    run(&rt, &s, "INSERT INTO u SELECT id, name, qty FROM t");
    drop(s);
    // t's rows in pages, then more only in the log.
    checkpoint(&db, &CheckpointOptions::default()).unwrap();
    let s = session(&db);
    run(&rt, &s, &format!("INSERT INTO t VALUES {}", values(31, 40)));
    assert_eq!(count(&rt, &s, "SELECT count(*) FROM t"), 40);
    run(&rt, &s, "TRUNCATE TABLE t, u");
    assert_eq!(count(&rt, &s, "SELECT count(*) FROM t"), 0);
    assert_eq!(count(&rt, &s, "SELECT count(*) FROM u"), 0);
    run(&rt, &s, &format!("INSERT INTO t VALUES {}", values(1, 5)));
    assert_eq!(rows(&rt, &s, "SELECT id, name, qty FROM t ORDER BY id"), expected(5));
    // Refusals change nothing.
    for (sql, says) in [("TRUNCATE t CASCADE", "CASCADE"), ("TRUNCATE nosuch", "nosuch")] {
        let e = fails(&rt, &s, sql);
        assert!(e.contains(says), "{sql}: {e}");
    }
    // Inside a block TRUNCATE commits as it runs, said in a warning; ROLLBACK keeps it.
    run(&rt, &s, "INSERT INTO u VALUES (1, 'a', 1)");
    run(&rt, &s, "BEGIN");
    let out = run(&rt, &s, "TRUNCATE u");
    assert!(out.warnings.iter().any(|w| w.contains("TRUNCATE TABLE inside a transaction block was committed as it ran")), "{:?}", out.warnings);
    run(&rt, &s, "ROLLBACK");
    assert_eq!(count(&rt, &s, "SELECT count(*) FROM u"), 0);
    assert!(run(&rt, &s, "TRUNCATE u").warnings.is_empty(), "no warning outside a block");
    assert_eq!(count(&rt, &s, "SELECT count(*) FROM t"), 5);
    drop(s);
    // A reopen replays the log: nothing from before the TRUNCATE comes back.
    let s = session(&db);
    assert_eq!(rows(&rt, &s, "SELECT id, name, qty FROM t ORDER BY id"), expected(5));
    assert_eq!(count(&rt, &s, "SELECT count(*) FROM u"), 0);
    drop(s);
    let r = checkpoint(&db, &CheckpointOptions::default()).unwrap();
    assert_eq!(r.rows_written, 5);
    let s = session(&db);
    assert_eq!(rows(&rt, &s, "SELECT id, name, qty FROM t ORDER BY id"), expected(5));
}

/// A long-lived session (the shell, the server) across automatic checkpoints: each one
/// moves delta rows into pages and starts a fresh delta, and the session's tables must see
/// the rows inserted after it (they once kept the delta they were registered with).
#[test]
fn rows_inserted_after_an_automatic_checkpoint_are_seen_by_the_same_session() {
    let (rt, _dir, db, s) = database_with_t(" WITH (partitions = 4, partition_by = 'id')");
    let w = s.write_path().clone();
    // A checkpoint after every INSERT.
    w.set_limits(flashscan_write::WriteLimits { checkpoint_delta_bytes: 1, ..Default::default() }).unwrap();
    for chunk in 0..5 {
        run(&rt, &s, &format!("INSERT INTO t VALUES {}", values(chunk * 10 + 1, chunk * 10 + 10)));
        assert_eq!(rows(&rt, &s, "SELECT id, name, qty FROM t ORDER BY id"), expected(chunk * 10 + 10));
        assert_eq!(count(&rt, &s, "SELECT count(*) FROM t"), chunk * 10 + 10);
    }
    let auto = w.auto_checkpoint_stats().unwrap();
    assert!(auto.checkpoints_count >= 5, "{auto:?}");
    drop(s);
    let s = session(&db);
    assert_eq!(rows(&rt, &s, "SELECT id, name, qty FROM t ORDER BY id"), expected(50));
}

#[test]
fn failed_statements_leave_nothing_and_refusals_are_clear() {
    let (rt, _dir, db, s) = database_with_t("");
    run(&rt, &s, &format!("INSERT INTO t VALUES {}", values(1, 5)));
    // NULL into NOT NULL in the last row: the whole statement fails.
    let e = fails(&rt, &s, "INSERT INTO t VALUES (6, 'a', 60), (7, 'b', NULL)");
    assert!(e.to_lowercase().contains("null"), "{e}");
    // Named by the table's column, not DataFusion's position ("column3").
    assert!(e.contains("qty") && !e.contains("column3"), "{e}");
    // With a column list, the position is the list's.
    let e = fails(&rt, &s, "INSERT INTO t (qty, id) VALUES (NULL, 6)");
    assert!(e.contains("qty") && !e.contains("column1"), "{e}");
    // A value that does not convert to the column's type.
    let e = fails(&rt, &s, "INSERT INTO t VALUES (8, 'c', 'eighty')");
    assert!(!e.is_empty());
    assert_eq!(rows(&rt, &s, "SELECT id, name, qty FROM t ORDER BY id"), expected(5));
    let e = fails(&rt, &s, "MERGE INTO t USING t AS s ON t.id = s.id WHEN MATCHED THEN DELETE");
    assert!(e.contains("not supported yet"), "{e}");
    let e = fails(&rt, &s, "UPDATE t SET qty = NULL WHERE id = 1");
    assert!(e.to_lowercase().contains("null"), "{e}");
    assert_eq!(rows(&rt, &s, "SELECT id, name, qty FROM t ORDER BY id"), expected(5));
    let e = fails(&rt, &s, "CREATE TABLE t (id INT)");
    assert!(e.contains("exists"), "{e}");
    let e = fails(&rt, &s, "CREATE TABLE v (id INT) WITH (colour = 'blue')");
    assert!(e.contains("unknown"), "{e}");
    let e = fails(&rt, &s, "CREATE TABLE v (id INT) WITH (fillfactor = 90)");
    assert!(e.contains("fillfactor = 90") && e.contains("not supported"), "{e}");
    // A constraint flashscan would not enforce is refused, never accepted and ignored,
    // and no table is made (PRIMARY KEY and UNIQUE are enforced: tests/indexes.rs).
    for (sql, says) in [
        ("CREATE TABLE k (id BIGINT REFERENCES t (id))", "REFERENCES"),
        ("CREATE TABLE k (id BIGINT, FOREIGN KEY (id) REFERENCES t (id))", "FOREIGN KEY"),
        ("CREATE TABLE k (id BIGINT CHECK (id > 0))", "CHECK"),
        ("CREATE TABLE k (id BIGINT GENERATED ALWAYS AS (1) STORED)", "generated"),
        ("CREATE TABLE k (id BIGINT PRIMARY KEY DEFERRABLE)", "DEFERRABLE"),
        ("ALTER TABLE t ADD COLUMN z INT CHECK (z > 0)", "CHECK"),
    ] {
        let e = fails(&rt, &s, sql);
        assert!(e.contains(says) && e.contains("not supported"), "{sql}: {e}");
        assert!(!e.contains('\n'), "{sql}: one line: {e}");
    }
    assert!(!s.table_names().iter().any(|t| t == "k"), "a refused CREATE TABLE made no table: {:?}", s.table_names());
    assert_eq!(rows(&rt, &s, "SELECT id, name, qty FROM t ORDER BY id"), expected(5));
    // A second writer on the same database is refused, naming the holder.
    let other = session(&db);
    let e = fails(&rt, &other, "INSERT INTO t VALUES (9, 'x', 90)");
    assert!(e.contains("flashscan sql") && e.contains("in use"), "{e}");
    // Reads in the other session see the rows committed before it opened.
    assert_eq!(rows(&rt, &other, "SELECT id, name, qty FROM t ORDER BY id"), expected(5));
    drop(other);
    drop(s);
    let s = session(&db);
    assert_eq!(rows(&rt, &s, "SELECT id, name, qty FROM t ORDER BY id"), expected(5));
}

/// Views in `flashscan sql` (generic SQL dialect): CREATE VIEW with column names, a view
/// over a view, the new rows of the table seen through it, writes into it and the DROP of
/// what it reads refused naming it, OR REPLACE adding a column, and the views kept by the
/// catalog for the next session; DROP VIEW of both, then DROP TABLE works.
#[test]
fn views_read_through_and_are_kept() {
    let (rt, _dir, db, s) = database_with_t("");
    run(&rt, &s, &format!("INSERT INTO t VALUES {}", values(1, 10)));
    run(&rt, &s, "CREATE VIEW big (big_id, big_qty) AS SELECT id, qty FROM t WHERE qty > 50");
    run(&rt, &s, "CREATE VIEW bigger AS SELECT big_id FROM big WHERE big_id > 8");
    assert_eq!(count(&rt, &s, "SELECT count(*) FROM big"), count(&rt, &s, "SELECT count(*) FROM t WHERE qty > 50"));
    run(&rt, &s, &format!("INSERT INTO t VALUES {}", values(11, 12)));
    assert_eq!(count(&rt, &s, "SELECT count(*) FROM bigger"), count(&rt, &s, "SELECT count(*) FROM t WHERE qty > 50 AND id > 8"));
    let e = fails(&rt, &s, "INSERT INTO big VALUES (1, 2)");
    assert!(e.contains("view big") && e.contains("read-only") && e.lines().count() == 1, "{e}");
    let e = fails(&rt, &s, "DROP TABLE t");
    assert!(e.contains("view big reads it") && e.contains("DROP VIEW big first"), "{e}");
    let e = fails(&rt, &s, "CREATE VIEW big AS SELECT 1 AS one");
    assert!(e.contains("already exists"), "{e}");
    run(&rt, &s, "CREATE OR REPLACE VIEW big (big_id, big_qty) AS SELECT id, qty, name FROM t WHERE qty > 50");
    let e = fails(&rt, &s, "CREATE MATERIALIZED VIEW m AS SELECT 1 AS one");
    assert!(e.contains("MATERIALIZED"), "{e}");
    drop(s);
    let s = session(&db);
    let out = run(&rt, &s, "SELECT * FROM big ORDER BY big_id LIMIT 1");
    let names: Vec<&str> = out.schema.fields().iter().map(|f| f.name().as_str()).collect();
    assert_eq!(names, ["big_id", "big_qty", "name"]);
    assert_eq!(count(&rt, &s, "SELECT count(*) FROM bigger"), count(&rt, &s, "SELECT count(*) FROM t WHERE qty > 50 AND id > 8"));
    run(&rt, &s, "DROP VIEW bigger, big");
    run(&rt, &s, "DROP TABLE t");
    assert!(fails(&rt, &s, "SELECT * FROM big").contains("big"));
}
