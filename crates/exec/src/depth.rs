//! How many reads a scan keeps in flight per worker. A fixed `--depth` is the user's;
//! otherwise the scan finds the depth the device needs while it reads (TCP's slow start,
//! SQL Server's read-ahead that grows with the scan): it starts at
//! `AUTO_DEPTH_START`, measures the rate at which chunks reach the workers over one
//! full cycle of the reads in flight, doubles the depth while the rate still rises by at
//! least `AUTO_DEPTH_GAIN_MIN`, and keeps the depth it has once a doubling gains less (the
//! device's knee: more reads in flight only queue up). The search runs once per scan,
//! shared by its workers, so it measures what the device gives all of them together.
//!
//! Why not a fixed depth: a virtual or networked disk needs many megabytes in flight to
//! reach its rate (latency × rate), a local NVMe drive far fewer, and a scan whose worker
//! holds a chunk while it decodes has one read less in flight than the raw pass beside
//! it. Why not the workbench's queue-depth sweep, cached per volume: it costs seconds of
//! I/O before the first scan and a file written outside the database, and it measures raw
//! reads, not the scan's own consumption. The cost of the search is its first epochs at a
//! smaller depth; `AUTO_DEPTH_START` is chosen so that most devices start near their knee.
//! (At 1 MiB reads that leaves one doubling, 32 to 64; smaller reads leave more room.)
//!
//! `DepthSearch` is the decision alone (no clock, no atomics), so it is tested against
//! simulated devices; `ScanDepth` shares it between the workers of one scan.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use serde::Serialize;

use crate::limits::SCAN_QUEUE_DEPTH_MAX;

/// Reads in flight per worker a scan starts with when it chooses the depth itself. On the
/// test VM's virtual disk a cold heap scan of 1 MiB reads on 2 workers reached 0.57-0.70 of
/// the raw rate at 4, 0.83 at 8, 0.88 at 16, 0.91-0.96 at 32 and 0.95-0.98 at 64 (quiet,
/// docs/scan.md "Read-ahead depth"). Every read a scan spends below the depth it ends at
/// costs (an SF 1 heap scan is ~760 reads): 32 starts near the knee, the search does the
/// rest. (16 was tried first: under load its epochs cost an SF 1 scan ~20 % of its reads
/// at 16 and 32 before it reached 64.)
pub const AUTO_DEPTH_START: u32 = 32;
/// Reads in flight per worker the search may grow to: bounds the arena each worker
/// allocates up front (`AUTO_DEPTH_MAX` × io size: 64 MiB at 1 MiB reads).
pub const AUTO_DEPTH_MAX: u32 = 64;
/// Bytes in flight per worker the search may grow to, whatever the read size: the arena
/// is allocated (and pinned by io_uring) before the first read, so 8 MiB reads stop at 8.
pub const AUTO_IN_FLIGHT_BYTES_MAX: usize = 64 << 20;
/// Relative rise in the rate that makes the next doubling worth trying: below it the
/// device is at its knee. On a loaded machine one epoch's rate varies by more than this;
/// the search then stops a doubling early or late, never below its start.
pub const AUTO_DEPTH_GAIN_MIN: f64 = 0.05;
/// Full cycles of every read in flight over which one depth's rate is measured. One: an
/// SF 1 heap scan is ~760 reads of 1 MiB, and every read spent below the knee costs.
pub const AUTO_DEPTH_EPOCH_ROUND_TRIPS: u64 = 1;

const _: () = assert!(AUTO_DEPTH_START >= 1);
const _: () = assert!(AUTO_DEPTH_START <= AUTO_DEPTH_MAX);
const _: () = assert!(AUTO_DEPTH_MAX <= SCAN_QUEUE_DEPTH_MAX);
const _: () = assert!(AUTO_DEPTH_EPOCH_ROUND_TRIPS >= 1);

