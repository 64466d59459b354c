//! The log: appends under one short lock, several flushes in flight, group commit.
//!
//! Appenders copy their record into the current log block(s) under `state` and get its
//! LSN. A committer then waits until `durable` reaches its commit record's end. When its
//! record is not covered by a flush in flight and fewer than `flushes_in_flight_max`
//! flushes are in flight, the committer flushes itself (the *leader*, as a PostgreSQL
//! backend does in `XLogFlush`): it takes *everything* appended so far (sealing the last,
//! partial block: padding), writes it in one sequential write and makes it durable with
//! one fdatasync (or none: segments opened O_DSYNC, `SyncMethod::OpenDatasync`), then
//! publishes the new durable LSN and wakes the waiters. While it writes, new commits pile
//! up and, while a flush slot is free, one of them starts the next flush at once instead
//! of waiting for this one to end (**flushes in flight**: on the VM's disk two to four
//! fdatasyncs at once take about as long as one, bench/wal_commits/overlap_probe.py);
//! when every slot is busy they pile up for the next free one: group commit, and the
//! batch grows by itself with the load.
//!
//! **Durability is published in LSN order**: flushes may finish in any order, but
//! `durable` only advances over the contiguous prefix of finished flushes, so a commit is
//! acknowledged only once every byte before it is durable. After a power loss a later
//! flush may be on disk while an earlier one is not; each block records the durable LSN
//! when its flush was submitted (block.rs), which is how recovery tells that torn tail
//! from corruption (reader.rs). The leader runs on the
//! committer's own thread because a hand-off to a writer thread and back costs two thread
//! wake-ups per commit — on the 2-core VM these were a third of a single-row INSERT's CPU
//! and most of its latency beside the fdatasync (docs/server.md, "INSERT CPU per commit").
//! The log writer thread remains for what nobody waits for: a full log buffer (appenders
//! blocked on room) and the last flush at close.
//!
//! An error from a write or a durable flush stops the log for good (redo's `PreviousIo`):
//! after a failed fsync the kernel may have dropped the dirty pages, so a later flush that
//! succeeds proves nothing. Every waiting and later commit gets `WalError::Stopped`.

use std::collections::VecDeque;
use std::fs::File;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use flashscan_io::{FileSet, IoCompletion, IoEngine, IoError, IoOp, IoRequest, OpenMode};
use parking_lot::{Condvar, Mutex, MutexGuard};

use crate::block::{init_fresh, note_record_start, seal};
use crate::config::{EngineFactory, SyncMethod, WalConfig};
use crate::durability::{DELAYED_FLUSH_BYTES_MAX, DELAYED_FLUSH_INTERVAL_MS_MAX};
use crate::error::{file_err, WalError};
use crate::files::{
    create_excl, create_segment, inspect_segment_header, list_segments, lock_dir, open_existing, read_control, recycle_segment,
    segment_path, write_control, Control, DatabaseIdentity, SegmentHeaderState, CONTROL_FILE_NAME, LOCK_FILE_NAME,
};
use crate::limits::{BLOCK_HEADER_BYTES, BLOCK_PAYLOAD_BYTES, BLOCK_SIZE_BYTES, FLUSHES_IN_FLIGHT_MAX, RECORD_HEADER_BYTES, WRITE_CHUNK_BYTES};
use crate::lsn::{Lsn, SegmentPosition, TxnId};
use crate::reader::{scan_dir, Scan};
use crate::record::{Record, INSERT_FIXED_BYTES};

const BLOCK: u64 = BLOCK_SIZE_BYTES as u64;

/// Condvars committers wait on, by the number of the flush that covers them. Above the
/// flushes in flight at most, so flushes in flight never share one (a shared one costs
/// only spurious wake-ups).
const DURABLE_CONDVARS: usize = 2 * FLUSHES_IN_FLIGHT_MAX;

/// The first record of a new log: segment 0, after its header block and the block header.
pub const FIRST_RECORD_LSN: Lsn = Lsn(BLOCK + BLOCK_HEADER_BYTES as u64);

/// Where an appended record sits in the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Appended {
    pub lsn: Lsn,
    /// One past its last byte: wait for this to be durable (commit), or let a page it
    /// changed be written only after it is (the WAL rule; the page's LSN).
    pub end: Lsn,
}

