//! The storage tests' kit: proptest strategies and decoders shared by the heap page tests
//! (plain, row- and page-compressed pages: column types, values of every type, decoded
//! values), the one `TableMeta` they build, order-independent table contents, and small
//! TPC-H databases in temporary directories.
#![allow(dead_code)]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use arrow::array::{Array, AsArray, RecordBatch};
use arrow::datatypes::Decimal128Type;
use arrow::util::display::{ArrayFormatter, FormatOptions};
use flashscan_storage::column::TemporalUnit;
use flashscan_storage::heap::row_codec::Value;
use flashscan_storage::load::tpch::tpch_source;
use flashscan_storage::{load_table, ColumnDef, ColumnType, LoadOptions, TableMeta};
use proptest::prelude::*;

pub fn column_type() -> impl Strategy<Value = ColumnType> {
    prop_oneof![
        Just(ColumnType::Int32),
        Just(ColumnType::Int64),
        Just(ColumnType::Float64),
        (1u8..=18, 0i8..=6).prop_map(|(precision, scale)| ColumnType::Decimal { precision, scale: scale.min(precision as i8) }),
        Just(ColumnType::Date32),
        Just(ColumnType::Utf8),
        Just(ColumnType::Boolean),
        // The types of issue 14.
        Just(ColumnType::UInt64),
        (temporal_unit(), any::<bool>()).prop_map(|(unit, with_time_zone)| ColumnType::Timestamp { unit, with_time_zone }),
        temporal_unit().prop_map(|unit| ColumnType::Time { unit }),
        (19u8..=38, 0i8..=10).prop_map(|(precision, scale)| ColumnType::WideDecimal { precision, scale }),
        Just(ColumnType::Binary),
    ]
}

pub fn temporal_unit() -> impl Strategy<Value = TemporalUnit> {
    prop_oneof![Just(TemporalUnit::Second), Just(TemporalUnit::Millisecond), Just(TemporalUnit::Microsecond), Just(TemporalUnit::Nanosecond)]
}

/// The largest 38-digit unscaled decimal.
pub const MAX38: i128 = 10i128.pow(38) - 1;

/// A timestamp's or time's integer units at row `r` of `a` (i32 for TIME in s/ms).
pub fn units_at(a: &dyn Array, r: usize) -> i64 {
    let data = a.to_data();
    match data.data_type() {
        arrow::datatypes::DataType::Time32(_) => i64::from(data.buffers()[0].typed_data::<i32>()[data.offset() + r]),
        _ => data.buffers()[0].typed_data::<i64>()[data.offset() + r],
    }
}

/// Values of the issue-14 types, extremes included; `None` for the older types.
pub fn new_type_value(t: ColumnType) -> Option<BoxedStrategy<Value>> {
    Some(match t {
        ColumnType::UInt64 => prop_oneof![any::<u64>(), Just(u64::MAX), Just(0), Just(1 << 63), 0u64..5].prop_map(Value::UInt64).boxed(),
        ColumnType::Timestamp { .. } => prop_oneof![any::<i64>(), Just(i64::MIN), Just(i64::MAX), 1_700_000_000i64..1_700_000_004].prop_map(Value::Int64).boxed(),
        ColumnType::Time { unit: TemporalUnit::Second | TemporalUnit::Millisecond } => prop_oneof![0i32..86_400, Just(i32::MAX), Just(i32::MIN)].prop_map(Value::Int32).boxed(),
        ColumnType::Time { .. } => prop_oneof![0i64..86_400_000_000, Just(i64::MAX), Just(0)].prop_map(Value::Int64).boxed(),
        ColumnType::WideDecimal { .. } => {
            prop_oneof![any::<i128>(), Just(MAX38), Just(-MAX38), Just(i128::MIN), -3i128..3, any::<i64>().prop_map(i128::from)].prop_map(Value::Int128).boxed()
        }
        ColumnType::Binary => prop_oneof![Just(Vec::new()), proptest::collection::vec(any::<u8>(), 0..40), Just(vec![0u8; 20])].prop_map(Value::Binary).boxed(),
        _ => return None,
    })
}

/// `values` or, one time in five where the column is nullable, NULL.
pub fn or_null(values: BoxedStrategy<Value>, nullable: bool) -> BoxedStrategy<Value> {
    if nullable {
        prop_oneof![1 => Just(Value::Null), 4 => values].boxed()
    } else {
        values
    }
}

/// 1 to 11 columns of any type, nullable or not, and up to `rows_max` rows of values drawn
/// by `value` (each test file biases its values to what it checks).
pub fn schema_and_rows(
    value: fn(ColumnType, bool) -> BoxedStrategy<Value>,
    rows_max: usize,
) -> impl Strategy<Value = (Vec<(ColumnType, bool)>, Vec<Vec<Value>>)> {
    prop::collection::vec((column_type(), any::<bool>()), 1..12).prop_flat_map(move |cols| {
        let row = cols.iter().map(|&(t, n)| value(t, n)).collect::<Vec<_>>();
        (Just(cols), prop::collection::vec(row, 0..rows_max))
    })
}

