//! Sweeps: the IOMeter matrix of the article on I/O cost — {sequential, random} ×
//! {read, write} × block sizes × queue depths (× thread counts) — and the one-knob sweeps
//! (`--sweep threads=1,2,4`, `processes=…`, `qd=…`), one short run per point on the same
//! prepared files. Each point is a full [`Report`]; CSV, chart and HTML read those.

use crate::error::WorkbenchError;
use crate::print_csv;
use crate::processes::{run_job, ChildSpawner};
use crate::report::Report;
use crate::spec::{JobSpec, SweepAxis};
use crate::test_file::{check_fits, PreparedTarget, TargetNeeds};

/// Runs every point in order. `on_point(index, count, report)` hears each finished point
/// (the binary drives its progress bar with it).
pub fn run_sweep(
    points: &[JobSpec],
    axis: SweepAxis,
    targets: &[PreparedTarget],
    notice: &(dyn Fn(&str) + Sync),
    spawn_child: Option<&ChildSpawner>,
    on_point: &mut dyn FnMut(usize, usize, &Report),
) -> Result<Vec<Report>, WorkbenchError> {
    // Every block size must suit every file before the first point runs.
    for job in points {
        for t in targets {
            let needs = TargetNeeds {
                writes: false,
                force: job.force,
                direct: job.direct,
                block_size_bytes: job.block_size_bytes,
                offset_bytes: job.offset_bytes,
            };
            check_fits(&t.path, t.size_bytes, needs, t.offset_align_bytes)?;
        }
    }
    let mut reports = Vec::with_capacity(points.len());
    for (i, job) in points.iter().enumerate() {
        let outcome = run_job(job, targets, notice, spawn_child, None)?;
        let report = Report::new(job, targets, &outcome).in_sweep(axis);
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
