//! Writes through the binary: `flashscan bench inserts` leaves exactly the rows it reports
//! (counted by SQL afterwards), `BEGIN … COMMIT` across statements in `--file` and in the
//! shell, `COPY t FROM 'file.csv' | 'file.parquet'`; bad input: one line, exit 2, nothing
//! written.
#![cfg(feature = "sql")]

use std::io::Write;
use std::path::Path;
use std::process::{Output, Stdio};

mod common;
use common::{assert_one_line_bad_input, command as flashscan, flashscan as run, stderr};

fn ok(out: Output) -> String {
    assert!(out.status.success(), "failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Exit 2 and one line on stderr containing `needle`; that line.
fn bad(out: Output, needle: &str) -> String {
    assert_one_line_bad_input(&out, needle);
    stderr(&out)
}

fn sql_file(db: &Path, dir: &Path, name: &str, text: &str) -> Output {
    let f = dir.join(name);
    std::fs::write(&f, text).unwrap();
    run(&["sql", &db.to_string_lossy(), "--file", &f.to_string_lossy()])
}

/// One number from SQL (the first value of the last JSON answer).
fn count(db: &Path, query: &str) -> i64 {
    let out = ok(run(&["sql", &db.to_string_lossy(), query, "--json"]));
    let last = out.trim().lines().last().unwrap_or_default().to_string();
    let v: serde_json::Value = serde_json::from_str(&last).unwrap_or_else(|e| panic!("{e}: {out}"));
    v["rows"][0][0].as_i64().unwrap_or_else(|| panic!("{v}"))
}

/// A new temporary directory with a database `db` in it made by `init`, holding table t.
fn new_db() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    ok(run(&["init", &db.to_string_lossy()]));
    ok(run(&["sql", &db.to_string_lossy(), "CREATE TABLE t (id BIGINT NOT NULL, qty INT NOT NULL, note VARCHAR) WITH (partitions = 2)"]));
    (dir, db)
}

#[test]
fn bench_inserts_rows_are_durable_and_counted_by_sql() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let out = ok(run(&["bench", "inserts", &db.to_string_lossy(), "--threads", "4", "--seconds", "1", "--json"]));
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("{e}: {out}"));
    for field in ["rows_per_s", "commits_per_s", "commits_per_flush", "cpu_us_per_row"] {
        assert!(v[field].as_f64().is_some_and(|x| x > 0.0), "{field}: {v}");
    }
    for p in ["p50", "p99"] {
        assert!(v["commit_latency_us"][p].as_f64().is_some_and(|x| x > 0.0), "{p}: {v}");
    }
    assert_eq!(v["database_created"], serde_json::json!(true));
    let rows = v["rows_committed"].as_i64().unwrap();
    assert!(rows > 0 && v["commits"].as_i64() == Some(rows), "one row per commit: {v}");
    assert!(v["commits_per_flush"].as_f64().unwrap() >= 1.0, "{v}");
    assert_eq!(count(&db, "SELECT COUNT(*) FROM bench_inserts"), rows);
    // Every key once, in its session's range (session × 10^10 + i).
    assert_eq!(count(&db, "SELECT COUNT(DISTINCT c1) FROM bench_inserts"), rows);
    assert_eq!(count(&db, "SELECT COUNT(*) FROM bench_inserts WHERE c1 / 10000000000 NOT BETWEEN 1 AND 4 OR c4 <> c1 / 10000000000"), 0);
    assert_eq!(count(&db, "SELECT MIN(LENGTH(c3)) FROM bench_inserts"), 111);
    assert!(v.get("max_unflushed_ms").is_none(), "strict runs have no unflushed window: {v}");

    // Reused: K rows per commit add to the same table; the report says what was there.
    let out = ok(run(&["bench", "inserts", &db.to_string_lossy(), "--threads", "2", "--rows-per-commit", "5", "--seconds", "0.5", "--json"]));
    let v2: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(v2["table_rows_before"].as_i64(), Some(rows));
    let rows2 = v2["rows_committed"].as_i64().unwrap();
    assert_eq!(rows2, v2["commits"].as_i64().unwrap() * 5);
    assert_eq!(count(&db, "SELECT COUNT(*) FROM bench_inserts"), rows + rows2);

    // Bad flags: exit 2, one line, nothing run.
    bad(run(&["bench", "inserts", &db.to_string_lossy(), "--threads", "0"]), "--threads 0");
    bad(run(&["bench", "inserts", &db.to_string_lossy(), "--seconds", "0"]), "--seconds 0");
    bad(run(&["bench", "inserts", &db.to_string_lossy(), "--durability", "lazy"]), "--durability lazy");
    bad(run(&["bench", "inserts", &db.to_string_lossy(), "--statements-per-commit", "0"]), "--statements-per-commit 0");

    // Mode (a): delayed durability reports its measured window; mode (b): K one-row
    // statements per commit; both with the primary key, into bench_inserts_pk.
    let out = ok(run(&["bench", "inserts", &db.to_string_lossy(), "--threads", "2", "--durability", "delayed", "--primary-key", "--seconds", "0.5", "--json"]));
    let a: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!((a["durability"].as_str(), a["table"].as_str(), a["primary_key"].as_bool()), (Some("delayed"), Some("bench_inserts_pk"), Some(true)), "{a}");
    assert!(a["max_unflushed_ms"].as_f64().is_some_and(|ms| ms > 0.0), "{a}");
    let out = ok(run(&["bench", "inserts", &db.to_string_lossy(), "--threads", "2", "--statements-per-commit", "50", "--primary-key", "--seconds", "0.5", "--json"]));
    let b: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    let rows_b = b["rows_committed"].as_i64().unwrap();
    assert_eq!(rows_b, b["commits"].as_i64().unwrap() * 50, "{b}");
    let keyed = a["rows_committed"].as_i64().unwrap() + rows_b;
    assert_eq!(count(&db, "SELECT COUNT(*) FROM bench_inserts_pk"), keyed);
    assert_eq!(count(&db, "SELECT COUNT(DISTINCT c1) FROM bench_inserts_pk"), keyed);
    // A table of another shape under the bench's name is refused, not written into.
    let other = dir.path().join("other");
    ok(run(&["init", &other.to_string_lossy()]));
    ok(run(&["sql", &other.to_string_lossy(), "CREATE TABLE bench_inserts (x INT)"]));
    // (The same refusal for a keyed run whose table has no primary key is in `open`.)
    bad(run(&["bench", "inserts", &other.to_string_lossy(), "--seconds", "0.2"]), "other columns");
}

