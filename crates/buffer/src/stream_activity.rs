//! What the process's scans are reading right now: streams running, reads in flight,
//! bytes read so far. Two readers: the checkpoint, which paces its writes while a scan is
//! reading (a concurrent scan must keep its speed, issue 11), and measurements that want
//! a scan's bytes over a time window (`bench checkpoint`).
//!
//! Process-wide counters, not per pool: a scan is I/O against the same device whichever
//! pool serves it. Three atomic adds per extent (of up to 8 MiB), nothing per page.

use std::sync::atomic::{AtomicU64, Ordering};

static STREAMS_ACTIVE: AtomicU64 = AtomicU64::new(0);
static READS_IN_FLIGHT: AtomicU64 = AtomicU64::new(0);
static READ_BYTES_TOTAL: AtomicU64 = AtomicU64::new(0);

/// A snapshot of the process's streaming reads.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StreamActivity {
    /// Scan streams inside `ScanStream::run` now.
    pub streams_active: u64,
    /// Their reads queued or in the device now.
    pub reads_in_flight: u64,
    /// Bytes every stream of the process has read since it started.
    pub read_bytes_total: u64,
}

pub fn stream_activity() -> StreamActivity {
    StreamActivity {
        streams_active: STREAMS_ACTIVE.load(Ordering::Acquire),
        reads_in_flight: READS_IN_FLIGHT.load(Ordering::Acquire),
        read_bytes_total: READ_BYTES_TOTAL.load(Ordering::Acquire),
    }
}

/// True while any scan stream of the process is reading.
pub fn scans_active() -> bool {
    STREAMS_ACTIVE.load(Ordering::Acquire) > 0
}

/// Held by a stream while it runs; gives back whatever it still counts when dropped (a
/// run that ends in an error drains its reads without reporting each).
pub(crate) struct ActiveStream {
    reads_in_flight: u64,
}

impl ActiveStream {
    pub(crate) fn start() -> ActiveStream {
        STREAMS_ACTIVE.fetch_add(1, Ordering::AcqRel);
        ActiveStream { reads_in_flight: 0 }
    }

    pub(crate) fn read_queued(&mut self) {
        self.reads_in_flight += 1;
        READS_IN_FLIGHT.fetch_add(1, Ordering::AcqRel);
    }

    pub(crate) fn read_done(&mut self, bytes: u64) {
        debug_assert!(self.reads_in_flight > 0, "a read completed that was not queued");
        self.reads_in_flight = self.reads_in_flight.saturating_sub(1);
        READS_IN_FLIGHT.fetch_sub(1, Ordering::AcqRel);
        READ_BYTES_TOTAL.fetch_add(bytes, Ordering::AcqRel);
    }
}

impl Drop for ActiveStream {
    fn drop(&mut self) {
        READS_IN_FLIGHT.fetch_sub(self.reads_in_flight, Ordering::AcqRel);
        STREAMS_ACTIVE.fetch_sub(1, Ordering::AcqRel);
    }
}
