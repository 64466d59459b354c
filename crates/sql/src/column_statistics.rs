//! What a column store already knows about its columns, handed to DataFusion's planner:
//! min, max and null count per column over the whole table (join order, build side and
//! filter selectivity come from these), and min/max per partition (so a range filter can
//! skip whole partitions). All of it is read from the row groups' directories (a few
//! pages per row group, verified against the catalog), never from the column data.

use std::path::Path;

use datafusion::common::stats::Precision;
use datafusion::common::{ColumnStatistics, ScalarValue};
use flashscan_storage::columnstore::row_group::RowGroupReader;
use flashscan_storage::columnstore::stats::StatValue;
use flashscan_storage::columnstore::table_reader::read_row_group_metadata;
use flashscan_storage::column::TemporalUnit;
use flashscan_storage::{ColumnType, StorageError, TableMeta};

use crate::pruning::ColumnRange;
use crate::table_provider::PartitionRanges;

/// A column store's statistics, per table and per partition.
#[derive(Debug, Clone)]
pub struct ColumnStoreStatistics {
    /// Indexed like the table's columns.
    pub columns: Vec<ColumnStatistics>,
    /// Indexed like `table.partitions`, then like the columns.
    pub partition_ranges: PartitionRanges,
}

/// Min/max and null counts of one column over some row groups, as they are merged.
#[derive(Debug, Clone, Copy, Default)]
struct Extent {
    min: Option<StatValue>,
    max: Option<StatValue>,
    /// A row group had values but no min/max (strings): the extent is unknown.
    unbounded: bool,
    null_count: u64,
}

impl Extent {
    fn add(&mut self, min: Option<StatValue>, max: Option<StatValue>, value_count: u64, null_count: u64) {
        self.null_count += null_count;
        if value_count == null_count {
            return; // all NULL (or empty): no value to bound
        }
        match (min, max) {
            (Some(lo), Some(hi)) => {
                self.min = Some(match self.min {
                    Some(m) if !less(lo, m) => m,
                    _ => lo,
                });
                self.max = Some(match self.max {
                    Some(m) if !less(m, hi) => m,
                    _ => hi,
                });
            }
            _ => self.unbounded = true,
        }
    }

    fn merge(&mut self, other: &Extent) {
        self.unbounded |= other.unbounded;
        self.null_count += other.null_count;
        if let (Some(lo), Some(hi)) = (other.min, other.max) {
            // value_count > null_count: only the bounds matter here.
            self.add(Some(lo), Some(hi), 1, 0);
        }
    }

    fn range(&self, column_type: &ColumnType) -> Option<ColumnRange> {
        if self.unbounded {
            return None;
        }
        Some(ColumnRange { min: scalar_of(self.min?, column_type)?, max: scalar_of(self.max?, column_type)? })
    }
}

/// `a < b` for two stats of one column (same variant); floats by `total_cmp`, as stored.
fn less(a: StatValue, b: StatValue) -> bool {
    match (a, b) {
        (StatValue::Int64(a), StatValue::Int64(b)) => a < b,
        (StatValue::Float64(a), StatValue::Float64(b)) => a.total_cmp(&b).is_lt(),
        (StatValue::Boolean(a), StatValue::Boolean(b)) => !a & b,
        // Mixed variants cannot come from one column; keep the first seen.
        _ => false,
    }
}

/// A stored min or max as a value of the column's Arrow type.
fn scalar_of(value: StatValue, column_type: &ColumnType) -> Option<ScalarValue> {
    Some(match (value, column_type) {
        (StatValue::Int64(v), ColumnType::Int32) => ScalarValue::Int32(Some(i32::try_from(v).ok()?)),
        (StatValue::Int64(v), ColumnType::Int64) => ScalarValue::Int64(Some(v)),
        (StatValue::Int64(v), ColumnType::Date32) => ScalarValue::Date32(Some(i32::try_from(v).ok()?)),
        (StatValue::Int64(v), ColumnType::Decimal { precision, scale }) => ScalarValue::Decimal128(Some(i128::from(v)), *precision, *scale),
        (StatValue::Int64(v), ColumnType::WideDecimal { precision, scale }) => ScalarValue::Decimal128(Some(i128::from(v)), *precision, *scale),
        // Segments record UInt64 min/max only below 2^63 (the flag is off otherwise).
        (StatValue::Int64(v), ColumnType::UInt64) => ScalarValue::UInt64(Some(u64::try_from(v).ok()?)),
        (StatValue::Int64(v), ColumnType::Timestamp { unit, with_time_zone }) => {
            let zone = with_time_zone.then(|| std::sync::Arc::from(flashscan_storage::column::TIMESTAMP_TIME_ZONE));
            match unit {
                TemporalUnit::Second => ScalarValue::TimestampSecond(Some(v), zone),
                TemporalUnit::Millisecond => ScalarValue::TimestampMillisecond(Some(v), zone),
                TemporalUnit::Microsecond => ScalarValue::TimestampMicrosecond(Some(v), zone),
                TemporalUnit::Nanosecond => ScalarValue::TimestampNanosecond(Some(v), zone),
            }
        }
        (StatValue::Int64(v), ColumnType::Time { unit }) => match unit {
            TemporalUnit::Second => ScalarValue::Time32Second(Some(i32::try_from(v).ok()?)),
            TemporalUnit::Millisecond => ScalarValue::Time32Millisecond(Some(i32::try_from(v).ok()?)),
            TemporalUnit::Microsecond => ScalarValue::Time64Microsecond(Some(v)),
            TemporalUnit::Nanosecond => ScalarValue::Time64Nanosecond(Some(v)),
        },
        (StatValue::Float64(v), ColumnType::Float64) => ScalarValue::Float64(Some(v)),
        (StatValue::Boolean(v), ColumnType::Boolean) => ScalarValue::Boolean(Some(v)),
        _ => return None,
    })
}

