//! Dirty pages: made dirty under an exclusive latch with the LSN of the change, kept in
//! one set sorted by (file, page) — the order the checkpoint writes them in — never
//! evicted or cleared while dirty, overlaid on every scan extent that covers them, and
//! written only after the WAL rule: the log must be durable up to the highest page LSN
//! of a batch before any page of the batch is written.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use flashscan_io::{open_engine, EngineConfig, EngineKind, FileSet, OpenMode, RequestQueue};
use serde::Serialize;

use crate::error::BufferError;
use crate::limits::{FRAME_SIZE_BYTES, WRITE_OUTSTANDING_MAX, WRITE_PAGES_MAX};
use crate::lsn::{Lsn, WalRule};
use crate::page_key::PageKey;
use crate::pool::BufferPool;

/// How `write_dirty` writes.
#[derive(Debug, Clone, Copy)]
pub struct DirtyWriteOptions {
    /// Writes in flight at most (SQL Server's "max async IO").
    pub max_outstanding_writes: u32,
    pub engine_kind: EngineKind,
}

impl Default for DirtyWriteOptions {
    fn default() -> Self {
        DirtyWriteOptions { max_outstanding_writes: 32, engine_kind: EngineKind::Auto }
    }
}

/// What one `write_dirty` did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct DirtyWriteFigures {
    pub pages_written: u64,
    /// Writes issued (neighbouring pages of one file go out as one write).
    pub writes_count: u64,
    pub bytes_written: u64,
    /// Pages changed again while being written: still dirty, written next time.
    pub pages_still_dirty: u64,
    pub max_outstanding_writes: u32,
    /// The LSN the log was made durable to before the first write.
    pub log_flushed_to: Lsn,
}

impl BufferPool {
    /// Records that the page in `frame` changed by the log record ending at `lsn`. Only
    /// through `PageGuardMut` (exclusive latch and a pin held).
    pub(crate) fn mark_dirty(&self, frame: u32, key: PageKey, lsn: Lsn) {
        let meta = self.frame_meta(frame);
        debug_assert!(meta.pins() >= 1, "mark_dirty on an unpinned frame");
        debug_assert_eq!(meta.key(), key);
        meta.page_lsn.fetch_max(lsn.0, Ordering::AcqRel);
        meta.dirty_epoch.fetch_add(1, Ordering::AcqRel);
        let mut set = self.dirty_set();
        if !meta.dirty.swap(true, Ordering::AcqRel) {
            let inserted = set.insert(key);
            debug_assert!(inserted, "page {key:?} was in the dirty set while clean");
            self.dirty_count_cell().fetch_add(1, Ordering::AcqRel);
        }
    }

    /// Pages dirty now.
    pub fn dirty_count(&self) -> u64 {
        self.dirty_count_cell().load(Ordering::Acquire)
    }

    pub(crate) fn has_dirty_pages_in(&self, file_id: u32) -> bool {
        if self.dirty_count() == 0 {
            return false;
        }
        self.dirty_set().range(PageKey::new(file_id, 0)..=PageKey::new(file_id, u64::MAX)).next().is_some()
    }

    /// Every dirty page with its page LSN, sorted by (file, offset): the checkpoint's list.
    pub fn dirty_pages(&self) -> Vec<(PageKey, Lsn)> {
        let keys: Vec<PageKey> = self.dirty_set().iter().copied().collect();
        keys.into_iter()
            .filter_map(|key| {
                let guard = self.get_resident(key)?;
                let meta = self.frame_meta(guard.frame());
                meta.is_dirty().then(|| (key, Lsn(meta.page_lsn.load(Ordering::Acquire))))
            })
            .collect()
    }

    /// Attaches the write-ahead log: every later `write_dirty` asks it to be durable up to
    /// the pages' LSN first.
    pub fn set_wal_rule(&self, rule: Arc<dyn WalRule>) {
        *self.wal_rule_cell().write() = Some(rule);
    }

