//! The column store: row groups of column segments.
//!
//! A row group (about 1M rows) holds one segment per column, each compressed with the codec
//! that analysis found smallest (`crate::compression`), behind a header and a column
//! directory carrying every segment's offset, length and statistics — so a scan reads the
//! metadata, skips by min/max, and then reads only the columns it needs. `archive` wraps
//! each segment body in zstd on top of the codec (SQL Server's COLUMNSTORE_ARCHIVE).
//! Byte layouts: docs/formats-columnstore.md.

pub mod column_type;
pub mod error;
pub mod row_group;
pub mod segment;
pub mod stats;
pub mod table_reader;
pub mod vec_pool;

pub use column_type::ColumnType;
pub use error::{ColumnRef, ColumnStoreError, Location};
pub use row_group::{
    encode_row_group, encode_row_group_with_codecs, encode_row_groups, ColumnStoreOptions, RowGroupReader, RowGroupSizes,
    ROW_GROUP_ALIGNMENT_BYTES, ROW_GROUP_HEADER_BYTES,
};
pub use segment::{decode_segment, encode_segment, EncodedSegment, SegmentOptions, SegmentView};
pub use stats::{SegmentStats, StatValue};
pub use vec_pool::VecPool;

pub use crate::compression::CodecId;

/// Rows per row group by default (DuckDB's 122,880 is smaller; SQL Server's 1,048,576 is ours).
pub const ROW_GROUP_ROWS_DEFAULT: usize = 1 << 20;
/// Rows a row group may hold. Bounds every allocation a decoder makes from a count on disk.
pub const ROW_GROUP_ROWS_MAX: usize = 1 << 22;
/// Columns a row group may hold.
pub const COLUMN_COUNT_MAX: usize = 4096;
/// Bytes of one segment body before zstd: strings at most, plus lengths and validity.
pub const SEGMENT_RAW_BODY_BYTES_MAX: usize = crate::compression::STRING_BYTES_MAX + ROW_GROUP_ROWS_MAX * 16;
/// zstd level of `archive`: level 3 is zstd's default, fast to write, ~1 GB/s to read.
pub const ZSTD_LEVEL: i32 = 3;

const _: () = assert!(ROW_GROUP_ROWS_DEFAULT <= ROW_GROUP_ROWS_MAX);
const _: () = assert!(ROW_GROUP_ROWS_MAX <= u32::MAX as usize);
