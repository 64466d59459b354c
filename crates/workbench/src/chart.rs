//! The sweep's SVG chart: IOPS, MB/s and p99 latency against queue depth (log scale), one
//! line per combination of pattern, direction, block size and threads.

use std::path::Path;

use plotters::prelude::*;

use crate::error::WorkbenchError;
use crate::report::Report;
use crate::size::format_size_bytes;

const PALETTE: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
];

/// One line of the chart: its label and (queue depth, report) points.
fn series(reports: &[Report]) -> Vec<(String, Vec<&Report>)> {
    let mut out: Vec<(String, Vec<&Report>)> = Vec::new();
    for r in reports {
        let label = format!("{} {} {} t{}", r.pattern, r.rw, format_size_bytes(r.block_size_bytes as u64), r.threads_count);
        match out.iter_mut().find(|(l, _)| *l == label) {
            Some((_, points)) => points.push(r),
            None => out.push((label, vec![r])),
        }
    }
    out
}

pub fn write_chart(reports: &[Report], path: &Path) -> Result<(), WorkbenchError> {
    let lines = series(reports);
    let depth_max = reports.iter().map(|r| r.queue_depth).max().unwrap_or(1).max(2);
    let root = SVGBackend::new(path, (1200, 1400)).into_drawing_area();
    let chart_error = |e: String| WorkbenchError::Chart(format!("{}: {e}", path.display()));
    root.fill(&WHITE).map_err(|e| chart_error(e.to_string()))?;
    let panels = root.split_evenly((3, 1));
    let metrics: [(&str, fn(&Report) -> f64); 3] =
        [("IOPS", |r| r.figures.iops), ("MB/s", |r| r.figures.mb_per_s), ("p99 latency (µs)", |r| r.figures.latency_us.p99)];
    for (panel, (name, value)) in panels.iter().zip(metrics) {
        let y_max = reports.iter().map(value).fold(0.0f64, f64::max).max(1.0) * 1.1;
        let mut chart = ChartBuilder::on(panel)
            .caption(format!("{name} against queue depth"), ("sans-serif", 22))
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(70)
            .build_cartesian_2d((1u32..depth_max).log_scale(), 0.0..y_max)
            .map_err(|e| chart_error(e.to_string()))?;
        chart
            .configure_mesh()
            .x_desc("outstanding I/Os per thread")
            .y_desc(name)
            .draw()
            .map_err(|e| chart_error(e.to_string()))?;
        for (i, (label, points)) in lines.iter().enumerate() {
            let color = PALETTE[i % PALETTE.len()];
            let data: Vec<(u32, f64)> = points.iter().map(|r| (r.queue_depth, value(r))).collect();
            chart
                .draw_series(LineSeries::new(data.clone(), color.stroke_width(2)))
                .map_err(|e| chart_error(e.to_string()))?
                .label(label.clone())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2)));
            chart
                .draw_series(data.into_iter().map(|(x, y)| Circle::new((x, y), 3, color.filled())))
                .map_err(|e| chart_error(e.to_string()))?;
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .position(SeriesLabelPosition::UpperLeft)
            .draw()
            .map_err(|e| chart_error(e.to_string()))?;
    }
    root.present().map_err(|e| chart_error(e.to_string()))?;
    Ok(())
}
