//! Errors of the write path: one line each, saying what to do.

use std::path::PathBuf;

use flashscan_storage::StorageError;
use flashscan_wal::WalError;

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WriteError {
    #[error(transparent)]
    Storage(#[from] StorageError),
    #[error(transparent)]
    Wal(#[from] WalError),
    /// Something the user gave (a name, a value, an option) is wrong.
    #[error("{0}")]
    InvalidArgument(String),
    #[error("{0}")]
    NotSupported(String),
    #[error("database {db} is in use by another writer ({holder}; lock {lock}): wait for it to finish, or stop it")]
    Locked { db: PathBuf, holder: String, lock: PathBuf },
    #[error("table {table} has {rows} committed rows that are still only in the write-ahead log, which {what} does not read: run `flashscan checkpoint {db}` first")]
    Unflushed { table: String, rows: u64, what: String, db: PathBuf },
    #[error("{path}: {source}")]
    File { path: PathBuf, source: std::io::Error },
    /// The log and the catalog disagree in a way no crash explains.
    #[error("the write-ahead log does not match the catalog at LSN {lsn}: {what}; nothing was replayed")]
    Corrupt { lsn: u64, what: String },
}

impl WriteError {
    /// True when the user can fix it (exit code 2), false for failures while running.
    pub fn is_user_input(&self) -> bool {
        match self {
            WriteError::Storage(e) => e.is_user_input(),
            WriteError::Wal(e) => matches!(
                e,
                WalError::MissingControl { .. } | WalError::AlreadyExists { .. } | WalError::Foreign { .. } | WalError::Locked { .. } | WalError::Config(_)
            ),
            WriteError::InvalidArgument(_) | WriteError::NotSupported(_) | WriteError::Locked { .. } | WriteError::Unflushed { .. } => true,
            WriteError::File { .. } | WriteError::Corrupt { .. } => false,
        }
    }
}

pub(crate) fn file_err(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> WriteError {
    let path = path.into();
    move |source| WriteError::File { path, source }
}
