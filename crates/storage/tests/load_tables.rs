//! Loads at small scale factors, checked against tpchgen-arrow itself (the oracle), and
//! the failure paths: injected disk full, corrupt and truncated files, bad names.

use std::collections::BTreeSet;

use arrow::array::{Array, AsArray, RecordBatch};
use flashscan_storage::heap::reader::{check_files, read_table};
use flashscan_storage::load::csv::csv_source;
use flashscan_storage::load::tpch::{tpch_source, TPCH_TABLES};
use flashscan_storage::{load_table, Database, LoadOptions, StorageError, PAGE_SIZE_BYTES};
use tpchgen::generators::LineItemGenerator;
use tpchgen_arrow::LineItemArrow;

mod common;
use common::{dir_listing, load_options, row_lines, tpch_db};

const SF: f64 = 0.01;

#[test]
fn lineitem_values_equal_tpchgen() {
    let tmp = tempfile::tempdir().unwrap();
    let db_dir = tmp.path().join("db");
    let report = load_table(&db_dir, tpch_source("lineitem", SF, 2).unwrap(), &load_options(3)).unwrap();
    let oracle: Vec<RecordBatch> = LineItemArrow::new(LineItemGenerator::new(SF, 1, 1)).map(|b| b.unwrap()).collect();
    let oracle_rows: usize = oracle.iter().map(|b| b.num_rows()).sum();
    assert_eq!(report.row_count as usize, oracle_rows);

    let db = Database::open(&db_dir).unwrap();
    let t = db.table("LINEITEM").unwrap();
    assert_eq!(t.row_count as usize, oracle_rows);
    assert_eq!(t.partitions.len(), 3);
    assert_eq!(t.partitions.iter().map(|p| p.row_count).sum::<u64>(), t.row_count);
    for p in &t.partitions {
        // Hash partitioning spreads evenly: each partition holds about a third.
        let share = p.row_count as f64 / t.row_count as f64;
        assert!((share - 1.0 / 3.0).abs() < 0.03, "partition {} share {share}", p.index);
    }
    for f in &t.files {
        assert_eq!(f.size_bytes % 65536, 0);
        assert_eq!(std::fs::metadata(db.resolve(&f.path)).unwrap().len(), f.size_bytes);
    }
    let all: Vec<usize> = (0..t.columns.len()).collect();
    let batches = read_table(&db, t, &all).unwrap();
    assert_eq!(row_lines(&batches), row_lines(&oracle));

    // A projection returns just those columns, same values.
    let batches = read_table(&db, t, &[15, 0]).unwrap();
    assert_eq!(batches[0].schema().field(0).name(), "l_comment");
    let projected: Vec<RecordBatch> = oracle.iter().map(|b| b.project(&[15, 0]).unwrap()).collect();
    assert_eq!(row_lines(&batches), row_lines(&projected));
}

#[test]
fn all_tables_row_counts_equal_tpchgen() {
    let tmp = tempfile::tempdir().unwrap();
    let db_dir = tmp.path().join("db");
    for name in TPCH_TABLES {
        let expected: usize = tpch_source(name, SF, 1)
            .unwrap()
            .parts
            .into_iter()
            .flat_map(|p| p().unwrap())
            .map(|b| b.unwrap().num_rows())
            .sum();
        let report = load_table(&db_dir, tpch_source(name, SF, 2).unwrap(), &load_options(2)).unwrap();
        assert_eq!(report.row_count as usize, expected, "{name}");
    }
    let db = Database::open(&db_dir).unwrap();
    assert_eq!(db.tables().count(), 8);
    assert_eq!(db.table("nation").unwrap().row_count, 25);
}

