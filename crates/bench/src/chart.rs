//! The benchmarks' SVG charts, drawn with the shared pieces of `flashscan_measure::chart`:
//! - `bench costs`: lookups (CPU µs per row against rows per query, one line per mode, log
//!   scale) above scans (CPU µs per page against rows per page);
//! - `bench compression`: size on disk per format (bars) above elapsed seconds per format
//!   for each query and cache mode (one line each, formats in the article's order).

use std::path::Path;

use flashscan_measure::chart::{chart_error, color, legend, line, panel, stacked_panels};
use plotters::coord::Shift;
use plotters::prelude::*;

use crate::compression::CompressionReport;
use crate::costs::report::ScanCostRow;
use crate::costs::CostReport;
use crate::error::BenchError;

type Panel<'a> = DrawingArea<SVGBackend<'a>, Shift>;

/// An SVG file of `size_px` at `path` with two panels, one above the other, drawn by `draw`.
fn write_two_panels(path: &Path, size_px: (u32, u32), draw: impl FnOnce(&[Panel<'_>]) -> Result<(), String>) -> Result<(), BenchError> {
    stacked_panels(SVGBackend::new(path, size_px).into_drawing_area(), 2, draw).map_err(|what| BenchError::Chart { path: path.to_path_buf(), what })
}

pub fn write_costs_chart(report: &CostReport, path: &Path) -> Result<(), BenchError> {
    write_two_panels(path, (1100, 1100), |panels| costs_panels(report, panels))
}

fn costs_panels(report: &CostReport, panels: &[Panel<'_>]) -> Result<(), String> {
    let mut modes: Vec<&str> = Vec::new();
    for r in &report.lookups {
        if !modes.contains(&r.mode.as_str()) {
            modes.push(&r.mode);
        }
    }
    let x_max = report.lookups.iter().map(|r| r.rows_per_query as u32).max().unwrap_or(10).max(20);
    let y_max = report.lookups.iter().map(|r| r.cpu_us_per_row).fold(1.0f64, f64::max) * 1.1;
    let mut chart = panel(&panels[0], "Key lookups: CPU µs per row", (8u32..x_max).log_scale(), 0.0..y_max)?;
    chart.configure_mesh().x_desc("rows per query").y_desc("CPU µs per row").draw().map_err(chart_error)?;
    for (i, mode) in modes.iter().enumerate() {
        let points: Vec<(u32, f64)> = report.lookups.iter().filter(|r| r.mode == *mode).map(|r| (r.rows_per_query as u32, r.cpu_us_per_row)).collect();
        line(&mut chart, points, i, mode, true)?;
    }
    legend(&mut chart, SeriesLabelPosition::UpperRight)?;

    let y_max = report.scans.iter().map(|r| r.aggregate_cpu_us_per_page.max(r.disk_cpu_us_per_page).max(r.memory_cpu_us_per_page)).fold(1.0f64, f64::max) * 1.1;
    let mut chart = panel(&panels[1], "Scans: CPU µs per page", (1u32..400).log_scale(), 0.0..y_max)?;
    chart.configure_mesh().x_desc("rows per page").y_desc("CPU µs per page").draw().map_err(chart_error)?;
    let series: [(&str, fn(&ScanCostRow) -> f64); 3] =
        [("memory", |r| r.memory_cpu_us_per_page), ("disk", |r| r.disk_cpu_us_per_page), ("aggregate", |r| r.aggregate_cpu_us_per_page)];
    for (i, (name, value)) in series.iter().enumerate() {
        let points: Vec<(u32, f64)> = report.scans.iter().map(|r| (r.rows_per_page as u32, value(r))).collect();
        line(&mut chart, points, i, name, false)?;
    }
    legend(&mut chart, SeriesLabelPosition::UpperRight)
}

pub fn write_compression_chart(report: &CompressionReport, path: &Path) -> Result<(), BenchError> {
    write_two_panels(path, (1000, 900), |panels| compression_panels(report, panels))
}

fn compression_panels(r: &CompressionReport, panels: &[Panel<'_>]) -> Result<(), String> {
    let formats: Vec<&str> = r.formats.iter().map(|s| s.format.as_str()).collect();
    let n = formats.len().max(1) as i32;
    let label = |x: &i32| formats.get(*x as usize).map_or(String::new(), |s| s.to_string());

    let size_max = r.formats.iter().map(|s| s.size_bytes as f64 / 1e6).fold(1.0, f64::max) * 1.15;
    let mut chart = panel(&panels[0], &format!("{}: size on disk (MB)", r.table), (0..n - 1).into_segmented(), 0.0..size_max)?;
    chart
        .configure_mesh()
        .x_label_formatter(&|v| match v {
            SegmentValue::CenterOf(i) => label(i),
            _ => String::new(),
        })
        .y_desc("MB")
        .draw()
        .map_err(chart_error)?;
    chart
        .draw_series(r.formats.iter().enumerate().map(|(i, s)| {
            let x = i as i32;
            Rectangle::new([(SegmentValue::Exact(x), 0.0), (SegmentValue::Exact(x + 1), s.size_bytes as f64 / 1e6)], color(i).filled())
        }))
        .map_err(chart_error)?;

    let time_max = r.runs.iter().map(|x| x.elapsed_s).fold(0.001, f64::max) * 1.15;
    let mut chart = panel(&panels[1], "elapsed seconds (median)", 0..n - 1, 0.0..time_max)?;
    chart.configure_mesh().x_labels(formats.len()).x_label_formatter(&label).y_desc("s").draw().map_err(chart_error)?;
    let mut series: Vec<(String, String)> = Vec::new();
    for x in &r.runs {
        if !series.contains(&(x.query.clone(), x.cache.clone())) {
            series.push((x.query.clone(), x.cache.clone()));
        }
    }
    for (i, (query, cache)) in series.iter().enumerate() {
        let points: Vec<(i32, f64)> = r
            .runs
            .iter()
            .filter(|x| &x.query == query && &x.cache == cache)
            .filter_map(|x| formats.iter().position(|f| *f == x.format).map(|p| (p as i32, x.elapsed_s)))
            .collect();
        line(&mut chart, points, i, &format!("{query} {cache}"), true)?;
    }
    legend(&mut chart, SeriesLabelPosition::UpperRight)
}
