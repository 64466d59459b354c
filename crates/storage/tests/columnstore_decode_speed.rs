//! Decode throughput of 1M-value segments, printed, never asserted (timings belong in
//! bench/). Run: cargo test --release -p flashscan-storage --test columnstore_decode_speed -- --ignored --nocapture

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use arrow::array::{ArrayRef, Int32Array, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{Field, Schema};
use flashscan_storage::columnstore::{encode_row_group_with_codecs, ColumnStoreOptions, RowGroupReader};
use flashscan_storage::compression::CodecId;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

const VALUES: usize = 1 << 20;
const REPEATS: usize = 20;

fn measure(name: &str, array: ArrayRef, codec: Option<CodecId>, archive: bool) {
    let schema = Schema::new(vec![Field::new("x", array.data_type().clone(), false)]);
    let batch = RecordBatch::try_new(Arc::new(schema), vec![array]).unwrap();
    let options = ColumnStoreOptions { row_group_rows: VALUES, archive };
    let bytes = encode_row_group_with_codecs(&batch, &options, &[codec]).unwrap();
    let reader = RowGroupReader::open(&bytes, Path::new("speed"), 0).unwrap();
    let warm = reader.read_columns(&[0]).unwrap();
    // Output bytes: the Arrow buffers produced (values, offsets, string bytes).
    let output_bytes: usize = warm.column(0).to_data().buffers().iter().map(|buffer| buffer.len()).sum();
    let start = Instant::now();
    for _ in 0..REPEATS {
        std::hint::black_box(reader.read_columns(&[0]).unwrap());
    }
    let seconds = start.elapsed().as_secs_f64() / REPEATS as f64;
    println!(
        "{name:<34} {:<10} {:>8} stored bytes  {:>6.2} ms  {:>6.2} GB/s decoded  {:>7.1} M values/s",
        reader.column_stats(0).codec.name(),
        reader.column_stats(0).encoded_bytes,
        seconds * 1e3,
        output_bytes as f64 / seconds / 1e9,
        VALUES as f64 / seconds / 1e6
    );
}

#[test]
#[ignore = "timing; run by hand with --release --ignored --nocapture"]
fn columnstore_decode_speed_1m_values() {
    let mut rng = SmallRng::seed_from_u64(1);
    let narrow: Vec<i64> = (0..VALUES).map(|_| rng.gen_range(0..100_000)).collect();
    let keys: Vec<i64> = (0..VALUES as i64).map(|i| i * 4 + rng.gen_range(0..4)).collect();
    let wide: Vec<i64> = (0..VALUES).map(|_| rng.gen()).collect();
    let dates: Vec<i32> = (0..VALUES).map(|_| 8000 + rng.gen_range(0..2500)).collect();
    let few: Vec<i64> = (0..VALUES).map(|_| [i64::MIN, 7, i64::MAX][rng.gen_range(0..3)]).collect();
    let runs: Vec<i64> = (0..VALUES as i64).map(|i| i / 1000).collect();
    let modes = ["AIR", "FOB", "MAIL", "RAIL", "REG AIR", "SHIP", "TRUCK"];
    let shipmode: Vec<&str> = (0..VALUES).map(|_| modes[rng.gen_range(0..7)]).collect();
    let comments: Vec<String> = (0..VALUES).map(|i| format!("comment {i} furiously")).collect();

    measure("i64 17-bit bitpack", Arc::new(Int64Array::from(narrow.clone())), Some(CodecId::Bitpack), false);
    measure("i64 increasing keys (bitpack)", Arc::new(Int64Array::from(keys)), None, false);
    measure("i64 random (plain)", Arc::new(Int64Array::from(wide)), None, false);
    measure("i32 dates 12-bit (bitpack)", Arc::new(Int32Array::from(dates)), Some(CodecId::Bitpack), false);
    measure("i64 3 distinct wide (dictionary)", Arc::new(Int64Array::from(few)), None, false);
    measure("i64 runs of 1000 (rle)", Arc::new(Int64Array::from(runs)), None, false);
    measure("i64 17-bit bitpack + zstd archive", Arc::new(Int64Array::from(narrow)), Some(CodecId::Bitpack), true);
    measure("utf8 shipmode (dictionary)", Arc::new(StringArray::from(shipmode)), None, false);
    measure("utf8 unique comments (plain)", Arc::new(StringArray::from(comments)), None, false);
}
