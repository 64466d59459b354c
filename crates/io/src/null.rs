//! Null engine (fio's `engines/null.c`): every request completes at once with its full
//! length and no data moves. Running the workbench on it measures the harness's own cost
//! per I/O, the floor under every other engine's CPU µs per I/O.

use std::sync::Arc;
use std::time::Instant;

use crate::buffer_arena::BufferArena;
use crate::engine::{check_request, EngineConfig, InFlight, IoCompletion, IoEngine, IoRequest};
use crate::error::IoError;
use crate::file_set::FileSet;

const NAME: &str = "null";

pub struct NullEngine {
    files: Arc<FileSet>,
    arena: BufferArena,
    in_flight: InFlight,
    queue_depth: u32,
    pending: Vec<u32>,
}

impl NullEngine {
    pub fn new(files: Arc<FileSet>, config: EngineConfig) -> Result<NullEngine, IoError> {
        let arena = BufferArena::new(config.slot_count, config.slot_size_bytes)?;
        Ok(NullEngine {
            files,
            in_flight: InFlight::new(arena.slot_count()),
            arena,
            queue_depth: config.queue_depth,
            pending: Vec::with_capacity(config.queue_depth as usize),
        })
    }
}

impl IoEngine for NullEngine {
    fn name(&self) -> &'static str {
        NAME
    }
    fn files(&self) -> &FileSet {
        &self.files
    }
    fn arena(&self) -> &BufferArena {
        &self.arena
    }
    fn slot_mut(&mut self, slot: u32) -> &mut [u8] {
        self.arena.slot_mut(slot)
    }
    fn slot(&self, slot: u32) -> &[u8] {
        self.arena.slot(slot)
    }
    fn in_flight(&self) -> u32 {
        self.in_flight.count
    }
    fn queue_depth(&self) -> u32 {
        self.queue_depth
    }
    fn queue(&mut self, request: IoRequest) -> Result<(), IoError> {
        check_request(NAME, &request, &self.files, &self.arena, &self.in_flight.busy)?;
        if self.in_flight.count >= self.queue_depth {
            return Err(IoError::InvalidRequest(format!("{NAME}: queue full")));
        }
        self.in_flight.start(request, Instant::now());
        self.pending.push(request.slot);
        Ok(())
    }
    fn submit(&mut self) -> Result<(), IoError> {
        Ok(())
    }
    fn reap(&mut self, _min_complete: u32, out: &mut Vec<IoCompletion>) -> Result<(), IoError> {
        let now = Instant::now();
        for slot in self.pending.drain(..) {
            let length = self.in_flight.requests[slot as usize].length_bytes;
            out.push(self.in_flight.finish(slot, Ok(length), now, &self.files));
        }
        Ok(())
    }
}

impl Drop for NullEngine {
    fn drop(&mut self) {
        // A slot in flight is memory the kernel (or a worker) may still write: dropping the
        // engine then frees it under the device's feet. `RequestQueue` drains on drop.
        debug_assert!(
            self.in_flight.count == 0 || std::thread::panicking(),
            "{NAME} engine dropped with {} I/Os in flight: drain it first (RequestQueue does)",
            self.in_flight.count
        );
    }
}
