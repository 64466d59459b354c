//! ALTER TABLE's column and name changes through `flashscan sql`'s session: every answer
//! compared with the test's own model of the rows, rows in pages, in the delta, deleted and
//! updated before the change, rows logged after it replayed by a reopening, refusals that
//! change nothing.

use std::collections::BTreeMap;

use flashscan_sql::FlashscanSession;
use flashscan_write::{unflushed_rows, CheckpointOptions};

mod common;
use common::{fails, new_database, run, runtime, session, sorted};

type Rt = tokio::runtime::Runtime;

/// The model's rows as the answer of `SELECT * FROM t ORDER BY id` gives them, as text.
fn model_rows(model: &BTreeMap<i64, Vec<String>>) -> Vec<Vec<String>> {
    let mut rows: Vec<Vec<String>> = model.iter().map(|(id, rest)| std::iter::once(id.to_string()).chain(rest.iter().cloned()).collect()).collect();
    rows.sort();
    rows
}

fn columns(rt: &Rt, s: &FlashscanSession, table: &str) -> Vec<String> {
    let out = run(rt, s, &format!("SELECT * FROM {table} LIMIT 0"));
    out.schema.fields().iter().map(|f| f.name().clone()).collect()
}

/// t (id, v, name): 300 rows, some checkpointed into pages, some deleted and updated, some
/// only in the delta; the model holds what t holds.
fn table_with_history(rt: &Rt, s: &FlashscanSession) -> BTreeMap<i64, Vec<String>> {
    run(rt, s, "CREATE TABLE t (id BIGINT NOT NULL, v BIGINT NOT NULL, name VARCHAR) WITH (partitions = 2)");
    let mut model = BTreeMap::new();
    let insert = |from: i64, to: i64, model: &mut BTreeMap<i64, Vec<String>>| {
        let values: Vec<String> = (from..to).map(|i| if i % 7 == 0 { format!("({i}, {}, NULL)", i * 10) } else { format!("({i}, {}, 'n{i}')", i * 10) }).collect();
        for i in from..to {
            model.insert(i, vec![(i * 10).to_string(), if i % 7 == 0 { "NULL".into() } else { format!("n{i}") }]);
        }
        run(rt, s, &format!("INSERT INTO t VALUES {}", values.join(", ")));
    };
    insert(0, 200, &mut model);
    s.write_path().checkpoint(&CheckpointOptions::default()).unwrap_or_else(|e| panic!("checkpoint: {e}"));
    run(rt, s, "DELETE FROM t WHERE id % 5 = 0");
    model.retain(|id, _| id % 5 != 0);
    run(rt, s, "UPDATE t SET v = v + 1 WHERE id % 3 = 0");
    for (id, row) in model.iter_mut() {
        if id % 3 == 0 {
            row[0] = (id * 10 + 1).to_string();
        }
    }
    insert(200, 300, &mut model);
    model
}

