//! Any bytes → the heap page readers return Ok or Err, never panic: `verify_page`,
//! `decode_page_count_only`, `HeapDecoder::push_page` (+ `finish`), `decode_page_rows`,
//! the key lookup's row by slot (`HeapPageRows`) + `decode_row`, and the page kernels'
//! `HeapPageLayout::view` (accepts exactly what `push_page` accepts, same null counts).
//!
//! Byte 0 picks the mode (see common.rs): raw page, header patched and resealed, or a
//! page built by `HeapPageBuilder` from input values, mutated and resealed. The table
//! schema is read from the input too.
#![no_main]

mod common;

use std::path::Path;

use common::{mutate, table, value, Cursor};
use flashscan_storage::heap::header::{self, PAGE_FORMAT_VERSION, PAGE_HEADER_BYTES, PAGE_KIND_HEAP, PAGE_MAGIC};
use flashscan_storage::heap::heap_page::{decode_page_rows, HeapPageBuilder, HeapPageRows};
use flashscan_storage::heap::row_codec::{decode_row, encode_row, RowLayout};
use arrow::array::Array;
use flashscan_storage::{HeapDecoder, HeapPageLayout, PageId, PAGE_SIZE_BYTES};
use libfuzzer_sys::fuzz_target;

const PAGE_ID: u64 = (7u64 << 32) | 3;

/// Stamps magic, version, header size, kind, column count and page id, then the checksum.
pub fn patch_and_seal(page: &mut [u8], column_count: u16, kind: Option<u16>) {
    page[..4].copy_from_slice(&PAGE_MAGIC);
    page[header::OFFSET_FORMAT_VERSION..][..2].copy_from_slice(&PAGE_FORMAT_VERSION.to_le_bytes());
    page[header::OFFSET_HEADER_BYTES..][..2].copy_from_slice(&(PAGE_HEADER_BYTES as u16).to_le_bytes());
    page[header::OFFSET_COLUMN_COUNT..][..2].copy_from_slice(&column_count.to_le_bytes());
    if let Some(kind) = kind {
        page[header::OFFSET_PAGE_KIND..][..2].copy_from_slice(&kind.to_le_bytes());
    }
    common::stamp_page(page, PAGE_ID);
}

fuzz_target!(|data: &[u8]| {
    let mut c = Cursor::new(data);
    let mode = c.u8();
    let table = table(&mut c);
    let column_count = table.columns.len() as u16;
    let layout = RowLayout::new(&table.columns);
    let mut page = vec![0u8; PAGE_SIZE_BYTES];
    match mode % 3 {
        0 => {
            // Raw: the input from byte 0 of the page; with bit 7 the last input bytes go
            // to the end of the page instead, where the slot array lives.
            let rest = c.rest();
            let n = rest.len().min(PAGE_SIZE_BYTES);
            if mode & 0x80 != 0 {
                page[PAGE_SIZE_BYTES - n..].copy_from_slice(&rest[rest.len() - n..]);
                page[..PAGE_HEADER_BYTES.min(rest.len())].copy_from_slice(&rest[..PAGE_HEADER_BYTES.min(rest.len())]);
            } else {
                page[..n].copy_from_slice(&rest[..n]);
            }
        }
        1 => {
            // Header stamped: the first half of the input is the page's front (header
            // fields row count / free space / kind included), the second half its end.
            common::fill_page_ends(&mut page, c.rest());
            let kind = if mode & 0x80 != 0 { None } else { Some(PAGE_KIND_HEAP) };
            patch_and_seal(&mut page, column_count, kind);
        }
        _ => {
            // Synthesized: rows of input values through the real row encoder and page
            // builder, then mutations, then a fresh checksum.
            let rows = c.u16() as usize % 400;
            let mut builder = HeapPageBuilder::new(column_count);
            let mut row = Vec::new();
            for _ in 0..rows {
                let values: Vec<_> = table.columns.iter().map(|col| value(&mut c, col.column_type, col.nullable)).collect();
                if encode_row(&layout, &values, &mut row).is_err() || !builder.try_append(&row) {
                    break;
                }
            }
            let mut out = Vec::with_capacity(PAGE_SIZE_BYTES);
            builder.take_page(&mut out);
            page.copy_from_slice(&out);
            mutate(&mut page, &mut c);
            if mode & 0x80 == 0 {
                common::stamp_page(&mut page, PAGE_ID);
            }
        }
    }

    // Every column, then reversed with a duplicate: the decode loops see every slot kind.
    let mut projection: Vec<usize> = (0..table.columns.len()).collect();
    if mode & 0x40 != 0 {
        projection.reverse();
        projection.push(projection[0]);
    }
    let verified = common::check_page_readers(&page, PAGE_ID, &table, &projection);
    let path = Path::new("fuzz.dat");

    let _ = decode_page_rows(&page, &layout, PageId(PAGE_ID), path, 0);

    // The scan's page kernels' view (`HeapPageView`): it takes exactly the uncompressed
    // pages the decoder takes, and reads what the decoder reads.
    let view_layout = HeapPageLayout::try_new(&table, &projection).expect("projection in range");
    let mut row_starts = Vec::new();
    let mut decoder = HeapDecoder::try_new(&table, &projection).expect("projection in range");
    let decoded = decoder.push_page(&page, PAGE_ID, path, 0);
    match view_layout.view(&page, PAGE_ID, path, 0, &mut row_starts) {
        Ok(Some(view)) => {
            let rows = decoded.expect("the decoder takes every page the view takes");
            assert_eq!(view.row_count(), rows as usize);
            let batch = decoder.finish();
            for k in 0..projection.len() {
                let column = batch.column(k);
                assert_eq!(view.non_null_count(k), column.len() - column.null_count());
                for row in 0..view.row_count() {
                    assert_eq!(view.is_null(k, row), column.is_null(row));
                    let _ = view.integer(k, row);
                    let _ = view.var_bytes(k, row);
                }
                let _ = view.for_each_integer(k, |_, _| {});
            }
        }
        Ok(None) => {}
        Err(_) => assert!(decoded.is_err(), "the view refused a page the decoder takes"),
    }

    // The key lookup path: one row by slot out of a verified page.
    if let (Ok(h), Ok(rows)) = (&verified, HeapPageRows::new(&page, PageId(PAGE_ID), path, 0)) {
        for slot in 0..=h.row_count.min(64) {
            if let Ok(row) = rows.row(slot) {
                let _ = decode_row(&layout, row);
            }
        }
    }
});
