//! The slotted heap page: rows grow up from the header, the slot array (one u16 row
//! offset per row, slot 0 at the very end of the page) grows down from the end.
//!
//! | offset | size | part |
//! | 0 | 40 | header (see `header`) |
//! | 40 | free_space_offset - 40 | rows, back to back |
//! | free_space_offset | ... | free space, zero |
//! | 8192 - 2 * row_count | 2 * row_count | slots, slot i at 8192 - 2 * (i + 1) |

use std::path::Path;

use super::header::{self, is_heap_kind, PageHeader, PAGE_FORMAT_VERSION, PAGE_HEADER_BYTES, PAGE_KIND_HEAP, PAGE_MAGIC};
use super::row_codec::{decode_row, RowLayout, Value};
use super::{PageId, PAGE_SIZE_BYTES};
use crate::error::StorageError;

/// Fills one page with rows; `take_page` hands out the finished bytes and starts again.
pub struct HeapPageBuilder {
    page: Vec<u8>,
    free_space_offset: usize,
    row_count: usize,
    column_count: u16,
    page_kind: u16,
}

impl HeapPageBuilder {
    pub fn new(column_count: u16) -> HeapPageBuilder {
        Self::with_kind(column_count, PAGE_KIND_HEAP)
    }

    /// A builder for pages of another heap kind whose rows are self-contained (row
    /// compression): the slotted layout is the same, only the kind in the header differs.
    pub fn with_kind(column_count: u16, page_kind: u16) -> HeapPageBuilder {
        debug_assert!(is_heap_kind(page_kind));
        HeapPageBuilder { page: vec![0u8; PAGE_SIZE_BYTES], free_space_offset: PAGE_HEADER_BYTES, row_count: 0, column_count, page_kind }
    }

    pub fn row_count(&self) -> usize {
        self.row_count
    }

    pub fn is_empty(&self) -> bool {
        self.row_count == 0
    }

    pub fn free_bytes(&self) -> usize {
        PAGE_SIZE_BYTES - 2 * self.row_count - self.free_space_offset
    }

    /// Appends the row if it fits (row bytes plus its 2-byte slot); false if the page is full.
    #[inline]
    pub fn try_append(&mut self, row: &[u8]) -> bool {
        if row.len() + 2 > self.free_bytes() {
            return false;
        }
        let at = self.free_space_offset;
        self.page[at..at + row.len()].copy_from_slice(row);
        let slot_at = PAGE_SIZE_BYTES - 2 * (self.row_count + 1);
        self.page[slot_at..slot_at + 2].copy_from_slice(&(at as u16).to_le_bytes());
        self.free_space_offset += row.len();
        self.row_count += 1;
        debug_assert!(self.free_space_offset <= PAGE_SIZE_BYTES - 2 * self.row_count);
        true
    }

    /// Appends the finished page (header written, id/LSN/checksum still to be sealed) to
    /// `out` and resets the builder.
    pub fn take_page(&mut self, out: &mut Vec<u8>) {
        out.extend_from_slice(self.built_page());
        self.clear();
    }

    /// The page as built so far, header written (id, LSN and checksum not sealed),
    /// borrowed instead of copied out: what a decoder of rows built in memory reads
    /// (`HeapDecoder::push_built_page`). `clear` starts the next page.
    pub fn built_page(&mut self) -> &[u8] {
        debug_assert!(self.row_count <= u16::MAX as usize);
        header::write_body_fields_of_kind(&mut self.page, self.row_count as u16, self.column_count, self.free_space_offset as u16, self.page_kind);
        &self.page
    }

    /// Empties the builder: the bytes the header, rows and slots used are zeroed again, not
    /// the whole page (the free space between them was never written).
    pub fn clear(&mut self) {
        let slots_start = PAGE_SIZE_BYTES - 2 * self.row_count;
        self.page[..self.free_space_offset].fill(0);
        self.page[slots_start..].fill(0);
        debug_assert!(self.page.iter().all(|b| *b == 0), "a byte outside the rows and slots was written");
        self.free_space_offset = PAGE_HEADER_BYTES;
        self.row_count = 0;
    }

    /// The builder made ready for pages of another table (cleared first).
    pub fn reset_for(&mut self, column_count: u16, page_kind: u16) {
        debug_assert!(is_heap_kind(page_kind));
        self.clear();
        self.column_count = column_count;
        self.page_kind = page_kind;
    }
}

