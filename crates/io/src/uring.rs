//! io_uring engine: requests go straight into the submission queue, `submit` hands the
//! whole batch to the kernel in one system call, and `reap` waits for completions in the
//! same call (`io_uring_enter` with min_complete). Files and buffers are registered once so
//! the kernel skips the per-I/O fd lookup and page pinning; where registration is refused
//! the engine still works with plain descriptors and buffers.

use std::sync::Arc;
use std::time::Instant;

use io_uring::{opcode, squeue, types, IoUring};

use crate::engine::{EngineConfig, EngineCore, IoCompletion, IoEngine, IoOp, IoRequest};
use crate::error::IoError;
use crate::file_set::FileSet;

const NAME: &str = "uring";

pub struct UringEngine {
    // Field order matters for drop: the ring (and its registrations) go before the arena.
    ring: IoUring,
    core: EngineCore,
    unsubmitted: u32,
    fixed_files: bool,
    fixed_buffers: bool,
    /// Completions appear only after an enter with GETEVENTS (DEFER_TASKRUN).
    deferred_taskrun: bool,
    raw_fds: Vec<i32>,
}

/// The ring with the cheapest completion mode the kernel offers, else a plain one.
/// Cooperative task running (COOP_TASKRUN) spares the thread an interrupt per completion;
/// on one thread, deferred task running (DEFER_TASKRUN) also batches it into our waits.
fn build_ring(entries: u32, single_thread: bool) -> Result<(IoUring, bool), IoError> {
    // FLASHSCAN_URING_NO_DEFER=1 keeps the cooperative mode, to compare the two on a device.
    let defer_allowed = std::env::var_os("FLASHSCAN_URING_NO_DEFER").is_none_or(|v| v == "0");
    if single_thread && defer_allowed {
        let deferred = IoUring::builder()
            .setup_cqsize(entries * 2)
            .setup_single_issuer()
            .setup_defer_taskrun()
            .setup_taskrun_flag()
            .build(entries);
        if let Ok(ring) = deferred {
            return Ok((ring, true));
        }
    }
    let coop = IoUring::builder().setup_cqsize(entries * 2).setup_coop_taskrun().setup_taskrun_flag().build(entries);
    if let Ok(ring) = coop {
        return Ok((ring, false));
    }
    let ring = IoUring::builder()
        .setup_cqsize(entries * 2)
        .build(entries)
        .map_err(|source| IoError::EngineSetup { engine: NAME, source })?;
    Ok((ring, false))
}

impl UringEngine {
    pub fn new(files: Arc<FileSet>, config: EngineConfig) -> Result<UringEngine, IoError> {
        if std::env::var_os("FLASHSCAN_DISABLE_URING").is_some_and(|v| v != "0") {
            return Err(IoError::EngineSetup {
                engine: NAME,
                source: std::io::Error::new(std::io::ErrorKind::PermissionDenied, "disabled by FLASHSCAN_DISABLE_URING"),
            });
        }
        let raw_fds = files.raw_fds();
        let core = EngineCore::new(NAME, files, &config)?;
        let entries = config.queue_depth.next_power_of_two().max(2);
        let (ring, deferred_taskrun) = build_ring(entries, config.single_thread)?;
        let fixed_files = !raw_fds.is_empty() && ring.submitter().register_files(&raw_fds).is_ok();
        let iovecs = core.arena.iovecs();
        // SAFETY: the iovecs point into `arena`, which outlives the ring (drop order above).
        let fixed_buffers = unsafe { ring.submitter().register_buffers(&iovecs) }.is_ok();
        Ok(UringEngine {
            ring,
            core,
            unsubmitted: 0,
            fixed_files,
            fixed_buffers,
            deferred_taskrun,
            raw_fds,
        })
    }

    /// Whether files and buffers were registered with the kernel (reported by the workbench).
    pub fn registered(&self) -> (bool, bool) {
        (self.fixed_files, self.fixed_buffers)
    }

