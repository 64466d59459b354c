//! Per-file I/O counters, shared by every engine that touches the file: the
//! `sys.dm_io_virtual_file_stats` of flashscan. Stall time is the sum of the latencies of
//! the file's I/Os (time from queueing to completion), as SQL Server reports it.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, OnceLock};

#[derive(Debug, Default)]
pub struct FileStats {
    /// The process-wide counters of the same file (see [`process_file_stats`]): every I/O
    /// counted here is counted there too, so a server's sampler sees all scans' I/O live.
    parent: Option<Arc<FileStats>>,
    reads: TransferCounters,
    writes: TransferCounters,
    errors_count: AtomicU64,
}

/// The counters of one direction (reads or writes) of a file.
#[derive(Debug, Default)]
struct TransferCounters {
    count: AtomicU64,
    bytes: AtomicU64,
    stall_ns: AtomicU64,
}

impl TransferCounters {
    fn add(&self, bytes: u64, latency_ns: u64) {
        self.count.fetch_add(1, Relaxed);
        self.bytes.fetch_add(bytes, Relaxed);
        self.stall_ns.fetch_add(latency_ns, Relaxed);
    }
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct FileStatsSnapshot {
    pub reads_count: u64,
    pub writes_count: u64,
    pub bytes_read: u64,
    pub bytes_written: u64,
    pub read_stall_ns: u64,
    pub write_stall_ns: u64,
    pub errors_count: u64,
}

impl FileStats {
    /// Counters of one scan's use of `path` that also add up into the process-wide
    /// counters of `path`.
    pub fn counted_in_process(path: &Path) -> FileStats {
        FileStats { parent: Some(process_file_stats(path)), ..FileStats::default() }
    }

    pub fn record_read(&self, bytes: u64, latency_ns: u64) {
        for stats in self.and_parent() {
            stats.reads.add(bytes, latency_ns);
        }
    }

    pub fn record_write(&self, bytes: u64, latency_ns: u64) {
        for stats in self.and_parent() {
            stats.writes.add(bytes, latency_ns);
        }
    }

    /// These counters and the process-wide ones they add up into.
    fn and_parent(&self) -> impl Iterator<Item = &FileStats> {
        std::iter::successors(Some(self), |stats| stats.parent.as_deref())
    }

    pub fn record_error(&self) {
        for stats in self.and_parent() {
            stats.errors_count.fetch_add(1, Relaxed);
        }
    }

    pub fn snapshot(&self) -> FileStatsSnapshot {
        FileStatsSnapshot {
            reads_count: self.reads.count.load(Relaxed),
            writes_count: self.writes.count.load(Relaxed),
            bytes_read: self.reads.bytes.load(Relaxed),
            bytes_written: self.writes.bytes.load(Relaxed),
            read_stall_ns: self.reads.stall_ns.load(Relaxed),
            write_stall_ns: self.writes.stall_ns.load(Relaxed),
            errors_count: self.errors_count.load(Relaxed),
        }
    }
}

/// Every file's I/O since the process started: one counter set per path, shared by all
/// scans. Grows by one entry per distinct file touched (a database's files), never shrinks.
fn process_registry() -> &'static Mutex<HashMap<PathBuf, Arc<FileStats>>> {
    static REGISTRY: OnceLock<Mutex<HashMap<PathBuf, Arc<FileStats>>>> = OnceLock::new();
    REGISTRY.get_or_init(|| Mutex::new(HashMap::new()))
}

/// The process-wide counters of `path` (created at first use).
pub fn process_file_stats(path: &Path) -> Arc<FileStats> {
    // A panic while holding the lock cannot leave the map inconsistent (one insert).
    let mut map = process_registry().lock().unwrap_or_else(|p| p.into_inner());
    map.entry(path.to_path_buf()).or_default().clone()
}

/// Every file's process-wide counters so far, sorted by path.
pub fn process_file_stats_snapshot() -> Vec<(PathBuf, FileStatsSnapshot)> {
    let map = process_registry().lock().unwrap_or_else(|p| p.into_inner());
    let mut all: Vec<(PathBuf, FileStatsSnapshot)> = map.iter().map(|(p, s)| (p.clone(), s.snapshot())).collect();
    all.sort_by(|a, b| a.0.cmp(&b.0));
    all
}

impl FileStatsSnapshot {
    /// Counters accumulated between `earlier` and `self`.
    pub fn since(&self, earlier: &FileStatsSnapshot) -> FileStatsSnapshot {
        FileStatsSnapshot {
            reads_count: self.reads_count - earlier.reads_count,
            writes_count: self.writes_count - earlier.writes_count,
            bytes_read: self.bytes_read - earlier.bytes_read,
            bytes_written: self.bytes_written - earlier.bytes_written,
            read_stall_ns: self.read_stall_ns - earlier.read_stall_ns,
            write_stall_ns: self.write_stall_ns - earlier.write_stall_ns,
            errors_count: self.errors_count - earlier.errors_count,
        }
    }

    pub fn read_latency_us_avg(&self) -> f64 {
        if self.reads_count == 0 { 0.0 } else { self.read_stall_ns as f64 / self.reads_count as f64 / 1000.0 }
    }

    pub fn write_latency_us_avg(&self) -> f64 {
        if self.writes_count == 0 { 0.0 } else { self.write_stall_ns as f64 / self.writes_count as f64 / 1000.0 }
    }
}

#[cfg(test)]
mod process_tests {
    use super::*;

    #[test]
    fn a_scan_counts_its_io_in_the_process_counters_too() {
        let path = Path::new("/nonexistent/flashscan-test/process-counters.dat");
        let before = process_file_stats(path).snapshot();
        let scan = FileStats::counted_in_process(path);
        scan.record_read(8192, 1_000);
        scan.record_read(4096, 3_000);
        assert_eq!(scan.snapshot().bytes_read, 12288);
        let after = process_file_stats(path).snapshot().since(&before);
        assert_eq!((after.reads_count, after.bytes_read, after.read_stall_ns), (2, 12288, 4_000));
        assert!(process_file_stats_snapshot().iter().any(|(p, s)| p == path && s.bytes_read >= 12288));
    }
}
