//! Log blocks: 4 KiB, each with a checksummed header, written once and never rewritten.
//!
//! ```text
//! offset size field
//!  0     4    magic "FSWL"
//!  4     2    format version (1)
//!  6     2    used_bytes: record bytes in this block's payload (1..=4056)
//!  8     8    block_lsn: LSN of the block's first byte (= its position in the log)
//! 16     8    flush_start_lsn: LSN of the first block of the write that carried this block
//! 24     4    epoch: the log's open count when written (older epochs are stale)
//! 28     2    first_record_offset: payload offset of the first record starting here, 0xFFFF if none
//! 30     6    reserved, zero
//! 36     4    crc32c of bytes 0..36 and 40..4096
//! 40  4056    payload: record bytes [0, used_bytes), then zeros
//! ```
//!
//! Why never rewritten: a flush that ends inside a block pads the block (used_bytes says
//! where records stop) and the next flush starts a new block. Rewriting the partial block
//! instead (PostgreSQL) saves log space but a power loss during the rewrite can tear a
//! block that already holds acknowledged commits; here a torn write can only hit blocks
//! that no one was told are durable. The cost is at most one block of padding per flush,
//! which group commit amortizes (the bench reports bytes per commit).

use crate::limits::{BLOCK_HEADER_BYTES, BLOCK_PAYLOAD_BYTES, BLOCK_SIZE_BYTES};
use crate::lsn::Lsn;

pub const BLOCK_MAGIC: [u8; 4] = *b"FSWL";
pub const BLOCK_FORMAT_VERSION: u16 = 1;
pub const NO_RECORD_START: u16 = 0xFFFF;
const CRC_AT: usize = 36;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockHeader {
    pub used_bytes: u16,
    pub block_lsn: Lsn,
    pub flush_start_lsn: Lsn,
    pub epoch: u32,
    pub first_record_offset: u16,
}

/// What a block read from disk is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BlockState {
    Valid(BlockHeader),
    /// All zeros: preallocated, never written.
    Zero,
    /// Checksum or header wrong: torn, damaged, or not a log block.
    Bad(String),
}

fn crc_of(block: &[u8]) -> u32 {
    let c = crc32c::crc32c(&block[..CRC_AT]);
    crc32c::crc32c_append(c, &block[BLOCK_HEADER_BYTES..])
}

/// Marks a freshly allocated block: no record starts in it yet.
pub fn init_fresh(block: &mut [u8]) {
    debug_assert_eq!(block.len(), BLOCK_SIZE_BYTES);
    block[28..30].copy_from_slice(&NO_RECORD_START.to_le_bytes());
}

/// Notes that a record starts at `payload_offset` of this block, if none started before.
pub fn note_record_start(block: &mut [u8], payload_offset: usize) {
    debug_assert!(payload_offset < BLOCK_PAYLOAD_BYTES);
    if u16::from_le_bytes([block[28], block[29]]) == NO_RECORD_START {
        block[28..30].copy_from_slice(&(payload_offset as u16).to_le_bytes());
    }
}

/// Fills the header (the payload and first_record_offset are already in place) and the
/// checksum. The payload past `used_bytes` must be zero.
pub fn seal(block: &mut [u8], used_bytes: usize, block_lsn: Lsn, flush_start_lsn: Lsn, epoch: u32) {
    debug_assert_eq!(block.len(), BLOCK_SIZE_BYTES);
    debug_assert!((1..=BLOCK_PAYLOAD_BYTES).contains(&used_bytes), "used {used_bytes}");
    debug_assert_eq!(block_lsn.0 % BLOCK_SIZE_BYTES as u64, 0);
    debug_assert!(flush_start_lsn <= block_lsn);
    debug_assert!(block[BLOCK_HEADER_BYTES + used_bytes..].iter().all(|b| *b == 0), "padding not zero");
    block[0..4].copy_from_slice(&BLOCK_MAGIC);
    block[4..6].copy_from_slice(&BLOCK_FORMAT_VERSION.to_le_bytes());
    block[6..8].copy_from_slice(&(used_bytes as u16).to_le_bytes());
    block[8..16].copy_from_slice(&block_lsn.0.to_le_bytes());
    block[16..24].copy_from_slice(&flush_start_lsn.0.to_le_bytes());
    block[24..28].copy_from_slice(&epoch.to_le_bytes());
    block[30..36].fill(0);
    let crc = crc_of(block);
    block[CRC_AT..CRC_AT + 4].copy_from_slice(&crc.to_le_bytes());
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(a)
}

