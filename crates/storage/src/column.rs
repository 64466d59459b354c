//! Column types flashscan stores, and their mapping to Arrow.
//!
//! One enum for the catalog, the heap and the column store (issue 15). Each variant's
//! serde tag is what the catalog records; new types are added as new variants (new tags),
//! so catalogs and data files written before stay readable.

use arrow::datatypes::{DataType, TimeUnit};
use serde::{Deserialize, Serialize};

use crate::error::StorageError;

/// Decimal precision of `Decimal`: values are stored as i64, which holds any 18-digit
/// decimal (10^18 < 2^63).
pub const DECIMAL_PRECISION_MAX: u8 = 18;
/// Decimal precision of `WideDecimal`: values are stored as i128, Arrow Decimal128's limit
/// (10^38 < 2^127).
pub const WIDE_DECIMAL_PRECISION_MAX: u8 = 38;

/// The time zone timestamps WITH TIME ZONE read back in. Like PostgreSQL's and DuckDB's
/// TIMESTAMPTZ, a timestamp with a zone is an instant (stored as UTC); the zone's name
/// is display metadata and is not kept.
pub const TIMESTAMP_TIME_ZONE: &str = "UTC";

/// The unit of a TIMESTAMP or TIME value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TemporalUnit {
    Second,
    Millisecond,
    Microsecond,
    Nanosecond,
}

impl TemporalUnit {
    pub fn arrow(self) -> TimeUnit {
        match self {
            TemporalUnit::Second => TimeUnit::Second,
            TemporalUnit::Millisecond => TimeUnit::Millisecond,
            TemporalUnit::Microsecond => TimeUnit::Microsecond,
            TemporalUnit::Nanosecond => TimeUnit::Nanosecond,
        }
    }

    pub fn of(unit: &TimeUnit) -> TemporalUnit {
        match unit {
            TimeUnit::Second => TemporalUnit::Second,
            TimeUnit::Millisecond => TemporalUnit::Millisecond,
            TimeUnit::Microsecond => TemporalUnit::Microsecond,
            TimeUnit::Nanosecond => TemporalUnit::Nanosecond,
        }
    }

    /// The unit's one-byte code in segment headers.
    pub fn code(self) -> u8 {
        match self {
            TemporalUnit::Second => 0,
            TemporalUnit::Millisecond => 1,
            TemporalUnit::Microsecond => 2,
            TemporalUnit::Nanosecond => 3,
        }
    }

    pub fn from_code(code: u8) -> Option<TemporalUnit> {
        Some(match code {
            0 => TemporalUnit::Second,
            1 => TemporalUnit::Millisecond,
            2 => TemporalUnit::Microsecond,
            3 => TemporalUnit::Nanosecond,
            _ => return None,
        })
    }
}

/// The storage type of a column. Fixed-width types sit in the row's fixed area; `Utf8`
/// and `Binary` are the variable-length types.
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
    /// Unsigned 64-bit integers, stored as their bits in an i64 slot.
    #[serde(rename = "uint64")]
    UInt64,
    /// Units since 1970-01-01 00:00:00 as i64. `with_time_zone`: an instant, read back as
    /// Timestamp(unit, "UTC"); without: a wall-clock time, read back as Timestamp(unit).
    Timestamp { unit: TemporalUnit, with_time_zone: bool },
    /// Units since midnight: i32 for seconds and milliseconds (Arrow Time32), i64 for
    /// microseconds and nanoseconds (Arrow Time64).
    Time { unit: TemporalUnit },
    /// Decimals of 19 to 38 digits, stored as the unscaled i128.
    WideDecimal { precision: u8, scale: i8 },
    /// Bytes, unchanged.
    Binary,
}

impl ColumnType {
    /// Bytes the value takes in the row's fixed area; `None` for variable-length types.
    pub fn fixed_width_bytes(self) -> Option<usize> {
        match self {
            ColumnType::Int32 | ColumnType::Date32 => Some(4),
            ColumnType::Int64 | ColumnType::Float64 | ColumnType::Decimal { .. } | ColumnType::UInt64 | ColumnType::Timestamp { .. } => Some(8),
            ColumnType::Time { unit } => Some(if time_is_32_bit(unit) { 4 } else { 8 }),
            ColumnType::WideDecimal { .. } => Some(16),
            ColumnType::Boolean => Some(1),
            ColumnType::Utf8 | ColumnType::Binary => None,
        }
    }

