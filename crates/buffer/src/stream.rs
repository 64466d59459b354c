//! The streaming path: large read-ahead for scans, SQL Server's read-ahead and DuckDB's
//! buffer manager in one idea. A scan keeps `depth` extents of up to `io_size` in flight
//! into a ring of extent buffers of its own (the queue's slots, allocated once per scan
//! worker), so a scan of any size passes through `depth x io_size` bytes of memory and
//! never flushes the pool's warm set of 8 KB frames. Extents are any length (heap runs cut
//! into I/O-sized pieces, variable-size column store segments), handed to the consumer in
//! completion order.
//!
//! What makes it part of the pool and not a side door: before an extent reaches the
//! consumer, every page of it that is dirty in the pool is copied over the file's bytes
//! (`BufferPool::overlay_dirty`), so a scan sees changes not yet written. When nothing is
//! dirty that costs one atomic load per extent.

use std::path::PathBuf;
use std::sync::Arc;

use flashscan_io::{open_engine, EngineConfig, EngineKind, FileSet, FileStats, IoEngine, IoError, OpenMode, RequestQueue};

use crate::error::BufferError;
use crate::pool::BufferPool;

/// One streaming read: `length_bytes` at `offset_bytes` of the stream's file `file_index`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Extent {
    pub file_index: u32,
    pub offset_bytes: u64,
    pub length_bytes: u32,
}

/// What one stream did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct StreamStats {
    pub reads_count: u64,
    pub bytes_read: u64,
    /// Time blocked waiting for a completion while nothing was ready to consume.
    pub io_wait_ns: u64,
    /// Dirty pages of the pool copied over file bytes.
    pub dirty_pages_overlaid: u64,
}

impl StreamStats {
    pub fn add(&mut self, other: &StreamStats) {
        self.reads_count += other.reads_count;
        self.bytes_read += other.bytes_read;
        self.io_wait_ns += other.io_wait_ns;
        self.dirty_pages_overlaid += other.dirty_pages_overlaid;
    }
}

/// How a stream opens its files and engine.
#[derive(Debug, Clone, Copy)]
pub struct StreamConfig {
    pub depth: u32,
    /// Largest extent the stream will be given.
    pub io_size_bytes: usize,
    /// O_DIRECT (from the device) or buffered (through the page cache).
    pub direct: bool,
    pub engine_kind: EngineKind,
    /// The stream never leaves the thread that opened it (io_uring's single-issuer mode).
    pub single_thread: bool,
}

pub struct ScanStream<'p, T> {
    pool: &'p BufferPool,
    queue: RequestQueue<T>,
    /// Pool file id of each of the engine's files.
    file_ids: Vec<u32>,
    dirty_pages_overlaid: u64,
}

