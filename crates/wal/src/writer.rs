//! The log: appends under one short lock, one flush at a time, group commit.
//!
//! Appenders copy their record into the current log block(s) under `state` and get its
//! LSN. A committer then waits until `durable` reaches its commit record's end. When no
//! flush is in flight, the committer flushes itself (the *leader*, as a PostgreSQL backend
//! does in `XLogFlush`): it takes *everything* appended so far (sealing the last, partial
//! block: padding), writes it in one sequential write and makes it durable with one
//! fdatasync (or none: segments opened O_DSYNC, `SyncMethod::OpenDatasync`), then publishes
//! the new durable LSN and wakes the waiters. While it writes,
//! new commits pile up for the next flush, led by one of them once this one ends: that is
//! group commit, and the batch grows by itself with the load. The leader runs on the
//! committer's own thread because a hand-off to a writer thread and back costs two thread
//! wake-ups per commit — on the 2-core VM these were a third of a single-row INSERT's CPU
//! and most of its latency beside the fdatasync (docs/server.md, "INSERT CPU per commit").
//! The log writer thread remains for what nobody waits for: a full log buffer (appenders
//! blocked on room) and the last flush at close.
//!
//! An error from a write or a durable flush stops the log for good (redo's `PreviousIo`):
//! after a failed fsync the kernel may have dropped the dirty pages, so a later flush that
//! succeeds proves nothing. Every waiting and later commit gets `WalError::Stopped`.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use flashscan_io::{FileSet, IoCompletion, IoEngine, IoError, IoOp, IoRequest, OpenMode};
use parking_lot::{Condvar, Mutex, MutexGuard};

use crate::block::{init_fresh, note_record_start, seal};
use crate::config::{EngineFactory, SyncMethod, WalConfig};
use crate::error::{file_err, WalError};
use crate::files::{
    create_excl, create_segment, inspect_segment_header, list_segments, lock_dir, open_existing, read_control, recycle_segment,
    segment_path, write_control, Control, DatabaseIdentity, SegmentHeaderState, CONTROL_FILE_NAME, LOCK_FILE_NAME,
};
use crate::limits::{BLOCK_HEADER_BYTES, BLOCK_PAYLOAD_BYTES, BLOCK_SIZE_BYTES, RECORD_HEADER_BYTES, WRITE_CHUNK_BYTES};
use crate::lsn::{Lsn, SegmentPosition, TxnId};
use crate::reader::{scan_dir, Scan};
use crate::record::{Record, INSERT_FIXED_BYTES};

const BLOCK: u64 = BLOCK_SIZE_BYTES as u64;

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
    bytes_written: AtomicU64,
    padding_bytes: AtomicU64,
    segments_created: AtomicU64,
    segments_recycled: AtomicU64,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WalStats {
    pub records_count: u64,
    pub commits_count: u64,
    /// Durable flushes (write + fdatasync) of the log writer.
    pub flushes_count: u64,
    pub bytes_written: u64,
    /// Block bytes left unused because a flush ended inside the block.
    pub padding_bytes: u64,
    pub segments_created_count: u64,
    pub segments_recycled_count: u64,
    pub durable_lsn: Lsn,
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
    spare: Vec<u8>,
    failed: Option<String>,
    shutdown: bool,
    writer_idle: bool,
    /// A flush (by a leading committer or the writer thread) is in flight: the one flusher
    /// at a time, so blocks reach the file in LSN order and `durable` only grows.
    flushing: bool,
    /// Flushes taken so far, and the end of the one in flight (= `durable` when idle):
    /// a committer waits on the condvar of the flush that will cover its LSN, so a
    /// finished flush wakes only the committers it made durable (and one of those that
    /// need the next flush, to lead it).
    flushes_taken: u64,
    in_flight_end: Lsn,
}