/// How a scan chooses its reads in flight per worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DepthPolicy {
    /// Exactly this many (`--depth N`).
    Fixed(u32),
    /// Start at `start`, double while the rate rises, never above `max`.
    Auto { start: u32, max: u32 },
}

impl DepthPolicy {
    /// The search for reads of `io_size_bytes`, starting at `start`: at most
    /// `AUTO_DEPTH_MAX` reads and `AUTO_IN_FLIGHT_BYTES_MAX` bytes in flight per worker.
    pub fn auto(start: u32, io_size_bytes: usize) -> DepthPolicy {
        let by_bytes = u32::try_from(AUTO_IN_FLIGHT_BYTES_MAX / io_size_bytes.max(1)).unwrap_or(u32::MAX);
        let max = AUTO_DEPTH_MAX.min(by_bytes).max(1);
        DepthPolicy::Auto { start: start.clamp(1, max), max }
    }

    /// Slots each worker's engine needs: the most reads it may ever have in flight.
    pub fn slots(&self) -> u32 {
        match *self {
            DepthPolicy::Fixed(depth) => depth,
            DepthPolicy::Auto { max, .. } => max,
        }
    }

    pub fn start(&self) -> u32 {
        match *self {
            DepthPolicy::Fixed(depth) => depth,
            DepthPolicy::Auto { start, .. } => start,
        }
    }

    pub fn is_auto(&self) -> bool {
        matches!(self, DepthPolicy::Auto { .. })
    }

    /// The same policy for a scan of `chunk_count` chunks into slots of `slot_size_bytes`:
    /// no worker can have more reads in flight than there are chunks, so neither the start
    /// nor the slots exceed it; a search also stays within `AUTO_IN_FLIGHT_BYTES_MAX`.
    pub fn fitted(&self, chunk_count: usize, slot_size_bytes: usize) -> DepthPolicy {
        let cap = u32::try_from(chunk_count).unwrap_or(u32::MAX).max(1);
        match *self {
            DepthPolicy::Fixed(depth) => DepthPolicy::Fixed(depth.min(cap)),
            DepthPolicy::Auto { start, max } => {
                let by_bytes = u32::try_from(AUTO_IN_FLIGHT_BYTES_MAX / slot_size_bytes.max(1)).unwrap_or(u32::MAX).max(1);
                let max = max.min(cap).min(by_bytes);
                DepthPolicy::Auto { start: start.min(max), max }
            }
        }
    }
}

/// One depth the search measured: reads in flight per worker and the rate it gave.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct DepthStep {
    pub depth: u32,
    pub mb_per_s: f64,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Phase {
    /// The depth just changed: wait until `until_reads` (every new read has completed
    /// once), so the measurement does not include filling the deeper queue.
    Settling { until_reads: u64 },
    /// Measuring the current depth from (`from_reads`, `from_bytes`, `from_ns`).
    Measuring { from_reads: u64, from_bytes: u64, from_ns: u64 },
    /// Found: the depth stays.
    Settled,
}

/// The search itself: fed the scan's running totals (chunks and bytes handed to workers,
/// nanoseconds since the scan began), it answers the depth every worker should keep.
#[derive(Debug, Clone)]
pub struct DepthSearch {
    depth: u32,
    max: u32,
    worker_count: u32,
    phase: Phase,
    steps: Vec<DepthStep>,
}

impl DepthSearch {
    pub fn new(start: u32, max: u32, worker_count: u32) -> DepthSearch {
        assert!(start >= 1 && start <= max, "depth start {start} outside 1..={max}");
        assert!(worker_count >= 1);
        // The first epoch starts half a cycle in, as after any change: the first reads went
        // out together, and the first completions come back together.
        let first_fill_reads = (start as u64 * worker_count as u64).div_ceil(2);
        let phase = if start == max { Phase::Settled } else { Phase::Settling { until_reads: first_fill_reads } };
        DepthSearch { depth: start, max, worker_count, phase, steps: Vec::new() }
    }

