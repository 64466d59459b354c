//! The parallel scan: `threads` workers, each with its own engine and read-ahead reader,
//! taking chunks from one shared list (a few at a time, so neighbouring reads stay with one
//! worker and all workers finish together, even when partitions are few or uneven). Each
//! chunk's pages are verified and decoded into one Arrow batch of the projected columns,
//! which goes to the worker's sink (a query kernel, or anything else). Sinks are returned
//! to the caller to merge: no locks on the hot path.
//!
//! The same machinery reads raw (no decode) for the top-speed check and the warm-up.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::time::Instant;

use arrow::record_batch::RecordBatch;
use flashscan_io::{open_engine, EngineConfig, EngineKind, FileSet, FileStats, FileStatsSnapshot, OpenMode};
use flashscan_measure::CpuTime;

use crate::chunk::{Chunk, ChunkCursor};
use crate::depth::{DepthFigures, DepthPolicy, ScanDepth};
use crate::error::ExecError;
use crate::heap_pages::HeapPageSink;
use crate::limits::{SCAN_QUEUE_DEPTH_MAX, SCAN_THREADS_MAX};
use crate::read_ahead::{ReadAhead, ReadAheadStats};
use crate::segments::SegmentSink;
use crate::source::{ChunkDecoder, ReadPlan, ScanFilter, SkipFigures, TableSource};
use crate::waits::WaitTimes;

/// Where decoded batches go. One per worker; the caller merges them after the scan.
pub trait BatchSink: Send {
    /// Takes one batch. `Err(ExecError::Stopped)` ends the scan early and successfully
    /// (the consumer needs no more rows); any other error fails it.
    fn consume(&mut self, batch: &RecordBatch) -> Result<(), ExecError>;

    /// A kernel that decodes column store segments itself, a vector at a time, returns
    /// itself here (see `segments.rs`); the decoder then hands it verified segments
    /// instead of batches. None (the default): batches only.
    fn segment_sink(&mut self) -> Option<&mut dyn SegmentSink> {
        None
    }

    /// A kernel that reads heap pages in place returns itself here (see `heap_pages.rs`);
    /// the heap decoder then hands it verified pages instead of batches. None (the
    /// default): batches only.
    fn heap_page_sink(&mut self) -> Option<&mut dyn HeapPageSink> {
        None
    }
}

/// How to read: the knobs the user turns.
#[derive(Debug, Clone, Copy)]
pub struct ReadConfig {
    pub io_size_bytes: usize,
    pub queue_depth: u32,
    pub thread_count: u32,
    /// O_DIRECT (from the device) or buffered (through the page cache).
    pub direct: bool,
    pub engine_kind: EngineKind,
}

/// What a worker did, in its own time.
#[derive(Debug, Default, Clone, Copy)]
pub struct WorkerStats {
    pub pages_read: u64,
    /// Live rows decoded (or counted) and handed on.
    pub rows_scanned: u64,
    /// Rows read but skipped: a DELETE removed them (the table's deleted rows file).
    pub deleted_rows_skipped: u64,
    pub chunks_read: u64,
    pub read: ReadAheadStats,
    pub decode_ns: u64,
    pub query_ns: u64,
    /// From the worker's start to its last chunk.
    pub busy_ns: u64,
}

/// Everything measured during one pass over the files.
#[derive(Debug, Clone)]
pub struct ScanStats {
    pub elapsed_ns: u64,
    pub cpu: CpuTime,
    pub workers: Vec<WorkerStats>,
    /// Per file, the counters of this pass.
    pub files: Vec<(PathBuf, FileStatsSnapshot)>,
    pub engine_name: &'static str,
    /// Effective read size (whole pages).
    pub io_size_bytes: usize,
    pub notices: Vec<String>,
    /// What the plan skipped without reading (column store segment elimination).
    pub skipped: SkipFigures,
    /// Reads in flight per worker: fixed, or what the depth search found.
    pub depth: DepthFigures,
}

impl ScanStats {
    pub fn total(&self) -> WorkerStats {
        let mut t = WorkerStats::default();
        for w in &self.workers {
            t.pages_read += w.pages_read;
            t.rows_scanned += w.rows_scanned;
            t.deleted_rows_skipped += w.deleted_rows_skipped;
            t.chunks_read += w.chunks_read;
            t.read.add(&w.read);
            t.decode_ns += w.decode_ns;
            t.query_ns += w.query_ns;
            t.busy_ns += w.busy_ns;
        }
        t
    }

    pub fn bytes_read(&self) -> u64 {
        self.total().read.bytes_read
    }

