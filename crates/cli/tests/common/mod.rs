//! The command line tests' kit: run the binary, read its output, check a bad input's exit
//! code and message, and make the databases the tests start from (a small TPC-H load, a
//! synthetic table with an index).
#![allow(dead_code)] // each test file uses its own subset

use std::path::Path;
use std::process::{Command, Output};

/// The binary, to add arguments, environment or stdin to.
pub fn command() -> Command {
    Command::new(env!("CARGO_BIN_EXE_flashscan"))
}

pub fn flashscan(args: &[&str]) -> Output {
    command().args(args).output().expect("run flashscan")
}

/// Runs and expects success; returns stdout.
pub fn ok(args: &[&str]) -> String {
    let o = flashscan(args);
    assert!(o.status.success(), "flashscan {args:?} failed: {}", stderr(&o));
    stdout(&o)
}

pub fn flashscan_env(args: &[&str], key: &str, value: &str) -> Output {
    Command::new(env!("CARGO_BIN_EXE_flashscan")).args(args).env(key, value).output().expect("run flashscan")
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Exit code 2, `needle` in the message, no panic. (Progress lines may precede the error.)
pub fn assert_bad_input(o: &Output, needle: &str) {
    let e = stderr(o);
    assert_eq!(o.status.code(), Some(2), "stderr: {e}");
    assert!(e.contains(needle), "expected {needle:?} in {e:?}");
    assert!(!e.contains("panicked"), "{e}");
}

/// `assert_bad_input`, and the whole of stderr is that one line.
pub fn assert_one_line_bad_input(o: &Output, needle: &str) {
    assert_bad_input(o, needle);
    let e = stderr(o);
    assert_eq!(e.trim_end().lines().count(), 1, "one line: {e:?}");
}

pub fn p(path: &Path) -> &str {
    path.to_str().unwrap()
}

/// File names in `dir`, sorted.
pub fn listing(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    v.sort();
    v
}

/// A small TPC-H database in `DIR/db` (SF 0.01) with these tables and partitions.
pub fn small_tpch_db(tables: &str, partitions: u32) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let db = dir.path().join("db");
    let o = flashscan(&["load", p(&db), "--sf", "0.01", "--tables", tables, "--partitions", &partitions.to_string()]);
    assert!(o.status.success(), "load failed: {}", stderr(&o));
    dir
}

/// A synthetic table `t` (10 rows per page, 3000 rows, ids shuffled) with index `by_id`;
/// returns the database path and the index create's output.
pub fn indexed_synthetic_db(dir: &Path) -> (String, String) {
    use flashscan_bench::synth::{write_table, SynthSpec};
    write_table(dir, &SynthSpec { name: "t".into(), rows_per_page: 10, row_count: 3000, shuffle_seed: Some(3) }).unwrap();
    let db = p(dir).to_string();
    let created = ok(&["index", "create", &db, "t", "--name", "by_id", "--columns", "id"]);
    (db, created)
}