/// Counters of the log, read at any time.
#[derive(Debug, Default)]
struct Counters {
    records: AtomicU64,
    commits: AtomicU64,
    flushes: AtomicU64,
    flush_time_ns: AtomicU64,
    flush_time_ns_max: AtomicU64,
    overlapped_flushes: AtomicU64,
    flushes_in_flight_peak: AtomicU64,
    bytes_written: AtomicU64,
    padding_bytes: AtomicU64,
    segments_created: AtomicU64,
    segments_recycled: AtomicU64,
    delayed_commits: AtomicU64,
    delayed_unflushed_ns_max: AtomicU64,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WalStats {
    pub records_count: u64,
    pub commits_count: u64,
    /// Durable flushes (write + fdatasync) of the log writer.
    pub flushes_count: u64,
    /// Time spent in those flushes' writes and fdatasyncs, summed over flushes (two in
    /// flight for 100 µs count 200 µs): the device's side of a commit's wait.
    pub flush_time_us: u64,
    /// The longest single flush (its writes and fdatasync): the part of a delayed commit's
    /// loss window that is the device's, beside `delayed_unflushed_us_max`.
    pub flush_us_max: u64,
    /// Flushes submitted while another was in flight (overlapping flushes).
    pub overlapped_flushes_count: u64,
    /// The most flushes that were in flight at once.
    pub flushes_in_flight_peak: u64,
    pub bytes_written: u64,
    /// Block bytes left unused because a flush ended inside the block.
    pub padding_bytes: u64,
    pub segments_created_count: u64,
    pub segments_recycled_count: u64,
    pub durable_lsn: Lsn,
    /// Commits acknowledged before their flush (delayed durability, `Wal::commit_delayed`).
    pub delayed_commits_count: u64,
    /// The longest an acknowledged delayed commit waited for its flush to be durable, from
    /// its acknowledgement (an upper bound: measured from the first acknowledgement of the
    /// commits one flush took to that flush's end): the loss window a crash would have had.
    pub delayed_unflushed_us_max: u64,
}

impl WalStats {
    pub fn commits_per_flush(&self) -> f64 {
        if self.flushes_count == 0 {
            0.0
        } else {
            self.commits_count as f64 / self.flushes_count as f64
        }
    }
}

struct State {
    /// Whole blocks from `buf_start`, appended and not yet taken by the writer.
    buf: Vec<u8>,
    buf_start: Lsn,
    /// Next byte to append: always inside a block's payload area.
    insert: Lsn,
    /// One past the last byte of the last record appended.
    appended_end: Lsn,
    durable: Lsn,
    /// Highest LSN a waiter asked for: the writer flushes while this is above `durable`.
    wanted: Lsn,
    /// Emptied buffers of finished flushes, reused by the next takes.
    spare: Vec<Vec<u8>>,
    failed: Option<String>,
    shutdown: bool,
    /// Writer threads waiting for work.
    writers_idle: usize,
    /// Tasks awaiting durability ([`Wal::durable`]): the LSN each waits for and its waker,
    /// woken when `durable` reaches it (or the log stops).
    async_waiters: Vec<(Lsn, Waker)>,
    /// Every log block below this was durable when the log was opened (the blocks the
    /// recovery scan read; this epoch writes from here on). Until a flush of this epoch is
    /// durable, `durable` may lie *inside* that first block (a new log's first record LSN,
    /// a scan that read no block), so blocks record this instead (`durable_at_submit`).
    epoch_start: Lsn,
    /// A flush of this epoch was published durable.
    epoch_flushed: bool,
    /// Flushes taken and not yet published durable, in LSN order (= the order taken).
    in_flight: VecDeque<InFlight>,
    /// Segment writers (`Shared::segments`) no flush is using.
    free_writers: Vec<usize>,
    /// Flushes taken so far, and the end of the last one taken (= `durable` when none is in
    /// flight): a committer waits on the condvar of the flush that will cover its LSN, so a
    /// finished flush wakes only the committers it made durable (and one of those that
    /// need the next flush, to lead it).
    flushes_taken: u64,
    taken_end: Lsn,
    /// When the log writer must start a flush for acknowledged delayed commits not yet
    /// taken by one (`None`: there are none).
    delayed_deadline: Option<Instant>,
    /// Acknowledged delayed commits not yet durable, one group per flush that takes them,
    /// oldest first (bounded by the flushes in flight plus one): how long they wait.
    delayed_groups: VecDeque<DelayedGroup>,
}

/// Delayed commits acknowledged between two flushes taken.
#[derive(Debug, Clone, Copy)]
struct DelayedGroup {
    /// `State::flushes_taken` when the group's first commit was acknowledged.
    flushes_taken: u64,
    /// The end of the group's last commit record: durable once the log is up to here.
    end: Lsn,
    first_acked_at: Instant,
}

/// A flush taken and not yet published durable.
#[derive(Debug, Clone, Copy)]
struct InFlight {
    flush_no: u64,
    end: Lsn,
    /// Written and flushed; published once every flush before it is too.
    done: bool,
}

struct Shared {
    state: Mutex<State>,
    /// `State::durable`, published for lock-free reads (the buffer pool asks before every
    /// page write; a committer whose LSN is already durable returns without the lock).
    durable_published: AtomicU64,
    /// `State::failed` is set, published for lock-free reads (every commit asks).
    failed_published: std::sync::atomic::AtomicBool,
    work: Condvar,
    /// Indexed by flush number modulo [`DURABLE_CONDVARS`] (see `State::flushes_taken`).
    durable: [Condvar; DURABLE_CONDVARS],
    space: Condvar,
    /// One segment writer (its own descriptor and engine) per flush in flight: a flush
    /// takes a free one (`State::free_writers`), so flushes write and fdatasync side by
    /// side.
    segments: Vec<Mutex<SegmentWriter>>,
    counters: Counters,
    segment_size_bytes: u64,
    epoch: u32,
    log_buffer_bytes_max: usize,
    flushes_in_flight_max: usize,
    next_txn: AtomicU64,
    /// Segment files below the last checkpoint's redo point, free for reuse.
    recyclable: Mutex<Vec<PathBuf>>,
    notices: Mutex<Vec<String>>,
    /// Held while a segment file is created, by the writer and by the preparer, so the
    /// writer never opens a half-created file.
    segment_creation: Mutex<()>,
    prepare: Mutex<Prepare>,
    prepare_cv: Condvar,
}

/// What the segment preparer is asked to do.
#[derive(Default)]
struct Prepare {
    next_segment_no: Option<u64>,
    shutdown: bool,
}

/// The payload start of the block that begins at `block_start` (skipping a segment header).
fn payload_start(block_start: Lsn, segment_size_bytes: u64) -> Lsn {
    debug_assert_eq!(block_start.0 % BLOCK, 0);
    if block_start.0.is_multiple_of(segment_size_bytes) {
        Lsn(block_start.0 + BLOCK + BLOCK_HEADER_BYTES as u64)
    } else {
        Lsn(block_start.0 + BLOCK_HEADER_BYTES as u64)
    }
}

fn block_start(lsn: Lsn) -> Lsn {
    Lsn(lsn.0 - lsn.0 % BLOCK)
}

impl State {
    /// What a flush starting at `start` submitted now records as durable: every log block
    /// below it is durable. The end of the last published flush rounded up to its block's
    /// end (a flush's blocks are all durable once it is, the padded last one included), so
    /// a flush submitted when all before it was durable records `start` itself (lag 0, as a
    /// v1 block); before this epoch's first flush, the start of its first block. Never past
    /// `start` (a segment's header block, never a log block, counts as durable).
    fn durable_at_submit(&self, start: Lsn, seg: u64) -> Lsn {
        let durable = if self.epoch_flushed {
            let block_end = self.durable.0.div_ceil(BLOCK) * BLOCK;
            Lsn(if block_end.is_multiple_of(seg) { block_end + BLOCK } else { block_end })
        } else {
            self.epoch_start
        };
        durable.min(start)
    }

    fn put(&mut self, mut bytes: &[u8], record_start: bool, seg: u64) {
        let mut first = record_start;
        while !bytes.is_empty() {
            debug_assert!(self.insert.0 % BLOCK >= BLOCK_HEADER_BYTES as u64);
            debug_assert!(self.insert.0 % seg >= BLOCK);
            let bstart = block_start(self.insert);
            let idx = (bstart.0 - self.buf_start.0) as usize;
            while self.buf.len() <= idx {
                // Fresh block (or the placeholder of a segment header block, skipped on write).
                let at = self.buf.len();
                self.buf.resize(at + BLOCK_SIZE_BYTES, 0);
                init_fresh(&mut self.buf[at..at + BLOCK_SIZE_BYTES]);
            }
            let in_block = (self.insert.0 - bstart.0) as usize;
            if first {
                note_record_start(&mut self.buf[idx..idx + BLOCK_SIZE_BYTES], in_block - BLOCK_HEADER_BYTES);
                first = false;
            }
            let n = bytes.len().min(BLOCK_SIZE_BYTES - in_block);
            self.buf[idx + in_block..idx + in_block + n].copy_from_slice(&bytes[..n]);
            bytes = &bytes[n..];
            let pos = self.insert.advance(n as u64);
            self.appended_end = pos;
            self.insert = if pos.0.is_multiple_of(BLOCK) { payload_start(pos, seg) } else { pos };
        }
    }

