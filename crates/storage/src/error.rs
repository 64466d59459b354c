//! The errors storage reports. Each variant carries what the user needs to act: the file,
//! the page, the offset, and what to do next.

use std::path::PathBuf;

/// Everything that can go wrong in storage: opening a database, decoding a page, loading.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StorageError {
    #[error("{what} {path}: {source}")]
    Io { what: &'static str, path: PathBuf, #[source] source: std::io::Error },

    #[error("{dir} is not a flashscan database (no catalog): create one with flashscan load")]
    NotADatabase { dir: PathBuf },

    #[error("{dir} is not empty and is not a flashscan database: load into a new or empty directory")]
    ForeignDirectory { dir: PathBuf },

    #[error("catalog {path} is damaged ({reason}); restore it from a backup or reload the database")]
    CatalogCorrupt { path: PathBuf, reason: String },

    #[error("catalog {catalog}: {entry} points at {path:?}, which flashscan refuses ({reason}); the catalog was edited or copied from elsewhere: restore it from a backup or reload the database")]
    PathOutsideDatabase { catalog: PathBuf, entry: String, path: String, reason: String },

    #[error("{path} {reason}")]
    UnsafeFile { path: PathBuf, reason: String },

    #[error("another flashscan command holds the lock {path}; wait for it to finish")]
    Locked { path: PathBuf },

    #[error("{dir} is served by `flashscan serve` ({serve_info}): it owns the database while it runs; connect to it (psql) or stop it first")]
    Served { dir: PathBuf, serve_info: PathBuf },

    #[error("unknown table {name:?}; tables in this database: {known}")]
    UnknownTable { name: String, known: String },

    /// CREATE TABLE / CREATE VIEW under a name a table or a view already has (tables and
    /// views share one namespace, as in PostgreSQL).
    #[error("relation \"{name}\" already exists (a {kind}): pick another name{hint}")]
    RelationExists { name: String, kind: &'static str, hint: &'static str },

    #[error("view \"{name}\" does not exist; views in this database: {known}")]
    UnknownView { name: String, known: String },

    /// DROP TABLE of a view, DROP VIEW of a table.
    #[error("\"{name}\" is not a {wanted}: it is a {actual}; use DROP {actual_upper}")]
    WrongObjectType { name: String, wanted: &'static str, actual: &'static str, actual_upper: &'static str },

    /// DROP of a table or view other views read: PostgreSQL refuses it without CASCADE.
    #[error("cannot drop {kind} {name}: view {views} reads it; DROP VIEW {views} first (DROP … CASCADE is not supported)")]
    DependentViews { kind: &'static str, name: String, views: String },

    /// CREATE OR REPLACE VIEW that drops or renames a column (PostgreSQL's rule: the new
    /// query keeps the old columns, in order, and may add columns after them).
    #[error("cannot change the columns of view {name}: {reason}; DROP VIEW {name} and CREATE it again")]
    ViewColumnsChanged { name: String, reason: String },

    #[error("unknown column {column:?} in table {table:?}; columns: {known}")]
    UnknownColumn { table: String, column: String, known: String },

    #[error("table {name:?} already exists; pass --replace to load it again")]
    TableExists { name: String },

    #[error("checksum mismatch in {file} page {page_id} at offset {offset_bytes} (stored {stored_crc32c:#010x}, computed {computed_crc32c:#010x}): the data file is damaged; reload the table")]
    PageChecksum { file: PathBuf, page_id: u64, offset_bytes: u64, stored_crc32c: u32, computed_crc32c: u32 },

    #[error("corrupt page in {file} page {page_id} at offset {offset_bytes}: {reason}; reload the table")]
    PageCorrupt { file: PathBuf, page_id: u64, offset_bytes: u64, reason: String },

    #[error("data file {file} is truncated: expected {expected_bytes} bytes, found {actual_bytes}; reload the table")]
    FileTruncated { file: PathBuf, expected_bytes: u64, actual_bytes: u64 },

    #[error("column {column:?} has type {data_type}, which flashscan does not store (supported: Int8-64, UInt8-64, Float16-64, Decimal up to 38 digits, Date32/64, Timestamp, Time, Utf8, Binary, Boolean)")]
    UnsupportedType { column: String, data_type: String },

    #[error("column {column:?} is {data_type}, a nested type flashscan does not store: load it as text instead (DuckDB: SELECT * REPLACE (to_json({column}) AS {column})) or leave the column out")]
    NestedType { column: String, data_type: String },

    #[error("a row of table {table:?} needs {row_bytes} bytes, more than an 8 KB page holds ({row_bytes_max} bytes)")]
    RowTooLarge { table: String, row_bytes: usize, row_bytes_max: usize },

    #[error("value out of range in column {column:?}: {reason}")]
    ValueOutOfRange { column: String, reason: String },

    #[error("disk full while writing {path}: free space on that volume or choose other --volumes; the previous catalog is intact and the partial files were removed")]
    DiskFull { path: PathBuf },

    #[error("{0}")]
    InvalidArgument(String),

    #[error("table {table:?} has format {format:?}, which this flashscan does not know: the catalog was written by a newer flashscan; use that version, or drop and reload the table with this one")]
    UnknownTableFormat { table: String, format: String },

    #[error("reading {path}: {source}")]
    Arrow { path: PathBuf, #[source] source: arrow::error::ArrowError },

    #[error("reading CSV {path}: {message}")]
    Csv { path: PathBuf, message: String },

    #[error("reading {path}: {source}")]
    Parquet { path: PathBuf, #[source] source: parquet::errors::ParquetError },

    #[error("{0}; the table's row group is damaged: reload or rebuild the table")]
    ColumnStore(#[from] crate::columnstore::ColumnStoreError),

    #[error("load worker failed: {0}")]
    Worker(String),

    /// A read asked for a file its reader was not opened on: a broken invariant (the CLI
    /// reports it as a bug in flashscan).
    #[error("{path} was read without being opened for the read")]
    FileNotOpened { path: PathBuf },

    /// Reading pages through the buffer pool (the one page path) failed.
    #[error("{0}")]
    PagePath(#[from] flashscan_buffer::BufferError),
}

impl From<flashscan_io::IoError> for StorageError {
    fn from(e: flashscan_io::IoError) -> Self {
        StorageError::PagePath(flashscan_buffer::BufferError::Engine(e))
    }
}

impl StorageError {
    /// True when the cause is what the user gave (a path, a name, a flag, a damaged or full
    /// file) and the user can fix it; the CLI exits 2 for these and 1 for the rest.
    pub fn is_user_input(&self) -> bool {
        // (`is_bug` errors are not the user's either.)
        !matches!(self, StorageError::Io { .. } | StorageError::Worker(_) | StorageError::PagePath(_) | StorageError::FileNotOpened { .. })
    }

    /// True for a broken invariant of flashscan's own, not the user's input nor the machine.
    pub fn is_bug(&self) -> bool {
        matches!(self, StorageError::FileNotOpened { .. })
    }

    pub(crate) fn io(what: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> StorageError {
        let path = path.into();
        if source.raw_os_error() == Some(libc::ENOSPC) {
            return StorageError::DiskFull { path };
        }
        StorageError::Io { what, path, source }
    }
}
