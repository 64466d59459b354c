//! Every Arrow type flashscan stores, through Parquet -> flashscan (heap and column store)
//! -> `COPY TO` Parquet: the file written holds the values that were loaded, with the same
//! types. Also: `COPY TO` CSV, a taken name refused, and range filters on the new ordered
//! types answering what a scan of the source in Rust answers (with row groups skipped).

use std::path::Path;
use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, AsArray, BinaryArray, BooleanArray, Date32Array, Decimal128Array, Float64Array, Int32Array, Int64Array, RecordBatch,
    StringArray, Time32MillisecondArray, Time32SecondArray, Time64MicrosecondArray, Time64NanosecondArray, TimestampMicrosecondArray,
    TimestampMillisecondArray, TimestampNanosecondArray, TimestampSecondArray, UInt64Array,
};
use arrow::compute::{concat_batches, sort_to_indices, take_record_batch};
use arrow::datatypes::{Field, Schema, TimestampMicrosecondType};
use flashscan_sql::{FlashscanSession, SessionOptions};
use flashscan_storage::load::parquet::parquet_files_source;
use flashscan_storage::{load_table, rebuild_table, LoadOptions, RebuildOptions, RebuildTarget};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::arrow::ArrowWriter;

const ROWS_PER_FILE: i64 = 3000;
const MAX38: i128 = 99_999_999_999_999_999_999_999_999_999_999_999_999;

/// Rows `first..first + ROWS_PER_FILE` of a table with one column of every stored type.
/// Values are functions of the id (so the oracle is the batch itself); every column but
/// the id has NULLs.
fn batch(first: i64) -> RecordBatch {
    let ids: Vec<i64> = (first..first + ROWS_PER_FILE).collect();
    let utc = Some(Arc::from("UTC"));
    let ts_us_of = |i: i64| 1_600_000_000_000_000 + i * 3_600_000_000;
    let columns: Vec<(&str, ArrayRef)> = vec![
        ("id", Arc::new(Int64Array::from(ids.clone()))),
        ("i32", Arc::new(ids.iter().map(|&i| opt(i, i as i32 - 1000)).collect::<Int32Array>())),
        ("f64", Arc::new(ids.iter().map(|&i| opt(i, i as f64 / 7.0)).collect::<Float64Array>())),
        ("b", Arc::new(ids.iter().map(|&i| opt(i, i % 3 == 0)).collect::<BooleanArray>())),
        ("s", Arc::new(ids.iter().map(|&i| opt(i, format!("row {i}"))).collect::<StringArray>())),
        ("d", Arc::new(ids.iter().map(|&i| opt(i, i as i32)).collect::<Date32Array>())),
        ("dec", Arc::new(ids.iter().map(|&i| opt(i, i as i128 * 101 - 5)).collect::<Decimal128Array>().with_precision_and_scale(15, 2).unwrap())),
        (
            "dec38",
            Arc::new(
                ids.iter()
                    .map(|&i| opt(i, if i == 0 { MAX38 } else if i == 1 { -MAX38 } else { (i as i128) * 1_000_000_000_000_000_000_000 }))
                    .collect::<Decimal128Array>()
                    .with_precision_and_scale(38, 6)
                    .unwrap(),
            ),
        ),
        ("u64", Arc::new(ids.iter().map(|&i| opt(i, if i == 2 { u64::MAX } else { i as u64 * 1_000 })).collect::<UInt64Array>())),
        ("ts_s", Arc::new(ids.iter().map(|&i| opt(i, ts_us_of(i) / 1_000_000)).collect::<TimestampSecondArray>())),
        ("ts_ms", Arc::new(ids.iter().map(|&i| opt(i, ts_us_of(i) / 1_000)).collect::<TimestampMillisecondArray>().with_timezone_opt(utc.clone()))),
        ("ts_us", Arc::new(ids.iter().map(|&i| opt(i, ts_us_of(i))).collect::<TimestampMicrosecondArray>().with_timezone_opt(utc))),
        ("ts_ns", Arc::new(ids.iter().map(|&i| opt(i, ts_us_of(i) * 1_000)).collect::<TimestampNanosecondArray>())),
        ("t_s", Arc::new(ids.iter().map(|&i| opt(i, (i % 86_400) as i32)).collect::<Time32SecondArray>())),
        ("t_ms", Arc::new(ids.iter().map(|&i| opt(i, (i * 7 % 86_400_000) as i32)).collect::<Time32MillisecondArray>())),
        ("t_us", Arc::new(ids.iter().map(|&i| opt(i, i * 13 % 86_400_000_000)).collect::<Time64MicrosecondArray>())),
        ("t_ns", Arc::new(ids.iter().map(|&i| opt(i, i * 17 % 86_400_000_000_000)).collect::<Time64NanosecondArray>())),
        (
            "bin",
            Arc::new(ids.iter().map(|&i| opt(i, (0..(i % 9) as u8).map(|k| k.wrapping_mul(i as u8)).collect::<Vec<u8>>())).collect::<Vec<_>>().iter().map(|v| v.as_deref()).collect::<BinaryArray>()),
        ),
    ];
    let fields: Vec<Field> = columns.iter().map(|(n, a)| Field::new(*n, a.data_type().clone(), *n != "id")).collect();
    RecordBatch::try_new(Arc::new(Schema::new(fields)), columns.into_iter().map(|(_, a)| a).collect()).unwrap()
}