    pub fn depth(&self) -> u32 {
        self.depth
    }

    pub fn is_settled(&self) -> bool {
        self.phase == Phase::Settled
    }

    /// The depths measured so far, in order, with their rates.
    pub fn steps(&self) -> &[DepthStep] {
        &self.steps
    }

    /// Reads the whole scan has in flight at the current depth.
    fn reads_in_flight(&self) -> u64 {
        self.depth as u64 * self.worker_count as u64
    }

    /// Reads one epoch measures: every read in flight, `AUTO_DEPTH_EPOCH_ROUND_TRIPS` times.
    fn epoch_reads(&self) -> u64 {
        self.reads_in_flight() * AUTO_DEPTH_EPOCH_ROUND_TRIPS
    }

    /// Reads whose completion this call has to see before anything changes (the next
    /// boundary): lets callers skip the lock until then.
    pub fn next_boundary_reads(&self) -> u64 {
        match self.phase {
            Phase::Settling { until_reads } => until_reads,
            Phase::Measuring { from_reads, .. } => from_reads + self.epoch_reads(),
            Phase::Settled => u64::MAX,
        }
    }

    /// The scan has handed `reads` chunks (`bytes`) to its workers by `now_ns`; returns
    /// the depth each worker should keep from now on.
    pub fn observe(&mut self, reads: u64, bytes: u64, now_ns: u64) -> u32 {
        match self.phase {
            Phase::Settled => {}
            Phase::Settling { until_reads } => {
                if reads >= until_reads {
                    self.phase = Phase::Measuring { from_reads: reads, from_bytes: bytes, from_ns: now_ns };
                }
            }
            Phase::Measuring { from_reads, from_bytes, from_ns } => {
                if reads >= from_reads + self.epoch_reads() && now_ns > from_ns {
                    let seconds = (now_ns - from_ns) as f64 / 1e9;
                    let mb_per_s = (bytes - from_bytes) as f64 / 1e6 / seconds;
                    self.decide(DepthStep { depth: self.depth, mb_per_s }, reads);
                }
            }
        }
        debug_assert!(self.depth >= 1 && self.depth <= self.max);
        self.depth
    }

    fn decide(&mut self, step: DepthStep, reads: u64) {
        let previous = self.steps.last().copied();
        self.steps.push(step);
        let rose = previous.is_none_or(|p| step.mb_per_s >= p.mb_per_s * (1.0 + AUTO_DEPTH_GAIN_MIN));
        if !rose {
            // The doubling gained too little: the knee is at or below this depth. Stay
            // here rather than go back: the slots are allocated already, and one noisy
            // epoch should not take the scan below the knee.
            self.phase = Phase::Settled;
            return;
        }
        if self.depth >= self.max {
            self.phase = Phase::Settled;
            return;
        }
        self.depth = (self.depth * 2).min(self.max);
        // The new reads go out at once; half a cycle later the queue runs at its new depth.
        self.phase = Phase::Settling { until_reads: reads + self.reads_in_flight().div_ceil(2) };
    }
}

/// What the depth search did in one scan (reported beside the scan's figures).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DepthFigures {
    /// `auto` or `fixed`.
    pub mode: &'static str,
    /// Reads in flight per worker at the end of the scan.
    pub depth_final: u32,
    /// Each depth measured and its rate (empty for a fixed depth).
    pub steps: Vec<DepthStep>,
}

/// One scan's depth, shared by its workers: a fixed one, or a `DepthSearch` fed by every
/// worker's completions. Workers read the depth with one atomic load per refill and add
/// their chunks with two atomic adds; the search's lock is taken only at an epoch boundary.
pub struct ScanDepth {
    policy: DepthPolicy,
    depth: AtomicU32,
    reads: AtomicU64,
    bytes: AtomicU64,
    /// Reads at which the search next needs to look (u64::MAX: never again).
    next_boundary_reads: AtomicU64,
    search: Option<Mutex<DepthSearch>>,
    started: Instant,
}

