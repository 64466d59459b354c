//! Charts as SVG text (plotters' SVG backend into a string), so the same chart is written to
//! `--chart FILE` or inlined into the `--html` page:
//! - a sweep's chart: IOPS, MB/s and p99 latency against the swept value (queue depth for the
//!   IOMeter matrix, threads or processes for the one-knob sweeps), one line per combination
//!   of the other settings;
//! - a run's timeline (`--status-interval`): IOPS and p50/p99 latency per interval, where a
//!   flat line shows a limit reached.

use flashscan_measure::chart::{chart_error, legend, line, panel, stacked_panels};
use plotters::prelude::*;

use crate::error::WorkbenchError;
use crate::report::Report;
use crate::size::format_size_bytes;
use crate::spec::SweepAxis;

/// The settings a line holds fixed: everything but the swept value.
fn line_label(r: &Report, axis: SweepAxis) -> String {
    let base = format!("{} {} {}", r.pattern, r.rw, format_size_bytes(r.block_size_bytes as u64));
    match axis {
        SweepAxis::Matrix | SweepAxis::Qd => format!("{base} t{}", r.threads_count),
        SweepAxis::Threads => format!("{base} QD{}", r.queue_depth),
        SweepAxis::Processes => format!("{base} t{} QD{}", r.swept_value(SweepAxis::Threads), r.queue_depth),
    }
}

/// One line of the chart: its label and its points.
fn series(reports: &[Report], axis: SweepAxis) -> Vec<(String, Vec<&Report>)> {
    let mut out: Vec<(String, Vec<&Report>)> = Vec::new();
    for r in reports {
        let label = line_label(r, axis);
        match out.iter_mut().find(|(l, _)| *l == label) {
            Some((_, points)) => points.push(r),
            None => out.push((label, vec![r])),
        }
    }
    out
}

/// The sweep's chart as SVG text.
pub fn sweep_svg(reports: &[Report], axis: SweepAxis) -> Result<String, WorkbenchError> {
    let lines = series(reports, axis);
    let x_max = reports.iter().map(|r| r.swept_value(axis)).max().unwrap_or(1).max(2);
    let x_top = x_max + (x_max / 8).max(1);
    let mut svg = String::new();
    let root = SVGBackend::with_string(&mut svg, (1000, 1100)).into_drawing_area();
    stacked_panels(root, 3, |panels| {
        let metrics: [(&str, fn(&Report) -> f64); 3] =
            [("IOPS", |r| r.figures.iops), ("MB/s", |r| r.figures.mb_per_s), ("p99 latency (µs)", |r| r.figures.latency_us.p99)];
        for (area, (name, value)) in panels.iter().zip(metrics) {
            let y_max = reports.iter().map(value).fold(0.0f64, f64::max).max(1.0) * 1.1;
            let mut chart = panel(area, &format!("{name} against {}", axis.label()), (1u32..x_top).log_scale(), 0.0..y_max)?;
            chart.configure_mesh().x_desc(axis.label()).y_desc(name).draw().map_err(chart_error)?;
            for (i, (label, points)) in lines.iter().enumerate() {
                let data: Vec<(u32, f64)> = points.iter().map(|r| (r.swept_value(axis), value(r))).collect();
                line(&mut chart, data, i, label, true)?;
            }
            legend(&mut chart, SeriesLabelPosition::UpperLeft)?;
        }
        Ok(())
    })
    .map_err(WorkbenchError::Chart)?;
    Ok(svg)
}

/// A run's timeline as SVG text: IOPS, then p50 and p99 latency, per interval.
pub fn timeline_svg(report: &Report) -> Result<String, WorkbenchError> {
    if report.intervals.is_empty() {
        return Err(WorkbenchError::NotRecorded("a timeline needs intervals: add --status-interval (e.g. --status-interval 1)"));
    }
    let t_max = report.intervals.iter().map(|i| i.t_s).fold(0.0f64, f64::max).max(0.001);
    let mut svg = String::new();
    let root = SVGBackend::with_string(&mut svg, (1000, 700)).into_drawing_area();
    stacked_panels(root, 2, |panels| {
        type Metric = (&'static str, fn(&crate::report::IntervalReport) -> f64);
        let panel_metrics: [(&str, Vec<Metric>); 2] = [
            ("IOPS per interval", vec![("IOPS", |i| i.figures.iops)]),
            (
                "latency per interval (µs)",
                vec![("p50 µs", |i| i.figures.latency_us.p50), ("p99 µs", |i| i.figures.latency_us.p99)],
            ),
        ];
        for (area, (title, metrics)) in panels.iter().zip(panel_metrics) {
            let y_max = report
                .intervals
                .iter()
                .flat_map(|i| metrics.iter().map(move |(_, f)| f(i)))
                .fold(0.0f64, f64::max)
                .max(1.0)
                * 1.1;
            let mut chart = panel(area, title, 0.0..t_max, 0.0..y_max)?;
            chart.configure_mesh().x_desc("seconds into the measurement").y_desc(title).draw().map_err(chart_error)?;
            for (k, (name, f)) in metrics.iter().enumerate() {
                let data: Vec<(f64, f64)> = report.intervals.iter().map(|i| (i.t_s, f(i))).collect();
                line(&mut chart, data, k, name, true)?;
            }
            legend(&mut chart, SeriesLabelPosition::LowerRight)?;
        }
        Ok(())
    })
    .map_err(WorkbenchError::Chart)?;
    Ok(svg)
}
