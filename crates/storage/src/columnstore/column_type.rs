//! The column store's one-byte type tags on disk. The type itself is the table's
//! `crate::column::ColumnType`: one enum for the catalog, the heap and the column store
//! (issue 15), so a new type is added in one place and every format must say how it
//! stores it (the matches are exhaustive).

use arrow::datatypes::DataType;

pub use crate::column::{ColumnType, TemporalUnit, DECIMAL_PRECISION_MAX, WIDE_DECIMAL_PRECISION_MAX};

impl ColumnType {
    /// The column type whose Arrow type is exactly `data_type` (no widening: a segment
    /// stores what the table's schema says), or why it is not supported.
    pub fn from_data_type(data_type: &DataType) -> Result<ColumnType, &'static str> {
        match data_type {
            DataType::Int32 => Ok(ColumnType::Int32),
            DataType::Int64 => Ok(ColumnType::Int64),
            DataType::Float64 => Ok(ColumnType::Float64),
            DataType::Decimal128(precision, scale) if *precision <= DECIMAL_PRECISION_MAX && i16::from(*scale) <= i16::from(*precision) => {
                Ok(ColumnType::Decimal { precision: *precision, scale: *scale })
            }
            DataType::Decimal128(precision, scale) if *precision <= WIDE_DECIMAL_PRECISION_MAX && i16::from(*scale) <= i16::from(*precision) => {
                Ok(ColumnType::WideDecimal { precision: *precision, scale: *scale })
            }
            DataType::Decimal128(..) => Err(" (decimal precision above 38)"),
            DataType::Date32 => Ok(ColumnType::Date32),
            DataType::Utf8 => Ok(ColumnType::Utf8),
            DataType::Boolean => Ok(ColumnType::Boolean),
            DataType::UInt64 => Ok(ColumnType::UInt64),
            // The zone's name is a label on instants: any zone is stored as one (read as UTC).
            DataType::Timestamp(unit, zone) => Ok(ColumnType::Timestamp { unit: TemporalUnit::of(unit), with_time_zone: zone.is_some() }),
            DataType::Time32(unit) | DataType::Time64(unit) => {
                let t = ColumnType::Time { unit: TemporalUnit::of(unit) };
                if t.data_type() == *data_type { Ok(t) } else { Err(" (Arrow has no such time type)") }
            }
            DataType::Binary => Ok(ColumnType::Binary),
            _ => Err(""),
        }
    }

    /// The Arrow type of the column's values (`arrow_type`, under the column store's name).
    pub fn data_type(self) -> DataType {
        self.arrow_type()
    }

    /// (tag, precision, scale) as stored in segment headers and the column directory.
    /// New types take new tags; a tag's meaning never changes (old files stay readable).
    pub fn to_tag(self) -> (u8, u8, i8) {
        match self {
            ColumnType::Int32 => (1, 0, 0),
            ColumnType::Int64 => (2, 0, 0),
            ColumnType::Float64 => (3, 0, 0),
            ColumnType::Decimal { precision, scale } => (4, precision, scale),
            ColumnType::Date32 => (5, 0, 0),
            ColumnType::Utf8 => (6, 0, 0),
            ColumnType::Boolean => (7, 0, 0),
            ColumnType::UInt64 => (8, 0, 0),
            ColumnType::Timestamp { unit, with_time_zone } => (9, unit.code(), i8::from(with_time_zone)),
            ColumnType::Time { unit } => (10, unit.code(), 0),
            ColumnType::WideDecimal { precision, scale } => (11, precision, scale),
            ColumnType::Binary => (12, 0, 0),
        }
    }

    pub fn from_tag(tag: u8, precision: u8, scale: i8) -> Result<ColumnType, String> {
        match tag {
            1 => Ok(ColumnType::Int32),
            2 => Ok(ColumnType::Int64),
            3 => Ok(ColumnType::Float64),
            4 if precision >= 1 && precision <= DECIMAL_PRECISION_MAX && i16::from(scale) <= i16::from(precision) => {
                Ok(ColumnType::Decimal { precision, scale })
            }
            4 => Err(format!("decimal precision {precision} scale {scale}")),
            5 => Ok(ColumnType::Date32),
            6 => Ok(ColumnType::Utf8),
            7 => Ok(ColumnType::Boolean),
            8 => Ok(ColumnType::UInt64),
            9 => match (TemporalUnit::from_code(precision), scale) {
                (Some(unit), 0 | 1) => Ok(ColumnType::Timestamp { unit, with_time_zone: scale == 1 }),
                _ => Err(format!("timestamp unit {precision} zone {scale}")),
            },
            10 => TemporalUnit::from_code(precision).map(|unit| ColumnType::Time { unit }).ok_or_else(|| format!("time unit {precision}")),
            11 => {
                let t = ColumnType::WideDecimal { precision, scale };
                t.check_parameters().map(|()| t)
            }
            12 => Ok(ColumnType::Binary),
            other => Err(format!("type tag {other}")),
        }
    }

    /// Width `plain` stores for integer-like types; None for the others.
    pub fn integer_width_bytes(self) -> Option<usize> {
        match self {
            ColumnType::Int32 | ColumnType::Date32 => Some(4),
            ColumnType::Int64 | ColumnType::Decimal { .. } | ColumnType::UInt64 | ColumnType::Timestamp { .. } => Some(8),
            // Wide decimals go through the integer codecs when every value fits i64.
            ColumnType::WideDecimal { .. } => Some(8),
            ColumnType::Time { .. } => self.fixed_width_bytes(),
            ColumnType::Float64 | ColumnType::Utf8 | ColumnType::Boolean | ColumnType::Binary => None,
        }
    }
}