    /// Takes everything appended, sealing a partial last block (the next append starts a
    /// new block). Returns (first block LSN, blocks, used bytes of the last block, end).
    fn take(&mut self, seg: u64) -> Option<(Lsn, Vec<u8>, usize, Lsn)> {
        if self.buf.is_empty() {
            return None;
        }
        let start = self.buf_start;
        let end = self.appended_end;
        let ibstart = block_start(self.insert);
        let covered = self.buf_start.0 + self.buf.len() as u64;
        let last_used = if ibstart.0 < covered {
            // The insert block is allocated, so it holds at least one byte: seal it.
            let used = (self.insert.0 % BLOCK) as usize - BLOCK_HEADER_BYTES;
            debug_assert!(used >= 1);
            debug_assert_eq!(ibstart.0 + BLOCK, covered);
            self.insert = payload_start(Lsn(covered), seg);
            used
        } else {
            BLOCK_PAYLOAD_BYTES
        };
        let mut spare = self.spare.pop().unwrap_or_default();
        spare.clear();
        let bytes = std::mem::replace(&mut self.buf, spare);
        self.buf_start = block_start(self.insert);
        Some((start, bytes, last_used, end))
    }
}

/// The segment file the writer has open, with its engine.
struct OpenSegment {
    segment_no: u64,
    engine: Box<dyn IoEngine>,
}

struct SegmentWriter {
    dir: PathBuf,
    segment_size_bytes: u64,
    database_id: u128,
    direct_io: bool,
    sync_method: SyncMethod,
    factory: EngineFactory,
    current: Option<OpenSegment>,
    completions: Vec<IoCompletion>,
}

impl SegmentWriter {
    fn open(&mut self, shared: &Shared, segment_no: u64) -> Result<(), WalError> {
        if self.current.as_ref().is_some_and(|c| c.segment_no == segment_no) {
            return Ok(());
        }
        self.current = None;
        let path = segment_path(&self.dir, segment_no);
        let seg = self.segment_size_bytes;
        let creation = shared.segment_creation.lock();
        if std::fs::symlink_metadata(&path).is_ok() {
            // Ours (named by us, in our directory): continue in it, fixing a header left
            // unwritten by a crash during creation or recycling.
            let f = open_existing(&path, true)?;
            let mut head = vec![0u8; BLOCK_SIZE_BYTES];
            let n = std::os::unix::fs::FileExt::read_at(&f, &mut head, 0).map_err(file_err(&path))?;
            let valid = n == BLOCK_SIZE_BYTES
                && matches!(inspect_segment_header(&head), SegmentHeaderState::Valid { segment_no: s, database_id, segment_size_bytes }
                    if s == segment_no && database_id == self.database_id && segment_size_bytes == seg);
            if !valid {
                let header = crate::files::encode_segment_header(segment_no, seg, self.database_id);
                std::os::unix::fs::FileExt::write_all_at(&f, &header, 0).map_err(file_err(&path))?;
                if f.metadata().map_err(file_err(&path))?.len() < seg {
                    f.set_len(seg).map_err(file_err(&path))?;
                }
                f.sync_all().map_err(file_err(&path))?;
            }
        } else {
            let old = shared.recyclable.lock().pop();
            match old {
                Some(old) => {
                    recycle_segment(&self.dir, &old, segment_no, seg, self.database_id)?;
                    shared.counters.segments_recycled.fetch_add(1, Ordering::Relaxed);
                }
                None => {
                    create_segment(&self.dir, segment_no, seg, self.database_id)?;
                    shared.counters.segments_created.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        drop(creation);
        let files = self.open_files(shared, &path)?;
        let engine = (self.factory)(Arc::new(files))?;
        self.current = Some(OpenSegment { segment_no, engine });
        // Have the next segment ready before it is needed: creating one (zero-filling 16 MiB)
        // on the commit path would stall every committer waiting for this flush.
        let mut p = shared.prepare.lock();
        p.next_segment_no = Some(segment_no + 1);
        shared.prepare_cv.notify_one();
        Ok(())
    }

    fn open_files(&mut self, shared: &Shared, path: &Path) -> Result<FileSet, WalError> {
        let stats = Arc::new(flashscan_io::FileStats::default());
        // O_DSYNC keeps its meaning with or without O_DIRECT: each write durable on return.
        let sync_flags = match self.sync_method {
            SyncMethod::Fdatasync => 0,
            SyncMethod::OpenDatasync => libc::O_DSYNC,
        };
        if self.direct_io {
            let mut set = FileSet::new();
            match set.add_with_flags(path, OpenMode { direct: true, write: true }, sync_flags, stats.clone()) {
                Ok(_) if set.get(0).offset_align_bytes as usize <= BLOCK_SIZE_BYTES => return Ok(set),
                Ok(_) | Err(IoError::DirectUnsupported { .. }) => {
                    shared.notices.lock().push(format!(
                        "{}: O_DIRECT refused or needs alignment above {BLOCK_SIZE_BYTES} bytes; the log uses buffered writes + fdatasync",
                        self.dir.display()
                    ));
                    self.direct_io = false;
                }
                Err(e) => return Err(e.into()),
            }
        }
        let mut set = FileSet::new();
        set.add_with_flags(path, OpenMode { direct: false, write: true }, sync_flags, stats)?;
        Ok(set)
    }

    /// Writes `bytes` (whole blocks) at `lsn`, all inside one segment, in chunks.
    fn write(&mut self, shared: &Shared, lsn: Lsn, bytes: &[u8]) -> Result<(), WalError> {
        let seg = self.segment_size_bytes;
        let no = lsn.segment_no(seg);
        debug_assert!(lsn.segment_offset_bytes(seg) + bytes.len() as u64 <= seg);
        self.open(shared, no)?;
        let Some(current) = self.current.as_mut() else { unreachable!("opened above") };
        let engine = &mut current.engine;
        let mut offset = lsn.segment_offset_bytes(seg);
        for chunk in bytes.chunks(WRITE_CHUNK_BYTES) {
            engine.slot_mut(0)[..chunk.len()].copy_from_slice(chunk);
            engine.queue(IoRequest {
                op: IoOp::Write,
                file_index: 0,
                offset_bytes: offset,
                length_bytes: chunk.len() as u32,
                slot: 0,
                user_data: 0,
            })?;
            engine.submit()?;
            self.completions.clear();
            while self.completions.is_empty() {
                engine.reap(1, &mut self.completions)?;
            }
            self.completions[0].expect_full(engine.files())?;
            offset += chunk.len() as u64;
        }
        Ok(())
    }

    /// Makes the writes so far durable: an fdatasync, or nothing where the segment is
    /// open O_DSYNC (each write was durable when it returned).
    fn flush(&mut self) -> Result<(), WalError> {
        if self.sync_method == SyncMethod::OpenDatasync {
            return Ok(());
        }
        if let Some(c) = self.current.as_mut() {
            c.engine.flush(0)?;
        }
        Ok(())
    }
}

/// The future of [`Wal::durable`].
pub struct Durable<'a> {
    wal: &'a Wal,
    lsn: Lsn,
}

impl Future for Durable<'_> {
    type Output = Result<(), WalError>;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.wal.poll_durable(self.lsn, cx)
    }
}

/// The write-ahead log of one database.
pub struct Wal {
    shared: Arc<Shared>,
    /// One writer thread per flush in flight: they flush for tasks awaiting durability
    /// ([`Wal::durable`]), a full log buffer, and the close.
    writers: Vec<JoinHandle<()>>,
    preparer: Option<JoinHandle<()>>,
    dir: PathBuf,
    control: Mutex<Control>,
    _lock: File,
}

impl Wal {
    /// Creates a new, empty log in `config.dir` (created if missing, refused if it holds a
    /// log already) and opens it.
    pub fn create(config: WalConfig, identity: DatabaseIdentity) -> Result<Wal, WalError> {
        config.validate()?;
        let dir = &config.dir;
        match std::fs::create_dir(dir) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(source) => return Err(WalError::File { path: dir.clone(), source }),
        }
        if let Ok(c) = read_control(dir) {
            return Err(WalError::AlreadyExists { dir: dir.clone(), label: c.identity.label });
        }
        if std::fs::symlink_metadata(dir.join(CONTROL_FILE_NAME)).is_ok() {
            return Err(WalError::AlreadyExists { dir: dir.clone(), label: "(unreadable wal.control)".into() });
        }
        let lock = create_excl(&dir.join(LOCK_FILE_NAME))?;
        lock.sync_all().map_err(file_err(dir.join(LOCK_FILE_NAME)))?;
        drop(lock);
        let control = Control {
            identity: identity.clone(),
            segment_size_bytes: config.segment_size_bytes,
            epoch: 0,
            checkpoint_redo_lsn: FIRST_RECORD_LSN,
            checkpoint_lsn: Lsn::ZERO,
        };
        write_control(dir, &control)?;
        let (wal, _) = Wal::open(config, &identity)?;
        Ok(wal)
    }

