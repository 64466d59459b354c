//! The memory of every frame: one aligned allocation made when the pool starts, so the
//! budget is fixed and nothing allocates per page.

use std::alloc::{alloc_zeroed, dealloc, Layout};

use crate::error::BufferError;
use crate::limits::{FRAME_ALIGN_BYTES, FRAME_SIZE_BYTES};

pub struct FrameMemory {
    ptr: *mut u8,
    layout: Layout,
    frame_count: u32,
}

// SAFETY: plain memory; which thread may read or write a frame is decided by the frame's
// latch (see `frame`), never by this type.
unsafe impl Send for FrameMemory {}
unsafe impl Sync for FrameMemory {}

impl FrameMemory {
    pub fn new(frame_count: u32) -> Result<FrameMemory, BufferError> {
        let bytes = frame_count as usize * FRAME_SIZE_BYTES;
        let failed = || BufferError::AllocationFailed { bytes: bytes as u64 };
        let layout = Layout::from_size_align(bytes, FRAME_ALIGN_BYTES).map_err(|_| failed())?;
        if bytes == 0 {
            return Err(failed());
        }
        // SAFETY: non-zero size (checked above). Zeroed memory comes from mmap for large
        // sizes, so untouched frames cost no RAM until first used.
        let ptr = unsafe { alloc_zeroed(layout) };
        if ptr.is_null() {
            return Err(failed());
        }
        Ok(FrameMemory { ptr, layout, frame_count })
    }

    pub fn frame_count(&self) -> u32 {
        self.frame_count
    }

    pub fn bytes(&self) -> usize {
        self.layout.size()
    }

    #[inline]
    pub fn frame_ptr(&self, frame: u32) -> *mut u8 {
        assert!(frame < self.frame_count, "frame {frame} out of range {}", self.frame_count);
        // SAFETY: frame < frame_count, so the offset stays inside the allocation.
        unsafe { self.ptr.add(frame as usize * FRAME_SIZE_BYTES) }
    }

    /// # Safety
    /// The caller holds the frame's latch (shared) or owns the frame exclusively.
    #[inline]
    pub unsafe fn frame(&self, frame: u32) -> &[u8] {
        std::slice::from_raw_parts(self.frame_ptr(frame), FRAME_SIZE_BYTES)
    }

    /// # Safety
    /// The caller holds the frame's latch exclusively.
    #[allow(clippy::mut_from_ref)]
    #[inline]
    pub unsafe fn frame_mut(&self, frame: u32) -> &mut [u8] {
        std::slice::from_raw_parts_mut(self.frame_ptr(frame), FRAME_SIZE_BYTES)
    }
}

impl Drop for FrameMemory {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout.
        unsafe { dealloc(self.ptr, self.layout) }
    }
}