/// Reads every row group's directory once. Only for column store tables (heap pages
/// keep no statistics). Column sizes are those of the schema `settings` give the table
/// (strings as views or not).
pub fn column_store_statistics(db_dir: &Path, table: &TableMeta, settings: &crate::settings::FlashscanSettings) -> Result<ColumnStoreStatistics, StorageError> {
    debug_assert!(table.is_column_store(), "{} is not a column store", table.name);
    let column_count = table.columns.len();
    let mut whole = vec![Extent::default(); column_count];
    let mut encoded_bytes = vec![0u64; column_count];
    let mut row_count = 0u64;
    let mut partition_ranges = Vec::with_capacity(table.partitions.len());
    for partition in &table.partitions {
        let mut extents = vec![Extent::default(); column_count];
        for row_group in &partition.row_groups {
            let bytes = read_row_group_metadata(db_dir, table, row_group)?;
            let path = db_dir.join(&row_group.file);
            let reader = RowGroupReader::open(&bytes, &path, row_group.offset_bytes)?;
            row_count += reader.row_count() as u64;
            for (column, extent) in extents.iter_mut().enumerate() {
                let s = reader.column_stats(column);
                extent.add(s.min, s.max, s.value_count, s.null_count);
                if let Some(b) = encoded_bytes.get_mut(column) {
                    *b += s.encoded_bytes;
                }
            }
        }
        for (column, extent) in extents.iter().enumerate() {
            whole[column].merge(extent);
        }
        partition_ranges.push(extents.iter().zip(&table.columns).map(|(e, c)| e.range(&c.column_type)).collect());
    }
    let schema = crate::reader::sql_schema(table, settings);
    let columns = whole
        .iter()
        .zip(&table.columns)
        .enumerate()
        .map(|(i, (extent, column))| {
            let range = extent.range(&column.column_type);
            let byte_size = match schema.fields().get(i) {
                Some(field) => arrow_bytes(field.data_type(), row_count, encoded_bytes.get(i).copied().unwrap_or(0)),
                None => Precision::Absent,
            };
            ColumnStatistics {
                null_count: Precision::Exact(extent.null_count as usize),
                min_value: range.as_ref().map_or(Precision::Absent, |r| Precision::Exact(r.min.clone())),
                max_value: range.map_or(Precision::Absent, |r| Precision::Exact(r.max)),
                byte_size,
                ..ColumnStatistics::new_unknown()
            }
        })
        .collect();
    Ok(ColumnStoreStatistics { columns, partition_ranges })
}

/// Bytes of a string view in Arrow (`Utf8View`): what each row of a string column costs
/// in a batch besides the string bytes themselves.
const STRING_VIEW_BYTES: u64 = 16;