#[test]
fn injected_disk_full_leaves_previous_catalog_and_no_files() {
    let (_tmp, db_dir) = tpch_db("orders", 2);
    let catalog_before = std::fs::read(db_dir.join("catalog.json")).unwrap();
    let files_before = dir_listing(&db_dir);

    // A new table fails midway.
    let faulty = LoadOptions { fault_after_pages: Some(20), ..load_options(2) };
    let err = load_table(&db_dir, tpch_source("lineitem", SF, 2).unwrap(), &faulty).unwrap_err();
    assert!(matches!(err, StorageError::DiskFull { .. }), "{err}");
    assert_eq!(std::fs::read(db_dir.join("catalog.json")).unwrap(), catalog_before);
    assert_eq!(dir_listing(&db_dir), files_before);

    // A replacement fails midway: the old table is still whole and readable.
    let faulty = LoadOptions { replace: true, fault_after_pages: Some(3), ..load_options(2) };
    assert!(load_table(&db_dir, tpch_source("orders", SF, 2).unwrap(), &faulty).is_err());
    assert_eq!(std::fs::read(db_dir.join("catalog.json")).unwrap(), catalog_before);
    assert_eq!(dir_listing(&db_dir), files_before);
    let db = Database::open(&db_dir).unwrap();
    let t = db.table("orders").unwrap();
    let rows: usize = read_table(&db, t, &[0]).unwrap().iter().map(|b| b.num_rows()).sum();
    assert_eq!(rows as u64, t.row_count);

    // Replacing for real removes the old files and keeps only the new ones.
    let replace = LoadOptions { replace: true, ..load_options(2) };
    load_table(&db_dir, tpch_source("orders", SF, 2).unwrap(), &replace).unwrap();
    let db = Database::open(&db_dir).unwrap();
    let files: BTreeSet<String> = db.table("orders").unwrap().files.iter().map(|f| f.path.clone()).collect();
    let on_disk: BTreeSet<String> = dir_listing(&db_dir).into_iter().filter(|n| n.ends_with(".dat")).collect();
    assert_eq!(files, on_disk);
}

#[test]
fn existing_table_needs_replace() {
    let tmp = tempfile::tempdir().unwrap();
    let db_dir = tmp.path().join("db");
    load_table(&db_dir, tpch_source("region", SF, 1).unwrap(), &load_options(1)).unwrap();
    let err = load_table(&db_dir, tpch_source("region", SF, 1).unwrap(), &load_options(1)).unwrap_err();
    assert!(matches!(err, StorageError::TableExists { .. }), "{err}");
}

#[test]
fn corrupt_and_truncated_files_are_named() {
    let tmp = tempfile::tempdir().unwrap();
    let db_dir = tmp.path().join("db");
    load_table(&db_dir, tpch_source("orders", SF, 1).unwrap(), &load_options(1)).unwrap();
    let db = Database::open(&db_dir).unwrap();
    let t = db.table("orders").unwrap();
    let path = db.resolve(&t.files[0].path);
    let mut bytes = std::fs::read(&path).unwrap();
    let page = 5;
    bytes[page * PAGE_SIZE_BYTES + 1000] ^= 0x40;
    std::fs::write(&path, &bytes).unwrap();
    let err = read_table(&db, t, &[0]).unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, StorageError::PageChecksum { .. }), "{msg}");
    assert!(msg.contains(&path.display().to_string()) && msg.contains(&format!("offset {}", page * PAGE_SIZE_BYTES)), "{msg}");
    assert!(msg.contains(&format!("page {}", t.partitions[0].runs[0].first_page_id + page as u64)), "{msg}");

    std::fs::write(&path, &bytes[..3 * PAGE_SIZE_BYTES]).unwrap();
    assert!(matches!(check_files(&db, t).unwrap_err(), StorageError::FileTruncated { .. }));
    assert!(matches!(read_table(&db, t, &[0]).unwrap_err(), StorageError::FileTruncated { .. }));
}