/// Verifies checksum, magic, version, kind, page id and header bounds: every page read
/// passes here before a byte of it is trusted.
pub fn verify_page(page: &[u8], expected_page_id: PageId, file: &Path, offset_bytes: u64) -> Result<PageHeader, StorageError> {
    let corrupt = |reason: String| StorageError::PageCorrupt { file: file.to_path_buf(), page_id: expected_page_id.0, offset_bytes, reason };
    if page.len() != PAGE_SIZE_BYTES {
        return Err(corrupt(format!("page is {} bytes, expected {PAGE_SIZE_BYTES}", page.len())));
    }
    let h = header::read_header(page);
    let computed = header::compute_checksum(page);
    if computed != h.checksum_crc32c {
        return Err(StorageError::PageChecksum {
            file: file.to_path_buf(),
            page_id: expected_page_id.0,
            offset_bytes,
            stored_crc32c: h.checksum_crc32c,
            computed_crc32c: computed,
        });
    }
    if page[..4] != PAGE_MAGIC {
        return Err(corrupt("bad magic (not a flashscan page)".into()));
    }
    if h.format_version != PAGE_FORMAT_VERSION {
        return Err(corrupt(format!("page format version {} (this build reads {PAGE_FORMAT_VERSION})", h.format_version)));
    }
    if !is_heap_kind(h.page_kind) {
        return Err(corrupt(format!("page kind {} is not a heap page", h.page_kind)));
    }
    if h.page_id != expected_page_id {
        return Err(corrupt(format!("page holds page id {} (read from the wrong place)", h.page_id.0)));
    }
    let free = h.free_space_offset as usize;
    if free < PAGE_HEADER_BYTES || free + 2 * h.row_count as usize > PAGE_SIZE_BYTES {
        return Err(corrupt(format!("free space offset {free} and row count {} overlap", h.row_count)));
    }
    Ok(h)
}

/// The row offset stored in slot `slot`.
#[inline]
pub fn slot_offset(page: &[u8], slot: usize) -> usize {
    let at = PAGE_SIZE_BYTES - 2 * (slot + 1);
    u16::from_le_bytes([page[at], page[at + 1]]) as usize
}

/// The rows of one verified, uncompressed heap page by slot, for readers that take a row
/// or a field without decoding the page into Arrow (key lookups, index builds, the cost
/// bench): the page format's own reader of its slot array, every slot checked against the
/// page's row area, errors naming the page.
pub struct HeapPageRows<'p> {
    page: &'p [u8],
    row_count: u16,
    rows_end_bytes: usize,
    page_id: PageId,
    file: &'p Path,
    offset_bytes: u64,
}

impl<'p> HeapPageRows<'p> {
    /// The rows of `page` (which passed `verify_page`); row- and page-compressed pages
    /// have no fixed row layout to index into and are refused.
    pub fn new(page: &'p [u8], page_id: PageId, file: &'p Path, offset_bytes: u64) -> Result<HeapPageRows<'p>, StorageError> {
        debug_assert_eq!(page.len(), PAGE_SIZE_BYTES);
        let rows = HeapPageRows {
            page,
            row_count: header::read_u16(page, header::OFFSET_ROW_COUNT),
            rows_end_bytes: header::read_u16(page, header::OFFSET_FREE_SPACE) as usize,
            page_id,
            file,
            offset_bytes,
        };
        let kind = header::read_u16(page, header::OFFSET_PAGE_KIND);
        if kind != PAGE_KIND_HEAP {
            return Err(rows.corrupt(format!("page kind {kind} is compressed: row-by-slot readers (key lookups, indexes) read uncompressed heap pages only (rebuild the table as heap)")));
        }
        Ok(rows)
    }

    pub fn row_count(&self) -> u16 {
        self.row_count
    }

    /// The bytes of the row in `slot`, from its start to the end of the page's rows (the
    /// row codec finds its own end).
    #[inline]
    pub fn row(&self, slot: u16) -> Result<&'p [u8], StorageError> {
        if slot >= self.row_count {
            return Err(self.corrupt(format!("slot {slot} of {} rows (an index pointing here is stale: rebuild it)", self.row_count)));
        }
        let at = slot_offset(self.page, slot as usize);
        if at < PAGE_HEADER_BYTES || at >= self.rows_end_bytes {
            return Err(self.corrupt(format!("slot {slot} points at {at}, outside the rows (end {})", self.rows_end_bytes)));
        }
        Ok(&self.page[at..self.rows_end_bytes])
    }

    fn corrupt(&self, reason: String) -> StorageError {
        StorageError::PageCorrupt { file: self.file.to_path_buf(), page_id: self.page_id.0, offset_bytes: self.offset_bytes, reason }
    }
}

/// Decodes every row of a verified page into `Value`s (tests and tools; scans use
/// `HeapDecoder`).
pub fn decode_page_rows(page: &[u8], layout: &RowLayout, expected_page_id: PageId, file: &Path, offset_bytes: u64) -> Result<Vec<Vec<Value>>, StorageError> {
    let h = verify_page(page, expected_page_id, file, offset_bytes)?;
    if h.page_kind != PAGE_KIND_HEAP {
        // Compressed rows have no fixed layout; `HeapDecoder` reads every heap kind.
        return Err(StorageError::PageCorrupt { file: file.to_path_buf(), page_id: expected_page_id.0, offset_bytes, reason: format!("page kind {} is compressed: decode it with HeapDecoder", h.page_kind) });
    }
    let free = h.free_space_offset as usize;
    let mut rows = Vec::with_capacity(h.row_count as usize);
    for slot in 0..h.row_count as usize {
        let at = slot_offset(page, slot);
        let bad = |reason: String| StorageError::PageCorrupt { file: file.to_path_buf(), page_id: expected_page_id.0, offset_bytes, reason };
        if at < PAGE_HEADER_BYTES || at > free {
            return Err(bad(format!("slot {slot} points at {at}, outside the rows")));
        }
        rows.push(decode_row(layout, &page[at..free]).map_err(|e| bad(format!("row {slot}: {e}")))?);
    }
    Ok(rows)
}
