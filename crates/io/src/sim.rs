//! Simulated engine for tests of the layers above (TigerBeetle's `testing/storage.zig`):
//! real pread/pwrite on the real files, plus faults injected on a deterministic schedule:
//! failed I/Os (EIO), short reads, failed flushes, and added latency. Completions come
//! back in reverse order of submission within a batch, so callers cannot rely on ordering.
//!
//! **Power loss** (TigerBeetle's storage fault model, redb's `crash_consistency.rs`): engines
//! given a shared [`SimDisk`] (`with_disk`) remember the bytes every write replaced until a
//! `flush` of that file covers it. `SimDisk::cut_power` (or a seeded cut after N writes and
//! flushes) makes every later I/O fail with EIO, as if the machine stopped; then
//! `SimDisk::power_loss(seed)` decides, per write not covered by a flush, whether it survived,
//! vanished, or was torn at sector granularity (some sectors new, some old), and puts the
//! old bytes back on the real files accordingly. What was flushed always survives. With a
//! disk, `flush` is simulated (no fdatasync: the model decides what is durable, which keeps
//! a thousand crashes in a test fast); without one it is a real fdatasync.

use std::collections::HashMap;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use crate::engine::{EngineConfig, EngineCore, IoCompletion, IoEngine, IoOp};
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
    /// Every Nth flush of this engine (1-based count) fails with EIO.
    pub flush_fail_every: Option<u64>,
}

/// What a simulated device does to writes at a power loss.
#[derive(Debug, Clone, Copy)]
pub struct SimDiskPlan {
    /// The unit a write is torn at: 512 (a classic sector) or 4096 (4Kn devices, most SSDs).
    pub sector_size_bytes: usize,
    /// Cut the power at the Nth write or flush on the disk (1-based): that I/O and every
    /// later one fail with EIO. A write that meets the cut may reach the device (kept, lost
    /// or torn at the power loss, like any unflushed write); later I/Os change nothing.
    pub cut_at_io: Option<u64>,
    /// The Nth flush on the disk (1-based) fails with EIO (once; its writes stay unflushed).
    pub fail_flush_at: Option<u64>,
}

impl Default for SimDiskPlan {
    fn default() -> SimDiskPlan {
        SimDiskPlan { sector_size_bytes: 512, cut_at_io: None, fail_flush_at: None }
    }
}

/// A write not yet covered by a flush: where it went and the bytes it replaced.
struct UnflushedWrite {
    path: PathBuf,
    offset_bytes: u64,
    before: Vec<u8>,
}

struct DiskState {
    plan: SimDiskPlan,
    power_cut: bool,
    io_count: u64,
    flush_attempt_count: u64,
    /// In write order; a power loss undoes them newest first.
    unflushed: Vec<UnflushedWrite>,
}

/// What `power_loss` did, for tests to report.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PowerLossReport {
    pub writes_kept_count: u64,
    pub writes_lost_count: u64,
    pub writes_torn_count: u64,
}

/// One simulated machine's durability state, shared by every [`SimEngine`] that writes to
/// it (engines are per thread and per file set; durability is per device).
pub struct SimDisk {
    state: Mutex<DiskState>,
    flush_count: AtomicU64,
    flush_error_count: AtomicU64,
}

