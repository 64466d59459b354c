//! Segment statistics: they sit in the segment header and again in the row group's column
//! directory, so a scan can skip a row group (min/max) or answer COUNT (null count) without
//! reading the column.

use serde::Serialize;

use super::column_type::ColumnType;
use crate::compression::CodecId;

/// A min or max. Integer-like columns (Int32, Int64, Date32 days, Decimal unscaled,
/// timestamps and times in their units, UInt64 below 2^63, wide decimals that fit i64) use
/// Int64; strings and binary carry no min/max (None).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub enum StatValue {
    Int64(i64),
    Float64(f64),
    Boolean(bool),
}

impl StatValue {
    /// The 8 bytes stored on disk.
    pub fn to_bits(self) -> u64 {
        match self {
            StatValue::Int64(value) => value as u64,
            StatValue::Float64(value) => value.to_bits(),
            StatValue::Boolean(value) => u64::from(value),
        }
    }

    /// Reads 8 stored bytes back according to the column type.
    pub fn from_bits(column_type: ColumnType, bits: u64) -> Option<StatValue> {
        match column_type {
            // UInt64 and wide decimal segments carry min/max only when their values order as
            // i64 (below 2^63, within i64): the flag says so, and then they read as Int64.
            ColumnType::Int32
            | ColumnType::Int64
            | ColumnType::Date32
            | ColumnType::Decimal { .. }
            | ColumnType::UInt64
            | ColumnType::Timestamp { .. }
            | ColumnType::Time { .. }
            | ColumnType::WideDecimal { .. } => Some(StatValue::Int64(bits as i64)),
            ColumnType::Float64 => Some(StatValue::Float64(f64::from_bits(bits))),
            ColumnType::Boolean => Some(StatValue::Boolean(bits != 0)),
            ColumnType::Utf8 | ColumnType::Binary => None,
        }
    }
}

/// What a scan knows about one column of a row group before reading it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct SegmentStats {
    /// Over non-null values; None for strings and for all-null or empty segments.
    /// Floats order by `f64::total_cmp` (NaN is the largest).
    pub min: Option<StatValue>,
    pub max: Option<StatValue>,
    pub value_count: u64,
    pub null_count: u64,
    pub codec: CodecId,
    /// Bytes of the stored segment body (after the codec and, for archive, zstd).
    pub encoded_bytes: u64,
}
