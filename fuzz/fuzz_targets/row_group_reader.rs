//! Any bytes → RowGroupReader::open and read_columns return Ok or Err, never panic.
//! With the first byte's top bit set the header checksum is recomputed, so the directory
//! parser and segment ranges get exercised too.
#![no_main]

use std::path::Path;

use flashscan_storage::columnstore::RowGroupReader;
use libfuzzer_sys::fuzz_target;

const ROW_GROUP_CHECKSUM_AT: usize = 40;
const ROW_GROUP_METADATA_BYTES_AT: usize = 32;

fuzz_target!(|data: &[u8]| {
    let Some((&selector, rest)) = data.split_first() else { return };
    let mut bytes = rest.to_vec();
    if selector & 0x80 != 0 && bytes.len() >= 64 {
        let mut field = [0u8; 8];
        field.copy_from_slice(&bytes[ROW_GROUP_METADATA_BYTES_AT..ROW_GROUP_METADATA_BYTES_AT + 8]);
        if let Ok(metadata_bytes) = usize::try_from(u64::from_le_bytes(field)) {
            if (64..=bytes.len()).contains(&metadata_bytes) {
                bytes[ROW_GROUP_CHECKSUM_AT..ROW_GROUP_CHECKSUM_AT + 4].fill(0);
                let crc = crc32c::crc32c(&bytes[..metadata_bytes]);
                bytes[ROW_GROUP_CHECKSUM_AT..ROW_GROUP_CHECKSUM_AT + 4].copy_from_slice(&crc.to_le_bytes());
            }
        }
    }
    if let Ok(reader) = RowGroupReader::open(&bytes, Path::new("fuzz"), 0) {
        let _ = reader.row_count();
        for column in 0..reader.column_count() {
            let _ = reader.column_stats(column);
            let _ = reader.column_byte_range(column);
        }
        let all: Vec<usize> = (0..reader.column_count()).collect();
        let _ = reader.read_columns(&all);
    }
});
