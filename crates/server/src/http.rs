//! `--http ADDR`: `/metrics` in Prometheus' text format, `/api/history` (the sampler's
//! ring as JSON) and `/` (a live dashboard: one HTML page with its script inline, drawing
//! SVG charts of the last minutes from `/api/history`; nothing is fetched from elsewhere).
//!
//! Three GET routes, no keep-alive, answers of a few kilobytes: a hand-written HTTP/1.0
//! responder on tokio is smaller than adding hyper's stack to the build for this.

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::config::SAMPLE_RING_SECONDS;
use crate::shared::Shared;

/// A request line and headers larger than this are refused.
const REQUEST_BYTES_MAX: usize = 8192;
/// A client that sends nothing is dropped after this.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

pub const DASHBOARD_HTML: &str = include_str!("dashboard.html");

pub async fn serve_http(listener: TcpListener, shared: Arc<Shared>) {
    loop {
        let Ok((socket, _)) = listener.accept().await else { continue };
        let shared = shared.clone();
        tokio::spawn(async move {
            let _ = tokio::time::timeout(REQUEST_TIMEOUT, answer(socket, &shared)).await;
        });
    }
}

async fn answer(mut socket: TcpStream, shared: &Shared) -> std::io::Result<()> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") && !buf.windows(2).any(|w| w == b"\n\n") {
        let n = socket.read(&mut chunk).await?;
        if n == 0 {
            break;
        }
        buf.extend_from_slice(&chunk[..n]);
        if buf.len() > REQUEST_BYTES_MAX {
            return respond(&mut socket, "431 Request Header Fields Too Large", "text/plain", b"request too large\n").await;
        }
    }
    let text = String::from_utf8_lossy(&buf);
    let mut parts = text.lines().next().unwrap_or("").split_whitespace();
    let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or("/"));
    if method != "GET" && method != "HEAD" {
        return respond(&mut socket, "405 Method Not Allowed", "text/plain", b"GET only\n").await;
    }
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    match path {
        "/metrics" => respond(&mut socket, "200 OK", "text/plain; version=0.0.4", prometheus_text(shared).as_bytes()).await,
        "/api/history" => {
            let seconds = query
                .split('&')
                .find_map(|kv| kv.strip_prefix("seconds="))
                .and_then(|v| v.parse::<usize>().ok())
                .unwrap_or(300)
                .min(SAMPLE_RING_SECONDS);
            let history = shared.sampler.history(seconds);
            let body = serde_json::to_vec(&history).unwrap_or_else(|_| b"[]".to_vec());
            respond(&mut socket, "200 OK", "application/json", &body).await
        }
        "/" | "/index.html" => respond(&mut socket, "200 OK", "text/html; charset=utf-8", DASHBOARD_HTML.as_bytes()).await,
        _ => respond(&mut socket, "404 Not Found", "text/plain", b"not found: try / or /metrics\n").await,
    }
}

async fn respond(socket: &mut TcpStream, status: &str, content_type: &str, body: &[u8]) -> std::io::Result<()> {
    let head = format!(
        "HTTP/1.0 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n",
        body.len()
    );
    socket.write_all(head.as_bytes()).await?;
    socket.write_all(body).await?;
    socket.shutdown().await
}

