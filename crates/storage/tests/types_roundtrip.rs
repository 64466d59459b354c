//! The types of issue 14 (UInt64, TIMESTAMP in four units with and without a zone, TIME,
//! DECIMAL up to 38 digits, BINARY): each through the heap (plain pages, row and page
//! compression) and the column store (plain and archive), with NULLs and edge values, read
//! back equal to what was loaded; their column store segments under proptest, with min/max
//! checked against the values; CSV types inferred from the whole file.

use std::path::Path;
use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, BinaryArray, Decimal128Array, Int64Array, RecordBatch, Time32MillisecondArray, Time32SecondArray,
    Time64MicrosecondArray, Time64NanosecondArray, TimestampMicrosecondArray, TimestampMillisecondArray, TimestampNanosecondArray,
    TimestampSecondArray, UInt64Array,
};
use arrow::compute::{concat_batches, sort_to_indices, take_record_batch};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use flashscan_storage::columnstore::{encode_row_group, ColumnStoreOptions, RowGroupReader, StatValue};
use flashscan_storage::heap::reader::read_table;
use flashscan_storage::load::csv::{csv_source, csv_source_with, CsvOptions};
use flashscan_storage::load::source::{BatchIter, PartSource};
use flashscan_storage::heap::row_codec::{decode_row, encode_row, RowLayout, Value};
use flashscan_storage::{load_table, rebuild_table, ColumnType, Database, LoadOptions, RebuildOptions, RebuildTarget, TableSource};
use proptest::prelude::*;

const MAX38: i128 = 99_999_999_999_999_999_999_999_999_999_999_999_999;

/// A deterministic stream of u64s (splitmix64), so failures reproduce.
struct Mix(u64);
impl Mix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

fn schema() -> SchemaRef {
    let utc = Some(Arc::from("UTC"));
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("u", DataType::UInt64, true),
        Field::new("ts_s", DataType::Timestamp(TimeUnit::Second, None), true),
        Field::new("ts_ms", DataType::Timestamp(TimeUnit::Millisecond, utc.clone()), true),
        Field::new("ts_us", DataType::Timestamp(TimeUnit::Microsecond, utc), true),
        Field::new("ts_ns", DataType::Timestamp(TimeUnit::Nanosecond, None), true),
        Field::new("t_s", DataType::Time32(TimeUnit::Second), true),
        Field::new("t_ms", DataType::Time32(TimeUnit::Millisecond), true),
        Field::new("t_us", DataType::Time64(TimeUnit::Microsecond), true),
        Field::new("t_ns", DataType::Time64(TimeUnit::Nanosecond), false),
        Field::new("d38", DataType::Decimal128(38, 4), true),
        Field::new("d20", DataType::Decimal128(20, 2), true),
        Field::new("bin", DataType::Binary, true),
    ]))
}

