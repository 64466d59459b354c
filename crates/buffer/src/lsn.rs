//! Log sequence numbers and the WAL rule's hook. The pool knows nothing of the log's
//! format: it only needs to ask, before a dirty page leaves memory, that the log be
//! durable up to the page's LSN (a page reaches disk only after the log that covers it).
//! The write-ahead log (crates/wal) implements [`WalRule`]; tests implement it too.

use serde::{Deserialize, Serialize};

/// A log sequence number: a byte position in the write-ahead log (a record's LSN is the
/// position of its first byte, its `end` the position just past it). 0 means "not logged"
/// (pages a bulk load wrote before any log existed). The one LSN type: the log (crates/wal)
/// hands it out, pages carry it in their header (crates/storage `heap::header::seal`), and
/// the pool's WAL rule compares them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Lsn(pub u64);

impl Lsn {
    pub const ZERO: Lsn = Lsn(0);

    pub fn get(self) -> u64 {
        self.0
    }

    /// The position `bytes` further on.
    pub fn advance(self, bytes: u64) -> Lsn {
        Lsn(self.0 + bytes)
    }
}

impl std::fmt::Display for Lsn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// The WAL rule's hook: called by the pool before it writes dirty pages, with the highest
/// page LSN among them. It returns once the log is durable at least that far (flushing it
/// if needed), or an error, in which case no page is written.
pub trait WalRule: Send + Sync {
    fn flush_log_to(&self, lsn: Lsn) -> Result<(), String>;
}
