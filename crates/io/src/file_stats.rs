//! Per-file I/O counters, shared by every engine that touches the file: the
//! `sys.dm_io_virtual_file_stats` of flashscan. Stall time is the sum of the latencies of
//! the file's I/Os (time from queueing to completion), as SQL Server reports it.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

#[derive(Debug, Default)]
pub struct FileStats {
    reads_count: AtomicU64,
    writes_count: AtomicU64,
    bytes_read: AtomicU64,
    bytes_written: AtomicU64,
    read_stall_ns: AtomicU64,
    write_stall_ns: AtomicU64,
    errors_count: AtomicU64,
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
    pub fn record_read(&self, bytes: u64, latency_ns: u64) {
        self.reads_count.fetch_add(1, Relaxed);
        self.bytes_read.fetch_add(bytes, Relaxed);
        self.read_stall_ns.fetch_add(latency_ns, Relaxed);
    }

    pub fn record_write(&self, bytes: u64, latency_ns: u64) {
        self.writes_count.fetch_add(1, Relaxed);
        self.bytes_written.fetch_add(bytes, Relaxed);
        self.write_stall_ns.fetch_add(latency_ns, Relaxed);
    }

    pub fn record_error(&self) {
        self.errors_count.fetch_add(1, Relaxed);
    }

    pub fn snapshot(&self) -> FileStatsSnapshot {
        FileStatsSnapshot {
            reads_count: self.reads_count.load(Relaxed),
            writes_count: self.writes_count.load(Relaxed),
            bytes_read: self.bytes_read.load(Relaxed),
            bytes_written: self.bytes_written.load(Relaxed),
            read_stall_ns: self.read_stall_ns.load(Relaxed),
            write_stall_ns: self.write_stall_ns.load(Relaxed),
            errors_count: self.errors_count.load(Relaxed),
        }
    }
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