#[test]
fn add_column_gives_every_row_its_default_and_survives_a_reopening() {
    let (rt, dir) = (runtime(), tempfile::tempdir().unwrap());
    let db = new_database(dir.path());
    let mut s = session(&db);
    let mut model = table_with_history(&rt, &s);
    assert_eq!(sorted(&rt, &s, "SELECT * FROM t"), model_rows(&model));

    run(&rt, &s, "ALTER TABLE t ADD COLUMN qty INT NOT NULL DEFAULT 7");
    run(&rt, &s, "ALTER TABLE t ADD note VARCHAR");
    for row in model.values_mut() {
        row.extend(["7".to_string(), "NULL".to_string()]);
    }
    assert_eq!(columns(&rt, &s, "t"), ["id", "v", "name", "qty", "note"]);
    assert_eq!(sorted(&rt, &s, "SELECT * FROM t"), model_rows(&model));

    // New rows take the default, or the value given; the old ones stay.
    run(&rt, &s, "INSERT INTO t (id, v, name) VALUES (1000, 1, 'a')");
    run(&rt, &s, "INSERT INTO t VALUES (1001, 2, 'b', 3, 'x')");
    model.insert(1000, vec!["1".into(), "a".into(), "7".into(), "NULL".into()]);
    model.insert(1001, vec!["2".into(), "b".into(), "3".into(), "x".into()]);
    run(&rt, &s, "UPDATE t SET qty = qty + 1 WHERE id < 10");
    for (id, row) in model.iter_mut() {
        if *id < 10 {
            row[2] = (row[2].parse::<i64>().unwrap() + 1).to_string();
        }
    }
    assert_eq!(sorted(&rt, &s, "SELECT * FROM t"), model_rows(&model));

    // The rows since the ALTER are only in the log: a reopening replays them under the
    // table's new id.
    assert!(unflushed_rows(&db, "t").unwrap() > 0);
    drop(s);
    s = session(&db);
    assert_eq!(sorted(&rt, &s, "SELECT * FROM t"), model_rows(&model));
    assert_eq!(sorted(&rt, &s, "SELECT count(*) FROM t WHERE qty = 7"), vec![vec![model.values().filter(|r| r[2] == "7").count().to_string()]]);

    // Twice the same name: 42701's message, or skipped with IF NOT EXISTS.
    let e = fails(&rt, &s, "ALTER TABLE t ADD COLUMN qty INT");
    assert!(e.contains("column \"qty\" of relation \"t\" already exists"), "{e}");
    run(&rt, &s, "ALTER TABLE t ADD COLUMN IF NOT EXISTS qty BIGINT");
    // NOT NULL without a default over existing rows: refused, nothing changed.
    let e = fails(&rt, &s, "ALTER TABLE t ADD COLUMN z INT NOT NULL");
    assert!(e.contains("contains null values") && e.contains("NOT NULL"), "{e}");
    assert_eq!(columns(&rt, &s, "t"), ["id", "v", "name", "qty", "note"]);
    assert_eq!(sorted(&rt, &s, "SELECT * FROM t"), model_rows(&model));
    // A default that does not convert fails before anything is written.
    let e = fails(&rt, &s, "ALTER TABLE t ADD COLUMN w INT DEFAULT 'abc'");
    assert!(e.contains("abc"), "{e}");
    assert_eq!(columns(&rt, &s, "t"), ["id", "v", "name", "qty", "note"]);
}

#[test]
fn drop_column_takes_its_indexes_and_sequence_with_it() {
    let (rt, dir) = (runtime(), tempfile::tempdir().unwrap());
    let db = new_database(dir.path());
    let s = session(&db);
    let mut model = table_with_history(&rt, &s);
    run(&rt, &s, "ALTER TABLE t ADD CONSTRAINT t_v_key UNIQUE (v)");
    let e = fails(&rt, &s, "INSERT INTO t VALUES (5000, 20, 'dup')");
    assert!(e.contains("t_v_key"), "{e}");

    run(&rt, &s, "ALTER TABLE t DROP COLUMN v");
    for row in model.values_mut() {
        row.remove(0);
    }
    assert_eq!(columns(&rt, &s, "t"), ["id", "name"]);
    assert_eq!(sorted(&rt, &s, "SELECT * FROM t"), model_rows(&model));
    // The unique index over v went with it.
    let catalog = s.write_path().catalog().unwrap();
    assert!(catalog.tables["t"].indexes.is_empty(), "{:?}", catalog.tables["t"].indexes);
    run(&rt, &s, "ALTER TABLE t DROP COLUMN IF EXISTS v");
    let e = fails(&rt, &s, "ALTER TABLE t DROP COLUMN v");
    assert!(e.contains("v"), "{e}");
    // The partition key stays.
    let e = fails(&rt, &s, "ALTER TABLE t DROP COLUMN id");
    assert!(e.contains("partitioned on it"), "{e}");

    // A SERIAL column's sequence goes with the column.
    run(&rt, &s, "CREATE TABLE s (k BIGINT NOT NULL, n SERIAL)");
    run(&rt, &s, "INSERT INTO s (k) VALUES (1), (2)");
    assert_eq!(sorted(&rt, &s, "SELECT k, n FROM s"), vec![vec!["1".to_string(), "1".into()], vec!["2".into(), "2".into()]]);
    run(&rt, &s, "ALTER TABLE s DROP COLUMN n");
    let e = fails(&rt, &s, "SELECT nextval('s_n_seq')");
    assert!(e.contains("s_n_seq"), "{e}");
    assert_eq!(sorted(&rt, &s, "SELECT * FROM s"), vec![vec!["1".to_string()], vec!["2".into()]]);
}

