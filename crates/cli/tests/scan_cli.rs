//! `flashscan scan`: answers and where-the-time-went as a table and as JSON, the check,
//! and every bad input as one line on stderr with exit code 2 and no panic.

use std::path::{Path, PathBuf};
use std::process::Output;

mod common;

use common::command as flashscan;

/// A small TPC-H database: lineitem (SF 0.01, 60K rows) and nation.
fn small_db() -> tempfile::TempDir {
    common::small_tpch_db("lineitem,nation", 3)
}

/// Buffered reads: the test directory's file system may refuse O_DIRECT.
fn scan(db: &Path, table: &str, args: &[&str]) -> Output {
    flashscan()
        .arg("scan")
        .arg(db)
        .arg(table)
        .args(["--warm", "--threads", "2"])
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{e}"))
}

fn json(out: &Output) -> serde_json::Value {
    assert!(out.status.success(), "failed: {}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(text.trim()).unwrap_or_else(|e| panic!("{e}: {text}"))
}

fn assert_bad_input(out: &Output, words: &[&str]) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "stderr: {err}");
    assert_eq!(err.trim().lines().count(), 1, "not one line: {err}");
    assert!(!err.contains("panicked"), "{err}");
    for w in words {
        assert!(err.contains(w), "{w:?} not in {err}");
    }
}

#[test]
fn queries_agree_with_each_other_and_json_has_every_field() {
    let dir = small_db();
    let db = dir.path().join("db");
    let count = json(&scan(&db, "lineitem", &["--query", "count", "--json"]));
    let rows = count["result"][0][0].as_i64().unwrap_or_else(|| panic!("{count}"));
    assert!(rows > 50_000, "{count}");
    assert_eq!(count["rows_scanned"].as_i64(), Some(rows));

    let count11 = json(&scan(&db, "lineitem", &["--query", "count11", "--json"]));
    let counts = count11["result"][0].as_array().unwrap_or_else(|| panic!("{count11}"));
    assert_eq!(counts.len(), 11);
    assert!(counts.iter().all(|c| c.as_i64() == Some(rows)), "{count11}");

    let q1 = json(&scan(&db, "lineitem", &["--query", "q1", "--json", "--check"]));
    for key in [
        "query", "result", "rows_scanned", "elapsed_s", "bytes_read", "mb_per_s", "rows_per_s", "pages_read", "cpu_s",
        "cpu_us_per_page", "waits", "files", "format", "decode_s", "raw_mb_per_s", "efficiency", "verdict",
    ] {
        assert!(q1.get(key).is_some(), "missing {key}: {q1}");
    }
    let groups = q1["result"].as_array().unwrap_or_else(|| panic!("{q1}"));
    assert_eq!(groups.len(), 4, "{q1}");
    assert_eq!(groups[0][0], serde_json::json!("A"));
    // sum_charge is exact at scale 6, a string.
    let charge = groups[0][5].as_str().unwrap_or_else(|| panic!("{q1}"));
    assert_eq!(charge.split('.').nth(1).map(str::len), Some(6), "{charge}");
    let counted: i64 = groups.iter().map(|g| g[9].as_i64().unwrap_or(0)).sum();
    assert!(counted > 0 && counted <= rows);
    assert!(q1["files"].as_array().is_some_and(|f| !f.is_empty()), "{q1}");

    let sum4 = json(&scan(&db, "lineitem", &["--query", "sum4", "--json", "--io-size", "64K", "--depth", "3"]));
    assert_eq!(sum4["io_size_bytes"].as_u64(), Some(64 * 1024));
    assert!(sum4["result"][0][0].as_str().is_some_and(|s| s.contains('.')), "{sum4}");
}

#[test]
fn readable_output_has_the_answer_and_where_the_time_went() {
    let dir = small_db();
    let db = dir.path().join("db");
    let out = scan(&db, "lineitem", &["--query", "needle", "--needle", "Tiresias", "--check"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    for words in ["l_orderkey", "where the time went", "waiting for I/O", "decoding", "verdict", "MB/s"] {
        assert!(text.contains(words), "{words:?} not in {text}");
    }
}

fn data_files(db: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut dirs = vec![db.to_path_buf()];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).unwrap_or_else(|e| panic!("{e}")).flatten() {
            let p = e.path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.metadata().map(|m| m.len()).unwrap_or(0) >= 64 * 1024 {
                files.push(p);
            }
        }
    }
    files.sort_by_key(|p| std::cmp::Reverse(p.metadata().map(|m| m.len()).unwrap_or(0)));
    files
}

#[test]
fn bad_input_is_one_line_and_exit_2() {
    let dir = small_db();
    let db = dir.path().join("db");
    assert_bad_input(&scan(&dir.path().join("missing"), "lineitem", &[]), &["missing"]);
    let foreign = dir.path().join("foreign");
    std::fs::create_dir(&foreign).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(foreign.join("notes.txt"), "hello").unwrap_or_else(|e| panic!("{e}"));
    assert_bad_input(&scan(&foreign, "lineitem", &[]), &["not a flashscan database"]);
    assert_bad_input(&scan(&db, "nosuchtable", &[]), &["nosuchtable"]);
    assert_bad_input(&scan(&db, "lineitem", &["--query", "q99"]), &["q99"]);
    assert_bad_input(&scan(&db, "nation", &["--query", "q1"]), &["l_returnflag"]);
    assert_bad_input(&scan(&db, "lineitem", &["--io-size", "1K"]), &["I/O size"]);
    assert_bad_input(&scan(&db, "lineitem", &["--io-size", "lots"]), &["lots"]);
    assert_bad_input(&scan(&db, "lineitem", &["--depth", "0"]), &["depth"]);
    assert_bad_input(&scan(&db, "lineitem", &["--query", "sum4", "--needle", "x"]), &["--needle"]);
}

#[test]
fn damaged_data_files_are_bad_input() {
    let dir = small_db();
    let db = dir.path().join("db");
    let files = data_files(&db);
    let biggest = files.first().unwrap_or_else(|| panic!("no data files in {}", db.display()));
    let mut bytes = std::fs::read(biggest).unwrap_or_else(|e| panic!("{e}"));
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x5A;
    std::fs::write(biggest, &bytes).unwrap_or_else(|e| panic!("{e}"));
    let name = biggest.file_name().unwrap_or_default().to_string_lossy().into_owned();
    assert_bad_input(&scan(&db, "lineitem", &["--query", "sum4"]), &[&name]);

    let f = std::fs::OpenOptions::new().write(true).open(biggest).unwrap_or_else(|e| panic!("{e}"));
    f.set_len(bytes.len() as u64 / 3).unwrap_or_else(|e| panic!("{e}"));
    assert_bad_input(&scan(&db, "lineitem", &["--query", "count"]), &[&name]);
}
