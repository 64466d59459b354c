//! The Arrow types the column store holds, and their one-byte tags on disk.

use arrow::datatypes::DataType;

/// Decimals are stored as i64, so at most 18 digits fit (10^18 < 2^63).
pub const DECIMAL_PRECISION_MAX: u8 = 18;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColumnType {
    Int32,
    Int64,
    Float64,
    /// Unscaled values as i64.
    Decimal128 { precision: u8, scale: i8 },
    Date32,
    Utf8,
    Boolean,
}

impl ColumnType {
    /// The column type for `data_type`, or why it is not supported.
    pub fn from_data_type(data_type: &DataType) -> Result<ColumnType, &'static str> {
        match data_type {
            DataType::Int32 => Ok(ColumnType::Int32),
            DataType::Int64 => Ok(ColumnType::Int64),
            DataType::Float64 => Ok(ColumnType::Float64),
            DataType::Decimal128(precision, scale) if *precision <= DECIMAL_PRECISION_MAX && i16::from(*scale) <= i16::from(*precision) => {
                Ok(ColumnType::Decimal128 { precision: *precision, scale: *scale })
            }
            DataType::Decimal128(..) => Err(" (decimal precision above 18 does not fit i64)"),
            DataType::Date32 => Ok(ColumnType::Date32),
            DataType::Utf8 => Ok(ColumnType::Utf8),
            DataType::Boolean => Ok(ColumnType::Boolean),
            _ => Err(""),
        }
    }

    pub fn data_type(self) -> DataType {
        match self {
            ColumnType::Int32 => DataType::Int32,
            ColumnType::Int64 => DataType::Int64,
            ColumnType::Float64 => DataType::Float64,
            ColumnType::Decimal128 { precision, scale } => DataType::Decimal128(precision, scale),
            ColumnType::Date32 => DataType::Date32,
            ColumnType::Utf8 => DataType::Utf8,
            ColumnType::Boolean => DataType::Boolean,
        }
    }

    /// (tag, precision, scale) as stored in segment headers and the column directory.
    pub fn to_tag(self) -> (u8, u8, i8) {
        match self {
            ColumnType::Int32 => (1, 0, 0),
            ColumnType::Int64 => (2, 0, 0),
            ColumnType::Float64 => (3, 0, 0),
            ColumnType::Decimal128 { precision, scale } => (4, precision, scale),
            ColumnType::Date32 => (5, 0, 0),
            ColumnType::Utf8 => (6, 0, 0),
            ColumnType::Boolean => (7, 0, 0),
        }
    }

    pub fn from_tag(tag: u8, precision: u8, scale: i8) -> Result<ColumnType, String> {
        match tag {
            1 => Ok(ColumnType::Int32),
            2 => Ok(ColumnType::Int64),
            3 => Ok(ColumnType::Float64),
            4 if precision >= 1 && precision <= DECIMAL_PRECISION_MAX && i16::from(scale) <= i16::from(precision) => {
                Ok(ColumnType::Decimal128 { precision, scale })
            }
            4 => Err(format!("decimal precision {precision} scale {scale}")),
            5 => Ok(ColumnType::Date32),
            6 => Ok(ColumnType::Utf8),
            7 => Ok(ColumnType::Boolean),
            other => Err(format!("type tag {other}")),
        }
    }

    /// Width `plain` stores for integer-like types; None for the others.
    pub fn integer_width_bytes(self) -> Option<usize> {
        match self {
            ColumnType::Int32 | ColumnType::Date32 => Some(4),
            ColumnType::Int64 | ColumnType::Decimal128 { .. } => Some(8),
            ColumnType::Float64 | ColumnType::Utf8 | ColumnType::Boolean => None,
        }
    }
}
