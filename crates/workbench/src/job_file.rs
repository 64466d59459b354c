//! Saved jobs (`--save-job FILE`, `--job FILE`): every setting of a run as JSON, so the same
//! test runs again here or on another machine. Every result carries its job (the `job`
//! field of `--json`), so a result is itself a job file, and a sweep's JSON (a list of
//! results) replays as the same sweep, point by point.
//!
//! What is not saved: `--force` (permission to write someone else's file is given by the
//! person running, never by a file handed to them) and the output flags.
//!
//! Durations are whole microseconds (`duration_us`), so a job round-trips exactly; the spec
//! parser rounds typed durations to the microsecond for the same reason.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Duration;

use flashscan_io::EngineKind;
use serde::{Deserialize, Serialize};

use crate::error::WorkbenchError;
use crate::spec::{check_job, JobSpec, Pattern, ReadWrite, SweepAxis, TargetSpec};
use crate::test_file::PreparedTarget;

/// Version of the job format: bump when a field changes meaning.
pub const JOB_FORMAT_VERSION: u32 = 1;
/// Largest job file read: a sweep's JSON with hundreds of points and per-thread figures
/// stays far below; anything larger is not a job file.
pub const JOB_FILE_BYTES_MAX: u64 = 64 << 20;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobTarget {
    pub path: PathBuf,
    pub threads: u32,
    pub cpu_mask: u64,
    /// The test file's size (the measured file's size in a result).
    pub size_bytes: Option<u64>,
}

/// One job as saved.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobFile {
    pub flashscan_job: u32,
    pub targets: Vec<JobTarget>,
    pub pattern: Pattern,
    /// read, write or mix.
    pub rw: String,
    pub write_pct: u32,
    pub block_size_bytes: u32,
    pub queue_depth: u32,
    pub duration_us: u64,
    pub warmup_us: u64,
    pub seed: u64,
    /// The engine asked for: auto, uring, psync or null.
    pub engine: String,
    pub direct: bool,
    pub sync: bool,
    pub offset_bytes: u64,
    pub status_interval_us: Option<u64>,
    pub processes: u32,
    /// For a point of a sweep: what the sweep varied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sweep: Option<SweepAxis>,
}

/// A saved sweep: its axis and every point, in order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SweepFile {
    pub flashscan_sweep: u32,
    pub axis: SweepAxis,
    pub points: Vec<JobFile>,
}

/// What a job file asks to run.
#[derive(Debug, Clone, PartialEq)]
pub enum JobDocument {
    Single(JobSpec),
    Sweep { axis: SweepAxis, points: Vec<JobSpec> },
}

fn engine_name(kind: EngineKind) -> &'static str {
    match kind {
        EngineKind::Auto => "auto",
        EngineKind::Uring => "uring",
        EngineKind::Psync => "psync",
        EngineKind::Null => "null",
    }
}

fn micros(d: Duration) -> u64 {
    d.as_micros().min(u64::MAX as u128) as u64
}

impl JobFile {
    /// The job as run; with `prepared`, targets name the files actually measured and their sizes.
    pub fn from_spec(job: &JobSpec, prepared: Option<&[PreparedTarget]>, sweep: Option<SweepAxis>) -> JobFile {
        let targets = job
            .targets
            .iter()
            .enumerate()
            .map(|(i, t)| match prepared.and_then(|p| p.get(i)) {
                Some(p) => JobTarget { path: p.path.clone(), threads: t.threads, cpu_mask: t.cpu_mask, size_bytes: Some(p.size_bytes) },
                None => JobTarget { path: t.path.clone(), threads: t.threads, cpu_mask: t.cpu_mask, size_bytes: t.size_bytes },
            })
            .collect();
        JobFile {
            flashscan_job: JOB_FORMAT_VERSION,
            targets,
            pattern: job.pattern,
            rw: job.read_write.name().to_string(),
            write_pct: job.read_write.write_pct(),
            block_size_bytes: job.block_size_bytes,
            queue_depth: job.queue_depth,
            duration_us: micros(job.duration),
            warmup_us: micros(job.warmup),
            seed: job.seed,
            engine: engine_name(job.engine).to_string(),
            direct: job.direct,
            sync: job.sync,
            offset_bytes: job.offset_bytes,
            status_interval_us: job.status_interval.map(micros),
            processes: job.processes,
            sweep,
        }
    }