#[test]
fn begin_commit_in_a_file_is_one_transaction() {
    let (dir, db) = new_db();
    let out = ok(sql_file(&db, dir.path(), "ok.sql", "BEGIN;\nINSERT INTO t VALUES (1, 10, 'a'), (2, 20, NULL);\nINSERT INTO t SELECT id + 100, qty, note FROM t;\nINSERT INTO t VALUES (3, 30, 'c');\nCOMMIT;\n"));
    // The INSERT … SELECT inside the block read the block's own two rows (a transaction
    // reads its own writes, as in PostgreSQL): 2 + 2 + 1 rows.
    assert!(out.contains("COMMIT: 5 rows"), "{out}");
    assert_eq!(count(&db, "SELECT COUNT(*) FROM t"), 5);
    assert_eq!(count(&db, "SELECT COUNT(*) FROM t WHERE id > 100"), 2);

    // An error inside the block: exit 2, says the transaction is aborted, nothing written.
    let err = bad(sql_file(&db, dir.path(), "bad.sql", "BEGIN;\nINSERT INTO t VALUES (4, 40, 'd');\nINSERT INTO t VALUES (5, NULL, 'e');\nCOMMIT;\n"), "transaction is aborted");
    assert!(err.to_lowercase().contains("null"), "{err}");
    assert_eq!(count(&db, "SELECT COUNT(*) FROM t"), 5);

    // A file ending inside the block: rolled back, with a message.
    bad(sql_file(&db, dir.path(), "open.sql", "BEGIN;\nINSERT INTO t VALUES (6, 60, 'f');\n"), "rolled back");
    assert_eq!(count(&db, "SELECT COUNT(*) FROM t"), 5);

    // ROLLBACK discards; statements after it commit on their own.
    let out = ok(sql_file(&db, dir.path(), "rb.sql", "BEGIN;\nINSERT INTO t VALUES (7, 70, 'g');\nROLLBACK;\nINSERT INTO t VALUES (8, 80, 'h');\n"));
    assert!(out.contains("ROLLBACK: 1 staged rows discarded"), "{out}");
    assert_eq!(count(&db, "SELECT COUNT(*) FROM t"), 6);
    assert_eq!(count(&db, "SELECT COUNT(*) FROM t WHERE id = 7"), 0);

    // DDL inside a block commits as it runs (as over the wire), with a warning on stderr;
    // the block goes on. BEGIN does not nest.
    let out = sql_file(&db, dir.path(), "ddl.sql", "BEGIN;\nINSERT INTO t VALUES (9, 90, 'i');\nCREATE TABLE u (x INT);\nROLLBACK;\n");
    assert!(stderr(&out).contains("WARNING: CREATE TABLE inside a transaction block was committed as it ran"), "{}", stderr(&out));
    assert!(ok(out).contains("ROLLBACK: 1 staged rows discarded"));
    bad(sql_file(&db, dir.path(), "nest.sql", "BEGIN;\nBEGIN;\nCOMMIT;\n"), "do not nest");
    assert_eq!(count(&db, "SELECT COUNT(*) FROM t"), 6);
    assert_eq!(count(&db, "SELECT COUNT(*) FROM information_schema.tables WHERE table_name = 'u'"), 1);
}

