//! The engine contract, in the manner of fio's `ioengines.h`: queue requests, submit them
//! as one batch, reap completions. An engine owns its buffer arena (registered with the
//! kernel where possible) and works on one [`FileSet`]. One engine per thread: engines are
//! `Send` but not shared, so the hot path takes no locks.
//!
//! Slot ownership: a request names a slot of the arena; from `queue` until its completion
//! is reaped the slot belongs to the engine, and the caller must not touch it (asserted).

use std::sync::Arc;
use std::time::Instant;

use crate::buffer_arena::BufferArena;
use crate::error::IoError;
use crate::file_set::FileSet;
use crate::limits::{IO_SIZE_BYTES_MAX, QUEUE_DEPTH_MAX};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IoOp {
    Read,
    Write,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IoRequest {
    pub op: IoOp,
    pub file_index: u32,
    pub offset_bytes: u64,
    pub length_bytes: u32,
    pub slot: u32,
    /// Returned unchanged in the completion.
    pub user_data: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IoCompletion {
    pub user_data: u64,
    pub op: IoOp,
    pub file_index: u32,
    pub slot: u32,
    pub offset_bytes: u64,
    pub length_bytes: u32,
    /// Bytes transferred, or the errno the kernel returned. Fewer bytes than asked is a
    /// short transfer (end of file); the caller decides whether that is an error.
    pub result: Result<u32, i32>,
    /// From `queue` to the moment the completion was seen.
    pub latency_ns: u64,
}

impl IoCompletion {
    /// The completion as a full-length transfer or an error naming what failed.
    pub fn expect_full(&self, files: &FileSet) -> Result<(), IoError> {
        let path = files.get(self.file_index).path.clone();
        match self.result {
            Ok(n) if n == self.length_bytes => Ok(()),
            Ok(n) => Err(IoError::File {
                path,
                what: format!(
                    "short {:?} at offset {}: {} of {} bytes (file truncated?)",
                    self.op, self.offset_bytes, n, self.length_bytes
                ),
            }),
            Err(errno) => Err(IoError::File {
                path,
                what: format!(
                    "{:?} of {} bytes at offset {} failed: {}",
                    self.op,
                    self.length_bytes,
                    self.offset_bytes,
                    std::io::Error::from_raw_os_error(errno)
                ),
            }),
        }
    }
}

pub trait IoEngine: Send {
    fn name(&self) -> &'static str {
        self.core().name
    }
    /// What every engine owns alike (name, files, arena, slots in flight, queue depth,
    /// requests queued and not yet handed over); the accessors below read it, so an engine
    /// implements only how it moves bytes.
    fn core(&self) -> &EngineCore;
    fn core_mut(&mut self) -> &mut EngineCore;
    fn files(&self) -> &FileSet {
        &self.core().files
    }
    fn arena(&self) -> &BufferArena {
        &self.core().arena
    }
    /// The caller's view of an idle slot, to fill before a write.
    fn slot_mut(&mut self, slot: u32) -> &mut [u8] {
        let core = self.core_mut();
        core.in_flight.slot_mut(&mut core.arena, slot)
    }
    /// The caller's view of an idle slot, to read after a read completes.
    fn slot(&self, slot: u32) -> &[u8] {
        let core = self.core();
        core.in_flight.slot(&core.arena, slot)
    }
    /// Requests queued or submitted and not yet reaped.
    fn in_flight(&self) -> u32 {
        self.core().in_flight.count
    }
    fn queue_depth(&self) -> u32 {
        self.core().queue_depth
    }
    /// Adds a request to the next batch. Fails if the queue is full or the request is invalid.
    /// Engines that hand requests over at submit or reap time take them from
    /// `EngineCore::pending`; io_uring overrides this to push to its ring at once.
    fn queue(&mut self, request: IoRequest) -> Result<(), IoError> {
        self.core_mut().queue(request)
    }
    /// Hands every queued request to the device. Engines that move the bytes at reap time
    /// (null, sim) have nothing to do here.
    fn submit(&mut self) -> Result<(), IoError> {
        Ok(())
    }
    /// Submits what is queued, waits for at least `min_complete` completions (bounded by
    /// what is in flight), and appends every completion available to `out`.
    fn reap(&mut self, min_complete: u32, out: &mut Vec<IoCompletion>) -> Result<(), IoError>;
    /// Makes every write to `file_index` that has completed durable (fdatasync): the
    /// write-ahead log's commit point. Call it with the file's writes reaped. An error means
    /// the kernel may have dropped those writes: the caller must not retry and assume success
    /// (fsync errors are reported once), it must stop. Engines that model durability
    /// themselves (the simulated one) override this.
    fn flush(&mut self, file_index: u32) -> Result<(), IoError> {
        fdatasync_file(self.files(), file_index)
    }
}

/// fdatasync of one file of the set, retried on EINTR, with the path in the error.
pub fn fdatasync_file(files: &FileSet, file_index: u32) -> Result<(), IoError> {
    use std::os::unix::io::AsRawFd;
    if file_index as usize >= files.len() {
        return Err(IoError::InvalidRequest(format!("flush: file index {file_index} of {}", files.len())));
    }
    let file = files.get(file_index);
    loop {
        // SAFETY: the descriptor is valid while `files` lives.
        let rc = unsafe { libc::fdatasync(file.file.as_raw_fd()) };
        if rc == 0 {
            return Ok(());
        }
        let source = std::io::Error::last_os_error();
        if source.raw_os_error() != Some(libc::EINTR) {
            return Err(IoError::File { path: file.path.clone(), what: format!("fdatasync failed: {source}") });
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EngineKind {
    /// io_uring, falling back to psync (with a notice) if the kernel refuses it.
    Auto,
    Uring,
    Psync,
    Null,
}

impl EngineKind {
    pub fn parse(s: &str) -> Option<EngineKind> {
        match s {
            "auto" => Some(EngineKind::Auto),
            "uring" | "io_uring" => Some(EngineKind::Uring),
            "psync" => Some(EngineKind::Psync),
            "null" => Some(EngineKind::Null),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, Copy)]
pub struct EngineConfig {
    pub queue_depth: u32,
    pub slot_count: u32,
    pub slot_size_bytes: usize,
    /// The engine is created, used and dropped on one thread. io_uring then runs its
    /// completion work only inside our own `io_uring_enter` (SINGLE_ISSUER + DEFER_TASKRUN):
    /// no interrupts of the thread, completions batched, less CPU per I/O. Using such an
    /// engine from another thread fails (EEXIST), so it is opt-in.
    pub single_thread: bool,
}

impl EngineConfig {
    /// One slot per outstanding request, each `io_size_bytes` long.
    pub fn for_depth(queue_depth: u32, io_size_bytes: usize) -> EngineConfig {
        EngineConfig { queue_depth, slot_count: queue_depth, slot_size_bytes: io_size_bytes, single_thread: false }
    }

    /// The same, for an engine that never leaves the thread that opened it.
    pub fn on_one_thread(self) -> EngineConfig {
        EngineConfig { single_thread: true, ..self }
    }

    pub fn validate(&self) -> Result<(), IoError> {
        if self.queue_depth == 0 || self.queue_depth > QUEUE_DEPTH_MAX {
            return Err(IoError::InvalidRequest(format!(
                "queue depth {} out of range 1..={QUEUE_DEPTH_MAX}",
                self.queue_depth
            )));
        }
        if self.slot_size_bytes == 0 || self.slot_size_bytes > IO_SIZE_BYTES_MAX {
            return Err(IoError::InvalidRequest(format!(
                "buffer size {} out of range 1..={IO_SIZE_BYTES_MAX}",
                self.slot_size_bytes
            )));
        }
        Ok(())
    }
}

/// Opens an engine of `kind`. With `Auto` or `Uring`, a kernel that refuses io_uring
/// (seccomp, old kernel, `FLASHSCAN_DISABLE_URING=1`) gets the psync engine and a one-line
/// notice through `notice`; the returned engine's `name()` says which one runs.
pub fn open_engine(
    kind: EngineKind,
    files: Arc<FileSet>,
    config: EngineConfig,
    notice: &mut dyn FnMut(&str),
) -> Result<Box<dyn IoEngine>, IoError> {
    config.validate()?;
    match kind {
        EngineKind::Psync => Ok(Box::new(crate::psync::PsyncEngine::new(files, config)?)),
        EngineKind::Null => Ok(Box::new(crate::null::NullEngine::new(files, config)?)),
        EngineKind::Auto | EngineKind::Uring => {
            match crate::uring::UringEngine::new(files.clone(), config) {
                Ok(e) => Ok(Box::new(e)),
                Err(IoError::EngineSetup { source, .. }) => {
                    notice(&format!("io_uring unavailable ({source}); using the psync engine"));
                    Ok(Box::new(crate::psync::PsyncEngine::new(files, config)?))
                }
                Err(e) => Err(e),
            }
        }
    }
}

/// Checks shared by every engine's `queue`.
pub(crate) fn check_request(
    engine: &'static str,
    request: &IoRequest,
    files: &FileSet,
    arena: &BufferArena,
    slot_busy: &[bool],
) -> Result<(), IoError> {
    if request.file_index as usize >= files.len() {
        return Err(IoError::InvalidRequest(format!("{engine}: file index {} of {}", request.file_index, files.len())));
    }
    if request.slot >= arena.slot_count() {
        return Err(IoError::InvalidRequest(format!("{engine}: slot {} of {}", request.slot, arena.slot_count())));
    }
    if request.length_bytes == 0 || request.length_bytes as usize > arena.slot_size_bytes() {
        return Err(IoError::InvalidRequest(format!(
            "{engine}: length {} does not fit a {}-byte slot",
            request.length_bytes,
            arena.slot_size_bytes()
        )));
    }
    let file = files.get(request.file_index);
    if file.direct {
        let align = file.offset_align_bytes as u64;
        if request.offset_bytes % align != 0 || request.length_bytes as u64 % align != 0 {
            return Err(IoError::InvalidRequest(format!(
                "{}: offset {} / length {} not aligned to {align} bytes, as O_DIRECT needs: use a block size that is a multiple of {align}, or --buffered",
                file.path.display(),
                request.offset_bytes,
                request.length_bytes
            )));
        }
    }
    assert!(!slot_busy[request.slot as usize], "{engine}: slot {} queued while in flight", request.slot);
    Ok(())
}

/// What every engine owns and manages alike: its files, its buffer arena (one slot per
/// request, allocated once), the slots in flight, its queue depth. Engines differ only in
/// how they move bytes.
pub struct EngineCore {
    /// The engine's name, in its errors and asserts.
    pub(crate) name: &'static str,
    /// Requests admitted and in flight but not yet handed to the device (engines that do
    /// the transfer at submit or reap time); at most `queue_depth`, allocated once.
    pub(crate) pending: Vec<IoRequest>,
    pub(crate) files: Arc<FileSet>,
    pub(crate) arena: BufferArena,
    pub(crate) in_flight: InFlight,
    pub(crate) queue_depth: u32,
}

impl EngineCore {
    pub(crate) fn new(name: &'static str, files: Arc<FileSet>, config: &EngineConfig) -> Result<EngineCore, IoError> {
        let arena = BufferArena::new(config.slot_count, config.slot_size_bytes)?;
        Ok(EngineCore {
            name,
            pending: Vec::with_capacity(config.queue_depth as usize),
            files,
            in_flight: InFlight::new(arena.slot_count()),
            arena,
            queue_depth: config.queue_depth,
        })
    }

    /// Every engine's `queue` starts here (see `InFlight::admit`).
    pub(crate) fn admit(&self, request: &IoRequest) -> Result<(), IoError> {
        self.in_flight.admit(self.name, request, &self.files, &self.arena, self.queue_depth)
    }

    /// The default `IoEngine::queue`: admit the request, mark its slot in flight, keep it in
    /// `pending` until the engine's submit or reap hands it over.
    pub(crate) fn queue(&mut self, request: IoRequest) -> Result<(), IoError> {
        self.admit(&request)?;
        self.in_flight.start(request, Instant::now());
        self.pending.push(request);
        Ok(())
    }

    /// Takes the pending requests out (the vector keeps its capacity: give it back with
    /// `restore_pending`, so nothing allocates per I/O).
    pub(crate) fn take_pending(&mut self) -> Vec<IoRequest> {
        std::mem::take(&mut self.pending)
    }

    pub(crate) fn restore_pending(&mut self, mut pending: Vec<IoRequest>) {
        debug_assert!(self.pending.is_empty(), "{}: requests queued while pending were out", self.name);
        pending.clear();
        self.pending = pending;
    }

    /// Ends the request on `slot` (see `InFlight::finish`).
    pub(crate) fn finish(&mut self, slot: u32, result: Result<u32, i32>, now: Instant) -> IoCompletion {
        self.in_flight.finish(slot, result, now, &self.files)
    }
}

/// Every engine's drop ends here (the core is dropped after the engine's own `Drop`, so
/// psync's workers are joined first). A slot in flight is memory the kernel (or a worker)
/// may still write: dropping the engine then frees it under the device's feet.
/// `RequestQueue` drains on drop.
impl Drop for EngineCore {
    fn drop(&mut self) {
        self.in_flight.assert_drained(self.name);
    }
}

/// Per-slot bookkeeping shared by the engines: what is in flight and since when.
pub(crate) struct InFlight {
    pub busy: Vec<bool>,
    pub requests: Vec<IoRequest>,
    pub started: Vec<Instant>,
    pub count: u32,
}

impl InFlight {
    pub fn new(slot_count: u32) -> InFlight {
        let now = Instant::now();
        let empty = IoRequest { op: IoOp::Read, file_index: 0, offset_bytes: 0, length_bytes: 0, slot: 0, user_data: 0 };
        InFlight {
            busy: vec![false; slot_count as usize],
            requests: vec![empty; slot_count as usize],
            started: vec![now; slot_count as usize],
            count: 0,
        }
    }

    pub fn start(&mut self, request: IoRequest, now: Instant) {
        let s = request.slot as usize;
        debug_assert!(!self.busy[s]);
        self.busy[s] = true;
        self.requests[s] = request;
        self.started[s] = now;
        self.count += 1;
    }

    /// Every engine's `queue` starts here: the request is well formed (file, slot, length,
    /// O_DIRECT alignment) and the engine has room for it.
    pub fn admit(&self, engine: &'static str, request: &IoRequest, files: &FileSet, arena: &BufferArena, queue_depth: u32) -> Result<(), IoError> {
        check_request(engine, request, files, arena, &self.busy)?;
        if self.count >= queue_depth {
            return Err(IoError::InvalidRequest(format!("{engine}: queue full ({queue_depth} in flight)")));
        }
        Ok(())
    }

    /// A slot's bytes; a slot in flight belongs to the device (asserted).
    pub fn slot<'a>(&self, arena: &'a BufferArena, slot: u32) -> &'a [u8] {
        assert!(!self.busy[slot as usize], "slot {slot} is in flight");
        arena.slot(slot)
    }

    /// A slot's bytes to fill; a slot in flight belongs to the device (asserted).
    pub fn slot_mut<'a>(&self, arena: &'a mut BufferArena, slot: u32) -> &'a mut [u8] {
        assert!(!self.busy[slot as usize], "slot {slot} is in flight");
        arena.slot_mut(slot)
    }

    /// Called when an engine's core is dropped (see `Drop for EngineCore`).
    pub fn assert_drained(&self, engine: &'static str) {
        debug_assert!(
            self.count == 0 || std::thread::panicking(),
            "{engine} engine dropped with {} I/Os in flight: drain it first (RequestQueue does)",
            self.count
        );
    }

    /// Ends the request on `slot`, records it in the file's stats, returns its completion.
    pub fn finish(&mut self, slot: u32, result: Result<u32, i32>, now: Instant, files: &FileSet) -> IoCompletion {
        let s = slot as usize;
        assert!(self.busy[s], "completion for idle slot {slot}");
        self.busy[s] = false;
        self.count -= 1;
        let r = self.requests[s];
        let latency_ns = now.saturating_duration_since(self.started[s]).as_nanos() as u64;
        let stats = &files.get(r.file_index).stats;
        match (r.op, result) {
            (IoOp::Read, Ok(n)) => stats.record_read(n as u64, latency_ns),
            (IoOp::Write, Ok(n)) => stats.record_write(n as u64, latency_ns),
            (_, Err(_)) => stats.record_error(),
        }
        IoCompletion {
            user_data: r.user_data,
            op: r.op,
            file_index: r.file_index,
            slot,
            offset_bytes: r.offset_bytes,
            length_bytes: r.length_bytes,
            result,
            latency_ns,
        }
    }
}