    pub fn elapsed_s(&self) -> f64 {
        self.elapsed_ns as f64 / 1e9
    }

    /// Decimal megabytes (10^6 bytes) per second, as devices are rated.
    pub fn mb_per_s(&self) -> f64 {
        per_second(self.bytes_read() as f64 / 1e6, self.elapsed_s())
    }

    pub fn waits(&self) -> WaitTimes {
        let mut w = WaitTimes::default();
        for s in &self.workers {
            let io = s.read.io_wait_ns as f64 / 1e9;
            let decode = s.decode_ns as f64 / 1e9;
            let query = s.query_ns as f64 / 1e9;
            let busy = s.busy_ns as f64 / 1e9;
            w.io_s += io;
            w.decode_s += decode;
            w.query_s += query;
            w.other_s += (busy - io - decode - query).max(0.0);
            w.worker_s += (self.elapsed_s() - busy).max(0.0);
        }
        w
    }
}

pub fn per_second(amount: f64, seconds: f64) -> f64 {
    if seconds > 0.0 { amount / seconds } else { 0.0 }
}

/// Scans `source`, decoding the `projection` columns into batches handed to one sink per
/// worker (made by `make_sink(worker_index)`); `filter` lets the source skip data no row
/// of the query can come from. Returns the sinks and what was measured. The entry point
/// for anything that wants batches: the built-in queries, and the SQL layer's provider.
pub fn scan_batches<S: BatchSink>(
    source: &dyn TableSource,
    projection: &[usize],
    filter: &ScanFilter,
    config: &ReadConfig,
    make_sink: &(dyn Fn(u32) -> Result<S, ExecError> + Sync),
) -> Result<(Vec<S>, ScanStats), ExecError> {
    let plan = source.plan_reads(projection, filter, config.io_size_bytes)?;
    scan_plan(source, &plan, projection, config, make_sink)
}

/// Like `scan_batches`, for a plan made beforehand (so raw passes read the same chunks).
pub fn scan_plan<S: BatchSink>(
    source: &dyn TableSource,
    plan: &ReadPlan,
    projection: &[usize],
    config: &ReadConfig,
    make_sink: &(dyn Fn(u32) -> Result<S, ExecError> + Sync),
) -> Result<(Vec<S>, ScanStats), ExecError> {
    scan_plan_with_depth(source, plan, projection, config, DepthPolicy::Fixed(config.queue_depth), make_sink)
}

/// Like `scan_plan`, with the reads in flight per worker chosen by `depth` (which
/// replaces `config.queue_depth`): a fixed number, or found while scanning (`depth.rs`).
pub fn scan_plan_with_depth<S: BatchSink>(
    source: &dyn TableSource,
    plan: &ReadPlan,
    projection: &[usize],
    config: &ReadConfig,
    depth: DepthPolicy,
    make_sink: &(dyn Fn(u32) -> Result<S, ExecError> + Sync),
) -> Result<(Vec<S>, ScanStats), ExecError> {
    let make_work = |worker: u32| -> Result<DecodeWork<S>, ExecError> {
        Ok(DecodeWork { decoder: source.new_chunk_decoder(projection, plan)?, sink: make_sink(worker)? })
    };
    let (works, stats) = run_workers(plan, config, depth, &make_work)?;
    Ok((works.into_iter().map(|w| w.sink).collect(), stats))
}

/// Reads every chunk of `plan` without decoding: the device's (or the page cache's) rate
/// for exactly the scan's reads, I/O size, depth and threads.
pub fn read_raw(plan: &ReadPlan, config: &ReadConfig) -> Result<ScanStats, ExecError> {
    read_raw_with_depth(plan, config, DepthPolicy::Fixed(config.queue_depth))
}

/// Like `read_raw`, with the reads in flight per worker chosen by `depth`.
pub fn read_raw_with_depth(plan: &ReadPlan, config: &ReadConfig, depth: DepthPolicy) -> Result<ScanStats, ExecError> {
    let make_work = |_worker: u32| -> Result<RawWork, ExecError> { Ok(RawWork) };
    let (_, stats) = run_workers(plan, config, depth, &make_work)?;
    Ok(stats)
}

/// What a worker does with each chunk read.
trait ChunkWork: Send {
    fn on_chunk(&mut self, chunk: &Chunk, bytes: &[u8], path: &std::path::Path, stats: &mut WorkerStats) -> Result<(), ExecError>;
    /// After the worker's last chunk.
    fn finish(&mut self) -> Result<(), ExecError> {
        Ok(())
    }
}

struct RawWork;

