//! The heap table format, beside `columnstore/`: 8 KB pages in 64 KB extents.
//! - format: the header ([`header`]), the row format ([`row_codec`]) and the slotted page
//!   that holds rows ([`heap_page`]); row compression ([`row_compression`], [`cell_rows`],
//!   [`value_bytes`]) and page compression ([`page_compression`]) of the same slotted
//!   pages, read by [`compressed_page`]; [`page_encoder`] writes any of the three;
//! - decoder: [`decoder`] (`HeapDecoder`, every page kind into Arrow columns) and
//!   [`page_view`] (`HeapPageView`: an uncompressed page verified once, fields read in place
//!   by the scan's page kernels);
//! - reader: [`reader`] (a table's or partition's pages through the page path).
//! Byte layouts are in docs/formats.md.

pub mod cell_rows;
pub mod compressed_page;
pub mod decoder;
pub mod header;
pub mod heap_page;
pub mod page_compression;
pub mod page_encoder;
pub mod page_view;
pub mod reader;
pub mod row_codec;
pub mod row_compression;
pub mod value_bytes;

use serde::{Deserialize, Serialize};

/// Every page is 8 KB: the unit of checksums, of row placement and of buffer pool frames.
pub const PAGE_SIZE_BYTES: usize = 8192;
/// Pages are allocated and placed in extents of 8 pages (64 KB), the smallest stripe unit.
pub const EXTENT_SIZE_BYTES: usize = 64 * 1024;
pub const PAGES_PER_EXTENT: usize = EXTENT_SIZE_BYTES / PAGE_SIZE_BYTES;

const _: () = assert!(EXTENT_SIZE_BYTES % PAGE_SIZE_BYTES == 0);
// Row offsets in the slot array and in rows are u16.
const _: () = assert!(PAGE_SIZE_BYTES <= u16::MAX as usize + 1);

/// A page's identity: the catalog file id in the high 32 bits, the page's index within
/// that file in the low 32 bits (SQL Server's file:page). A page read from the wrong place
/// is caught by comparing this with the id the reader expected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct PageId(pub u64);

impl PageId {
    pub fn new(file_id: u32, page_index_in_file: u32) -> PageId {
        PageId(((file_id as u64) << 32) | page_index_in_file as u64)
    }
    pub fn file_id(self) -> u32 {
        (self.0 >> 32) as u32
    }
    pub fn page_index_in_file(self) -> u32 {
        self.0 as u32
    }
}

/// Log sequence number of the last change to a page (loaded pages carry the load's): the
/// buffer pool's `Lsn`, the one the log hands out and the WAL rule compares.
pub use flashscan_buffer::Lsn;
