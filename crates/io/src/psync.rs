//! Portable engine: pread/pwrite. At queue depth 1 it runs each request inline in the
//! caller's thread at submit time (fio's `psync`); above it, a pool of worker threads
//! (one per outstanding I/O, up to PSYNC_THREADS_MAX) gives asynchronous behaviour where
//! io_uring is not allowed.

use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant;

use crossbeam_channel::{Receiver, Sender};

use crate::engine::{EngineConfig, EngineCore, IoCompletion, IoEngine, IoOp};
use crate::error::IoError;
use crate::file_set::FileSet;
use crate::limits::PSYNC_THREADS_MAX;

const NAME: &str = "psync";

struct Job {
    fd: i32,
    op: IoOp,
    ptr: usize,
    length_bytes: u32,
    offset_bytes: u64,
    slot: u32,
}

pub struct PsyncEngine {
    raw_fds: Vec<i32>,
    /// Inline completions waiting to be reaped.
    done_inline: Vec<(u32, Result<u32, i32>, Instant)>,
    jobs: Option<Sender<Job>>,
    results: Option<Receiver<(u32, Result<u32, i32>, Instant)>>,
    workers: Vec<JoinHandle<()>>,
    // The arena inside is freed last: workers are joined in Drop before the memory goes away.
    core: EngineCore,
}

/// One positioned transfer, retried on EINTR. Short transfers are returned as they are.
pub(crate) fn transfer(fd: i32, op: IoOp, ptr: *mut u8, length_bytes: u32, offset_bytes: u64) -> Result<u32, i32> {
    loop {
        // SAFETY: ptr is valid for length_bytes (an arena slot the engine owns while in flight).
        let n = unsafe {
            match op {
                IoOp::Read => libc::pread(fd, ptr.cast(), length_bytes as usize, offset_bytes as libc::off_t),
                IoOp::Write => libc::pwrite(fd, ptr.cast(), length_bytes as usize, offset_bytes as libc::off_t),
            }
        };
        if n >= 0 {
            return Ok(n as u32);
        }
        let errno = std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO);
        if errno != libc::EINTR {
            return Err(errno);
        }
    }
}

impl PsyncEngine {
    pub fn new(files: Arc<FileSet>, config: EngineConfig) -> Result<PsyncEngine, IoError> {
        let mut engine = PsyncEngine {
            raw_fds: files.raw_fds(),
            core: EngineCore::new(NAME, files, &config)?,
            done_inline: Vec::with_capacity(config.queue_depth as usize),
            jobs: None,
            results: None,
            workers: Vec::new(),
        };
        if config.queue_depth > 1 {
            let (job_tx, job_rx) = crossbeam_channel::bounded::<Job>(config.queue_depth as usize);
            let (done_tx, done_rx) = crossbeam_channel::bounded(config.queue_depth as usize);
            for i in 0..config.queue_depth.min(PSYNC_THREADS_MAX) {
                let job_rx = job_rx.clone();
                let done_tx = done_tx.clone();
                let handle = std::thread::Builder::new()
                    .name(format!("psync-{i}"))
                    .spawn(move || {
                        for job in job_rx {
                            let r = transfer(job.fd, job.op, job.ptr as *mut u8, job.length_bytes, job.offset_bytes);
                            if done_tx.send((job.slot, r, Instant::now())).is_err() {
                                break;
                            }
                        }
                    })
                    .map_err(|source| IoError::EngineSetup { engine: NAME, source })?;
                engine.workers.push(handle);
            }
            engine.jobs = Some(job_tx);
            engine.results = Some(done_rx);
        }
        Ok(engine)
    }

    fn collect(&mut self, out: &mut Vec<IoCompletion>, mut min: usize) -> Result<(), IoError> {
        for (slot, r, at) in self.done_inline.drain(..) {
            out.push(self.core.finish(slot, r, at));
            min = min.saturating_sub(1);
        }
        let Some(results) = &self.results else { return Ok(()) };
        while min > 0 {
            let (slot, r, at) = results.recv().map_err(|_| IoError::Engine {
                engine: NAME,
                source: std::io::Error::other("worker threads stopped"),
            })?;
            out.push(self.core.finish(slot, r, at));
            min -= 1;
        }
        while let Ok((slot, r, at)) = results.try_recv() {
            out.push(self.core.finish(slot, r, at));
        }
        Ok(())
    }
}

impl IoEngine for PsyncEngine {
    fn core(&self) -> &EngineCore {
        &self.core
    }
    fn core_mut(&mut self) -> &mut EngineCore {
        &mut self.core
    }
    fn submit(&mut self) -> Result<(), IoError> {
        // The requests queued since the last submit (`EngineCore::queue`): run inline or
        // handed to the workers.
        let mut pending = self.core.take_pending();
        for r in pending.drain(..) {
            let fd = self.raw_fds[r.file_index as usize];
            let ptr = self.core.arena.slot_ptr(r.slot);
            match &self.jobs {
                None => {
                    let result = transfer(fd, r.op, ptr, r.length_bytes, r.offset_bytes);
                    self.done_inline.push((r.slot, result, Instant::now()));
                }
                Some(jobs) => jobs
                    .send(Job { fd, op: r.op, ptr: ptr as usize, length_bytes: r.length_bytes, offset_bytes: r.offset_bytes, slot: r.slot })
                    .map_err(|_| IoError::Engine { engine: NAME, source: std::io::Error::other("worker threads stopped") })?,
            }
        }
        self.core.restore_pending(pending);
        Ok(())
    }

    fn reap(&mut self, min_complete: u32, out: &mut Vec<IoCompletion>) -> Result<(), IoError> {
        self.submit()?;
        let min = min_complete.min(self.core.in_flight.count) as usize;
        self.collect(out, min)
    }
}

impl Drop for PsyncEngine {
    fn drop(&mut self) {
        // Closing the job channel ends the workers; join them before the arena is freed,
        // since a worker may still be writing into a slot (the core, dropped after this,
        // asserts nothing was left in flight).
        self.jobs = None;
        for w in self.workers.drain(..) {
            let _ = w.join();
        }
    }
}
