//! What one lookup reports: counts, times and the buffer pool's counters over the lookup.
//! Printers (CLI table, JSON, cost bench) read this struct; they compute nothing.

use flashscan_buffer::BufferCountersSnapshot;
use serde::Serialize;

#[derive(Debug, Clone, Default, Serialize)]
pub struct LookupStats {
    /// "sync" (one read at a time) or "prefetch" (a window of asynchronous reads).
    pub mode: String,
    pub engine: String,
    pub keys_count: u64,
    pub rows_count: u64,
    /// Index entries of rows a DELETE removed: dropped before any read, not in `rows_count`.
    pub deleted_rows_skipped: u64,
    pub heap_pages_count: u64,
    /// Reads of heap pages or extents this lookup issued.
    pub heap_reads_count: u64,
    /// Every read the lookup caused, index nodes included (from the pool's counters).
    pub reads_count: u64,
    pub read_bytes: u64,
    pub io_size_bytes: u32,
    pub depth: u32,
    pub elapsed_ns: u64,
    /// CPU time of the process over the lookup (user + system, I/O threads included).
    pub cpu_ns: u64,
    /// Time spent waiting for reads to complete.
    pub io_wait_ns: u64,
    pub buffer: BufferCountersSnapshot,
}

impl LookupStats {
    fn per_second(count: u64, ns: u64) -> f64 {
        if ns == 0 {
            0.0
        } else {
            count as f64 * 1e9 / ns as f64
        }
    }

    fn us_per(ns: u64, count: u64) -> f64 {
        if count == 0 {
            0.0
        } else {
            ns as f64 / 1e3 / count as f64
        }
    }

    pub fn rows_per_s(&self) -> f64 {
        Self::per_second(self.rows_count, self.elapsed_ns)
    }

    pub fn reads_per_s(&self) -> f64 {
        Self::per_second(self.reads_count, self.elapsed_ns)
    }

    pub fn cpu_us_per_row(&self) -> f64 {
        Self::us_per(self.cpu_ns, self.rows_count)
    }

    pub fn cpu_us_per_read(&self) -> f64 {
        Self::us_per(self.cpu_ns, self.reads_count)
    }

    /// Adds another run (the cost bench repeats queries and reports the total).
    pub fn accumulate(&mut self, other: &LookupStats) {
        if self.mode.is_empty() {
            self.mode = other.mode.clone();
            self.engine = other.engine.clone();
            self.io_size_bytes = other.io_size_bytes;
            self.depth = other.depth;
        }
        self.keys_count += other.keys_count;
        self.rows_count += other.rows_count;
        self.deleted_rows_skipped += other.deleted_rows_skipped;
        self.heap_pages_count += other.heap_pages_count;
        self.heap_reads_count += other.heap_reads_count;
        self.reads_count += other.reads_count;
        self.read_bytes += other.read_bytes;
        self.elapsed_ns += other.elapsed_ns;
        self.cpu_ns += other.cpu_ns;
        self.io_wait_ns += other.io_wait_ns;
        self.buffer = self.buffer.plus(&other.buffer);
    }
}