    /// Opens the log in `config.dir` for `identity`'s database: refuses a log of another
    /// database, takes the lock, scans from the last checkpoint's redo point (refusing
    /// corruption), and starts the writer after the last valid block. Returns the scan for
    /// redo.
    pub fn open(config: WalConfig, identity: &DatabaseIdentity) -> Result<(Wal, Scan), WalError> {
        config.validate()?;
        let dir = config.dir.clone();
        let mut control = read_control(&dir)?;
        if control.identity.id != identity.id {
            return Err(WalError::Foreign {
                dir,
                found_label: control.identity.label,
                found_id: control.identity.id,
                expected_label: identity.label.clone(),
                expected_id: identity.id,
            });
        }
        let lock = lock_dir(&dir)?;
        let seg = control.segment_size_bytes;
        let scan = scan_dir(&dir, seg, identity.id, control.checkpoint_redo_lsn)?;
        // A new epoch, durable before any block of it is written: blocks of older epochs
        // past the end of the log can then never be read as a continuation of it.
        control.epoch = control.epoch.max(scan.last_epoch).checked_add(1).ok_or_else(|| WalError::Config("log epoch exhausted".into()))?;
        write_control(&dir, &control)?;
        let redo_segment = control.checkpoint_redo_lsn.segment_no(seg);
        let recyclable: Vec<PathBuf> = list_segments(&dir)?.into_iter().filter(|(no, _)| *no < redo_segment).map(|(_, p)| p).collect();
        let insert = payload_start(scan.next_block_lsn, seg);
        let sync_method = config.sync_method.clone().map_err(WalError::Config)?;
        let flushes_in_flight_max = config.flushes_in_flight_max.clone().map_err(WalError::Config)?;
        let segments = (0..flushes_in_flight_max)
            .map(|_| {
                Mutex::new(SegmentWriter {
                    dir: dir.clone(),
                    segment_size_bytes: seg,
                    database_id: identity.id,
                    direct_io: config.direct_io,
                    sync_method,
                    factory: config.engine_factory.clone(),
                    current: None,
                    completions: Vec::with_capacity(1),
                })
            })
            .collect();
        let shared = Arc::new(Shared {
            durable_published: AtomicU64::new(scan.end_lsn.0),
            failed_published: std::sync::atomic::AtomicBool::new(false),
            state: Mutex::new(State {
                buf: Vec::new(),
                buf_start: block_start(insert),
                insert,
                appended_end: scan.end_lsn,
                durable: scan.end_lsn,
                wanted: scan.end_lsn,
                spare: Vec::new(),
                failed: None,
                shutdown: false,
                writers_idle: 0,
                async_waiters: Vec::new(),
                epoch_start: block_start(insert),
                epoch_flushed: false,
                in_flight: VecDeque::with_capacity(flushes_in_flight_max),
                free_writers: (0..flushes_in_flight_max).rev().collect(),
                flushes_taken: 0,
                taken_end: scan.end_lsn,
                delayed_deadline: None,
                delayed_groups: VecDeque::with_capacity(flushes_in_flight_max + 1),
            }),
            work: Condvar::new(),
            durable: std::array::from_fn(|_| Condvar::new()),
            space: Condvar::new(),
            segments,
            counters: Counters::default(),
            segment_size_bytes: seg,
            epoch: control.epoch,
            log_buffer_bytes_max: config.log_buffer_bytes_max,
            flushes_in_flight_max,
            next_txn: AtomicU64::new(((control.epoch as u64) & 0xFF_FFFF) << 40 | 1),
            recyclable: Mutex::new(recyclable),
            notices: Mutex::new(Vec::new()),
            segment_creation: Mutex::new(()),
            prepare: Mutex::new(Prepare::default()),
            prepare_cv: Condvar::new(),
        });
        let mut writers = Vec::with_capacity(flushes_in_flight_max);
        for i in 0..flushes_in_flight_max {
            let writer_shared = shared.clone();
            match std::thread::Builder::new().name(format!("wal-writer-{i}")).spawn(move || log_writer(writer_shared)) {
                Ok(w) => writers.push(w),
                Err(e) => {
                    // Those started end with the shutdown; the log does not open.
                    shared.state.lock().shutdown = true;
                    shared.work.notify_all();
                    for w in writers {
                        let _ = w.join();
                    }
                    return Err(file_err(&dir)(e));
                }
            }
        }
        let preparer_shared = shared.clone();
        let preparer_dir = dir.clone();
        let id = identity.id;
        let preparer = std::thread::Builder::new()
            .name("wal-segments".into())
            .spawn(move || segment_preparer(preparer_shared, preparer_dir, id))
            .map_err(file_err(&dir))?;
        Ok((Wal { shared, writers, preparer: Some(preparer), dir, control: Mutex::new(control), _lock: lock }, scan))
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// A new transaction id (unique across restarts: see `TxnId`).
    pub fn begin(&self) -> TxnId {
        TxnId(self.shared.next_txn.fetch_add(1, Ordering::Relaxed))
    }

    /// Appends a record; it is durable once `wait_durable(end)` returns.
    pub fn append(&self, record: &Record) -> Result<Appended, WalError> {
        record.validate_for_append()?;
        let mut head = [0u8; RECORD_HEADER_BYTES + INSERT_FIXED_BYTES];
        let (h, t) = record.encode_parts(&mut head);
        let seg = self.shared.segment_size_bytes;
        let needed = h.len() + t.len();
        let mut st = self.shared.state.lock();
        loop {
            if let Some(cause) = &st.failed {
                return Err(WalError::Stopped { cause: cause.clone() });
            }
            if st.buf.is_empty() || st.buf.len() + needed <= self.shared.log_buffer_bytes_max {
                break;
            }
            // The writer is behind: ask it to take what is there, wait for room.
            st.wanted = st.wanted.max(st.appended_end);
            self.shared.work.notify_one();
            self.shared.space.wait(&mut st);
        }
        let lsn = st.insert;
        st.put(h, true, seg);
        st.put(t, false, seg);
        let end = st.appended_end;
        drop(st);
        self.shared.counters.records.fetch_add(1, Ordering::Relaxed);
        if matches!(record, Record::Commit { .. }) {
            self.shared.counters.commits.fetch_add(1, Ordering::Relaxed);
        }

        debug_assert!(end.0 >= lsn.0 + needed as u64);
        Ok(Appended { lsn, end })
    }

    /// Returns once the log is durable up to `lsn`, or the error that stopped it. Nothing is
    /// acknowledged before it is durable, nor before every byte before it is.
    pub fn wait_durable(&self, lsn: Lsn) -> Result<(), WalError> {
        if self.shared.durable_published.load(Ordering::Acquire) >= lsn.0 {
            return Ok(());
        }
        let mut st = self.shared.state.lock();
        if lsn > st.appended_end {
            return Err(WalError::Config(format!("wait for LSN {lsn}, past the end of the log ({})", st.appended_end)));
        }
        loop {
            if st.durable >= lsn {
                return Ok(());
            }
            if let Some(cause) = &st.failed {
                return Err(WalError::Stopped { cause: cause.clone() });
            }
            let covered_by = st.in_flight.iter().find(|f| f.end >= lsn).map(|f| f.flush_no);
            if covered_by.is_none() && st.in_flight.len() < self.shared.flushes_in_flight_max {
                // No flush in flight covers `lsn` and a slot is free: lead a flush of
                // everything appended, `lsn` included, now.
                if !flush_as_leader(&self.shared, &mut st) && st.durable < lsn && st.failed.is_none() {
                    // Unreachable: everything appended is either taken by a flush (none
                    // covers `lsn`) or in the buffer. An error rather than a wait forever.
                    return Err(WalError::Config(format!("wait for LSN {lsn}: nothing left to flush, yet durable only to {}", st.durable)));
                }
                continue;
            }
            // The flush in flight that covers `lsn`, or else the next one taken will (it
            // takes everything appended before it starts; a finished flush wakes one of
            // its waiters to lead it).
            let flush_no = covered_by.unwrap_or(st.flushes_taken + 1);
            self.shared.durable[(flush_no % DURABLE_CONDVARS as u64) as usize].wait(&mut st);
        }
    }

    /// Resolves once the log is durable up to `lsn` (or with the error that stopped it),
    /// without blocking a thread: for async callers (the server's connection tasks). The
    /// task registers its waker; when no flush in flight covers `lsn` it asks a writer
    /// thread for one (the writer threads keep up to `flushes_in_flight_max` in flight, as
    /// leading committers do), and the flush that makes `lsn` durable — in LSN order, as
    /// for [`Wal::wait_durable`] — wakes it. Dropping the future abandons only the wait.
    pub fn durable(&self, lsn: Lsn) -> Durable<'_> {
        Durable { wal: self, lsn }
    }

