//! Helpers the command line tests share: run the binary, read its output, check a bad
//! input's exit code and message.
#![allow(dead_code)] // each test file uses its own subset

use std::path::Path;
use std::process::{Command, Output};

pub fn flashscan(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_flashscan")).args(args).output().expect("run flashscan")
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
