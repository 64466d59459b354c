//! What the buffer pool reports. Page-format errors (checksums) are the caller's own
//! error type: the pool passes them through from the verification the caller supplies.

use flashscan_io::IoError;

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BufferError {
    #[error("buffer pool of {bytes} bytes is out of range: give between {min_bytes} and {max_bytes} bytes (e.g. --buffer-pool 1GB)")]
    BudgetOutOfRange { bytes: u64, min_bytes: u64, max_bytes: u64 },
    #[error("cannot allocate {bytes} bytes of buffer pool frames: lower --buffer-pool")]
    AllocationFailed { bytes: u64 },
    #[error("every one of the {frame_count} buffer pool frames is pinned: raise --buffer-pool or lower the prefetch depth")]
    AllPinned { frame_count: u32 },
    #[error("scan ring of {frames} frames is out of range ({min}..={max} for this pool)")]
    RingSize { frames: u32, min: u32, max: u32 },
    #[error("cannot clear the buffer pool: {pinned_count} pages are still pinned")]
    PinnedOnClear { pinned_count: u32 },
    #[error("reading page {page} of file {file_index}: {source}")]
    Io { file_index: u32, page: u64, #[source] source: IoError },
    #[error("{path}: {what}")]
    File { path: std::path::PathBuf, what: String },
    #[error("page {page} of file {file_index} carries LSN {lsn} but no write-ahead log is attached to the buffer pool: attach one (set_wal_rule) before writing logged pages")]
    NoLog { file_index: u32, page: u64, lsn: u64 },
    #[error("the log could not be flushed to LSN {lsn} before writing pages (the WAL rule): {reason}")]
    LogFlush { lsn: u64, reason: String },
    #[error("writing page {page} of {path}: {source}")]
    Write { path: std::path::PathBuf, page: u64, #[source] source: IoError },
    #[error("I/O: {0}")]
    Engine(#[from] IoError),
    #[error("page {page} of file {file_index}: {what}")]
    ShortRead { file_index: u32, page: u64, what: String },
}