    fn poll_durable(&self, lsn: Lsn, cx: &mut Context<'_>) -> Poll<Result<(), WalError>> {
        if self.shared.durable_published.load(Ordering::Acquire) >= lsn.0 {
            return Poll::Ready(Ok(()));
        }
        let mut st = self.shared.state.lock();
        if st.durable >= lsn {
            return Poll::Ready(Ok(()));
        }
        if let Some(cause) = &st.failed {
            return Poll::Ready(Err(WalError::Stopped { cause: cause.clone() }));
        }
        if lsn > st.appended_end {
            return Poll::Ready(Err(WalError::Config(format!("wait for LSN {lsn}, past the end of the log ({})", st.appended_end))));
        }
        if !st.async_waiters.iter().any(|(l, w)| *l == lsn && w.will_wake(cx.waker())) {
            st.async_waiters.push((lsn, cx.waker().clone()));
        }
        if lsn > st.taken_end {
            // No flush in flight covers it: a writer thread takes one (now if one is idle
            // and a slot is free; else when a flush ends, `flush_as_leader`).
            st.wanted = st.wanted.max(lsn);
            if st.writers_idle > 0 && st.in_flight.len() < self.shared.flushes_in_flight_max {
                self.shared.work.notify_one();
            }
        }
        Poll::Pending
    }

    /// Whether a committer calling [`Wal::wait_durable`] for `lsn` now would lead a flush
    /// itself — `lsn` not durable, no flush in flight covering it, a flush slot free —
    /// rather than wait for a flush already running. A server uses it to choose between
    /// blocking a thread for the flush it would lead and awaiting ([`Wal::durable`]) the one
    /// in flight. A hint only: the answer may be stale when it is acted on, and either
    /// choice is durable all the same.
    pub fn would_lead_flush(&self, lsn: Lsn) -> bool {
        if self.shared.durable_published.load(Ordering::Acquire) >= lsn.0 {
            return false;
        }
        let st = self.shared.state.lock();
        st.durable < lsn && st.failed.is_none() && !st.in_flight.iter().any(|f| f.end >= lsn) && st.in_flight.len() < self.shared.flushes_in_flight_max
    }

    /// Acknowledges a delayed-durability commit whose commit record ends at `end` without
    /// waiting for its flush: the log writer starts one within
    /// [`DELAYED_FLUSH_INTERVAL_MS_MAX`] or once [`DELAYED_FLUSH_BYTES_MAX`] are waiting
    /// (crate::durability has the contract); a delayed commit that finds that deadline
    /// passed or those bytes waiting, and a flush slot free, leads the flush itself and
    /// returns after it. Refused once the log has stopped.
    pub fn commit_delayed(&self, end: Lsn) -> Result<(), WalError> {
        self.acknowledge_delayed(end, true)
    }

    /// [`Wal::commit_delayed`] for an async caller, which must not block its thread for a
    /// flush: it never leads one (the log writer thread's timer and 60 KB trigger do; an
    /// async runtime's few threads leave that thread the CPU, unlike 64 committer threads).
    pub fn commit_delayed_without_leading(&self, end: Lsn) -> Result<(), WalError> {
        self.acknowledge_delayed(end, false)
    }

    fn acknowledge_delayed(&self, end: Lsn, may_lead: bool) -> Result<(), WalError> {
        self.shared.counters.delayed_commits.fetch_add(1, Ordering::Relaxed);
        if self.shared.durable_published.load(Ordering::Acquire) >= end.0 {
            return Ok(());
        }
        let now = Instant::now();
        let mut st = self.shared.state.lock();
        if let Some(cause) = &st.failed {
            return Err(WalError::Stopped { cause: cause.clone() });
        }
        if end > st.appended_end {
            return Err(WalError::Config(format!("delayed commit at LSN {end}, past the end of the log ({})", st.appended_end)));
        }
        if st.durable >= end {
            return Ok(());
        }
        let taken = st.flushes_taken;
        if st.delayed_groups.back().is_some_and(|g| g.flushes_taken == taken) {
            if let Some(g) = st.delayed_groups.back_mut() {
                g.end = g.end.max(end);
            }
        } else {
            st.delayed_groups.push_back(DelayedGroup { flushes_taken: taken, end, first_acked_at: now });
        }
        debug_assert!(st.delayed_groups.len() <= self.shared.flushes_in_flight_max + 1);
        if end <= st.taken_end {
            // A flush in flight covers it already.
            return Ok(());
        }
        let full = st.appended_end.0.saturating_sub(st.taken_end.0) >= DELAYED_FLUSH_BYTES_MAX;
        let overdue = st.delayed_deadline.is_some_and(|d| now >= d);
        if may_lead && (full || overdue) && st.in_flight.len() < self.shared.flushes_in_flight_max {
            // The flush is started by whoever sees it due first: with many committers busy
            // on few cores the log writer thread may wait for a core, so this committer
            // flushes now, as a strict one would, before it returns. (The measured window
            // also holds the flush's own fdatasync and more: docs/benchmarks.md, issue 31.)
            flush_as_leader(&self.shared, &mut st);
            return Ok(());
        }
        let mut wake = false;
        if st.delayed_deadline.is_none() {
            st.delayed_deadline = Some(now + Duration::from_millis(DELAYED_FLUSH_INTERVAL_MS_MAX));
            wake = true;
        }
        if full && st.wanted <= st.taken_end {
            st.wanted = st.appended_end;
            wake = true;
        }
        if wake && st.writers_idle > 0 {
            // Once per flush interval (a new deadline) or per full block, not per commit.
            self.shared.work.notify_one();
        }
        Ok(())
    }

