//! The scan's reader: the buffer pool's streaming path (`flashscan_buffer::stream`) fed
//! chunks. One engine, `depth` large reads in flight into the stream's extent ring, every
//! completed chunk handed to the consumer (in completion order, not file order) and its
//! slot re-queued as soon as the consumer returns. While the consumer decodes one chunk,
//! the other `depth - 1` reads proceed, so I/O and decode overlap. A scan of any size
//! touches `depth x io size` bytes of memory per worker and never flushes the pool's warm
//! set; pages dirty in the pool reach the consumer in the pool's version.
//!
//! Time spent blocked waiting for a completion is "waiting for I/O": the consumer had
//! nothing to work on.

use flashscan_buffer::{BufferPool, Extent, ScanStream};
use flashscan_io::IoEngine;

use crate::chunk::Chunk;
use crate::depth::ScanDepth;
use crate::error::ExecError;

/// What one reader did (the stream's own counters).
pub type ReadAheadStats = flashscan_buffer::StreamStats;

pub struct ReadAhead {
    stream: ScanStream<'static, Chunk>,
}

impl ReadAhead {
    /// Takes an idle engine whose arena has one slot per outstanding read, each at least
    /// as large as the largest chunk it will be given; reads through the process's pool.
    pub fn new(engine: Box<dyn IoEngine>) -> Result<ReadAhead, ExecError> {
        Self::with_pool(BufferPool::global(), engine)
    }

    pub fn with_pool(pool: &'static BufferPool, engine: Box<dyn IoEngine>) -> Result<ReadAhead, ExecError> {
        Ok(ReadAhead { stream: ScanStream::new(pool, engine)? })
    }

    pub fn engine_name(&self) -> &'static str {
        self.stream.engine_name()
    }

    pub fn stats(&self) -> ReadAheadStats {
        self.stream.stats()
    }

    /// Reads every chunk `next` yields and hands each to `consume` with its bytes.
    /// On any error (a failed or short read, or the consumer's), reads still in flight are
    /// drained before returning, since the kernel may still be writing into their slots.
    pub fn run(
        &mut self,
        next: &mut dyn FnMut() -> Option<Chunk>,
        consume: &mut dyn FnMut(&Chunk, &[u8]) -> Result<(), ExecError>,
    ) -> Result<(), ExecError> {
        self.run_with_depth(next, consume, None)
    }

    /// Like `run`, keeping the scan's current depth in flight (`ScanDepth::depth`, at most
    /// the engine's slots) and telling it of every chunk handed to `consume`, so a depth
    /// chosen while scanning (`DepthPolicy::Auto`) sees the rate the workers get.
    pub fn run_with_depth(
        &mut self,
        next: &mut dyn FnMut() -> Option<Chunk>,
        consume: &mut dyn FnMut(&Chunk, &[u8]) -> Result<(), ExecError>,
        depth: Option<&ScanDepth>,
    ) -> Result<(), ExecError> {
        let slot_size_bytes = self.stream.slot_size_bytes();
        let mut next_extent = || {
            let chunk = next()?;
            assert!(chunk.length_bytes as usize <= slot_size_bytes, "chunk larger than a slot");
            Some((Extent { file_index: chunk.file_index, offset_bytes: chunk.offset_bytes, length_bytes: chunk.length_bytes }, chunk))
        };
        let window = || depth.map_or(u32::MAX, ScanDepth::depth);
        self.stream.run_windowed(
            &mut next_extent,
            &mut |chunk: Chunk, bytes: &[u8]| {
                debug_assert_eq!(bytes.len(), chunk.length_bytes as usize);
                if let Some(depth) = depth {
                    depth.chunk_done(bytes.len() as u64);
                }
                consume(&chunk, bytes)
            },
            &window,
        )
    }
}
