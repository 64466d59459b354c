//! The readable report: a summary line, one table row per scope (run, targets, threads),
//! and SQLIO's millisecond histogram.

use comfy_table::{presets::UTF8_FULL_CONDENSED, CellAlignment, Table};

use flashscan_measure::histogram::MS_BUCKET_COUNT;
use crate::report::{Figures, Report, FIGURE_COLUMNS};

pub fn to_table(report: &Report) -> String {
    let mut out = format!("{}\n", report.settings());
    let mut table = Table::new();
    table.load_preset(UTF8_FULL_CONDENSED);
    table.set_header(std::iter::once("scope").chain(FIGURE_COLUMNS).collect::<Vec<_>>());
    let multi = report.targets.len() > 1 || report.targets.iter().any(|t| t.threads.len() > 1);
    table.add_row(cells("total", &report.figures));
    if multi {
        for t in &report.targets {
            table.add_row(cells(&t.path, &t.figures));
            if t.threads.len() > 1 {
                for th in &t.threads {
                    table.add_row(cells(&format!("  thread {}", th.thread), &th.figures));
                }
            }
        }
    }
    for col in 1..=FIGURE_COLUMNS.len() {
        if let Some(c) = table.column_mut(col) {
            c.set_cell_alignment(CellAlignment::Right);
        }
    }
    out.push_str(&table.to_string());
    out.push('\n');
    out.push_str(&ms_histogram(&report.figures));
    out
}

fn cells(scope: &str, f: &Figures) -> Vec<String> {
    std::iter::once(scope.to_string()).chain(f.cells()).collect()
}

/// SQLIO's `-LS` histogram: percent of I/Os per whole millisecond.
fn ms_histogram(f: &Figures) -> String {
    let mut table = Table::new();
    table.load_preset(UTF8_FULL_CONDENSED);
    let mut ms = vec!["ms".to_string()];
    let mut pct = vec!["% of I/Os".to_string()];
    for (i, p) in f.latency_ms_buckets.iter().enumerate() {
        ms.push(if i + 1 == MS_BUCKET_COUNT { format!("{i}+") } else { i.to_string() });
        pct.push(format!("{p:.0}"));
    }
    table.add_row(ms);
    table.add_row(pct);
    table.to_string() + "\n"
}
