//! The runner: one OS thread per (target, thread), each with its own engine (one ring per
//! thread, as fio does), keeping `queue_depth` I/Os in flight: reap at least one, refill
//! every free slot, submit the batch in the same system call as the next wait.
//!
//! The hot loop allocates nothing: slots, the completion buffer and the histograms exist
//! before the first I/O. Time is read once per reaped batch, not per I/O; the engine
//! stamps each I/O's own latency. Warm-up I/Os run but are not counted, and CPU time is
//! read at the end of warm-up so it is excluded too.
//!
//! With a status interval each thread also counts into an interval accumulator and, when its
//! clock passes an interval's end, sends that interval's deltas (counts, bytes, latency
//! histograms, CPU, I/Os in flight) to the main thread, which adds the threads' parts and
//! hands each finished interval to `on_interval` in order. Every counted I/O lands in
//! exactly one interval, so the intervals add up to the totals.

use std::os::unix::fs::MetadataExt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};

use flashscan_io::{open_engine, EngineConfig, EngineKind, FileSet, FileStats, IoCompletion, IoEngine, IoError, IoOp, IoRequest, OpenMode};
use serde::{Deserialize, Serialize};

use crate::cpu::{self, CpuTimes};
use crate::error::WorkbenchError;
use flashscan_measure::histogram::LatencyHistogram;
use crate::rng::FastRng;
use crate::spec::{JobSpec, Pattern};
use crate::test_file::PreparedTarget;

/// What a thread, an interval or a group of threads counted: I/Os, bytes and latencies by
/// direction. One struct for the run's totals and the intervals, counted the same way.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct IoCounts {
    pub reads_count: u64,
    pub writes_count: u64,
    pub bytes_read: u64,
    pub bytes_written: u64,
    pub read_latency: LatencyHistogram,
    pub write_latency: LatencyHistogram,
}

impl IoCounts {
    pub fn new() -> IoCounts {
        IoCounts { reads_count: 0, writes_count: 0, bytes_read: 0, bytes_written: 0, read_latency: LatencyHistogram::new(), write_latency: LatencyHistogram::new() }
    }

    /// Counts one completed I/O.
    pub fn record(&mut self, op: IoOp, length_bytes: u64, latency_ns: u64) {
        match op {
            IoOp::Read => {
                self.reads_count += 1;
                self.bytes_read += length_bytes;
                self.read_latency.record(latency_ns);
            }
            IoOp::Write => {
                self.writes_count += 1;
                self.bytes_written += length_bytes;
                self.write_latency.record(latency_ns);
            }
        }
    }

    /// Adds another thread's or part's counts.
    pub fn merge(&mut self, other: &IoCounts) {
        self.reads_count += other.reads_count;
        self.writes_count += other.writes_count;
        self.bytes_read += other.bytes_read;
        self.bytes_written += other.bytes_written;
        self.read_latency.merge(&other.read_latency);
        self.write_latency.merge(&other.write_latency);
    }

    /// Reads and writes together.
    pub fn latency(&self) -> LatencyHistogram {
        let mut latency = self.read_latency.clone();
        latency.merge(&self.write_latency);
        latency
    }
}

impl Default for IoCounts {
    fn default() -> IoCounts {
        IoCounts::new()
    }
}

/// What one thread measured.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ThreadOutcome {
    pub target_index: usize,
    pub thread_index: u32,
    pub engine_name: String,
    pub io: IoCounts,
    /// CPU time of this thread over its measured window.
    pub cpu: CpuTimes,
    /// The thread's measured window.
    pub elapsed: Duration,
}

/// What a whole run measured.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunOutcome {
    pub engine_name: String,
    pub threads: Vec<ThreadOutcome>,
    /// CPU time of the whole process over the measured window (warm-up excluded).
    pub process_cpu: CpuTimes,
    pub window: Duration,
    pub cpu_count: u32,
    /// Per-interval deltas, in order (empty without a status interval).
    pub intervals: Vec<IntervalOutcome>,
}

