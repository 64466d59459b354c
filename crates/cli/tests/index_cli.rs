//! `flashscan index create`, `lookup` and `stats` end to end on a small synthetic table.

use std::io::{Seek, SeekFrom, Write};
use std::path::Path;
mod common;

use common::{flashscan, indexed_synthetic_db, ok};

fn json(args: &[&str]) -> serde_json::Value {
    serde_json::from_str(&ok(args)).expect("JSON output")
}

fn setup(dir: &Path) -> String {
    let (db, created) = indexed_synthetic_db(dir);
    assert!(created.contains("3000 entries"), "{created}");
    db
}

#[test]
fn create_lookup_and_stats() {
    let dir = tempfile::tempdir().unwrap();
    let db = setup(dir.path());

    let v = json(&["lookup", &db, "t", "--index", "by_id", "--keys", "1,2,3,999999", "--json"]);
    assert_eq!(v["stats"]["rows_count"], 3);
    assert_eq!(v["stats"]["mode"], "sync");
    let mut ids: Vec<i64> = v["rows"].as_array().unwrap().iter().map(|r| r[0].as_i64().unwrap()).collect();
    ids.sort();
    assert_eq!(ids, vec![1, 2, 3]);
    assert_eq!(v["rows"][0][1].as_i64().unwrap(), v["rows"][0][0].as_i64().unwrap() % 1000);

    let v = json(&["lookup", &db, "t", "--index", "by_id", "--random", "200", "--seed", "9", "--prefetch-from", "25", "--depth", "16", "--json"]);
    assert_eq!(v["stats"]["rows_count"], 200);
    assert_eq!(v["stats"]["mode"], "prefetch");
    assert_eq!(v["stats"]["heap_reads_count"], 0, "warm lookups read nothing");

    for io in ["8K", "64K"] {
        let out = flashscan(&["lookup", &db, "t", "--index", "by_id", "--random", "100", "--cold", "--io-size", io, "--json"]);
        if !out.status.success() && String::from_utf8_lossy(&out.stderr).contains("O_DIRECT") {
            eprintln!("skipping --cold: this file system refuses O_DIRECT");
            continue;
        }
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["stats"]["rows_count"], 100);
        assert!(v["stats"]["heap_reads_count"].as_u64().unwrap() > 0, "cold lookups read the heap");
    }

    let text = ok(&["lookup", &db, "t", "--index", "by_id", "--keys", "5"]);
    assert!(text.contains("1 rows") && text.contains("µs per row"), "{text}");

    let s = json(&["stats", &db, "--json"]);
    assert!(s["runs_count"].as_u64().unwrap() >= 4);
    assert!(s["counters"]["misses_count"].as_u64().unwrap() > 0);
    ok(&["stats", &db, "--reset"]);
    let s = json(&["stats", &db, "--json"]);
    assert_eq!(s["runs_count"], 0);
}

#[test]
fn bad_input_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    let db = setup(dir.path());
    for args in [
        vec!["lookup", &db, "t", "--index", "by_id", "--keys", "1", "--io-size", "16K"],
        vec!["lookup", &db, "t", "--index", "nope", "--keys", "1"],
        vec!["lookup", &db, "t", "--index", "by_id", "--keys", "abc"],
        vec!["lookup", &db, "t", "--index", "by_id", "--keys", "1", "--buffer-pool", "1KB"],
        vec!["index", "create", &db, "t", "--name", "by_id", "--columns", "id"],
        vec!["index", "create", &db, "t", "--name", "f", "--columns", "filler"],
        vec!["index", "create", &db, "nosuch", "--name", "x", "--columns", "id"],
    ] {
        let out = flashscan(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    }
}

#[test]
fn damaged_page_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let db = setup(dir.path());
    let data = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().path()).find(|p| p.extension().is_some_and(|e| e == "dat")).expect("a data file (the loader names them TABLE.pNNN.fN.gGEN.dat)");
    let mut f = std::fs::OpenOptions::new().write(true).open(&data).unwrap();
    for page in 0..300u64 {
        f.seek(SeekFrom::Start(page * 8192 + 2000)).unwrap();
        f.write_all(&[0xEE]).unwrap();
    }
    drop(f);
    let out = flashscan(&["lookup", &db, "t", "--index", "by_id", "--random", "50"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("checksum mismatch"), "{}", String::from_utf8_lossy(&out.stderr));
}
