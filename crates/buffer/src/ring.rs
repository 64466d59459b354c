//! Scan rings: a large scan reads its pages into a few frames of its own, reused in turn,
//! so it passes through the pool without evicting the warm set (PostgreSQL's ring buffers,
//! SQL Server's read-ahead into free buffers). Pages already in memory are used where they
//! are; pages the scan reads stay cached until the ring reuses their frame.

use std::sync::atomic::Ordering;

use crate::error::BufferError;
use crate::guard::Fetch;
use crate::limits::RING_FRAMES_MIN;
use crate::page_key::PageKey;
use crate::pool::BufferPool;

pub struct ScanRing<'a> {
    pool: &'a BufferPool,
    frames: Vec<u32>,
    next: usize,
}

impl BufferPool {
    /// A ring of `frame_count` frames taken from the pool (at most a quarter of it).
    pub fn ring(&self, frame_count: u32) -> Result<ScanRing<'_>, BufferError> {
        let max = (self.frame_count() / 4).max(RING_FRAMES_MIN);
        if !(RING_FRAMES_MIN..=max).contains(&frame_count) {
            return Err(BufferError::RingSize { frames: frame_count, min: RING_FRAMES_MIN, max });
        }
        let mut frames = Vec::with_capacity(frame_count as usize);
        for _ in 0..frame_count {
            let frame = match self.claim_victim() {
                Ok(f) => f,
                Err(e) => {
                    let ring = ScanRing { pool: self, frames, next: 0 };
                    drop(ring);
                    return Err(e);
                }
            };
            self.frame_meta(frame).ring_owned.store(true, Ordering::Release);
            self.release_claimed(frame);
            frames.push(frame);
        }
        Ok(ScanRing { pool: self, frames, next: 0 })
    }
}

impl<'a> ScanRing<'a> {
    pub fn frame_count(&self) -> usize {
        self.frames.len()
    }

    /// Like `BufferPool::fetch`, but a miss reuses the ring's oldest frame.
    pub fn fetch(&mut self, key: PageKey) -> Result<Fetch<'a>, BufferError> {
        let pool = self.pool;
        let frames = &self.frames;
        let next = &mut self.next;
        pool.fetch_with(key, &mut || {
            for _ in 0..frames.len() {
                let frame = frames[*next];
                *next = (*next + 1) % frames.len();
                if pool.try_claim_frame(frame, true) {
                    return Ok(frame);
                }
            }
            // Every ring frame is still pinned by the caller: borrow one from the pool.
            pool.claim_victim()
        })
    }
}

impl Drop for ScanRing<'_> {
    fn drop(&mut self) {
        for &frame in &self.frames {
            let meta = self.pool.frame_meta(frame);
            meta.ring_owned.store(false, Ordering::Release);
            // Pages the ring read stay cached and become ordinary clock candidates; empty
            // ring frames go back to the free list.
            if meta.state() == crate::frame::STATE_FREE && meta.try_claim() {
                self.pool.release_claimed(frame);
            }
        }
    }
}
