//! Issue 14's failures, one test each: a catalog edited to point outside the database
//! (absolute, `..`, through a linked directory, an undeclared or unmarked volume) is refused
//! by every command and the outside file stays byte-identical; links planted at every name
//! flashscan creates are never written through; the orphan sweep leaves a user's look-alike
//! file; verification catches every flipped byte in column store segments; unbounded inputs
//! are refused; two first loads into one new directory both succeed.

use std::path::{Path, PathBuf};

use flashscan_storage::columnstore::RowGroupReader;
use flashscan_storage::fs_safe::{replace_file_atomic, VOLUME_MARKER_FILE_NAME};
use flashscan_storage::load::csv::csv_source;
use flashscan_storage::load::tpch::tpch_source;
use flashscan_storage::verify::{verify_table, VerifyReport};
use flashscan_storage::{drop_table, load_table, rebuild_table, Catalog, Database, LoadOptions, RebuildOptions, RebuildTarget, StorageError};
use rand::{Rng, SeedableRng};

mod common;
use common::{load_options, tpch_db};

fn small_csv(dir: &Path, name: &str) -> PathBuf {
    let path = dir.join(format!("{name}.csv"));
    let mut text = String::from("id,name\n");
    for i in 0..500 {
        text.push_str(&format!("{i},row{i}\n"));
    }
    std::fs::write(&path, text).unwrap();
    path
}

/// A new database `db` in a temporary directory (the first part keeps it) holding table `t`
/// loaded from `small_csv` (written beside the database).
fn csv_db() -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("db");
    let csv = small_csv(tmp.path(), "t");
    load_table(&db, csv_source(&csv, "t").unwrap(), &load_options(1)).unwrap();
    (tmp, db)
}

/// Points every path of table `t` in the catalog at `path` (checksum recomputed, as a
/// careful hand edit would).
fn edit_catalog_paths(db: &Path, good: &Catalog, table: &str, path: &str) {
    let mut catalog = good.clone();
    let t = catalog.tables.get_mut(table).unwrap();
    for f in &mut t.files {
        f.path = path.to_string();
    }
    for p in &mut t.partitions {
        for r in &mut p.runs {
            r.file = path.to_string();
        }
    }
    catalog.write_atomic(db).unwrap();
}

fn assert_refused(result: Result<impl std::fmt::Debug, StorageError>, what: &str) {
    match result {
        Err(StorageError::PathOutsideDatabase { entry, .. }) => assert!(!entry.is_empty(), "{what}"),
        other => panic!("{what}: expected a refusal naming the catalog entry, got {other:?}"),
    }
}

