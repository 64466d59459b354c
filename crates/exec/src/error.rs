//! Errors of scans and queries, each naming what the user needs to act on it.

use std::path::PathBuf;

use flashscan_io::IoError;

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ExecError {
    /// A read failed, came back short, or an engine could not start.
    #[error(transparent)]
    Io(#[from] IoError),
    /// A page did not decode: bad checksum, wrong page id, truncated or foreign data.
    #[error("{path} at offset {offset_bytes}: {what}")]
    Corrupt { path: PathBuf, offset_bytes: u64, what: String },
    /// The table cannot answer the query (a column is missing or of another type).
    #[error("query {query} cannot run on table {table}: {what}")]
    QueryColumns { query: String, table: String, what: String },
    #[error("unknown query {0:?}: choose one of count, count11, sum4, needle, q1")]
    UnknownQuery(String),
    #[error("invalid scan option: {0}")]
    InvalidOption(String),
    /// A table of another format given where a column store is needed.
    #[error("table {table} is stored as {format}, not as a column store")]
    NotColumnStore { table: String, format: String },
    /// An invariant of the scan broke (a plan and its sources disagree): a bug in
    /// flashscan, not in the input, and said so.
    #[error("internal error (a bug in flashscan): {0}")]
    Internal(String),
    /// Errors from the storage layer: catalog, unknown table, page checksum or layout.
    #[error(transparent)]
    StorageLayer(#[from] flashscan_storage::StorageError),
    /// A sink asked the scan to stop early (e.g. a LIMIT was satisfied): the scan takes it
    /// as control flow and returns successfully; it reaches a caller only by a bug.
    #[error("scan stopped by its consumer")]
    Stopped,
    /// A read plan named a file that is not among the scan's files: a bug in the source
    /// that built the plan (never picks another file instead).
    #[error("internal error: {path} is not among the files of the scan's read plan")]
    FileNotInPlan { path: PathBuf },
    /// A query's filter, evaluated inside the scan (late materialization), failed on the
    /// rows or gave something other than booleans.
    #[error("scan filter {predicate}: {what}")]
    Filter { predicate: String, what: String },
    #[error("arrow: {0}")]
    Arrow(#[from] arrow::error::ArrowError),
    #[error("a scan worker panicked: {0}")]
    WorkerPanic(String),
    /// The buffer pool (the page path) refused: a file it cannot resolve, a pool error.
    #[error(transparent)]
    Buffer(flashscan_buffer::BufferError),
}

impl From<flashscan_buffer::BufferError> for ExecError {
    fn from(e: flashscan_buffer::BufferError) -> Self {
        match e {
            // I/O through the pool reads as I/O, with the same messages as before.
            flashscan_buffer::BufferError::Engine(io) => ExecError::Io(io),
            other => ExecError::Buffer(other),
        }
    }
}

impl ExecError {
    /// True when the error comes from what the user gave (a file, a table, a flag) rather
    /// than from a failure while running; the CLI exits 2 for these.
    pub fn is_bad_input(&self) -> bool {
        match self {
            ExecError::Io(IoError::File { .. }) | ExecError::Io(IoError::Open { .. }) => true,
            ExecError::Io(IoError::DirectUnsupported { .. }) => true,
            ExecError::Io(_) => false,
            ExecError::Corrupt { .. }
            | ExecError::QueryColumns { .. }
            | ExecError::UnknownQuery(_)
            | ExecError::InvalidOption(_)
            | ExecError::NotColumnStore { .. }
            | ExecError::Filter { .. } => true,
            ExecError::StorageLayer(e) => e.is_user_input(),
            ExecError::Buffer(flashscan_buffer::BufferError::File { .. }) => true,
            ExecError::Arrow(_) | ExecError::WorkerPanic(_) | ExecError::Stopped | ExecError::FileNotInPlan { .. } | ExecError::Internal(_) | ExecError::Buffer(_) => false,
        }
    }
}