/// Every column but the id is NULL in one row of eleven.
fn opt<T>(i: i64, v: T) -> Option<T> {
    if i % 11 == 5 { None } else { Some(v) }
}

fn write_parquet(path: &Path, batch: &RecordBatch) {
    let file = std::fs::File::create(path).unwrap();
    let mut writer = ArrowWriter::try_new(file, batch.schema(), None).unwrap();
    writer.write(batch).unwrap();
    writer.close().unwrap();
}

fn read_parquet(path: &Path) -> RecordBatch {
    let reader = ParquetRecordBatchReaderBuilder::try_new(std::fs::File::open(path).unwrap()).unwrap().build().unwrap();
    let batches: Vec<RecordBatch> = reader.map(|b| b.unwrap()).collect();
    concat_batches(&batches[0].schema(), &batches).unwrap()
}

fn sorted_by_id(batch: &RecordBatch) -> RecordBatch {
    take_record_batch(batch, &sort_to_indices(batch.column(0), None, None).unwrap()).unwrap()
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap()
}

#[test]
fn parquet_to_flashscan_to_copy_to_parquet_keeps_every_value() {
    let tmp = tempfile::tempdir().unwrap();
    let files = [tmp.path().join("part-0.parquet"), tmp.path().join("part-1.parquet")];
    let sources = [batch(0), batch(ROWS_PER_FILE)];
    for (f, b) in files.iter().zip(&sources) {
        write_parquet(f, b);
    }
    let expected = concat_batches(&sources[0].schema(), &sources).unwrap();
    let db = tmp.path().join("db");
    // Two files, one table.
    let source = parquet_files_source(&files, "t", 2).unwrap();
    load_table(&db, source, &LoadOptions { partition_count: 3, threads: 2, ..LoadOptions::default() }).unwrap();
    for target in ["page", "columnstore"] {
        let options = RebuildOptions { into_table: Some(format!("t_{target}")), row_group_rows: Some(1000), ..RebuildOptions::default() };
        rebuild_table(&db, "t", RebuildTarget::parse(target).unwrap(), &options).unwrap();
    }
    let session = FlashscanSession::open(&db, SessionOptions::default()).unwrap();
    let rt = runtime();
    for table in ["t", "t_page", "t_columnstore"] {
        let out = tmp.path().join(format!("{table}.parquet"));
        let sql = format!("COPY (SELECT * FROM {table} ORDER BY id) TO '{}'", out.display());
        let answer = rt.block_on(session.run_one(&sql)).unwrap_or_else(|e| panic!("{sql}: {e}"));
        let count = answer.batches[0].column(0).as_primitive::<arrow::datatypes::UInt64Type>().value(0);
        assert_eq!(count, 2 * ROWS_PER_FILE as u64);
        let written = sorted_by_id(&read_parquet(&out));
        assert_eq!(written.num_columns(), expected.num_columns());
        for (i, field) in expected.schema().fields().iter().enumerate() {
            assert_eq!(written.column(i).data_type(), field.data_type(), "{table}: type of {}", field.name());
            assert!(written.column(i).to_data() == expected.column(i).to_data(), "{table}: values of {}", field.name());
        }
        // A taken name is refused before the query runs, and the file stays as it was.
        let before = std::fs::read(&out).unwrap();
        let error = rt.block_on(session.run_one(&sql)).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(error.contains("exists") && !error.contains('\n'), "{error}");
        assert_eq!(std::fs::read(&out).unwrap(), before);
    }
    // CSV out, with a header and one line per row.
    let csv = tmp.path().join("ids.csv");
    rt.block_on(session.run_one(&format!("COPY (SELECT id, ts_us, dec38 FROM t_columnstore WHERE id < 3 ORDER BY id) TO '{}'", csv.display()))).unwrap();
    let text = std::fs::read_to_string(&csv).unwrap();
    assert_eq!(text.lines().count(), 4, "{text}");
    assert!(text.contains("99999999999999999999999999999999.999999"), "{text}");
}

