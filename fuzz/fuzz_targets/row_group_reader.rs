//! Any bytes → RowGroupReader::open and read_columns return Ok or Err, never panic.
//! With the first byte's top bit set the header checksum is recomputed, so the directory
//! parser and segment ranges get exercised too.
//! With bit 6 set, the row group is instead encoded by `encode_row_group_with_codecs`
//! from input columns and values, mutated, and every segment checksum and the header
//! checksum recomputed, so the mutations reach the directory checks and the codecs.
#![no_main]

mod common;

use std::path::Path;
use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::datatypes::{Field, Schema};
use flashscan_storage::columnstore::{encode_row_group_with_codecs, ColumnStoreOptions, RowGroupReader};
use libfuzzer_sys::fuzz_target;

const ROW_GROUP_CHECKSUM_AT: usize = 40;
const ROW_GROUP_METADATA_BYTES_AT: usize = 32;
const ROW_GROUP_COLUMN_COUNT_AT: usize = 12;
const ROW_GROUP_HEADER_BYTES: usize = 64;
const DIRECTORY_ENTRY_BYTES: usize = 64;

fn u64_at(bytes: &[u8], at: usize) -> u64 {
    let mut field = [0u8; 8];
    field.copy_from_slice(&bytes[at..at + 8]);
    u64::from_le_bytes(field)
}

fn reseal_header(bytes: &mut [u8]) {
    if bytes.len() < 64 {
        return;
    }
    if let Ok(metadata_bytes) = usize::try_from(u64_at(bytes, ROW_GROUP_METADATA_BYTES_AT)) {
        if (64..=bytes.len()).contains(&metadata_bytes) {
            bytes[ROW_GROUP_CHECKSUM_AT..ROW_GROUP_CHECKSUM_AT + 4].fill(0);
            let crc = crc32c::crc32c(&bytes[..metadata_bytes]);
            bytes[ROW_GROUP_CHECKSUM_AT..ROW_GROUP_CHECKSUM_AT + 4].copy_from_slice(&crc.to_le_bytes());
        }
    }
}

/// Recomputes the checksum of every segment the (possibly mutated) directory points at.
fn reseal_segments(bytes: &mut [u8]) {
    let columns = u32::from_le_bytes(bytes[ROW_GROUP_COLUMN_COUNT_AT..][..4].try_into().unwrap()) as usize;
    for i in 0..columns.min(64) {
        let entry = ROW_GROUP_HEADER_BYTES + i * DIRECTORY_ENTRY_BYTES;
        if entry + DIRECTORY_ENTRY_BYTES > bytes.len() {
            return;
        }
        let (offset, len) = (u64_at(bytes, entry), u64_at(bytes, entry + 8));
        let (Ok(offset), Ok(len)) = (usize::try_from(offset), usize::try_from(len)) else { continue };
        let Some(end) = offset.checked_add(len) else { continue };
        if len < common::SEGMENT_HEADER_BYTES || end > bytes.len() {
            continue;
        }
        common::reseal_segment(&mut bytes[offset..end]);
    }
}

fn synthesized(selector: u8, rest: &[u8]) -> Option<Vec<u8>> {
    let mut c = common::Cursor::new(rest);
    let columns = 1 + (c.u8() % 5) as usize;
    let rows = c.u16() as usize % 2500;
    let mut fields = Vec::new();
    let mut arrays = Vec::new();
    let mut forced = Vec::new();
    for i in 0..columns {
        let b = c.u8();
        let data_type = common::stored_data_type(b as usize % 7);
        let nullable = b & 0x80 != 0;
        arrays.push(common::arrow_array(&mut c, &data_type, rows, nullable));
        fields.push(Field::new(format!("c{i}"), data_type, nullable));
        forced.push(common::forced_codec(c.u8()));
    }
    let batch = RecordBatch::try_new(Arc::new(Schema::new(fields)), arrays).ok()?;
    let options = ColumnStoreOptions { archive: selector & 0x20 != 0, ..ColumnStoreOptions::default() };
    let mut bytes = encode_row_group_with_codecs(&batch, &options, &forced).ok()?;
    common::mutate(&mut bytes, &mut c);
    if selector & 0x10 == 0 {
        reseal_segments(&mut bytes);
    }
    Some(bytes)
}

fuzz_target!(|data: &[u8]| {
    let Some((&selector, rest)) = data.split_first() else { return };
    let mut bytes = if selector & 0x40 != 0 {
        match synthesized(selector, rest) {
            Some(b) => b,
            None => return,
        }
    } else {
        rest.to_vec()
    };
    if selector & 0x80 != 0 {
        reseal_header(&mut bytes);
    }
    // Where the row group sits in its file only shows in errors; a large one checks that
    // offset arithmetic on directory values cannot overflow.
    let offset_bytes = if selector & 0x08 != 0 { 1 << 40 } else { 0 };
    if bytes.len() >= 64 {
        let _ = RowGroupReader::peek_sizes(&bytes[..64], Path::new("fuzz"), offset_bytes);
    }
    if let Ok(reader) = RowGroupReader::open(&bytes, Path::new("fuzz"), offset_bytes) {
        let _ = reader.row_count();
        let _ = reader.schema();
        let _ = reader.total_bytes();
        let _ = reader.is_archive();
        for column in 0..reader.column_count() {
            let _ = reader.column_stats(column);
            let _ = reader.column_byte_range(column);
            let _ = reader.read_column(column);
        }
        let all: Vec<usize> = (0..reader.column_count()).collect();
        let _ = reader.read_columns(&all);
    }
});
