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

/// Marks the page rows `row_ids` (strictly ascending) of `table` in the database at `db_dir`
/// deleted, as a checkpoint does after a DELETE: a new deleted rows file, named by a
/// catalog commit (any earlier one is left unreferenced). Lets tests of the readers skip
/// rows without the write path. Panics on any failure: test setup only.
pub fn mark_rows_deleted(db_dir: &std::path::Path, table: &str, row_ids: &[u64]) {
    use crate::deleted_rows::{deleted_rows_file_name, write_deleted_rows, DeletedRowsMeta};
    let mut catalog = crate::Catalog::read(db_dir).expect("catalog");
    catalog.generation += 1;
    let path = deleted_rows_file_name(table, catalog.generation);
    write_deleted_rows(&db_dir.join(&path), row_ids).expect("deleted rows file");
    let meta = catalog.tables.get_mut(table).expect("table in the catalog");
    meta.deleted_rows = Some(DeletedRowsMeta { path, row_count: row_ids.len() as u64 });
    catalog.write_atomic(db_dir).expect("catalog commit");
}