impl ChunkWork for RawWork {
    fn on_chunk(&mut self, chunk: &Chunk, _bytes: &[u8], _path: &std::path::Path, stats: &mut WorkerStats) -> Result<(), ExecError> {
        stats.pages_read += chunk.page_count as u64;
        Ok(())
    }
}

struct DecodeWork<S> {
    decoder: Box<dyn ChunkDecoder>,
    sink: S,
}

/// A chunk a kernel took (segments or heap pages in place): its rows and pages, and its time
/// split into decode (everything since `decode_start` but the kernel's own) and query.
fn count_kernel_chunk(stats: &mut WorkerStats, chunk: &Chunk, rows: u64, decode_start: Instant, query_ns: u64) {
    let total_ns = decode_start.elapsed().as_nanos() as u64;
    stats.rows_scanned += rows;
    stats.decode_ns += total_ns.saturating_sub(query_ns);
    stats.query_ns += query_ns;
    stats.pages_read += chunk.page_count as u64;
}

impl<S: BatchSink> ChunkWork for DecodeWork<S> {
    fn on_chunk(&mut self, chunk: &Chunk, bytes: &[u8], path: &std::path::Path, stats: &mut WorkerStats) -> Result<(), ExecError> {
        let decoded = self.decode_chunk(chunk, bytes, path, stats);
        // Taken either way (the count starts over), counted with the chunk's rows: a chunk
        // that failed or stopped the scan counts neither.
        let skipped = self.decoder.take_deleted_rows_skipped();
        if decoded.is_ok() {
            stats.deleted_rows_skipped += skipped;
        }
        decoded
    }

    fn finish(&mut self) -> Result<(), ExecError> {
        self.decoder.finish()
    }
}

impl<S: BatchSink> DecodeWork<S> {
    fn decode_chunk(&mut self, chunk: &Chunk, bytes: &[u8], path: &std::path::Path, stats: &mut WorkerStats) -> Result<(), ExecError> {
        let decode_start = Instant::now();
        if let Some(segment_sink) = self.sink.segment_sink() {
            let mut timed = TimedSegmentSink { inner: segment_sink, query_ns: 0 };
            if let Some(rows) = self.decoder.decode_chunk_segments(chunk, bytes, path, &mut timed) {
                // Decode = gathering and verifying segments (checksums, zstd); query = the
                // kernel's fused loop, which unpacks and aggregates in one pass.
                count_kernel_chunk(stats, chunk, rows?, decode_start, timed.query_ns);
                return Ok(());
            }
        }
        if let Some(page_sink) = self.sink.heap_page_sink() {
            let mut timed = TimedHeapPageSink { inner: page_sink, query_ns: 0 };
            if let Some(rows) = self.decoder.decode_chunk_pages(chunk, bytes, path, &mut timed) {
                // Decode = verifying pages (checksums, slots, bounds) and decoding the pages
                // the kernel did not take; query = the kernel's reads of the pages in place.
                count_kernel_chunk(stats, chunk, rows?, decode_start, timed.query_ns);
                return Ok(());
            }
        }
        let mut query_ns = 0u64;
        let sink = &mut self.sink;
        let mut emit = |batch: &RecordBatch| -> Result<(), ExecError> {
            let query_start = Instant::now();
            let consumed = sink.consume(batch);
            query_ns += query_start.elapsed().as_nanos() as u64;
            consumed
        };
        let rows = self.decoder.decode_chunk(chunk, bytes, path, &mut emit)?;
        let total_ns = decode_start.elapsed().as_nanos() as u64;
        stats.rows_scanned += rows;
        stats.decode_ns += total_ns.saturating_sub(query_ns);
        stats.query_ns += query_ns;
        stats.pages_read += chunk.page_count as u64;
        Ok(())
    }
}

/// Times a segment sink's share of a chunk: its fused decode-and-aggregate loop.
struct TimedSegmentSink<'a> {
    inner: &'a mut dyn SegmentSink,
    query_ns: u64,
}

impl SegmentSink for TimedSegmentSink<'_> {
    fn consume_segments(&mut self, group: &crate::segments::RowGroupSegments<'_>) -> Result<(), ExecError> {
        let start = Instant::now();
        let consumed = self.inner.consume_segments(group);
        self.query_ns += start.elapsed().as_nanos() as u64;
        consumed
    }
}

/// Times a heap page sink's share of a chunk: its reads of the pages in place.
struct TimedHeapPageSink<'a> {
    inner: &'a mut dyn HeapPageSink,
    query_ns: u64,
}

