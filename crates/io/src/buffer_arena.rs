//! One aligned allocation split into equal slots: the memory every request of an engine
//! reads into or writes from. Allocated once, up front, so nothing allocates per I/O, and
//! registered with io_uring as fixed buffers where the kernel allows.

use std::alloc::{alloc_zeroed, dealloc, Layout};

use crate::error::IoError;
use crate::limits::{ARENA_BYTES_MAX, BUFFER_ALIGN_BYTES};

pub struct BufferArena {
    ptr: *mut u8,
    layout: Layout,
    slot_size_bytes: usize,
    slot_count: u32,
}

// SAFETY: the arena is plain memory; exclusive access to a slot is the engine's contract
// (a slot is owned by the caller while idle and by the kernel or a worker while in flight).
unsafe impl Send for BufferArena {}
unsafe impl Sync for BufferArena {}

impl BufferArena {
    pub fn new(slot_count: u32, slot_size_bytes: usize) -> Result<BufferArena, IoError> {
        if slot_count == 0 || slot_size_bytes == 0 {
            return Err(IoError::InvalidRequest(format!(
                "buffer arena needs at least one slot of at least one byte (got {slot_count} x {slot_size_bytes})"
            )));
        }
        // Round every slot to the alignment so each slot starts aligned for O_DIRECT.
        let slot_size_bytes = slot_size_bytes.div_ceil(BUFFER_ALIGN_BYTES) * BUFFER_ALIGN_BYTES;
        let total = slot_size_bytes
            .checked_mul(slot_count as usize)
            .filter(|t| *t <= ARENA_BYTES_MAX)
            .ok_or(IoError::ArenaTooLarge {
                bytes: slot_size_bytes.saturating_mul(slot_count as usize),
                limit: ARENA_BYTES_MAX,
            })?;
        // Refused only past isize::MAX bytes, far above ARENA_BYTES_MAX.
        let layout = Layout::from_size_align(total, BUFFER_ALIGN_BYTES)
            .map_err(|_| IoError::ArenaTooLarge { bytes: total, limit: ARENA_BYTES_MAX })?;
        // SAFETY: layout has a non-zero size (checked above).
        let ptr = unsafe { alloc_zeroed(layout) };
        if ptr.is_null() {
            return Err(IoError::ArenaTooLarge { bytes: total, limit: ARENA_BYTES_MAX });
        }
        Ok(BufferArena { ptr, layout, slot_size_bytes, slot_count })
    }

    pub fn slot_count(&self) -> u32 {
        self.slot_count
    }

    pub fn slot_size_bytes(&self) -> usize {
        self.slot_size_bytes
    }

    /// Start of a slot. The pointer is valid for `slot_size_bytes` bytes while the arena lives.
    pub fn slot_ptr(&self, slot: u32) -> *mut u8 {
        assert!(slot < self.slot_count, "slot {slot} out of range {}", self.slot_count);
        // SAFETY: slot < slot_count, so the offset stays inside the allocation.
        unsafe { self.ptr.add(slot as usize * self.slot_size_bytes) }
    }

    pub fn slot(&self, slot: u32) -> &[u8] {
        // SAFETY: in bounds (slot_ptr asserts); the engine guarantees no writer while idle.
        unsafe { std::slice::from_raw_parts(self.slot_ptr(slot), self.slot_size_bytes) }
    }

    #[allow(clippy::mut_from_ref)]
    pub(crate) fn slot_mut_unchecked(&self, slot: u32) -> &mut [u8] {
        // SAFETY: in bounds; the caller (an engine) owns the slot exclusively.
        unsafe { std::slice::from_raw_parts_mut(self.slot_ptr(slot), self.slot_size_bytes) }
    }

    pub fn slot_mut(&mut self, slot: u32) -> &mut [u8] {
        self.slot_mut_unchecked(slot)
    }

    /// iovecs of every slot, for io_uring buffer registration.
    pub(crate) fn iovecs(&self) -> Vec<libc::iovec> {
        (0..self.slot_count)
            .map(|s| libc::iovec { iov_base: self.slot_ptr(s).cast(), iov_len: self.slot_size_bytes })
            .collect()
    }
}

impl Drop for BufferArena {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout.
        unsafe { dealloc(self.ptr, self.layout) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_aligned_and_disjoint() {
        let arena = BufferArena::new(3, 5000).unwrap();
        assert_eq!(arena.slot_size_bytes(), 8192);
        for s in 0..3 {
            assert_eq!(arena.slot_ptr(s) as usize % BUFFER_ALIGN_BYTES, 0);
        }
        assert_eq!(arena.slot_ptr(1) as usize - arena.slot_ptr(0) as usize, 8192);
    }

    #[test]
    fn refuses_zero_and_oversized() {
        assert!(BufferArena::new(0, 4096).is_err());
        assert!(matches!(BufferArena::new(1024, 8 << 20), Err(IoError::ArenaTooLarge { .. })));
    }
}
