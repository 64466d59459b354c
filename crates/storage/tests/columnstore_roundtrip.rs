//! Whole row groups round trip: every supported type, with and without nulls, all-null,
//! empty and single-row groups, plain and archive; stats, projections and byte ranges.

use std::path::Path;
use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, BooleanArray, Date32Array, Decimal128Array, Float64Array, Int32Array, Int64Array, RecordBatch,
    StringArray,
};
use arrow::datatypes::{DataType, Field, Schema};
use flashscan_storage::columnstore::{
    decode_segment, encode_row_group, encode_row_group_with_codecs, encode_row_groups, ColumnStoreError,
    ColumnStoreOptions, RowGroupReader, StatValue, ROW_GROUP_ALIGNMENT_BYTES,
};
use flashscan_storage::compression::CodecId;
use proptest::prelude::*;

/// None = null. `null_mode`: 0 no nulls, 1 some, 2 all.
fn with_nulls<T: Clone>(values: Vec<T>, null_mask: &[bool], null_mode: u8) -> Vec<Option<T>> {
    values
        .into_iter()
        .zip(null_mask)
        .map(|(value, is_null)| match null_mode {
            0 => Some(value),
            1 if *is_null => None,
            1 => Some(value),
            _ => None,
        })
        .collect()
}

fn batch_strategy() -> impl Strategy<Value = RecordBatch> {
    (0usize..400, any::<u8>()).prop_flat_map(|(rows, shape)| {
        (
            prop::collection::vec(any::<i32>(), rows),
            prop::collection::vec(prop_oneof![any::<i64>(), (-3i64..3), Just(i64::MIN), Just(i64::MAX)], rows),
            prop::collection::vec(any::<f64>(), rows),
            prop::collection::vec(-999_999_999_999_999_999i64..=999_999_999_999_999_999, rows),
            prop::collection::vec(-100_000i32..100_000, rows),
            prop::collection::vec(prop_oneof!["[A-C]", "\\PC{0,30}"], rows),
            prop::collection::vec(any::<bool>(), rows),
            prop::collection::vec(any::<bool>(), rows),
            prop::collection::vec(0u8..3, 7),
            Just(shape),
        )
    })
    .prop_map(|(ints32, ints64, floats, decimals, dates, strings, bools, null_mask, null_modes, shape)| {
        // Low-cardinality variants half the time, so dictionary and RLE get picked too.
        let ints64: Vec<i64> = if shape % 2 == 0 { ints64 } else { ints64.iter().map(|value| value % 5).collect() };
        let columns: Vec<ArrayRef> = vec![
            Arc::new(Int32Array::from(with_nulls(ints32, &null_mask, null_modes[0]))),
            Arc::new(Int64Array::from(with_nulls(ints64, &null_mask, null_modes[1]))),
            Arc::new(Float64Array::from(with_nulls(floats, &null_mask, null_modes[2]))),
            Arc::new(
                Decimal128Array::from(with_nulls(decimals.into_iter().map(i128::from).collect(), &null_mask, null_modes[3]))
                    .with_precision_and_scale(18, 2)
                    .unwrap(),
            ),
            Arc::new(Date32Array::from(with_nulls(dates, &null_mask, null_modes[4]))),
            Arc::new(StringArray::from(with_nulls(strings, &null_mask, null_modes[5]))),
            Arc::new(BooleanArray::from(with_nulls(bools, &null_mask, null_modes[6]))),
        ];
        let schema = Schema::new(
            ["i32", "i64", "f64", "dec", "date", "utf8", "bool"]
                .iter()
                .zip(&columns)
                .map(|(name, array)| Field::new(*name, array.data_type().clone(), true))
                .collect::<Vec<_>>(),
        );
        RecordBatch::try_new(Arc::new(schema), columns).unwrap()
    })
}

fn assert_batches_equal(decoded: &RecordBatch, expected: &RecordBatch) {
    assert_eq!(decoded.num_rows(), expected.num_rows());
    assert_eq!(decoded.schema().fields(), expected.schema().fields());
    for (index, (left, right)) in decoded.columns().iter().zip(expected.columns()).enumerate() {
        assert_eq!(left.to_data(), right.to_data(), "column {index}");
    }
}

