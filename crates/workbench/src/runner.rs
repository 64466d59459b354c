//! The runner: one OS thread per (target, thread), each with its own engine (one ring per
//! thread, as fio does), keeping `queue_depth` I/Os in flight: reap at least one, refill
//! every free slot, submit the batch in the same system call as the next wait.
//!
//! The hot loop allocates nothing: slots, the completion buffer and the histograms exist
//! before the first I/O. Time is read once per reaped batch, not per I/O; the engine
//! stamps each I/O's own latency. Warm-up I/Os run but are not counted, and CPU time is
//! read at the end of warm-up so it is excluded too.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};

use flashscan_io::{open_engine, EngineConfig, FileSet, FileStats, IoCompletion, IoEngine, IoOp, IoRequest, OpenMode};

use crate::cpu::{self, CpuTimes};
use crate::error::WorkbenchError;
use crate::histogram::LatencyHistogram;
use crate::rng::FastRng;
use crate::spec::{JobSpec, Pattern};
use crate::test_file::PreparedTarget;

/// What one thread measured.
#[derive(Debug, Clone)]
pub struct ThreadOutcome {
    pub target_index: usize,
    pub thread_index: u32,
    pub engine_name: &'static str,
    pub reads_count: u64,
    pub writes_count: u64,
    pub bytes_read: u64,
    pub bytes_written: u64,
    pub read_latency: LatencyHistogram,
    pub write_latency: LatencyHistogram,
    /// CPU time of this thread over its measured window.
    pub cpu: CpuTimes,
    /// The thread's measured window.
    pub elapsed: Duration,
}

/// What a whole run measured.
#[derive(Debug, Clone)]
pub struct RunOutcome {
    pub engine_name: &'static str,
    pub threads: Vec<ThreadOutcome>,
    /// CPU time of the whole process over the measured window (warm-up excluded).
    pub process_cpu: CpuTimes,
    pub window: Duration,
    pub cpu_count: u32,
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
    assert_eq!(job.targets.len(), targets.len(), "one prepared target per job target");
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
                        return Err(WorkbenchError::Spec(format!("cannot start an I/O thread: {e}")));
                    }
                }
            }
        }
        barrier.wait();
        let started = Instant::now();
        let measure_start = started + job.warmup;
        let end = measure_start + job.duration;
        sleep_until(measure_start, &stop);
        let cpu_start = cpu::process_cpu();
        let measured_from = Instant::now();
        sleep_until(end, &stop);
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
        let engine_name = threads.first().map(|t| t.engine_name).unwrap_or("none");
        Ok(RunOutcome { engine_name, threads, process_cpu, window, cpu_count: cpu::cpu_count() })
    })
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
    files.add(&ctx.target.path, mode, ctx.stats.clone()).map_err(WorkbenchError::Setup)?;
    let config = EngineConfig::for_depth(job.queue_depth, job.block_size_bytes as usize).on_one_thread();
    let mut engine = open_engine(job.engine, Arc::new(files), config, &mut |m| ctx.notices.say(m)).map_err(WorkbenchError::Setup)?;
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

fn io_loop(ctx: &ThreadContext<'_>, mut engine: Box<dyn IoEngine>, mut offsets: OffsetSource) -> Result<ThreadOutcome, WorkbenchError> {
    let job = ctx.job;
    let queue_depth = job.queue_depth;
    let length_bytes = job.block_size_bytes;
    let mut free_slots: Vec<u32> = (0..queue_depth).rev().collect();
    let mut completions: Vec<IoCompletion> = Vec::with_capacity(queue_depth as usize * 2);
    let mut out = ThreadOutcome {
        target_index: ctx.target_index,
        thread_index: ctx.thread_index,
        engine_name: engine.name(),
        reads_count: 0,
        writes_count: 0,
        bytes_read: 0,
        bytes_written: 0,
        read_latency: LatencyHistogram::new(),
        write_latency: LatencyHistogram::new(),
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

    loop {
        while let Some(slot) = free_slots.pop() {
            let (op, offset_bytes) = offsets.next();
            let request = IoRequest { op, file_index: 0, offset_bytes, length_bytes, slot, user_data: 0 };
            engine.queue(request).map_err(WorkbenchError::Run)?;
        }
        completions.clear();
        // Submits the refilled batch and waits for at least one, in one call where possible.
        engine.reap(1, &mut completions).map_err(WorkbenchError::Run)?;
        let now = Instant::now();
        last_now = now;
        if !measuring && now >= measure_start {
            measuring = true;
            measured_from = now;
            cpu_start = cpu::thread_cpu();
        }
        let counted = measuring && now < end;
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
                match c.op {
                    IoOp::Read => {
                        out.reads_count += 1;
                        out.bytes_read += c.length_bytes as u64;
                        out.read_latency.record(c.latency_ns);
                    }
                    IoOp::Write => {
                        out.writes_count += 1;
                        out.bytes_written += c.length_bytes as u64;
                        out.write_latency.record(c.latency_ns);
                    }
                }
            }
        }
        if now >= end || ctx.stop.load(Ordering::Relaxed) {
            break;
        }
    }
    out.cpu = cpu::thread_cpu().since(&cpu_start);
    out.elapsed = if measuring { last_now.min(end).saturating_duration_since(measured_from) } else { Duration::ZERO };
    // Let what is still in flight finish (uncounted) before the buffers go away.
    while engine.in_flight() > 0 {
        completions.clear();
        let in_flight = engine.in_flight();
        engine.reap(in_flight, &mut completions).map_err(WorkbenchError::Run)?;
    }
    Ok(out)
}
