//! Errors of index builds and lookups, each with what the user needs to act on it.

use std::path::PathBuf;

use flashscan_buffer::BufferError;
use flashscan_io::IoError;
use flashscan_storage::StorageError;

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum IndexError {
    #[error(transparent)]
    Storage(#[from] StorageError),
    #[error(transparent)]
    Buffer(#[from] BufferError),
    #[error(transparent)]
    Io(#[from] IoError),
    #[error("{what} {path}: {source}")]
    File { what: &'static str, path: PathBuf, #[source] source: std::io::Error },
    #[error("checksum mismatch in index file {path} node {node} (stored {stored_crc32c:#010x}, computed {computed_crc32c:#010x}): the index is damaged; drop and rebuild it with flashscan index create")]
    NodeChecksum { path: PathBuf, node: u64, stored_crc32c: u32, computed_crc32c: u32 },
    #[error("corrupt node {node} in index file {path}: {reason}; drop and rebuild the index")]
    NodeCorrupt { path: PathBuf, node: u64, reason: String },
    #[error("index catalog {path} is damaged ({reason}); delete it and recreate the indexes")]
    CatalogCorrupt { path: PathBuf, reason: String },
    #[error("unknown index {name:?} on table {table:?}; indexes on it: {known}")]
    UnknownIndex { table: String, name: String, known: String },
    #[error("index {name:?} already exists on table {table:?}")]
    IndexExists { table: String, name: String },
    #[error("column {column:?} of type {column_type} cannot be an index key: keys are integer, date, decimal or boolean columns")]
    UnsupportedKeyColumn { column: String, column_type: String },
    #[error("bad key {text:?}: {reason}")]
    BadKey { text: String, reason: String },
    #[error("table {table:?}: {reason}")]
    UnsupportedLayout { table: String, reason: String },
    #[error("{0}")]
    InvalidArgument(String),
}

impl IndexError {
    /// True when the user can fix the cause (a name, a flag, a damaged file); the CLI
    /// exits 2 for these and 1 for the rest.
    pub fn is_user_input(&self) -> bool {
        match self {
            IndexError::Storage(e) => e.is_user_input(),
            IndexError::Buffer(BufferError::BudgetOutOfRange { .. }) => true,
            IndexError::Buffer(_) | IndexError::Io(_) | IndexError::File { .. } => false,
            _ => true,
        }
    }

    pub(crate) fn file(what: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> IndexError {
        IndexError::File { what, path: path.into(), source }
    }
}
