//! A seeded mini-fuzzer run by `cargo test`: mutated and random bytes go to every decoder
//! that reads from disk; each must return Ok or Err, never panic. Half the mutants get their
//! checksums recomputed so the bytes reach the codecs instead of stopping at the CRC.
//! (fuzz/ holds the cargo-fuzz targets for longer runs with coverage guidance.)

use std::path::Path;
use std::sync::Arc;

use arrow::array::{ArrayRef, BooleanArray, Date32Array, Decimal128Array, Float64Array, Int32Array, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema};
use flashscan_storage::columnstore::{decode_segment, encode_row_group_with_codecs, ColumnStoreOptions, Location, RowGroupReader, SegmentView};
use flashscan_storage::compression::{decode_integers, decode_strings, CodecId};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

const SEGMENT_HEADER_BYTES: usize = 80;
const SEGMENT_CHECKSUM_AT: usize = 12;
const ROW_GROUP_CHECKSUM_AT: usize = 40;
const ROW_GROUP_METADATA_BYTES_AT: usize = 32;

/// The documented segment checksum: crc32c of the header with its checksum field as zero, then the body.
fn reseal_segment(segment: &mut [u8]) {
    if segment.len() < SEGMENT_HEADER_BYTES {
        return;
    }
    segment[SEGMENT_CHECKSUM_AT..SEGMENT_CHECKSUM_AT + 4].fill(0);
    let crc = crc32c::crc32c(segment);
    segment[SEGMENT_CHECKSUM_AT..SEGMENT_CHECKSUM_AT + 4].copy_from_slice(&crc.to_le_bytes());
}

fn reseal_row_group(bytes: &mut [u8]) {
    if bytes.len() < 64 {
        return;
    }
    let metadata_bytes = u64::from_le_bytes(bytes[ROW_GROUP_METADATA_BYTES_AT..][..8].try_into().unwrap());
    let Ok(metadata_bytes) = usize::try_from(metadata_bytes) else { return };
    if metadata_bytes < 64 || metadata_bytes > bytes.len() {
        return;
    }
    bytes[ROW_GROUP_CHECKSUM_AT..ROW_GROUP_CHECKSUM_AT + 4].fill(0);
    let crc = crc32c::crc32c(&bytes[..metadata_bytes]);
    bytes[ROW_GROUP_CHECKSUM_AT..ROW_GROUP_CHECKSUM_AT + 4].copy_from_slice(&crc.to_le_bytes());
}

fn corpus_batch(rows: usize) -> RecordBatch {
    let columns: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from((0..rows as i64).map(|i| if i % 9 == 0 { None } else { Some(i * 1000 - 7) }).collect::<Vec<_>>())),
        Arc::new(Int32Array::from((0..rows as i32).map(|i| i / 50).collect::<Vec<_>>())),
        Arc::new(Int64Array::from((0..rows as i64).map(|i| [i64::MIN, 3, i64::MAX][i as usize % 3]).collect::<Vec<_>>())),
        Arc::new(Float64Array::from((0..rows).map(|i| i as f64 / 3.0).collect::<Vec<_>>())),
        Arc::new(Decimal128Array::from((0..rows as i128).collect::<Vec<_>>()).with_precision_and_scale(15, 2).unwrap()),
        Arc::new(Date32Array::from((0..rows as i32).map(|i| 9000 + i % 30).collect::<Vec<_>>())),
        Arc::new(StringArray::from((0..rows).map(|i| ["TRUCK", "MAIL", "ÄIR"][i % 3]).collect::<Vec<_>>())),
        Arc::new(StringArray::from((0..rows).map(|i| if i % 4 == 0 { None } else { Some(format!("c{i}")) }).collect::<Vec<_>>())),
        Arc::new(BooleanArray::from((0..rows).map(|i| i % 3 == 0).collect::<Vec<_>>())),
    ];
    let fields: Vec<Field> = columns.iter().enumerate().map(|(i, c)| Field::new(format!("c{i}"), c.data_type().clone(), true)).collect();
    RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).unwrap()
}

/// Row groups with every codec in play, plain and archive.
fn corpus() -> Vec<Vec<u8>> {
    let mut corpus = Vec::new();
    for rows in [0usize, 1, 5, 300, 2100] {
        let batch = corpus_batch(rows);
        for archive in [false, true] {
            let options = ColumnStoreOptions { row_group_rows: 5000, archive };
            for forced in [None, Some(CodecId::Bitpack), Some(CodecId::FastLanes), Some(CodecId::Rle), Some(CodecId::Dictionary), Some(CodecId::Plain)] {
                // Force on the integer and string columns only; others analyze.
                let plan: Vec<Option<CodecId>> = (0..9)
                    .map(|column| match (column, forced) {
                        (0 | 1 | 2 | 4 | 5, codec) => codec,
                        (6 | 7, Some(CodecId::Dictionary | CodecId::Plain)) => forced,
                        _ => None,
                    })
                    .collect();
                if let Ok(bytes) = encode_row_group_with_codecs(&batch, &options, &plan) {
                    corpus.push(bytes);
                }
            }
        }
    }
    corpus
}