    /// The checked job (`force` comes from the command line, never from the file).
    pub fn to_spec(&self, force: bool) -> Result<JobSpec, WorkbenchError> {
        let bad = |what: String| WorkbenchError::JobInFile(Box::new(WorkbenchError::Spec(what)));
        if self.flashscan_job != JOB_FORMAT_VERSION {
            return Err(bad(format!("format version {} is not {JOB_FORMAT_VERSION}; save the job again with this flashscan", self.flashscan_job)));
        }
        let read_write = match (self.rw.as_str(), self.write_pct) {
            ("read", 0) => ReadWrite::Read,
            ("write", 100) => ReadWrite::Write,
            ("mix", p) if p <= 100 => ReadWrite::Mix { write_pct: p },
            (rw, p) => return Err(bad(format!("rw `{rw}` with write_pct {p}: use read/0, write/100 or mix/0..=100"))),
        };
        let engine = EngineKind::parse(&self.engine).ok_or_else(|| bad(format!("engine `{}`: use auto, uring, psync or null", self.engine)))?;
        let job = JobSpec {
            targets: self
                .targets
                .iter()
                .map(|t| TargetSpec { path: t.path.clone(), threads: t.threads, cpu_mask: t.cpu_mask, size_bytes: t.size_bytes })
                .collect(),
            pattern: self.pattern,
            read_write,
            block_size_bytes: self.block_size_bytes,
            queue_depth: self.queue_depth,
            duration: Duration::from_micros(self.duration_us),
            warmup: Duration::from_micros(self.warmup_us),
            seed: self.seed,
            engine,
            direct: self.direct,
            force,
            offset_bytes: self.offset_bytes,
            sync: self.sync,
            status_interval: self.status_interval_us.map(Duration::from_micros),
            processes: self.processes,
        };
        check_job(&job).map_err(|e| WorkbenchError::JobInFile(Box::new(e)))?;
        Ok(job)
    }
}

/// The JSON `--save-job` writes for a single job.
pub fn single_to_json(job: &JobSpec, prepared: Option<&[PreparedTarget]>) -> String {
    crate::print_json::to_json(&JobFile::from_spec(job, prepared, None))
}

/// The JSON `--save-job` writes for a sweep.
pub fn sweep_to_json(axis: SweepAxis, points: &[JobSpec], prepared: Option<&[PreparedTarget]>) -> String {
    let file = SweepFile {
        flashscan_sweep: JOB_FORMAT_VERSION,
        axis,
        points: points.iter().map(|p| JobFile::from_spec(p, prepared, Some(axis))).collect(),
    };
    crate::print_json::to_json(&file)
}

/// Reads a job: a `--save-job` file, a result's `--json`, or a sweep's `--json`.
pub fn read_job_document(path: &Path, force: bool) -> Result<JobDocument, WorkbenchError> {
    let unreadable = |source| WorkbenchError::JobFileRead { path: path.to_path_buf(), source };
    let file = std::fs::File::open(path).map_err(unreadable)?;
    let mut text = String::new();
    file.take(JOB_FILE_BYTES_MAX + 1).read_to_string(&mut text).map_err(unreadable)?;
    if text.len() as u64 > JOB_FILE_BYTES_MAX {
        return Err(WorkbenchError::JobFileTooLarge { path: path.to_path_buf(), bytes_max: JOB_FILE_BYTES_MAX });
    }
    parse_job_document(&text, force).map_err(|e| WorkbenchError::JobFile { path: path.to_path_buf(), source: Box::new(e) })
}

