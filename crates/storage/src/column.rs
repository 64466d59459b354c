//! Column types flashscan stores, and their mapping to Arrow.

use arrow::datatypes::DataType;
use serde::{Deserialize, Serialize};

use crate::error::StorageError;

/// Decimal precision limit: values are stored as i64, which holds any 18-digit decimal.
pub const DECIMAL_PRECISION_MAX: u8 = 18;

/// The storage type of a column. Fixed-width types sit in the row's fixed area; `Utf8` is
/// the only variable-length type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ColumnType {
    Int32,
    Int64,
    Float64,
    /// Stored as the unscaled i64; read back as Arrow Decimal128(precision, scale).
    Decimal { precision: u8, scale: i8 },
    /// Days since 1970-01-01.
    Date32,
    Utf8,
    Boolean,
}

impl ColumnType {
    /// Bytes the value takes in the row's fixed area; `None` for variable-length types.
    pub fn fixed_width_bytes(self) -> Option<usize> {
        match self {
            ColumnType::Int32 | ColumnType::Date32 => Some(4),
            ColumnType::Int64 | ColumnType::Float64 | ColumnType::Decimal { .. } => Some(8),
            ColumnType::Boolean => Some(1),
            ColumnType::Utf8 => None,
        }
    }

    pub fn arrow_type(self) -> DataType {
        match self {
            ColumnType::Int32 => DataType::Int32,
            ColumnType::Int64 => DataType::Int64,
            ColumnType::Float64 => DataType::Float64,
            ColumnType::Decimal { precision, scale } => DataType::Decimal128(precision, scale),
            ColumnType::Date32 => DataType::Date32,
            ColumnType::Utf8 => DataType::Utf8,
            ColumnType::Boolean => DataType::Boolean,
        }
    }

    /// The storage type for an Arrow type; narrower integers and floats widen.
    pub fn from_arrow(column: &str, data_type: &DataType) -> Result<ColumnType, StorageError> {
        let unsupported = || StorageError::UnsupportedType { column: column.to_string(), data_type: data_type.to_string() };
        Ok(match data_type {
            DataType::Int8 | DataType::Int16 | DataType::Int32 | DataType::UInt8 | DataType::UInt16 => ColumnType::Int32,
            DataType::Int64 | DataType::UInt32 => ColumnType::Int64,
            DataType::Float16 | DataType::Float32 | DataType::Float64 => ColumnType::Float64,
            DataType::Decimal128(p, s) | DataType::Decimal64(p, s) | DataType::Decimal32(p, s) => {
                if *p > DECIMAL_PRECISION_MAX {
                    return Err(unsupported());
                }
                ColumnType::Decimal { precision: *p, scale: *s }
            }
            DataType::Date32 => ColumnType::Date32,
            DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => ColumnType::Utf8,
            DataType::Boolean => ColumnType::Boolean,
            _ => return Err(unsupported()),
        })
    }
}

/// One column of a table as the catalog records it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ColumnDef {
    pub name: String,
    #[serde(flatten)]
    pub column_type: ColumnType,
    pub nullable: bool,
}
