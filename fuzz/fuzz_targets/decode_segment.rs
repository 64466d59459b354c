//! Any bytes → decode_segment returns Ok or Err, never panics, never allocates without bound.
//! The first byte picks the type and whether to recompute the checksum, so most inputs reach
//! the codecs instead of stopping at the CRC.
//! With bit 6 of the first byte set, the segment is instead encoded by `encode_segment`
//! from input values (codec forced or analyzed, archive or not), mutated and resealed;
//! unmutated segments must decode to the array they were made from.
#![no_main]

mod common;

use arrow::array::Array;
use arrow::datatypes::DataType;
use common::reseal_segment as reseal;
use flashscan_storage::columnstore::decode_segment;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&selector, rest)) = data.split_first() else { return };
    let data_type = common::stored_data_type(selector as usize % 12);
    if selector & 0x40 != 0 {
        let mut c = common::Cursor::new(rest);
        let Some((array, mut segment, mutations)) = common::synthesized_segment(selector, &mut c, &data_type, 3000) else { return };
        if selector & 0x80 != 0 {
            reseal(&mut segment);
        }
        let decoded = decode_segment(&segment, &data_type);
        if mutations == 0 {
            let decoded = decoded.expect("an unmutated segment decodes");
            assert_eq!(decoded.len(), array.len());
            assert_eq!(decoded.nulls(), array.nulls().filter(|n| n.null_count() > 0));
            if data_type != DataType::Float64 {
                assert_eq!(decoded.to_data(), array.to_data());
            }
        }
        return;
    }
    let mut segment = rest.to_vec();
    if selector & 0x80 != 0 {
        reseal(&mut segment);
    }
    let _ = decode_segment(&segment, &data_type);
});
