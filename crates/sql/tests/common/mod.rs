//! What the SQL tests share: a runtime, a database made by `flashscan init`, a session on
//! it, and statements run to an answer or to their error.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use flashscan_sql::{FlashscanSession, QueryOutput, SessionOptions};
use flashscan_write::{init_database, InitOptions};

pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap()
}

/// A database made by `flashscan init` (1 MiB log segments) in `dir`.
pub fn new_database(dir: &Path) -> PathBuf {
    let db = dir.join("db");
    init_database(&db, &InitOptions { segment_size_bytes: Some(1 << 20), ..Default::default() }).unwrap();
    db
}

pub fn session(db: &Path) -> FlashscanSession {
    FlashscanSession::open(db, SessionOptions::default()).unwrap_or_else(|e| panic!("open: {e}"))
}

pub fn run(rt: &tokio::runtime::Runtime, s: &FlashscanSession, sql: &str) -> QueryOutput {
    rt.block_on(s.run_one(sql)).unwrap_or_else(|e| panic!("{sql}: {e}"))
}

/// The error of a statement that must fail.
pub fn fails(rt: &tokio::runtime::Runtime, s: &FlashscanSession, sql: &str) -> String {
    match rt.block_on(s.run_one(sql)) {
        Ok(_) => panic!("{sql}: should have failed"),
        Err(e) => e.to_string(),
    }
}

/// Every value of the answer as text, row by row (NULL as "NULL").
pub fn texts(out: &QueryOutput) -> Vec<Vec<String>> {
    let options = arrow::util::display::FormatOptions::default().with_null("NULL");
    let mut rows = Vec::new();
    for b in &out.batches {
        let formatters: Vec<_> = b.columns().iter().map(|c| arrow::util::display::ArrayFormatter::try_new(c.as_ref(), &options).unwrap()).collect();
        for r in 0..b.num_rows() {
            rows.push(formatters.iter().map(|f| f.value(r).to_string()).collect());
        }
    }
    rows
}

/// The answer of `sql` as sorted rows of text.
pub fn sorted(rt: &tokio::runtime::Runtime, s: &FlashscanSession, sql: &str) -> Vec<Vec<String>> {
    let mut rows = texts(&run(rt, s, sql));
    rows.sort();
    rows
}

/// xorshift64*: the tests' own seeded sequence (no dependency, reproducible by seed).
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}