/// `rows` rows: ids 0.., edge values in the first rows, then pseudo-random values with
/// about one NULL in seven.
fn types_batch(rows: usize, seed: u64) -> RecordBatch {
    let mut mix = Mix(seed);
    let null = |mix: &mut Mix, i: usize| i >= 8 && mix.next() % 7 == 0;
    let edge_i64 = [i64::MIN, i64::MAX, 0, -1, 1, i64::MIN + 1, i64::MAX - 1, 86_399];
    let pick = |mix: &mut Mix, i: usize| if i < edge_i64.len() { edge_i64[i] } else { mix.next() as i64 };
    let u: UInt64Array = (0..rows)
        .map(|i| if null(&mut mix, i) { None } else { Some([0, u64::MAX, 1 << 63, (1 << 63) - 1, 1].get(i).copied().unwrap_or_else(|| mix.next())) })
        .collect();
    let i64_column = |mix: &mut Mix| -> Vec<Option<i64>> { (0..rows).map(|i| if null(mix, i) { None } else { Some(pick(mix, i)) }).collect() };
    let ts_s = TimestampSecondArray::from(i64_column(&mut mix));
    let ts_ms = TimestampMillisecondArray::from(i64_column(&mut mix)).with_timezone("UTC");
    let ts_us = TimestampMicrosecondArray::from(i64_column(&mut mix)).with_timezone("UTC");
    let ts_ns = TimestampNanosecondArray::from(i64_column(&mut mix));
    let t_s: Time32SecondArray = (0..rows).map(|i| if null(&mut mix, i) { None } else { Some((mix.next() % 86_400) as i32) }).collect();
    let t_ms: Time32MillisecondArray = (0..rows).map(|i| if null(&mut mix, i) { None } else { Some((mix.next() % 86_400_000) as i32) }).collect();
    let t_us: Time64MicrosecondArray = (0..rows).map(|i| if null(&mut mix, i) { None } else { Some((mix.next() % 86_400_000_000) as i64) }).collect();
    let t_ns: Time64NanosecondArray = (0..rows).map(|_| Some((mix.next() % 86_400_000_000_000) as i64)).collect();
    let edge_i128 = [MAX38, -MAX38, 0, -1, i64::MAX as i128 + 1, i64::MIN as i128 - 1];
    let d38: Decimal128Array = (0..rows)
        .map(|i| if null(&mut mix, i) { None } else { Some(edge_i128.get(i).copied().unwrap_or_else(|| ((mix.next() as i128) << 60 | mix.next() as i128) % MAX38)) })
        .collect();
    let d20: Decimal128Array = (0..rows).map(|i| if null(&mut mix, i) { None } else { Some(mix.next() as i64 as i128 / 1000) }).collect();
    let bin: BinaryArray = (0..rows)
        .map(|i| {
            if null(&mut mix, i) {
                None
            } else {
                let len = if i == 0 { 0 } else { (mix.next() % 24) as usize };
                Some((0..len).map(|_| mix.next() as u8).collect::<Vec<u8>>())
            }
        })
        .collect::<Vec<_>>()
        .iter()
        .map(|v| v.as_deref())
        .collect();
    let columns: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from_iter_values(0..rows as i64)),
        Arc::new(u),
        Arc::new(ts_s),
        Arc::new(ts_ms),
        Arc::new(ts_us),
        Arc::new(ts_ns),
        Arc::new(t_s),
        Arc::new(t_ms),
        Arc::new(t_us),
        Arc::new(t_ns),
        Arc::new(d38.with_precision_and_scale(38, 4).unwrap()),
        Arc::new(d20.with_precision_and_scale(20, 2).unwrap()),
        Arc::new(bin),
    ];
    RecordBatch::try_new(schema(), columns).unwrap()
}

fn source_of(name: &str, batches: Vec<RecordBatch>) -> TableSource {
    let schema = batches[0].schema();
    let part: PartSource = Box::new(move || {
        let it: BatchIter = Box::new(batches.into_iter().map(Ok));
        Ok(it)
    });
    TableSource { name: name.into(), schema, parts: vec![part], description: "test".into(), rows_estimate: 0 }
}

fn sorted_by_id(batches: &[RecordBatch]) -> RecordBatch {
    let all = concat_batches(&batches[0].schema(), batches).unwrap();
    let order = sort_to_indices(all.column(0), None, None).unwrap();
    take_record_batch(&all, &order).unwrap()
}

fn assert_same(found: &RecordBatch, expected: &RecordBatch, what: &str) {
    assert_eq!(found.num_rows(), expected.num_rows(), "{what}: rows");
    for (i, field) in expected.schema().fields().iter().enumerate() {
        assert_eq!(found.column(i).data_type(), field.data_type(), "{what}: type of {}", field.name());
        assert!(found.column(i).to_data() == expected.column(i).to_data(), "{what}: values of {}", field.name());
    }
}

#[test]
fn every_new_type_round_trips_through_heap_and_column_store() {
    let tmp = tempfile::tempdir().unwrap();
    let db_dir = tmp.path().join("db");
    // 3 batches x 1500 rows: many heap pages per partition, edge values in each batch.
    let batches: Vec<RecordBatch> = (0..3).map(|k| {
        let b = types_batch(1500, k);
        let ids: ArrayRef = Arc::new(Int64Array::from_iter_values((0..1500).map(|i| i + 1500 * k as i64)));
        let mut columns = b.columns().to_vec();
        columns[0] = ids;
        RecordBatch::try_new(b.schema(), columns).unwrap()
    }).collect();
    let expected = sorted_by_id(&batches);
    let options = LoadOptions { partition_count: 3, threads: 2, ..LoadOptions::default() };
    load_table(&db_dir, source_of("t", batches), &options).unwrap();

    let db = Database::open(&db_dir).unwrap();
    let table = db.table("t").unwrap();
    let types: Vec<ColumnType> = table.columns.iter().map(|c| c.column_type).collect();
    assert!(types.contains(&ColumnType::WideDecimal { precision: 38, scale: 4 }));
    assert!(types.contains(&ColumnType::Binary));
    let all: Vec<usize> = (0..table.columns.len()).collect();
    assert_same(&sorted_by_id(&read_table(&db, table, &all).unwrap()), &expected, "heap");

    for target in ["row", "page", "columnstore", "columnstore_archive"] {
        let into = format!("t_{target}");
        let options = RebuildOptions { into_table: Some(into.clone()), row_group_rows: Some(1000), ..RebuildOptions::default() };
        rebuild_table(&db_dir, "t", RebuildTarget::parse(target).unwrap(), &options).unwrap();
        let db = Database::open(&db_dir).unwrap();
        let table = db.table(&into).unwrap();
        assert_same(&sorted_by_id(&read_table(&db, table, &all).unwrap()), &expected, target);
    }
    // And back from the column store to the heap.
    rebuild_table(&db_dir, "t_columnstore", RebuildTarget::parse("page").unwrap(), &RebuildOptions { into_table: Some("back".into()), ..RebuildOptions::default() }).unwrap();
    let db = Database::open(&db_dir).unwrap();
    assert_same(&sorted_by_id(&read_table(&db, db.table("back").unwrap(), &all).unwrap()), &expected, "columnstore -> page");
}