impl ScanDepth {
    pub fn new(policy: DepthPolicy, worker_count: u32) -> ScanDepth {
        let search = match policy {
            DepthPolicy::Fixed(_) => None,
            DepthPolicy::Auto { start, max } => Some(DepthSearch::new(start, max, worker_count)),
        };
        let next = search.as_ref().map_or(u64::MAX, |s| s.next_boundary_reads());
        ScanDepth {
            policy,
            depth: AtomicU32::new(policy.start()),
            reads: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            next_boundary_reads: AtomicU64::new(next),
            search: search.map(Mutex::new),
            started: Instant::now(),
        }
    }

    pub fn policy(&self) -> DepthPolicy {
        self.policy
    }

    /// Reads in flight each worker should keep now.
    pub fn depth(&self) -> u32 {
        self.depth.load(Ordering::Relaxed)
    }

    /// A worker was handed a chunk of `bytes`.
    pub fn chunk_done(&self, bytes: u64) {
        let reads = self.reads.fetch_add(1, Ordering::Relaxed) + 1;
        let bytes_total = self.bytes.fetch_add(bytes, Ordering::Relaxed) + bytes;
        if reads < self.next_boundary_reads.load(Ordering::Relaxed) {
            return;
        }
        let Some(search) = &self.search else { return };
        // Another worker deciding at the same moment has the lock: it decides for both.
        let Ok(mut search) = search.try_lock() else { return };
        let now_ns = self.started.elapsed().as_nanos() as u64;
        let depth = search.observe(reads, bytes_total, now_ns);
        self.depth.store(depth, Ordering::Relaxed);
        self.next_boundary_reads.store(search.next_boundary_reads(), Ordering::Relaxed);
    }