fn mutate(rng: &mut SmallRng, bytes: &mut Vec<u8>, limit: usize) {
    match rng.gen_range(0..5) {
        0 | 1 => {
            for _ in 0..rng.gen_range(1..4) {
                if !bytes.is_empty() {
                    let at = rng.gen_range(0..bytes.len().min(limit.max(1)));
                    bytes[at] ^= 1 << rng.gen_range(0..8);
                }
            }
        }
        2 => {
            if !bytes.is_empty() {
                let at = rng.gen_range(0..bytes.len().min(limit.max(1)));
                bytes[at] = rng.gen();
            }
        }
        3 => {
            let new_len = rng.gen_range(0..=bytes.len());
            bytes.truncate(new_len);
        }
        _ => {
            // Overwrite a u64-sized field with an interesting value.
            if bytes.len() >= 8 {
                let at = rng.gen_range(0..bytes.len().min(limit.max(8)) - 7);
                let value: u64 = [0, 1, u64::MAX, u32::MAX as u64, 1 << 40, rng.gen()][rng.gen_range(0..6)];
                bytes[at..at + 8].copy_from_slice(&value.to_le_bytes());
            }
        }
    }
}

const TYPES: [DataType; 7] =
    [DataType::Int64, DataType::Int32, DataType::Float64, DataType::Decimal128(15, 2), DataType::Date32, DataType::Utf8, DataType::Boolean];

#[test]
fn codec_fuzz_smoke_row_groups_and_segments() {
    let corpus = corpus();
    assert!(corpus.len() > 40, "corpus of {}", corpus.len());
    let mut rng = SmallRng::seed_from_u64(0x5eed);
    let mut decoded_ok = 0usize;
    for iteration in 0..6000 {
        let original = &corpus[iteration % corpus.len()];
        // Whole row group: mutate within the metadata and segments, not only the padding.
        let reader = RowGroupReader::open(original, Path::new("fuzz"), 0).unwrap();
        let used = (0..reader.column_count()).map(|c| reader.column_byte_range(c)).map(|(o, l)| (o + l) as usize).max().unwrap_or(64);
        let mut bytes = original.clone();
        mutate(&mut rng, &mut bytes, used);
        if rng.gen_bool(0.5) {
            reseal_row_group(&mut bytes);
        }
        if let Ok(reader) = RowGroupReader::open(&bytes, Path::new("fuzz"), 0) {
            let all: Vec<usize> = (0..reader.column_count()).collect();
            decoded_ok += usize::from(reader.read_columns(&all).is_ok());
        }

        // One segment: mutate, reseal half the time, decode as every type.
        let column = rng.gen_range(0..reader.column_count());
        let (offset, length) = reader.column_byte_range(column);
        let mut segment = original[offset as usize..(offset + length) as usize].to_vec();
        mutate(&mut rng, &mut segment, usize::MAX);
        if rng.gen_bool(0.7) {
            reseal_segment(&mut segment);
        }
        for data_type in &TYPES {
            decoded_ok += usize::from(decode_segment(&segment, data_type).is_ok());
        }
        // Plain strings a slice at a time: Ok or Err, never a panic.
        if let Ok(view) = SegmentView::open(&segment, &Location::in_memory()) {
            if let Ok(Some(strings)) = view.plain_strings() {
                let slice_rows = rng.gen_range(1..700);
                let mut start = 0;
                while start < strings.value_count() {
                    let rows = slice_rows.min(strings.value_count() - start);
                    match strings.slice(start, rows) {
                        Ok((offsets, bytes)) => assert_eq!(offsets.len(), rows + 1, "{} bytes", bytes.len()),
                        Err(_) => break,
                    }
                    start += rows;
                }
            }
        }
    }
    // Some mutants must survive (resealed flips of a stat byte, padding), or the fuzzer is not reaching anything.
    assert!(decoded_ok > 0);
}

#[test]
fn codec_fuzz_smoke_raw_payloads() {
    let mut rng = SmallRng::seed_from_u64(0xc0dec);
    for _ in 0..20_000 {
        let length = rng.gen_range(0..200);
        let mut payload: Vec<u8> = (0..length).map(|_| rng.gen()).collect();
        // Small counts and widths make deeper paths reachable.
        if payload.len() >= 10 && rng.gen_bool(0.5) {
            payload[8] = rng.gen_range(0..66);
            payload[..4].copy_from_slice(&(rng.gen_range(0u32..5)).to_le_bytes());
        }
        let value_count = rng.gen_range(0..3000);
        for codec in [CodecId::Constant, CodecId::Plain, CodecId::Bitpack, CodecId::FastLanes, CodecId::Rle, CodecId::Dictionary, CodecId::Bitmap] {
            let mut out = vec![0i64; value_count];
            let _ = decode_integers(codec, &payload, &mut out);
            let mut out = vec![0i32; value_count];
            let _ = decode_integers(codec, &payload, &mut out);
            let _ = decode_strings(codec, &payload, value_count, None);
        }
    }
}