/// The deltas of one interval over the threads that reported it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct IntervalOutcome {
    pub index: u32,
    /// Offset of the interval's start from the start of the measured window.
    pub start: Duration,
    /// Its length: the status interval, or less for the last one.
    pub length: Duration,
    pub io: IoCounts,
    /// CPU time of the reporting threads during the interval.
    pub cpu: CpuTimes,
    /// I/Os in flight over all threads at each thread's last wait of the interval (what the
    /// device held: the queue depth when the threads keep up).
    pub outstanding_ios: u64,
    /// Threads whose part is in (the interval is complete when all are).
    pub parts_count: u32,
}

impl IntervalOutcome {
    pub fn empty(index: u32, start: Duration, length: Duration) -> IntervalOutcome {
        IntervalOutcome {
            index,
            start,
            length,
            io: IoCounts::new(),
            cpu: CpuTimes::default(),
            outstanding_ios: 0,
            parts_count: 0,
        }
    }

    /// Adds another part of the same interval (another thread, or another process).
    pub fn merge(&mut self, other: &IntervalOutcome) {
        debug_assert_eq!(self.index, other.index, "parts of different intervals");
        self.io.merge(&other.io);
        self.cpu = CpuTimes { user_us: self.cpu.user_us + other.cpu.user_us, sys_us: self.cpu.sys_us + other.cpu.sys_us };
        self.outstanding_ios += other.outstanding_ios;
        self.parts_count += other.parts_count;
    }
}

/// Number of intervals of `interval` in `duration` (the last one may be shorter).
pub fn interval_count(duration: Duration, interval: Duration) -> u32 {
    let interval_ns = interval.as_nanos().max(1);
    duration.as_nanos().div_ceil(interval_ns).min(u32::MAX as u128) as u32
}

/// Start and length of interval `index`.
pub fn interval_bounds(duration: Duration, interval: Duration, index: u32) -> (Duration, Duration) {
    let start = interval.saturating_mul(index);
    (start, duration.saturating_sub(start).min(interval))
}

/// Opens an engine for one thread; tests pass one that builds the simulated engine.
pub type EngineOpener =
    dyn Fn(EngineKind, Arc<FileSet>, EngineConfig, &mut dyn FnMut(&str)) -> Result<Box<dyn IoEngine>, IoError> + Sync;

/// Optional hooks of [`run_with`].
#[derive(Default)]
pub struct RunHooks<'a> {
    /// Hears each finished interval, in order, on the calling thread, while the run goes on.
    pub on_interval: Option<&'a mut dyn FnMut(&IntervalOutcome)>,
    /// Replaces [`open_engine`].
    pub open_engine: Option<&'a EngineOpener>,
}

/// Prints each distinct notice once (every thread opens an engine, and may fall back).
struct Notices<'a> {
    seen: Mutex<Vec<String>>,
    sink: &'a (dyn Fn(&str) + Sync),
}

impl Notices<'_> {
    fn say(&self, message: &str) {
        let mut seen = match self.seen.lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        };
        if !seen.iter().any(|s| s == message) {
            seen.push(message.to_string());
            (self.sink)(message);
        }
    }
}

/// Runs `job` on prepared targets (one per job target, same order).
pub fn run(job: &JobSpec, targets: &[PreparedTarget], notice: &(dyn Fn(&str) + Sync)) -> Result<RunOutcome, WorkbenchError> {
    run_with(job, targets, notice, RunHooks::default())
}