fn round_trip(batch: &RecordBatch, archive: bool) {
    let options = ColumnStoreOptions { row_group_rows: 1000, archive };
    let bytes = encode_row_group(batch, &options).unwrap();
    assert_eq!(bytes.len() % ROW_GROUP_ALIGNMENT_BYTES, 0);
    let reader = RowGroupReader::open(&bytes, Path::new("test.fscol"), 0).unwrap();
    assert_eq!(reader.row_count(), batch.num_rows());
    assert_eq!(reader.column_count(), batch.num_columns());
    assert_eq!(reader.is_archive(), archive);
    let all: Vec<usize> = (0..batch.num_columns()).collect();
    assert_batches_equal(&reader.read_columns(&all).unwrap(), batch);
    for column in 0..batch.num_columns() {
        let array = batch.column(column);
        let stats = reader.column_stats(column);
        assert_eq!(stats.null_count as usize, array.null_count());
        assert_eq!(stats.value_count as usize, batch.num_rows());
        // A segment can be decoded on its own from its byte range.
        let (offset, length) = reader.column_byte_range(column);
        let segment = &bytes[offset as usize..(offset + length) as usize];
        assert_eq!(decode_segment(segment, array.data_type()).unwrap().to_data(), array.to_data());
        if array.null_count() == array.len() {
            assert!(stats.min.is_none());
        }
    }
    // Stats of the Int64 column are its true min and max.
    let int64 = batch.column(1).as_any().downcast_ref::<Int64Array>().unwrap();
    let valid: Vec<i64> = int64.iter().flatten().collect();
    let stats = reader.column_stats(1);
    assert_eq!(stats.min, valid.iter().min().map(|min| StatValue::Int64(*min)));
    assert_eq!(stats.max, valid.iter().max().map(|max| StatValue::Int64(*max)));
    // Projection in any order.
    let projected = reader.read_columns(&[5, 0]).unwrap();
    assert_eq!(projected.schema().field(0).name(), "utf8");
    assert_eq!(projected.column(0).to_data(), batch.column(5).to_data());
    assert_eq!(projected.column(1).to_data(), batch.column(0).to_data());
    assert_eq!(reader.read_columns(&[]).unwrap().num_rows(), batch.num_rows());
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn columnstore_row_group_round_trip(batch in batch_strategy(), archive in any::<bool>()) {
        round_trip(&batch, archive);
    }

    #[test]
    fn columnstore_sliced_batch_round_trip(batch in batch_strategy(), start in 0usize..50) {
        // Slices have non-zero offsets in their buffers and bitmaps.
        let start = start.min(batch.num_rows());
        let sliced = batch.slice(start, batch.num_rows() - start);
        round_trip(&sliced, false);
    }
}

fn one_column(name: &str, array: ArrayRef) -> RecordBatch {
    let schema = Schema::new(vec![Field::new(name, array.data_type().clone(), true)]);
    RecordBatch::try_new(Arc::new(schema), vec![array]).unwrap()
}

#[test]
fn columnstore_forced_codecs_are_used() {
    let values: Vec<i64> = (0..5000).map(|i| i / 100).collect();
    let batch = one_column("x", Arc::new(Int64Array::from(values)));
    let options = ColumnStoreOptions { row_group_rows: 10_000, archive: false };
    for codec in [CodecId::Plain, CodecId::Bitpack, CodecId::FastLanes, CodecId::Rle, CodecId::Dictionary] {
        let bytes = encode_row_group_with_codecs(&batch, &options, &[Some(codec)]).unwrap();
        let reader = RowGroupReader::open(&bytes, Path::new("forced.fscol"), 0).unwrap();
        assert_eq!(reader.column_stats(0).codec, codec);
        assert_eq!(reader.read_columns(&[0]).unwrap().column(0).to_data(), batch.column(0).to_data());
    }
    // Analysis alone picks RLE for these 50 runs.
    let bytes = encode_row_group(&batch, &options).unwrap();
    assert_eq!(RowGroupReader::open(&bytes, Path::new("x"), 0).unwrap().column_stats(0).codec, CodecId::Rle);
    // A codec that cannot apply is an error naming the column.
    let error = encode_row_group_with_codecs(&batch, &options, &[Some(CodecId::Constant)]).unwrap_err();
    assert!(error.to_string().contains("column 0 (x)"), "{error}");
    let strings = one_column("s", Arc::new(StringArray::from(vec!["a", "b", "a"])));
    let error = encode_row_group_with_codecs(&strings, &options, &[Some(CodecId::Rle)]).unwrap_err();
    assert!(matches!(error, ColumnStoreError::Codec { .. }), "{error}");
}

