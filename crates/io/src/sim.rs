//! Simulated engine for tests of the layers above (TigerBeetle's `testing/storage.zig`):
//! real pread/pwrite on the real files, plus faults injected on a deterministic schedule:
//! failed I/Os (EIO), short reads, and added latency. Completions come back in reverse
//! order of submission within a batch, so callers cannot rely on ordering.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::buffer_arena::BufferArena;
use crate::engine::{check_request, EngineConfig, InFlight, IoCompletion, IoEngine, IoOp, IoRequest};
use crate::error::IoError;
use crate::file_set::FileSet;
use crate::psync::transfer;

const NAME: &str = "sim";

#[derive(Debug, Clone, Copy, Default)]
pub struct FaultPlan {
    /// Every Nth I/O (1-based count) fails with EIO.
    pub fail_every: Option<u64>,
    /// Every Nth read returns only half of its bytes.
    pub short_read_every: Option<u64>,
    /// Added to every I/O.
    pub latency: Duration,
}

pub struct SimEngine {
    files: Arc<FileSet>,
    raw_fds: Vec<i32>,
    arena: BufferArena,
    in_flight: InFlight,
    queue_depth: u32,
    pending: Vec<IoRequest>,
    plan: FaultPlan,
    io_count: u64,
    read_count: u64,
    /// Per file: opened with O_DSYNC (or O_SYNC), so each write is flushed as it completes.
    flushes_each_write: Vec<bool>,
    /// Flush accounting: writes made durable (completed on an O_DSYNC/O_SYNC file). Shared,
    /// so a test can read it after the engine is gone.
    flushed_writes: Arc<AtomicU64>,
}

impl SimEngine {
    pub fn new(files: Arc<FileSet>, config: EngineConfig, plan: FaultPlan) -> Result<SimEngine, IoError> {
        config.validate()?;
        let arena = BufferArena::new(config.slot_count, config.slot_size_bytes)?;
        let flushes_each_write = files
            .raw_fds()
            .into_iter()
            // SAFETY: F_GETFL on a descriptor the file set keeps open reads its status flags.
            .map(|fd| unsafe { libc::fcntl(fd, libc::F_GETFL) } & libc::O_DSYNC == libc::O_DSYNC)
            .collect();
        Ok(SimEngine {
            flushes_each_write,
            flushed_writes: Arc::new(AtomicU64::new(0)),
            raw_fds: files.raw_fds(),
            files,
            in_flight: InFlight::new(arena.slot_count()),
            arena,
            queue_depth: config.queue_depth,
            pending: Vec::new(),
            plan,
            io_count: 0,
            read_count: 0,
        })
    }

    /// Writes this engine made durable so far (see `flushed_writes`); the counter lives on
    /// after the engine is dropped.
    pub fn flushed_writes_counter(&self) -> Arc<AtomicU64> {
        self.flushed_writes.clone()
    }
}

impl IoEngine for SimEngine {
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
        assert!(!self.in_flight.busy[slot as usize]);
        self.arena.slot_mut(slot)
    }
    fn slot(&self, slot: u32) -> &[u8] {
        assert!(!self.in_flight.busy[slot as usize]);
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
        self.pending.push(request);
        Ok(())
    }
    fn submit(&mut self) -> Result<(), IoError> {
        Ok(())
    }
    fn reap(&mut self, _min_complete: u32, out: &mut Vec<IoCompletion>) -> Result<(), IoError> {
        if !self.plan.latency.is_zero() && !self.pending.is_empty() {
            std::thread::sleep(self.plan.latency);
        }
        while let Some(r) = self.pending.pop() {
            self.io_count += 1;
            let fd = self.raw_fds[r.file_index as usize];
            let mut result = if self.plan.fail_every.is_some_and(|n| self.io_count % n == 0) {
                Err(libc::EIO)
            } else {
                transfer(fd, r.op, self.arena.slot_ptr(r.slot), r.length_bytes, r.offset_bytes)
            };
            if r.op == IoOp::Read {
                self.read_count += 1;
                if self.plan.short_read_every.is_some_and(|n| self.read_count % n == 0) {
                    result = result.map(|n| n / 2);
                }
            }
            if r.op == IoOp::Write && result.is_ok() && self.flushes_each_write[r.file_index as usize] {
                self.flushed_writes.fetch_add(1, Ordering::Relaxed);
            }
            out.push(self.in_flight.finish(r.slot, result, Instant::now(), &self.files));
        }
        Ok(())
    }
}