    pub fn arrow_type(self) -> DataType {
        match self {
            ColumnType::Int32 => DataType::Int32,
            ColumnType::Int64 => DataType::Int64,
            ColumnType::Float64 => DataType::Float64,
            ColumnType::Decimal { precision, scale } | ColumnType::WideDecimal { precision, scale } => DataType::Decimal128(precision, scale),
            ColumnType::Date32 => DataType::Date32,
            ColumnType::Utf8 => DataType::Utf8,
            ColumnType::Boolean => DataType::Boolean,
            ColumnType::UInt64 => DataType::UInt64,
            ColumnType::Timestamp { unit, with_time_zone } => DataType::Timestamp(unit.arrow(), with_time_zone.then(|| TIMESTAMP_TIME_ZONE.into())),
            ColumnType::Time { unit } if time_is_32_bit(unit) => DataType::Time32(unit.arrow()),
            ColumnType::Time { unit } => DataType::Time64(unit.arrow()),
            ColumnType::Binary => DataType::Binary,
        }
    }

    /// The storage type for an Arrow type; narrower integers and floats widen, and
    /// decimals take the narrowest form their precision fits.
    pub fn from_arrow(column: &str, data_type: &DataType) -> Result<ColumnType, StorageError> {
        let unsupported = || StorageError::UnsupportedType { column: column.to_string(), data_type: data_type.to_string() };
        Ok(match data_type {
            DataType::Int8 | DataType::Int16 | DataType::Int32 | DataType::UInt8 | DataType::UInt16 => ColumnType::Int32,
            DataType::Int64 | DataType::UInt32 => ColumnType::Int64,
            DataType::UInt64 => ColumnType::UInt64,
            DataType::Float16 | DataType::Float32 | DataType::Float64 => ColumnType::Float64,
            DataType::Decimal128(p, s) | DataType::Decimal64(p, s) | DataType::Decimal32(p, s) => decimal_type(*p, *s).ok_or_else(unsupported)?,
            DataType::Decimal256(p, s) => decimal_type(*p, *s).ok_or_else(unsupported)?,
            DataType::Date32 => ColumnType::Date32,
            // Date64 is milliseconds since the epoch and need not fall on midnight: keep it all.
            DataType::Date64 => ColumnType::Timestamp { unit: TemporalUnit::Millisecond, with_time_zone: false },
            DataType::Timestamp(unit, tz) => ColumnType::Timestamp { unit: TemporalUnit::of(unit), with_time_zone: tz.is_some() },
            DataType::Time32(unit) | DataType::Time64(unit) => ColumnType::Time { unit: TemporalUnit::of(unit) },
            DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => ColumnType::Utf8,
            DataType::Binary | DataType::LargeBinary | DataType::BinaryView | DataType::FixedSizeBinary(_) => ColumnType::Binary,
            DataType::Boolean => ColumnType::Boolean,
            DataType::Dictionary(_, value) => return ColumnType::from_arrow(column, value),
            DataType::List(_)
            | DataType::LargeList(_)
            | DataType::ListView(_)
            | DataType::LargeListView(_)
            | DataType::FixedSizeList(..)
            | DataType::Struct(_)
            | DataType::Map(..)
            | DataType::Union(..) => {
                return Err(StorageError::NestedType { column: column.to_string(), data_type: data_type.to_string() });
            }
            _ => return Err(unsupported()),
        })
    }

    /// Whether values order like the i64 they are stored as (min/max and range pruning
    /// use that order).
    pub fn orders_as_i64(self) -> bool {
        matches!(
            self,
            ColumnType::Int32 | ColumnType::Int64 | ColumnType::Decimal { .. } | ColumnType::Date32 | ColumnType::Timestamp { .. } | ColumnType::Time { .. }
        )
    }