struct Shared {
    state: Mutex<State>,
    /// `State::durable`, published for lock-free reads (the buffer pool asks before every
    /// page write; a committer whose LSN is already durable returns without the lock).
    durable_published: AtomicU64,
    work: Condvar,
    /// Indexed by flush number parity (see `State::flushes_taken`).
    durable: [Condvar; 2],
    space: Condvar,
    /// The segment files, written by the one flusher (`State::flushing`): uncontended.
    segments: Mutex<SegmentWriter>,
    counters: Counters,
    segment_size_bytes: u64,
    epoch: u32,
    log_buffer_bytes_max: usize,
    next_txn: AtomicU64,
    /// Transactions begun and not yet durably committed or aborted (the commit delay's
    /// siblings; an estimate: a failed commit followed by an abort counts once too few).
    open_txns: AtomicU64,
    commit_delay: std::time::Duration,
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
        let mut spare = std::mem::take(&mut self.spare);
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

/// The write-ahead log of one database.
pub struct Wal {
    shared: Arc<Shared>,
    writer: Option<JoinHandle<()>>,
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
        let segments = SegmentWriter {
            dir: dir.clone(),
            segment_size_bytes: seg,
            database_id: identity.id,
            direct_io: config.direct_io,
            sync_method: config.sync_method.clone().map_err(WalError::Config)?,
            factory: config.engine_factory.clone(),
            current: None,
            completions: Vec::with_capacity(1),
        };
        let shared = Arc::new(Shared {
            durable_published: AtomicU64::new(scan.end_lsn.0),
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
                writer_idle: false,
                flushing: false,
                flushes_taken: 0,
                in_flight_end: scan.end_lsn,
            }),
            work: Condvar::new(),
            durable: [Condvar::new(), Condvar::new()],
            space: Condvar::new(),
            segments: Mutex::new(segments),
            counters: Counters::default(),
            segment_size_bytes: seg,
            epoch: control.epoch,
            log_buffer_bytes_max: config.log_buffer_bytes_max,
            next_txn: AtomicU64::new(((control.epoch as u64) & 0xFF_FFFF) << 40 | 1),
            open_txns: AtomicU64::new(0),
            commit_delay: std::time::Duration::from_micros(config.commit_delay_us.clone().map_err(WalError::Config)?),
            recyclable: Mutex::new(recyclable),
            notices: Mutex::new(Vec::new()),
            segment_creation: Mutex::new(()),
            prepare: Mutex::new(Prepare::default()),
            prepare_cv: Condvar::new(),
        });
        let writer_shared = shared.clone();
        let writer = std::thread::Builder::new()
            .name("wal-writer".into())
            .spawn(move || log_writer(writer_shared))
            .map_err(file_err(&dir))?;
        let preparer_shared = shared.clone();
        let preparer_dir = dir.clone();
        let id = identity.id;
        let preparer = std::thread::Builder::new()
            .name("wal-segments".into())
            .spawn(move || segment_preparer(preparer_shared, preparer_dir, id))
            .map_err(file_err(&dir))?;
        Ok((Wal { shared, writer: Some(writer), preparer: Some(preparer), dir, control: Mutex::new(control), _lock: lock }, scan))
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// A new transaction id (unique across restarts: see `TxnId`).
    pub fn begin(&self) -> TxnId {
        self.shared.open_txns.fetch_add(1, Ordering::Relaxed);
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
    /// acknowledged before it is durable.
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
            if !st.flushing {
                if !self.shared.commit_delay.is_zero() && self.shared.open_txns.load(Ordering::Relaxed) >= crate::config::COMMIT_SIBLINGS {
                    // The commit delay: hold the lead (`flushing`, so nobody else starts a
                    // flush; the waiters meanwhile wait on the next flush's parity, which is
                    // this one) while commits arriving now append, then take them all.
                    st.flushing = true;
                    MutexGuard::unlocked(&mut st, || std::thread::sleep(self.shared.commit_delay));
                    st.flushing = false;
                }
                // Nobody flushes: lead a flush of everything appended, `lsn` included.
                if !flush_as_leader(&self.shared, &mut st) && st.durable < lsn && st.failed.is_none() {
                    // Unreachable: everything appended is either taken by a flush (none in
                    // flight) or in the buffer. An error rather than a wait forever.
                    return Err(WalError::Config(format!("wait for LSN {lsn}: nothing left to flush, yet durable only to {}", st.durable)));
                }
                continue;
            }
            // The flush in flight covers `lsn`, or else the next one taken will (it takes
            // everything appended before it starts).
            let flush_no = if lsn <= st.in_flight_end { st.flushes_taken } else { st.flushes_taken + 1 };
            self.shared.durable[(flush_no % 2) as usize].wait(&mut st);
        }
    }

    /// Appends `txn`'s commit record and waits until it is durable.
    pub fn commit(&self, txn: TxnId) -> Result<Appended, WalError> {
        let committed = self.append(&Record::Commit { txn }).and_then(|a| self.wait_durable(a.end).map(|()| a));
        self.end_txn();
        committed
    }

    /// Appends `txn`'s abort record (not waited for: an abort needs no durability).
    pub fn abort(&self, txn: TxnId) -> Result<Appended, WalError> {
        let aborted = self.append(&Record::Abort { txn });
        self.end_txn();
        aborted
    }

    /// A transaction ended (committed and durable, failed, or aborted): one fewer open, as
    /// PostgreSQL's backends count until their commit is flushed. Saturating: a transaction
    /// ended twice (commit failed, then abort) or never begun here ends nothing more.
    fn end_txn(&self) {
        let _ = self.shared.open_txns.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1));
    }

    /// Everything below this LSN is durable.
    pub fn durable_lsn(&self) -> Lsn {
        Lsn(self.shared.durable_published.load(Ordering::Acquire))
    }

    /// Starts a checkpoint: its LSN is the redo point. The caller then writes every page
    /// dirtied before it (each only once the log is durable up to the page's LSN) and calls
    /// `checkpoint_end`.
    pub fn checkpoint_begin(&self) -> Result<Lsn, WalError> {
        Ok(self.append(&Record::CheckpointBegin)?.lsn)
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
            bytes_written: c.bytes_written.load(Ordering::Relaxed),
            padding_bytes: c.padding_bytes.load(Ordering::Relaxed),
            segments_created_count: c.segments_created.load(Ordering::Relaxed),
            segments_recycled_count: c.segments_recycled.load(Ordering::Relaxed),
            durable_lsn: self.durable_lsn(),
        }
    }

    /// One-line notices (O_DIRECT refused, …) for the caller to print.
    pub fn notices(&self) -> Vec<String> {
        self.shared.notices.lock().clone()
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
            self.shared.work.notify_one();
        }
        if let Some(w) = self.writer.take() {
            // A panic in the writer already failed the log (see log_writer); nothing to add.
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
/// may be blocked on room, `wanted`) and what is left at close. Committers flush for
/// themselves (`flush_as_leader`).
fn writer_asked(shared: &Shared, st: &State) -> bool {
    !st.buf.is_empty() && (st.shutdown || st.wanted > st.durable || st.buf.len() >= shared.log_buffer_bytes_max / 2)
}

fn log_writer(shared: Arc<Shared>) {
    let mut st = shared.state.lock();
    loop {
        if st.failed.is_some() {
            return;
        }
        if !st.flushing && writer_asked(&shared, &st) {
            flush_as_leader(&shared, &mut st);
            continue;
        }
        if st.shutdown && !st.flushing && st.buf.is_empty() {
            return;
        }
        st.writer_idle = true;
        shared.work.wait(&mut st);
        st.writer_idle = false;
    }
}

/// One flush, by the caller (a committer waiting for its commit, or the writer thread),
/// which saw no flush in flight: takes everything appended under `st`, writes and
/// fdatasyncs it without the lock, then publishes the durable LSN and wakes the committers
/// it made durable, plus one of those waiting for the next flush to lead it. Returns
/// false when there was nothing to take. A failed write or flush (or a panic in one) stops
/// the log for good.
fn flush_as_leader(shared: &Shared, st: &mut MutexGuard<'_, State>) -> bool {
    debug_assert!(!st.flushing);
    let seg = shared.segment_size_bytes;
    let Some((start, mut bytes, last_used, end)) = st.take(seg) else { return false };
    st.flushing = true;
    st.flushes_taken += 1;
    st.in_flight_end = end;
    let flush_no = st.flushes_taken;
    let result = MutexGuard::unlocked(st, || {
        // The buffer was emptied: appenders waiting for room go on meanwhile.
        shared.space.notify_all();
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let mut segments = shared.segments.lock();
            write_and_flush(shared, &mut segments, start, &mut bytes, last_used)
        }))
    });
    st.flushing = false;
    match result {
        Ok(Ok(())) => {
            debug_assert!(end >= st.durable);
            st.durable = end;
            shared.durable_published.store(end.0, Ordering::Release);
            if st.spare.capacity() < bytes.capacity() {
                st.spare = bytes;
            }
        }
        Ok(Err(e)) => st.failed = Some(e.to_string()),
        Err(_) => st.failed = Some("a log flush panicked".into()),
    }
    shared.durable[(flush_no % 2) as usize].notify_all();
    if st.failed.is_some() {
        shared.durable[((flush_no + 1) % 2) as usize].notify_all();
    } else {
        // Those waiting on the next flush appended after this one was taken: one of them
        // leads it (the rest are covered by it and wait on its parity).
        shared.durable[((flush_no + 1) % 2) as usize].notify_one();
    }
    shared.space.notify_all();
    if st.writer_idle && (st.failed.is_some() || writer_asked(shared, st)) {
        shared.work.notify_one();
    }
    true
}