    /// Copies the pool's version of every dirty page overlapping `bytes` (read from
    /// `offset_bytes` of file `file_id`) over the file's bytes; returns the pages copied.
    /// The scan's way of seeing changes not yet written. One atomic load when nothing is
    /// dirty.
    pub fn overlay_dirty(&self, file_id: u32, offset_bytes: u64, bytes: &mut [u8]) -> u32 {
        if self.dirty_count() == 0 || bytes.is_empty() {
            return 0;
        }
        let page = FRAME_SIZE_BYTES as u64;
        let end_bytes = offset_bytes + bytes.len() as u64;
        let keys: Vec<PageKey> = self
            .dirty_set()
            .range(PageKey::new(file_id, offset_bytes / page)..PageKey::new(file_id, end_bytes.div_ceil(page)))
            .copied()
            .collect();
        let mut copied = 0;
        for key in keys {
            // Dirty pages are never evicted; one cleaned meanwhile was written to the file
            // before it was cleaned, and its frame still holds the same bytes.
            let Some(guard) = self.get_resident(key) else { continue };
            let page_start = key.offset_bytes();
            let from = page_start.max(offset_bytes);
            let to = (page_start + page).min(end_bytes);
            debug_assert!(from < to);
            let src = &guard.data()[(from - page_start) as usize..(to - page_start) as usize];
            bytes[(from - offset_bytes) as usize..(to - offset_bytes) as usize].copy_from_slice(src);
            copied += 1;
        }
        copied
    }

    /// Writes every dirty page to its file, in (file, offset) order, neighbours coalesced
    /// into one write of up to `WRITE_PAGES_MAX` pages, at most `max_outstanding_writes`
    /// in flight, then flushes the files (fdatasync). Before the first write, the WAL rule:
    /// the log is made durable up to the highest page LSN (an error writes nothing). A page
    /// is clean again only if it did not change while being written.
    pub fn write_dirty(&self, options: DirtyWriteOptions) -> Result<DirtyWriteFigures, BufferError> {
        let max_outstanding = options.max_outstanding_writes.clamp(1, WRITE_OUTSTANDING_MAX);
        let pages = self.dirty_pages();
        let mut figures = DirtyWriteFigures { max_outstanding_writes: max_outstanding, ..Default::default() };
        if pages.is_empty() {
            return Ok(figures);
        }
        let max_lsn = pages.iter().map(|&(_, lsn)| lsn).max().unwrap_or(Lsn::ZERO);
        if max_lsn > Lsn::ZERO {
            let rule = self.wal_rule_cell().read().clone();
            let Some(rule) = rule else {
                let (key, lsn) = pages.iter().copied().max_by_key(|&(_, lsn)| lsn).unwrap_or((PageKey::new(0, 0), max_lsn));
                return Err(BufferError::NoLog { file_index: key.file_index, page: key.page_number, lsn: lsn.0 });
            };
            rule.flush_log_to(max_lsn).map_err(|reason| BufferError::LogFlush { lsn: max_lsn.0, reason })?;
            figures.log_flushed_to = max_lsn;
        }

        // The files, opened for writing, in file id order.
        let mut file_ids: Vec<u32> = pages.iter().map(|(k, _)| k.file_index).collect();
        file_ids.dedup();
        let mut set = FileSet::new();
        let mut local_of: HashMap<u32, u32> = HashMap::new();
        for &id in &file_ids {
            let path = self.file_path(id).ok_or_else(|| BufferError::File { path: Default::default(), what: format!("dirty pages of unknown file id {id}") })?;
            // O_NOFOLLOW: never write through a link planted at a data file's name.
            let local = set.add_with_flags(&path, OpenMode { direct: false, write: true }, libc::O_NOFOLLOW, Arc::new(flashscan_io::FileStats::default()))?;
            local_of.insert(id, local);
        }
        let files = Arc::new(set);
        let config = EngineConfig::for_depth(max_outstanding, WRITE_PAGES_MAX as usize * FRAME_SIZE_BYTES);
        let engine = open_engine(options.engine_kind, files.clone(), config, &mut |_| {})?;
        let mut queue: RequestQueue<Vec<(PageKey, u64)>> = RequestQueue::new(engine);

        let mut next = 0usize;
        let result = (|| -> Result<(), BufferError> {
            loop {
                while next < pages.len() && queue.has_free_slot() {
                    // A run of neighbouring pages of one file.
                    let first = pages[next].0;
                    let mut run = 1usize;
                    while next + run < pages.len() && run < WRITE_PAGES_MAX as usize {
                        let k = pages[next + run].0;
                        if k.file_index != first.file_index || k.page_number != first.page_number + run as u64 {
                            break;
                        }
                        run += 1;
                    }
                    let keys: Vec<PageKey> = pages[next..next + run].iter().map(|(k, _)| *k).collect();
                    next += run;
                    // Pin the run first (dirty pages are never evicted, so each is resident).
                    let mut guards = Vec::with_capacity(run);
                    for key in &keys {
                        let guard = self.get_resident(*key).ok_or_else(|| BufferError::File {
                            path: self.file_path(key.file_index).unwrap_or_default(),
                            what: format!("dirty page {} left the pool unwritten", key.page_number),
                        })?;
                        guards.push(guard);
                    }
                    let local = local_of[&first.file_index];
                    let length = (run * FRAME_SIZE_BYTES) as u32;
                    queue.queue_write(local, first.offset_bytes(), length, |slot| {
                        let mut written = Vec::with_capacity(guards.len());
                        for (i, guard) in guards.iter().enumerate() {
                            // The shared latch holds the bytes still while they are copied.
                            let epoch = self.frame_meta(guard.frame()).dirty_epoch.load(Ordering::Acquire);
                            slot[i * FRAME_SIZE_BYTES..(i + 1) * FRAME_SIZE_BYTES].copy_from_slice(guard.data());
                            written.push((guard.key(), epoch));
                        }
                        written
                    })?;
                    drop(guards);
                    figures.writes_count += 1;
                }
                let done = queue.complete_next(|c| (c.tag, c.completion, c.result.map(drop)))?;
                let Some((written, completion, result)) = done else { return Ok(()) };
                let path = files.get(completion.file_index).path.clone();
                result.map_err(|source| BufferError::Write { path, page: completion.offset_bytes / FRAME_SIZE_BYTES as u64, source })?;
                figures.bytes_written += completion.length_bytes as u64;
                for (key, epoch) in written {
                    figures.pages_written += 1;
                    if !self.mark_clean_if_unchanged(key, epoch) {
                        figures.pages_still_dirty += 1;
                    }
                }
            }
        })();
        if result.is_err() {
            queue.drain();
        }
        result?;
        for f in files.iter() {
            f.file.sync_data().map_err(|e| BufferError::File { path: f.path.clone(), what: format!("flushing written pages (fdatasync): {e}") })?;
        }
        for &id in &file_ids {
            self.note_written(id);
        }
        Ok(figures)
    }