/// [`read_job_document`] on text already read.
pub fn parse_job_document(text: &str, force: bool) -> Result<JobDocument, WorkbenchError> {
    let what = "not a flashscan job: expected the file --save-job wrote, or a result's --json";
    let value: serde_json::Value = serde_json::from_str(text).map_err(|source| WorkbenchError::JobJson { what, source })?;
    let job_of = |v: &serde_json::Value| -> Result<JobFile, WorkbenchError> {
        serde_json::from_value::<JobFile>(v.clone()).map_err(|source| WorkbenchError::JobJson { what: "job", source })
    };
    match &value {
        serde_json::Value::Array(results) => {
            if results.is_empty() {
                return Err(WorkbenchError::JobDocument("an empty list: no sweep point to replay".into()));
            }
            let mut points = Vec::with_capacity(results.len());
            let mut axis = SweepAxis::Matrix;
            for (i, r) in results.iter().enumerate() {
                let job = r.get("job").ok_or_else(|| WorkbenchError::JobDocument(format!("list entry {i} has no `job`: {what}")))?;
                let file = job_of(job)?;
                axis = file.sweep.unwrap_or(axis);
                points.push(file.to_spec(force)?);
            }
            Ok(JobDocument::Sweep { axis, points })
        }
        serde_json::Value::Object(map) if map.contains_key("flashscan_sweep") => {
            let sweep: SweepFile = serde_json::from_value(value.clone()).map_err(|source| WorkbenchError::JobJson { what: "sweep", source })?;
            if sweep.flashscan_sweep != JOB_FORMAT_VERSION {
                return Err(WorkbenchError::JobDocument(format!("sweep format version {} is not {JOB_FORMAT_VERSION}", sweep.flashscan_sweep)));
            }
            if sweep.points.is_empty() {
                return Err(WorkbenchError::JobDocument("a sweep with no points".into()));
            }
            let points = sweep.points.iter().map(|p| p.to_spec(force)).collect::<Result<Vec<_>, _>>()?;
            Ok(JobDocument::Sweep { axis: sweep.axis, points })
        }
        serde_json::Value::Object(map) if map.contains_key("job") && !map.contains_key("flashscan_job") => {
            Ok(JobDocument::Single(job_of(&map["job"])?.to_spec(force)?))
        }
        serde_json::Value::Object(_) => Ok(JobDocument::Single(job_of(&value)?.to_spec(force)?)),
        _ => Err(WorkbenchError::JobDocument(what.into())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::JobOptions;

    fn options() -> JobOptions {
        JobOptions {
            targets: vec![PathBuf::from("/data/a.dat"), PathBuf::from("/data/b.dat")],
            pattern: "seq".into(),
            read_write: "mix".into(),
            write_pct: Some(30),
            block_size: Some("60K".into()),
            threads: Some("3".into()),
            queue_depth: Some("4".into()),
            duration: "2.5s".into(),
            warmup: "250ms".into(),
            size: Some("64M".into()),
            offset: Some("1M".into()),
            seed: 99,
            engine: "psync".into(),
            buffered: false,
            force: false,
            sync: true,
            status_interval: Some("500ms".into()),
            ..JobOptions::default()
        }
    }

    #[test]
    fn a_job_round_trips_exactly() {
        let job = options().job().unwrap();
        let text = single_to_json(&job, None);
        match parse_job_document(&text, false).unwrap() {
            JobDocument::Single(back) => assert_eq!(back, job),
            other => panic!("{other:?}"),
        }
        // A result's JSON: the job under `job`, beside the figures.
        let result = format!("{{\"iops\": 1.0, \"job\": {text}}}");
        assert_eq!(parse_job_document(&result, false).unwrap(), JobDocument::Single(job.clone()));
        // Force is never taken from a file.
        let forced = JobSpec { force: true, ..job.clone() };
        assert_eq!(single_to_json(&forced, None), text);
    }

    #[test]
    fn a_sweep_round_trips_and_a_results_list_replays_it() {
        let o = JobOptions { threads: None, status_interval: None, ..options() };
        let sweep = o.sweep_axis("threads=1,2,4").unwrap();
        let points = sweep.points();
        let text = sweep_to_json(sweep.axis, &points, None);
        assert_eq!(parse_job_document(&text, false).unwrap(), JobDocument::Sweep { axis: SweepAxis::Threads, points: points.clone() });
        let list: Vec<String> = points
            .iter()
            .map(|p| format!("{{\"job\": {}}}", crate::print_json::to_json(&JobFile::from_spec(p, None, Some(SweepAxis::Threads)))))
            .collect();
        let list = format!("[{}]", list.join(","));
        assert_eq!(parse_job_document(&list, false).unwrap(), JobDocument::Sweep { axis: SweepAxis::Threads, points });
    }

    #[test]
    fn bad_job_files_are_refused_with_one_line() {
        let job = options().job().unwrap();
        let good = single_to_json(&job, None);
        let cases = [
            ("{", "not a flashscan job"),
            ("42", "not a flashscan job"),
            ("[]", "empty list"),
            ("[{\"iops\": 1}]", "no `job`"),
            (&good.replace("\"queue_depth\": 4", "\"queue_depth\": 0"), "queue depth"),
            (&good.replace("\"block_size_bytes\": 61440", "\"block_size_bytes\": 100"), "block size"),
            (&good.replace("\"flashscan_job\": 1", "\"flashscan_job\": 9"), "version"),
            (&good.replace("\"engine\": \"psync\"", "\"engine\": \"spdk\""), "engine"),
            (&good.replace("\"rw\": \"mix\"", "\"rw\": \"sideways\""), "rw"),
            (&good.replace("\"seed\": 99", "\"seed\": 99, \"surprise\": 1"), "surprise"),
            (&good.replace("\"processes\": 1", "\"processes\": 1000"), "processes"),
            (&good.replace("\"size_bytes\": 67108864", "\"size_bytes\": 18446744073709551615"), "size"),
        ];
        for (text, needle) in cases {
            let e = parse_job_document(text, false).expect_err(needle).to_string();
            assert!(e.contains(needle), "`{e}` lacks `{needle}`");
            assert_eq!(e.lines().count(), 1, "{e}");
        }
    }
}
