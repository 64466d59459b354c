//! The read-ahead reader: one engine, `depth` large reads in flight, every completed
//! chunk handed to the consumer (in completion order, not file order) and its buffer
//! re-queued as soon as the consumer returns. While the consumer decodes one chunk, the
//! other `depth - 1` reads proceed, so I/O and decode overlap. The engine's arena is the
//! whole buffer ring: a scan of any size touches `depth x io size` bytes of memory per
//! worker, which is why a big scan does not flush a warm cache.
//!
//! Time spent blocked in `reap` is "waiting for I/O": the consumer had nothing to work on.

use std::time::Instant;

use flashscan_io::{IoCompletion, IoEngine, IoOp, IoRequest};

use crate::chunk::Chunk;
use crate::error::ExecError;

/// What one reader did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct ReadAheadStats {
    pub reads_count: u64,
    pub bytes_read: u64,
    /// Time blocked waiting for a completion while nothing was ready to consume.
    pub io_wait_ns: u64,
}

impl ReadAheadStats {
    pub fn add(&mut self, other: &ReadAheadStats) {
        self.reads_count += other.reads_count;
        self.bytes_read += other.bytes_read;
        self.io_wait_ns += other.io_wait_ns;
    }
}

pub struct ReadAhead {
    engine: Box<dyn IoEngine>,
    /// The chunk each slot is reading (valid while the slot is in flight or ready).
    chunk_by_slot: Vec<Chunk>,
    free_slots: Vec<u32>,
    /// Completions reaped and not yet consumed.
    ready: Vec<IoCompletion>,
    stats: ReadAheadStats,
}

impl ReadAhead {
    /// Takes an engine whose arena has one slot per outstanding read, each at least as
    /// large as the largest chunk it will be given.
    pub fn new(engine: Box<dyn IoEngine>) -> ReadAhead {
        let slot_count = engine.arena().slot_count().min(engine.queue_depth());
        assert!(slot_count >= 1, "an engine with no slots cannot read");
        let empty = Chunk { file_index: 0, offset_bytes: 0, length_bytes: 0, first_page_id: 0, page_count: 0, tag: 0 };
        ReadAhead {
            chunk_by_slot: vec![empty; engine.arena().slot_count() as usize],
            // Popped from the back: slot 0 goes first, which keeps small scans in few slots.
            free_slots: (0..slot_count).rev().collect(),
            ready: Vec::with_capacity(slot_count as usize),
            engine,
            stats: ReadAheadStats::default(),
        }
    }

    pub fn engine_name(&self) -> &'static str {
        self.engine.name()
    }

    pub fn stats(&self) -> ReadAheadStats {
        self.stats
    }

    /// Reads every chunk `next` yields and hands each to `consume` with its bytes.
    /// On any error (a failed or short read, or the consumer's), reads still in flight are
    /// drained before returning, since the kernel may still be writing into their slots.
    pub fn run(
        &mut self,
        next: &mut dyn FnMut() -> Option<Chunk>,
        consume: &mut dyn FnMut(&Chunk, &[u8]) -> Result<(), ExecError>,
    ) -> Result<(), ExecError> {
        let result = self.run_inner(next, consume);
        if result.is_err() {
            self.drain();
        }
        result
    }

    fn run_inner(
        &mut self,
        next: &mut dyn FnMut() -> Option<Chunk>,
        consume: &mut dyn FnMut(&Chunk, &[u8]) -> Result<(), ExecError>,
    ) -> Result<(), ExecError> {
        let slot_size_bytes = self.engine.arena().slot_size_bytes();
        let mut exhausted = false;
        loop {
            let mut queued_any = false;
            while !exhausted {
                let Some(slot) = self.free_slots.pop() else { break };
                let Some(chunk) = next() else {
                    self.free_slots.push(slot);
                    exhausted = true;
                    break;
                };
                assert!(chunk.length_bytes as usize <= slot_size_bytes, "chunk larger than a slot");
                self.chunk_by_slot[slot as usize] = chunk;
                self.engine.queue(IoRequest {
                    op: IoOp::Read,
                    file_index: chunk.file_index,
                    offset_bytes: chunk.offset_bytes,
                    length_bytes: chunk.length_bytes,
                    slot,
                    user_data: slot as u64,
                })?;
                queued_any = true;
            }
            if self.ready.is_empty() {
                if self.engine.in_flight() == 0 {
                    debug_assert!(exhausted);
                    return Ok(());
                }
                let wait_start = Instant::now();
                self.engine.reap(1, &mut self.ready)?;
                self.stats.io_wait_ns += wait_start.elapsed().as_nanos() as u64;
            } else if queued_any {
                // Completions are waiting; send the new reads out before consuming them.
                self.engine.submit()?;
            }
            let Some(done) = self.ready.pop() else { continue };
            let slot = done.slot;
            done.expect_full(self.engine.files())?;
            let chunk = self.chunk_by_slot[slot as usize];
            debug_assert_eq!(chunk.offset_bytes, done.offset_bytes);
            self.stats.reads_count += 1;
            self.stats.bytes_read += chunk.length_bytes as u64;
            // The slot is idle now (reaped): the consumer may read it until it returns.
            let bytes = &self.engine.slot(slot)[..chunk.length_bytes as usize];
            let consumed = consume(&chunk, bytes);
            self.free_slots.push(slot);
            consumed?;
        }
    }

    /// Waits for every read in flight and forgets the completions.
    fn drain(&mut self) {
        let mut sink = Vec::new();
        while self.engine.in_flight() > 0 {
            if self.engine.reap(1, &mut sink).is_err() {
                // The engine itself failed; nothing more can be waited for.
                break;
            }
            sink.clear();
        }
        // Every slot is idle again (or the engine is dead); start over with all of them.
        self.ready.clear();
        let slot_count = self.engine.arena().slot_count().min(self.engine.queue_depth());
        self.free_slots = (0..slot_count).rev().collect();
    }
}
