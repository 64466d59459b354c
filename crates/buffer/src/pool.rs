//! The pool: page requests (hit or miss), claiming frames (free list, then the clock),
//! reading a page synchronously through the random path's request queue, dirty pages
//! (the set sorted by file and offset, the WAL rule before they are written), and clearing.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use parking_lot::{Mutex, RwLock};

use crate::counters::{BufferCounters, BufferCountersSnapshot};
use crate::error::BufferError;
use crate::file_registry::FileRegistry;
use crate::lsn::WalRule;
use crate::page_reader::PageReader;
use crate::frame::{FrameMeta, STATE_FAILED, STATE_FREE, STATE_LOADING, STATE_VALID};
use crate::frame_memory::FrameMemory;
use crate::guard::{Fetch, LoadTicket, PageGuard};
use crate::limits::{CLOCK_TURNS_MAX, FRAME_SIZE_BYTES, POOL_BYTES_MAX, POOL_FRAMES_MIN};
use crate::page_key::PageKey;
use crate::page_table::PageTable;

/// The process's pool (see `global`), sized once.
static GLOBAL_POOL: OnceLock<BufferPool> = OnceLock::new();
/// Budget of the process's pool when nobody sized it: enough for index paths and the
/// dirty pages of a session; scans stream past it through their own extent rings.
pub const GLOBAL_POOL_BYTES_DEFAULT: u64 = 256 << 20;

pub struct BufferPool {
    memory: FrameMemory,
    frames: Box<[FrameMeta]>,
    table: PageTable,
    /// Frames holding no page and owned by nobody (state FREE, unpinned, not ring-owned).
    free_frames: Mutex<Vec<u32>>,
    clock_hand: AtomicU64,
    counters: BufferCounters,
    files: FileRegistry,
    /// Every dirty page, in (file, page) order: what the checkpoint writes, in file order.
    dirty_pages: Mutex<BTreeSet<PageKey>>,
    /// `dirty_pages.len()`, read without the lock on every scan extent (the fast path:
    /// nothing dirty, nothing to overlay).
    dirty_count: AtomicU64,
    wal_rule: RwLock<Option<Arc<dyn WalRule>>>,
}

impl BufferPool {
    /// A pool of `budget_bytes / 8 KB` frames, all allocated now.
    pub fn new(budget_bytes: u64) -> Result<BufferPool, BufferError> {
        let min_bytes = POOL_FRAMES_MIN as u64 * FRAME_SIZE_BYTES as u64;
        if budget_bytes < min_bytes || budget_bytes > POOL_BYTES_MAX {
            return Err(BufferError::BudgetOutOfRange { bytes: budget_bytes, min_bytes, max_bytes: POOL_BYTES_MAX });
        }
        Self::with_frames((budget_bytes / FRAME_SIZE_BYTES as u64) as u32)
    }

    pub fn with_frames(frame_count: u32) -> Result<BufferPool, BufferError> {
        if frame_count < POOL_FRAMES_MIN {
            let bytes = frame_count as u64 * FRAME_SIZE_BYTES as u64;
            return Err(BufferError::BudgetOutOfRange {
                bytes,
                min_bytes: POOL_FRAMES_MIN as u64 * FRAME_SIZE_BYTES as u64,
                max_bytes: POOL_BYTES_MAX,
            });
        }
        let memory = FrameMemory::new(frame_count)?;
        let frames: Box<[FrameMeta]> = (0..frame_count).map(|_| FrameMeta::new()).collect();
        // Popped from the end: hand out low frames first (tidier in tests and dumps).
        let free: Vec<u32> = (0..frame_count).rev().collect();
        Ok(BufferPool {
            memory,
            frames,
            table: PageTable::new(frame_count),
            free_frames: Mutex::new(free),
            clock_hand: AtomicU64::new(0),
            counters: BufferCounters::default(),
            files: FileRegistry::default(),
            dirty_pages: Mutex::new(BTreeSet::new()),
            dirty_count: AtomicU64::new(0),
            wal_rule: RwLock::new(None),
        })
    }