    /// Appends `txn`'s commit record and waits until it is durable.
    pub fn commit(&self, txn: TxnId) -> Result<Appended, WalError> {
        self.append(&Record::Commit { txn }).and_then(|a| self.wait_durable(a.end).map(|()| a))
    }

    /// Appends `txn`'s abort record (not waited for: an abort needs no durability).
    pub fn abort(&self, txn: TxnId) -> Result<Appended, WalError> {
        self.append(&Record::Abort { txn })
    }

    /// One past the last record appended (durable or not).
    pub fn end_lsn(&self) -> Lsn {
        self.shared.state.lock().appended_end
    }

    /// Everything below this LSN is durable.
    pub fn durable_lsn(&self) -> Lsn {
        Lsn(self.shared.durable_published.load(Ordering::Acquire))
    }

    /// Starts a checkpoint: its LSN is the redo point. The caller then writes every page
    /// dirtied before it and calls `checkpoint_end`. Returns once the log is durable up to
    /// the redo point: delayed commits may be acknowledged and not yet durable, and a page
    /// holding their rows must never reach the disk before their log records do (nor may a
    /// catalog name a redo point past the durable end of the log).
    pub fn checkpoint_begin(&self) -> Result<Lsn, WalError> {
        let a = self.append(&Record::CheckpointBegin)?;
        self.wait_durable(a.end)?;
        Ok(a.lsn)
    }

    /// Ends the checkpoint that began at `redo`: logs it durably, records the redo point in
    /// the control file (where recovery starts), and hands segments wholly before it to
    /// the writer for reuse.
    pub fn checkpoint_end(&self, redo: Lsn) -> Result<Lsn, WalError> {
        let a = self.append(&Record::CheckpointEnd { redo })?;
        self.wait_durable(a.end)?;
        let seg = self.shared.segment_size_bytes;
        let mut control = self.control.lock();
        if redo < control.checkpoint_redo_lsn || redo > a.lsn {
            return Err(WalError::Config(format!("checkpoint redo point {redo} outside {}..{}", control.checkpoint_redo_lsn, a.lsn)));
        }
        control.checkpoint_redo_lsn = redo;
        control.checkpoint_lsn = a.lsn;
        write_control(&self.dir, &control)?;
        let redo_segment = redo.segment_no(seg);
        let writing_segment = self.shared.state.lock().insert.segment_no(seg);
        let mut free = self.shared.recyclable.lock();
        for (no, path) in list_segments(&self.dir)? {
            if no < redo_segment && no < writing_segment && !free.contains(&path) {
                free.push(path);
            }
        }
        Ok(a.lsn)
    }

    /// Where recovery would start now: the redo point of the last completed checkpoint.
    pub fn redo_lsn(&self) -> Lsn {
        self.control.lock().checkpoint_redo_lsn
    }

    pub fn stats(&self) -> WalStats {
        let c = &self.shared.counters;
        WalStats {
            records_count: c.records.load(Ordering::Relaxed),
            commits_count: c.commits.load(Ordering::Relaxed),
            flushes_count: c.flushes.load(Ordering::Relaxed),
            flush_time_us: c.flush_time_ns.load(Ordering::Relaxed) / 1000,
            flush_us_max: c.flush_time_ns_max.load(Ordering::Relaxed) / 1000,
            overlapped_flushes_count: c.overlapped_flushes.load(Ordering::Relaxed),
            flushes_in_flight_peak: c.flushes_in_flight_peak.load(Ordering::Relaxed),
            bytes_written: c.bytes_written.load(Ordering::Relaxed),
            padding_bytes: c.padding_bytes.load(Ordering::Relaxed),
            segments_created_count: c.segments_created.load(Ordering::Relaxed),
            segments_recycled_count: c.segments_recycled.load(Ordering::Relaxed),
            durable_lsn: self.durable_lsn(),
            delayed_commits_count: c.delayed_commits.load(Ordering::Relaxed),
            delayed_unflushed_us_max: c.delayed_unflushed_ns_max.load(Ordering::Relaxed) / 1000,
        }
    }

    /// One-line notices (O_DIRECT refused, …) for the caller to print.
    pub fn notices(&self) -> Vec<String> {
        self.shared.notices.lock().clone()
    }

    /// Whether an error stopped the log (without its lock: asked before every commit).
    pub fn has_failed(&self) -> bool {
        self.shared.failed_published.load(Ordering::Acquire)
    }

    /// The error that stopped the log, if one did.
    pub fn failure(&self) -> Option<String> {
        self.shared.state.lock().failed.clone()
    }

    /// Flushes what was appended and stops the writer.
    pub fn close(mut self) -> Result<(), WalError> {
        self.stop_writer();
        match self.failure() {
            Some(cause) => Err(WalError::Stopped { cause }),
            None => Ok(()),
        }
    }

    fn stop_writer(&mut self) {
        {
            let mut st = self.shared.state.lock();
            st.shutdown = true;
            self.shared.work.notify_all();
        }
        for w in self.writers.drain(..) {
            // A panic in a flush already failed the log (see flush_as_leader); nothing to add.
            let _ = w.join();
        }
        {
            let mut p = self.shared.prepare.lock();
            p.shutdown = true;
            self.shared.prepare_cv.notify_one();
        }
        if let Some(p) = self.preparer.take() {
            // The preparer only ever creates spare files; its failure loses nothing.
            let _ = p.join();
        }
    }
}

impl Drop for Wal {
    fn drop(&mut self) {
        self.stop_writer();
    }
}

/// Creates the segment the writer will need next, unless a recycled file will serve.
/// Errors are only noticed: the writer creates the file itself if it is still missing and
/// reports the error then (stopping the log).
fn segment_preparer(shared: Arc<Shared>, dir: PathBuf, database_id: u128) {
    loop {
        let no = {
            let mut p = shared.prepare.lock();
            loop {
                if p.shutdown {
                    return;
                }
                if let Some(no) = p.next_segment_no.take() {
                    break no;
                }
                shared.prepare_cv.wait(&mut p);
            }
        };
        if !shared.recyclable.lock().is_empty() {
            continue;
        }
        let _creation = shared.segment_creation.lock();
        if std::fs::symlink_metadata(segment_path(&dir, no)).is_ok() {
            continue;
        }
        match create_segment(&dir, no, shared.segment_size_bytes, database_id) {
            Ok(_) => {
                shared.counters.segments_created.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) => {
                let notice = format!("preparing the next log segment: {e}");
                let mut notices = shared.notices.lock();
                if notices.last() != Some(&notice) {
                    notices.push(notice);
                }
            }
        }
    }
}

/// The writer thread flushes what nobody waits for: a log buffer half full (appenders
/// may be blocked on room, `wanted`), delayed commits whose deadline passed, and what is
/// left at close. Committers flush for themselves (`flush_as_leader`).
fn writer_asked(shared: &Shared, st: &State) -> bool {
    !st.buf.is_empty()
        && (st.shutdown
            || st.wanted > st.taken_end
            || st.buf.len() >= shared.log_buffer_bytes_max / 2
            || st.delayed_deadline.is_some_and(|d| Instant::now() >= d))
}