/// Min/max of a row group column as the segment recorded them.
fn stats(reader: &RowGroupReader, column: usize) -> (Option<StatValue>, Option<StatValue>) {
    let s = reader.column_stats(column);
    (s.min, s.max)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// Segments of every new type: round trip with NULLs, and min/max equal to the valid
    /// values' (or absent where the type's i64 order would be wrong).
    #[test]
    fn segments_round_trip_with_true_min_max(seed in any::<u64>(), rows in 1usize..400, archive in any::<bool>(), start in 0usize..8) {
        let batch = types_batch(rows + 8, seed);
        // Slices have non-zero offsets in their buffers and bitmaps.
        let batch = batch.slice(start, batch.num_rows() - start);
        let options = ColumnStoreOptions { row_group_rows: 10_000, archive };
        let bytes = encode_row_group(&batch, &options).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let reader = RowGroupReader::open(&bytes, Path::new("p.fscol"), 0).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let all: Vec<usize> = (0..batch.num_columns()).collect();
        let back = reader.read_columns(&all).map_err(|e| TestCaseError::fail(e.to_string()))?;
        for i in 0..batch.num_columns() {
            prop_assert!(back.column(i).to_data() == batch.column(i).to_data(), "column {}", batch.schema().field(i).name());
        }
        // Timestamps: min/max are the valid values' extremes.
        let ts = batch.column(4).as_any().downcast_ref::<TimestampMicrosecondArray>().unwrap();
        let valid: Vec<i64> = ts.iter().flatten().collect();
        prop_assert_eq!(stats(&reader, 4), (valid.iter().min().map(|v| StatValue::Int64(*v)), valid.iter().max().map(|v| StatValue::Int64(*v))));
        // UInt64: only when every value is below 2^63.
        let u = batch.column(1).as_any().downcast_ref::<UInt64Array>().unwrap();
        let valid: Vec<u64> = u.iter().flatten().collect();
        let (min, max) = stats(&reader, 1);
        if valid.iter().all(|v| *v < 1 << 63) && !valid.is_empty() {
            prop_assert_eq!(min, valid.iter().min().map(|v| StatValue::Int64(*v as i64)));
            prop_assert_eq!(max, valid.iter().max().map(|v| StatValue::Int64(*v as i64)));
        } else {
            prop_assert!(min.is_none() && max.is_none());
        }
        // Wide decimals: min/max only when every value fits an i64, then exact.
        for column in [10usize, 11] {
            let d = batch.column(column).as_any().downcast_ref::<Decimal128Array>().unwrap();
            let valid: Vec<i128> = d.iter().flatten().collect();
            let (min, max) = stats(&reader, column);
            if !valid.is_empty() && valid.iter().all(|v| i64::try_from(*v).is_ok()) {
                prop_assert_eq!(min, valid.iter().min().map(|v| StatValue::Int64(*v as i64)));
                prop_assert_eq!(max, valid.iter().max().map(|v| StatValue::Int64(*v as i64)));
            } else {
                prop_assert!(min.is_none() && max.is_none());
            }
        }
        prop_assert_eq!(stats(&reader, 12), (None, None));
    }

    /// Heap rows of the new types: encode, decode, same values (the general row codec).
    #[test]
    fn heap_rows_round_trip(u in any::<u64>(), ts in any::<i64>(), t in any::<i32>(), wide in -MAX38..=MAX38, bin in proptest::collection::vec(any::<u8>(), 0..100), nulls in any::<u8>()) {
        let types = [
            ColumnType::UInt64,
            ColumnType::Timestamp { unit: flashscan_storage::column::TemporalUnit::Nanosecond, with_time_zone: true },
            ColumnType::Time { unit: flashscan_storage::column::TemporalUnit::Millisecond },
            ColumnType::WideDecimal { precision: 38, scale: 0 },
            ColumnType::Binary,
        ];
        let layout = RowLayout::from_types(&types);
        let values = [Value::UInt64(u), Value::Int64(ts), Value::Int32(t), Value::Int128(wide), Value::Binary(bin)];
        let values: Vec<Value> = values.into_iter().enumerate().map(|(i, v)| if nulls & (1 << i) != 0 { Value::Null } else { v }).collect();
        let mut buf = Vec::new();
        encode_row(&layout, &values, &mut buf).map_err(|len| TestCaseError::fail(format!("row of {len} bytes")))?;
        let back = decode_row(&layout, &buf).map_err(TestCaseError::fail)?;
        prop_assert_eq!(back, values);
    }
}