#[test]
fn edited_catalog_pointing_outside_is_refused_and_the_outside_file_kept() {
    let (tmp, db) = csv_db();
    let outside_dir = tmp.path().join("outside");
    std::fs::create_dir(&outside_dir).unwrap();
    let outside = outside_dir.join("precious.dat");
    let precious: Vec<u8> = (0..65536u32).map(|i| (i * 7) as u8).collect();
    std::fs::write(&outside, &precious).unwrap();
    std::os::unix::fs::symlink(&outside_dir, db.join("linked")).unwrap();
    // The name flashscan would generate, so only confinement stands between it and a delete.
    std::fs::copy(&outside, outside_dir.join("t.p000.f0.g1.dat")).unwrap();
    let candidates = [
        outside.to_string_lossy().into_owned(),
        outside_dir.join("t.p000.f0.g1.dat").to_string_lossy().into_owned(),
        "../outside/precious.dat".to_string(),
        "linked/precious.dat".to_string(),
        "linked/t.p000.f0.g1.dat".to_string(),
    ];
    let good = Catalog::read(&db).unwrap();
    for path in &candidates {
        edit_catalog_paths(&db, &good, "t", path);
        assert_refused(Database::open(&db).map(|_| ()), &format!("open with {path}"));
        assert_refused(drop_table(&db, "t"), &format!("drop with {path}"));
        assert_refused(rebuild_table(&db, "t", RebuildTarget::parse("page").unwrap(), &RebuildOptions::default()), &format!("rebuild with {path}"));
        let csv = small_csv(tmp.path(), "t");
        let replace = LoadOptions { replace: true, ..load_options(1) };
        assert_refused(load_table(&db, csv_source(&csv, "t").unwrap(), &replace), &format!("load --replace with {path}"));
        assert_eq!(std::fs::read(&outside).unwrap(), precious, "{path}: the outside file is untouched");
        assert_eq!(std::fs::read(outside_dir.join("t.p000.f0.g1.dat")).unwrap(), precious, "{path}");
        let created: Vec<_> = std::fs::read_dir(&outside_dir).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(created.len(), 2, "{path}: nothing created beside it: {created:?}");
    }
    // A volume declared in the catalog must be a real directory carrying the marker.
    let mut catalog = good.clone();
    catalog.volumes.push(outside_dir.to_string_lossy().into_owned());
    catalog.tables.get_mut("t").unwrap().files[0].path = outside.to_string_lossy().into_owned();
    for p in &mut catalog.tables.get_mut("t").unwrap().partitions {
        for r in &mut p.runs {
            r.file = outside.to_string_lossy().into_owned();
        }
    }
    catalog.write_atomic(&db).unwrap();
    assert_refused(Database::open(&db).map(|_| ()), "unmarked volume");
    assert_refused(drop_table(&db, "t"), "unmarked volume");
    catalog.volumes = vec![db.join("linked").to_string_lossy().into_owned()];
    catalog.write_atomic(&db).unwrap();
    assert_refused(Database::open(&db).map(|_| ()), "linked volume");
    assert_eq!(std::fs::read(&outside).unwrap(), precious);
    // Unreferenced files are confined too: an edited list cannot make the sweep delete.
    let mut catalog = good.clone();
    catalog.unreferenced_files.push(outside_dir.join("t.p000.f0.g1.dat").to_string_lossy().into_owned());
    catalog.write_atomic(&db).unwrap();
    assert_refused(drop_table(&db, "t"), "unreferenced outside");
    assert_eq!(std::fs::read(outside_dir.join("t.p000.f0.g1.dat")).unwrap(), precious);
    // The untouched catalog still works.
    good.write_atomic(&db).unwrap();
    drop_table(&db, "t").unwrap();
}

#[test]
fn links_planted_at_our_names_are_never_written_through() {
    let (tmp, db) = csv_db();
    let target = tmp.path().join("target");
    std::fs::write(&target, b"keep me").unwrap();
    let missing_target = tmp.path().join("would_be_created");
    // The fixed temporary names of earlier versions, and unique ones of this process.
    let mut names: Vec<String> = ["catalog.json.tmp", "indexes.json.tmp", "buffer_stats.json.tmp", "index_t_i.fsbt.tmp"].iter().map(|s| s.to_string()).collect();
    for n in 0..64 {
        names.push(format!(".catalog.json.tmp-{}-{n}", std::process::id()));
    }
    for (i, name) in names.iter().enumerate() {
        let to = if i % 2 == 0 { &target } else { &missing_target };
        std::os::unix::fs::symlink(to, db.join(name)).unwrap();
    }
    // Writes either succeed (other temporary names) or fail, never write through a link.
    for _ in 0..70 {
        let _ = Catalog::read(&db).unwrap().write_atomic(&db);
    }
    let _ = replace_file_atomic(&db, "buffer_stats.json", b"{}");
    let csv = small_csv(tmp.path(), "u");
    let _ = load_table(&db, csv_source(&csv, "u").unwrap(), &load_options(1));
    assert_eq!(std::fs::read(&target).unwrap(), b"keep me");
    assert!(!missing_target.exists());

    // The lock: a link at its name refuses the write.
    std::fs::remove_file(db.join("flashscan.lock")).unwrap();
    std::os::unix::fs::symlink(&missing_target, db.join("flashscan.lock")).unwrap();
    let e = drop_table(&db, "t").unwrap_err();
    assert!(matches!(e, StorageError::UnsafeFile { .. }), "{e}");
    assert!(!missing_target.exists());
    std::fs::remove_file(db.join("flashscan.lock")).unwrap();
    std::os::unix::fs::symlink(&target, db.join("flashscan.lock")).unwrap();
    assert!(drop_table(&db, "t").is_err());
    assert_eq!(std::fs::read(&target).unwrap(), b"keep me");

    // A data file name: a link planted where the next load would create its file.
    std::fs::remove_file(db.join("flashscan.lock")).unwrap();
    let generation = Catalog::read(&db).unwrap().generation + 1;
    std::os::unix::fs::symlink(&missing_target, db.join(format!("v.p000.f0.g{generation}.dat"))).unwrap();
    let csv = small_csv(tmp.path(), "v");
    let e = load_table(&db, csv_source(&csv, "v").unwrap(), &load_options(1)).unwrap_err();
    assert!(e.to_string().contains("already exists"), "{e}");
    assert!(!missing_target.exists());
    assert!(db.join(format!("v.p000.f0.g{generation}.dat")).symlink_metadata().unwrap().file_type().is_symlink(), "the planted link is left alone");
}