/// [`run`] with hooks: live intervals, and the engine to use.
pub fn run_with(
    job: &JobSpec,
    targets: &[PreparedTarget],
    notice: &(dyn Fn(&str) + Sync),
    mut hooks: RunHooks<'_>,
) -> Result<RunOutcome, WorkbenchError> {
    assert_eq!(job.targets.len(), targets.len(), "one prepared target per job target");
    let (interval_tx, interval_rx) = mpsc::channel::<IntervalOutcome>();
    let mut intervals = IntervalCollector::new(job, job.targets.iter().map(|t| t.threads).sum());
    let notices = Notices { seen: Mutex::new(Vec::new()), sink: notice };
    let thread_total: usize = job.targets.iter().map(|t| t.threads as usize).sum();
    let barrier = Barrier::new(thread_total + 1);
    let stop = AtomicBool::new(false);
    // Threads on one file share its counters, as SQL Server's virtual file stats do.
    let stats: Vec<Arc<FileStats>> = targets.iter().map(|_| Arc::new(FileStats::default())).collect();

    std::thread::scope(|scope| {
        let mut handles = Vec::with_capacity(thread_total);
        for (target_index, (spec, prepared)) in job.targets.iter().zip(targets).enumerate() {
            for thread_index in 0..spec.threads {
                let ctx = ThreadContext {
                    job,
                    target: prepared,
                    target_index,
                    thread_index,
                    threads_on_target: spec.threads,
                    cpu_mask: spec.cpu_mask,
                    stats: stats[target_index].clone(),
                    barrier: &barrier,
                    stop: &stop,
                    notices: &notices,
                    interval_tx: job.status_interval.map(|_| interval_tx.clone()),
                    open: hooks.open_engine,
                };
                let handle = std::thread::Builder::new()
                    .name(format!("io-{target_index}-{thread_index}"))
                    .spawn_scoped(scope, move || run_thread(ctx));
                match handle {
                    Ok(h) => handles.push(h),
                    Err(e) => {
                        // Threads already started wait on the barrier: release them, then fail.
                        stop.store(true, Ordering::Relaxed);
                        for _ in handles.len()..thread_total {
                            barrier.wait();
                        }
                        return Err(WorkbenchError::ThreadSpawn(e));
                    }
                }
            }
        }
        barrier.wait();
        let started = Instant::now();
        let measure_start = started + job.warmup;
        let end = measure_start + job.duration;
        drop(interval_tx);
        sleep_until(measure_start, &stop);
        let cpu_start = cpu::process_cpu();
        let measured_from = Instant::now();
        // Wait for the end while passing on intervals as the threads finish them.
        loop {
            let now = Instant::now();
            if now >= end || stop.load(Ordering::Relaxed) {
                break;
            }
            let nap = (end - now).min(Duration::from_millis(20));
            match interval_rx.recv_timeout(nap) {
                Ok(part) => intervals.add(part, &mut hooks.on_interval),
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                // No interval senders (no --status-interval, or every thread done): nap, never
                // spin, or this thread takes a core from the ones doing I/O.
                Err(mpsc::RecvTimeoutError::Disconnected) => std::thread::sleep(nap),
            }
        }
        let process_cpu = cpu::process_cpu().since(&cpu_start);
        let window = measured_from.elapsed();

        let mut threads = Vec::with_capacity(thread_total);
        let mut first_error = None;
        for h in handles {
            match h.join() {
                Ok(Ok(t)) => threads.push(t),
                Ok(Err(e)) => {
                    first_error.get_or_insert(e);
                }
                Err(_) => {
                    first_error.get_or_insert(WorkbenchError::ThreadPanicked("an I/O thread".into()));
                }
            }
        }
        if let Some(e) = first_error {
            return Err(e);
        }
        // Every sender is gone once the threads are joined: this drains the last parts.
        while let Ok(part) = interval_rx.recv() {
            intervals.add(part, &mut hooks.on_interval);
        }
        let engine_name = threads.first().map(|t| t.engine_name.clone()).unwrap_or_else(|| "none".into());
        Ok(RunOutcome { engine_name, threads, process_cpu, window, cpu_count: cpu::cpu_count(), intervals: intervals.finish() })
    })
}

/// Adds the threads' parts of each interval and passes complete intervals on, in order.
struct IntervalCollector {
    pending: Vec<IntervalOutcome>,
    emitted_count: usize,
    threads_count: u32,
}

impl IntervalCollector {
    fn new(job: &JobSpec, threads_count: u32) -> IntervalCollector {
        let pending = match job.status_interval {
            Some(interval) => (0..interval_count(job.duration, interval))
                .map(|i| {
                    let (start, length) = interval_bounds(job.duration, interval, i);
                    IntervalOutcome::empty(i, start, length)
                })
                .collect(),
            None => Vec::new(),
        };
        IntervalCollector { pending, emitted_count: 0, threads_count }
    }