impl HeapPageSink for TimedHeapPageSink<'_> {
    fn consume_page(&mut self, page: &flashscan_storage::HeapPageView<'_>) -> Result<bool, ExecError> {
        let start = Instant::now();
        let consumed = self.inner.consume_page(page);
        self.query_ns += start.elapsed().as_nanos() as u64;
        consumed
    }

    fn consume_batch(&mut self, batch: &RecordBatch) -> Result<(), ExecError> {
        let start = Instant::now();
        let consumed = self.inner.consume_batch(batch);
        self.query_ns += start.elapsed().as_nanos() as u64;
        consumed
    }
}

fn validate(config: &ReadConfig, depth: DepthPolicy) -> Result<(), ExecError> {
    if config.thread_count == 0 || config.thread_count > SCAN_THREADS_MAX {
        return Err(ExecError::InvalidOption(format!("threads {} out of range 1..={SCAN_THREADS_MAX}", config.thread_count)));
    }
    for d in [depth.start(), depth.slots()] {
        if d == 0 || d > SCAN_QUEUE_DEPTH_MAX {
            return Err(ExecError::InvalidOption(format!("depth {d} out of range 1..={SCAN_QUEUE_DEPTH_MAX}")));
        }
    }
    if depth.start() > depth.slots() {
        return Err(ExecError::InvalidOption(format!("depth start {} above its maximum {}", depth.start(), depth.slots())));
    }
    Ok(())
}

fn run_workers<W: ChunkWork>(
    plan: &ReadPlan,
    config: &ReadConfig,
    depth: DepthPolicy,
    make_work: &(dyn Fn(u32) -> Result<W, ExecError> + Sync),
) -> Result<(Vec<W>, ScanStats), ExecError> {
    validate(config, depth)?;
    let paths = &plan.paths;
    let chunks = &plan.chunks;
    debug_assert!(chunks.iter().all(|c| (c.file_index as usize) < paths.len()));
    // Small floor so an empty plan still opens a valid engine.
    let slot_size_bytes = chunks.iter().map(|c| c.length_bytes as usize).max().unwrap_or(4096);
    // Counted in the process-wide per-file counters too: a server samples them every second.
    let file_stats: Vec<Arc<FileStats>> = paths.iter().map(|p| Arc::new(FileStats::counted_in_process(p))).collect();

    // Every worker opens every file and its own engine, on its own thread: the engine can
    // then take io_uring's single-issuer mode (completions handled only when the thread asks,
    // no interrupts), and its arena is first touched by the thread that reads into it. The
    // clock starts when all workers are ready, so setup is not counted as scan time.
    let mode = OpenMode { direct: config.direct, write: false };
    // No more slots than chunks to read: a small table (or a unit of a few row groups)
    // would otherwise allocate and fault in (io_uring pins registered buffers) a whole
    // queue of buffers it never fills, once per scan unit.
    let depth = depth.fitted(chunks.len(), slot_size_bytes);
    let engine_config = EngineConfig::for_depth(depth.slots(), slot_size_bytes).on_one_thread();
    let scan_depth = ScanDepth::new(depth, config.thread_count);
    let notices = Mutex::new(Vec::<String>::new());
    let cursor = ChunkCursor::new(chunks, &plan.unit_ends);
    let abort = AtomicBool::new(false);
    let ready = Barrier::new(config.thread_count as usize + 1);
    let engine_name = Mutex::new("none");
    let started_cell = std::sync::OnceLock::<Instant>::new();
    let cpu_before = std::sync::OnceLock::<CpuTime>::new();
    // The clock starts once every worker is set up (`all_ready` returns).
    let start_clocks = || {
        cpu_before.get_or_init(CpuTime::now);
        started_cell.get_or_init(Instant::now);
    };
    let run_worker = |worker: u32, all_ready: &dyn Fn()| -> Result<(W, WorkerStats), ExecError> {
        let setup = open_worker(worker, paths, &file_stats, mode, config.engine_kind, engine_config, &notices, make_work);
        if setup.is_err() {
            abort.store(true, Ordering::Relaxed);
        }
        all_ready();
        let (mut reader, mut work) = setup?;
        if let Ok(mut name) = engine_name.lock() {
            *name = reader.engine_name();
        }
        let started = *started_cell.get_or_init(Instant::now);
        let mut stats = WorkerStats::default();
        let mut feed = cursor.worker_feed();
        // A failed worker stops the others at their next chunk.
        let mut next = || if abort.load(Ordering::Relaxed) { None } else { feed() };
        let mut consume = |chunk: &Chunk, bytes: &[u8]| {
            stats.chunks_read += 1;
            work.on_chunk(chunk, bytes, &paths[chunk.file_index as usize], &mut stats)
        };
        // A worker the others cut off (`abort`: a LIMIT was met or a worker failed) may hold
        // an incomplete unit; its completeness check would only hide the cause, which the
        // worker that set `abort` reports.
        let result = reader
            .run_with_depth(&mut next, &mut consume, Some(&scan_depth))
            .and_then(|()| if abort.load(Ordering::Relaxed) { Ok(()) } else { work.finish() });
        stats.read = reader.stats();
        stats.busy_ns = started.elapsed().as_nanos() as u64;
        match result {
            Ok(()) => Ok((work, stats)),
            // The consumer has all it needs (a LIMIT): control flow, not a
            // failure. The other workers stop at their next chunk; the scan
            // returns what was read so far, with its figures.
            Err(ExecError::Stopped) => {
                abort.store(true, Ordering::Relaxed);
                Ok((work, stats))
            }
            Err(e) => {
                abort.store(true, Ordering::Relaxed);
                Err(e)
            }
        }
    };
    let outcomes: Vec<Result<(W, WorkerStats), ExecError>> = if config.thread_count == 1 {
        // One worker (each SQL scan unit): on the calling thread. Starting a thread per
        // unit cost its creation and the allocator's per-thread setup on fresh memory
        // (perf of small TPC-H queries, issue 13); the engine is still set up and used
        // on one thread.
        vec![run_worker(0, &start_clocks)]
    } else {
        std::thread::scope(|scope| {
            let handles: Vec<_> = (0..config.thread_count)
                .map(|worker| {
                    let (run_worker, ready) = (&run_worker, &ready);
                    scope.spawn(move || run_worker(worker, &|| {
                        ready.wait();
                    }))
                })
                .collect();
            ready.wait();
            start_clocks();
            handles
                .into_iter()
                .map(|h| match h.join() {
                    Ok(r) => r,
                    Err(panic) => Err(ExecError::WorkerPanic(panic_message(&panic))),
                })
                .collect()
        })
    };
    let started = *started_cell.get_or_init(Instant::now);
    let elapsed_ns = started.elapsed().as_nanos() as u64;
    let cpu = CpuTime::now().since(cpu_before.get_or_init(CpuTime::now));

    let mut done_works = Vec::with_capacity(outcomes.len());
    let mut workers = Vec::with_capacity(outcomes.len());
    for outcome in outcomes {
        let (work, stats) = outcome?;
        done_works.push(work);
        workers.push(stats);
    }
    let files = paths.iter().cloned().zip(file_stats.iter().map(|s| s.snapshot())).collect();
    let notices = notices.into_inner().unwrap_or_default();
    let engine_name = engine_name.into_inner().unwrap_or("none");
    let depth = scan_depth.figures();
    let stats = ScanStats { elapsed_ns, cpu, workers, files, engine_name, io_size_bytes: slot_size_bytes, notices, skipped: plan.skipped, depth };
    Ok((done_works, stats))
}