impl SimDisk {
    pub fn new(plan: SimDiskPlan) -> Arc<SimDisk> {
        assert!(plan.sector_size_bytes.is_power_of_two() && plan.sector_size_bytes >= 512);
        Arc::new(SimDisk {
            state: Mutex::new(DiskState { plan, power_cut: false, io_count: 0, flush_attempt_count: 0, unflushed: Vec::new() }),
            flush_count: AtomicU64::new(0),
            flush_error_count: AtomicU64::new(0),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, DiskState> {
        // A panicking test thread must not hide the disk state from the test's checks.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// From now on every I/O fails with EIO and changes nothing.
    pub fn cut_power(&self) {
        self.lock().power_cut = true;
    }

    pub fn is_power_cut(&self) -> bool {
        self.lock().power_cut
    }

    /// Successful flushes so far (every engine on this disk).
    pub fn flush_count(&self) -> u64 {
        self.flush_count.load(Ordering::Relaxed)
    }

    /// Flushes that returned an error (injected or after the power cut).
    pub fn flush_error_count(&self) -> u64 {
        self.flush_error_count.load(Ordering::Relaxed)
    }

    /// Writes not yet covered by a flush.
    pub fn unflushed_write_count(&self) -> usize {
        self.lock().unflushed.len()
    }

    /// The power goes out (if it was not cut already): each write not covered by a flush is
    /// kept, lost, or torn at sector granularity, chosen by `seed`; then the power comes back
    /// and the disk is usable again (for recovery). Engines still open must not be used for
    /// I/O while this runs.
    pub fn power_loss(&self, seed: u64) -> Result<PowerLossReport, IoError> {
        let mut st = self.lock();
        st.power_cut = true;
        let sector = st.plan.sector_size_bytes;
        let mut rng = SmallRng::seed_from_u64(seed);
        let mut report = PowerLossReport::default();
        let mut files: HashMap<PathBuf, std::fs::File> = HashMap::new();
        let writes = std::mem::take(&mut st.unflushed);
        for w in writes.iter().rev() {
            let outcome = rng.gen_range(0..3u8);
            let sectors: Vec<usize> = match outcome {
                0 => {
                    report.writes_kept_count += 1;
                    continue;
                }
                1 => {
                    report.writes_lost_count += 1;
                    (0..w.before.len().div_ceil(sector)).collect()
                }
                _ => {
                    report.writes_torn_count += 1;
                    (0..w.before.len().div_ceil(sector)).filter(|_| rng.gen_bool(0.5)).collect()
                }
            };
            let file = match files.entry(w.path.clone()) {
                std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
                std::collections::hash_map::Entry::Vacant(e) => e.insert(
                    std::fs::OpenOptions::new()
                        .write(true)
                        .open(&w.path)
                        .map_err(|source| IoError::Open { path: w.path.clone(), source })?,
                ),
            };
            for s in sectors {
                let start = s * sector;
                let end = (start + sector).min(w.before.len());
                file.write_all_at(&w.before[start..end], w.offset_bytes + start as u64)
                    .map_err(|e| IoError::File { path: w.path.clone(), what: format!("power loss undo: {e}") })?;
            }
        }
        st.power_cut = false;
        st.plan.cut_at_io = None;
        Ok(report)
    }

    /// Counts one I/O; false when the power is (now) cut.
    fn io_allowed(&self, st: &mut DiskState) -> bool {
        if st.power_cut {
            return false;
        }
        st.io_count += 1;
        if st.plan.cut_at_io.is_some_and(|n| st.io_count >= n) {
            st.power_cut = true;
            return false;
        }
        true
    }

    /// A write on `fd` (of `path`): remembers what it replaces, then does it.
    /// `durable_on_completion` (a file opened O_DSYNC/O_SYNC): a write that completes is
    /// durable at once, so a later power loss keeps it; the one the cut meets is not.
    fn write(&self, path: &std::path::Path, fd: i32, ptr: *mut u8, length_bytes: u32, offset_bytes: u64, durable_on_completion: bool) -> Result<u32, i32> {
        let mut st = self.lock();
        let was_cut = st.power_cut;
        let allowed = self.io_allowed(&mut st);
        if was_cut {
            return Err(libc::EIO);
        }
        // The write that meets the power cut reaches the device in part or not at all
        // (decided by `power_loss`); its caller sees EIO.
        let mut before = vec![0u8; length_bytes as usize];
        // Bytes past the end of the file read as zeros, which is what they were.
        let n = transfer(fd, IoOp::Read, before.as_mut_ptr(), length_bytes, offset_bytes)?;
        before[n as usize..].fill(0);
        let result = transfer(fd, IoOp::Write, ptr, length_bytes, offset_bytes);
        if result.is_ok() && !(allowed && durable_on_completion) {
            st.unflushed.push(UnflushedWrite { path: path.to_path_buf(), offset_bytes, before });
        }
        if allowed {
            result
        } else {
            Err(libc::EIO)
        }
    }

    fn flush(&self, path: &std::path::Path) -> Result<(), i32> {
        let mut st = self.lock();
        if !self.io_allowed(&mut st) {
            self.flush_error_count.fetch_add(1, Ordering::Relaxed);
            return Err(libc::EIO);
        }
        st.flush_attempt_count += 1;
        if st.plan.fail_flush_at == Some(st.flush_attempt_count) {
            self.flush_error_count.fetch_add(1, Ordering::Relaxed);
            return Err(libc::EIO);
        }
        st.unflushed.retain(|w| w.path != path);
        self.flush_count.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}

pub struct SimEngine {
    raw_fds: Vec<i32>,
    core: EngineCore,
    plan: FaultPlan,
    io_count: u64,
    read_count: u64,
    flush_count: u64,
    disk: Option<Arc<SimDisk>>,
    /// Per file: opened with O_DSYNC (or O_SYNC), so each write is flushed as it completes.
    flushes_each_write: Vec<bool>,
    /// Flush accounting: writes made durable (completed on an O_DSYNC/O_SYNC file). Shared,
    /// so a test can read it after the engine is gone.
    flushed_writes: Arc<AtomicU64>,
}

impl SimEngine {
    pub fn new(files: Arc<FileSet>, config: EngineConfig, plan: FaultPlan) -> Result<SimEngine, IoError> {
        config.validate()?;
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
            core: EngineCore::new(NAME, files, &config)?,
            plan,
            io_count: 0,
            read_count: 0,
            flush_count: 0,
            disk: None,
        })
    }

    /// Writes and flushes go through `disk`'s power-loss model from now on.
    pub fn with_disk(mut self, disk: Arc<SimDisk>) -> SimEngine {
        self.disk = Some(disk);
        self
    }

    /// Flushes this engine was asked for (successful or not).
    pub fn flush_count(&self) -> u64 {
        self.flush_count
    }

    /// Writes this engine made durable so far (see `flushed_writes`); the counter lives on
    /// after the engine is dropped.
    pub fn flushed_writes_counter(&self) -> Arc<AtomicU64> {
        self.flushed_writes.clone()
    }
}

impl IoEngine for SimEngine {
    fn core(&self) -> &EngineCore {
        &self.core
    }
    fn core_mut(&mut self) -> &mut EngineCore {
        &mut self.core
    }
    fn reap(&mut self, _min_complete: u32, out: &mut Vec<IoCompletion>) -> Result<(), IoError> {
        if !self.plan.latency.is_zero() && !self.core.pending.is_empty() {
            std::thread::sleep(self.plan.latency);
        }
        let mut pending = self.core.take_pending();
        while let Some(r) = pending.pop() {
            self.io_count += 1;
            let fd = self.raw_fds[r.file_index as usize];
            let mut result = if self.plan.fail_every.is_some_and(|n| self.io_count.is_multiple_of(n)) {
                Err(libc::EIO)
            } else {
                match (&self.disk, r.op) {
                    (Some(disk), IoOp::Write) => disk.write(
                        &self.core.files.get(r.file_index).path,
                        fd,
                        self.core.arena.slot_ptr(r.slot),
                        r.length_bytes,
                        r.offset_bytes,
                        self.flushes_each_write[r.file_index as usize],
                    ),
                    (Some(disk), IoOp::Read) if disk.is_power_cut() => Err(libc::EIO),
                    _ => transfer(fd, r.op, self.core.arena.slot_ptr(r.slot), r.length_bytes, r.offset_bytes),
                }
            };
            if r.op == IoOp::Read {
                self.read_count += 1;
                if self.plan.short_read_every.is_some_and(|n| self.read_count.is_multiple_of(n)) {
                    result = result.map(|n| n / 2);
                }
            }
            if r.op == IoOp::Write && result.is_ok() && self.flushes_each_write[r.file_index as usize] {
                self.flushed_writes.fetch_add(1, Ordering::Relaxed);
            }
            out.push(self.core.finish(r.slot, result, Instant::now()));
        }
        self.core.restore_pending(pending);
        Ok(())
    }
    fn flush(&mut self, file_index: u32) -> Result<(), IoError> {
        if file_index as usize >= self.core.files.len() {
            return Err(IoError::InvalidRequest(format!("{NAME}: flush of file index {file_index} of {}", self.core.files.len())));
        }
        self.flush_count += 1;
        let path = &self.core.files.get(file_index).path;
        let failed = |errno: i32| IoError::File {
            path: path.clone(),
            what: format!("fdatasync failed: {}", std::io::Error::from_raw_os_error(errno)),
        };
        if self.plan.flush_fail_every.is_some_and(|n| self.flush_count.is_multiple_of(n)) {
            return Err(failed(libc::EIO));
        }
        match &self.disk {
            Some(disk) => disk.flush(path).map_err(failed),
            None => crate::engine::fdatasync_file(&self.core.files, file_index),
        }
    }
}
