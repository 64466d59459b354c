//! Issue 14 through the binary: `verify` (every page, segment and index node), `index drop`,
//! indexes dropped with their table, concurrent index creates, planted links at the stats
//! names, `stats` on a directory that is not a database, and flags out of range.

use std::path::Path;
use std::process::Command;

use flashscan_bench::synth::{write_table, SynthSpec};
use flashscan_storage::Catalog;

mod common;

use common::{assert_bad_input, assert_one_line_bad_input, flashscan, indexed_synthetic_db, ok, stderr, stdout};

fn setup(dir: &Path) -> String {
    indexed_synthetic_db(dir).0
}

fn index_names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = Catalog::read(dir).unwrap().indexes.iter().map(|i| format!("{}.{}", i.table, i.name)).collect();
    names.sort();
    names
}

#[test]
fn verify_checks_pages_and_index_nodes() {
    let dir = tempfile::tempdir().unwrap();
    let db = setup(dir.path());
    let out = ok(&["verify", &db]);
    assert!(out.contains("300 heap pages") && out.contains("3000 rows") && out.contains("1 indexes") && out.contains("all checksums"), "{out}");
    let v: serde_json::Value = serde_json::from_str(&ok(&["verify", &db, "t", "--json"])).unwrap();
    let nodes = v["counts"]["index_nodes_count"].as_u64().unwrap();
    assert!(nodes >= 3, "{v}");
    // Flip a byte in every index node in turn: each is caught, named by file and offset.
    let file = dir.path().join(&Catalog::read(dir.path()).unwrap().indexes[0].file);
    let clean = std::fs::read(&file).unwrap();
    for node in 0..nodes as usize {
        let mut bytes = clean.clone();
        bytes[node * 8192 + 4000] ^= 0x10;
        std::fs::write(&file, &bytes).unwrap();
        let o = flashscan(&["verify", &db]);
        assert_eq!(o.status.code(), Some(1), "node {node}: {}", stdout(&o));
        let text = stdout(&o);
        assert!(text.contains("DAMAGED t.by_id") && text.contains(&format!("at byte {}", node * 8192)) && text.contains("index drop"), "{text}");
    }
    std::fs::write(&file, &clean).unwrap();
    ok(&["verify", &db]);
    // A damaged heap page: verify exits 1, partitions --verify exits 2 as before.
    let data = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().path()).find(|p| p.extension().is_some_and(|e| e == "dat")).expect("a data file (the loader names them TABLE.pNNN.fN.gGEN.dat)");
    let mut bytes = std::fs::read(&data).unwrap();
    bytes[7 * 8192 + 3000] ^= 1;
    std::fs::write(&data, &bytes).unwrap();
    let o = flashscan(&["verify", &db]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stdout(&o).contains(&format!("at byte {}", 7 * 8192)), "{}", stdout(&o));
    let o = flashscan(&["partitions", &db, "t", "--verify"]);
    assert_bad_input(&o, "checksum mismatch");
}

#[test]
fn index_drop_and_table_drop_remove_index_files() {
    let dir = tempfile::tempdir().unwrap();
    let db = setup(dir.path());
    ok(&["index", "create", &db, "t", "--name", "by_val", "--columns", "val"]);
    assert_eq!(index_names(dir.path()), vec!["t.by_id", "t.by_val"]);
    let out = ok(&["index", "drop", &db, "t", "by_val"]);
    assert!(out.contains("dropped index by_val"), "{out}");
    assert!(!dir.path().join("index_t_by_val.fsbt").exists());
    assert_eq!(index_names(dir.path()), vec!["t.by_id"]);
    assert_eq!(flashscan(&["index", "drop", &db, "t", "by_val"]).status.code(), Some(2));
    assert!(dir.path().join("index_t_by_id.fsbt").exists());
    ok(&["drop", &db, "t"]);
    assert!(!dir.path().join("index_t_by_id.fsbt").exists(), "dropping the table drops its indexes");
    assert!(index_names(dir.path()).is_empty());
    // Replacing the table drops them too.
    let db = setup(dir.path());
    write_table(dir.path(), &SynthSpec { name: "t".into(), rows_per_page: 10, row_count: 100, shuffle_seed: None }).unwrap();
    assert!(index_names(dir.path()).is_empty());
    assert!(!dir.path().join("index_t_by_id.fsbt").exists());
    ok(&["index", "create", &db, "t", "--name", "by_id", "--columns", "id"]);
}

