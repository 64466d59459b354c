//! Bad bytes give typed errors that name the file, offset and column — never a panic.

use std::path::Path;
use std::sync::Arc;

use arrow::array::{ArrayRef, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{Field, Schema};
use flashscan_storage::columnstore::{decode_segment, encode_row_group, ColumnStoreError, ColumnStoreOptions, RowGroupReader};

fn sample_batch() -> RecordBatch {
    let ids: ArrayRef = Arc::new(Int64Array::from((0..3000i64).collect::<Vec<_>>()));
    let modes: ArrayRef = Arc::new(StringArray::from((0..3000).map(|i| ["AIR", "SHIP", "RAIL"][i % 3]).collect::<Vec<_>>()));
    let notes: ArrayRef = Arc::new(StringArray::from((0..3000).map(|i| if i % 5 == 0 { None } else { Some(format!("note {i}")) }).collect::<Vec<_>>()));
    let schema = Schema::new(vec![
        Field::new("l_orderkey", ids.data_type().clone(), false),
        Field::new("l_shipmode", modes.data_type().clone(), false),
        Field::new("l_comment", notes.data_type().clone(), true),
    ]);
    RecordBatch::try_new(Arc::new(schema), vec![ids, modes, notes]).unwrap()
}

fn encoded(archive: bool) -> Vec<u8> {
    encode_row_group(&sample_batch(), &ColumnStoreOptions { row_group_rows: 10_000, archive }).unwrap()
}

#[test]
fn columnstore_flipped_byte_in_a_segment_is_a_checksum_error_naming_the_column() {
    for archive in [false, true] {
        let bytes = encoded(archive);
        let reader = RowGroupReader::open(&bytes, Path::new("t.fscol"), 0).unwrap();
        let ranges: Vec<(u64, u64)> = (0..3).map(|column| reader.column_byte_range(column)).collect();
        for (column, (offset, length)) in ranges.into_iter().enumerate() {
            let mut corrupt = bytes.clone();
            // A byte in the body, past the 80-byte segment header.
            let at = (offset + 80 + (length - 80) / 2) as usize;
            corrupt[at] ^= 0x40;
            let reader = RowGroupReader::open(&corrupt, Path::new("/data/t.fscol"), 1 << 20).unwrap();
            let error = reader.read_columns(&[0, 1, 2]).unwrap_err();
            let ColumnStoreError::ChecksumMismatch { location, .. } = &error else { panic!("{error}") };
            assert_eq!(location.column.as_ref().unwrap().index, column);
            assert_eq!(location.offset_bytes, (1 << 20) + offset);
            let message = error.to_string();
            assert!(message.contains("/data/t.fscol"), "{message}");
            assert!(message.contains(["l_orderkey", "l_shipmode", "l_comment"][column]), "{message}");
            // The other columns still read.
            let others: Vec<usize> = (0..3).filter(|other| *other != column).collect();
            assert!(reader.read_columns(&others).is_ok());
        }
    }
}

#[test]
fn columnstore_flipped_byte_in_metadata_fails_open() {
    let bytes = encoded(false);
    let mut corrupt = bytes.clone();
    corrupt[100] ^= 1; // in the column directory
    let error = RowGroupReader::open(&corrupt, Path::new("t.fscol"), 0).unwrap_err();
    assert!(matches!(error, ColumnStoreError::ChecksumMismatch { .. }), "{error}");
    let mut corrupt = bytes.clone();
    corrupt[0] = b'X';
    let error = RowGroupReader::open(&corrupt, Path::new("t.fscol"), 0).unwrap_err();
    assert!(matches!(error, ColumnStoreError::BadMagic { .. }), "{error}");
    assert!(error.to_string().contains("t.fscol at byte 0"), "{error}");
}

#[test]
fn columnstore_every_single_byte_flip_is_detected_or_harmless() {
    let batch = sample_batch().slice(0, 40);
    let options = ColumnStoreOptions { row_group_rows: 100, archive: false };
    let bytes = encode_row_group(&batch, &options).unwrap();
    let used_bytes = {
        let reader = RowGroupReader::open(&bytes, Path::new("t"), 0).unwrap();
        (0..3).map(|column| reader.column_byte_range(column)).map(|(offset, length)| offset + length).max().unwrap() as usize
    };
    for at in 0..bytes.len() {
        let mut corrupt = bytes.clone();
        corrupt[at] ^= 0x10;
        let result = RowGroupReader::open(&corrupt, Path::new("t"), 0).and_then(|reader| reader.read_columns(&[0, 1, 2]));
        if at < used_bytes {
            // Segment padding between columns is not covered; everything else is.
            if let Ok(decoded) = &result {
                assert_eq!(decoded.columns(), batch.columns(), "flip at {at} went unnoticed and changed data");
            }
        } else {
            assert!(result.is_ok(), "flip in the padding at {at}: {result:?}");
        }
    }
}

#[test]
fn columnstore_truncation_is_an_error_never_a_panic() {
    for archive in [false, true] {
        let bytes = encoded(archive);
        let reader = RowGroupReader::open(&bytes, Path::new("t"), 0).unwrap();
        let data_end = (0..3).map(|column| reader.column_byte_range(column)).map(|(o, l)| o + l).max().unwrap() as usize;
        for length in (0..data_end).step_by(7).chain([data_end - 1]) {
            let result = RowGroupReader::open(&bytes[..length], Path::new("t"), 0).and_then(|reader| reader.read_columns(&[0, 1, 2]));
            let error = result.expect_err("truncated row group decoded");
            assert!(matches!(error, ColumnStoreError::Truncated { .. }), "length {length}: {error}");
        }
        // Each segment alone, cut short.
        let (offset, length) = reader.column_byte_range(2);
        let segment = &bytes[offset as usize..(offset + length) as usize];
        for cut in 0..segment.len() {
            assert!(decode_segment(&segment[..cut], &arrow::datatypes::DataType::Utf8).is_err());
        }
    }
}