#[test]
fn renames_keep_rows_keys_and_sequences() {
    let (rt, dir) = (runtime(), tempfile::tempdir().unwrap());
    let db = new_database(dir.path());
    let mut s = session(&db);
    run(&rt, &s, "CREATE TABLE t (id SERIAL PRIMARY KEY, name VARCHAR)");
    run(&rt, &s, "INSERT INTO t (name) VALUES ('a'), ('b')");
    s.write_path().checkpoint(&CheckpointOptions::default()).unwrap();
    run(&rt, &s, "INSERT INTO t (name) VALUES ('c')");
    run(&rt, &s, "DELETE FROM t WHERE name = 'b'");

    run(&rt, &s, "ALTER TABLE t RENAME COLUMN name TO title");
    run(&rt, &s, "ALTER TABLE t RENAME id TO ident");
    assert_eq!(columns(&rt, &s, "t"), ["ident", "title"]);
    assert_eq!(sorted(&rt, &s, "SELECT ident, title FROM t"), vec![vec!["1".to_string(), "a".into()], vec!["3".into(), "c".into()]]);
    // The primary key follows its column: a repeated key still fails.
    let e = fails(&rt, &s, "INSERT INTO t VALUES (1, 'again')");
    assert!(e.contains("duplicate key"), "{e}");
    let e = fails(&rt, &s, "ALTER TABLE t RENAME COLUMN title TO ident");
    assert!(e.contains("already exists"), "{e}");

    run(&rt, &s, "ALTER TABLE t RENAME TO u");
    let e = fails(&rt, &s, "SELECT * FROM t");
    assert!(e.contains("t"), "{e}");
    run(&rt, &s, "INSERT INTO u (title) VALUES ('d')");
    assert_eq!(sorted(&rt, &s, "SELECT ident, title FROM u"), vec![vec!["1".to_string(), "a".into()], vec!["3".into(), "c".into()], vec!["4".into(), "d".into()]]);
    // A reopening replays the row logged after the rename into u.
    drop(s);
    s = session(&db);
    assert_eq!(sorted(&rt, &s, "SELECT ident, title FROM u"), vec![vec!["1".to_string(), "a".into()], vec!["3".into(), "c".into()], vec!["4".into(), "d".into()]]);
    let e = fails(&rt, &s, "INSERT INTO u VALUES (4, 'dup')");
    assert!(e.contains("duplicate key"), "{e}");
    // The sequence went with the table, and goes when it is dropped.
    run(&rt, &s, "DROP TABLE u");
    let e = fails(&rt, &s, "SELECT nextval('t_id_seq')");
    assert!(e.contains("t_id_seq"), "{e}");
    run(&rt, &s, "CREATE TABLE v1 (a INT)");
    run(&rt, &s, "CREATE TABLE v2 (a INT)");
    let e = fails(&rt, &s, "ALTER TABLE v1 RENAME TO v2");
    assert!(e.contains("v2"), "{e}");
}

