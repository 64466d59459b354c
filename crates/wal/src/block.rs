//! Log blocks: 4 KiB, each with a checksummed header, written once and never rewritten.
//!
//! ```text
//! offset size field
//!  0     4    magic "FSWL"
//!  4     2    format version (2; version 1 blocks are still read)
//!  6     2    used_bytes: record bytes in this block's payload (1..=4056)
//!  8     8    block_lsn: LSN of the block's first byte (= its position in the log)
//! 16     8    flush_start_lsn: LSN of the first block of the write that carried this block
//! 24     4    epoch: the log's open count when written (older epochs are stale)
//! 28     2    first_record_offset: payload offset of the first record starting here, 0xFFFF if none
//! 30     6    durable_lag_bytes (v2; zero in v1): u48, flush_start_lsn minus the durable
//!             LSN at submit: every log block below `flush_start_lsn - durable_lag_bytes`
//!             was durable when this block's flush was submitted (the writer rounds its
//!             durable LSN up to a block end; 0: every block before the flush was durable,
//!             as always in v1 where one flush ran at a time)
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
//!
//! Why the durable LSN at submit (v2): the writer keeps several flushes in flight
//! (`WalConfig::flushes_in_flight_max`), so after a power loss a later flush may have
//! reached the disk while an earlier one did not. `durable_at_submit_lsn` tells the reader
//! which case a damaged block at LSN p is: a valid later block submitted while p was not
//! yet durable (`durable_at_submit_lsn <= p`) was never acknowledged (every ack waits for
//! all bytes before it), so the damage is a torn tail; one submitted after p was durable
//! proves p was durable once: corruption (reader.rs).

use crate::limits::{BLOCK_HEADER_BYTES, BLOCK_PAYLOAD_BYTES, BLOCK_SIZE_BYTES};
use crate::lsn::Lsn;

pub const BLOCK_MAGIC: [u8; 4] = *b"FSWL";
/// The version this flashscan writes.
pub const BLOCK_FORMAT_VERSION: u16 = 2;
/// The first version, one flush at a time: read as v2 with `durable_lag_bytes` = 0.
pub const BLOCK_FORMAT_VERSION_V1: u16 = 1;
/// `durable_lag_bytes` is 48 bits (the 6 bytes v1 reserved).
pub const DURABLE_LAG_BYTES_MAX: u64 = (1 << 48) - 1;
pub const NO_RECORD_START: u16 = 0xFFFF;
const CRC_AT: usize = 36;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockHeader {
    pub used_bytes: u16,
    pub block_lsn: Lsn,
    pub flush_start_lsn: Lsn,
    pub epoch: u32,
    pub first_record_offset: u16,
    /// Every log byte below this LSN was durable when this block's flush was submitted
    /// (`flush_start_lsn - durable_lag_bytes`; `flush_start_lsn` for a v1 block).
    pub durable_at_submit_lsn: Lsn,
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
/// checksum. The payload past `used_bytes` must be zero. `durable_at_submit_lsn`: the log's
/// durable LSN when the flush was submitted, at most `flush_start_lsn` (the caller clamps:
/// a fresh log's durable LSN lies inside the payload of the first block it will write).
pub fn seal(block: &mut [u8], used_bytes: usize, block_lsn: Lsn, flush_start_lsn: Lsn, durable_at_submit_lsn: Lsn, epoch: u32) {
    debug_assert_eq!(block.len(), BLOCK_SIZE_BYTES);
    debug_assert!((1..=BLOCK_PAYLOAD_BYTES).contains(&used_bytes), "used {used_bytes}");
    debug_assert_eq!(block_lsn.0 % BLOCK_SIZE_BYTES as u64, 0);
    debug_assert!(flush_start_lsn <= block_lsn);
    debug_assert!(durable_at_submit_lsn <= flush_start_lsn);
    let lag = flush_start_lsn.0 - durable_at_submit_lsn.0;
    debug_assert!(lag <= DURABLE_LAG_BYTES_MAX, "durable lag {lag}");
    debug_assert!(block[BLOCK_HEADER_BYTES + used_bytes..].iter().all(|b| *b == 0), "padding not zero");
    block[0..4].copy_from_slice(&BLOCK_MAGIC);
    block[4..6].copy_from_slice(&BLOCK_FORMAT_VERSION.to_le_bytes());
    block[6..8].copy_from_slice(&(used_bytes as u16).to_le_bytes());
    block[8..16].copy_from_slice(&block_lsn.0.to_le_bytes());
    block[16..24].copy_from_slice(&flush_start_lsn.0.to_le_bytes());
    block[24..28].copy_from_slice(&epoch.to_le_bytes());
    block[30..36].copy_from_slice(&lag.min(DURABLE_LAG_BYTES_MAX).to_le_bytes()[..6]);
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
    if version != BLOCK_FORMAT_VERSION && version != BLOCK_FORMAT_VERSION_V1 {
        return BlockState::Bad(format!("block format version {version}, this flashscan reads {BLOCK_FORMAT_VERSION_V1} and {BLOCK_FORMAT_VERSION}"));
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
    let mut lag = [0u8; 8];
    lag[..6].copy_from_slice(&block[30..36]);
    let lag = u64::from_le_bytes(lag);
    if version == BLOCK_FORMAT_VERSION_V1 && lag != 0 {
        return BlockState::Bad("reserved header bytes of a version 1 block are not zero".into());
    }
    if lag > flush_start_lsn.0 {
        return BlockState::Bad(format!("durable lag {lag} bytes before flush start {flush_start_lsn}"));
    }
    let durable_at_submit_lsn = Lsn(flush_start_lsn.0 - lag);
    if block[BLOCK_HEADER_BYTES + used_bytes as usize..].iter().any(|b| *b != 0) {
        return BlockState::Bad("padding after the used bytes is not zero".into());
    }
    BlockState::Valid(BlockHeader { used_bytes, block_lsn, flush_start_lsn, epoch, first_record_offset, durable_at_submit_lsn })
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