/// Seals the taken blocks and writes them, one write per segment touched, each followed by
/// a durable flush.
fn write_and_flush(shared: &Shared, segments: &mut SegmentWriter, start: Lsn, bytes: &mut [u8], last_used: usize) -> Result<(), WalError> {
    let seg = shared.segment_size_bytes;
    let block_count = bytes.len() / BLOCK_SIZE_BYTES;
    seal_blocks(start, bytes, last_used, seg, shared.epoch);
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
    Ok(())
}

/// Seals every block of a taken flush (all full but the last; placeholders of segment
/// header blocks left alone).
fn seal_blocks(start: Lsn, bytes: &mut [u8], last_used: usize, seg: u64, epoch: u32) {
    let block_count = bytes.len() / BLOCK_SIZE_BYTES;
    debug_assert_eq!(bytes.len() % BLOCK_SIZE_BYTES, 0);
    debug_assert!(!start.0.is_multiple_of(seg), "a flush never starts at a segment header block");
    for (i, block) in bytes.chunks_exact_mut(BLOCK_SIZE_BYTES).enumerate() {
        let lsn = start.advance(i as u64 * BLOCK);
        if lsn.0.is_multiple_of(seg) {
            continue; // the placeholder of a segment header block
        }
        let used = if i + 1 == block_count { last_used } else { BLOCK_PAYLOAD_BYTES };
        seal(block, used, lsn, start, epoch);
    }
}

/// A log built in memory by the same append and seal code the writer uses, without files
/// or threads: for property tests and fuzzing of the reader.
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
                writer_idle: false,
                flushing: false,
                flushes_taken: 0,
                in_flight_end: FIRST_RECORD_LSN,
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

    /// Seals and "writes" what was appended, as one flush. Returns the durable end.
    pub fn flush(&mut self) -> Lsn {
        let seg = self.segment_size_bytes;
        if let Some((start, mut bytes, last_used, end)) = self.state.take(seg) {
            seal_blocks(start, &mut bytes, last_used, seg, self.epoch);
            for (i, block) in bytes.chunks_exact(BLOCK_SIZE_BYTES).enumerate() {
                let lsn = start.advance(i as u64 * BLOCK);
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
            self.state.durable = end;
        }
        self.state.durable
    }
}
