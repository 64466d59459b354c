//! Any bytes → decode_segment returns Ok or Err, never panics, never allocates without bound.
//! The first byte picks the type and whether to recompute the checksum, so most inputs reach
//! the codecs instead of stopping at the CRC.
#![no_main]

use arrow::datatypes::DataType;
use flashscan_storage::columnstore::decode_segment;
use libfuzzer_sys::fuzz_target;

const SEGMENT_HEADER_BYTES: usize = 80;
const SEGMENT_CHECKSUM_AT: usize = 12;

fuzz_target!(|data: &[u8]| {
    let Some((&selector, rest)) = data.split_first() else { return };
    let data_type = match selector % 7 {
        0 => DataType::Int64,
        1 => DataType::Int32,
        2 => DataType::Float64,
        3 => DataType::Decimal128(15, 2),
        4 => DataType::Date32,
        5 => DataType::Utf8,
        _ => DataType::Boolean,
    };
    let mut segment = rest.to_vec();
    if selector & 0x80 != 0 && segment.len() >= SEGMENT_HEADER_BYTES {
        segment[SEGMENT_CHECKSUM_AT..SEGMENT_CHECKSUM_AT + 4].fill(0);
        let crc = crc32c::crc32c(&segment);
        segment[SEGMENT_CHECKSUM_AT..SEGMENT_CHECKSUM_AT + 4].copy_from_slice(&crc.to_le_bytes());
    }
    let _ = decode_segment(&segment, &data_type);
});
