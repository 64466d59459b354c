//! INSERT, UPDATE and DELETE on column store tables: new rows wait in the table's delta,
//! which every scan merges (filters evaluated in the scan apply to them too), and each
//! checkpoint encodes them into row groups of the table's format; deleted rows are named by
//! their row group and place (`RowId::in_row_group`) and taken out of every scan. Every
//! answer is compared with a heap twin that took the same statements (another page format,
//! another scan), across checkpoints, reopenings (changes replayed from the log) and
//! transactions that read their own changes; the row groups are verified on disk.

use flashscan_sql::FlashscanSession;
use flashscan_storage::{rebuild_table, RebuildOptions, RebuildTarget};
use flashscan_write::CheckpointOptions;

mod common;
use common::{new_database, run, runtime, session, sorted, Rng};

type Rt = tokio::runtime::Runtime;

const COLUMNS: &str = "(id BIGINT NOT NULL, v DOUBLE PRECISION, tag VARCHAR, day DATE NOT NULL, qty INT)";

/// `VALUES` text for rows `from..to`: some NULLs, a few tags, dates over one year.
fn values(from: i64, to: i64) -> String {
    (from..to)
        .map(|i| {
            let v = if i % 11 == 0 { "NULL".to_string() } else { format!("{}.25", i % 997) };
            let tag = if i % 13 == 0 { "NULL".to_string() } else { format!("'t{}'", i % 7) };
            format!("({i}, {v}, {tag}, DATE '2026-01-01' + INTERVAL '{} days', {})", i % 365, i % 50)
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The queries both tables must answer alike: whole-table aggregates (MIN/MAX are what
/// stale row group statistics would answer wrongly), groups, filters the column store
/// evaluates in its scan (ranges, equality, LIKE, IS NULL) and rows by a filter.
fn queries(rng: &mut Rng, rows: i64) -> Vec<String> {
    let a = rng.below(rows.max(1) as u64) as i64;
    let b = a + rng.below(2_000) as i64;
    let tag = rng.below(7);
    vec![
        "SELECT count(*), min(id), max(id), sum(v), min(day), max(day), count(tag) FROM T".into(),
        "SELECT tag, count(*), sum(qty), min(v), max(v) FROM T GROUP BY tag".into(),
        format!("SELECT count(*), sum(v) FROM T WHERE id BETWEEN {a} AND {b}"),
        format!("SELECT id, v, tag, day FROM T WHERE id >= {a} AND id < {b} AND qty < 25"),
        format!("SELECT count(*) FROM T WHERE tag = 't{tag}' AND day >= DATE '2026-06-01'"),
        "SELECT count(*) FROM T WHERE tag LIKE '%3%' OR v IS NULL".into(),
        format!("SELECT id FROM T WHERE id > {a} ORDER BY id LIMIT 5"),
        "SELECT qty, count(*) FROM T WHERE qty IN (1, 2, 49) GROUP BY qty".into(),
    ]
}

/// The same UPDATE and DELETE statements on h and `tables`, each answering the same count;
/// some inside one transaction that reads its own changes before it commits.
fn change(rt: &Rt, s: &FlashscanSession, rng: &mut Rng, rows: i64, tables: &[&str]) {
    let a = rng.below(rows.max(1) as u64) as i64;
    let k = rng.below(17);
    let statements = [
        format!("DELETE FROM T WHERE id BETWEEN {a} AND {}", a + rng.below(60) as i64),
        format!("UPDATE T SET v = v + 1, tag = 'u{k}' WHERE id % 17 = {k} AND id < {}", a + 500),
        format!("DELETE FROM T WHERE qty = {} AND id > {a}", rng.below(50)),
        format!("UPDATE T SET qty = qty + 100 WHERE tag = 't{}' AND id BETWEEN {a} AND {}", rng.below(7), a + 300),
    ];
    let in_block = rng.below(3) == 0;
    for t in std::iter::once("h").chain(tables.iter().copied()) {
        if in_block {
            run(rt, s, "BEGIN");
        }
        let mut counts = Vec::new();
        for st in &statements {
            counts.push(common::texts(&run(rt, s, &st.replace(" T ", &format!(" {t} ")))));
            if in_block {
                // The block reads its own changes.
                counts.push(sorted(rt, s, &format!("SELECT count(*), sum(qty), max(v) FROM {t}")));
            }
        }
        if in_block {
            run(rt, s, "COMMIT");
        }
        let expected = sorted(rt, s, "SELECT count(*), sum(qty), max(v), count(tag) FROM h");
        assert_eq!(sorted(rt, s, &format!("SELECT count(*), sum(qty), max(v), count(tag) FROM {t}")), expected, "{t} after {statements:?}");
        let _ = counts;
    }
}

fn same_answers(rt: &Rt, s: &FlashscanSession, rng: &mut Rng, rows: i64, column_store: &str) {
    for q in queries(rng, rows) {
        let expected = sorted(rt, s, &q.replace(" T", " h"));
        let got = sorted(rt, s, &q.replace(" T", &format!(" {column_store}")));
        assert_eq!(got, expected, "{q} on {column_store}");
    }
}

/// Tables h (heap) and `names` (rebuilt into `formats`), each with rows 0..5000.
fn twins(rt: &Rt, db: &std::path::Path, names: &[(&str, &str)]) {
    let s = session(db);
    for name in std::iter::once("h").chain(names.iter().map(|(n, _)| *n)) {
        run(rt, &s, &format!("CREATE TABLE {name} {COLUMNS} WITH (partitions = 2)"));
        run(rt, &s, &format!("INSERT INTO {name} VALUES {}", values(0, 5000)));
    }
    s.write_path().checkpoint(&CheckpointOptions::default()).unwrap();
    drop(s);
    for (name, format) in names {
        let options = RebuildOptions { row_group_rows: Some(1000), ..Default::default() };
        rebuild_table(db, name, RebuildTarget::parse(format).unwrap(), &options).unwrap_or_else(|e| panic!("rebuild {name}: {e}"));
    }
}

fn row_groups(s: &FlashscanSession, table: &str) -> usize {
    s.write_path().catalog().unwrap().tables[table].partitions.iter().map(|p| p.row_groups.len()).sum()
}

fn verify_clean(db: &std::path::Path, table: &str) {
    let database = flashscan_storage::Database::open(db).unwrap();
    let meta = database.catalog().tables[table].clone();
    let mut report = flashscan_storage::verify::VerifyReport::default();
    flashscan_storage::verify::verify_table(&database, &meta, &mut report);
    assert!(report.is_clean(), "{table}: {:?}", report.failures);
}

#[test]
fn inserts_into_column_stores_are_read_before_and_after_checkpoints() {
    let (rt, dir) = (runtime(), tempfile::tempdir().unwrap());
    let db = new_database(dir.path());
    twins(&rt, &db, &[("c", "columnstore"), ("a", "columnstore_archive")]);
    let mut s = session(&db);
    let mut rng = Rng(0x5eed_c01);
    let mut rows = 5000i64;
    same_answers(&rt, &s, &mut rng, rows, "c");
    let groups_loaded = row_groups(&s, "c");
    let mut checkpoints = 0;
    let mut reopenings = 0;
    for round in 0..24 {
        let n = 1 + rng.below(if round % 5 == 0 { 3000 } else { 40 }) as i64;
        for t in ["h", "c", "a"] {
            run(&rt, &s, &format!("INSERT INTO {t} VALUES {}", values(rows, rows + n)));
        }
        rows += n;
        // Answers with rows in the delta (the statistics of the registered row groups
        // still hold: nothing checkpointed since).
        same_answers(&rt, &s, &mut rng, rows, "c");
        same_answers(&rt, &s, &mut rng, rows, "a");
        change(&rt, &s, &mut rng, rows, &["c", "a"]);
        same_answers(&rt, &s, &mut rng, rows, "c");
        same_answers(&rt, &s, &mut rng, rows, "a");
        match rng.below(4) {
            0 => {
                s.write_path().checkpoint(&CheckpointOptions::default()).unwrap();
                checkpoints += 1;
            }
            1 => {
                // Rows only in the log come back from it.
                drop(s);
                s = session(&db);
                reopenings += 1;
            }
            _ => {}
        }
        same_answers(&rt, &s, &mut rng, rows, "c");
        same_answers(&rt, &s, &mut rng, rows, "a");
    }
    assert!(checkpoints >= 3 && reopenings >= 3, "{checkpoints} checkpoints, {reopenings} reopenings");
    s.write_path().checkpoint(&CheckpointOptions::default()).unwrap();
    same_answers(&rt, &s, &mut rng, rows, "c");
    let catalog = s.write_path().catalog().unwrap();
    let live = |t: &str| sorted(&rt, &s, &format!("SELECT count(*) FROM {t}"))[0][0].parse::<u64>().unwrap();
    for t in ["c", "a"] {
        let meta = &catalog.tables[t];
        assert!(meta.is_column_store(), "{t} is {}", meta.format);
        assert_eq!(meta.partitions.iter().flat_map(|p| &p.row_groups).map(|g| g.row_count).sum::<u64>(), meta.row_count, "{t}: the row groups hold every row");
        let deleted = meta.deleted_rows.as_ref().map_or(0, |d| d.row_count);
        assert!(deleted > 0, "{t}: rows were deleted");
        assert_eq!(meta.row_count - deleted, live(t), "{t}: rows less deleted rows are the rows read");
    }
    assert!(row_groups(&s, "c") > groups_loaded, "checkpoints added row groups");
    drop(s);
    verify_clean(&db, "c");
    verify_clean(&db, "a");
    // A rebuild merges the small row groups the checkpoints made and leaves the deleted
    // rows behind.
    let options = RebuildOptions { row_group_rows: Some(1000), ..Default::default() };
    rebuild_table(&db, "c", RebuildTarget::parse("columnstore").unwrap(), &options).unwrap();
    let s = session(&db);
    let meta = s.write_path().catalog().unwrap().tables["c"].clone();
    assert!(meta.deleted_rows.is_none());
    assert_eq!(row_groups(&s, "c"), meta.partitions.iter().map(|p| (p.row_count as usize).div_ceil(1000)).sum::<usize>(), "full row groups of 1,000, one partial per partition");
    same_answers(&rt, &s, &mut rng, rows, "c");
}

#[test]
fn a_column_store_is_truncated_and_filled_again() {
    let (rt, dir) = (runtime(), tempfile::tempdir().unwrap());
    let db = new_database(dir.path());
    twins(&rt, &db, &[("c", "columnstore")]);
    let s = session(&db);
    run(&rt, &s, "TRUNCATE c");
    run(&rt, &s, "TRUNCATE h");
    assert_eq!(sorted(&rt, &s, "SELECT count(*), max(id) FROM c"), vec![vec!["0".to_string(), "NULL".into()]]);
    run(&rt, &s, &format!("INSERT INTO c VALUES {}", values(100, 300)));
    run(&rt, &s, &format!("INSERT INTO h VALUES {}", values(100, 300)));
    let mut rng = Rng(7);
    same_answers(&rt, &s, &mut rng, 300, "c");
    s.write_path().checkpoint(&CheckpointOptions::default()).unwrap();
    same_answers(&rt, &s, &mut rng, 300, "c");
    assert_eq!(s.write_path().catalog().unwrap().tables["c"].format, "columnstore");
    // INSERT … SELECT from the heap, and a failed statement that leaves nothing.
    run(&rt, &s, "INSERT INTO c SELECT * FROM h WHERE id < 150");
    run(&rt, &s, "INSERT INTO h SELECT * FROM h WHERE id < 150");
    same_answers(&rt, &s, &mut rng, 300, "c");
    let e = common::fails(&rt, &s, "INSERT INTO c VALUES (1, 1.0, 'x', NULL, 1)");
    assert!(e.to_ascii_lowercase().contains("null"), "{e}");
    same_answers(&rt, &s, &mut rng, 300, "c");
    change(&rt, &s, &mut rng, 300, &["c"]);
    same_answers(&rt, &s, &mut rng, 300, "c");
    drop(s);
    verify_clean(&db, "c");
}

#[test]
fn create_table_makes_an_empty_column_store_that_fills_by_insert() {
    let (rt, dir) = (runtime(), tempfile::tempdir().unwrap());
    let db = new_database(dir.path());
    let s = session(&db);
    run(&rt, &s, &format!("CREATE TABLE h {COLUMNS} WITH (partitions = 2)"));
    run(&rt, &s, &format!("CREATE TABLE c {COLUMNS} WITH (partitions = 2, compression = 'columnstore')"));
    run(&rt, &s, &format!("CREATE TABLE a {COLUMNS} WITH (compression = 'COLUMNSTORE_ARCHIVE', partitions = 3)"));
    let catalog = s.write_path().catalog().unwrap();
    assert_eq!((catalog.tables["c"].format.as_str(), catalog.tables["a"].format.as_str()), ("columnstore", "columnstore_archive"));
    assert_eq!(sorted(&rt, &s, "SELECT count(*), max(id) FROM c"), vec![vec!["0".to_string(), "NULL".into()]]);
    let mut rng = Rng(11);
    let mut rows = 0;
    for step in 0..6 {
        let n = 1 + rng.below(700) as i64;
        for t in ["h", "c", "a"] {
            run(&rt, &s, &format!("INSERT INTO {t} VALUES {}", values(rows, rows + n)));
        }
        rows += n;
        if step % 2 == 1 {
            s.write_path().checkpoint(&CheckpointOptions::default()).unwrap();
        }
        same_answers(&rt, &s, &mut rng, rows, "c");
        same_answers(&rt, &s, &mut rng, rows, "a");
    }
    drop(s);
    verify_clean(&db, "c");
    verify_clean(&db, "a");
    // Refused, nothing made: row or page compression (new rows arrive as plain pages), an
    // unknown name, keys on a column store.
    let s = session(&db);
    for (sql, says) in [
        ("CREATE TABLE r (x INT) WITH (compression = 'row')", "flashscan rebuild"),
        ("CREATE TABLE r (x INT) WITH (compression = 'zip')", "unknown"),
        ("CREATE TABLE r (x INT PRIMARY KEY) WITH (compression = 'columnstore')", "heap tables only"),
    ] {
        let e = common::fails(&rt, &s, sql);
        assert!(e.contains(says), "{sql}: {e}");
    }
    assert!(!s.write_path().catalog().unwrap().tables.contains_key("r"));
}
