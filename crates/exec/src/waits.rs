//! Where the workers' time went, by kind, in thread-seconds: the `sys.dm_os_wait_stats`
//! of a scan. Each worker's time from its start to the end of the scan falls in exactly
//! one kind, so the kinds add up to `threads x elapsed`.

use serde::Serialize;

#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct WaitTimes {
    /// Blocked in the engine for a read, with no chunk ready to decode.
    pub io_s: f64,
    /// Verifying and decoding pages into Arrow arrays.
    pub decode_s: f64,
    /// The query kernel over the decoded batches.
    pub query_s: f64,
    /// Done with its share and waiting for the other workers to finish.
    pub worker_s: f64,
    /// Everything else: queueing reads, the work queue, bookkeeping.
    pub other_s: f64,
}

impl WaitTimes {
    pub fn total_s(&self) -> f64 {
        self.io_s + self.decode_s + self.query_s + self.worker_s + self.other_s
    }

    /// (kind, seconds) pairs in a fixed order, for printers.
    pub fn by_kind(&self) -> [(&'static str, f64); 5] {
        [
            ("waiting for I/O", self.io_s),
            ("decoding", self.decode_s),
            ("query", self.query_s),
            ("waiting for a worker", self.worker_s),
            ("other", self.other_s),
        ]
    }

    pub fn fraction(&self, seconds: f64) -> f64 {
        let total = self.total_s();
        if total > 0.0 { seconds / total } else { 0.0 }
    }
}