#[test]
fn begin_commit_in_the_shell() {
    let (dir, db) = new_db();
    let mut child = flashscan()
        .arg("sql")
        .arg(&db)
        .env("HOME", dir.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let input = "BEGIN;\nINSERT INTO t VALUES (1, 1, 'a');\nINSERT INTO t VALUES (2, 2, 'b');\nCOMMIT;\n\
                 BEGIN;\nINSERT INTO t VALUES (3, 3, 'c');\nINSERT INTO t VALUES (4, 'four', 'd');\nINSERT INTO t VALUES (5, 5, 'e');\nCOMMIT;\n\
                 BEGIN;\nINSERT INTO t VALUES (6, 6, 'f');\n";
    child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stdout.contains("COMMIT: 2 rows"), "{stdout}\n{stderr}");
    assert!(stderr.contains("transaction is aborted"), "{stderr}");
    assert!(stderr.contains("refused until ROLLBACK"), "{stderr}");
    assert!(stderr.contains("COMMIT: the transaction was aborted"), "{stderr}");
    assert!(stderr.contains("input ended inside BEGIN"), "{stderr}");
    assert_eq!(count(&db, "SELECT COUNT(*) FROM t"), 2);
    assert_eq!(count(&db, "SELECT SUM(id) FROM t"), 3);
}

