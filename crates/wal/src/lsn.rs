//! Log sequence numbers: a byte position in the log.

use std::fmt;

/// A byte position in the write-ahead log, counted from the first byte of segment 0 and
/// including block headers, segment header blocks and padding: segment `lsn / segment_size`,
/// file offset `lsn % segment_size`. A record's LSN is the position of its first byte; a
/// page that a record changed may reach disk once the log is durable up to the record's
/// `end` (the WAL rule).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Lsn(pub u64);

impl Lsn {
    pub const ZERO: Lsn = Lsn(0);

    pub fn get(self) -> u64 {
        self.0
    }

    pub fn segment_no(self, segment_size_bytes: u64) -> u64 {
        self.0 / segment_size_bytes
    }

    pub fn segment_offset_bytes(self, segment_size_bytes: u64) -> u64 {
        self.0 % segment_size_bytes
    }

    pub fn advance(self, bytes: u64) -> Lsn {
        Lsn(self.0 + bytes)
    }
}

impl fmt::Display for Lsn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// A transaction id: the log's epoch (bumped every time the log is opened) in the high 24
/// bits and a counter in the low 40, so an id is never reused across restarts and redo
/// cannot mistake an old unfinished transaction for a new committed one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TxnId(pub u64);

impl fmt::Display for TxnId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}
