//! Statistics the planner uses and the join order it takes from them (issue 32 items 1
//! and 2): `ANALYZE` measures distinct counts, keeps them in the catalog and hands them to
//! DataFusion as inexact; the join order rule joins the relations whose join keeps the
//! fewest rows first, with the same answers as the query's own order.

use datafusion::common::stats::Precision;
use flashscan_sql::FlashscanSession;

mod common;
use common::{fails, new_database, run, runtime, session, sorted, texts};

/// Within `share` of `expected` (the sketch is about 1 % off).
fn near(measured: u64, expected: u64, share: f64) -> bool {
    (measured as f64 - expected as f64).abs() <= share * expected as f64
}

#[test]
fn analyze_measures_distinct_counts_and_the_catalog_keeps_them() {
    let (rt, dir) = (runtime(), tempfile::tempdir().unwrap());
    let db = new_database(dir.path());
    let s = session(&db);
    run(&rt, &s, "CREATE TABLE t (id BIGINT NOT NULL, g INT, name VARCHAR, x DOUBLE)");
    // 2,000 ids, 7 groups (and NULL every 10th row), 100 names, 1,000 halves.
    run(&rt, &s, "INSERT INTO t SELECT value, CASE WHEN value % 10 = 0 THEN NULL ELSE value % 7 END, concat('n', value % 100), (value / 2) * 1.5 FROM generate_series(0, 1999)");
    // Never analysed: no distinct counts.
    let unmeasured = rt.block_on(s.context().table_provider("t")).unwrap().statistics().unwrap();
    assert!(unmeasured.column_statistics.iter().all(|c| c.distinct_count == Precision::Absent));
    let out = run(&rt, &s, "ANALYZE t");
    assert_eq!(texts(&out), vec![vec!["analyzed t".to_string()]]);
    let catalog = flashscan_storage::Catalog::read(&db).unwrap();
    let measured = catalog.tables["t"].statistics.clone().unwrap_or_else(|| panic!("no statistics in the catalog"));
    assert_eq!(measured.row_count, 2_000);
    let counts: Vec<u64> = measured.distinct_counts.iter().map(|c| c.unwrap_or_else(|| panic!("{measured:?}"))).collect();
    for (got, want) in counts.iter().zip([2_000, 7, 100, 1_000]) {
        assert!(near(*got, want, 0.03), "{counts:?}");
    }
    // A new session (as after a restart) hands them to the planner, as inexact.
    drop(s);
    let s = session(&db);
    let statistics = rt.block_on(s.context().table_provider("t")).unwrap().statistics().unwrap();
    assert!(matches!(statistics.column_statistics[1].distinct_count, Precision::Inexact(d) if near(d as u64, 7, 0.03)), "{statistics:?}");
    // TRUNCATE forgets them (measured on rows that are gone).
    run(&rt, &s, "TRUNCATE t");
    assert_eq!(flashscan_storage::Catalog::read(&db).unwrap().tables["t"].statistics, None);
}

#[test]
fn analyze_forms_not_honoured_are_refused() {
    let (rt, dir) = (runtime(), tempfile::tempdir().unwrap());
    let db = new_database(dir.path());
    let s = session(&db);
    run(&rt, &s, "CREATE TABLE t (id BIGINT NOT NULL)");
    for (sql, says) in [("ANALYZE t (id)", "measures every column"), ("ANALYZE nope", "not found"), ("ANALYZE TABLE t COMPUTE STATISTICS NOSCAN", "run ANALYZE table")] {
        let e = fails(&rt, &s, sql);
        assert!(e.contains(says) && e.lines().count() == 1, "{sql}: {e}");
    }
    run(&rt, &s, "BEGIN");
    assert!(fails(&rt, &s, "ANALYZE t").contains("outside the transaction"));
    run(&rt, &s, "ROLLBACK");
    // Bare ANALYZE measures every table.
    assert_eq!(texts(&run(&rt, &s, "ANALYZE")), vec![vec!["analyzed t".to_string()]]);
}

/// A fact table of 20,000 rows, a dimension `small` of 10 keys and one `filtered` of
/// 1,000 keys of which the query keeps one.
fn star(rt: &tokio::runtime::Runtime, s: &FlashscanSession) {
    run(rt, s, "CREATE TABLE fact (f_small INT NOT NULL, f_filtered INT NOT NULL)");
    run(rt, s, "CREATE TABLE small (s_key INT NOT NULL)");
    run(rt, s, "CREATE TABLE filtered (d_key INT NOT NULL, d_tag INT NOT NULL)");
    run(rt, s, "INSERT INTO fact SELECT value % 10, value % 1000 FROM generate_series(0, 19999)");
    run(rt, s, "INSERT INTO small SELECT value FROM generate_series(0, 9)");
    run(rt, s, "INSERT INTO filtered SELECT value, value AS tag FROM generate_series(0, 999)");
    run(rt, s, "ANALYZE");
}

const STAR_QUERY: &str = "SELECT count(*), sum(f_small) FROM fact, small, filtered WHERE f_small = s_key AND f_filtered = d_key AND d_tag = 7";

/// The tables of the logical plan's scans, innermost join first: the scans sorted by how
/// deep EXPLAIN indents them (ties in plan order).
fn scans_innermost_first(rt: &tokio::runtime::Runtime, s: &FlashscanSession) -> Vec<String> {
    let out = run(rt, s, &format!("EXPLAIN {STAR_QUERY}"));
    let rows = texts(&out);
    let logical = rows.iter().find(|r| r[0] == "logical_plan").unwrap_or_else(|| panic!("{rows:?}"));
    let mut scans: Vec<(usize, String)> = logical[1]
        .lines()
        .filter_map(|l| {
            let at = l.find("TableScan: ")?;
            Some((at, l[at + "TableScan: ".len()..].split([' ', ',']).next()?.to_string()))
        })
        .collect();
    scans.sort_by(|a, b| b.0.cmp(&a.0));
    scans.into_iter().map(|(_, t)| t).collect()
}

#[test]
fn the_join_that_keeps_fewest_rows_goes_first() {
    let (rt, dir) = (runtime(), tempfile::tempdir().unwrap());
    let db = new_database(dir.path());
    let s = session(&db);
    star(&rt, &s);
    // As written, fact joins small first (20,000 rows out), then filtered.
    run(&rt, &s, "SET flashscan.join_order = false");
    let written = scans_innermost_first(&rt, &s);
    assert_eq!(written.last().map(String::as_str), Some("filtered"), "{written:?}");
    let answer_written = sorted(&rt, &s, STAR_QUERY);
    // Reordered: filtered (one row) joins fact first (20 rows out), then small.
    run(&rt, &s, "SET flashscan.join_order = true");
    let reordered = scans_innermost_first(&rt, &s);
    assert_eq!(reordered.last().map(String::as_str), Some("small"), "{reordered:?}");
    // The same answer, and the right one: 20 fact rows have f_filtered = 7, each f_small = 7.
    let answer = sorted(&rt, &s, STAR_QUERY);
    assert_eq!(answer, answer_written);
    assert_eq!(answer, vec![vec!["20".to_string(), "140".to_string()]]);
}