    fn add(&mut self, part: IntervalOutcome, on_interval: &mut Option<&mut dyn FnMut(&IntervalOutcome)>) {
        let Some(slot) = self.pending.get_mut(part.index as usize) else {
            debug_assert!(false, "interval {} past the end", part.index);
            return;
        };
        slot.merge(&part);
        while let Some(next) = self.pending.get(self.emitted_count) {
            if next.parts_count < self.threads_count {
                break;
            }
            if let Some(f) = on_interval.as_mut() {
                f(next);
            }
            self.emitted_count += 1;
        }
    }

    fn finish(self) -> Vec<IntervalOutcome> {
        debug_assert!(self.pending.iter().all(|p| p.parts_count == self.threads_count), "an interval lacks a thread's part");
        self.pending
    }
}

fn sleep_until(deadline: Instant, stop: &AtomicBool) {
    // Short naps so a failing thread ends the run early instead of after the full duration.
    loop {
        let now = Instant::now();
        if now >= deadline || stop.load(Ordering::Relaxed) {
            return;
        }
        std::thread::sleep((deadline - now).min(Duration::from_millis(20)));
    }
}

struct ThreadContext<'a> {
    job: &'a JobSpec,
    target: &'a PreparedTarget,
    target_index: usize,
    thread_index: u32,
    threads_on_target: u32,
    cpu_mask: u64,
    stats: Arc<FileStats>,
    barrier: &'a Barrier,
    stop: &'a AtomicBool,
    notices: &'a Notices<'a>,
    interval_tx: Option<mpsc::Sender<IntervalOutcome>>,
    open: Option<&'a EngineOpener>,
}

fn run_thread(ctx: ThreadContext<'_>) -> Result<ThreadOutcome, WorkbenchError> {
    // Every thread must reach the barrier, even when setup fails, or the others wait forever.
    let setup = setup_thread(&ctx);
    if setup.is_err() {
        ctx.stop.store(true, Ordering::Relaxed);
    }
    ctx.barrier.wait();
    let (engine, offsets) = setup?;
    let result = io_loop(&ctx, engine, offsets);
    if result.is_err() {
        ctx.stop.store(true, Ordering::Relaxed);
    }
    result
}

fn setup_thread(ctx: &ThreadContext<'_>) -> Result<(Box<dyn IoEngine>, OffsetSource), WorkbenchError> {
    if let Err(e) = cpu::pin_to_mask(ctx.cpu_mask) {
        ctx.notices.say(&format!("cannot pin threads to CPU mask {:#x} ({e}); running unpinned", ctx.cpu_mask));
    }
    let job = ctx.job;
    let mode = OpenMode { direct: job.direct, write: job.read_write.writes() };
    let mut files = FileSet::new();
    // --sync: O_DSYNC, so a write completes only once it is durable (a log flush per write).
    let extra_flags = if job.sync { libc::O_DSYNC } else { 0 };
    files.add_with_flags(&ctx.target.path, mode, extra_flags, ctx.stats.clone()).map_err(WorkbenchError::Setup)?;
    if mode.write && !job.force {
        // The path was checked to name a file flashscan marked; refuse if it names another
        // file now (swapped for a link in between).
        let opened = files.get(0).file.metadata().map(|m| (m.dev(), m.ino())).ok();
        if opened.is_none() || opened != ctx.target.file_id {
            return Err(WorkbenchError::target(
                &ctx.target.path,
                "the file changed since flashscan checked its mark; it will not write to it: run again, or pass --force",
            ));
        }
    }
    let config = EngineConfig::for_depth(job.queue_depth, job.block_size_bytes as usize).on_one_thread();
    let files = Arc::new(files);
    let mut engine = match ctx.open {
        Some(open) => open(job.engine, files, config, &mut |m| ctx.notices.say(m)),
        None => open_engine(job.engine, files, config, &mut |m| ctx.notices.say(m)),
    }
    .map_err(WorkbenchError::Setup)?;
    if job.read_write.writes() {
        // Incompressible write data, made once: the hot loop never touches buffer contents.
        let mut rng = FastRng::new(job.seed, 0xF111 + ctx.target_index as u64 * 1000 + ctx.thread_index as u64);
        for slot in 0..job.queue_depth {
            rng.fill(engine.slot_mut(slot));
        }
    }
    let offsets = OffsetSource::new(job, ctx.target, ctx.target_index, ctx.thread_index, ctx.threads_on_target);
    Ok((engine, offsets))
}

