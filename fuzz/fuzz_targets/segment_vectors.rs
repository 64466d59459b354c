//! Any bytes → the vector-at-a-time readers of a column store segment (`SegmentView::open`,
//! `IntegerVectors::next_vector` and `sum_rest` for every integer codec, fastlanes included,
//! `StringCodes::next_codes`, `PlainStrings::slice` in slices of input-chosen sizes) return
//! Ok or Err, never panic. Synthesized segments (bit 6 of
//! the first byte) come from `encode_segment` with the codec forced or analyzed, then are
//! mutated and resealed; unmutated ones must give, vector by vector, the values and the sum
//! the whole-column decoder gives.
#![no_main]

mod common;

use arrow::array::{Array, AsArray};
use arrow::datatypes::{DataType, Date32Type, Decimal128Type, Int32Type, Int64Type};
use common::reseal_segment as reseal;
use flashscan_storage::columnstore::{decode_segment, Location, SegmentView};
use flashscan_storage::compression::VECTOR_VALUES;
use libfuzzer_sys::fuzz_target;

/// Plain strings read a slice at a time (slices of `slice_rows`), concatenated; None when the
/// segment is not a plain string segment or a slice is refused.
fn read_plain_slices(segment: &[u8], slice_rows: usize) -> Option<Vec<String>> {
    let view = SegmentView::open(segment, &Location::in_memory()).ok()?;
    let strings = view.plain_strings().ok()??;
    let mut out = Vec::new();
    let mut start = 0;
    while start < strings.value_count() {
        let rows = slice_rows.clamp(1, strings.value_count() - start);
        let (offsets, bytes) = strings.slice(start, rows).ok()?;
        for w in offsets.windows(2) {
            let (a, b) = ((w[0] - offsets[0]) as usize, (w[1] - offsets[0]) as usize);
            // `slice` promised UTF-8 on char boundaries: a failure here is a bug.
            out.push(std::str::from_utf8(&bytes[a..b]).expect("slice strings are UTF-8").to_string());
        }
        start += rows;
    }
    Some(out)
}

/// Every value the vector readers produce (integers; codes for strings), and the sum.
fn read_vectors(segment: &[u8]) -> Option<(Vec<i64>, Option<i128>)> {
    let view = SegmentView::open(segment, &Location::in_memory()).ok()?;
    let mut values = Vec::new();
    if let Ok(mut vectors) = view.integer_vectors() {
        let mut vector = [0i64; VECTOR_VALUES];
        while let Ok(length) = vectors.next_vector(&mut vector) {
            if length == 0 {
                break;
            }
            values.extend_from_slice(&vector[..length]);
        }
        let sum = view.integer_vectors().ok().and_then(|mut v| v.sum_rest().ok());
        return Some((values, sum));
    }
    if let Ok(Some(mut codes)) = view.string_codes() {
        let mut out = [0u32; VECTOR_VALUES];
        while let Ok(length) = codes.next_codes(&mut out) {
            if length == 0 {
                break;
            }
            values.extend(out[..length].iter().map(|code| i64::from(*code)));
        }
    }
    Some((values, None))
}

fuzz_target!(|data: &[u8]| {
    let Some((&selector, rest)) = data.split_first() else { return };
    let data_type = match selector % 5 {
        0 => DataType::Int64,
        1 => DataType::Int32,
        2 => DataType::Decimal128(15, 2),
        3 => DataType::Date32,
        _ => DataType::Utf8,
    };
    if selector & 0x40 == 0 {
        let mut segment = rest.to_vec();
        if selector & 0x80 != 0 {
            reseal(&mut segment);
        }
        let _ = read_vectors(&segment);
        let _ = read_plain_slices(&segment, usize::from(selector & 0x3f) * 37 + 1);
        return;
    }
    let mut c = common::Cursor::new(rest);
    let Some((_, mut segment, mutations)) = common::synthesized_segment(selector, &mut c, &data_type, 5000) else { return };
    if selector & 0x80 != 0 || mutations > 0 {
        reseal(&mut segment);
    }
    let vectors = read_vectors(&segment);
    let slice_rows = usize::from(selector & 0x3f) * 37 + 1;
    let plain = read_plain_slices(&segment, slice_rows);
    if mutations != 0 {
        return;
    }
    if data_type == DataType::Utf8 {
        // Unmutated plain strings: the slices give the whole-column decoder's strings.
        if let Some(plain) = plain {
            let decoded = decode_segment(&segment, &data_type).expect("an unmutated segment decodes");
            let decoded = decoded.as_string::<i32>();
            assert_eq!(plain.len(), decoded.len());
            for (index, got) in plain.iter().enumerate() {
                if decoded.is_valid(index) {
                    assert_eq!(got, decoded.value(index), "row {index}");
                }
            }
        }
        return;
    }
    let (values, sum) = vectors.expect("an unmutated segment opens");
    let decoded = decode_segment(&segment, &data_type).expect("an unmutated segment decodes");
    let expected: Vec<i64> = match &data_type {
        DataType::Int64 => decoded.as_primitive::<Int64Type>().values().to_vec(),
        DataType::Int32 => decoded.as_primitive::<Int32Type>().values().iter().map(|v| i64::from(*v)).collect(),
        DataType::Date32 => decoded.as_primitive::<Date32Type>().values().iter().map(|v| i64::from(*v)).collect(),
        _ => decoded.as_primitive::<Decimal128Type>().values().iter().map(|v| *v as i64).collect(),
    };
    // Null slots hold fillers in both readers: compare the valid ones.
    assert_eq!(values.len(), expected.len());
    for (index, (got, want)) in values.iter().zip(&expected).enumerate() {
        if decoded.is_valid(index) {
            assert_eq!(got, want, "row {index}");
        }
    }
    if decoded.null_count() == 0 {
        assert_eq!(sum, Some(expected.iter().map(|v| i128::from(*v)).sum::<i128>()));
    }
});