#[test]
fn defaults_are_set_and_dropped() {
    let (rt, dir) = (runtime(), tempfile::tempdir().unwrap());
    let db = new_database(dir.path());
    let s = session(&db);
    run(&rt, &s, "CREATE TABLE t (id BIGINT NOT NULL, qty INT)");
    run(&rt, &s, "INSERT INTO t (id) VALUES (1)");
    run(&rt, &s, "ALTER TABLE t ALTER COLUMN qty SET DEFAULT 5");
    run(&rt, &s, "INSERT INTO t (id) VALUES (2)");
    run(&rt, &s, "ALTER TABLE t ALTER qty DROP DEFAULT");
    run(&rt, &s, "INSERT INTO t (id) VALUES (3)");
    assert_eq!(sorted(&rt, &s, "SELECT id, qty FROM t"), vec![vec!["1".to_string(), "NULL".into()], vec!["2".into(), "5".into()], vec!["3".into(), "NULL".into()]]);
    let e = fails(&rt, &s, "ALTER TABLE t ALTER COLUMN qty SET DEFAULT 'x'");
    assert!(e.contains("'x'") || e.contains("x"), "{e}");
    let e = fails(&rt, &s, "ALTER TABLE t ALTER COLUMN nope SET DEFAULT 1");
    assert!(e.contains("nope"), "{e}");
}

#[test]
fn what_alter_table_does_not_do_is_refused_and_changes_nothing() {
    let (rt, dir) = (runtime(), tempfile::tempdir().unwrap());
    let db = new_database(dir.path());
    let s = session(&db);
    run(&rt, &s, "CREATE TABLE t (id BIGINT NOT NULL, qty INT)");
    run(&rt, &s, "INSERT INTO t VALUES (1, 2)");
    run(&rt, &s, "CREATE VIEW tv AS SELECT id FROM t");
    run(&rt, &s, "CREATE SEQUENCE sx");
    for (sql, says) in [
        ("ALTER TABLE t ADD COLUMN a INT, ADD COLUMN b INT", "one ALTER TABLE per change"),
        ("ALTER TABLE t ADD COLUMN r BIGINT DEFAULT nextval('sx')", "a sequence that exists"),
        ("ALTER TABLE t ADD COLUMN k INT PRIMARY KEY", "ADD PRIMARY KEY"),
        ("ALTER TABLE t ALTER COLUMN qty TYPE BIGINT", "views read it"),
        ("ALTER TABLE t DROP COLUMN qty", "views read it"),
        ("ALTER TABLE t RENAME TO t2", "views read it"),
        ("ALTER TABLE nope ADD COLUMN a INT", "nope"),
    ] {
        let e = fails(&rt, &s, sql);
        assert!(e.contains(says), "{sql}: {e}");
        assert!(!e.contains('\n'), "{sql}: one line: {e}");
    }
    run(&rt, &s, "ALTER TABLE IF EXISTS nope ADD COLUMN a INT");
    assert_eq!(columns(&rt, &s, "t"), ["id", "qty"]);
    assert_eq!(sorted(&rt, &s, "SELECT * FROM t"), vec![vec!["1".to_string(), "2".into()]]);
    // Once the view is gone, the column can go.
    run(&rt, &s, "DROP VIEW tv");
    run(&rt, &s, "ALTER TABLE t DROP COLUMN qty");
    assert_eq!(columns(&rt, &s, "t"), ["id"]);
}

