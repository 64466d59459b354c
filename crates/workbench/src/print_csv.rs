//! `--csv`: one row per scope (run, target, thread) with the same columns for a single run
//! and for every point of a sweep, so spreadsheets read both the same way. With
//! `--status-interval` a single run also gets one `interval` row per interval (the timeline:
//! that interval's own figures, `t_s` = seconds from the start of the measurement to its end).

use flashscan_measure::csv::quote;

use flashscan_measure::histogram::MS_BUCKET_COUNT;
use crate::report::{Figures, IntervalReport, Report};

/// The column names, in order.
pub fn header() -> String {
    let mut cols: Vec<String> = [
        "scope", "target", "thread", "engine", "pattern", "rw", "write_pct", "block_size_bytes", "queue_depth", "threads_count",
        "processes", "sync", "duration_s", "ios_count", "iops", "read_iops", "write_iops", "mb_per_s", "latency_us_p50", "latency_us_p90",
        "latency_us_p99", "latency_us_p99_9", "latency_us_max", "latency_us_mean", "cpu_user_pct", "cpu_sys_pct", "cpu_us_per_io",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    for ms in 0..MS_BUCKET_COUNT {
        cols.push(if ms + 1 == MS_BUCKET_COUNT { format!("ms_{ms}_plus_pct") } else { format!("ms_{ms}_pct") });
    }
    cols.push("t_s".into());
    cols.push("outstanding_ios".into());
    cols.join(",")
}

fn row(report: &Report, scope: &str, target: &str, thread: &str, f: &Figures) -> String {
    row_at(report, scope, target, thread, f, report.duration_s, None)
}

fn row_at(report: &Report, scope: &str, target: &str, thread: &str, f: &Figures, duration_s: f64, interval: Option<&IntervalReport>) -> String {
    let l = &f.latency_us;
    let mut cells: Vec<String> = vec![
        scope.into(),
        quote(target),
        thread.into(),
        report.engine.clone(),
        report.pattern.clone(),
        report.rw.clone(),
        report.write_pct.to_string(),
        report.block_size_bytes.to_string(),
        report.queue_depth.to_string(),
        report.threads_count.to_string(),
        report.processes.to_string(),
        report.sync.to_string(),
        format!("{:.3}", duration_s),
        f.ios_count.to_string(),
        format!("{:.1}", f.iops),
        format!("{:.1}", f.read_iops),
        format!("{:.1}", f.write_iops),
        format!("{:.2}", f.mb_per_s),
        format!("{:.1}", l.p50),
        format!("{:.1}", l.p90),
        format!("{:.1}", l.p99),
        format!("{:.1}", l.p99_9),
        format!("{:.1}", l.max),
        format!("{:.1}", l.mean),
        format!("{:.2}", f.cpu_user_pct),
        format!("{:.2}", f.cpu_sys_pct),
        format!("{:.3}", f.cpu_us_per_io),
    ];
    cells.extend(f.latency_ms_buckets.iter().map(|p| format!("{p:.2}")));
    match interval {
        Some(i) => {
            cells.push(format!("{:.3}", i.t_s));
            cells.push(i.outstanding_ios.to_string());
        }
        None => cells.extend([String::new(), String::new()]),
    }
    cells.join(",")
}

/// Rows of one report: the run, each target, each thread (no header).
pub fn rows(report: &Report) -> Vec<String> {
    let mut out = vec![row(report, "total", "", "", &report.figures)];
    for t in &report.targets {
        out.push(row(report, "target", &t.path, "", &t.figures));
        for th in &t.threads {
            out.push(row(report, "thread", &t.path, &th.thread.to_string(), &th.figures));
        }
    }
    for i in &report.intervals {
        out.push(row_at(report, "interval", "", "", &i.figures, i.duration_s, Some(i)));
    }
    out
}

/// The run-level row only (one per sweep point).
pub fn total_row(report: &Report) -> String {
    row(report, "total", "", "", &report.figures)
}

/// A whole single-run CSV document.
pub fn to_csv(report: &Report) -> String {
    let mut lines = vec![header()];
    lines.extend(rows(report));
    lines.join("\n") + "\n"
}
