//! The cost bench's SVG: lookups (CPU µs per row against rows per query, one line per
//! mode, log scale) above scans (CPU µs per page against rows per page).

use std::path::Path;

use plotters::prelude::*;

use super::report::CostReport;
use crate::error::IndexError;

const PALETTE: [RGBColor; 6] = [RGBColor(31, 119, 180), RGBColor(255, 127, 14), RGBColor(44, 160, 44), RGBColor(214, 39, 40), RGBColor(148, 103, 189), RGBColor(140, 86, 75)];

pub fn write_chart(report: &CostReport, path: &Path) -> Result<(), IndexError> {
    let chart_error = |e: String| IndexError::InvalidArgument(format!("writing chart {}: {e}", path.display()));
    let root = SVGBackend::new(path, (1100, 1100)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| chart_error(e.to_string()))?;
    let panels = root.split_evenly((2, 1));

    let mut modes: Vec<&str> = Vec::new();
    for r in &report.lookups {
        if !modes.contains(&r.mode.as_str()) {
            modes.push(&r.mode);
        }
    }
    let x_max = report.lookups.iter().map(|r| r.rows_per_query as u32).max().unwrap_or(10).max(20);
    let y_max = report.lookups.iter().map(|r| r.cpu_us_per_row).fold(1.0f64, f64::max) * 1.1;
    let mut chart = ChartBuilder::on(&panels[0])
        .caption("Key lookups: CPU µs per row", ("sans-serif", 22))
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(60)
        .build_cartesian_2d((8u32..x_max).log_scale(), 0.0..y_max)
        .map_err(|e| chart_error(e.to_string()))?;
    chart.configure_mesh().x_desc("rows per query").y_desc("CPU µs per row").draw().map_err(|e| chart_error(e.to_string()))?;
    for (i, mode) in modes.iter().enumerate() {
        let color = PALETTE[i % PALETTE.len()];
        let points: Vec<(u32, f64)> = report.lookups.iter().filter(|r| r.mode == *mode).map(|r| (r.rows_per_query as u32, r.cpu_us_per_row)).collect();
        chart
            .draw_series(LineSeries::new(points.clone(), color.stroke_width(2)))
            .map_err(|e| chart_error(e.to_string()))?
            .label(mode.to_string())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2)));
        chart.draw_series(points.iter().map(|&p| Circle::new(p, 3, color.filled()))).map_err(|e| chart_error(e.to_string()))?;
    }
    chart.configure_series_labels().border_style(BLACK).background_style(WHITE.mix(0.8)).draw().map_err(|e| chart_error(e.to_string()))?;

    let y_max = report.scans.iter().map(|r| r.aggregate_cpu_us_per_page.max(r.disk_cpu_us_per_page).max(r.memory_cpu_us_per_page)).fold(1.0f64, f64::max) * 1.1;
    let mut chart = ChartBuilder::on(&panels[1])
        .caption("Scans: CPU µs per page", ("sans-serif", 22))
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(60)
        .build_cartesian_2d((1u32..400).log_scale(), 0.0..y_max)
        .map_err(|e| chart_error(e.to_string()))?;
    chart.configure_mesh().x_desc("rows per page").y_desc("CPU µs per page").draw().map_err(|e| chart_error(e.to_string()))?;
    let series: [(&str, fn(&super::report::ScanCostRow) -> f64); 3] =
        [("memory", |r| r.memory_cpu_us_per_page), ("disk", |r| r.disk_cpu_us_per_page), ("aggregate", |r| r.aggregate_cpu_us_per_page)];
    for (i, (name, value)) in series.iter().enumerate() {
        let color = PALETTE[i % PALETTE.len()];
        let points: Vec<(u32, f64)> = report.scans.iter().map(|r| (r.rows_per_page as u32, value(r))).collect();
        chart
            .draw_series(LineSeries::new(points, color.stroke_width(2)))
            .map_err(|e| chart_error(e.to_string()))?
            .label(name.to_string())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2)));
    }
    chart.configure_series_labels().border_style(BLACK).background_style(WHITE.mix(0.8)).draw().map_err(|e| chart_error(e.to_string()))?;
    root.present().map_err(|e| chart_error(e.to_string()))?;
    Ok(())
}