fn escape_label(v: &str) -> String {
    v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

/// Cumulative counters as Prometheus counters, levels as gauges, and the last second's
/// rates as gauges (Prometheus computes its own rates from the counters; the gauges are
/// for people reading the page).
pub fn prometheus_text(shared: &Shared) -> String {
    use std::sync::atomic::Ordering::Relaxed;
    let mut out = String::new();
    let c = &shared.admission.counters;
    let mut metric = |name: &str, kind: &str, help: &str, value: f64| {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}");
    };
    metric("flashscan_connections_open", "gauge", "Client connections open.", c.connections_open.load(Relaxed) as f64);
    metric("flashscan_connections_total", "counter", "Connections accepted since start.", c.connections_total.load(Relaxed) as f64);
    metric("flashscan_connections_refused_total", "counter", "Connections refused at --max-connections.", c.connections_refused.load(Relaxed) as f64);
    metric("flashscan_queries_running", "gauge", "Queries holding a slot.", c.queries_running.load(Relaxed) as f64);
    metric("flashscan_queries_queued", "gauge", "Queries waiting for a slot.", c.queries_queued.load(Relaxed) as f64);
    metric("flashscan_queries_started_total", "counter", "Queries admitted.", c.queries_started.load(Relaxed) as f64);
    metric("flashscan_queries_completed_total", "counter", "Queries that sent all their rows.", c.queries_completed.load(Relaxed) as f64);
    metric("flashscan_queries_failed_total", "counter", "Queries that ended with an error.", c.queries_failed.load(Relaxed) as f64);
    metric("flashscan_queries_canceled_total", "counter", "Queries canceled, timed out or abandoned by their client.", c.queries_canceled.load(Relaxed) as f64);
    metric("flashscan_queue_timeouts_total", "counter", "Queries refused after waiting --queue-timeout for a slot.", c.queries_timed_out_in_queue.load(Relaxed) as f64);
    metric("flashscan_queue_wait_seconds_total", "counter", "Time queries spent waiting for a slot.", c.queue_wait_us.load(Relaxed) as f64 / 1e6);
    metric("flashscan_rows_sent_total", "counter", "Rows sent to clients.", c.rows_sent.load(Relaxed) as f64);
    metric("flashscan_scan_buffer_bytes_in_use", "gauge", "Scan read buffers reserved by running queries.", shared.admission.scan_buffer_bytes_in_use() as f64);
    metric("flashscan_scan_buffer_bytes_budget", "gauge", "The global scan buffer budget.", shared.admission.scan_buffer_budget_bytes() as f64);
    if let Some(s) = shared.sampler.latest() {
        metric("flashscan_read_bytes_per_second", "gauge", "Bytes read per second over the last sample.", s.bytes_read as f64 / s.interval_s);
        metric("flashscan_read_iops", "gauge", "Reads per second over the last sample.", s.read_iops);
        metric("flashscan_read_latency_microseconds_avg", "gauge", "Average read latency over the last sample.", s.read_latency_us_avg);
        metric("flashscan_query_latency_seconds_p99", "gauge", "p99 latency of queries ended in the last sample.", s.query_latency_ms_p99 / 1e3);
        metric("flashscan_statements_committed_total", "counter", "INSERT/COPY/COMMIT statements acknowledged after their flush, since start.", s.statements_committed_total as f64);
        metric("flashscan_rows_inserted_total", "counter", "Rows inserted since start.", s.rows_inserted_total as f64);
        metric("flashscan_commits_total", "counter", "Write-path transactions committed since start (statements share them).", s.commits_total as f64);
        metric("flashscan_log_flushes_total", "counter", "Durable log flushes (write + fdatasync) since start.", s.log_flushes_total as f64);
        metric("flashscan_commits_per_second", "gauge", "Commits per second over the last sample.", s.commits_per_s);
        metric("flashscan_log_flushes_per_second", "gauge", "Log flushes per second over the last sample.", s.log_flushes_per_s);
        metric("flashscan_log_flush_latency_microseconds", "gauge", "Mean log flush time (write + fdatasync) over the last sample.", s.log_flush_latency_us_avg);
        metric("flashscan_writes_waiting", "gauge", "Statements waiting for their commit.", s.writes_waiting as f64);
        metric("flashscan_pool_hits_total", "counter", "Buffer pool page requests served from memory since start.", s.pool_hits_total as f64);
        metric("flashscan_pool_reads_total", "counter", "Buffer pool reads since start.", s.pool_reads_total as f64);
        metric("flashscan_pool_evictions_total", "counter", "Buffer pool pages evicted since start.", s.pool_evictions_total as f64);
        metric("flashscan_io_queue_depth_avg", "gauge", "I/O requests in flight on average over the last sample.", s.io_queue_depth_avg);
        let _ = writeln!(out, "# HELP flashscan_wait_seconds Time spent waiting over the last sample, by kind.\n# TYPE flashscan_wait_seconds gauge");
        for (kind, ms) in [("io", s.wait_io_ms), ("latch", s.wait_latch_ms), ("queue", s.wait_queue_ms), ("commit", s.wait_commit_ms)] {
            let _ = writeln!(out, "flashscan_wait_seconds{{kind=\"{kind}\"}} {}", ms / 1e3);
        }
        let per_file: [(&str, &str, fn(&crate::sampler::FileSample) -> f64); 5] = [
            ("flashscan_file_reads_total", "Reads of the file since start.", |f| f.reads_total as f64),
            ("flashscan_file_read_bytes_total", "Bytes read from the file since start.", |f| f.bytes_read_total as f64),
            ("flashscan_file_read_stall_seconds_total", "Sum of read latencies of the file since start.", |f| f.read_stall_us_total as f64 / 1e6),
            ("flashscan_file_writes_total", "Writes to the file since start.", |f| f.writes_total as f64),
            ("flashscan_file_written_bytes_total", "Bytes written to the file since start.", |f| f.bytes_written_total as f64),
        ];
        for (name, help, value) in per_file {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter");
            for f in &s.files {
                let _ = writeln!(out, "{name}{{file=\"{}\"}} {}", escape_label(&f.file), value(f));
            }
        }
    }
    out
}
