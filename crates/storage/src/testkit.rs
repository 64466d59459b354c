//! Builders the tests of this crate and of the crates above it share (feature `testkit`, a
//! dev-dependency only): one way to make test data in the on-disk formats, so a format
//! change is made once for every test.

use crate::heap::header::seal;
use crate::heap::heap_page::HeapPageBuilder;
use crate::heap::row_codec::{encode_row, RowLayout, Value};
use crate::{Lsn, PageId, PAGE_SIZE_BYTES};

/// The file id `sealed_pages` stamps into every page id (a page read back is verified
/// against the id it was sealed with).
pub const PAGES_FILE_ID: u32 = 7;

/// `rows` encoded into heap pages as the loader packs them (a row that does not fit starts
/// the next page), each sealed as page i of file `PAGES_FILE_ID`.
///
/// Panics when a row does not encode or does not fit an empty page: test input only.
pub fn sealed_pages(layout: &RowLayout, column_count: u16, rows: &[Vec<Value>]) -> Vec<Vec<u8>> {
    let mut builder = HeapPageBuilder::new(column_count);
    let (mut buf, mut out) = (Vec::new(), Vec::new());
    for r in rows {
        encode_row(layout, r, &mut buf).expect("row fits");
        if !builder.try_append(&buf) {
            builder.take_page(&mut out);
            assert!(builder.try_append(&buf), "a row larger than an empty page");
        }
    }
    if !builder.is_empty() {
        builder.take_page(&mut out);
    }
    out.chunks_exact(PAGE_SIZE_BYTES)
        .enumerate()
        .map(|(i, chunk)| {
            let mut page = chunk.to_vec();
            seal(&mut page, PageId::new(PAGES_FILE_ID, i as u32), Lsn(3));
            page
        })
        .collect()
}
