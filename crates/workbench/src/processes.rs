//! One job in several OS processes side by side (`--sweep processes=1,2,4`), as the
//! article's concurrent processes: each child is a whole `flashscan io` process with its own
//! engine, threads and address space, so what is measured is what N separate programs get.
//!
//! The parent prepares the files, then starts the children together; each reads its job (the
//! same job, with its own seed so the processes do not read the same offsets in step) as JSON
//! on stdin, runs it, and prints its raw outcome (counts, CPU and the full latency histograms)
//! as JSON on stdout. The parent adds them: rates and CPU add up, latency histograms merge
//! exactly, the window is the longest child's. Children start within milliseconds of each
//! other; the warm-up (run by every child) covers that skew.

use std::io::{Read, Write};
use std::process::{Command, Stdio};

use serde::{Deserialize, Serialize};

use crate::error::WorkbenchError;
use crate::job_file::JobFile;
use crate::runner::{self, IntervalOutcome, RunHooks, RunOutcome};
use crate::spec::JobSpec;
use crate::test_file::{prepare_targets, PreparedTarget, TargetNeeds};

/// Largest child answer read: histograms of a long run with many intervals stay far below.
const CHILD_OUTPUT_BYTES_MAX: u64 = 256 << 20;

/// What the parent sends a child on stdin.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChildRequest {
    pub job: JobFile,
    /// The parent's `--force` (never part of a job file).
    pub force: bool,
    pub process_index: u32,
}

/// The job child `index` runs: one process, its own seed.
fn child_job(job: &JobSpec, index: u32) -> JobSpec {
    JobSpec { processes: 1, seed: job.seed.wrapping_add(index as u64), ..job.clone() }
}

/// Runs `job` in `job.processes` children made by `spawn` (a `Command` for `flashscan io
/// --child`), and adds their outcomes. `on_interval` hears the merged intervals at the end.
pub fn run_in_processes(
    job: &JobSpec,
    targets: &[PreparedTarget],
    spawn: &dyn Fn() -> Command,
    on_interval: Option<&mut dyn FnMut(&IntervalOutcome)>,
) -> Result<RunOutcome, WorkbenchError> {
    let mut children = Vec::with_capacity(job.processes as usize);
    for index in 0..job.processes {
        let request = ChildRequest { job: JobFile::from_spec(&child_job(job, index), Some(targets), None), force: job.force, process_index: index };
        let started = serde_json::to_string(&request).map_err(|e| WorkbenchError::Child { index, what: e.to_string() }).and_then(|text| {
            let mut child = spawn()
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit())
                .spawn()
                .map_err(|e| WorkbenchError::Child { index, what: format!("cannot start: {e}") })?;
            if let Some(mut stdin) = child.stdin.take() {
                if let Err(e) = stdin.write_all(text.as_bytes()) {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err(WorkbenchError::Child { index, what: format!("cannot send the job: {e}") });
                }
            }
            Ok(child)
        });
        match started {
            Ok(child) => children.push(child),
            Err(e) => {
                // Stop the children this run started already; they would measure alone.
                for mut c in children {
                    let _ = c.kill();
                    let _ = c.wait();
                }
                return Err(e);
            }
        }
    }
    let mut outcomes = Vec::with_capacity(children.len());
    let mut first_error = None;
    for (index, mut child) in children.into_iter().enumerate() {
        let index = index as u32;
        let mut text = String::new();
        let read = child.stdout.take().map(|out| out.take(CHILD_OUTPUT_BYTES_MAX).read_to_string(&mut text));
        let status = child.wait();
        let result = match (read, status) {
            (Some(Ok(_)), Ok(status)) if status.success() => serde_json::from_str::<RunOutcome>(&text)
                .map_err(|e| WorkbenchError::Child { index, what: format!("unreadable result ({e})") }),
            (_, Ok(status)) => Err(WorkbenchError::Child { index, what: format!("failed ({status}); its error is above") }),
            (_, Err(e)) => Err(WorkbenchError::Child { index, what: e.to_string() }),
        };
        match result {
            Ok(o) => outcomes.push(o),
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    if let Some(e) = first_error {
        return Err(e);
    }
    Ok(merge_outcomes(outcomes, on_interval))
}

/// Adds the children's outcomes into one (threads renumbered per target, in process order).
pub fn merge_outcomes(outcomes: Vec<RunOutcome>, mut on_interval: Option<&mut dyn FnMut(&IntervalOutcome)>) -> RunOutcome {
    let mut merged = RunOutcome {
        engine_name: outcomes.first().map(|o| o.engine_name.clone()).unwrap_or_else(|| "none".into()),
        threads: Vec::new(),
        process_cpu: Default::default(),
        window: Default::default(),
        cpu_count: outcomes.first().map(|o| o.cpu_count).unwrap_or(1),
        intervals: Vec::new(),
    };
    for outcome in outcomes {
        for mut t in outcome.threads {
            t.thread_index = merged.threads.iter().filter(|m| m.target_index == t.target_index).count() as u32;
            merged.threads.push(t);
        }
        merged.process_cpu.user_us += outcome.process_cpu.user_us;
        merged.process_cpu.sys_us += outcome.process_cpu.sys_us;
        merged.window = merged.window.max(outcome.window);
        for i in outcome.intervals {
            match merged.intervals.iter_mut().find(|m| m.index == i.index) {
                Some(m) => m.merge(&i),
                None => merged.intervals.push(i),
            }
        }
    }
    merged.intervals.sort_by_key(|i| i.index);
    if let Some(f) = on_interval.as_mut() {
        for i in &merged.intervals {
            f(i);
        }
    }
    merged
}

/// The child's side: reads a [`ChildRequest`], runs it in this process, returns the outcome
/// as JSON for the parent.
pub fn run_child(request_json: &str, notice: &(dyn Fn(&str) + Sync)) -> Result<String, WorkbenchError> {
    let request: ChildRequest =
        serde_json::from_str(request_json).map_err(WorkbenchError::ChildRequest)?;
    let job = request.job.to_spec(request.force)?;
    let needs = TargetNeeds {
        writes: job.read_write.writes(),
        force: job.force,
        direct: job.direct,
        block_size_bytes: job.block_size_bytes,
        offset_bytes: job.offset_bytes,
    };
    let targets = prepare_targets(&job.targets, needs, job.seed, &mut |_| {})?;
    let outcome = runner::run_with(&job, &targets, notice, RunHooks::default())?;
    serde_json::to_string(&outcome).map_err(WorkbenchError::ChildReply)
}

/// How to start a child for `processes > 1`: a `Command` for `flashscan io --child`.
pub type ChildSpawner = dyn Fn() -> Command + Sync;

/// Runs one job: in this process (`processes == 1`), or in that many children.
pub fn run_job(
    job: &JobSpec,
    targets: &[PreparedTarget],
    notice: &(dyn Fn(&str) + Sync),
    spawn_child: Option<&ChildSpawner>,
    on_interval: Option<&mut dyn FnMut(&IntervalOutcome)>,
) -> Result<RunOutcome, WorkbenchError> {
    if job.processes <= 1 {
        return runner::run_with(job, targets, notice, RunHooks { on_interval, open_engine: None });
    }
    match spawn_child {
        Some(spawn) => run_in_processes(job, targets, spawn, on_interval),
        None => Err(WorkbenchError::NoChildProcesses { processes: job.processes }),
    }
}
