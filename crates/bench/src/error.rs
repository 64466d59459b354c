//! Errors of the benchmark drivers: the engine's own errors, unchanged (`#[from]`), plus
//! what only a benchmark can find (a flag out of range, two runs that disagree).

use std::path::PathBuf;

use flashscan_buffer::BufferError;
use flashscan_exec::ExecError;
use flashscan_index::IndexError;
use flashscan_io::IoError;
use flashscan_storage::StorageError;
use flashscan_write::WriteError;

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BenchError {
    #[error(transparent)]
    Exec(#[from] ExecError),
    #[error(transparent)]
    Index(#[from] IndexError),
    #[error(transparent)]
    Storage(#[from] StorageError),
    #[error(transparent)]
    Buffer(#[from] BufferError),
    #[error(transparent)]
    Io(#[from] IoError),
    /// The write path under `bench inserts` and `bench checkpoint`.
    #[error(transparent)]
    WritePath(#[from] WriteError),
    #[error("building a batch of rows: {0}")]
    Arrow(#[from] arrow::error::ArrowError),
    /// A system file the bench needs could not be written (`what`: which, and what to do).
    #[error("{what}: {source}")]
    System { what: &'static str, #[source] source: std::io::Error },
    /// A thread of the bench panicked: a bug in flashscan, not the user's input.
    #[error("{0} panicked")]
    ThreadPanicked(&'static str),
    /// A benchmark option out of range or unknown.
    #[error("{0}")]
    InvalidOption(String),
    /// Two runs (rounds or formats) of one query gave different answers: a benchmark of
    /// wrong answers is worthless, so the bench stops.
    #[error("{0}")]
    AnswersDiffer(String),
    /// A page left the buffer pool during a measurement that needs it resident.
    #[error("{0}")]
    NotResident(String),
    #[error("writing {path}: {source}")]
    Write { path: PathBuf, source: std::io::Error },
    #[error("writing chart {path}: {what}")]
    Chart { path: PathBuf, what: String },
}

impl BenchError {
    /// True when the user can fix it (a flag, a table, a path); the CLI exits 2 for these.
    pub fn is_user_input(&self) -> bool {
        match self {
            BenchError::Exec(e) => e.is_bad_input(),
            BenchError::Index(e) => e.is_user_input(),
            BenchError::Storage(e) => e.is_user_input(),
            BenchError::WritePath(e) => e.is_user_input(),
            BenchError::InvalidOption(_) | BenchError::Write { .. } | BenchError::Chart { .. } => true,
            BenchError::Buffer(_)
            | BenchError::Io(_)
            | BenchError::AnswersDiffer(_)
            | BenchError::NotResident(_)
            | BenchError::Arrow(_)
            | BenchError::System { .. }
            | BenchError::ThreadPanicked(_) => false,
        }
    }
}