fn log_writer(shared: Arc<Shared>) {
    let mut st = shared.state.lock();
    loop {
        if st.failed.is_some() || (st.shutdown && st.in_flight.is_empty() && st.buf.is_empty()) {
            // The other writer threads end too (a flush's end wakes only one of them).
            shared.work.notify_all();
            return;
        }
        if st.in_flight.len() < shared.flushes_in_flight_max && writer_asked(&shared, &st) {
            flush_as_leader(&shared, &mut st);
            continue;
        }
        st.writers_idle += 1;
        // Delayed commits wait: flush when their deadline comes (or sooner if woken). With
        // every slot busy, the flush that ends wakes this thread (flush_as_leader).
        let deadline = if st.in_flight.len() < shared.flushes_in_flight_max { st.delayed_deadline } else { None };
        match deadline {
            Some(deadline) => {
                let _ = shared.work.wait_until(&mut st, deadline);
            }
            None => shared.work.wait(&mut st),
        }
        st.writers_idle -= 1;
    }
}

/// One flush, by the caller (a committer waiting for its commit, or the writer thread),
/// which saw a free flush slot: takes everything appended under `st`, writes and
/// fdatasyncs it without the lock (other flushes may run meanwhile), then marks it done,
/// publishes the durable LSN over every finished flush in LSN order and wakes the
/// committers that made durable, plus one of those waiting for the next flush to lead it.
/// Returns false when there was nothing to take. A failed write or flush (or a panic in
/// one) stops the log for good.
fn flush_as_leader(shared: &Shared, st: &mut MutexGuard<'_, State>) -> bool {
    debug_assert!(st.in_flight.len() < shared.flushes_in_flight_max);
    let seg = shared.segment_size_bytes;
    // A slot is free (the callers check), so is a segment writer: one per slot.
    let Some(writer) = st.free_writers.pop() else { return false };
    let Some((start, mut bytes, last_used, end)) = st.take(seg) else {
        st.free_writers.push(writer);
        return false;
    };
    // What recovery needs to tell a flush that overtook a lost one from corruption: every
    // byte below this was durable when this flush was submitted (block.rs).
    let durable_at_submit = st.durable_at_submit(start, seg);
    st.flushes_taken += 1;
    let flush_no = st.flushes_taken;
    st.taken_end = end;
    // It takes every delayed commit acknowledged so far: none is left waiting for a timer.
    st.delayed_deadline = None;
    if !st.in_flight.is_empty() {
        shared.counters.overlapped_flushes.fetch_add(1, Ordering::Relaxed);
    }
    st.in_flight.push_back(InFlight { flush_no, end, done: false });
    shared.counters.flushes_in_flight_peak.fetch_max(st.in_flight.len() as u64, Ordering::Relaxed);
    let result = MutexGuard::unlocked(st, || {
        // The buffer was emptied: appenders waiting for room go on meanwhile.
        shared.space.notify_all();
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let mut segments = shared.segments[writer].lock();
            write_and_flush(shared, &mut segments, start, durable_at_submit, &mut bytes, last_used)
        }))
    });
    st.free_writers.push(writer);
    match result {
        Ok(Ok(())) => {
            if let Some(f) = st.in_flight.iter_mut().find(|f| f.flush_no == flush_no) {
                f.done = true;
            }
            if st.spare.len() < shared.flushes_in_flight_max {
                st.spare.push(bytes);
            }
        }
        Ok(Err(e)) => st.failed = Some(e.to_string()),
        Err(_) => st.failed = Some("a log flush panicked".into()),
    }
    if st.failed.is_some() {
        shared.failed_published.store(true, Ordering::Release);
    }
    // Durable in LSN order: only the finished flushes at the front of the queue are; a
    // finished flush behind an unfinished one waits for it (and forever after a failure:
    // its bytes follow bytes that never became durable).
    while st.failed.is_none() && st.in_flight.front().is_some_and(|f| f.done) {
        let Some(f) = st.in_flight.pop_front() else { break };
        debug_assert!(f.end >= st.durable);
        st.durable = f.end;
        st.epoch_flushed = true;
        shared.durable[(f.flush_no % DURABLE_CONDVARS as u64) as usize].notify_all();
    }
    shared.durable_published.store(st.durable.0, Ordering::Release);
    if !st.delayed_groups.is_empty() {
        let (now, durable) = (Instant::now(), st.durable);
        while let Some(g) = st.delayed_groups.front().copied().filter(|g| g.end <= durable) {
            st.delayed_groups.pop_front();
            let waited_ns = now.saturating_duration_since(g.first_acked_at).as_nanos() as u64;
            shared.counters.delayed_unflushed_ns_max.fetch_max(waited_ns, Ordering::Relaxed);
        }
    }
    // The tasks this flush made durable are woken after the lock is released (below): a
    // wake from this thread may unpark an async worker (a futex call), and tasks appending
    // their next records need this lock meanwhile.
    let mut ready: Vec<Waker> = Vec::new();
    if !st.async_waiters.is_empty() {
        let (durable, failed) = (st.durable, st.failed.is_some());
        let mut i = 0;
        while i < st.async_waiters.len() {
            if failed || st.async_waiters[i].0 <= durable {
                ready.push(st.async_waiters.swap_remove(i).1);
            } else {
                i += 1;
            }
        }
    }
    if st.failed.is_some() {
        for cv in &shared.durable {
            cv.notify_all();
        }
    } else {
        // A slot is free: one of those waiting for the next flush (appended after the
        // last one was taken) leads it; the rest are covered by it and wait on its condvar.
        shared.durable[((st.flushes_taken + 1) % DURABLE_CONDVARS as u64) as usize].notify_one();
    }
    shared.space.notify_all();
    // A writer idle without a timer while every slot was busy must now wait for the
    // delayed commits' deadline (log_writer).
    if st.writers_idle > 0 && (st.failed.is_some() || st.shutdown || st.delayed_deadline.is_some() || writer_asked(shared, st)) {
        shared.work.notify_one();
    }
    if !ready.is_empty() {
        MutexGuard::unlocked(st, || ready.into_iter().for_each(Waker::wake));
    }
    true
}

/// Seals the taken blocks and writes them, one write per segment touched, each followed by
/// a durable flush.
fn write_and_flush(shared: &Shared, segments: &mut SegmentWriter, start: Lsn, durable_at_submit: Lsn, bytes: &mut [u8], last_used: usize) -> Result<(), WalError> {
    let seg = shared.segment_size_bytes;
    let started = std::time::Instant::now();
    let block_count = bytes.len() / BLOCK_SIZE_BYTES;
    seal_blocks(start, durable_at_submit, bytes, last_used, seg, shared.epoch);
    shared.counters.padding_bytes.fetch_add((BLOCK_PAYLOAD_BYTES - last_used) as u64, Ordering::Relaxed);
    // Runs of blocks within one segment, placeholders excluded.
    let mut i = 0;
    while i < block_count {
        let lsn = start.advance(i as u64 * BLOCK);
        if lsn.0.is_multiple_of(seg) {
            i += 1;
            continue;
        }
        let blocks_left_in_segment = ((seg - lsn.0 % seg) / BLOCK) as usize;
        let n = blocks_left_in_segment.min(block_count - i);
        segments.write(shared, lsn, &bytes[i * BLOCK_SIZE_BYTES..(i + n) * BLOCK_SIZE_BYTES])?;
        segments.flush()?;
        shared.counters.bytes_written.fetch_add((n * BLOCK_SIZE_BYTES) as u64, Ordering::Relaxed);
        i += n;
    }
    shared.counters.flushes.fetch_add(1, Ordering::Relaxed);
    let flush_ns = started.elapsed().as_nanos() as u64;
    shared.counters.flush_time_ns.fetch_add(flush_ns, Ordering::Relaxed);
    shared.counters.flush_time_ns_max.fetch_max(flush_ns, Ordering::Relaxed);
    Ok(())
}