/// A column empty for its first 20,000 rows (real weather data) and a column empty in every
/// row: the first gets its later values' type, the second loads as nullable text.
#[test]
fn csv_types_come_from_the_whole_file() {
    let tmp = tempfile::tempdir().unwrap();
    let csv = tmp.path().join("weather.csv");
    let mut text = String::from("id,gust,note,at\n");
    for i in 0..25_000 {
        let gust = if i < 20_000 { String::new() } else { format!("{}.5", i % 40) };
        text.push_str(&format!("{i},{gust},,2024-01-0{} 10:00:00\n", 1 + i % 9));
    }
    std::fs::write(&csv, text).unwrap();
    let source = csv_source(&csv, "weather").unwrap();
    let types: Vec<DataType> = source.schema.fields().iter().map(|f| f.data_type().clone()).collect();
    assert_eq!(types[1], DataType::Float64, "late values decide the type");
    assert_eq!(types[2], DataType::Utf8, "an all-empty column is text");
    assert!(matches!(types[3], DataType::Timestamp(_, None)), "{:?}", types[3]);
    let db_dir = tmp.path().join("db");
    load_table(&db_dir, source, &LoadOptions { partition_count: 2, threads: 2, ..LoadOptions::default() }).unwrap();
    let db = Database::open(&db_dir).unwrap();
    let table = db.table("weather").unwrap();
    assert_eq!(table.row_count, 25_000);
    assert!(table.columns[2].nullable);
    let batch = sorted_by_id(&read_table(&db, table, &[0, 1, 2]).unwrap());
    assert_eq!(batch.column(1).null_count(), 20_000);
    assert_eq!(batch.column(2).null_count(), 25_000);
}

#[test]
fn csv_options_and_errors_name_file_line_and_column() {
    let tmp = tempfile::tempdir().unwrap();
    let csv = tmp.path().join("semi.csv");
    std::fs::write(&csv, "1;'a;b';NA\n2;'c';7\n3;NA;8\n").unwrap();
    let options = CsvOptions { delimiter: b';', quote: b'\'', has_header: false, null_string: Some("NA".into()), schema: Some("column_3:bigint".into()) };
    let source = csv_source_with(&csv, "semi", &options).unwrap();
    assert_eq!(source.schema.field(2).data_type(), &DataType::Int64);
    let db_dir = tmp.path().join("db");
    load_table(&db_dir, source, &LoadOptions { partition_count: 1, threads: 1, ..LoadOptions::default() }).unwrap();
    let db = Database::open(&db_dir).unwrap();
    let batch = sorted_by_id(&read_table(&db, db.table("semi").unwrap(), &[0, 1, 2]).unwrap());
    let text = batch.column(1).as_any().downcast_ref::<arrow::array::StringArray>().unwrap();
    assert_eq!(text.value(0), "a;b");
    assert!(text.is_null(2), "NA is NULL");
    assert_eq!(batch.column(2).null_count(), 1);

    // A declared type the data breaks: the error names the file, the line and the column.
    let bad = tmp.path().join("bad.csv");
    std::fs::write(&bad, "id,qty\n1,5\n2,five\n").unwrap();
    let options = CsvOptions { schema: Some("qty:int".into()), ..CsvOptions::default() };
    let error = load_table(&tmp.path().join("db2"), csv_source_with(&bad, "bad", &options).unwrap(), &LoadOptions::default()).unwrap_err().to_string();
    assert!(error.contains("bad.csv") && error.contains("line 3") && error.contains("\"qty\""), "{error}");
    assert!(!error.contains('\n'), "{error}");
    // Nested types are refused by name, with what to do.
    let list = DataType::List(Arc::new(Field::new("item", DataType::Int32, true)));
    let error = ColumnType::from_arrow("tags", &list).unwrap_err().to_string();
    assert!(error.contains("\"tags\"") && error.contains("to_json"), "{error}");
}
