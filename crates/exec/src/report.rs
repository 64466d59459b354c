//! Where the time went: one struct, filled once from what the scan measured. The table
//! printer (in the CLI) and the JSON printer ([`crate::report_json`]) only format it.
//! MB are decimal (10^6 bytes), as devices are rated; times are wall-clock seconds except
//! `cpu_s` and `waits`, which add up the time of every thread.

use serde::Serialize;

use crate::depth::DepthStep;
use crate::scan::{per_second, ScanStats};
use crate::source::SkipFigures;
use crate::value::QueryResult;
use crate::waits::WaitTimes;

#[derive(Debug, Clone, Serialize)]
pub struct FileReport {
    pub path: String,
    pub reads_count: u64,
    pub bytes_read: u64,
    /// This file's bytes over the scan's elapsed time.
    pub mb_per_s: f64,
    /// Average time from queueing a read to seeing it complete.
    pub read_latency_us_avg: f64,
}

/// The top-speed check: the same files read raw right before and after the scan.
#[derive(Debug, Clone, Serialize)]
pub struct CheckReport {
    /// Mean of the two raw runs.
    pub raw_mb_per_s: f64,
    pub raw_mb_per_s_before: f64,
    pub raw_mb_per_s_after: f64,
    /// Reads in flight per worker in the raw passes: the scan's own fixed depth, or the
    /// most a depth found while scanning may reach.
    pub raw_queue_depth: u32,
    /// Scan MB/s divided by raw MB/s.
    pub efficiency: f64,
    pub verdict: String,
    /// Column stores: the memory read rate (GB/s) measured beside the scan with its
    /// threads, which the verdict compares decode with.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory_gb_per_s: Option<f64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct ScanReport {
    pub query: String,
    pub sql: String,
    pub table: String,
    pub format: String,
    #[serde(skip)]
    pub result: QueryResult,
    pub partitions_count: u32,
    /// What the scan read and where its time went (the JSON keeps them at the top level).
    #[serde(flatten)]
    pub figures: PassFigures,
    /// `cold`, `direct` or `warm`.
    pub cache: String,
    /// What was done to the page cache before the scan.
    pub cache_actions: Vec<String>,
    pub engine: String,
    pub threads: u32,
    /// Reads in flight per worker at the end of the scan: `--depth`, or the depth the scan
    /// found (`queue_depth_mode` = `auto`; each depth it measured and its MB/s in
    /// `queue_depth_steps`).
    pub queue_depth: u32,
    pub queue_depth_mode: String,
    pub queue_depth_steps: Vec<DepthStep>,
    pub io_size_bytes: usize,
    pub notices: Vec<String>,
    /// Row groups (column store) skipped by min/max without being read.
    #[serde(flatten)]
    pub skipped: SkipFigures,
    #[serde(flatten)]
    pub check: Option<CheckReport>,
}

/// The figures every report derives from a pass's stats: the scan report carries them
/// (`ScanReport::figures`) and the check reads them.
#[derive(Debug, Clone, Serialize)]
pub struct PassFigures {
    /// Live rows: rows a DELETE removed are read but not counted here (`deleted_rows_skipped`).
    pub rows_scanned: u64,
    /// Rows read and skipped because a DELETE (or an UPDATE's old version) removed them:
    /// their bytes are in `bytes_read` and cost decode time, yet no row comes of them, so
    /// MB/s overstates the useful rate by their share (`flashscan rebuild` reclaims them).
    pub deleted_rows_skipped: u64,
    pub pages_read: u64,
    pub bytes_read: u64,
    pub elapsed_s: f64,
    pub mb_per_s: f64,
    pub rows_per_s: f64,
    /// Process CPU time (user + system, every thread) during the scan.
    pub cpu_s: f64,
    pub cpu_us_per_page: f64,
    pub read_ios_count: u64,
    pub read_io_size_bytes_avg: f64,
    /// Thread-seconds spent verifying and decoding pages (also in `waits.decode_s`).
    pub decode_s: f64,
    pub decode_us_per_page: f64,
    pub waits: WaitTimes,
    pub files: Vec<FileReport>,
}

impl PassFigures {
    pub fn of(stats: &ScanStats) -> PassFigures {
        let total = stats.total();
        let elapsed_s = stats.elapsed_s();
        let pages = total.pages_read;
        let per_page_us = |seconds: f64| if pages > 0 { seconds * 1e6 / pages as f64 } else { 0.0 };
        let cpu_s = stats.cpu.total_ns() as f64 / 1e9;
        let decode_s = total.decode_ns as f64 / 1e9;
        let files = stats
            .files
            .iter()
            .map(|(path, s)| FileReport {
                path: path.display().to_string(),
                reads_count: s.reads_count,
                bytes_read: s.bytes_read,
                mb_per_s: per_second(s.bytes_read as f64 / 1e6, elapsed_s),
                read_latency_us_avg: s.read_latency_us_avg(),
            })
            .collect();
        PassFigures {
            rows_scanned: total.rows_scanned,
            deleted_rows_skipped: total.deleted_rows_skipped,
            pages_read: pages,
            bytes_read: total.read.bytes_read,
            elapsed_s,
            mb_per_s: stats.mb_per_s(),
            rows_per_s: per_second(total.rows_scanned as f64, elapsed_s),
            cpu_s,
            cpu_us_per_page: per_page_us(cpu_s),
            read_ios_count: total.read.reads_count,
            read_io_size_bytes_avg: if total.read.reads_count > 0 {
                total.read.bytes_read as f64 / total.read.reads_count as f64
            } else {
                0.0
            },
            decode_s,
            decode_us_per_page: per_page_us(decode_s),
            waits: stats.waits(),
            files,
        }
    }
}