/// A worker's files, engine and work, opened on the worker's thread.
#[allow(clippy::too_many_arguments)]
fn open_worker<W: ChunkWork>(
    worker: u32,
    paths: &[PathBuf],
    file_stats: &[Arc<FileStats>],
    mode: OpenMode,
    engine_kind: EngineKind,
    engine_config: EngineConfig,
    notices: &Mutex<Vec<String>>,
    make_work: &(dyn Fn(u32) -> Result<W, ExecError> + Sync),
) -> Result<(ReadAhead, W), ExecError> {
    let mut files = FileSet::new();
    for (path, stats) in paths.iter().zip(file_stats) {
        // O_NOFOLLOW: a link at a data file's name is an error, not a read of elsewhere.
        files.add_with_flags(path, mode, libc::O_NOFOLLOW, stats.clone())?;
    }
    let mut notice = |n: &str| {
        if let Ok(mut v) = notices.lock() {
            if !v.iter().any(|seen| seen == n) {
                v.push(n.to_string());
            }
        }
    };
    let engine = open_engine(engine_kind, Arc::new(files), engine_config, &mut notice)?;
    Ok((ReadAhead::new(engine)?, make_work(worker)?))
}

fn panic_message(panic: &Box<dyn std::any::Any + Send>) -> String {
    if let Some(s) = panic.downcast_ref::<&str>() {
        s.to_string()
    } else if let Some(s) = panic.downcast_ref::<String>() {
        s.clone()
    } else {
        "unknown panic".to_string()
    }
}