    /// The parameters Arrow checks (decimal precision and scale), for types read from disk.
    pub fn check_parameters(self) -> Result<(), String> {
        match self {
            ColumnType::Decimal { precision, scale } if !(1..=DECIMAL_PRECISION_MAX).contains(&precision) || i16::from(scale) > i16::from(precision) => {
                Err(format!("decimal({precision}, {scale}): precision must be 1..={DECIMAL_PRECISION_MAX} and scale at most the precision"))
            }
            ColumnType::WideDecimal { precision, scale }
                if !(DECIMAL_PRECISION_MAX + 1..=WIDE_DECIMAL_PRECISION_MAX).contains(&precision) || i16::from(scale) > i16::from(precision) =>
            {
                Err(format!(
                    "wide decimal({precision}, {scale}): precision must be {}..={WIDE_DECIMAL_PRECISION_MAX} and scale at most the precision",
                    DECIMAL_PRECISION_MAX + 1
                ))
            }
            _ => Ok(()),
        }
    }
}

/// Arrow keeps TIME in seconds and milliseconds as 32 bits, finer units as 64.
fn time_is_32_bit(unit: TemporalUnit) -> bool {
    matches!(unit, TemporalUnit::Second | TemporalUnit::Millisecond)
}

/// The storage type of a decimal(p, s): i64 up to 18 digits, i128 up to 38.
fn decimal_type(precision: u8, scale: i8) -> Option<ColumnType> {
    if i16::from(scale) > i16::from(precision) || precision == 0 {
        return None;
    }
    if precision <= DECIMAL_PRECISION_MAX {
        Some(ColumnType::Decimal { precision, scale })
    } else if precision <= WIDE_DECIMAL_PRECISION_MAX {
        Some(ColumnType::WideDecimal { precision, scale })
    } else {
        None
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Every type survives the catalog's JSON, and the old types keep their old JSON.
    #[test]
    fn types_round_trip_through_the_catalog_json() {
        let old = r#"{"name":"d","type":"decimal","precision":15,"scale":2,"nullable":false}"#;
        let def: ColumnDef = serde_json::from_str(old).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(def.column_type, ColumnType::Decimal { precision: 15, scale: 2 });
        assert_eq!(serde_json::to_string(&def).unwrap_or_default(), old);
        let units = [TemporalUnit::Second, TemporalUnit::Millisecond, TemporalUnit::Microsecond, TemporalUnit::Nanosecond];
        let mut all = vec![ColumnType::UInt64, ColumnType::Binary, ColumnType::WideDecimal { precision: 38, scale: -3 }];
        for unit in units {
            all.push(ColumnType::Time { unit });
            all.push(ColumnType::Timestamp { unit, with_time_zone: false });
            all.push(ColumnType::Timestamp { unit, with_time_zone: true });
            assert_eq!(TemporalUnit::from_code(unit.code()), Some(unit));
        }
        for t in all {
            let def = ColumnDef { name: "c".into(), column_type: t, nullable: true };
            let json = serde_json::to_string(&def).unwrap_or_default();
            let back: ColumnDef = serde_json::from_str(&json).unwrap_or_else(|e| panic!("{json}: {e}"));
            assert_eq!(back, def);
            // The Arrow type maps back to the same storage type.
            assert_eq!(ColumnType::from_arrow("c", &t.arrow_type()).ok(), Some(t));
        }
    }

    #[test]
    fn decimals_take_the_narrowest_form_and_nested_types_are_refused_by_name() {
        assert_eq!(ColumnType::from_arrow("a", &DataType::Decimal128(18, 2)).ok(), Some(ColumnType::Decimal { precision: 18, scale: 2 }));
        assert_eq!(ColumnType::from_arrow("a", &DataType::Decimal128(19, 2)).ok(), Some(ColumnType::WideDecimal { precision: 19, scale: 2 }));
        assert!(ColumnType::from_arrow("a", &DataType::Decimal256(39, 0)).is_err());
        let list = DataType::List(std::sync::Arc::new(arrow::datatypes::Field::new("item", DataType::Int32, true)));
        let message = ColumnType::from_arrow("tags", &list).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(message.contains("\"tags\"") && message.contains("nested"), "{message}");
        assert!(!message.contains('\n'));
    }
}