#[test]
fn foreign_and_missing_directories_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let err = Database::open(&tmp.path().join("nope")).err().unwrap();
    assert!(err.to_string().contains("is not a flashscan database (no catalog)"), "{err}");
    std::fs::write(tmp.path().join("precious.txt"), b"keep me").unwrap();
    let err = load_table(tmp.path(), tpch_source("region", SF, 1).unwrap(), &load_options(1)).unwrap_err();
    assert!(matches!(err, StorageError::ForeignDirectory { .. }), "{err}");
    assert_eq!(dir_listing(tmp.path()), BTreeSet::from(["precious.txt".to_string()]));
}

#[test]
fn unknown_table_and_column() {
    let tmp = tempfile::tempdir().unwrap();
    let db_dir = tmp.path().join("db");
    let bad = LoadOptions { partition_by: Some("no_such".into()), ..load_options(2) };
    assert!(matches!(load_table(&db_dir, tpch_source("region", SF, 1).unwrap(), &bad).unwrap_err(), StorageError::UnknownColumn { .. }));
    load_table(&db_dir, tpch_source("region", SF, 1).unwrap(), &load_options(1)).unwrap();
    let db = Database::open(&db_dir).unwrap();
    assert!(matches!(db.table("nope").unwrap_err(), StorageError::UnknownTable { .. }));
}

#[test]
fn striped_over_two_volumes() {
    let tmp = tempfile::tempdir().unwrap();
    let db_dir = tmp.path().join("db");
    let (v1, v2) = (tmp.path().join("v1"), tmp.path().join("v2"));
    std::fs::create_dir_all(&v1).unwrap();
    std::fs::create_dir_all(&v2).unwrap();
    let opts = LoadOptions { volumes: vec![v1.clone(), v2.clone()], interleave_bytes: 128 * 1024, partition_by: Some("o_custkey".into()), ..load_options(2) };
    load_table(&db_dir, tpch_source("orders", SF, 2).unwrap(), &opts).unwrap();
    let db = Database::open(&db_dir).unwrap();
    let t = db.table("orders").unwrap();
    assert_eq!(t.partition_by, "o_custkey");
    assert_eq!(t.files.len(), 4);
    for p in &t.partitions {
        // Runs alternate between the volumes in 16-page (128 KB) stripe units.
        assert!(p.runs.len() > 2);
        for w in p.runs.windows(2) {
            assert_ne!(w[0].file, w[1].file);
        }
        assert!(p.runs.iter().all(|r| r.page_count <= 16));
    }
    let rows: usize = read_table(&db, t, &[0, 1]).unwrap().iter().map(|b| b.num_rows()).sum();
    assert_eq!(rows as u64, t.row_count);
    assert!(!dir_listing(&v1).is_empty() && !dir_listing(&v2).is_empty());
}

#[test]
fn csv_with_nulls_round_trips() {
    let tmp = tempfile::tempdir().unwrap();
    let csv = tmp.path().join("people.csv");
    std::fs::write(&csv, "id,name,score,born,active\n1,ann,1.5,2001-02-03,true\n2,,,,\n3,\"bo, b\",-2.25,1999-12-31,false\n").unwrap();
    let db_dir = tmp.path().join("db");
    let report = load_table(&db_dir, csv_source(&csv, "people").unwrap(), &load_options(2)).unwrap();
    assert_eq!(report.row_count, 3);
    let db = Database::open(&db_dir).unwrap();
    let t = db.table("people").unwrap();
    let batches = read_table(&db, t, &[0, 1, 2, 3, 4]).unwrap();
    let lines = row_lines(&batches);
    assert_eq!(lines, vec!["1|ann|1.5|2001-02-03|true".to_string(), "2||||".into(), "3|bo, b|-2.25|1999-12-31|false".into()]);
    // The empty fields are NULLs, not empty strings or zeros.
    let row2 = batches.iter().flat_map(|b| (0..b.num_rows()).map(move |r| (b, r))).find(|(b, r)| b.column(0).as_primitive::<arrow::datatypes::Int64Type>().value(*r) == 2).unwrap();
    assert!((1..5).all(|c| row2.0.column(c).is_null(row2.1)));
}