#[test]
fn a_column_store_table_takes_added_and_dropped_columns() {
    let (rt, dir) = (runtime(), tempfile::tempdir().unwrap());
    let db = new_database(dir.path());
    let s = session(&db);
    run(&rt, &s, "CREATE TABLE c (id BIGINT NOT NULL, v DOUBLE PRECISION NOT NULL, tag VARCHAR) WITH (partitions = 2)");
    let values: Vec<String> = (0..5000).map(|i| format!("({i}, {}.5, 't{}')", i, i % 13)).collect();
    run(&rt, &s, &format!("INSERT INTO c VALUES {}", values.join(", ")));
    s.write_path().checkpoint(&CheckpointOptions::default()).unwrap();
    drop(s);
    let rebuild = flashscan_storage::RebuildOptions { row_group_rows: Some(1000), ..Default::default() };
    flashscan_storage::rebuild_table(&db, "c", flashscan_storage::RebuildTarget::parse("columnstore").unwrap(), &rebuild).unwrap();
    let s = session(&db);
    let before = sorted(&rt, &s, "SELECT tag, count(*), sum(v) FROM c GROUP BY tag");

    run(&rt, &s, "ALTER TABLE c ADD COLUMN day DATE DEFAULT DATE '2026-12-07'");
    assert_eq!(s.write_path().catalog().unwrap().tables["c"].format, "columnstore");
    assert_eq!(sorted(&rt, &s, "SELECT tag, count(*), sum(v) FROM c GROUP BY tag"), before);
    assert_eq!(sorted(&rt, &s, "SELECT count(*) FROM c WHERE day = DATE '2026-12-07'"), vec![vec!["5000".to_string()]]);
    run(&rt, &s, "ALTER TABLE c DROP COLUMN tag");
    assert_eq!(columns(&rt, &s, "c"), ["id", "v", "day"]);
    assert_eq!(sorted(&rt, &s, "SELECT count(*), sum(v), min(day) FROM c"), vec![vec!["5000".to_string(), "12500000.0".to_string(), "2026-12-07".into()]]);
}

#[test]
fn a_column_changes_type_and_nullability_value_by_value() {
    let (rt, dir) = (runtime(), tempfile::tempdir().unwrap());
    let db = new_database(dir.path());
    let s = session(&db);
    run(&rt, &s, "CREATE TABLE t (id BIGINT NOT NULL, qty INT, code VARCHAR)");
    run(&rt, &s, "INSERT INTO t VALUES (1, 10, '7'), (2, NULL, '8'), (3, 2147483647, 'x')");
    run(&rt, &s, "CREATE UNIQUE INDEX t_qty ON t (qty)");

    run(&rt, &s, "ALTER TABLE t ALTER COLUMN qty TYPE BIGINT");
    run(&rt, &s, "UPDATE t SET qty = qty + 1 WHERE id = 3");
    assert_eq!(sorted(&rt, &s, "SELECT id, qty FROM t"), vec![vec!["1".to_string(), "10".into()], vec!["2".into(), "NULL".into()], vec!["3".into(), "2147483648".into()]]);
    let types = sorted(&rt, &s, "SELECT arrow_typeof(qty) FROM t LIMIT 1");
    assert_eq!(types, vec![vec!["Int64".to_string()]]);
    // The unique index follows the new type.
    let e = fails(&rt, &s, "INSERT INTO t VALUES (4, 10, 'y')");
    assert!(e.contains("duplicate key"), "{e}");

    // A value that does not convert fails the statement, and nothing changes.
    let e = fails(&rt, &s, "ALTER TABLE t ALTER COLUMN code TYPE INT");
    assert!(e.contains("cannot be converted"), "{e}");
    assert_eq!(sorted(&rt, &s, "SELECT code FROM t"), vec![vec!["7".to_string()], vec!["8".into()], vec!["x".into()]]);
    run(&rt, &s, "DELETE FROM t WHERE code = 'x'");
    run(&rt, &s, "ALTER TABLE t ALTER COLUMN code SET DATA TYPE INT");
    assert_eq!(sorted(&rt, &s, "SELECT code + 1 FROM t"), vec![vec!["8".to_string()], vec!["9".into()]]);

    // SET NOT NULL checks every row; DROP NOT NULL lets NULL in.
    let e = fails(&rt, &s, "ALTER TABLE t ALTER COLUMN qty SET NOT NULL");
    assert!(e.contains("contains null values"), "{e}");
    run(&rt, &s, "UPDATE t SET qty = 0 WHERE qty IS NULL");
    run(&rt, &s, "ALTER TABLE t ALTER COLUMN qty SET NOT NULL");
    let e = fails(&rt, &s, "INSERT INTO t VALUES (5, NULL, 1)");
    assert!(e.to_ascii_lowercase().contains("null"), "{e}");
    run(&rt, &s, "ALTER TABLE t ALTER COLUMN qty DROP NOT NULL");
    run(&rt, &s, "INSERT INTO t VALUES (5, NULL, 1)");
    assert_eq!(sorted(&rt, &s, "SELECT count(*) FROM t WHERE qty IS NULL"), vec![vec!["1".to_string()]]);
    // The partition key keeps its type; USING is refused.
    let e = fails(&rt, &s, "ALTER TABLE t ALTER COLUMN id TYPE INT");
    assert!(e.contains("partitioned on it"), "{e}");
    let e = fails(&rt, &s, "ALTER TABLE t ALTER COLUMN code TYPE BIGINT USING code * 2");
    assert!(e.contains("USING"), "{e}");
}