/// Where the next I/O goes and whether it reads or writes.
struct OffsetSource {
    pattern: Pattern,
    rng: FastRng,
    region_start_bytes: u64,
    block_size_bytes: u64,
    block_count: u64,
    next_block: u64,
    write_pct: u64,
}

impl OffsetSource {
    fn new(job: &JobSpec, target: &PreparedTarget, target_index: usize, thread_index: u32, threads: u32) -> OffsetSource {
        let block_size_bytes = job.block_size_bytes as u64;
        // Checked when the target was prepared: at least one block fits after the offset.
        let block_count = (target.size_bytes.saturating_sub(job.offset_bytes) / block_size_bytes).max(1);
        // Sequential streams of one file start evenly spaced, so threads do not read the
        // same blocks in lock step (which the device would serve from its cache).
        let next_block = block_count * thread_index as u64 / threads as u64;
        OffsetSource {
            pattern: job.pattern,
            rng: FastRng::new(job.seed, (target_index as u64) << 32 | thread_index as u64),
            region_start_bytes: job.offset_bytes,
            block_size_bytes,
            block_count,
            next_block,
            write_pct: job.read_write.write_pct() as u64,
        }
    }

    #[inline]
    fn next(&mut self) -> (IoOp, u64) {
        let block = match self.pattern {
            Pattern::Random => self.rng.below(self.block_count),
            Pattern::Sequential => {
                let b = self.next_block;
                self.next_block = if b + 1 >= self.block_count { 0 } else { b + 1 };
                b
            }
        };
        let op = match self.write_pct {
            0 => IoOp::Read,
            100 => IoOp::Write,
            pct => {
                if self.rng.below(100) < pct {
                    IoOp::Write
                } else {
                    IoOp::Read
                }
            }
        };
        (op, self.region_start_bytes + block * self.block_size_bytes)
    }
}

/// Sends the open interval (and empty parts for intervals up to `next_index`) and opens
/// interval `next_index` (no new one once `next_index` is past the last).
fn close_interval(
    ctx: &ThreadContext<'_>,
    open: &mut IntervalOutcome,
    cpu_start: &mut CpuTimes,
    in_flight: u32,
    next_index: u32,
    duration: Duration,
    interval: Duration,
) -> Result<(), WorkbenchError> {
    let Some(tx) = &ctx.interval_tx else { return Ok(()) };
    let now_cpu = cpu::thread_cpu();
    let (start, length) = interval_bounds(duration, interval, next_index);
    let mut part = std::mem::replace(open, IntervalOutcome::empty(next_index, start, length));
    part.cpu = now_cpu.since(cpu_start);
    part.outstanding_ios = in_flight as u64;
    part.parts_count = 1;
    *cpu_start = now_cpu;
    let first_skipped = part.index + 1;
    // The main thread is gone only if the run is ending with an error: nothing to tell then.
    let send = |p: IntervalOutcome| tx.send(p).map_err(|_| WorkbenchError::ThreadPanicked("the interval collector".into()));
    send(part)?;
    for skipped in first_skipped..next_index {
        let (start, length) = interval_bounds(duration, interval, skipped);
        let mut empty = IntervalOutcome::empty(skipped, start, length);
        empty.parts_count = 1;
        send(empty)?;
    }
    Ok(())
}

