//! One row of a verified heap page by slot: what a key lookup needs and the storage crate
//! does not export (its decoder works a page at a time). Built on the page format's public
//! pieces: header fields and the slot array.

use std::path::Path;

use flashscan_storage::heap::header::{read_u16, OFFSET_FREE_SPACE, OFFSET_PAGE_KIND, OFFSET_ROW_COUNT, PAGE_HEADER_BYTES, PAGE_KIND_HEAP};
use flashscan_storage::heap::heap_page::slot_offset;
use flashscan_storage::StorageError;

/// The bytes of the row in `slot`, from its start to the end of the page's rows (the row
/// codec finds its own end). The page must have passed `verify_page`.
#[inline]
pub fn row_at<'p>(page: &'p [u8], slot: u16, page_id: u64, file: &Path, offset_bytes: u64) -> Result<&'p [u8], StorageError> {
    let row_count = read_u16(page, OFFSET_ROW_COUNT);
    let free = read_u16(page, OFFSET_FREE_SPACE) as usize;
    let corrupt = |reason: String| StorageError::PageCorrupt { file: file.to_path_buf(), page_id, offset_bytes, reason };
    let kind = read_u16(page, OFFSET_PAGE_KIND);
    if kind != PAGE_KIND_HEAP {
        // Row- and page-compressed pages have no fixed row layout to index into.
        return Err(corrupt(format!("page kind {kind} is compressed: key lookups read uncompressed heap pages only (rebuild the table as heap)")));
    }
    if slot >= row_count {
        return Err(corrupt(format!("slot {slot} of {row_count} rows (the index is stale: rebuild it)")));
    }
    let at = slot_offset(page, slot as usize);
    if at < PAGE_HEADER_BYTES || at >= free {
        return Err(corrupt(format!("slot {slot} points at {at}, outside the rows (end {free})")));
    }
    Ok(&page[at..free])
}