    /// The process's one pool: every scan, lookup and writer of the process reads and
    /// dirties pages here, so they see each other's pages. Sized by `init_global` if that
    /// ran first, else `GLOBAL_POOL_BYTES_DEFAULT`.
    pub fn global() -> &'static BufferPool {
        GLOBAL_POOL.get_or_init(|| match BufferPool::new(GLOBAL_POOL_BYTES_DEFAULT) {
            Ok(pool) => pool,
            Err(e) => panic!("the default buffer pool of {GLOBAL_POOL_BYTES_DEFAULT} bytes cannot be allocated: {e}"),
        })
    }

    /// The process's pool if something has used it (nothing of a file is cached otherwise).
    pub fn global_if_made() -> Option<&'static BufferPool> {
        GLOBAL_POOL.get()
    }

    /// Sizes the process's pool (once, before first use); the pool if it already exists
    /// with this budget, else an error saying what it holds.
    pub fn init_global(budget_bytes: u64) -> Result<&'static BufferPool, BufferError> {
        if GLOBAL_POOL.get().is_none() {
            let pool = BufferPool::new(budget_bytes)?;
            let _ = GLOBAL_POOL.set(pool);
        }
        let pool = Self::global();
        let want_frames = budget_bytes / crate::limits::FRAME_SIZE_BYTES as u64;
        if pool.frame_count() as u64 != want_frames {
            return Err(BufferError::File {
                path: PathBuf::from("<buffer pool>"),
                what: format!("already sized at {} bytes, cannot become {budget_bytes} bytes", pool.budget_bytes()),
            });
        }
        Ok(pool)
    }

    /// The id under which pages of the file at `path` live in this pool (see
    /// `file_registry`). A file replaced since it was last seen gets a new id, and the
    /// clean pages of its old one are dropped.
    pub fn register_file(&self, path: &Path) -> Result<u32, BufferError> {
        let registered = self.files.register(path, &|id| self.has_dirty_pages_in(id))?;
        if let Some(old) = registered.replaced {
            // Stale pages of the old file: unreachable now, free their frames (a pinned
            // one stays until its reader is done, then ages out by the clock).
            let _ = self.clear_matching(|k| k.file_index == old);
        }
        Ok(registered.id)
    }

    /// Before flashscan removes the file at `path` (DROP TABLE, a rebuild's old files):
    /// its clean pages are dropped and its id retired, so a file made later at the same
    /// path is never served the old one's pages.
    pub fn forget_file(&self, path: &Path) {
        if let Some(id) = self.files.forget(path) {
            // A page pinned now is unreachable once its reader is done: the clock reclaims it.
            let _ = self.clear_matching(|k| k.file_index == id);
        }
    }

    /// The canonical path of a file id.
    pub fn file_path(&self, file_id: u32) -> Option<PathBuf> {
        self.files.path(file_id)
    }

    pub fn frame_count(&self) -> u32 {
        self.memory.frame_count()
    }

    pub fn budget_bytes(&self) -> u64 {
        self.memory.bytes() as u64
    }

    pub fn counters(&self) -> &BufferCounters {
        &self.counters
    }

    pub fn snapshot(&self) -> BufferCountersSnapshot {
        self.counters.snapshot()
    }

    /// Pages in the page table (valid or being read), from a consistent view of the table.
    pub fn resident_count(&self) -> usize {
        match self.check_invariants() {
            Ok(n) => n,
            Err(e) => panic!("buffer pool invariant broken: {e}"),
        }
    }

    /// Checks, with the whole page table locked: no frame holds two pages, every mapped
    /// frame knows its key and is loading or valid, and pages never outnumber frames (the
    /// budget). Returns the number of pages.
    pub fn check_invariants(&self) -> Result<usize, String> {
        let shards = self.table.lock_all();
        let mut seen = vec![false; self.frame_count() as usize];
        let mut pages = 0usize;
        for shard in &shards {
            for (key, &frame) in shard.iter() {
                let f = frame as usize;
                if f >= seen.len() {
                    return Err(format!("page {key:?} maps to frame {frame} of {}", seen.len()));
                }
                if seen[f] {
                    return Err(format!("frame {frame} holds two pages"));
                }
                seen[f] = true;
                let meta = &self.frames[f];
                if meta.key() != *key {
                    return Err(format!("frame {frame} holds {:?}, the table says {key:?}", meta.key()));
                }
                let state = meta.state();
                if state != STATE_VALID && state != STATE_LOADING {
                    return Err(format!("frame {frame} of page {key:?} is in state {state}"));
                }
                pages += 1;
            }
        }
        if pages > self.frame_count() as usize {
            return Err(format!("{pages} pages in {} frames", self.frame_count()));
        }
        Ok(pages)
    }

    /// Frames with at least one pin.
    pub fn pinned_count(&self) -> u32 {
        self.frames.iter().filter(|m| m.pins() > 0).count() as u32
    }

    pub(crate) fn dirty_set(&self) -> parking_lot::MutexGuard<'_, BTreeSet<PageKey>> {
        self.dirty_pages.lock()
    }

    pub(crate) fn dirty_count_cell(&self) -> &AtomicU64 {
        &self.dirty_count
    }

    pub(crate) fn wal_rule_cell(&self) -> &RwLock<Option<Arc<dyn WalRule>>> {
        &self.wal_rule
    }

    /// After the pool wrote a file: its new change time is the pool's own doing.
    pub(crate) fn note_written(&self, file_id: u32) {
        self.files.wrote(file_id);
    }

    pub(crate) fn memory(&self) -> &FrameMemory {
        &self.memory
    }

    pub(crate) fn frame_meta(&self, frame: u32) -> &FrameMeta {
        &self.frames[frame as usize]
    }

    /// The page if it is in memory (pinned and latched), without reading it.
    pub fn get_resident(&self, key: PageKey) -> Option<PageGuard<'_>> {
        loop {
            let frame = {
                let shard = self.table.shard(key);
                let &frame = shard.get(&key)?;
                self.frames[frame as usize].pin();
                frame
            };
            if let Some(guard) = self.latch_shared(frame, key) {
                self.counters.hit();
                return Some(guard);
            }
        }
    }

    /// A page request: the pinned page, or a ticket to load it into a frame the clock freed.
    pub fn fetch(&self, key: PageKey) -> Result<Fetch<'_>, BufferError> {
        self.fetch_with(key, &mut || self.claim_victim())
    }

    /// `fetch`, taking frames for misses from `victim` (the clock, or a scan ring).
    pub(crate) fn fetch_with(&self, key: PageKey, victim: &mut dyn FnMut() -> Result<u32, BufferError>) -> Result<Fetch<'_>, BufferError> {
        loop {
            if let Some(guard) = self.get_resident(key) {
                return Ok(Fetch::Hit(guard));
            }
            let frame = victim()?;
            let shard = self.table.shard(key);
            if let Some(&other) = shard.get(&key) {
                // Another thread started this page between our lookup and now: use theirs.
                self.frames[other as usize].pin();
                drop(shard);
                self.release_claimed(frame);
                match self.latch_shared(other, key) {
                    Some(guard) => {
                        self.counters.hit();
                        return Ok(Fetch::Hit(guard));
                    }
                    None => continue,
                }
            }
            let ticket = self.start_load(frame, key, shard);
            self.counters.miss();
            return Ok(Fetch::Miss(ticket));
        }
    }

    /// Latches a frame the caller has pinned; `None` (and unpinned) if its load failed.
    fn latch_shared(&self, frame: u32, key: PageKey) -> Option<PageGuard<'_>> {
        let meta = &self.frames[frame as usize];
        debug_assert!(meta.pins() >= 1);
        meta.referenced.store(true, Ordering::Relaxed);
        let latch = match meta.latch.try_read() {
            Some(latch) => latch,
            None => {
                let loading = meta.state() == STATE_LOADING;
                let started = Instant::now();
                let latch = meta.latch.read();
                let waited_ns = started.elapsed().as_nanos() as u64;
                if loading {
                    self.counters.io_wait(waited_ns);
                } else {
                    self.counters.latch_wait(waited_ns);
                }
                latch
            }
        };
        if meta.state() != STATE_VALID {
            debug_assert_eq!(meta.state(), STATE_FAILED);
            drop(latch);
            meta.unpin();
            return None;
        }
        debug_assert_eq!(meta.key(), key, "a pinned frame changed pages");
        Some(PageGuard { pool: self, frame, key, latch: Some(latch) })
    }

    /// The random path: the page, pinned, from memory or by one synchronous 8 KB read
    /// through `reader` on a miss; `verify` sees the bytes before any other reader may.
    /// The reader must be idle.
    pub fn read_page<T, E: From<BufferError>>(
        &self,
        reader: &mut PageReader<T>,
        key: PageKey,
        verify: impl FnOnce(&[u8]) -> Result<(), E>,
    ) -> Result<PageGuard<'_>, E> {
        let mut ticket = match self.fetch(key)? {
            Fetch::Hit(guard) => return Ok(guard),
            Fetch::Miss(ticket) => ticket,
        };
        let io_error = |source| BufferError::Io { file_index: key.file_index, page: key.page_number, source };
        let local = reader.local_index(key.file_index).ok_or_else(|| BufferError::File {
            path: self.file_path(key.file_index).unwrap_or_default(),
            what: format!("file id {} is not open in this reader", key.file_index),
        })?;
        let started = Instant::now();
        reader
            .queue_mut()
            .read_one(local, key.offset_bytes(), FRAME_SIZE_BYTES as u32, |bytes| ticket.buffer_mut().copy_from_slice(&bytes[..FRAME_SIZE_BYTES]))
            .map_err(io_error)?;
        self.counters.io_wait(started.elapsed().as_nanos() as u64);
        self.counters.read(FRAME_SIZE_BYTES as u64);
        ticket.complete(verify)
    }

    /// Installs a page that arrived with a larger read (the rest of a 64 KB extent), unless
    /// it is already in memory or being read. Never waits and keeps nothing pinned, so a
    /// thread holding load tickets can call it without deadlocking against another's.
    pub fn install<E: From<BufferError>>(&self, key: PageKey, bytes: &[u8], verify: impl FnOnce(&[u8]) -> Result<(), E>) -> Result<(), E> {
        match self.try_start_load(key)? {
            Some(ticket) => ticket.complete_from(bytes, verify).map(drop),
            None => Ok(()),
        }
    }

    /// A ticket to load `key` if nobody has it in memory or is reading it; `None` otherwise.
    /// Not counted as a miss (nobody asked for the page yet).
    pub fn try_start_load(&self, key: PageKey) -> Result<Option<LoadTicket<'_>>, BufferError> {
        if self.contains(key) {
            return Ok(None);
        }
        let frame = self.claim_victim()?;
        let shard = self.table.shard(key);
        if shard.contains_key(&key) {
            drop(shard);
            self.release_claimed(frame);
            return Ok(None);
        }
        Ok(Some(self.start_load(frame, key, shard)))
    }

    /// Maps a claimed frame to `key` under the shard lock and latches it for the loader.
    fn start_load(&self, frame: u32, key: PageKey, mut shard: parking_lot::MutexGuard<'_, crate::page_table::Shard>) -> LoadTicket<'_> {
        let meta = &self.frames[frame as usize];
        debug_assert_eq!(meta.pins(), 1, "a claimed frame carries exactly the claim's pin");
        debug_assert_eq!(meta.state(), STATE_FREE);
        debug_assert!(!shard.contains_key(&key));
        meta.set_key(key);
        meta.state.store(STATE_LOADING, Ordering::Release);
        // Nobody holds the latch of a claimed frame: readers hold it only while pinned.
        let Some(write) = meta.latch.try_write() else {
            panic!("claimed frame {frame} is latched by somebody");
        };
        shard.insert(key, frame);
        debug_assert!(shard.len() <= self.frame_count() as usize);
        LoadTicket { pool: self, frame, key, latch: Some(write) }
    }

    /// Whether the page table holds the key (valid or being read).
    pub fn contains(&self, key: PageKey) -> bool {
        self.table.shard(key).contains_key(&key)
    }

    /// A frame for a miss: the free list, else the clock (second chance, skipping pinned
    /// and ring frames). The frame comes back claimed: one pin, state FREE, not in the table.
    pub(crate) fn claim_victim(&self) -> Result<u32, BufferError> {
        if let Some(frame) = self.free_frames.lock().pop() {
            let claimed = self.frames[frame as usize].try_claim();
            assert!(claimed, "frame {frame} on the free list was pinned");
            return Ok(frame);
        }
        let frame_count = self.frame_count() as u64;
        for _ in 0..frame_count * CLOCK_TURNS_MAX as u64 {
            let frame = (self.clock_hand.fetch_add(1, Ordering::Relaxed) % frame_count) as u32;
            let meta = &self.frames[frame as usize];
            if meta.ring_owned.load(Ordering::Relaxed) || meta.pins() > 0 {
                continue;
            }
            match meta.state() {
                STATE_FREE | STATE_LOADING => continue,
                _ => {}
            }
            if meta.referenced.swap(false, Ordering::Relaxed) {
                continue;
            }
            if self.try_claim_frame(frame, true) {
                return Ok(frame);
            }
        }
        Err(BufferError::AllPinned { frame_count: self.frame_count() })
    }

    /// Claims `frame` if nobody uses it: a valid page is evicted (taken out of the table),
    /// a failed or free frame is taken as is.
    pub(crate) fn try_claim_frame(&self, frame: u32, count_eviction: bool) -> bool {
        let meta = &self.frames[frame as usize];
        if meta.pins() > 0 {
            return false;
        }
        match meta.state() {
            STATE_VALID => {
                let key = meta.key();
                let mut shard = self.table.shard(key);
                // Under the shard lock nobody can pin this page: a zero here stays zero.
                if shard.get(&key) != Some(&frame) || !meta.try_claim() {
                    return false;
                }
                // Dirty pages leave only after they are written (`write_dirty`). The flag
                // changes only under a pin, and we hold the only one: stable here.
                if meta.is_dirty() {
                    meta.unpin();
                    return false;
                }
                shard.remove(&key);
                drop(shard);
                meta.state.store(STATE_FREE, Ordering::Release);
                if count_eviction {
                    self.counters.evicted();
                }
                true
            }
            STATE_FAILED | STATE_FREE => {
                if !meta.try_claim() {
                    return false;
                }
                let state = meta.state();
                if state == STATE_FAILED || state == STATE_FREE {
                    meta.state.store(STATE_FREE, Ordering::Release);
                    true
                } else {
                    // It became valid between our look and the claim: leave it.
                    meta.unpin();
                    false
                }
            }
            _ => false,
        }
    }

    /// Gives back a claimed frame that will not be used.
    pub(crate) fn release_claimed(&self, frame: u32) {
        let meta = &self.frames[frame as usize];
        debug_assert_eq!(meta.pins(), 1);
        meta.state.store(STATE_FREE, Ordering::Release);
        meta.referenced.store(false, Ordering::Relaxed);
        meta.unpin();
        if !meta.ring_owned.load(Ordering::Acquire) {
            self.free_frames.lock().push(frame);
        }
    }

    /// Takes an abandoned load out of the table (only if the table still maps it to us).
    pub(crate) fn remove_mapping(&self, key: PageKey, frame: u32) {
        let mut shard = self.table.shard(key);
        if shard.get(&key) == Some(&frame) {
            shard.remove(&key);
        }
    }

    /// Drops every unpinned page (a cold start for benchmarks). Fails, after dropping what
    /// it can, if pages are pinned.
    pub fn clear(&self) -> Result<u32, BufferError> {
        self.clear_matching(|_| true)
    }

    /// Drops every unpinned page whose key `matches` (e.g. the heap pages of a table, to
    /// read them cold while its index stays in memory).
    pub fn clear_matching(&self, matches: impl Fn(PageKey) -> bool) -> Result<u32, BufferError> {
        let mut dropped = 0;
        let mut pinned_count = 0;
        for frame in 0..self.frame_count() {
            let meta = &self.frames[frame as usize];
            if meta.ring_owned.load(Ordering::Relaxed) {
                continue;
            }
            let state = meta.state();
            if state == STATE_VALID && (!matches(meta.key()) || meta.is_dirty()) {
                // A dirty page is the only copy of its changes: clearing never drops it.
                continue;
            }
            match state {
                STATE_VALID | STATE_FAILED => {
                    if meta.pins() > 0 {
                        pinned_count += 1;
                        continue;
                    }
                    let was_valid = meta.state() == STATE_VALID;
                    // Clearing is not eviction pressure: not counted as evictions.
                    if self.try_claim_frame(frame, false) {
                        self.release_claimed(frame);
                        dropped += was_valid as u32;
                    } else {
                        pinned_count += 1;
                    }
                }
                STATE_LOADING => pinned_count += 1,
                _ => {}
            }
        }
        if pinned_count > 0 {
            return Err(BufferError::PinnedOnClear { pinned_count });
        }
        Ok(dropped)
    }
}