    /// Clean again, if the page is still the version written (same epoch).
    fn mark_clean_if_unchanged(&self, key: PageKey, epoch: u64) -> bool {
        let Some(guard) = self.get_resident(key) else { return false };
        // Shared latch held: no writer is changing the page now.
        let meta = self.frame_meta(guard.frame());
        if meta.dirty_epoch.load(Ordering::Acquire) != epoch {
            return false;
        }
        let mut set = self.dirty_set();
        if meta.dirty.swap(false, Ordering::AcqRel) {
            set.remove(&key);
            self.dirty_count_cell().fetch_sub(1, Ordering::AcqRel);
        }
        true
    }
}

impl BufferPool {
    /// Drops every page of `file_id`, dirty ones included — their changes are thrown away
    /// (a dropped table, a test). Fails, after dropping what it can, if a page is pinned.
    /// Returns the pages dropped.
    pub fn discard_file(&self, file_id: u32) -> Result<u32, BufferError> {
        let mut dropped = 0;
        let mut pinned_count = 0;
        for frame in 0..self.frame_count() {
            let meta = self.frame_meta(frame);
            if meta.state() != crate::frame::STATE_VALID || meta.key().file_index != file_id {
                continue;
            }
            if !meta.try_claim() {
                pinned_count += 1;
                continue;
            }
            // Claimed (we hold the only pin): make it clean, then evict it as the clock would.
            let key = meta.key();
            if key.file_index != file_id || meta.state() != crate::frame::STATE_VALID {
                meta.unpin();
                continue;
            }
            {
                let mut set = self.dirty_set();
                if meta.dirty.swap(false, Ordering::AcqRel) {
                    set.remove(&key);
                    self.dirty_count_cell().fetch_sub(1, Ordering::AcqRel);
                }
            }
            meta.unpin();
            if self.try_claim_frame(frame, false) {
                self.release_claimed(frame);
                dropped += 1;
            } else {
                pinned_count += 1;
            }
        }
        if pinned_count > 0 {
            return Err(BufferError::PinnedOnClear { pinned_count });
        }
        Ok(dropped)
    }
}
