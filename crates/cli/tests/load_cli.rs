//! `flashscan load` and `flashscan partitions` end to end, including the bad inputs: each
//! fails with one line on stderr and exit 2, and loses nothing.

mod common;

use common::{assert_one_line_bad_input as assert_bad_input, flashscan, flashscan_env, listing, p, stderr};

#[test]
fn load_then_partitions() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("db");
    let o = flashscan(&["load", p(&db), "--sf", "0.01", "--tables", "orders,nation", "--partitions", "3"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("orders: 15000 rows"), "{out}");
    assert!(out.contains("nation: 25 rows"), "{out}");
    assert!(out.contains("rows/s"), "{out}");

    let o = flashscan(&["partitions", p(&db), "orders", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let parts = v["partitions"].as_array().unwrap();
    assert_eq!(parts.len(), 3);
    let rows: u64 = parts.iter().map(|p| p["row_count"].as_u64().unwrap()).sum();
    assert_eq!(rows, 15000);
    assert_eq!(v["files"].as_array().unwrap().len(), 3);

    let o = flashscan(&["partitions", p(&db), "orders"]);
    assert!(o.status.success());
    assert!(String::from_utf8_lossy(&o.stdout).contains("partition"));

    // Loading it again needs --replace.
    let o = flashscan(&["load", p(&db), "--sf", "0.01", "--tables", "orders"]);
    assert_bad_input(&o, "--replace");
    let o = flashscan(&["load", p(&db), "--sf", "0.01", "--tables", "orders", "--replace", "--partitions", "2"]);
    assert!(o.status.success(), "{}", stderr(&o));
}

#[test]
fn bad_inputs_exit_2() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("db");
    assert_bad_input(&flashscan(&["partitions", p(&tmp.path().join("missing")), "t"]), "is not a flashscan database (no catalog)");
    assert_bad_input(&flashscan(&["load", p(&db), "--sf", "0.01", "--tables", "nosuch"]), "unknown TPC-H table");
    assert_bad_input(&flashscan(&["load", p(&db), "--sf", "0.01", "--tables", "region", "--partition-by", "nosuch"]), "unknown column");
    assert_bad_input(&flashscan(&["load", p(&db), "--sf", "0", "--tables", "region"]), "scale factor");
    assert_bad_input(&flashscan(&["load", p(&db), "--sf", "0.01", "--interleave", "1000"]), "--interleave");
    assert_bad_input(&flashscan(&["load", p(&db)]), "nothing to load");
    assert_bad_input(&flashscan(&["load", p(&db), "--csv", p(&tmp.path().join("none.csv"))]), "is not a file");

    // A foreign directory is left alone.
    let foreign = tmp.path().join("foreign");
    std::fs::create_dir(&foreign).unwrap();
    std::fs::write(foreign.join("mine.txt"), b"x").unwrap();
    assert_bad_input(&flashscan(&["load", p(&foreign), "--sf", "0.01", "--tables", "region"]), "not a flashscan database");
    assert_eq!(std::fs::read_dir(&foreign).unwrap().count(), 1);

    let o = flashscan(&["load", p(&db), "--sf", "0.01", "--tables", "region"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_bad_input(&flashscan(&["partitions", p(&db), "nosuch"]), "unknown table");
}

#[test]
fn disk_full_keeps_the_catalog_and_removes_partial_files() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("db");
    let o = flashscan(&["load", p(&db), "--sf", "0.01", "--tables", "region"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let catalog = std::fs::read(db.join("catalog.json")).unwrap();
    let before = listing(&db);
    let o = flashscan_env(&["load", p(&db), "--sf", "0.01", "--tables", "lineitem"], "FLASHSCAN_FAULT_AFTER_PAGES", "30");
    assert_bad_input(&o, "disk full");
    assert_eq!(std::fs::read(db.join("catalog.json")).unwrap(), catalog);
    assert_eq!(listing(&db), before);
}

#[test]
fn corrupt_and_truncated_data_files_are_named() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("db");
    assert!(flashscan(&["load", p(&db), "--sf", "0.01", "--tables", "orders", "--partitions", "1"]).status.success());
    let o = flashscan(&["partitions", p(&db), "orders", "--verify"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let data = std::fs::read_dir(&db).unwrap().map(|e| e.unwrap().path()).find(|p| p.extension().is_some_and(|e| e == "dat")).unwrap();
    let mut bytes = std::fs::read(&data).unwrap();
    bytes[3 * 8192 + 500] ^= 0xff;
    std::fs::write(&data, &bytes).unwrap();
    let o = flashscan(&["partitions", p(&db), "orders", "--verify"]);
    assert_bad_input(&o, "checksum mismatch");
    let e = stderr(&o);
    assert!(e.contains(data.file_name().unwrap().to_str().unwrap()) && e.contains("offset 24576"), "{e}");
    std::fs::write(&data, &bytes[..8192 * 2]).unwrap();
    assert_bad_input(&flashscan(&["partitions", p(&db), "orders", "--verify"]), "truncated");
}

#[test]
fn corrupt_catalog_is_a_clear_error() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("db");
    assert!(flashscan(&["load", p(&db), "--sf", "0.01", "--tables", "region"]).status.success());
    let path = db.join("catalog.json");
    let mut bytes = std::fs::read(&path).unwrap();
    let n = bytes.len();
    bytes[n - 5] ^= 1;
    std::fs::write(&path, bytes).unwrap();
    assert_bad_input(&flashscan(&["partitions", p(&db), "region"]), "damaged");
}

#[test]
fn csv_import() {
    let tmp = tempfile::tempdir().unwrap();
    let csv = tmp.path().join("Sales.csv");
    std::fs::write(&csv, "region,amount\neast,10\nwest,\n").unwrap();
    let db = tmp.path().join("db");
    let o = flashscan(&["load", p(&db), "--csv", p(&csv)]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("sales: 2 rows"));
}
