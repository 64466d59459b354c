//! `--html FILE`: one self-contained page a person reads — the settings, the tables and the
//! charts inline (SVG from [`crate::chart`]), the job as JSON to replay it. No script, no
//! style sheet, no font or image is fetched from anywhere: the page opens offline.

use crate::chart;
use crate::error::WorkbenchError;
use flashscan_measure::histogram::MS_BUCKET_COUNT;
use crate::print_json;
use crate::report::{Figures, Report, FIGURE_COLUMNS};
use crate::size::format_size_bytes;
use crate::spec::SweepAxis;

const STYLE: &str = "body{font-family:sans-serif;margin:2em;max-width:1100px;color:#222}\
table{border-collapse:collapse;margin:1em 0}th,td{border:1px solid #ccc;padding:3px 8px;text-align:right}\
th{background:#f2f2f2}td:first-child,th:first-child{text-align:left}pre{background:#f7f7f7;padding:1em;overflow:auto}\
.note{color:#555}";

/// Escapes text for HTML element content and attribute values.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

fn page(title: &str, body: &str) -> String {
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{}</title><style>{STYLE}</style></head>\n<body>\n<h1>{}</h1>\n{body}\n<p class=\"note\">Written by flashscan io {}. Units: IOPS = I/Os per second, MB/s = MiB/s, latencies in µs, CPU % of the whole machine.</p>\n</body></html>\n",
        escape(title),
        escape(title),
        env!("CARGO_PKG_VERSION")
    )
}

/// The SVG inline, without its XML declaration (not allowed inside HTML).
fn inline_svg(svg: &str) -> String {
    let start = svg.find("<svg").unwrap_or(0);
    svg[start..].to_string()
}

/// The settings line with the seed (the page is the record of the run).
fn settings(r: &Report) -> String {
    format!("{}, seed {}", r.settings(), r.seed)
}

fn figures_cells(f: &Figures) -> String {
    f.cells().iter().map(|c| format!("<td>{c}</td>")).collect()
}

fn figure_headers() -> String {
    FIGURE_COLUMNS.iter().map(|c| format!("<th>{c}</th>")).collect()
}

/// The page for one run.
pub fn run_page(report: &Report) -> Result<String, WorkbenchError> {
    let mut body = format!("<p>{}</p>\n", escape(&settings(report)));
    body.push_str(&format!("<h2>Totals</h2>\n<table><tr><th>scope</th>{}</tr>\n", figure_headers()));
    body.push_str(&format!("<tr><td>total</td>{}</tr>\n", figures_cells(&report.figures)));
    for t in &report.targets {
        body.push_str(&format!("<tr><td>{}</td>{}</tr>\n", escape(&t.path), figures_cells(&t.figures)));
        for th in &t.threads {
            body.push_str(&format!("<tr><td>&nbsp;&nbsp;thread {}</td>{}</tr>\n", th.thread, figures_cells(&th.figures)));
        }
    }
    body.push_str("</table>\n<h2>Latency in whole milliseconds (% of I/Os)</h2>\n<table><tr>");
    for i in 0..MS_BUCKET_COUNT {
        body.push_str(&format!("<th>{}</th>", if i + 1 == MS_BUCKET_COUNT { format!("{i}+") } else { i.to_string() }));
    }
    body.push_str("</tr><tr>");
    for p in &report.figures.latency_ms_buckets {
        body.push_str(&format!("<td>{p:.1}</td>"));
    }
    body.push_str("</tr></table>\n");
    if !report.intervals.is_empty() {
        body.push_str("<h2>Timeline</h2>\n");
        body.push_str(&inline_svg(&chart::timeline_svg(report)?));
        body.push_str(&format!(
            "\n<table><tr><th>t (s)</th><th>outstanding</th>{}</tr>\n",
            figure_headers()
        ));
        for i in &report.intervals {
            body.push_str(&format!("<tr><td>{:.3}</td><td>{}</td>{}</tr>\n", i.t_s, i.outstanding_ios, figures_cells(&i.figures)));
        }
        body.push_str("</table>\n");
    }
    body.push_str(&format!(
        "<h2>Job</h2>\n<p>Save this as a file and run <code>flashscan io --job FILE</code> to run the same test again.</p>\n<pre>{}</pre>\n",
        escape(&print_json::to_json(&report.job))
    ));
    Ok(page("flashscan io: one run", &body))
}

/// The page for a sweep.
pub fn sweep_page(reports: &[Report], axis: SweepAxis) -> Result<String, WorkbenchError> {
    let mut body = String::new();
    if let Some(first) = reports.first() {
        body.push_str(&format!("<p>Sweep over {} ({} points); first point: {}</p>\n", axis.label(), reports.len(), escape(&settings(first))));
    }
    body.push_str(&inline_svg(&chart::sweep_svg(reports, axis)?));
    body.push_str(&format!(
        "\n<h2>Points</h2>\n<table><tr><th>pattern</th><th>rw</th><th>block</th><th>threads</th><th>processes</th><th>QD</th>{}</tr>\n",
        figure_headers()
    ));
    for r in reports {
        body.push_str(&format!(
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>{}</tr>\n",
            escape(&r.pattern),
            escape(&r.rw),
            format_size_bytes(r.block_size_bytes as u64),
            r.threads_count,
            r.processes,
            r.queue_depth,
            figures_cells(&r.figures)
        ));
    }
    body.push_str("</table>\n");
    Ok(page(&format!("flashscan io: sweep over {}", axis.label()), &body))
}