#[test]
fn concurrent_index_creates_both_land() {
    for round in 0..3 {
        let dir = tempfile::tempdir().unwrap();
        write_table(dir.path(), &SynthSpec { name: "t".into(), rows_per_page: 10, row_count: 20000, shuffle_seed: Some(round) }).unwrap();
        let db = dir.path().to_str().unwrap();
        let a = Command::new(env!("CARGO_BIN_EXE_flashscan")).args(["index", "create", db, "t", "--name", "a", "--columns", "id"]).spawn().unwrap();
        let b = Command::new(env!("CARGO_BIN_EXE_flashscan")).args(["index", "create", db, "t", "--name", "b", "--columns", "val"]).spawn().unwrap();
        assert!(a.wait_with_output().unwrap().status.success());
        assert!(b.wait_with_output().unwrap().status.success());
        assert_eq!(index_names(dir.path()), vec!["t.a", "t.b"]);
        ok(&["verify", db]);
    }
}

#[test]
fn legacy_index_list_is_refused_clearly() {
    let dir = tempfile::tempdir().unwrap();
    let db = setup(dir.path());
    std::fs::write(dir.path().join("indexes.json"), b"{\"format_version\":1,\"indexes\":[]}").unwrap();
    let o = flashscan(&["index", "create", &db, "t", "--name", "x", "--columns", "id"]);
    assert_bad_input(&o, "indexes.json is from an earlier flashscan");
}

#[test]
fn stats_files_are_never_written_through_links_or_outside_a_database() {
    let dir = tempfile::tempdir().unwrap();
    let db = setup(dir.path());
    let target = dir.path().join("..").join(format!("target-{}", std::process::id()));
    let target = std::path::absolute(target).unwrap();
    std::os::unix::fs::symlink(&target, dir.path().join("buffer_stats.lock")).unwrap();
    std::os::unix::fs::symlink(&target, dir.path().join("buffer_stats.json.tmp")).unwrap();
    let o = flashscan(&["lookup", &db, "t", "--index", "by_id", "--keys", "1"]);
    assert!(o.status.success(), "the lookup itself succeeds: {}", stderr(&o));
    assert!(!target.exists(), "nothing created through the links");
    std::fs::remove_file(dir.path().join("buffer_stats.lock")).unwrap();
    std::os::unix::fs::symlink(&target, dir.path().join("buffer_stats.json")).unwrap();
    let o = flashscan(&["stats", &db]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(!target.exists());

    let foreign = tempfile::tempdir().unwrap();
    std::fs::write(foreign.path().join("notes.txt"), b"mine").unwrap();
    let o = flashscan(&["stats", foreign.path().to_str().unwrap(), "--reset"]);
    assert_bad_input(&o, "not a flashscan database");
    let names: Vec<_> = std::fs::read_dir(foreign.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(names.len(), 1, "nothing written into it: {names:?}");
}

#[test]
fn flags_out_of_range_are_one_line_errors() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let db = db.to_str().unwrap();
    for threads in ["0", "100000"] {
        let o = flashscan(&["load", db, "--sf", "0.01", "--tables", "region", "--threads", threads]);
        assert_one_line_bad_input(&o, "--threads");
    }
    let o = flashscan(&["load", db, "--sf", "0.01", "--tables", "region", "--partition-by", "nope"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(!Path::new(db).exists(), "a failed load leaves no new directory");
    ok(&["load", db, "--sf", "0.01", "--tables", "region"]);
    let setup_dir = tempfile::tempdir().unwrap();
    let idx = setup(setup_dir.path());
    let o = flashscan(&["lookup", &idx, "t", "--index", "by_id", "--keys", "99999999999999999999999"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
}

#[test]
fn a_load_killed_mid_write_leaves_files_the_next_write_removes() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("db");
    let d = db.to_str().unwrap();
    ok(&["load", d, "--sf", "0.01", "--tables", "region"]);
    let mut child = Command::new(env!("CARGO_BIN_EXE_flashscan")).args(["load", d, "--sf", "0.2", "--tables", "lineitem", "--partitions", "2"]).spawn().unwrap();
    let started = std::time::Instant::now();
    let lineitem_files = || -> Vec<std::path::PathBuf> {
        std::fs::read_dir(&db).unwrap().map(|e| e.unwrap().path()).filter(|p| p.file_name().unwrap().to_string_lossy().starts_with("lineitem.")).collect()
    };
    while lineitem_files().iter().all(|p| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0) == 0) {
        if started.elapsed().as_secs() > 120 || child.try_wait().unwrap().is_some() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let killed = child.try_wait().unwrap().is_none();
    child.kill().unwrap();
    child.wait().unwrap();
    if !killed {
        eprintln!("the load finished before it could be killed; nothing to check");
        return;
    }
    assert!(!lineitem_files().is_empty(), "the killed load left its files");
    let catalog = Catalog::read(&db).unwrap();
    assert!(!catalog.tables.contains_key("lineitem"));
    assert!(catalog.unreferenced_files.iter().any(|f| f.starts_with("lineitem.")), "the intent names them");
    ok(&["load", d, "--sf", "0.01", "--tables", "nation"]);
    assert!(lineitem_files().is_empty(), "the next write removed them: {:?}", lineitem_files());
    assert!(Catalog::read(&db).unwrap().unreferenced_files.is_empty());
    ok(&["verify", d]);
}
