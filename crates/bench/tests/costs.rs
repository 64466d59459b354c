//! The cost bench end to end at tiny sizes: every row present, numbers finite, printers
//! consistent (no timing assertions).

use flashscan_bench::chart::write_costs_chart;
use flashscan_bench::costs::{self, CostsOptions, LOOKUP_ROWS_PER_QUERY, SCAN_ROWS_PER_PAGE};

#[test]
fn tiny_cost_bench_fills_every_row() {
    let dir = tempfile::tempdir().unwrap();
    let report = costs::run(dir.path(), &CostsOptions::tiny(), &mut |_| {}).unwrap();
    assert_eq!(report.scans.len(), SCAN_ROWS_PER_PAGE.len());
    assert_eq!(report.lookups.len(), LOOKUP_ROWS_PER_QUERY.len() * 6);
    for r in &report.lookups {
        assert!(r.cpu_us_per_row.is_finite() && r.rows_count > 0, "{r:?}");
        if r.mode.starts_with("cold") {
            assert!(r.reads_count > 0, "{r:?}");
        } else {
            assert_eq!(r.reads_count, 0, "{r:?}");
        }
    }
    let csv = report.to_csv();
    assert_eq!(csv.lines().count(), 1 + report.scans.len() + 1 + report.lookups.len());
    let chart = dir.path().join("costs.svg");
    write_costs_chart(&report, &chart).unwrap();
    assert!(std::fs::read_to_string(&chart).unwrap().contains("<svg"));
    // A second run reuses the tables.
    costs::run(dir.path(), &CostsOptions::tiny(), &mut |_| {}).unwrap();
}