#[test]
fn verify_catches_every_flipped_byte_in_column_store_segments() {
    let (_tmp, db_dir) = tpch_db("orders", 2);
    rebuild_table(&db_dir, "orders", RebuildTarget::ColumnStore { archive: false }, &RebuildOptions { row_group_rows: Some(4000), ..Default::default() }).unwrap();
    let db = Database::open(&db_dir).unwrap();
    let table = db.table("orders").unwrap().clone();
    let mut clean = VerifyReport::default();
    verify_table(&db, &table, &mut clean);
    assert!(clean.is_clean(), "{:?}", clean.failures);
    assert_eq!(clean.counts.rows_count, 15000);
    assert!(clean.counts.row_groups_count >= 4);
    assert_eq!(clean.counts.segments_count, clean.counts.row_groups_count * table.columns.len() as u64);

    let groups: Vec<_> = table.partitions.iter().flat_map(|p| p.row_groups.iter().cloned()).collect();
    let mut rng = rand::rngs::SmallRng::seed_from_u64(14);
    for trial in 0..20 {
        let g = &groups[rng.gen_range(0..groups.len())];
        let path = db.resolve(&g.file);
        let mut bytes = std::fs::read(&path).unwrap();
        let group = &bytes[g.offset_bytes as usize..(g.offset_bytes + g.total_bytes) as usize];
        let reader = RowGroupReader::open(group, &path, g.offset_bytes).unwrap();
        let column = rng.gen_range(0..reader.column_count());
        let (offset, length) = reader.column_byte_range(column);
        let at = (g.offset_bytes + offset + rng.gen_range(0..length)) as usize;
        let bit = 1u8 << rng.gen_range(0..8);
        bytes[at] ^= bit;
        std::fs::write(&path, &bytes).unwrap();
        let mut report = VerifyReport::default();
        verify_table(&db, &table, &mut report);
        assert!(!report.is_clean(), "trial {trial}: flipped byte {at} of {} (column {column}) went unnoticed", path.display());
        let failure = &report.failures[0];
        assert!(failure.file.ends_with(path.file_name().unwrap().to_str().unwrap()), "{failure:?}");
        assert!(!failure.action.is_empty());
        bytes[at] ^= bit;
        std::fs::write(&path, &bytes).unwrap();
    }
    let mut report = VerifyReport::default();
    verify_table(&db, &table, &mut report);
    assert!(report.is_clean());
}

#[test]
fn verify_reads_every_heap_page() {
    let (_tmp, db_dir) = tpch_db("orders", 2);
    let db = Database::open(&db_dir).unwrap();
    let table = db.table("orders").unwrap().clone();
    let mut report = VerifyReport::default();
    verify_table(&db, &table, &mut report);
    assert!(report.is_clean(), "{:?}", report.failures);
    assert_eq!(report.counts.heap_pages_count, table.page_count());
    assert_eq!(report.counts.rows_count, 15000);
    // Two flips in two pages of one file: both reported, with their offsets.
    let path = db.resolve(&table.files[0].path);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[8192 + 100] ^= 1;
    bytes[5 * 8192 + 4000] ^= 0x80;
    std::fs::write(&path, &bytes).unwrap();
    let mut report = VerifyReport::default();
    verify_table(&db, &table, &mut report);
    let offsets: Vec<u64> = report.failures.iter().map(|f| f.offset_bytes).collect();
    assert_eq!(offsets, vec![8192, 5 * 8192], "{:?}", report.failures);
}