#[test]
fn copy_from_csv_and_parquet() {
    let (dir, db) = new_db();
    let d = db.to_string_lossy().to_string();
    let csv = dir.path().join("rows.csv");
    std::fs::write(&csv, "id,qty,note\n1,10,a\n2,20,\n3,30,c\n").unwrap();
    let out = ok(run(&["sql", &d, &format!("COPY t FROM '{}'", csv.display()), "--csv"]));
    assert!(out.contains('3'), "{out}");
    assert_eq!(count(&db, "SELECT SUM(qty) FROM t"), 60);
    assert_eq!(count(&db, "SELECT COUNT(*) FROM t WHERE note IS NULL"), 1);

    // Options: no header, another delimiter.
    let semi = dir.path().join("semi.txt");
    std::fs::write(&semi, "4;40;d\n5;50;e\n").unwrap();
    ok(run(&["sql", &d, &format!("COPY t FROM '{}' WITH (FORMAT csv, HEADER false, DELIMITER ';')", semi.display())]));
    assert_eq!(count(&db, "SELECT COUNT(*) FROM t"), 5);

    // Parquet, made by COPY TO from the table itself.
    let pq = dir.path().join("rows.parquet");
    ok(run(&["sql", &d, &format!("COPY (SELECT id + 100, qty, note FROM t) TO '{}'", pq.display())]));
    ok(run(&["sql", &d, &format!("COPY t FROM '{}'", pq.display())]));
    assert_eq!(count(&db, "SELECT COUNT(*) FROM t"), 10);
    assert_eq!(count(&db, "SELECT SUM(id) FROM t"), 15 + 515);

    // Bad input: one line, exit 2, nothing written.
    let bad_value = dir.path().join("bad.csv");
    std::fs::write(&bad_value, "id,qty,note\n6,60,f\n7,seventy,g\n").unwrap();
    bad(run(&["sql", &d, &format!("COPY t FROM '{}'", bad_value.display())]), "qty");
    let null_value = dir.path().join("null.csv");
    std::fs::write(&null_value, "id,qty,note\n6,60,f\n7,,g\n").unwrap();
    bad(run(&["sql", &d, &format!("COPY t FROM '{}'", null_value.display())]), "NULL");
    let narrow = dir.path().join("narrow.csv");
    std::fs::write(&narrow, "id,qty\n6,60\n").unwrap();
    bad(run(&["sql", &d, &format!("COPY t FROM '{}'", narrow.display())]), "2 columns");
    bad(run(&["sql", &d, &format!("COPY t FROM '{}'", dir.path().join("missing.csv").display())]), "missing.csv");
    let not_parquet = dir.path().join("fake.parquet");
    std::fs::write(&not_parquet, "id,qty,note\n").unwrap();
    let out = run(&["sql", &d, &format!("COPY t FROM '{}'", not_parquet.display())]);
    assert_ne!(out.status.code(), Some(0));
    assert_eq!(String::from_utf8_lossy(&out.stderr).trim_end().lines().count(), 1);
    bad(run(&["sql", &d, &format!("COPY nope FROM '{}'", csv.display())]), "no such table");
    bad(run(&["sql", &d, "COPY t FROM 'rows.json'"]), "FORMAT");
    assert_eq!(count(&db, "SELECT COUNT(*) FROM t"), 10);

    // Inside a block: part of the transaction.
    let out = ok(sql_file(&db, dir.path(), "copy.sql", &format!("BEGIN;\nCOPY t FROM '{}';\nINSERT INTO t VALUES (99, 1, 'z');\nROLLBACK;\nBEGIN;\nCOPY t FROM '{}';\nCOMMIT;\n", csv.display(), csv.display())));
    assert!(out.contains("COMMIT: 3 rows"), "{out}");
    assert_eq!(count(&db, "SELECT COUNT(*) FROM t"), 13);
}