fn io_loop(ctx: &ThreadContext<'_>, mut engine: Box<dyn IoEngine>, mut offsets: OffsetSource) -> Result<ThreadOutcome, WorkbenchError> {
    let job = ctx.job;
    let queue_depth = job.queue_depth;
    let length_bytes = job.block_size_bytes;
    let mut free_slots: Vec<u32> = (0..queue_depth).rev().collect();
    let mut completions: Vec<IoCompletion> = Vec::with_capacity(queue_depth as usize * 2);
    let mut out = ThreadOutcome {
        target_index: ctx.target_index,
        thread_index: ctx.thread_index,
        engine_name: engine.name().to_string(),
        io: IoCounts::new(),
        cpu: CpuTimes::default(),
        elapsed: Duration::ZERO,
    };

    let started = Instant::now();
    let measure_start = started + job.warmup;
    let end = measure_start + job.duration;
    let mut measuring = job.warmup.is_zero();
    let mut measured_from = started;
    let mut cpu_start = cpu::thread_cpu();
    let mut last_now;
    // Interval accounting (only with a status interval): the open interval's deltas.
    let interval = job.status_interval.filter(|_| ctx.interval_tx.is_some());
    let intervals_total = interval.map(|i| interval_count(job.duration, i)).unwrap_or(0);
    let interval_ns = interval.map(|i| i.as_nanos().max(1)).unwrap_or(1);
    let mut open_interval = interval.map(|i| {
        let (start, length) = interval_bounds(job.duration, i, 0);
        IntervalOutcome::empty(0, start, length)
    });
    let mut interval_cpu_start = cpu_start;
    let mut in_flight_waiting: u32;

    loop {
        while let Some(slot) = free_slots.pop() {
            let (op, offset_bytes) = offsets.next();
            let request = IoRequest { op, file_index: 0, offset_bytes, length_bytes, slot, user_data: 0 };
            engine.queue(request).map_err(WorkbenchError::Run)?;
        }
        completions.clear();
        // What the device holds while this thread waits: the interval's "outstanding I/Os".
        in_flight_waiting = engine.in_flight();
        // Submits the refilled batch and waits for at least one, in one call where possible.
        engine.reap(1, &mut completions).map_err(WorkbenchError::Run)?;
        let now = Instant::now();
        last_now = now;
        if !measuring && now >= measure_start {
            measuring = true;
            measured_from = now;
            cpu_start = cpu::thread_cpu();
            interval_cpu_start = cpu_start;
        }
        let counted = measuring && now < end;
        if counted {
            if let (Some(i), Some(open)) = (interval, open_interval.as_mut()) {
                let index = ((now - measure_start).as_nanos() / interval_ns).min(intervals_total.saturating_sub(1) as u128) as u32;
                if index != open.index {
                    // Close the open interval and any this thread skipped (a reap longer than an interval).
                    close_interval(ctx, open, &mut interval_cpu_start, in_flight_waiting, index, job.duration, i)?;
                }
            }
        }
        for c in &completions {
            if c.result != Ok(c.length_bytes) {
                let error = match c.expect_full(engine.files()) {
                    Err(e) => e,
                    Ok(()) => flashscan_io::IoError::InvalidRequest("incomplete transfer".into()),
                };
                // The rest still in flight must land before the buffers go away (engines
                // assert it on drop).
                let mut sink = Vec::new();
                while engine.in_flight() > 0 && engine.reap(1, &mut sink).is_ok() {
                    sink.clear();
                }
                return Err(WorkbenchError::Run(error));
            }
            free_slots.push(c.slot);
            if counted {
                // The run's totals and the open interval count a completion the same way.
                out.io.record(c.op, c.length_bytes as u64, c.latency_ns);
                if let Some(open) = open_interval.as_mut() {
                    open.io.record(c.op, c.length_bytes as u64, c.latency_ns);
                }
            }
        }
        if now >= end || ctx.stop.load(Ordering::Relaxed) {
            break;
        }
    }
    out.cpu = cpu::thread_cpu().since(&cpu_start);
    out.elapsed = if measuring { last_now.min(end).saturating_duration_since(measured_from) } else { Duration::ZERO };
    if let (Some(i), Some(open)) = (interval, open_interval.as_mut()) {
        // The last interval, and empty parts for any this thread never reached.
        close_interval(ctx, open, &mut interval_cpu_start, in_flight_waiting, intervals_total, job.duration, i)?;
    }
    // Let what is still in flight finish (uncounted) before the buffers go away.
    while engine.in_flight() > 0 {
        completions.clear();
        let in_flight = engine.in_flight();
        engine.reap(in_flight, &mut completions).map_err(WorkbenchError::Run)?;
    }
    Ok(out)
}
