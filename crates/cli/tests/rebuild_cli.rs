//! `flashscan rebuild` end to end: rebuild into row and page compression and back, sizes
//! printed, bad inputs exit 2 with one line, and an injected fault keeps the old table.

mod common;

use common::{assert_bad_input, flashscan, flashscan_env, listing, p, small_tpch_db, stderr, stdout};

#[test]
fn rebuild_row_page_and_back() {
    let tmp = small_tpch_db("orders", 2);
    let db = tmp.path().join("db");
    for (compression, format) in [("row", "heap_row"), ("page", "heap_page"), ("none", "heap")] {
        let o = flashscan(&["rebuild", p(&db), "orders", "--compression", compression]);
        assert!(o.status.success(), "{}", stderr(&o));
        let out = stdout(&o);
        assert!(out.contains("orders: 15000 rows") && out.contains(&format!("to {format}")) && out.contains("ratio"), "{out}");
        assert!(stderr(&o).contains("rebuild: partition"), "progress on stderr: {}", stderr(&o));
        let o = flashscan(&["partitions", p(&db), "orders", "--json", "--verify"]);
        assert!(o.status.success(), "{}", stderr(&o));
        assert!(stdout(&o).contains(&format!("\"{format}\"")), "{}", stdout(&o));
    }
}

#[test]
fn bad_inputs_and_faults_keep_the_table() {
    let tmp = small_tpch_db("orders", 2);
    let db = tmp.path().join("db");
    let before = listing(&db);
    let catalog = std::fs::read(db.join("catalog.json")).unwrap();

    assert_bad_input(&flashscan(&["rebuild", p(&db), "orders", "--compression", "zip"]), "--compression");
    assert_bad_input(&flashscan(&["rebuild", p(&db), "nosuch", "--compression", "page"]), "unknown table");
    assert_bad_input(&flashscan(&["rebuild", p(&tmp.path().join("nodb")), "orders", "--compression", "page"]), "not a flashscan database");
    assert_bad_input(&flashscan(&["rebuild", p(&db), "orders", "--compression", "columnstore", "--row-group-rows", "0"]), "--row-group-rows");
    assert_bad_input(&flashscan(&["rebuild", p(&db), "orders", "--compression", "page", "--into", "bad-name"]), "table name");
    let o = flashscan_env(&["rebuild", p(&db), "orders", "--compression", "columnstore", "--row-group-rows", "1000"], "FLASHSCAN_FAULT_AFTER_PAGES", "3");
    assert_bad_input(&o, "disk full");
    let o = flashscan_env(&["rebuild", p(&db), "orders", "--compression", "page"], "FLASHSCAN_FAULT_AFTER_PAGES", "3");
    assert_bad_input(&o, "disk full");

    assert_eq!(listing(&db), before, "partial files removed");
    assert_eq!(std::fs::read(db.join("catalog.json")).unwrap(), catalog, "catalog unchanged");
    let o = flashscan(&["partitions", p(&db), "orders", "--verify"]);
    assert!(o.status.success(), "old table still reads: {}", stderr(&o));
}

#[test]
fn rebuild_into_a_column_store_copy_keeps_the_source() {
    let tmp = small_tpch_db("orders,lineitem", 2);
    let db = tmp.path().join("db");
    // What a rebuild killed mid-write leaves: a data file the catalog lists as about to be
    // written (the intent every write commits before creating its files).
    let orphan = db.join("lineitem_cs.p000.f0.g99.dat");
    std::fs::write(&orphan, vec![0u8; 8192]).unwrap();
    let mut catalog = flashscan_storage::Catalog::read(&db).unwrap();
    catalog.unreferenced_files.push("lineitem_cs.p000.f0.g99.dat".into());
    catalog.write_atomic(&db).unwrap();
    let foreign = db.join("notes.dat");
    std::fs::write(&foreign, b"mine").unwrap();
    // A user's file that merely looks like a data file, and that no catalog lists.
    let lookalike = db.join("lineitem_cs.p001.f0.g98.dat");
    std::fs::write(&lookalike, b"mine too").unwrap();
    let o = flashscan(&["rebuild", p(&db), "lineitem", "--compression", "columnstore", "--into", "lineitem_cs", "--row-group-rows", "5000"]);
    assert!(!orphan.exists(), "the next rebuild removes an interrupted write's file");
    assert!(foreign.exists(), "a file flashscan did not name is never touched");
    assert_eq!(std::fs::read(&lookalike).unwrap(), b"mine too", "a file named like a data file but never listed is never touched");
    assert!(o.status.success(), "{}", stderr(&o));
    let scan = |table: &str, query: &str| {
        let o = flashscan(&["scan", p(&db), table, "--query", query, "--warm", "--json"]);
        assert!(o.status.success(), "{}", stderr(&o));
        serde_json::from_slice::<serde_json::Value>(&o.stdout).unwrap()
    };
    for query in ["count", "sum4", "q1"] {
        let (heap, cs) = (scan("lineitem", query), scan("lineitem_cs", query));
        assert_eq!(heap["result"], cs["result"], "{query}");
        assert_eq!(heap["format"], "heap");
        assert_eq!(cs["format"], "columnstore");
        assert!(cs["decode_s"].as_f64().is_some());
        assert!(cs["row_groups_total"].as_u64().unwrap() >= 2);
    }
    let o = flashscan(&["partitions", p(&db), "lineitem_cs", "--verify"]);
    assert!(o.status.success(), "{}", stderr(&o));
    // --into refuses to replace a table that is not a rebuild of the source.
    let o = flashscan(&["rebuild", p(&db), "lineitem", "--compression", "page", "--into", "orders"]);
    assert_bad_input(&o, "will not replace");
    // A second rebuild into the copy replaces it.
    let o = flashscan(&["rebuild", p(&db), "lineitem", "--compression", "columnstore_archive", "--into", "lineitem_cs"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(scan("lineitem_cs", "sum4")["result"], scan("lineitem", "sum4")["result"]);
    // Drop removes the copy and its files, and leaves the source.
    let files_before = std::fs::read_dir(&db).unwrap().count();
    let o = flashscan(&["drop", p(&db), "lineitem_cs"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(std::fs::read_dir(&db).unwrap().count() < files_before);
    assert_bad_input(&flashscan(&["scan", p(&db), "lineitem_cs"]), "unknown table");
    assert_bad_input(&flashscan(&["drop", p(&db), "lineitem_cs"]), "unknown table");
    assert!(flashscan(&["scan", p(&db), "lineitem"]).status.success());
}
