//! Errors of the column store. Every error that comes from bytes names where they came
//! from (file, byte offset, column), so a user can find the bad row group with `dd`.

use std::fmt;
use std::path::PathBuf;

use arrow::datatypes::DataType;

use crate::compression::CodecError;

/// Where a segment or row group sits: file, absolute byte offset, and column if known.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    pub file: PathBuf,
    pub offset_bytes: u64,
    pub column: Option<ColumnRef>,
}

/// A column by index and, when the directory could be read, by name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ColumnRef {
    pub index: usize,
    pub name: String,
}

impl Location {
    /// For bytes that did not come from a file (`decode_segment` on a buffer).
    pub fn in_memory() -> Self {
        Location { file: PathBuf::from("<memory>"), offset_bytes: 0, column: None }
    }
}

impl fmt::Display for Location {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "{} at byte {}", self.file.display(), self.offset_bytes)?;
        if let Some(column) = &self.column {
            if column.name.is_empty() {
                write!(formatter, ", column {}", column.index)?;
            } else {
                write!(formatter, ", column {} ({})", column.index, column.name)?;
            }
        }
        Ok(())
    }
}

/// Everything that can go wrong writing or reading column store bytes.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ColumnStoreError {
    // `found` is not printed: an error message never quotes bytes of a file that may not be ours.
    #[error("{location}: bad magic in {what}: these bytes are not flashscan column store data")]
    BadMagic { location: Location, what: &'static str, found: Vec<u8> },

    #[error("{location}: unsupported {what} format version {version} (this build reads {supported})")]
    UnsupportedVersion { location: Location, what: &'static str, version: u16, supported: u16 },

    #[error("{location}: checksum mismatch in {what}: stored {stored_crc32c:#010x}, computed {computed_crc32c:#010x}")]
    ChecksumMismatch { location: Location, what: &'static str, stored_crc32c: u32, computed_crc32c: u32 },

    #[error("{location}: truncated {what}: needs {needed_bytes} bytes, {available_bytes} available")]
    Truncated { location: Location, what: &'static str, needed_bytes: u64, available_bytes: u64 },

    #[error("{location}: unknown codec id {codec_id}")]
    UnknownCodec { location: Location, codec_id: u8 },

    #[error("{location}: corrupt {what}: {detail}")]
    Corrupt { location: Location, what: &'static str, detail: String },

    #[error("{location}: codec error: {source}")]
    Codec { location: Location, source: CodecError },

    #[error("column {column} ({name}): type {data_type} is not supported by the column store{detail}")]
    UnsupportedType { column: usize, name: String, data_type: DataType, detail: &'static str },

    #[error("{location}: segment holds {stored} but the caller expects {expected}")]
    TypeMismatch { location: Location, stored: String, expected: DataType },

    #[error("row group of {row_count} rows exceeds {what} of {limit}")]
    TooLarge { row_count: usize, what: &'static str, limit: usize },

    #[error("projection names column {column}, the row group has {column_count}")]
    ColumnOutOfRange { column: usize, column_count: usize },

    #[error("arrow: {0}")]
    Arrow(#[from] arrow::error::ArrowError),
}

impl ColumnStoreError {
    /// Attaches a location to a codec error, lifting the kinds users act on (truncation,
    /// unknown codec) to their own variants.
    pub fn from_codec(location: Location, error: CodecError) -> Self {
        match error {
            CodecError::Truncated { what, needed_bytes, available_bytes } => {
                ColumnStoreError::Truncated { location, what, needed_bytes, available_bytes }
            }
            CodecError::UnknownCodec { codec_id } => ColumnStoreError::UnknownCodec { location, codec_id },
            other => ColumnStoreError::Codec { location, source: other },
        }
    }

    /// The location, for errors that came from bytes.
    pub fn location(&self) -> Option<&Location> {
        match self {
            ColumnStoreError::BadMagic { location, .. }
            | ColumnStoreError::UnsupportedVersion { location, .. }
            | ColumnStoreError::ChecksumMismatch { location, .. }
            | ColumnStoreError::Truncated { location, .. }
            | ColumnStoreError::UnknownCodec { location, .. }
            | ColumnStoreError::Corrupt { location, .. }
            | ColumnStoreError::Codec { location, .. }
            | ColumnStoreError::TypeMismatch { location, .. } => Some(location),
            _ => None,
        }
    }
}