#[test]
fn columnstore_empty_single_and_all_null() {
    let options = ColumnStoreOptions { row_group_rows: 10, archive: false };
    for array in [
        Arc::new(Int64Array::from(Vec::<i64>::new())) as ArrayRef,
        Arc::new(Int64Array::from(vec![i64::MIN])),
        Arc::new(Int64Array::from(vec![None::<i64>; 7])),
        Arc::new(StringArray::from(vec![None::<&str>; 7])),
        Arc::new(StringArray::from(Vec::<&str>::new())),
        Arc::new(BooleanArray::from(vec![None, Some(true)])),
        Arc::new(Float64Array::from(vec![f64::NAN, -0.0, f64::INFINITY])),
    ] {
        let batch = one_column("c", array);
        let bytes = encode_row_group(&batch, &options).unwrap();
        let reader = RowGroupReader::open(&bytes, Path::new("edge.fscol"), 0).unwrap();
        assert_batches_equal(&reader.read_columns(&[0]).unwrap(), &batch);
    }
}

#[test]
fn columnstore_unsupported_types_and_oversized_batches_are_errors() {
    let options = ColumnStoreOptions { row_group_rows: 2, archive: false };
    let batch = one_column("x", Arc::new(Int64Array::from(vec![1, 2, 3])));
    assert!(matches!(encode_row_group(&batch, &options), Err(ColumnStoreError::TooLarge { .. })));
    // encode_row_groups splits instead.
    let bytes = encode_row_groups(&batch, &options).unwrap();
    assert_eq!(bytes.len(), 2 * ROW_GROUP_ALIGNMENT_BYTES);
    let second = RowGroupReader::open(&bytes[ROW_GROUP_ALIGNMENT_BYTES..], Path::new("x"), ROW_GROUP_ALIGNMENT_BYTES as u64).unwrap();
    assert_eq!(second.row_count(), 1);

    // Decimals up to 38 digits are stored (issue 14); wider ones (Decimal256) are not.
    let wide = Decimal128Array::from(vec![1i128, -(10i128.pow(30) - 1)]).with_precision_and_scale(30, 2).unwrap();
    let bytes = encode_row_group(&one_column("wide", Arc::new(wide.clone())), &options).unwrap();
    let reader = RowGroupReader::open(&bytes, Path::new("x"), 0).unwrap();
    assert_eq!(reader.read_columns(&[0]).unwrap().column(0).to_data(), wide.to_data());
    let wider = arrow::array::Decimal256Array::from(vec![arrow::datatypes::i256::from_i128(1)]).with_precision_and_scale(50, 2).unwrap();
    let error = encode_row_group(&one_column("wider", Arc::new(wider)), &options).unwrap_err();
    assert!(matches!(error, ColumnStoreError::UnsupportedType { .. }), "{error}");
    let float32 = one_column("f", Arc::new(arrow::array::Float32Array::from(vec![1.0f32])));
    assert!(encode_row_group(&float32, &options).is_err());
    // A decoded segment of one type asked for as another is a typed error.
    let bytes = encode_row_group(&one_column("x", Arc::new(Int64Array::from(vec![1]))), &options).unwrap();
    let reader = RowGroupReader::open(&bytes, Path::new("x"), 0).unwrap();
    let (offset, length) = reader.column_byte_range(0);
    let error = decode_segment(&bytes[offset as usize..(offset + length) as usize], &DataType::Utf8).unwrap_err();
    assert!(matches!(error, ColumnStoreError::TypeMismatch { .. }), "{error}");
}
