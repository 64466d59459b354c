//! What a page request hands back. `PageGuard`: a page pinned (not evictable) and latched
//! shared (its bytes cannot change) until the guard drops. `LoadTicket`: a miss — the
//! frame is in the page table, latched exclusive, and waits for the caller to fill and
//! verify it; dropped without `complete`, the load is abandoned and the page leaves the
//! table, so waiting readers retry instead of seeing garbage.

use parking_lot::{RwLockReadGuard, RwLockWriteGuard};

use crate::frame::{STATE_FAILED, STATE_LOADING, STATE_VALID};
use crate::page_key::PageKey;
use crate::pool::BufferPool;

pub enum Fetch<'a> {
    Hit(PageGuard<'a>),
    Miss(LoadTicket<'a>),
}

pub struct PageGuard<'a> {
    pub(crate) pool: &'a BufferPool,
    pub(crate) frame: u32,
    pub(crate) key: PageKey,
    /// Released before the pin (see `frame`): an unpinned frame has no latch holders.
    pub(crate) latch: Option<RwLockReadGuard<'a, ()>>,
}

impl<'a> PageGuard<'a> {
    #[inline]
    pub fn data(&self) -> &[u8] {
        debug_assert!(self.latch.is_some());
        // SAFETY: we hold the frame's latch shared and a pin: nobody writes the frame.
        unsafe { self.pool.memory().frame(self.frame) }
    }

    pub fn key(&self) -> PageKey {
        self.key
    }

    pub fn frame(&self) -> u32 {
        self.frame
    }
}

impl<'a> PageGuard<'a> {
    /// The same page, latched exclusive for a change (the pin is kept throughout, so the
    /// frame cannot change pages; other readers finish before the latch is granted).
    pub fn into_mut(mut self) -> PageGuardMut<'a> {
        let pool = self.pool;
        let frame = self.frame;
        let key = self.key;
        drop(self.latch.take());
        // Keep the pin: the guard below takes it over.
        std::mem::forget(self);
        let latch = pool.frame_meta(frame).latch.write();
        debug_assert_eq!(pool.frame_meta(frame).key(), key, "a pinned frame changed pages");
        PageGuardMut { pool, frame, key, latch: Some(latch), changed: false }
    }
}

/// A page pinned and latched exclusive: its bytes may change, and `mark_dirty` records
/// the change (with the LSN of the log record describing it) before the guard drops.
pub struct PageGuardMut<'a> {
    pool: &'a BufferPool,
    frame: u32,
    key: PageKey,
    latch: Option<RwLockWriteGuard<'a, ()>>,
    /// `data_mut` was called: the guard must be marked dirty before it drops.
    changed: bool,
}

impl<'a> PageGuardMut<'a> {
    pub fn key(&self) -> PageKey {
        self.key
    }

    pub fn data(&self) -> &[u8] {
        // SAFETY: exclusive latch held.
        unsafe { self.pool.memory().frame(self.frame) }
    }

    /// The bytes, to change. Call `mark_dirty` after.
    pub fn data_mut(&mut self) -> &mut [u8] {
        debug_assert!(self.latch.is_some());
        self.changed = true;
        // SAFETY: exclusive latch held.
        unsafe { self.pool.memory().frame_mut(self.frame) }
    }

    /// Records the change: the page is dirty (never evicted until written) and carries
    /// `lsn`, the end of the log record that describes the change (the WAL rule: it is
    /// written only after the log is durable that far). `Lsn::ZERO` for unlogged changes.
    pub fn mark_dirty(&mut self, lsn: crate::lsn::Lsn) {
        self.pool.mark_dirty(self.frame, self.key, lsn);
        self.changed = false;
    }
}

impl Drop for PageGuardMut<'_> {
    fn drop(&mut self) {
        debug_assert!(!self.changed || std::thread::panicking(), "page {:?} changed and dropped without mark_dirty", self.key);
        drop(self.latch.take());
        self.pool.frame_meta(self.frame).unpin();
    }
}

impl Drop for PageGuard<'_> {
    fn drop(&mut self) {
        drop(self.latch.take());
        self.pool.frame_meta(self.frame).unpin();
    }
}

pub struct LoadTicket<'a> {
    pub(crate) pool: &'a BufferPool,
    pub(crate) frame: u32,
    pub(crate) key: PageKey,
    pub(crate) latch: Option<RwLockWriteGuard<'a, ()>>,
}

impl<'a> LoadTicket<'a> {
    pub fn key(&self) -> PageKey {
        self.key
    }

    pub fn frame(&self) -> u32 {
        self.frame
    }

    /// The frame's bytes, to fill.
    #[inline]
    pub fn buffer_mut(&mut self) -> &mut [u8] {
        debug_assert!(self.latch.is_some());
        // SAFETY: we hold the frame's latch exclusively.
        unsafe { self.pool.memory().frame_mut(self.frame) }
    }

    /// Verifies the filled frame; on success the page becomes visible to every reader and
    /// the caller keeps it pinned through the returned guard.
    pub fn complete<E>(mut self, verify: impl FnOnce(&[u8]) -> Result<(), E>) -> Result<PageGuard<'a>, E> {
        let meta = self.pool.frame_meta(self.frame);
        debug_assert_eq!(meta.state(), STATE_LOADING);
        debug_assert_eq!(meta.key(), self.key);
        debug_assert!(meta.pins() >= 1);
        // SAFETY: exclusive latch held.
        let bytes = unsafe { self.pool.memory().frame(self.frame) };
        if let Err(e) = verify(bytes) {
            self.pool.counters().verify_failed();
            // Drop abandons the load: out of the table, state FAILED, waiters retry.
            return Err(e);
        }
        meta.state.store(STATE_VALID, std::sync::atomic::Ordering::Release);
        meta.referenced.store(true, std::sync::atomic::Ordering::Relaxed);
        self.pool.counters().installed();
        let write = self.latch.take().expect("LoadTicket latch present until completed");
        let read = RwLockWriteGuard::downgrade(write);
        Ok(PageGuard { pool: self.pool, frame: self.frame, key: self.key, latch: Some(read) })
    }

    /// Copies `bytes` (one page) into the frame, then `complete`s.
    pub fn complete_from<E>(mut self, bytes: &[u8], verify: impl FnOnce(&[u8]) -> Result<(), E>) -> Result<PageGuard<'a>, E> {
        debug_assert_eq!(bytes.len(), crate::limits::FRAME_SIZE_BYTES);
        self.buffer_mut().copy_from_slice(bytes);
        self.complete(verify)
    }
}

impl Drop for LoadTicket<'_> {
    fn drop(&mut self) {
        if let Some(latch) = self.latch.take() {
            let meta = self.pool.frame_meta(self.frame);
            self.pool.remove_mapping(self.key, self.frame);
            meta.state.store(STATE_FAILED, std::sync::atomic::Ordering::Release);
            drop(latch);
            meta.unpin();
        }
    }
}
