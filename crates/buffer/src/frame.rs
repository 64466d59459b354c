//! Per-frame state. The rules that make the pool safe:
//! - a frame's pin count only rises under the page-table shard lock of its key, so an
//!   evictor holding that lock and seeing zero pins knows nobody can start using it;
//! - an evictor claims a frame by moving its pin count 0 → 1 (compare-and-swap), so two
//!   evictors never take the same frame;
//! - readers hold the latch shared while they look at the bytes; the loader holds it
//!   exclusive while the bytes arrive, so a reader of a page being read waits for the read;
//! - a guard releases its latch before it unpins: an unpinned frame has no latch holder.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicU8, Ordering};

use parking_lot::RwLock;

use crate::page_key::PageKey;

/// Holds no page and is not in the page table.
pub const STATE_FREE: u8 = 0;
/// In the page table, latched exclusive by its loader, bytes not yet valid.
pub const STATE_LOADING: u8 = 1;
/// In the page table with verified bytes.
pub const STATE_VALID: u8 = 2;
/// Its load failed: out of the table again, waiting readers retry.
pub const STATE_FAILED: u8 = 3;

pub struct FrameMeta {
    pub latch: RwLock<()>,
    pub pin_count: AtomicU32,
    /// The clock's second chance: set on every use, cleared as the hand passes.
    pub referenced: AtomicBool,
    pub state: AtomicU8,
    /// Set while a scan ring owns the frame: the clock leaves it to the ring.
    pub ring_owned: AtomicBool,
    /// Changed in memory and not yet written: the clock and `clear` leave it alone; only
    /// `write_dirty` (after the WAL rule) makes it clean again.
    pub dirty: AtomicBool,
    /// The LSN of the last log record that changed the page (0: not logged).
    pub page_lsn: AtomicU64,
    /// Bumped on every change, so a writer knows whether the bytes it wrote are still the
    /// latest (a page changed again while being written stays dirty).
    pub dirty_epoch: AtomicU64,
    key_file_index: AtomicU32,
    key_page_number: AtomicU64,
}

impl FrameMeta {
    pub fn new() -> FrameMeta {
        FrameMeta {
            latch: RwLock::new(()),
            pin_count: AtomicU32::new(0),
            referenced: AtomicBool::new(false),
            state: AtomicU8::new(STATE_FREE),
            ring_owned: AtomicBool::new(false),
            dirty: AtomicBool::new(false),
            page_lsn: AtomicU64::new(0),
            dirty_epoch: AtomicU64::new(0),
            key_file_index: AtomicU32::new(u32::MAX),
            key_page_number: AtomicU64::new(u64::MAX),
        }
    }

    /// The key last stored; only trustworthy under the key's shard lock or while pinned.
    #[inline]
    pub fn key(&self) -> PageKey {
        PageKey::new(self.key_file_index.load(Ordering::Acquire), self.key_page_number.load(Ordering::Acquire))
    }

    /// Only by the frame's exclusive owner (pin claimed, not in the page table).
    #[inline]
    pub fn set_key(&self, key: PageKey) {
        debug_assert!(self.pin_count.load(Ordering::Relaxed) >= 1, "set_key on an unclaimed frame");
        self.key_file_index.store(key.file_index, Ordering::Release);
        self.key_page_number.store(key.page_number, Ordering::Release);
    }

    #[inline]
    pub fn is_dirty(&self) -> bool {
        self.dirty.load(Ordering::Acquire)
    }

    #[inline]
    pub fn state(&self) -> u8 {
        self.state.load(Ordering::Acquire)
    }

    /// Claims an unpinned frame (pins 0 → 1). False if anybody holds a pin.
    #[inline]
    pub fn try_claim(&self) -> bool {
        self.pin_count.compare_exchange(0, 1, Ordering::AcqRel, Ordering::Relaxed).is_ok()
    }

    #[inline]
    pub fn pin(&self) {
        let before = self.pin_count.fetch_add(1, Ordering::AcqRel);
        debug_assert!(before < u32::MAX / 2, "pin count overflow");
    }

    #[inline]
    pub fn unpin(&self) {
        let before = self.pin_count.fetch_sub(1, Ordering::AcqRel);
        assert!(before > 0, "unpin of an unpinned frame");
    }

    #[inline]
    pub fn pins(&self) -> u32 {
        self.pin_count.load(Ordering::Acquire)
    }
}

impl Default for FrameMeta {
    fn default() -> Self {
        Self::new()
    }
}