/// The value at row `r` of a decoded column of type `t` (NULL where the array says so).
pub fn decoded_value(t: ColumnType, a: &dyn Array, r: usize) -> Value {
    use arrow::datatypes::{Date32Type, Float64Type, Int32Type, Int64Type};
    if a.is_null(r) {
        return Value::Null;
    }
    match t {
        t if new_type_decoded(t, a, r).is_some() => new_type_decoded(t, a, r).unwrap_or(Value::Null),
        ColumnType::Int32 => Value::Int32(a.as_primitive::<Int32Type>().value(r)),
        ColumnType::Date32 => Value::Date32(a.as_primitive::<Date32Type>().value(r)),
        ColumnType::Int64 => Value::Int64(a.as_primitive::<Int64Type>().value(r)),
        ColumnType::Float64 => Value::Float64(a.as_primitive::<Float64Type>().value(r)),
        ColumnType::Decimal { .. } => Value::Decimal(a.as_primitive::<Decimal128Type>().value(r) as i64),
        ColumnType::Boolean => Value::Boolean(a.as_boolean().value(r)),
        ColumnType::Utf8 => Value::Utf8(a.as_string::<i32>().value(r).to_string()),
        _ => Value::Null,
    }
}

/// A decoded value of the issue-14 types; `None` for the older types.
pub fn new_type_decoded(t: ColumnType, a: &dyn Array, r: usize) -> Option<Value> {
    Some(match t {
        ColumnType::UInt64 => Value::UInt64(a.as_primitive::<arrow::datatypes::UInt64Type>().value(r)),
        ColumnType::Timestamp { .. } => Value::Int64(units_at(a, r)),
        ColumnType::Time { unit: TemporalUnit::Second | TemporalUnit::Millisecond } => Value::Int32(units_at(a, r) as i32),
        ColumnType::Time { .. } => Value::Int64(units_at(a, r)),
        ColumnType::WideDecimal { .. } => Value::Int128(a.as_primitive::<Decimal128Type>().value(r)),
        ColumnType::Binary => Value::Binary(a.as_binary::<i32>().value(r).to_vec()),
        _ => return None,
    })
}


/// A heap table of columns `c0, c1, …` of these (type, nullable) pairs.
pub fn table(columns: &[(ColumnType, bool)]) -> TableMeta {
    let columns = columns.iter().enumerate().map(|(i, &(column_type, nullable))| ColumnDef { name: format!("c{i}"), column_type, nullable }).collect();
    TableMeta::heap_without_rows("t", columns)
}

/// Values equal, floats compared by their bits (NaN payloads and -0.0 must survive too).
pub fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Float64(x), Value::Float64(y)) => x.to_bits() == y.to_bits(),
        _ => a == b,
    }
}

/// Every row as one line of displayed values: order-independent comparison of tables.
pub fn row_lines(batches: &[RecordBatch]) -> Vec<String> {
    let mut lines = Vec::new();
    let opts = FormatOptions::default();
    for b in batches {
        let fmts: Vec<ArrayFormatter> = b.columns().iter().map(|c| ArrayFormatter::try_new(c.as_ref(), &opts).unwrap()).collect();
        for r in 0..b.num_rows() {
            lines.push(fmts.iter().map(|f| f.value(r).to_string()).collect::<Vec<_>>().join("|"));
        }
    }
    lines.sort();
    lines
}

/// File names in `dir`.
pub fn dir_listing(dir: &Path) -> BTreeSet<String> {
    std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect()
}

/// How the tests load: `partition_count` hash partitions, 2 threads.
pub fn load_options(partition_count: u32) -> LoadOptions {
    LoadOptions { partition_count, threads: 2, ..LoadOptions::default() }
}

/// A new database in a temporary directory (the first part keeps it) holding TPC-H `table`
/// at scale factor 0.01 (2 generator parts) in `partition_count` partitions.
pub fn tpch_db(table: &str, partition_count: u32) -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let db_dir = tmp.path().join("db");
    load_table(&db_dir, tpch_source(table, 0.01, 2).unwrap(), &load_options(partition_count)).unwrap();
    (tmp, db_dir)
}

/// Any value of type `t` (NULL too when `nullable`): every type, floats by their bits (NaN
/// payloads and -0.0 must survive), empty and long strings.
pub fn any_value(t: ColumnType, nullable: bool) -> BoxedStrategy<Value> {
    let v: BoxedStrategy<Value> = match t {
        t if new_type_value(t).is_some() => new_type_value(t).unwrap_or_else(|| Just(Value::Null).boxed()),
        ColumnType::Int32 => any::<i32>().prop_map(Value::Int32).boxed(),
        ColumnType::Int64 => any::<i64>().prop_map(Value::Int64).boxed(),
        ColumnType::Float64 => any::<u64>().prop_map(|b| Value::Float64(f64::from_bits(b))).boxed(),
        ColumnType::Decimal { .. } => any::<i64>().prop_map(Value::Decimal).boxed(),
        ColumnType::Date32 => any::<i32>().prop_map(Value::Date32).boxed(),
        ColumnType::Utf8 => prop_oneof![Just(String::new()), ".{0,40}", "[a-z]{0,300}"].prop_map(Value::Utf8).boxed(),
        ColumnType::Boolean => any::<bool>().prop_map(Value::Boolean).boxed(),
        _ => Just(Value::Null).boxed(),
    };
    or_null(v, nullable)
}

/// Heap pages as the loader seals them: the kit the crates above this one use too. (Not
/// every test file of this crate uses them.)
#[allow(unused_imports)]
pub use flashscan_storage::testkit::{sealed_pages, PAGES_FILE_ID};