/// One DROP TABLE: SQL's takes the table's indexes with it, as `flashscan drop` does (it
/// once left their catalog entries and files behind).
#[test]
fn sql_drop_table_takes_its_indexes() {
    let (_dir, db) = new_db();
    let d = db.to_string_lossy().into_owned();
    ok(run(&["sql", &d, "INSERT INTO t VALUES (1, 10, 'a'), (2, 20, 'b'), (3, 30, NULL)"]));
    ok(run(&["checkpoint", &d]));
    ok(run(&["index", "create", &d, "t", "--name", "t_id", "--columns", "id"]));
    let catalog = std::fs::read_to_string(db.join("catalog.json")).unwrap();
    assert!(catalog.contains("t_id"), "{catalog}");
    let index_files = |db: &Path| -> Vec<String> {
        std::fs::read_dir(db).unwrap().filter_map(|e| e.ok()).map(|e| e.file_name().to_string_lossy().into_owned()).filter(|n| n.contains("t_id")).collect()
    };
    assert!(!index_files(&db).is_empty(), "the index has a file");
    ok(run(&["sql", &d, "DROP TABLE t"]));
    let catalog = std::fs::read_to_string(db.join("catalog.json")).unwrap();
    assert!(!catalog.contains("t_id"), "the index left the catalog: {catalog}");
    assert!(index_files(&db).is_empty(), "the index file is removed: {:?}", index_files(&db));
    // The name is free again, for a table and for an index.
    ok(run(&["sql", &d, "CREATE TABLE t (id BIGINT NOT NULL, qty INT NOT NULL, note VARCHAR) WITH (partitions = 2)"]));
    ok(run(&["sql", &d, "INSERT INTO t VALUES (4, 40, 'd')"]));
    ok(run(&["checkpoint", &d]));
    ok(run(&["index", "create", &d, "t", "--name", "t_id", "--columns", "id"]));
}