/// Checks a block read from disk. Never panics on any input of any length.
pub fn inspect(block: &[u8]) -> BlockState {
    if block.len() != BLOCK_SIZE_BYTES {
        return BlockState::Bad(format!("block of {} bytes, expected {BLOCK_SIZE_BYTES}", block.len()));
    }
    if block.iter().all(|b| *b == 0) {
        return BlockState::Zero;
    }
    let stored = u32::from_le_bytes([block[CRC_AT], block[CRC_AT + 1], block[CRC_AT + 2], block[CRC_AT + 3]]);
    let computed = crc_of(block);
    if stored != computed {
        return BlockState::Bad(format!("block checksum {stored:08x} does not match its bytes ({computed:08x})"));
    }
    if block[0..4] != BLOCK_MAGIC {
        return BlockState::Bad("block magic is not FSWL".into());
    }
    let version = u16::from_le_bytes([block[4], block[5]]);
    if version != BLOCK_FORMAT_VERSION {
        return BlockState::Bad(format!("block format version {version}, this flashscan reads {BLOCK_FORMAT_VERSION}"));
    }
    let used_bytes = u16::from_le_bytes([block[6], block[7]]);
    if used_bytes == 0 || used_bytes as usize > BLOCK_PAYLOAD_BYTES {
        return BlockState::Bad(format!("block used_bytes {used_bytes} outside 1..={BLOCK_PAYLOAD_BYTES}"));
    }
    let block_lsn = Lsn(u64_at(block, 8));
    let flush_start_lsn = Lsn(u64_at(block, 16));
    if !block_lsn.0.is_multiple_of(BLOCK_SIZE_BYTES as u64) || flush_start_lsn > block_lsn || !flush_start_lsn.0.is_multiple_of(BLOCK_SIZE_BYTES as u64) {
        return BlockState::Bad(format!("block LSNs inconsistent (block {block_lsn}, flush start {flush_start_lsn})"));
    }
    let epoch = u32::from_le_bytes([block[24], block[25], block[26], block[27]]);
    let first_record_offset = u16::from_le_bytes([block[28], block[29]]);
    if first_record_offset != NO_RECORD_START && first_record_offset >= used_bytes {
        return BlockState::Bad(format!("first record offset {first_record_offset} past used bytes {used_bytes}"));
    }
    if block[30..36].iter().any(|b| *b != 0) {
        return BlockState::Bad("reserved header bytes are not zero".into());
    }
    if block[BLOCK_HEADER_BYTES + used_bytes as usize..].iter().any(|b| *b != 0) {
        return BlockState::Bad("padding after the used bytes is not zero".into());
    }
    BlockState::Valid(BlockHeader { used_bytes, block_lsn, flush_start_lsn, epoch, first_record_offset })
}

/// The payload bytes a valid block carries.
pub fn payload<'a>(block: &'a [u8], header: &BlockHeader) -> &'a [u8] {
    &block[BLOCK_HEADER_BYTES..BLOCK_HEADER_BYTES + header.used_bytes as usize]
}

/// Recomputes the checksum over whatever the block holds, checking nothing: for tests and
/// fuzz targets that forge blocks to reach the checks behind the checksum.
pub fn restamp_checksum(block: &mut [u8]) {
    if block.len() == BLOCK_SIZE_BYTES {
        let crc = crc_of(block);
        block[CRC_AT..CRC_AT + 4].copy_from_slice(&crc.to_le_bytes());
    }
}
