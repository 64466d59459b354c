//! Size of TPC-H lineitem at SF 0.01 (60,175 rows) in the column store and its archive
//! variant, against the raw Arrow data. Prints bytes per row and per-column codecs; asserts
//! only that the column store is smaller than Arrow and the data round-trips.

use std::path::Path;
use std::sync::Arc;

use arrow::array::{Array, RecordBatch};
use arrow::compute::{cast, concat_batches};
use arrow::datatypes::{DataType, Field, Schema};
use flashscan_storage::columnstore::{encode_row_group, ColumnStoreOptions, RowGroupReader};
use tpchgen::generators::LineItemGenerator;
use tpchgen_arrow::LineItemArrow;

/// lineitem at `scale_factor`, string columns cast from Utf8View to Utf8 (what we store).
fn lineitem(scale_factor: f64) -> RecordBatch {
    let batches: Vec<RecordBatch> = LineItemArrow::new(LineItemGenerator::new(scale_factor, 1, 1))
        .with_batch_size(8192)
        .collect::<Result<_, _>>()
        .unwrap();
    let batch = concat_batches(&batches[0].schema(), &batches).unwrap();
    let fields: Vec<Field> = batch
        .schema()
        .fields()
        .iter()
        .map(|field| {
            let data_type = if *field.data_type() == DataType::Utf8View { DataType::Utf8 } else { field.data_type().clone() };
            Field::new(field.name(), data_type, field.is_nullable())
        })
        .collect();
    let columns = batch
        .columns()
        .iter()
        .zip(&fields)
        .map(|(array, field)| cast(array, field.data_type()).unwrap())
        .collect();
    RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).unwrap()
}

/// Bytes of the Arrow buffers themselves (values, offsets, validity), not allocator slack.
fn arrow_bytes(batch: &RecordBatch) -> usize {
    batch.columns().iter().map(|array| array.to_data().buffers().iter().map(|b| b.len()).sum::<usize>() + array.to_data().nulls().map_or(0, |n| n.buffer().len())).sum()
}

#[test]
fn columnstore_tpch_lineitem_size() {
    let batch = lineitem(0.01);
    let rows = batch.num_rows();
    assert_eq!(rows, 60_175);
    let raw_bytes = arrow_bytes(&batch);

    let mut sizes = Vec::new();
    for archive in [false, true] {
        let options = ColumnStoreOptions { row_group_rows: 1 << 20, archive };
        let bytes = encode_row_group(&batch, &options).unwrap();
        let reader = RowGroupReader::open(&bytes, Path::new("lineitem.fscol"), 0).unwrap();
        let all: Vec<usize> = (0..reader.column_count()).collect();
        let decoded = reader.read_columns(&all).unwrap();
        for (left, right) in decoded.columns().iter().zip(batch.columns()) {
            assert_eq!(left.to_data(), right.to_data());
        }
        println!("{} lineitem SF 0.01, {rows} rows: {} bytes, {:.2} bytes/row", if archive { "archive    " } else { "columnstore" }, bytes.len(), bytes.len() as f64 / rows as f64);
        for column in 0..reader.column_count() {
            let stats = reader.column_stats(column);
            println!(
                "    {:<16} {:<10} {:>9} bytes  {:>6.2} bytes/row",
                batch.schema().field(column).name(),
                stats.codec.name(),
                stats.encoded_bytes,
                stats.encoded_bytes as f64 / rows as f64
            );
        }
        sizes.push(bytes.len());
    }
    println!("raw Arrow (Utf8 strings, i128 decimals): {raw_bytes} bytes, {:.2} bytes/row", raw_bytes as f64 / rows as f64);
    assert!(sizes[0] < raw_bytes, "column store {} >= arrow {raw_bytes}", sizes[0]);
    assert!(sizes[1] <= sizes[0], "archive {} > column store {}", sizes[1], sizes[0]);
}