impl<'p, T> ScanStream<'p, T> {
    /// A stream over an idle engine (whose slots are the extent ring); registers its files.
    pub fn new(pool: &'p BufferPool, engine: Box<dyn IoEngine>) -> Result<ScanStream<'p, T>, BufferError> {
        let file_ids = engine.files().iter().map(|f| pool.register_file(&f.path)).collect::<Result<Vec<u32>, BufferError>>()?;
        Ok(ScanStream { pool, queue: RequestQueue::new(engine), file_ids, dirty_pages_overlaid: 0 })
    }

    /// Opens `paths` (sharing `stats` per file if given) and an engine, then `new`.
    pub fn open(pool: &'p BufferPool, paths: &[PathBuf], stats: Option<&[Arc<FileStats>]>, config: StreamConfig, notice: &mut dyn FnMut(&str)) -> Result<ScanStream<'p, T>, BufferError> {
        let mode = OpenMode { direct: config.direct, write: false };
        let mut files = FileSet::new();
        for (i, path) in paths.iter().enumerate() {
            let s = stats.and_then(|s| s.get(i).cloned()).unwrap_or_default();
            // O_NOFOLLOW: a link planted at a data file's name inside the database is an
            // error, never a way to read a file elsewhere (the catalog's paths are confined).
            files.add_with_flags(path, mode, libc::O_NOFOLLOW, s)?;
        }
        let mut engine_config = EngineConfig::for_depth(config.depth, config.io_size_bytes.max(4096));
        if config.single_thread {
            engine_config = engine_config.on_one_thread();
        }
        let engine = open_engine(config.engine_kind, Arc::new(files), engine_config, notice)?;
        Self::new(pool, engine)
    }

    pub fn engine_name(&self) -> &'static str {
        self.queue.engine_name()
    }

    pub fn files(&self) -> &FileSet {
        self.queue.files()
    }

    pub fn slot_size_bytes(&self) -> usize {
        self.queue.slot_size_bytes()
    }

    pub fn stats(&self) -> StreamStats {
        let q = self.queue.stats();
        StreamStats { reads_count: q.reads_count, bytes_read: q.bytes_count, io_wait_ns: q.io_wait_ns, dirty_pages_overlaid: self.dirty_pages_overlaid }
    }

    /// Reads every extent `next` yields and hands each to `consume` with its tag and its
    /// bytes (the pool's version of any dirty page in it). On any error — a failed or short
    /// read, or the consumer's — reads still in flight are drained before returning.
    pub fn run<E: From<IoError> + From<BufferError>>(
        &mut self,
        next: &mut dyn FnMut() -> Option<(Extent, T)>,
        consume: &mut dyn FnMut(T, &[u8]) -> Result<(), E>,
    ) -> Result<(), E> {
        self.run_windowed(next, consume, &|| u32::MAX)
    }

    /// Like `run`, keeping at most `window()` reads in flight (asked before every refill,
    /// never more than the stream's slots): a scan that chooses its depth while it reads
    /// (flashscan_exec's `ScanDepth`) opens the engine with the most slots it may use and
    /// widens the window as it learns what the device needs.
    pub fn run_windowed<E: From<IoError> + From<BufferError>>(
        &mut self,
        next: &mut dyn FnMut() -> Option<(Extent, T)>,
        consume: &mut dyn FnMut(T, &[u8]) -> Result<(), E>,
        window: &dyn Fn() -> u32,
    ) -> Result<(), E> {
        let mut activity = crate::stream_activity::ActiveStream::start();
        let result = self.run_inner(next, consume, window, &mut activity);
        if result.is_err() {
            self.queue.drain();
        }
        result
    }

    fn run_inner<E: From<IoError> + From<BufferError>>(
        &mut self,
        next: &mut dyn FnMut() -> Option<(Extent, T)>,
        consume: &mut dyn FnMut(T, &[u8]) -> Result<(), E>,
        window: &dyn Fn() -> u32,
        activity: &mut crate::stream_activity::ActiveStream,
    ) -> Result<(), E> {
        let mut exhausted = false;
        loop {
            // At least one read in flight, whatever the window says, so the stream moves.
            let in_flight_max = window().max(1);
            while !exhausted && self.queue.has_free_slot() && self.queue.outstanding() < in_flight_max {
                let Some((extent, tag)) = next() else {
                    exhausted = true;
                    break;
                };
                debug_assert!((extent.file_index as usize) < self.file_ids.len());
                self.queue.queue_read(extent.file_index, extent.offset_bytes, extent.length_bytes, tag)?;
                activity.read_queued();
            }
            let pool = self.pool;
            let file_ids = &self.file_ids;
            let overlaid = &mut self.dirty_pages_overlaid;
            let done = self.queue.complete_next(|c| -> Result<(), E> {
                activity.read_done(c.completion.length_bytes as u64);
                let bytes = c.result?;
                let file_id = file_ids[c.completion.file_index as usize];
                *overlaid += pool.overlay_dirty(file_id, c.completion.offset_bytes, bytes) as u64;
                consume(c.tag, bytes)
            })?;
            match done {
                Some(consumed) => consumed?,
                None => {
                    debug_assert!(exhausted);
                    return Ok(());
                }
            }
        }
    }
}
