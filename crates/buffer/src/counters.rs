//! The pool's counters (atomics, updated on the hot path with relaxed ordering) and their
//! snapshot, the one struct every printer (stats table, JSON, cost bench) reads.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use serde::{Deserialize, Serialize};

#[derive(Debug, Default)]
pub struct BufferCounters {
    hits_count: AtomicU64,
    misses_count: AtomicU64,
    reads_count: AtomicU64,
    read_bytes: AtomicU64,
    pages_installed_count: AtomicU64,
    evictions_count: AtomicU64,
    verify_failures_count: AtomicU64,
    latch_wait_ns: AtomicU64,
    latch_waits_count: AtomicU64,
    io_wait_ns: AtomicU64,
    io_waits_count: AtomicU64,
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct BufferCountersSnapshot {
    /// Page requests served from a frame already holding the page.
    pub hits_count: u64,
    /// Page requests that had to read the page.
    pub misses_count: u64,
    /// Reads issued to fill frames (a 64 KB read counts once and may fill 8 frames).
    pub reads_count: u64,
    pub read_bytes: u64,
    /// Pages placed in frames (misses plus pages a larger read brought along).
    pub pages_installed_count: u64,
    /// Valid pages dropped to make room.
    pub evictions_count: u64,
    /// Pages whose verification (checksum, id) failed after a read.
    pub verify_failures_count: u64,
    /// Time spent waiting for another thread's latch on a page already in memory.
    pub latch_wait_ns: u64,
    pub latch_waits_count: u64,
    /// Time spent waiting for page reads (our own, or another thread's read of the page).
    pub io_wait_ns: u64,
    pub io_waits_count: u64,
}

impl BufferCounters {
    #[inline]
    pub fn hit(&self) {
        self.hits_count.fetch_add(1, Relaxed);
    }
    #[inline]
    pub fn miss(&self) {
        self.misses_count.fetch_add(1, Relaxed);
    }
    #[inline]
    pub fn read(&self, bytes: u64) {
        self.reads_count.fetch_add(1, Relaxed);
        self.read_bytes.fetch_add(bytes, Relaxed);
    }
    #[inline]
    pub fn installed(&self) {
        self.pages_installed_count.fetch_add(1, Relaxed);
    }
    #[inline]
    pub fn evicted(&self) {
        self.evictions_count.fetch_add(1, Relaxed);
    }
    #[inline]
    pub fn verify_failed(&self) {
        self.verify_failures_count.fetch_add(1, Relaxed);
    }
    #[inline]
    pub fn latch_wait(&self, ns: u64) {
        self.latch_wait_ns.fetch_add(ns, Relaxed);
        self.latch_waits_count.fetch_add(1, Relaxed);
    }
    #[inline]
    pub fn io_wait(&self, ns: u64) {
        self.io_wait_ns.fetch_add(ns, Relaxed);
        self.io_waits_count.fetch_add(1, Relaxed);
    }

    pub fn snapshot(&self) -> BufferCountersSnapshot {
        BufferCountersSnapshot {
            hits_count: self.hits_count.load(Relaxed),
            misses_count: self.misses_count.load(Relaxed),
            reads_count: self.reads_count.load(Relaxed),
            read_bytes: self.read_bytes.load(Relaxed),
            pages_installed_count: self.pages_installed_count.load(Relaxed),
            evictions_count: self.evictions_count.load(Relaxed),
            verify_failures_count: self.verify_failures_count.load(Relaxed),
            latch_wait_ns: self.latch_wait_ns.load(Relaxed),
            latch_waits_count: self.latch_waits_count.load(Relaxed),
            io_wait_ns: self.io_wait_ns.load(Relaxed),
            io_waits_count: self.io_waits_count.load(Relaxed),
        }
    }
}

impl BufferCountersSnapshot {
    /// Counts since `earlier` (saturating: a reset in between reads as zero, not a wrap).
    pub fn since(&self, earlier: &BufferCountersSnapshot) -> BufferCountersSnapshot {
        BufferCountersSnapshot {
            hits_count: self.hits_count.saturating_sub(earlier.hits_count),
            misses_count: self.misses_count.saturating_sub(earlier.misses_count),
            reads_count: self.reads_count.saturating_sub(earlier.reads_count),
            read_bytes: self.read_bytes.saturating_sub(earlier.read_bytes),
            pages_installed_count: self.pages_installed_count.saturating_sub(earlier.pages_installed_count),
            evictions_count: self.evictions_count.saturating_sub(earlier.evictions_count),
            verify_failures_count: self.verify_failures_count.saturating_sub(earlier.verify_failures_count),
            latch_wait_ns: self.latch_wait_ns.saturating_sub(earlier.latch_wait_ns),
            latch_waits_count: self.latch_waits_count.saturating_sub(earlier.latch_waits_count),
            io_wait_ns: self.io_wait_ns.saturating_sub(earlier.io_wait_ns),
            io_waits_count: self.io_waits_count.saturating_sub(earlier.io_waits_count),
        }
    }

    /// Sum of two periods (persisted stats accumulate runs of several processes).
    pub fn plus(&self, other: &BufferCountersSnapshot) -> BufferCountersSnapshot {
        BufferCountersSnapshot {
            hits_count: self.hits_count + other.hits_count,
            misses_count: self.misses_count + other.misses_count,
            reads_count: self.reads_count + other.reads_count,
            read_bytes: self.read_bytes + other.read_bytes,
            pages_installed_count: self.pages_installed_count + other.pages_installed_count,
            evictions_count: self.evictions_count + other.evictions_count,
            verify_failures_count: self.verify_failures_count + other.verify_failures_count,
            latch_wait_ns: self.latch_wait_ns + other.latch_wait_ns,
            latch_waits_count: self.latch_waits_count + other.latch_waits_count,
            io_wait_ns: self.io_wait_ns + other.io_wait_ns,
            io_waits_count: self.io_waits_count + other.io_waits_count,
        }
    }

    /// Hits over requests, 0 when there were none.
    pub fn hit_ratio(&self) -> f64 {
        let requests = self.hits_count + self.misses_count;
        if requests == 0 {
            0.0
        } else {
            self.hits_count as f64 / requests as f64
        }
    }
}