/// Seals every block of a taken flush (all full but the last; placeholders of segment
/// header blocks left alone).
fn seal_blocks(start: Lsn, durable_at_submit: Lsn, bytes: &mut [u8], last_used: usize, seg: u64, epoch: u32) {
    let block_count = bytes.len() / BLOCK_SIZE_BYTES;
    debug_assert_eq!(bytes.len() % BLOCK_SIZE_BYTES, 0);
    debug_assert!(!start.0.is_multiple_of(seg), "a flush never starts at a segment header block");
    debug_assert!(durable_at_submit <= start);
    for (i, block) in bytes.chunks_exact_mut(BLOCK_SIZE_BYTES).enumerate() {
        let lsn = start.advance(i as u64 * BLOCK);
        if lsn.0.is_multiple_of(seg) {
            continue; // the placeholder of a segment header block
        }
        let used = if i + 1 == block_count { last_used } else { BLOCK_PAYLOAD_BYTES };
        seal(block, used, lsn, start, durable_at_submit, epoch);
    }
}

/// A flush a [`LogImage`] took and sealed, not yet on its "disk": tests write it, lose it
/// or tear it, and complete flushes in any order, as flushes in flight would.
#[derive(Debug, Clone)]
pub struct PendingFlush {
    /// LSN of its first block.
    pub start: Lsn,
    /// One past its last record byte: durable once this flush and every one before it are.
    pub end: Lsn,
    /// The durable LSN when it was submitted (what its blocks record).
    pub durable_at_submit: Lsn,
    flush_no: u64,
    /// Sealed blocks from `start` (segment header placeholders included, never written).
    bytes: Vec<u8>,
}

impl PendingFlush {
    /// The LSNs of the log blocks it writes (placeholders of segment headers excluded).
    pub fn block_lsns(&self, segment_size_bytes: u64) -> Vec<Lsn> {
        (0..self.bytes.len() / BLOCK_SIZE_BYTES)
            .map(|i| self.start.advance(i as u64 * BLOCK))
            .filter(|l| !l.0.is_multiple_of(segment_size_bytes))
            .collect()
    }
}

/// A log built in memory by the same append and seal code the writer uses, without files
/// or threads: for property tests and fuzzing of the reader. Flushes are submitted,
/// written and completed one step at a time (`submit`, `write`, `complete`), so tests can
/// have several in flight and finish them in any order; `durable` follows the writer's
/// rule (LSN order).
pub struct LogImage {
    state: State,
    segment_size_bytes: u64,
    database_id: u128,
    epoch: u32,
    pub source: crate::reader::MemSource,
}

impl LogImage {
    pub fn new(segment_size_bytes: u64, database_id: u128, epoch: u32) -> Result<LogImage, WalError> {
        crate::config::check_segment_size(segment_size_bytes)?;
        Ok(LogImage {
            state: State {
                buf: Vec::new(),
                buf_start: Lsn(BLOCK),
                insert: FIRST_RECORD_LSN,
                appended_end: FIRST_RECORD_LSN,
                durable: FIRST_RECORD_LSN,
                wanted: FIRST_RECORD_LSN,
                spare: Vec::new(),
                failed: None,
                shutdown: false,
                writers_idle: 0,
                async_waiters: Vec::new(),
                epoch_start: Lsn(BLOCK),
                epoch_flushed: false,
                in_flight: VecDeque::new(),
                free_writers: Vec::new(),
                flushes_taken: 0,
                taken_end: FIRST_RECORD_LSN,
                delayed_deadline: None,
                delayed_groups: VecDeque::new(),
            },
            segment_size_bytes,
            database_id,
            epoch,
            source: crate::reader::MemSource::default(),
        })
    }

    pub fn append(&mut self, record: &Record) -> Result<Appended, WalError> {
        record.validate_for_append()?;
        let mut head = [0u8; RECORD_HEADER_BYTES + INSERT_FIXED_BYTES];
        let (h, t) = record.encode_parts(&mut head);
        let lsn = self.state.insert;
        self.state.put(h, true, self.segment_size_bytes);
        self.state.put(t, false, self.segment_size_bytes);
        Ok(Appended { lsn, end: self.state.appended_end })
    }

    /// Takes and seals what was appended as one flush submitted now; `None` if nothing was.
    pub fn submit(&mut self) -> Option<PendingFlush> {
        let seg = self.segment_size_bytes;
        let (start, mut bytes, last_used, end) = self.state.take(seg)?;
        let durable_at_submit = self.state.durable_at_submit(start, seg);
        seal_blocks(start, durable_at_submit, &mut bytes, last_used, seg, self.epoch);
        self.state.flushes_taken += 1;
        let flush_no = self.state.flushes_taken;
        self.state.in_flight.push_back(InFlight { flush_no, end, done: false });
        Some(PendingFlush { start, end, durable_at_submit, flush_no, bytes })
    }

    /// Puts a submitted flush's blocks on the "disk" (all of them; tests tear them after).
    pub fn write(&mut self, flush: &PendingFlush) {
        let seg = self.segment_size_bytes;
        for (i, block) in flush.bytes.chunks_exact(BLOCK_SIZE_BYTES).enumerate() {
            let lsn = flush.start.advance(i as u64 * BLOCK);
            if lsn.0.is_multiple_of(seg) {
                continue;
            }
            let no = lsn.segment_no(seg);
            let id = self.database_id;
            let image = self.source.segments.entry(no).or_insert_with(|| {
                let mut img = vec![0u8; seg as usize];
                img[..BLOCK_SIZE_BYTES].copy_from_slice(&crate::files::encode_segment_header(no, seg, id));
                img
            });
            let off = lsn.segment_offset_bytes(seg) as usize;
            image[off..off + BLOCK_SIZE_BYTES].copy_from_slice(block);
        }
    }

    /// The flush's write and fdatasync returned: durable advances over every completed
    /// flush in LSN order. Returns the durable LSN.
    pub fn complete(&mut self, flush: &PendingFlush) -> Lsn {
        if let Some(f) = self.state.in_flight.iter_mut().find(|f| f.flush_no == flush.flush_no) {
            f.done = true;
        }
        while let Some(f) = self.state.in_flight.front().copied().filter(|f| f.done) {
            self.state.in_flight.pop_front();
            self.state.durable = f.end;
            self.state.epoch_flushed = true;
        }
        self.state.durable
    }

    /// Everything appended is covered by a completed flush up to here.
    pub fn durable(&self) -> Lsn {
        self.state.durable
    }

    /// Seals and "writes" what was appended, as one flush, completed at once (flushes still
    /// in flight stay so). Returns the durable end.
    pub fn flush(&mut self) -> Lsn {
        if let Some(f) = self.submit() {
            self.write(&f);
            self.complete(&f);
        }
        self.state.durable
    }
}
