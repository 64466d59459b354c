//! Errors of the write path: one line each, saying what to do.

use std::path::PathBuf;

use flashscan_io::IoError;
use flashscan_storage::StorageError;
use flashscan_wal::WalError;

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WriteError {
    #[error(transparent)]
    Storage(#[from] StorageError),
    #[error(transparent)]
    Wal(#[from] WalError),
    #[error(transparent)]
    Io(#[from] IoError),
    /// The device holding `path` is full. Nothing half-written stays behind; committed rows
    /// stay in the log (and readable) until a later checkpoint succeeds.
    #[error("no space left on the device holding {path} ({what} needed {needed_mb:.1} MB more there): free space, then run it again; committed rows stay in the write-ahead log and readable meanwhile", needed_mb = *needed_bytes as f64 / 1e6)]
    NoSpace { path: PathBuf, needed_bytes: u64, what: String },
    /// INSERT would hold more committed rows in memory than the bound allows.
    #[error("INSERT into {table}: {statement_mb:.1} MB of new rows on top of {delta_mb:.1} MB of committed rows not yet checkpointed exceeds the in-memory bound of {bound_mb:.1} MB (delta_bytes_max){cause}: insert fewer rows per statement, or free space for the checkpoint", statement_mb = *statement_bytes as f64 / 1e6, delta_mb = *delta_bytes as f64 / 1e6, bound_mb = *bound_bytes as f64 / 1e6)]
    DeltaFull { table: String, statement_bytes: u64, delta_bytes: u64, bound_bytes: u64, cause: String },
    /// Something the user gave (a name, a value, an option) is wrong.
    #[error("{0}")]
    InvalidArgument(String),
    #[error("{0}")]
    NotSupported(String),
    #[error("database {db} is in use by another writer ({holder}; lock {lock}): wait for it to finish, or stop it")]
    Locked { db: PathBuf, holder: String, lock: PathBuf },
    #[error("{path}: {source}")]
    File { path: PathBuf, source: std::io::Error },
    /// Two transactions each wait for a table the other has changed (SQLSTATE 40P01).
    #[error("deadlock detected: this transaction waited to change table {table}, which another transaction changed while it waits for a table this one changed; this transaction was stopped: ROLLBACK and run it again")]
    Deadlock { table: String },
    /// Waited longer than `LOCK_WAIT_MAX` for another transaction's changes to a table.
    #[error("waited {waited_s} s for another transaction that changes table {table} to end: it is still open; COMMIT or ROLLBACK it, then run this again")]
    LockTimeout { table: String, waited_s: u64 },
    /// The rows a transaction changes were changed by another since it read them (SQLSTATE 40001).
    #[error("could not serialize access to table {table}: {why}; ROLLBACK and run the transaction again")]
    SerializationFailure { table: String, why: String },
    /// A row an UPDATE or DELETE read from its snapshot was changed by a commit before the
    /// statement locked it: the statement reads again from a new snapshot (READ COMMITTED's
    /// re-check, table_lock.rs). Reaches a user only when that repeats past
    /// `STATEMENT_RESTARTS_MAX` (then as SQLSTATE 40001).
    #[error("could not change rows of table {table}: other transactions kept changing them while this statement read them; run it again")]
    RowsChanged { table: String },
    /// A transaction that asked not to wait (`Transaction::set_no_wait`) met a lock another
    /// holds; nothing was staged by the call: the caller makes it again where it may wait.
    #[error("table {table}: another transaction holds a lock this one needs (asked not to wait); run the statement where it may wait")]
    WouldWait { table: String },
    /// A row would repeat the key of a unique index (SQLSTATE 23505); nothing of the
    /// statement was written.
    #[error("duplicate key value violates unique constraint \"{index}\" of table {table}: Key {key} already exists; nothing of the statement was written")]
    UniqueViolation { index: String, table: String, key: String },
    /// CREATE UNIQUE INDEX (or ADD PRIMARY KEY / UNIQUE) over rows that repeat a key (23505).
    #[error("could not create unique index \"{index}\" on table {table}: Key {key} is duplicated; remove the duplicates (DELETE) first, or create the index without UNIQUE")]
    DuplicateKeys { index: String, table: String, key: String },
    /// SET TRANSACTION ISOLATION LEVEL after the transaction's first statement (25001).
    #[error("SET TRANSACTION ISOLATION LEVEL must be called before any query of the transaction: set it right after BEGIN (or BEGIN ISOLATION LEVEL …)")]
    IsolationAfterQuery,
    /// ROLLBACK TO / RELEASE of a savepoint the transaction does not have (SQLSTATE 3B001).
    #[error("sequence \"{name}\" does not exist; sequences in this database: {known}")]
    UnknownSequence { name: String, known: String },
    #[error("there is no unique or exclusion constraint matching the ON CONFLICT specification ({columns}) on table {table}: name the columns of its PRIMARY KEY or a UNIQUE constraint")]
    NoConflictTarget { table: String, columns: String },
    /// `currval('s')` before this session's first `nextval('s')`, or `lastval()` before its
    /// first `nextval` of any sequence (SQLSTATE 55000, as PostgreSQL).
    #[error("{what} is not yet defined in this session: call nextval first ({hint})")]
    SequenceValueUndefined { what: String, hint: String },
    #[error("cannot drop sequence {name} because column default of table {table} requires it: DROP TABLE {table} drops it")]
    SequenceInUse { name: String, table: String },
    #[error("cannot insert a non-DEFAULT value into column \"{column}\": it is an identity column defined as GENERATED ALWAYS; leave it out of the INSERT (or write DEFAULT)")]
    GeneratedAlways { column: String },
    /// ALTER TABLE … ADD COLUMN or RENAME COLUMN to a name the table has (SQLSTATE 42701).
    #[error("column \"{column}\" of relation \"{table}\" already exists: choose another name (or ADD COLUMN IF NOT EXISTS)")]
    DuplicateColumn { table: String, column: String },
    #[error("savepoint \"{name}\" does not exist: take it first (SAVEPOINT {name})")]
    NoSuchSavepoint { name: String },
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
            WriteError::InvalidArgument(_) | WriteError::NotSupported(_) | WriteError::DuplicateColumn { .. } | WriteError::Locked { .. } | WriteError::NoSuchSavepoint { .. } | WriteError::UnknownSequence { .. } | WriteError::SequenceValueUndefined { .. } | WriteError::SequenceInUse { .. } | WriteError::GeneratedAlways { .. } | WriteError::NoConflictTarget { .. } | WriteError::IsolationAfterQuery => true,
            WriteError::DeltaFull { .. } => true,
            WriteError::Deadlock { .. } | WriteError::LockTimeout { .. } | WriteError::SerializationFailure { .. } | WriteError::RowsChanged { .. } | WriteError::WouldWait { .. } => false,
            WriteError::UniqueViolation { .. } | WriteError::DuplicateKeys { .. } => true,
            WriteError::File { .. } | WriteError::Corrupt { .. } | WriteError::Io(_) | WriteError::NoSpace { .. } => false,
        }
    }
}

pub(crate) fn file_err(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> WriteError {
    let path = path.into();
    move |source| WriteError::File { path, source }
}