#[test]
fn the_sweep_removes_what_commits_left_and_never_a_lookalike() {
    let (tmp, db) = csv_db();
    let lookalike = db.join("t.p000.f0.g999.dat");
    std::fs::write(&lookalike, b"a user's file").unwrap();
    let listed = db.join("t.p007.f0.g2.dat");
    std::fs::write(&listed, b"an interrupted write's file").unwrap();
    let mut catalog = Catalog::read(&db).unwrap();
    catalog.unreferenced_files.push("t.p007.f0.g2.dat".into());
    catalog.write_atomic(&db).unwrap();
    let old_files: Vec<PathBuf> = {
        let d = Database::open(&db).unwrap();
        d.table("t").unwrap().files.iter().map(|f| d.resolve(&f.path)).collect()
    };
    let csv = small_csv(tmp.path(), "t");
    load_table(&db, csv_source(&csv, "t").unwrap(), &LoadOptions { replace: true, ..load_options(1) }).unwrap();
    assert!(!listed.exists(), "listed as unreferenced: removed");
    assert!(old_files.iter().all(|f| !f.exists()), "the replaced table's files are removed");
    assert_eq!(std::fs::read(&lookalike).unwrap(), b"a user's file");
    assert!(Catalog::read(&db).unwrap().unreferenced_files.is_empty());
}

#[test]
fn volumes_are_declared_and_marked() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("db");
    let volume = tmp.path().join("vol");
    std::fs::create_dir(&volume).unwrap();
    let opts = LoadOptions { volumes: vec![db.clone(), volume.clone()], ..load_options(2) };
    std::fs::create_dir(&db).unwrap();
    load_table(&db, tpch_source("orders", 0.01, 2).unwrap(), &opts).unwrap();
    assert!(volume.join(VOLUME_MARKER_FILE_NAME).is_file());
    let catalog = Catalog::read(&db).unwrap();
    assert_eq!(catalog.volumes, vec![volume.canonicalize().unwrap().to_string_lossy().into_owned()]);
    let outside: Vec<_> = catalog.tables["orders"].files.iter().filter(|f| f.path.starts_with('/')).collect();
    assert!(!outside.is_empty());
    let d = Database::open(&db).unwrap();
    let mut report = VerifyReport::default();
    verify_table(&d, d.table("orders").unwrap(), &mut report);
    assert!(report.is_clean(), "{:?}", report.failures);
    let report = drop_table(&db, "orders").unwrap();
    assert!(report.files_removed >= 2);
    let left: Vec<_> = std::fs::read_dir(&volume).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    assert_eq!(left, vec![VOLUME_MARKER_FILE_NAME.to_string()]);
}

