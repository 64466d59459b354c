//! `--sweep`: the IOMeter matrix of the article on I/O cost — {sequential, random} ×
//! {read, write} × block sizes × queue depths (× thread counts) — one short run per point on
//! the same prepared files. Each point is a full [`Report`]; CSV and chart read those.

use crate::error::WorkbenchError;
use crate::print_csv;
use crate::report::Report;
use crate::runner;
use crate::spec::SweepSpec;
use crate::test_file::{check_fits, PreparedTarget, TargetNeeds};

/// Runs every point in order. `on_point(index, count, report)` hears each finished point
/// (the binary drives its progress bar with it).
pub fn run_sweep(
    sweep: &SweepSpec,
    targets: &[PreparedTarget],
    notice: &(dyn Fn(&str) + Sync),
    on_point: &mut dyn FnMut(usize, usize, &Report),
) -> Result<Vec<Report>, WorkbenchError> {
    let points = sweep.points();
    // Every block size must suit every file before the first point runs.
    for &block_size_bytes in &sweep.block_sizes_bytes {
        for t in targets {
            let needs = TargetNeeds {
                writes: false,
                force: sweep.base.force,
                direct: sweep.base.direct,
                block_size_bytes,
                offset_bytes: sweep.base.offset_bytes,
            };
            check_fits(&t.path, t.size_bytes, needs, t.offset_align_bytes)?;
        }
    }
    let mut reports = Vec::with_capacity(points.len());
    for (i, job) in points.iter().enumerate() {
        let outcome = runner::run(job, targets, notice)?;
        let report = Report::new(job, targets, &outcome);
        on_point(i, points.len(), &report);
        reports.push(report);
    }
    Ok(reports)
}

/// The sweep as CSV: the header, then one run-level row per point.
pub fn to_csv(reports: &[Report]) -> String {
    let mut lines = vec![print_csv::header()];
    lines.extend(reports.iter().map(print_csv::total_row));
    lines.join("\n") + "\n"
}