/// The size a column of `rows` rows of `data_type` has as Arrow arrays, which is what the
/// planner compares to pick a hash join's build side (the smaller input is hashed):
/// exact for fixed-width types; for strings a view per row plus the stored bytes (the
/// strings themselves, or a dictionary and its codes). DataFusion's Parquet source reports
/// the same per column (fixed width × rows; the uncompressed column chunks otherwise), and
/// a projection's size is the sum of its columns'. Before, a scan reported the pages of
/// every column of its table: TPC-H Q13 hashed 15 M orders rows (o_comment made orders
/// look smaller than customer) instead of 1.5 M customer keys.
fn arrow_bytes(data_type: &arrow::datatypes::DataType, rows: u64, encoded_bytes: u64) -> Precision<usize> {
    match data_type.primitive_width() {
        Some(width) => Precision::Exact((width as u64).saturating_mul(rows) as usize),
        None => match data_type {
            arrow::datatypes::DataType::Utf8View | arrow::datatypes::DataType::Utf8 | arrow::datatypes::DataType::BinaryView | arrow::datatypes::DataType::Binary => {
                Precision::Inexact(STRING_VIEW_BYTES.saturating_mul(rows).saturating_add(encoded_bytes) as usize)
            }
            _ => Precision::Absent,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn column_sizes_are_arrow_sizes() {
        use arrow::datatypes::DataType;
        assert_eq!(arrow_bytes(&DataType::Int64, 1000, 37), Precision::Exact(8000), "fixed width: the stored bytes do not matter");
        assert_eq!(arrow_bytes(&DataType::Date32, 1000, 37), Precision::Exact(4000));
        assert_eq!(arrow_bytes(&DataType::Decimal128(15, 2), 10, 3), Precision::Exact(160));
        assert_eq!(arrow_bytes(&DataType::Utf8View, 1000, 5000), Precision::Inexact(16 * 1000 + 5000));
        assert_eq!(arrow_bytes(&DataType::Boolean, 1000, 5000), Precision::Absent, "bits: unknown rather than wrong");
    }

    #[test]
    fn extents_merge_to_the_outer_bounds_and_count_nulls() {
        let mut a = Extent::default();
        a.add(Some(StatValue::Int64(5)), Some(StatValue::Int64(9)), 10, 1);
        a.add(Some(StatValue::Int64(-3)), Some(StatValue::Int64(4)), 10, 0);
        a.add(None, None, 4, 4); // all NULL: bounds unchanged, still bounded
        let mut b = Extent::default();
        b.add(Some(StatValue::Int64(7)), Some(StatValue::Int64(12)), 3, 2);
        a.merge(&b);
        let range = a.range(&ColumnType::Int64).unwrap_or_else(|| panic!("bounded"));
        assert_eq!((range.min, range.max), (ScalarValue::Int64(Some(-3)), ScalarValue::Int64(Some(12))));
        assert_eq!(a.null_count, 7);
    }

    #[test]
    fn a_row_group_with_values_but_no_bounds_makes_the_extent_unknown() {
        let mut a = Extent::default();
        a.add(Some(StatValue::Int64(1)), Some(StatValue::Int64(2)), 5, 0);
        a.add(None, None, 5, 0);
        assert!(a.range(&ColumnType::Int64).is_none());
    }

    #[test]
    fn bounds_take_the_column_type() {
        let mut a = Extent::default();
        a.add(Some(StatValue::Int64(150)), Some(StatValue::Int64(-25)), 2, 0);
        a.add(Some(StatValue::Int64(-25)), Some(StatValue::Int64(150)), 2, 0);
        let decimal = a.range(&ColumnType::Decimal { precision: 15, scale: 2 }).unwrap_or_else(|| panic!("bounded"));
        assert_eq!(decimal.min, ScalarValue::Decimal128(Some(-25), 15, 2));
        let date = a.range(&ColumnType::Date32).unwrap_or_else(|| panic!("bounded"));
        assert_eq!(date.max, ScalarValue::Date32(Some(150)));
        // A bound that does not fit the type is no bound at all.
        let mut wide = Extent::default();
        wide.add(Some(StatValue::Int64(0)), Some(StatValue::Int64(i64::MAX)), 1, 0);
        assert!(wide.range(&ColumnType::Int32).is_none());
    }

    #[test]
    fn new_types_take_their_scalar_types() {
        let mut a = Extent::default();
        a.add(Some(StatValue::Int64(-7)), Some(StatValue::Int64(1_700_000_000_000_000)), 2, 0);
        let ts = a.range(&ColumnType::Timestamp { unit: TemporalUnit::Microsecond, with_time_zone: true }).unwrap_or_else(|| panic!("bounded"));
        assert_eq!(ts.max, ScalarValue::TimestampMicrosecond(Some(1_700_000_000_000_000), Some("UTC".into())));
        let wide = a.range(&ColumnType::WideDecimal { precision: 38, scale: 4 }).unwrap_or_else(|| panic!("bounded"));
        assert_eq!(wide.min, ScalarValue::Decimal128(Some(-7), 38, 4));
        // A negative bound cannot be an UInt64's: no range rather than a wrong one.
        assert!(a.range(&ColumnType::UInt64).is_none());
        // TIME in seconds is 32 bits: a bound past i32 is no bound.
        assert!(a.range(&ColumnType::Time { unit: TemporalUnit::Second }).is_none());
    }
}