/// Commands that read pages, not the log (`scan`, `rebuild`, `drop` …), see a row committed
/// a moment ago: they checkpoint it into pages first and say so. Deleted rows (a DELETE,
/// an UPDATE's old versions) stay in their pages until a rebuild: `scan`, `index create`
/// and `lookup` skip them and agree with SQL, and `rebuild` leaves them behind.
#[test]
fn page_readers_skip_deleted_rows_and_rebuild_reclaims_them() {
    let (_dir, db) = new_db();
    let d = db.to_string_lossy().to_string();
    ok(run(&["sql", &d, "INSERT INTO t SELECT value, 1, 'n' FROM generate_series(1, 1000)"]));
    // Only in the log until now: scan checkpoints first and counts every row.
    let out = run(&["scan", &d, "t", "--query", "count", "--warm", "--json"]);
    let text = ok(out.clone());
    assert!(stderr(&out).contains("checkpointed first: table t had 1000 committed changes"), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_str(text.trim()).unwrap_or_else(|e| panic!("{e}: {text}"));
    assert_eq!(v["result"][0][0].as_i64(), Some(1000), "{v}");
    assert_eq!(v["deleted_rows_skipped"].as_i64(), Some(0), "{v}");

    ok(run(&["sql", &d, "DELETE FROM t WHERE id % 4 = 0"]));
    ok(run(&["sql", &d, "UPDATE t SET qty = 2 WHERE id <= 10"]));
    // 250 deleted, and the 8 rows of 1..=10 not deleted were updated: their old versions too.
    let out = run(&["scan", &d, "t", "--query", "count", "--warm", "--json"]);
    let v: serde_json::Value = serde_json::from_str(ok(out.clone()).trim()).unwrap();
    assert!(stderr(&out).contains("checkpointed first"), "{}", stderr(&out));
    assert_eq!(v["result"][0][0].as_i64(), Some(count(&db, "SELECT COUNT(*) FROM t")), "{v}");
    assert_eq!(v["result"][0][0].as_i64(), Some(750), "{v}");
    assert_eq!(v["rows_scanned"].as_i64(), Some(750), "{v}");
    assert_eq!(v["deleted_rows_skipped"].as_i64(), Some(258), "{v}");
    let text = ok(run(&["scan", &d, "t", "--query", "count", "--warm"]));
    assert!(text.contains("deleted rows") && text.contains("258 read and skipped (26 %"), "{text}");

    // SUM of four decimals, on pages with and without deleted rows (a range of keys is
    // deleted, and updated rows leave their old versions behind): the scan's sums are SQL's.
    ok(run(&["sql", &d, "CREATE TABLE li (l_orderkey BIGINT NOT NULL, l_quantity DECIMAL(15,2) NOT NULL, l_extendedprice DECIMAL(15,2) NOT NULL, l_discount DECIMAL(15,2), l_tax DECIMAL(15,2) NOT NULL) WITH (partitions = 2)"]));
    ok(run(&["sql", &d, "INSERT INTO li SELECT value, CAST(value % 50 + 1 AS DECIMAL(15,2)), CAST(value * 3 + 0.25 AS DECIMAL(15,2)), CAST((value % 10) / 100.0 AS DECIMAL(15,2)), CAST((value % 9) / 100.0 AS DECIMAL(15,2)) FROM generate_series(1, 5000)"]));
    ok(run(&["checkpoint", &d]));
    ok(run(&["sql", &d, "DELETE FROM li WHERE l_orderkey BETWEEN 1000 AND 1500"]));
    ok(run(&["sql", &d, "UPDATE li SET l_tax = CAST(0.5 AS DECIMAL(15,2)), l_discount = NULL WHERE l_orderkey <= 40"]));
    let v: serde_json::Value = serde_json::from_str(ok(run(&["scan", &d, "li", "--query", "sum4", "--warm", "--json"])).trim()).unwrap();
    let scanned: Vec<i64> = (0..4).map(|i| v["result"][0][i].as_str().unwrap_or_else(|| panic!("{v}")).replace('.', "").parse().unwrap()).collect();
    let sql: Vec<i64> = ["l_quantity", "l_extendedprice", "l_discount", "l_tax"].iter().map(|c| count(&db, &format!("SELECT CAST(SUM({c}) * 100 AS BIGINT) FROM li"))).collect();
    assert_eq!(scanned, sql, "{v}");
    assert_eq!(v["deleted_rows_skipped"].as_i64(), Some(501 + 40), "{v}");

    // index create enters the live rows only; lookup finds no deleted key.
    let v: serde_json::Value = serde_json::from_str(ok(run(&["index", "create", &d, "t", "--name", "by_id", "--columns", "id", "--json"])).trim()).unwrap();
    assert_eq!(v["tree"]["entry_count"].as_i64(), Some(750), "{v}");
    let v: serde_json::Value = serde_json::from_str(ok(run(&["lookup", &d, "t", "--index", "by_id", "--keys", "4,5,8", "--buffer-pool", "64MB", "--json"])).trim()).unwrap();
    // 4 and 8 deleted; 5 updated: its new version only.
    assert_eq!(v["stats"]["rows_count"].as_i64(), Some(1), "{v}");
    assert_eq!(v["rows"], serde_json::json!([[5, 2, "n"]]), "{v}");
    ok(run(&["index", "drop", &d, "t", "by_id"]));

    let rebuilt = ok(run(&["rebuild", &d, "t", "--compression", "none"]));
    assert!(rebuilt.contains("750 rows rebuilt") && rebuilt.contains("258 deleted rows left behind"), "{rebuilt}");
    let v: serde_json::Value = serde_json::from_str(ok(run(&["scan", &d, "t", "--query", "count", "--warm", "--json"])).trim()).unwrap();
    assert_eq!(v["result"][0][0].as_i64(), Some(750), "{v}");
    assert_eq!(count(&db, "SELECT COUNT(*) FROM t"), 750);
    assert_eq!(count(&db, "SELECT SUM(qty) FROM t"), 758);
    assert_eq!(count(&db, "SELECT COUNT(*) FROM t WHERE id % 4 = 0"), 0);
    // The table still takes every write after its rebuild.
    ok(run(&["sql", &d, "DELETE FROM t WHERE id = 1"]));
    ok(run(&["sql", &d, "INSERT INTO t VALUES (1, 5, 'again')"]));
    assert_eq!(count(&db, "SELECT SUM(qty) FROM t WHERE id = 1"), 5);

    // drop, right after an INSERT: the table and its rows go, and stay gone after a reopen.
    ok(run(&["sql", &d, "INSERT INTO t VALUES (2000, 1, 'x')"]));
    let dropped = run(&["drop", &d, "t"]);
    assert!(dropped.status.success(), "{}", stderr(&dropped));
    common::assert_bad_input(&run(&["scan", &d, "t"]), "unknown table");
}
