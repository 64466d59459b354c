//! Row locators: where a row lives (the index's leaf values). 16 bytes, little-endian:
//! | 0 | 8 | page id (file id << 32 | page index in file) |
//! | 8 | 4 | partition |
//! | 12 | 2 | slot |
//! | 14 | 2 | reserved, zero |

use serde::Serialize;

pub const LOCATOR_BYTES: usize = 16;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct RowLocator {
    pub page_id: u64,
    pub partition: u32,
    pub slot: u16,
}

impl RowLocator {
    #[inline]
    pub fn encode(&self, out: &mut [u8]) {
        debug_assert_eq!(out.len(), LOCATOR_BYTES);
        out[0..8].copy_from_slice(&self.page_id.to_le_bytes());
        out[8..12].copy_from_slice(&self.partition.to_le_bytes());
        out[12..14].copy_from_slice(&self.slot.to_le_bytes());
        out[14..16].fill(0);
    }

    #[inline]
    pub fn decode(bytes: &[u8]) -> RowLocator {
        debug_assert_eq!(bytes.len(), LOCATOR_BYTES);
        RowLocator {
            page_id: u64::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3], bytes[4], bytes[5], bytes[6], bytes[7]]),
            partition: u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]),
            slot: u16::from_le_bytes([bytes[12], bytes[13]]),
        }
    }
}