    pub fn figures(&self) -> DepthFigures {
        let steps = self.search.as_ref().and_then(|s| s.lock().ok().map(|s| s.steps().to_vec())).unwrap_or_default();
        DepthFigures { mode: if self.policy.is_auto() { "auto" } else { "fixed" }, depth_final: self.depth(), steps }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A simulated device: with `in_flight` reads of `read_bytes` outstanding it delivers
    /// `min(in_flight x read_bytes / latency, rate_max)` (Little's law below the knee, a
    /// plateau above it: a virtual disk, or a drive at its bandwidth).
    #[derive(Debug, Clone, Copy)]
    struct Device {
        latency_ns: f64,
        rate_max_bytes_per_ns: f64,
        read_bytes: u64,
    }

    impl Device {
        fn rate_bytes_per_ns(&self, in_flight: u64) -> f64 {
            (in_flight as f64 * self.read_bytes as f64 / self.latency_ns).min(self.rate_max_bytes_per_ns)
        }
        /// Reads in flight (whole scan) at which the plateau begins.
        fn knee_reads(&self) -> f64 {
            self.rate_max_bytes_per_ns * self.latency_ns / self.read_bytes as f64
        }
    }

    /// Runs the search against `device` for `reads_total` reads; `noise(i)` scales the time
    /// of read i (1.0: none). Returns the search at the end.
    fn simulate(device: Device, start: u32, max: u32, workers: u32, reads_total: u64, noise: &mut dyn FnMut(u64) -> f64) -> DepthSearch {
        let mut search = DepthSearch::new(start, max, workers);
        let (mut now_ns, mut bytes) = (0.0f64, 0u64);
        let mut depth = search.depth();
        for read in 1..=reads_total {
            let rate = device.rate_bytes_per_ns(depth as u64 * workers as u64);
            now_ns += device.read_bytes as f64 / rate * noise(read);
            bytes += device.read_bytes;
            depth = search.observe(read, bytes, now_ns as u64);
            assert!((1..=max).contains(&depth), "depth {depth} outside 1..={max}");
        }
        search
    }

    const MIB: u64 = 1 << 20;

    #[test]
    fn a_virtual_disk_gets_the_depth_it_needs() {
        // 2.5 GB/s at 10 ms: the plateau needs 25 MB in flight = 24 reads of 1 MiB, 12 per
        // worker of two. From 4: 4 → 8 → 16 (plateau) → 32 (no gain): keeps 32.
        let device = Device { latency_ns: 10e6, rate_max_bytes_per_ns: 2.5, read_bytes: MIB };
        let search = simulate(device, 4, 64, 2, 2_000, &mut |_| 1.0);
        assert!(search.is_settled());
        let depths: Vec<u32> = search.steps().iter().map(|s| s.depth).collect();
        assert_eq!(depths, vec![4, 8, 16, 32]);
        assert_eq!(search.depth(), 32);
        let rates: Vec<f64> = search.steps().iter().map(|s| s.mb_per_s).collect();
        assert!(rates[0] < rates[1] && rates[1] < rates[2], "{rates:?}");
        assert!((rates[2] - 2500.0).abs() < 1.0 && (rates[3] - 2500.0).abs() < 1.0, "{rates:?}");
    }

    #[test]
    fn a_device_that_does_not_care_keeps_the_start_plus_one_try() {
        // Already on the plateau at the start (a local drive, or a scan bound by its CPU):
        // one doubling is tried, gains nothing, and the search stops there.
        let device = Device { latency_ns: 0.1e6, rate_max_bytes_per_ns: 2.5, read_bytes: MIB };
        let search = simulate(device, 16, 64, 2, 2_000, &mut |_| 1.0);
        assert!(search.is_settled());
        assert_eq!(search.depth(), 32);
        assert_eq!(search.steps().len(), 2);
    }

    #[test]
    fn the_search_stops_at_its_maximum() {
        // A device that rises past the maximum: the search ends there and stays.
        let device = Device { latency_ns: 100e6, rate_max_bytes_per_ns: 100.0, read_bytes: MIB };
        let search = simulate(device, 2, 16, 2, 5_000, &mut |_| 1.0);
        assert!(search.is_settled());
        assert_eq!(search.depth(), 16);
        assert_eq!(search.steps().last().map(|s| s.depth), Some(16));
    }

    #[test]
    fn a_fixed_start_at_the_maximum_never_searches() {
        let device = Device { latency_ns: 10e6, rate_max_bytes_per_ns: 2.5, read_bytes: MIB };
        let search = simulate(device, 8, 8, 2, 500, &mut |_| 1.0);
        assert!(search.is_settled() && search.steps().is_empty());
        assert_eq!(search.depth(), 8);
    }

    #[test]
    fn auto_policy_is_bounded_by_bytes_in_flight() {
        assert_eq!(DepthPolicy::auto(16, 1 << 20), DepthPolicy::Auto { start: 16, max: 64 });
        assert_eq!(DepthPolicy::auto(16, 8 << 20), DepthPolicy::Auto { start: 8, max: 8 });
        assert_eq!(DepthPolicy::auto(16, 64 << 10), DepthPolicy::Auto { start: 16, max: 64 });
        assert_eq!(DepthPolicy::auto(0, 1 << 20), DepthPolicy::Auto { start: 1, max: 64 });
        assert_eq!(DepthPolicy::auto(16, 1 << 20).fitted(5, 1 << 20), DepthPolicy::Auto { start: 5, max: 5 });
        assert_eq!(DepthPolicy::auto(16, 64 << 10).fitted(1000, 4 << 20), DepthPolicy::Auto { start: 16, max: 16 });
        assert_eq!(DepthPolicy::auto(16, 64 << 10).fitted(1000, 64 << 10), DepthPolicy::Auto { start: 16, max: 64 });
        assert_eq!(DepthPolicy::Fixed(8).fitted(0, 1 << 20), DepthPolicy::Fixed(1));
        assert_eq!(DepthPolicy::Fixed(200).fitted(1000, 8 << 20), DepthPolicy::Fixed(200));
        assert_eq!(DepthPolicy::Fixed(8).slots(), 8);
    }

    #[test]
    fn workers_share_one_search() {
        // Four threads report chunks at once: every chunk is counted, the depth stays in
        // its bounds, and a device-less run (no time passes between most reports) settles.
        let depth = ScanDepth::new(DepthPolicy::Auto { start: 2, max: 32 }, 4);
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    for _ in 0..5_000 {
                        depth.chunk_done(4096);
                        let d = depth.depth();
                        assert!((2..=32).contains(&d), "{d}");
                    }
                });
            }
        });
        assert_eq!(depth.reads.load(Ordering::Relaxed), 20_000);
        assert_eq!(depth.bytes.load(Ordering::Relaxed), 20_000 * 4096);
        let figures = depth.figures();
        assert_eq!(figures.mode, "auto");
        assert!(figures.steps.windows(2).all(|w| w[1].depth == (w[0].depth * 2).min(32)), "{:?}", figures.steps);
        let fixed = ScanDepth::new(DepthPolicy::Fixed(8), 4);
        fixed.chunk_done(4096);
        assert_eq!((fixed.depth(), fixed.figures().mode, fixed.figures().steps.len()), (8, "fixed", 0));
    }

    proptest! {
        /// On any device of this shape, with up to ±2 % noise on every read, the search
        /// ends on the plateau when the maximum allows it (else at the maximum), never
        /// more than one doubling past the first depth on the plateau, never below its
        /// start.
        #[test]
        fn the_search_ends_on_the_plateau(
            latency_ms in 0.05f64..40.0,
            rate_gb_per_s in 0.2f64..8.0,
            read_kib in prop::sample::select(vec![64u64, 256, 1024, 4096]),
            start in 1u32..=16,
            max_extra_doublings in 0u32..=6,
            workers in 1u32..=4,
            seed in any::<u64>(),
        ) {
            let max = (start << max_extra_doublings).min(256);
            let device = Device { latency_ns: latency_ms * 1e6, rate_max_bytes_per_ns: rate_gb_per_s, read_bytes: read_kib * 1024 };
            let mut state = seed | 1;
            let mut noise = |_read: u64| {
                // xorshift: deterministic per case.
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                1.0 + ((state % 4001) as f64 / 4000.0 - 0.5) * 0.04
            };
            // Enough reads for every epoch of every doubling.
            let reads_total = (max as u64 * workers as u64) * (AUTO_DEPTH_EPOCH_ROUND_TRIPS + 1) * (max_extra_doublings as u64 + 2) * 2;
            let search = simulate(device, start, max, workers, reads_total, &mut noise);
            prop_assert!(search.is_settled(), "{:?}", search.steps());
            let depth = search.depth();
            prop_assert!(depth >= start && depth <= max);
            let knee_per_worker = device.knee_reads() / workers as f64;
            if (max as f64) >= knee_per_worker {
                prop_assert!(depth as f64 >= knee_per_worker * 0.95 || depth == max,
                    "depth {depth} below the knee {knee_per_worker:.1} per worker: {:?}", search.steps());
            } else {
                prop_assert_eq!(depth, max);
            }
            // Past the knee a doubling gains nothing (the noise of an epoch stays under
            // the 5 % a doubling must gain), so the search stops one doubling after the
            // first depth of its sequence at or past the knee.
            let mut on_plateau = start;
            while (on_plateau as f64) < knee_per_worker && on_plateau < max {
                on_plateau = (on_plateau * 2).min(max);
            }
            prop_assert!(depth <= (on_plateau * 2).min(max).max(start),
                "depth {depth} overshot: plateau from {on_plateau}: {:?}", search.steps());
        }
    }
}