#[test]
fn range_filters_on_new_types_answer_like_the_source() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("t.parquet");
    let source = batch(0);
    write_parquet(&file, &source);
    let db = tmp.path().join("db");
    load_table(&db, parquet_files_source(&[file], "t", 2).unwrap(), &LoadOptions { partition_count: 2, threads: 2, ..LoadOptions::default() }).unwrap();
    let options = RebuildOptions { into_table: Some("cs".into()), row_group_rows: Some(250), ..RebuildOptions::default() };
    rebuild_table(&db, "t", RebuildTarget::parse("columnstore").unwrap(), &options).unwrap();
    let session = FlashscanSession::open(&db, SessionOptions::default()).unwrap();
    let rt = runtime();
    let ts = source.column_by_name("ts_us").unwrap().as_primitive::<TimestampMicrosecondType>();
    let bound = 1_600_000_000_000_000 + 2000 * 3_600_000_000i64;
    let want = ts.iter().flatten().filter(|v| *v >= bound).count() as i64;
    for table in ["t", "cs"] {
        let sql = format!("SELECT count(*) FROM {table} WHERE ts_us >= to_timestamp_micros({bound})");
        let answer = rt.block_on(session.run_one(&sql)).unwrap_or_else(|e| panic!("{sql}: {e}"));
        assert_eq!(answer.batches[0].column(0).as_primitive::<arrow::datatypes::Int64Type>().value(0), want, "{sql}");
        let sql = format!("SELECT count(*) FROM {table} WHERE u64 > 2000000");
        let want_u = source.column_by_name("u64").unwrap().as_primitive::<arrow::datatypes::UInt64Type>().iter().flatten().filter(|v| *v > 2_000_000).count() as i64;
        let answer = rt.block_on(session.run_one(&sql)).unwrap_or_else(|e| panic!("{sql}: {e}"));
        assert_eq!(answer.batches[0].column(0).as_primitive::<arrow::datatypes::Int64Type>().value(0), want_u, "{sql}");
    }
    // The column store skipped row groups for the timestamp range (ids rise with time).
    let answer = rt.block_on(session.run_one(&format!("SELECT count(*) FROM cs WHERE ts_us >= to_timestamp_micros({bound})"))).unwrap();
    let scanned = answer.scan_total().rows_scanned;
    assert!(scanned < ROWS_PER_FILE as u64, "scanned {scanned} rows of {ROWS_PER_FILE}");
}