    /// Whether completion work is deferred to our own waits (single-thread mode took).
    pub fn deferred_taskrun(&self) -> bool {
        self.deferred_taskrun
    }

    fn entry(&self, r: &IoRequest) -> squeue::Entry {
        let ptr = self.core.arena.slot_ptr(r.slot);
        let len = r.length_bytes;
        let slot = r.slot as u16;
        macro_rules! build {
            ($fd:expr) => {
                match (r.op, self.fixed_buffers) {
                    (IoOp::Read, true) => opcode::ReadFixed::new($fd, ptr, len, slot).offset(r.offset_bytes).build(),
                    (IoOp::Read, false) => opcode::Read::new($fd, ptr, len).offset(r.offset_bytes).build(),
                    (IoOp::Write, true) => opcode::WriteFixed::new($fd, ptr, len, slot).offset(r.offset_bytes).build(),
                    (IoOp::Write, false) => opcode::Write::new($fd, ptr, len).offset(r.offset_bytes).build(),
                }
            };
        }
        let entry = if self.fixed_files {
            build!(types::Fixed(r.file_index))
        } else {
            build!(types::Fd(self.raw_fds[r.file_index as usize]))
        };
        entry.user_data(r.slot as u64)
    }

    fn enter(&mut self, want: usize) -> Result<(), IoError> {
        loop {
            let result = if want == 0 { self.ring.submit() } else { self.ring.submit_and_wait(want) };
            match result {
                Ok(_) => {
                    self.unsubmitted = 0;
                    return Ok(());
                }
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => continue,
                // The completion queue is full: drain it before submitting more.
                Err(e) if e.raw_os_error() == Some(libc::EBUSY) => return Ok(()),
                Err(source) => return Err(IoError::Engine { engine: NAME, source }),
            }
        }
    }

    fn drain(&mut self, out: &mut Vec<IoCompletion>) {
        let now = Instant::now();
        // Collect first: the completion queue borrows the ring mutably.
        let mut done: [(u64, i32); 64] = [(0, 0); 64];
        loop {
            let mut n = 0;
            for cqe in self.ring.completion().take(done.len()) {
                done[n] = (cqe.user_data(), cqe.result());
                n += 1;
            }
            for &(slot, res) in &done[..n] {
                let result = if res < 0 { Err(-res) } else { Ok(res as u32) };
                out.push(self.core.finish(slot as u32, result, now));
            }
            if n < done.len() {
                break;
            }
        }
    }
}

impl IoEngine for UringEngine {
    fn core(&self) -> &EngineCore {
        &self.core
    }
    fn core_mut(&mut self) -> &mut EngineCore {
        &mut self.core
    }
    fn queue(&mut self, request: IoRequest) -> Result<(), IoError> {
        self.core.admit(&request)?;
        let entry = self.entry(&request);
        // SAFETY: the entry's buffer is the request's slot, owned by the engine until its
        // completion is reaped; the descriptor stays open as long as `files`.
        while unsafe { self.ring.submission().push(&entry) }.is_err() {
            self.enter(0)?;
        }
        self.core.in_flight.start(request, Instant::now());
        self.unsubmitted += 1;
        Ok(())
    }

    fn submit(&mut self) -> Result<(), IoError> {
        if self.unsubmitted > 0 {
            self.enter(0)?;
        }
        Ok(())
    }

    fn reap(&mut self, min_complete: u32, out: &mut Vec<IoCompletion>) -> Result<(), IoError> {
        let before = out.len();
        let want = min_complete.min(self.core.in_flight.count) as usize;
        // Completion work the kernel left for us (TASKRUN flag) only runs inside an enter;
        // a caller polling with min_complete 0 must still see those completions.
        if want == 0 && self.core.in_flight.count > 0 && self.ring.submission().taskrun() {
            self.enter(0)?;
        }
        self.drain(out);
        while out.len() - before < want || self.unsubmitted > 0 {
            let need = want.saturating_sub(out.len() - before);
            self.enter(need)?;
            self.drain(out);
            if need == 0 {
                break;
            }
        }
        Ok(())
    }
}
