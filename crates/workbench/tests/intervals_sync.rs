//! Per-interval series and `--sync` on real files: the intervals' deltas add up to the
//! totals exactly, and with `--sync` every write goes through a descriptor opened O_DSYNC,
//! as the simulated engine's flush accounting sees.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use flashscan_io::sim::{FaultPlan, SimEngine};
use flashscan_io::{EngineConfig, EngineKind, FileSet, IoEngine, IoError};
use flashscan_workbench::runner::{self, IntervalOutcome, RunHooks};
use flashscan_workbench::spec::{JobSpec, Pattern, ReadWrite, TargetSpec};
use flashscan_workbench::Report;

mod common;
use common::prepare;

fn job(dir: &Path, engine: EngineKind, read_write: ReadWrite, threads: u32) -> JobSpec {
    JobSpec {
        targets: vec![TargetSpec { path: dir.to_path_buf(), threads, cpu_mask: 0, size_bytes: Some(4 << 20) }],
        queue_depth: 2,
        duration: Duration::from_millis(700),
        seed: 3,
        direct: false,
        ..common::job(dir, engine, read_write, Pattern::Sequential)
    }
}

#[test]
fn interval_deltas_add_up_to_the_totals() {
    let dir = tempfile::tempdir().unwrap();
    for (engine, rw, threads) in [
        (EngineKind::Psync, ReadWrite::Read, 2),
        (EngineKind::Uring, ReadWrite::Mix { write_pct: 40 }, 3),
        (EngineKind::Null, ReadWrite::Write, 1),
    ] {
        let mut j = job(dir.path(), engine, rw, threads);
        // 700 ms in 200 ms intervals: three full ones and a last of 100 ms.
        j.status_interval = Some(Duration::from_millis(200));
        let targets = prepare(&j);
        let mut heard: Vec<IntervalOutcome> = Vec::new();
        let mut on_interval = |i: &IntervalOutcome| heard.push(i.clone());
        let outcome = runner::run_with(&j, &targets, &|_| {}, RunHooks { on_interval: Some(&mut on_interval), open_engine: None }).unwrap();
        assert_eq!(outcome.intervals.len(), 4, "{engine:?}");
        assert_eq!(heard.len(), 4, "every interval is passed on, in order");
        assert!(heard.iter().enumerate().all(|(k, i)| i.index as usize == k && i.parts_count == threads));
        assert_eq!(outcome.intervals[3].length, Duration::from_millis(100));
        let report = Report::new(&j, &targets, &outcome);
        let f = &report.figures;
        assert!(f.ios_count > 0);
        let sum = |g: fn(&flashscan_workbench::report::IntervalReport) -> u64| report.intervals.iter().map(g).sum::<u64>();
        assert_eq!(sum(|i| i.figures.reads_count), f.reads_count, "{engine:?} reads");
        assert_eq!(sum(|i| i.figures.writes_count), f.writes_count, "{engine:?} writes");
        assert_eq!(sum(|i| i.figures.bytes_read + i.figures.bytes_written), f.bytes_read + f.bytes_written);
        // The merged interval histograms hold every counted I/O once.
        let latency_count: u64 = outcome.intervals.iter().map(|i| i.io.read_latency.count() + i.io.write_latency.count()).sum();
        assert_eq!(latency_count, f.ios_count);
        // t_s is the end of each interval; the last ends at the duration.
        assert!((report.intervals[3].t_s - 0.7).abs() < 1e-9);
        assert!(report.intervals.iter().all(|i| i.figures.latency_us.p50 <= i.figures.latency_us.p99));
    }
}

/// An opener that builds the simulated engine and keeps each engine's flush counter.
type Counters = Arc<Mutex<Vec<Arc<AtomicU64>>>>;

fn sim_opener(counters: Counters) -> impl Fn(EngineKind, Arc<FileSet>, EngineConfig, &mut dyn FnMut(&str)) -> Result<Box<dyn IoEngine>, IoError> + Sync {
    move |_, files, config, _| {
        let engine = SimEngine::new(files, config, FaultPlan::default())?;
        counters.lock().unwrap().push(engine.flushed_writes_counter());
        Ok(Box::new(engine) as Box<dyn IoEngine>)
    }
}

#[test]
fn sync_writes_are_flushed_one_by_one() {
    let dir = tempfile::tempdir().unwrap();
    for (sync, block_size_bytes, queue_depth) in [(true, 512, 1), (true, 61440, 4), (false, 4096, 1)] {
        let mut j = job(dir.path(), EngineKind::Psync, ReadWrite::Write, 2);
        j.sync = sync;
        j.block_size_bytes = block_size_bytes;
        j.queue_depth = queue_depth;
        j.duration = Duration::from_millis(300);
        let targets = prepare(&j);
        let counters: Counters = Arc::new(Mutex::new(Vec::new()));
        let opener = sim_opener(counters.clone());
        let outcome = runner::run_with(&j, &targets, &|_| {}, RunHooks { on_interval: None, open_engine: Some(&opener) }).unwrap();
        assert_eq!(outcome.engine_name, "sim");
        let report = Report::new(&j, &targets, &outcome);
        let writes = report.figures.writes_count;
        assert!(writes > 0);
        let counters = counters.lock().unwrap().clone();
        assert_eq!(counters.len(), 2, "one engine per thread");
        let flushed: u64 = counters.iter().map(|c| c.load(Ordering::Relaxed)).sum();
        if sync {
            // Warm-up and the final drain write too, uncounted: flushed >= counted, never fewer.
            assert!(flushed >= writes, "{flushed} flushed of {writes} counted writes");
            assert!(report.sync && report.job.sync);
        } else {
            assert_eq!(flushed, 0, "without --sync no write is flushed");
        }
    }
}
