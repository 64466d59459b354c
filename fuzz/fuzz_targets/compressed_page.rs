//! Any bytes → `HeapDecoder::push_page` on row-compressed (kind 2) and page-compressed
//! (kind 3) heap pages returns Ok or Err, never panics, and `finish` then builds a batch.
//!
//! Byte 0 picks the mode (see common.rs) and the kind. The table is either the fixed mix
//! of int / decimal / date / utf8 / float / bool columns or one read from the input.
//! Synthesized pages come from the real `PageEncoder` (row or page compression: column
//! prefix, page dictionary, varint lengths), then get mutated and resealed.
#![no_main]

mod common;


use common::{mixed_table, mutate, table, value, Cursor};
use flashscan_storage::heap::header::{self, PAGE_FORMAT_VERSION, PAGE_HEADER_BYTES, PAGE_KIND_HEAP_PAGE_COMPRESSED, PAGE_KIND_HEAP_ROW_COMPRESSED, PAGE_MAGIC};
use flashscan_storage::heap::page_encoder::{HeapFormat, PageEncoder};
use flashscan_storage::PAGE_SIZE_BYTES;
use libfuzzer_sys::fuzz_target;

const PAGE_ID: u64 = (9u64 << 32) | 1;

fuzz_target!(|data: &[u8]| {
    let mut c = Cursor::new(data);
    let mode = c.u8();
    let table = if mode & 0x20 != 0 { table(&mut c) } else { mixed_table() };
    let column_count = table.columns.len() as u16;
    let kind = if mode & 0x10 != 0 { PAGE_KIND_HEAP_PAGE_COMPRESSED } else { PAGE_KIND_HEAP_ROW_COMPRESSED };
    let mut page = vec![0u8; PAGE_SIZE_BYTES];
    if mode & 1 == 0 {
        // Header stamped: input front and back halves, kind forced, checksum recomputed.
        common::fill_page_ends(&mut page, c.rest());
        page[..4].copy_from_slice(&PAGE_MAGIC);
        page[header::OFFSET_FORMAT_VERSION..][..2].copy_from_slice(&PAGE_FORMAT_VERSION.to_le_bytes());
        page[header::OFFSET_HEADER_BYTES..][..2].copy_from_slice(&(PAGE_HEADER_BYTES as u16).to_le_bytes());
        page[header::OFFSET_COLUMN_COUNT..][..2].copy_from_slice(&column_count.to_le_bytes());
        page[header::OFFSET_PAGE_KIND..][..2].copy_from_slice(&kind.to_le_bytes());
        common::stamp_page(&mut page, PAGE_ID);
    } else {
        let format = if kind == PAGE_KIND_HEAP_PAGE_COMPRESSED { HeapFormat::Page } else { HeapFormat::Row };
        let mut encoder = PageEncoder::new("t", &table.columns, format);
        let rows = c.u16() as usize % 300;
        for _ in 0..rows {
            let values: Vec<_> = table.columns.iter().map(|col| value(&mut c, col.column_type, col.nullable)).collect();
            if encoder.push_values(&values).is_err() {
                return;
            }
        }
        if encoder.finish().is_err() {
            return;
        }
        if encoder.pages.len() >= PAGE_SIZE_BYTES {
            page.copy_from_slice(&encoder.pages[..PAGE_SIZE_BYTES]);
        } else {
            return;
        }
        mutate(&mut page, &mut c);
        common::stamp_page(&mut page, PAGE_ID);
    }

    let mut projection: Vec<usize> = (0..table.columns.len()).collect();
    if mode & 0x40 != 0 {
        // A subset: only some columns are "wanted" by the compressed parser.
        projection.retain(|i| (mode >> 1) & (1 << (i % 4)) != 0);
    }
    if mode & 0x80 != 0 {
        projection.reverse();
        if let Some(&first) = projection.first() {
            projection.push(first);
        }
    }
    let _ = common::check_page_readers(&page, PAGE_ID, &table, &projection);
});
