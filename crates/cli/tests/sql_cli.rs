//! `flashscan sql`: answers as a table, JSON and CSV; `--file`; the shell on piped input;
//! errors as one line with exit code 2.
#![cfg(feature = "sql")]

use std::io::Write;
use std::path::Path;
use std::process::{Output, Stdio};

mod common;
use common::command as flashscan;

/// A small TPC-H database (nation and region: enough for every printer and error).
fn small_db() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let db = dir.path().join("db");
    let out = flashscan()
        .args(["load", &db.to_string_lossy(), "--sf", "0.01", "--tables", "nation,region,orders"])
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(out.status.success(), "load failed: {}", String::from_utf8_lossy(&out.stderr));
    dir
}

fn sql(db: &Path, args: &[&str]) -> Output {
    flashscan().arg("sql").arg(db).args(args).output().unwrap_or_else(|e| panic!("{e}"))
}

fn stdout(out: &Output) -> String {
    assert!(out.status.success(), "failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn json_has_columns_rows_time_and_scan_figures() {
    let dir = small_db();
    let db = dir.path().join("db");
    let out = stdout(&sql(&db, &["SELECT o_orderkey, o_totalprice, o_orderdate FROM orders ORDER BY o_orderkey LIMIT 2", "--json"]));
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("{e}: {out}"));
    assert_eq!(v["columns"], serde_json::json!(["o_orderkey", "o_totalprice", "o_orderdate"]));
    let rows = v["rows"].as_array().unwrap_or_else(|| panic!("rows: {v}"));
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0][0], serde_json::json!(1));
    // Decimals as strings with their scale, dates as ISO strings.
    let price = rows[0][1].as_str().unwrap_or_else(|| panic!("price not a string: {v}"));
    assert!(price.split('.').nth(1).is_some_and(|d| d.len() == 2), "{price}");
    let date = rows[0][2].as_str().unwrap_or_else(|| panic!("date not a string: {v}"));
    assert!(date.len() == 10 && date.as_bytes()[4] == b'-', "{date}");
    assert!(v["elapsed_s"].as_f64().is_some_and(|s| s >= 0.0), "{v}");
    assert!(v["scan"]["bytes_read"].as_u64().is_some_and(|b| b > 0), "{v}");
    assert!(v["scan"]["tables"]["orders"]["pages_read"].as_u64().is_some_and(|p| p > 0), "{v}");
}

#[test]
fn table_csv_and_file() {
    let dir = small_db();
    let db = dir.path().join("db");
    let table = stdout(&sql(&db, &["SELECT r_name FROM region ORDER BY r_name"]));
    assert!(table.contains("AFRICA") && table.contains("5 rows in"), "{table}");

    let csv = stdout(&sql(&db, &["SELECT r_regionkey, r_name FROM region ORDER BY r_regionkey", "--csv"]));
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines[0], "r_regionkey,r_name");
    assert_eq!(lines[1], "0,AFRICA");
    assert_eq!(lines.len(), 6);

    let file = dir.path().join("q.sql");
    std::fs::write(&file, "SELECT COUNT(*) AS n FROM nation;").unwrap_or_else(|e| panic!("{e}"));
    let csv = stdout(&sql(&db, &["--file", &file.to_string_lossy(), "--csv"]));
    assert_eq!(csv, "n\n25\n");
}

#[test]
fn explain_analyze_prints_the_scan_figures() {
    let dir = small_db();
    let db = dir.path().join("db");
    let out = stdout(&sql(&db, &["EXPLAIN ANALYZE SELECT SUM(o_totalprice) FROM orders"]));
    for needle in ["FlashscanExec", "bytes_read=", "io_wait=", "decode_time="] {
        assert!(out.contains(needle), "lacks {needle}: {out}");
    }
}

#[test]
fn errors_are_one_line_and_exit_2() {
    let dir = small_db();
    let db = dir.path().join("db");
    for (query, needle) in [
        ("SELEC 1", "SQL error: syntax error"),
        ("SELECT * FROM nope", "nope"),
        ("SELECT nope FROM nation", "nope"),
        ("SELECT n_name * 2 FROM nation", "SQL error"),
    ] {
        let out = sql(&db, &[query]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{query}: {err}");
        assert!(err.starts_with("flashscan: ") && err.contains(needle), "{query}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{query}: {err}");
    }
    let out = sql(&db, &["SELECT 1", "--json", "--csv"]);
    assert_eq!(out.status.code(), Some(2));
    let out = sql(&dir.path().join("missing"), &["SELECT 1"]);
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn shell_reads_statements_from_piped_input() {
    let dir = small_db();
    let db = dir.path().join("db");
    let mut child = flashscan()
        .arg("sql")
        .arg(&db)
        .arg("--csv")
        .env("HOME", dir.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{e}"));
    if let Some(mut stdin) = child.stdin.take() {
        stdin.write_all(b"SELECT COUNT(*) AS n\n  FROM region;\nSELEC 1;\nSELECT 2 AS two;\n\\q\n").unwrap_or_else(|e| panic!("{e}"));
    }
    let out = child.wait_with_output().unwrap_or_else(|e| panic!("{e}"));
    let text = String::from_utf8_lossy(&out.stdout);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(text.contains("n\n5\n"), "{text}");
    // An error does not end the shell: the next statement still runs.
    assert!(err.contains("syntax error"), "{err}");
    assert!(text.contains("two\n2\n"), "{text}");
}