#[test]
fn serial_identity_and_volatile_defaults_give_each_row_its_own_value() {
    let (rt, dir) = (runtime(), tempfile::tempdir().unwrap());
    let db = new_database(dir.path());
    let mut s = session(&db);
    let model = table_with_history(&rt, &s);
    let rows = model.len();

    // SERIAL: the rows numbered 1..n by the column's new sequence, which goes on from n.
    run(&rt, &s, "ALTER TABLE t ADD COLUMN n SERIAL");
    let numbers = sorted(&rt, &s, "SELECT count(*), count(DISTINCT n), min(n), max(n) FROM t");
    assert_eq!(numbers, vec![vec![rows.to_string(), rows.to_string(), "1".into(), rows.to_string()]]);
    run(&rt, &s, "INSERT INTO t (id, v) VALUES (5000, 1)");
    assert_eq!(sorted(&rt, &s, "SELECT n FROM t WHERE id = 5000"), vec![vec![(rows + 1).to_string()]]);
    // A reopening keeps the sequence past what was handed out.
    drop(s);
    s = session(&db);
    run(&rt, &s, "INSERT INTO t (id, v) VALUES (5001, 1)");
    let next = sorted(&rt, &s, "SELECT n FROM t WHERE id = 5001")[0][0].parse::<usize>().unwrap();
    assert!(next > rows + 1, "{next}");

    // Identity, ALWAYS: numbered too, and an INSERT may not give it a value.
    run(&rt, &s, "ALTER TABLE t ADD COLUMN k BIGINT GENERATED ALWAYS AS IDENTITY (START WITH 100 INCREMENT BY 10)");
    let ks = sorted(&rt, &s, "SELECT count(DISTINCT k), min(k), max(k) FROM t");
    assert_eq!(ks, vec![vec![(rows + 2).to_string(), "100".into(), (100 + 10 * (rows + 1)).to_string()]]);
    let e = fails(&rt, &s, "INSERT INTO t (id, v, k) VALUES (5002, 1, 7)");
    assert!(e.contains("GENERATED ALWAYS"), "{e}");

    // A volatile default: computed for each row.
    run(&rt, &s, "ALTER TABLE t ADD COLUMN r DOUBLE PRECISION DEFAULT random()");
    let r = sorted(&rt, &s, "SELECT count(DISTINCT r) > 1, min(r) >= 0, max(r) < 1, count(r) FROM t");
    assert_eq!(r, vec![vec!["true".to_string(), "true".into(), "true".into(), (rows + 2).to_string()]]);
    // Dropping the SERIAL column drops its sequence; the identity's stays with its column.
    run(&rt, &s, "ALTER TABLE t DROP COLUMN n");
    let e = fails(&rt, &s, "SELECT nextval('t_n_seq')");
    assert!(e.contains("t_n_seq"), "{e}");
    assert_eq!(sorted(&rt, &s, "SELECT count(*) FROM t WHERE k IS NOT NULL"), vec![vec![(rows + 2).to_string()]]);
}
