//! Errors of the log, grouped by what the user must do about them.

use std::path::PathBuf;

use crate::lsn::Lsn;

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WalError {
    #[error("{path}: {source}")]
    File { path: PathBuf, source: std::io::Error },
    #[error(transparent)]
    Io(#[from] flashscan_io::IoError),
    /// A durable flush or a log write failed earlier: the log is stopped for good (the
    /// kernel may have dropped the written pages, so a retry that succeeds proves nothing).
    #[error("the write-ahead log stopped after an I/O error and takes no more commits ({cause}); restart the database to recover from the log")]
    Stopped { cause: String },
    #[error("{dir} has no write-ahead log (no wal.control): check --wal-dir, or create the database with `flashscan init`")]
    MissingControl { dir: PathBuf },
    #[error("{dir} already holds a write-ahead log (wal.control exists): it belongs to database {label:?}; choose another --wal-dir")]
    AlreadyExists { dir: PathBuf, label: String },
    #[error("{dir} holds the write-ahead log of another database ({found_label:?}, id {found_id:032x}), not of {expected_label:?} (id {expected_id:032x}): pass the --wal-dir of this database")]
    Foreign { dir: PathBuf, found_label: String, found_id: u128, expected_label: String, expected_id: u128 },
    #[error("{path}: the write-ahead log is in use by another process (lock held); stop it first")]
    Locked { path: PathBuf },
    /// Damage that is not a torn tail: refusing is the only answer that loses nothing.
    #[error("{path} at offset {offset_bytes}: the write-ahead log is corrupt: {what}. Nothing was replayed; restore the database (or this log) from a backup — do not delete log files, they may hold committed rows")]
    Corrupt { path: PathBuf, offset_bytes: u64, what: String },
    #[error("record body of {bytes} bytes exceeds the limit of {limit} bytes")]
    RecordTooLarge { bytes: usize, limit: usize },
    #[error("invalid configuration: {0}")]
    Config(String),
    #[error("redo: record at LSN {lsn} has kind {kind}, which this version cannot replay; use a newer flashscan")]
    UnsupportedRecord { lsn: Lsn, kind: u8 },
}

pub(crate) fn file_err(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> WalError {
    let path = path.into();
    move |source| WalError::File { path, source }
}
