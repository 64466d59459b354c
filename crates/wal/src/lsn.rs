//! Log sequence numbers: a byte position in the log. The type is the buffer pool's
//! (`flashscan_buffer::Lsn`), the one LSN the log, the pages and the pool's WAL rule share;
//! where an LSN falls in the log's segment files is the log's own business
//! ([`SegmentPosition`]).

use std::fmt;

pub use flashscan_buffer::Lsn;

/// Where an LSN lies in the log's files: counted from the first byte of segment 0 and
/// including block headers, segment header blocks and padding, an LSN is in segment
/// `lsn / segment_size` at file offset `lsn % segment_size`.
pub trait SegmentPosition {
    fn segment_no(self, segment_size_bytes: u64) -> u64;
    fn segment_offset_bytes(self, segment_size_bytes: u64) -> u64;
}

impl SegmentPosition for Lsn {
    fn segment_no(self, segment_size_bytes: u64) -> u64 {
        self.0 / segment_size_bytes
    }

    fn segment_offset_bytes(self, segment_size_bytes: u64) -> u64 {
        self.0 % segment_size_bytes
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
