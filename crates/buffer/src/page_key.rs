//! Which page a frame holds: a file (its index in the `FileSet` every engine of the
//! process opens) and the page number in that file (byte offset / 8 KB).

use crate::limits::FRAME_SIZE_BYTES;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PageKey {
    pub file_index: u32,
    pub page_number: u64,
}

impl PageKey {
    pub fn new(file_index: u32, page_number: u64) -> PageKey {
        PageKey { file_index, page_number }
    }

    pub fn offset_bytes(self) -> u64 {
        self.page_number * FRAME_SIZE_BYTES as u64
    }

    /// A cheap, well-mixed hash (the page table's hot path; SipHash costs more than the
    /// rest of a hit).
    #[inline]
    pub fn mix(self) -> u64 {
        let x = (self.file_index as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ self.page_number;
        let x = (x ^ (x >> 31)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        x ^ (x >> 29)
    }
}