#[test]
fn unbounded_inputs_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("db");
    let csv = small_csv(tmp.path(), "t");
    for threads in [0usize, 100_000] {
        let e = load_table(&db, csv_source(&csv, "t").unwrap(), &LoadOptions { threads, ..load_options(1) }).unwrap_err();
        assert!(e.to_string().contains("--threads"), "{e}");
    }
    // A failed load leaves no new directory behind.
    let e = load_table(&db, csv_source(&csv, "t").unwrap(), &LoadOptions { partition_by: Some("nope".into()), ..load_options(1) }).unwrap_err();
    assert!(matches!(e, StorageError::UnknownColumn { .. }), "{e}");
    assert!(!db.exists());
    let e = load_table(&db, tpch_source("orders", 0.01, 2).unwrap(), &LoadOptions { fault_after_pages: Some(2), ..load_options(1) }).unwrap_err();
    assert!(matches!(e, StorageError::DiskFull { .. }), "{e}");
    assert!(!db.exists(), "a first load that failed removes the directory it made");

    load_table(&db, csv_source(&csv, "t").unwrap(), &load_options(1)).unwrap();
    // Sizes from the catalog that the files cannot hold are refused before any allocation.
    let good = Catalog::read(&db).unwrap();
    let mut catalog = good.clone();
    catalog.tables.get_mut("t").unwrap().partitions[0].runs[0].page_count = u32::MAX;
    catalog.write_atomic(&db).unwrap();
    assert!(matches!(Catalog::read(&db), Err(StorageError::CatalogCorrupt { .. })));
    let mut catalog = good.clone();
    catalog.tables.get_mut("t").unwrap().partitions[0].runs[0].offset_bytes = u64::MAX - 10;
    catalog.write_atomic(&db).unwrap();
    assert!(matches!(Catalog::read(&db), Err(StorageError::CatalogCorrupt { .. })));
    // A catalog file past the cap is refused without being read whole.
    good.write_atomic(&db).unwrap();
    let f = std::fs::OpenOptions::new().append(true).open(db.join("catalog.json")).unwrap();
    f.set_len(flashscan_storage::fs_safe::SMALL_FILE_BYTES_MAX + 1).unwrap();
    let e = Catalog::read(&db).unwrap_err();
    assert!(e.to_string().contains("bytes"), "{e}");
}

#[test]
fn two_first_loads_into_one_new_directory_both_succeed() {
    for round in 0..5 {
        let tmp = tempfile::tempdir().unwrap();
        let db = tmp.path().join(format!("db{round}"));
        let a = small_csv(tmp.path(), "a");
        let b = small_csv(tmp.path(), "b");
        std::thread::scope(|s| {
            let ha = s.spawn(|| load_table(&db, csv_source(&a, "a").unwrap(), &load_options(1)));
            let hb = s.spawn(|| load_table(&db, csv_source(&b, "b").unwrap(), &load_options(1)));
            ha.join().unwrap().unwrap();
            hb.join().unwrap().unwrap();
        });
        let catalog = Catalog::read(&db).unwrap();
        assert_eq!(catalog.tables.keys().cloned().collect::<Vec<_>>(), vec!["a".to_string(), "b".to_string()]);
    }
}

#[test]
fn damaged_data_never_echoes_its_bytes() {
    let (_tmp, db_dir) = tpch_db("orders", 1);
    rebuild_table(&db_dir, "orders", RebuildTarget::ColumnStore { archive: false }, &RebuildOptions::default()).unwrap();
    let db = Database::open(&db_dir).unwrap();
    let table = db.table("orders").unwrap().clone();
    let path = db.resolve(&table.files[0].path);
    let mut bytes = std::fs::read(&path).unwrap();
    let secret = b"SECRETPW";
    bytes[..8].copy_from_slice(secret);
    std::fs::write(&path, &bytes).unwrap();
    let mut report = VerifyReport::default();
    verify_table(&db, &table, &mut report);
    assert!(!report.is_clean());
    let text = format!("{:?}", report.failures);
    let hex: String = secret.iter().map(|b| format!("{b:02x}")).collect();
    assert!(!text.contains("SECRET") && !text.contains(&hex[..8]) && !text.contains("53, 45"), "{text}");
}

#[test]
fn a_link_planted_at_a_data_file_name_is_never_read_through() {
    // The catalog's path is confined, but the file at that name inside the database was
    // replaced by a link to a file elsewhere: reading must fail, never read the other file.
    let (work, db) = csv_db();
    let database = Database::open(&db).unwrap();
    let table = database.table("t").unwrap().clone();
    let data_file = database.resolve(&table.files[0].path);
    let elsewhere = work.path().join("elsewhere.dat");
    std::fs::copy(&data_file, &elsewhere).unwrap();
    std::fs::remove_file(&data_file).unwrap();
    std::os::unix::fs::symlink(&elsewhere, &data_file).unwrap();
    let result = flashscan_storage::heap::reader::read_table(&database, &table, &[0]);
    let message = format!("{:?}", result.as_ref().err());
    assert!(result.is_err(), "a table read went through a link planted at {}", data_file.display());
    assert!(message.contains("symbolic link") || message.contains("ELOOP") || message.contains("40"), "{message}");
}
