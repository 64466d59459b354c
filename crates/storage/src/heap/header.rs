//! The 40-byte page header, little-endian, and the page checksum.
//!
//! | offset | size | field |
//! | 0  | 4 | magic `FSHP` |
//! | 4  | 2 | format version |
//! | 6  | 2 | header size in bytes (40) |
//! | 8  | 8 | page id |
//! | 16 | 8 | LSN |
//! | 24 | 2 | row count |
//! | 26 | 2 | column count |
//! | 28 | 2 | free space offset |
//! | 30 | 2 | page kind (1 = heap, 2 = heap row-compressed, 3 = heap page-compressed) |
//! | 32 | 4 | crc32c of the page with this field zeroed |
//! | 36 | 4 | reserved, zero |

use super::{Lsn, PageId, PAGE_SIZE_BYTES};

pub const PAGE_MAGIC: [u8; 4] = *b"FSHP";
pub const PAGE_FORMAT_VERSION: u16 = 1;
pub const PAGE_HEADER_BYTES: usize = 40;
pub const PAGE_KIND_HEAP: u16 = 1;
/// Heap page whose rows are row-compressed (`row_compression`).
pub const PAGE_KIND_HEAP_ROW_COMPRESSED: u16 = 2;
/// Heap page with compression info and page-compressed rows (`page_compression`).
pub const PAGE_KIND_HEAP_PAGE_COMPRESSED: u16 = 3;

/// Whether `kind` is one of the heap page kinds `HeapDecoder` reads.
#[inline]
pub fn is_heap_kind(kind: u16) -> bool {
    matches!(kind, PAGE_KIND_HEAP | PAGE_KIND_HEAP_ROW_COMPRESSED | PAGE_KIND_HEAP_PAGE_COMPRESSED)
}

pub const OFFSET_MAGIC: usize = 0;
pub const OFFSET_FORMAT_VERSION: usize = 4;
pub const OFFSET_HEADER_BYTES: usize = 6;
pub const OFFSET_PAGE_ID: usize = 8;
pub const OFFSET_LSN: usize = 16;
pub const OFFSET_ROW_COUNT: usize = 24;
pub const OFFSET_COLUMN_COUNT: usize = 26;
pub const OFFSET_FREE_SPACE: usize = 28;
pub const OFFSET_PAGE_KIND: usize = 30;
pub const OFFSET_CHECKSUM: usize = 32;

const _: () = assert!(OFFSET_CHECKSUM + 8 == PAGE_HEADER_BYTES);

/// The decoded header fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageHeader {
    pub format_version: u16,
    pub page_id: PageId,
    pub lsn: Lsn,
    pub row_count: u16,
    pub column_count: u16,
    pub free_space_offset: u16,
    pub page_kind: u16,
    pub checksum_crc32c: u32,
}

#[inline]
pub fn read_u16(page: &[u8], offset: usize) -> u16 {
    u16::from_le_bytes([page[offset], page[offset + 1]])
}

#[inline]
pub fn read_u32(page: &[u8], offset: usize) -> u32 {
    let mut b = [0u8; 4];
    b.copy_from_slice(&page[offset..offset + 4]);
    u32::from_le_bytes(b)
}

#[inline]
pub fn read_u64(page: &[u8], offset: usize) -> u64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&page[offset..offset + 8]);
    u64::from_le_bytes(b)
}

/// crc32c over the whole page, reading the checksum field as zero, so the stored value can
/// sit inside the bytes it covers.
#[inline]
pub fn compute_checksum(page: &[u8]) -> u32 {
    debug_assert_eq!(page.len(), PAGE_SIZE_BYTES);
    let crc = crc32c::crc32c(&page[..OFFSET_CHECKSUM]);
    let crc = crc32c::crc32c_append(crc, &[0u8; 4]);
    crc32c::crc32c_append(crc, &page[OFFSET_CHECKSUM + 4..])
}

/// Reads the header fields; does not verify anything (see `heap_page::verify_page`).
pub fn read_header(page: &[u8]) -> PageHeader {
    debug_assert!(page.len() >= PAGE_HEADER_BYTES);
    PageHeader {
        format_version: read_u16(page, OFFSET_FORMAT_VERSION),
        page_id: PageId(read_u64(page, OFFSET_PAGE_ID)),
        lsn: Lsn(read_u64(page, OFFSET_LSN)),
        row_count: read_u16(page, OFFSET_ROW_COUNT),
        column_count: read_u16(page, OFFSET_COLUMN_COUNT),
        free_space_offset: read_u16(page, OFFSET_FREE_SPACE),
        page_kind: read_u16(page, OFFSET_PAGE_KIND),
        checksum_crc32c: read_u32(page, OFFSET_CHECKSUM),
    }
}

/// Writes the fields the page builder knows (everything but id, LSN and checksum).
pub fn write_body_fields(page: &mut [u8], row_count: u16, column_count: u16, free_space_offset: u16) {
    write_body_fields_of_kind(page, row_count, column_count, free_space_offset, PAGE_KIND_HEAP)
}

/// `write_body_fields` for a page of the given kind.
pub fn write_body_fields_of_kind(page: &mut [u8], row_count: u16, column_count: u16, free_space_offset: u16, page_kind: u16) {
    debug_assert!(is_heap_kind(page_kind));
    debug_assert_eq!(page.len(), PAGE_SIZE_BYTES);
    debug_assert!(free_space_offset as usize >= PAGE_HEADER_BYTES);
    debug_assert!(free_space_offset as usize + 2 * row_count as usize <= PAGE_SIZE_BYTES);
    page[OFFSET_MAGIC..OFFSET_MAGIC + 4].copy_from_slice(&PAGE_MAGIC);
    page[OFFSET_FORMAT_VERSION..OFFSET_FORMAT_VERSION + 2].copy_from_slice(&PAGE_FORMAT_VERSION.to_le_bytes());
    page[OFFSET_HEADER_BYTES..OFFSET_HEADER_BYTES + 2].copy_from_slice(&(PAGE_HEADER_BYTES as u16).to_le_bytes());
    page[OFFSET_ROW_COUNT..OFFSET_ROW_COUNT + 2].copy_from_slice(&row_count.to_le_bytes());
    page[OFFSET_COLUMN_COUNT..OFFSET_COLUMN_COUNT + 2].copy_from_slice(&column_count.to_le_bytes());
    page[OFFSET_FREE_SPACE..OFFSET_FREE_SPACE + 2].copy_from_slice(&free_space_offset.to_le_bytes());
    page[OFFSET_PAGE_KIND..OFFSET_PAGE_KIND + 2].copy_from_slice(&page_kind.to_le_bytes());
    page[OFFSET_CHECKSUM + 4..PAGE_HEADER_BYTES].fill(0);
}

/// Stamps the page id and LSN, then the checksum: the last step before a page is written.
pub fn seal(page: &mut [u8], page_id: PageId, lsn: Lsn) {
    debug_assert_eq!(page.len(), PAGE_SIZE_BYTES);
    debug_assert_eq!(page[..4], PAGE_MAGIC);
    page[OFFSET_PAGE_ID..OFFSET_PAGE_ID + 8].copy_from_slice(&page_id.0.to_le_bytes());
    page[OFFSET_LSN..OFFSET_LSN + 8].copy_from_slice(&lsn.0.to_le_bytes());
    let crc = compute_checksum(page);
    page[OFFSET_CHECKSUM..OFFSET_CHECKSUM + 4].copy_from_slice(&crc.to_le_bytes());
}
