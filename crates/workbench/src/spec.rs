//! What to run: the options as the user gave them ([`JobOptions`], strings from the command
//! line) and the checked job ([`JobSpec`]) or sweep ([`SweepSpec`]) the runner executes.
//! All validation happens here, before any file is touched, so bad input costs nothing.

use std::path::PathBuf;
use std::time::Duration;

use flashscan_io::limits::{ARENA_BYTES_MAX, IO_SIZE_BYTES_MAX, IO_SIZE_BYTES_MIN, QUEUE_DEPTH_MAX};
use flashscan_io::EngineKind;
use serde::{Deserialize, Serialize};

use crate::error::WorkbenchError;
use crate::param_file;
use crate::size::{format_size_bytes, parse_count_list, parse_duration, parse_size_bytes, parse_size_list};

/// Threads per target, a bound so a typo (`-t 1000`) does not fork a thousand threads.
pub const THREADS_PER_TARGET_MAX: u32 = 64;
/// Threads over all targets.
pub const THREADS_TOTAL_MAX: u32 = 256;
/// Longest measured duration accepted (a day); longer is almost surely a typo.
pub const DURATION_MAX: Duration = Duration::from_secs(24 * 3600);
/// Shortest measured duration: below this the CPU clock's tick makes the figures noise.
pub const DURATION_MIN: Duration = Duration::from_millis(100);
pub const WARMUP_MAX: Duration = Duration::from_secs(3600);
/// Shortest `--status-interval`: below this a line per interval floods the terminal and the
/// per-interval percentiles rest on too few I/Os to mean anything.
pub const STATUS_INTERVAL_MIN: Duration = Duration::from_millis(100);
/// Separate processes per job (`--sweep processes=`): each is a whole `flashscan` process.
pub const PROCESSES_MAX: u32 = 64;
/// Values in one `--sweep AXIS=LIST`: each is a full run, so a long list is almost surely a typo.
pub const SWEEP_VALUES_MAX: usize = 64;
/// Size of a test file flashscan creates when neither `--size` nor the parameter file says.
pub const TEST_FILE_SIZE_BYTES_DEFAULT: u64 = 1 << 30;
/// Largest test file accepted (1 PiB): past any device we target, and small enough that
/// every offset and size sum below stays far from u64 overflow (`--size 18446744073709551615`
/// once wrapped to 0 and left a file behind).
pub const TEST_FILE_SIZE_BYTES_MAX: u64 = 1 << 50;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Pattern {
    Random,
    Sequential,
}

impl Pattern {
    pub fn parse(text: &str) -> Result<Pattern, WorkbenchError> {
        match text.to_ascii_lowercase().as_str() {
            "random" | "rand" | "r" => Ok(Pattern::Random),
            "sequential" | "seq" | "s" => Ok(Pattern::Sequential),
            _ => Err(WorkbenchError::Spec(format!("unknown pattern `{text}`: use random or seq"))),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Pattern::Random => "random",
            Pattern::Sequential => "sequential",
        }
    }
}

/// Reads, writes, or a mix given by the percentage of writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadWrite {
    Read,
    Write,
    Mix { write_pct: u32 },
}

impl ReadWrite {
    pub fn write_pct(self) -> u32 {
        match self {
            ReadWrite::Read => 0,
            ReadWrite::Write => 100,
            ReadWrite::Mix { write_pct } => write_pct,
        }
    }

    pub fn writes(self) -> bool {
        self.write_pct() > 0
    }

    pub fn name(self) -> &'static str {
        match self {
            ReadWrite::Read => "read",
            ReadWrite::Write => "write",
            ReadWrite::Mix { .. } => "mix",
        }
    }
}

/// One target as given: a file or a directory, with its own thread count and CPU mask
/// (the four columns of a SQLIO parameter file).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TargetSpec {
    pub path: PathBuf,
    pub threads: u32,
    /// CPUs the target's threads may run on (bit n = CPU n); 0 lets the kernel choose.
    pub cpu_mask: u64,
    /// Size of the test file; `None` means the existing file's size, or the default.
    pub size_bytes: Option<u64>,
}

/// A checked job: everything the runner needs for one measurement.
#[derive(Debug, Clone, PartialEq)]
pub struct JobSpec {
    pub targets: Vec<TargetSpec>,
    pub pattern: Pattern,
    pub read_write: ReadWrite,
    pub block_size_bytes: u32,
    /// Outstanding I/Os per thread.
    pub queue_depth: u32,
    pub duration: Duration,
    pub warmup: Duration,
    pub seed: u64,
    pub engine: EngineKind,
    /// O_DIRECT (the default); false with `--buffered`.
    pub direct: bool,
    /// Allows writing to files flashscan did not create.
    pub force: bool,
    /// Start of the tested region in every file.
    pub offset_bytes: u64,
    /// `--sync`: files opened with O_DSYNC, so each write is durable before it completes
    /// and is counted (the wait of a log flush at commit).
    pub sync: bool,
    /// `--status-interval`: also measure each interval of this length (deltas, not totals).
    pub status_interval: Option<Duration>,
    /// Separate OS processes running the job side by side (1: this process only).
    pub processes: u32,
}

/// What a sweep varies: the IOMeter matrix (x axis: queue depth), or one concurrency knob
/// with everything else held at the single job's values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SweepAxis {
    Matrix,
    #[serde(alias = "queue_depth")]
    Qd,
    Threads,
    Processes,
}

impl SweepAxis {
    pub fn name(self) -> &'static str {
        match self {
            SweepAxis::Matrix => "matrix",
            SweepAxis::Qd => "qd",
            SweepAxis::Threads => "threads",
            SweepAxis::Processes => "processes",
        }
    }

    /// The x-axis label of the sweep's chart.
    pub fn label(self) -> &'static str {
        match self {
            SweepAxis::Matrix | SweepAxis::Qd => "outstanding I/Os per thread",
            SweepAxis::Threads => "threads per target",
            SweepAxis::Processes => "separate processes",
        }
    }

    /// The swept value of one point.
    pub fn value_of(self, job: &JobSpec) -> u32 {
        match self {
            SweepAxis::Matrix | SweepAxis::Qd => job.queue_depth,
            SweepAxis::Threads => job.targets.first().map(|t| t.threads).unwrap_or(1),
            SweepAxis::Processes => job.processes,
        }
    }
}

/// Parses `--sweep AXIS=LIST` (`threads=1,2,4`, `processes=1,2,4,8`, `qd=1,4,16`): one line
/// naming what is wrong otherwise. Values must be whole, distinct, within the axis's bounds.
pub fn parse_sweep_axis(text: &str) -> Result<(SweepAxis, Vec<u32>), WorkbenchError> {
    let usage = "use threads=1,2,4, processes=1,2,4 or qd=1,4,16 (or --sweep alone for the IOMeter matrix)";
    let Some((axis_text, list)) = text.split_once('=') else {
        return Err(spec_error(format!("--sweep `{text}`: expected AXIS=LIST; {usage}; put targets before --sweep")));
    };
    let (axis, max) = match axis_text.trim().to_ascii_lowercase().as_str() {
        "threads" | "t" => (SweepAxis::Threads, THREADS_PER_TARGET_MAX),
        "processes" | "procs" | "p" => (SweepAxis::Processes, PROCESSES_MAX),
        "qd" | "queue_depth" | "outstanding" | "o" => (SweepAxis::Qd, QUEUE_DEPTH_MAX),
        other => return Err(spec_error(format!("--sweep: unknown axis `{other}`; {usage}"))),
    };
    if list.trim().is_empty() {
        return Err(spec_error(format!("--sweep {}= has no values; {usage}", axis.name())));
    }
    let values = parse_count_list(list, &format!("{} value in --sweep", axis.name())).map_err(|e| spec_error(format!("--sweep {e}")))?;
    if values.len() > SWEEP_VALUES_MAX {
        return Err(spec_error(format!("--sweep {}: {} values; use at most {SWEEP_VALUES_MAX}", axis.name(), values.len())));
    }
    for (i, &v) in values.iter().enumerate() {
        if v == 0 || v > max {
            return Err(spec_error(format!("--sweep {}={v}: each value must be 1..={max}", axis.name())));
        }
        if values[..i].contains(&v) {
            return Err(spec_error(format!("--sweep {}: {v} appears twice; list each value once", axis.name())));
        }
    }
    Ok((axis, values))
}

/// The IOMeter matrix: every combination is one [`JobSpec`] derived from `base`.
#[derive(Debug, Clone, PartialEq)]
pub struct SweepSpec {
    pub base: JobSpec,
    pub patterns: Vec<Pattern>,
    pub read_writes: Vec<ReadWrite>,
    pub block_sizes_bytes: Vec<u32>,
    pub queue_depths: Vec<u32>,
    /// Threads per target; empty keeps each target's own count.
    pub thread_counts: Vec<u32>,
    /// Separate processes; empty keeps the base job's count.
    pub process_counts: Vec<u32>,
    pub axis: SweepAxis,
}

pub const SWEEP_BLOCK_SIZES_DEFAULT: &str = "8K,64K,256K";
pub const SWEEP_QUEUE_DEPTHS_DEFAULT: &str = "1,2,4,8,16,32,64,128";

impl SweepSpec {
    /// Every point of the matrix, in the order they run: pattern, direction, block size,
    /// threads, then queue depth innermost (the chart's x axis).
    pub fn points(&self) -> Vec<JobSpec> {
        let threads: Vec<Option<u32>> =
            if self.thread_counts.is_empty() { vec![None] } else { self.thread_counts.iter().map(|t| Some(*t)).collect() };
        let processes: Vec<u32> = if self.process_counts.is_empty() { vec![self.base.processes] } else { self.process_counts.clone() };
        let mut out = Vec::new();
        for &pattern in &self.patterns {
            for &read_write in &self.read_writes {
                for &block_size_bytes in &self.block_sizes_bytes {
                    for &t in &threads {
                        for &process_count in &processes {
                            for &queue_depth in &self.queue_depths {
                                let mut job = self.base.clone();
                                job.pattern = pattern;
                                job.read_write = read_write;
                                job.block_size_bytes = block_size_bytes;
                                job.queue_depth = queue_depth;
                                job.processes = process_count;
                                if let Some(t) = t {
                                    for target in &mut job.targets {
                                        target.threads = t;
                                    }
                                }
                                out.push(job);
                            }
                        }
                    }
                }
            }
        }
        out
    }
}

/// The options as typed; [`JobOptions::job`] and [`JobOptions::sweep`] check them.
#[derive(Debug, Clone)]
pub struct JobOptions {
    pub targets: Vec<PathBuf>,
    pub param_file: Option<PathBuf>,
    pub pattern: String,
    pub read_write: String,
    pub write_pct: Option<u32>,
    /// One size, or a list for `--sweep`.
    pub block_size: Option<String>,
    /// One count, or a list for `--sweep`; `None` keeps parameter-file counts (else 1).
    pub threads: Option<String>,
    /// One depth, or a list for `--sweep`.
    pub queue_depth: Option<String>,
    pub duration: String,
    pub warmup: String,
    pub size: Option<String>,
    pub offset: Option<String>,
    pub seed: u64,
    pub engine: String,
    pub buffered: bool,
    pub force: bool,
    pub sync: bool,
    pub status_interval: Option<String>,
}

impl Default for JobOptions {
    fn default() -> JobOptions {
        JobOptions {
            targets: Vec::new(),
            param_file: None,
            pattern: "random".into(),
            read_write: "read".into(),
            write_pct: None,
            block_size: None,
            threads: None,
            queue_depth: None,
            duration: "10s".into(),
            warmup: "1s".into(),
            size: None,
            offset: None,
            seed: 1,
            engine: "auto".into(),
            buffered: false,
            force: false,
            sync: false,
            status_interval: None,
        }
    }
}

fn spec_error(message: String) -> WorkbenchError {
    WorkbenchError::Spec(message)
}

impl JobOptions {
    /// A single measurement: every list option must hold one value.
    pub fn job(&self) -> Result<JobSpec, WorkbenchError> {
        let (base, block_sizes, depths, threads) = self.parse_common("8K", "8")?;
        let one = |values: &[u32], flag: &str| -> Result<u32, WorkbenchError> {
            match values {
                [v] => Ok(*v),
                _ => Err(spec_error(format!("{flag} takes one value unless --sweep is given"))),
            }
        };
        let mut job = base;
        job.block_size_bytes = one(&block_sizes, "-b")?;
        job.queue_depth = one(&depths, "-o")?;
        if let Some(threads) = threads {
            let t = one(&threads, "-t")?;
            for target in &mut job.targets {
                target.threads = t;
            }
        }
        check_job(&job)?;
        Ok(job)
    }

    /// The IOMeter matrix. Pattern and direction sweep both ways unless the user named one
    /// with `--pattern` / `--rw` explicitly (`explicit_pattern`, `explicit_rw`).
    pub fn sweep(&self, explicit_pattern: bool, explicit_rw: bool) -> Result<SweepSpec, WorkbenchError> {
        let (base, block_sizes, depths, threads) = self.parse_common(SWEEP_BLOCK_SIZES_DEFAULT, SWEEP_QUEUE_DEPTHS_DEFAULT)?;
        let sweep = SweepSpec {
            patterns: if explicit_pattern { vec![base.pattern] } else { vec![Pattern::Sequential, Pattern::Random] },
            read_writes: if explicit_rw { vec![base.read_write] } else { vec![ReadWrite::Read, ReadWrite::Write] },
            block_sizes_bytes: block_sizes,
            queue_depths: depths,
            thread_counts: threads.unwrap_or_default(),
            process_counts: Vec::new(),
            axis: SweepAxis::Matrix,
            base,
        };
        for job in sweep.points() {
            check_job(&job)?;
        }
        Ok(sweep)
    }

    /// `--sweep AXIS=LIST`: the single job of the other flags, run once per value of one
    /// knob (threads per target, separate processes, or queue depth).
    pub fn sweep_axis(&self, axis_text: &str) -> Result<SweepSpec, WorkbenchError> {
        let (axis, values) = parse_sweep_axis(axis_text)?;
        let flag = match axis {
            SweepAxis::Threads => Some(("-t", &self.threads)),
            SweepAxis::Qd => Some(("-o", &self.queue_depth)),
            SweepAxis::Processes | SweepAxis::Matrix => None,
        };
        if let Some((flag, Some(_))) = flag {
            return Err(spec_error(format!("{flag} and --sweep {} both set it; give the values only in --sweep", axis.name())));
        }
        let base = self.job()?;
        let sweep = SweepSpec {
            patterns: vec![base.pattern],
            read_writes: vec![base.read_write],
            block_sizes_bytes: vec![base.block_size_bytes],
            queue_depths: if axis == SweepAxis::Qd { values.clone() } else { vec![base.queue_depth] },
            thread_counts: if axis == SweepAxis::Threads { values.clone() } else { Vec::new() },
            process_counts: if axis == SweepAxis::Processes { values } else { Vec::new() },
            axis,
            base,
        };
        for job in sweep.points() {
            check_job(&job)?;
        }
        Ok(sweep)
    }

    #[allow(clippy::type_complexity)]
    fn parse_common(
        &self,
        block_size_default: &str,
        depth_default: &str,
    ) -> Result<(JobSpec, Vec<u32>, Vec<u32>, Option<Vec<u32>>), WorkbenchError> {
        let mut targets: Vec<TargetSpec> = Vec::new();
        if let Some(param_path) = &self.param_file {
            targets.extend(param_file::read(param_path)?);
        }
        for path in &self.targets {
            targets.push(TargetSpec { path: path.clone(), threads: 1, cpu_mask: 0, size_bytes: None });
        }
        if targets.is_empty() {
            return Err(spec_error("no target: name a file or directory, or a parameter file with -F".into()));
        }
        let size_bytes = match &self.size {
            Some(s) => Some(parse_size_bytes(s).map_err(|e| spec_error(format!("--size {e}")))?),
            None => None,
        };
        if size_bytes == Some(0) {
            return Err(spec_error("--size must be greater than zero".into()));
        }
        for t in &mut targets {
            if t.size_bytes.is_none() {
                t.size_bytes = size_bytes;
            }
        }
        let pattern = Pattern::parse(&self.pattern)?;
        let read_write = match (self.read_write.to_ascii_lowercase().as_str(), self.write_pct) {
            ("read" | "r", None) => ReadWrite::Read,
            ("write" | "w", None) => ReadWrite::Write,
            ("mix" | "rw" | "randrw", Some(p)) if p <= 100 => ReadWrite::Mix { write_pct: p },
            ("mix" | "rw" | "randrw", Some(p)) => {
                return Err(spec_error(format!("--write-pct {p} is not a percentage (0..=100)")));
            }
            ("mix" | "rw" | "randrw", None) => {
                return Err(spec_error("--rw mix needs --write-pct (e.g. --write-pct 30 for 70% reads, 30% writes)".into()));
            }
            ("read" | "r" | "write" | "w", Some(_)) => {
                return Err(spec_error("--write-pct goes with --rw mix".into()));
            }
            (other, _) => return Err(spec_error(format!("unknown --rw `{other}`: use read, write or mix"))),
        };
        let block_sizes: Vec<u32> = parse_size_list(self.block_size.as_deref().unwrap_or(block_size_default))
            .map_err(|e| spec_error(format!("-b {e}")))?
            .into_iter()
            .map(|b| check_block_size(b, !self.buffered))
            .collect::<Result<_, _>>()?;
        let depths = parse_count_list(self.queue_depth.as_deref().unwrap_or(depth_default), "queue depth (-o)").map_err(spec_error)?;
        for &d in &depths {
            if d == 0 || d > QUEUE_DEPTH_MAX {
                return Err(spec_error(format!("-o {d}: outstanding I/Os per thread must be 1..={QUEUE_DEPTH_MAX}")));
            }
        }
        let threads = match &self.threads {
            Some(t) => Some(parse_count_list(t, "thread count (-t)").map_err(spec_error)?),
            None => None,
        };
        let duration = parse_duration(&self.duration).map_err(|e| spec_error(format!("-d {e}")))?;
        let warmup = parse_duration(&self.warmup).map_err(|e| spec_error(format!("--warmup {e}")))?;
        let offset_bytes = match &self.offset {
            Some(o) => parse_size_bytes(o).map_err(|e| spec_error(format!("--offset {e}")))?,
            None => 0,
        };
        let engine = EngineKind::parse(&self.engine)
            .ok_or_else(|| spec_error(format!("unknown --engine `{}`: use auto, uring, psync or null", self.engine)))?;
        let base = JobSpec {
            targets,
            pattern,
            read_write,
            block_size_bytes: block_sizes[0],
            queue_depth: depths[0],
            duration,
            warmup,
            seed: self.seed,
            engine,
            direct: !self.buffered,
            force: self.force,
            offset_bytes,
            sync: self.sync,
            status_interval: match &self.status_interval {
                Some(text) => Some(parse_duration(text).map_err(|e| spec_error(format!("--status-interval {e}")))?),
                None => None,
            },
            processes: 1,
        };
        Ok((base, block_sizes, depths, threads))
    }
}

fn check_block_size(bytes: u64, direct: bool) -> Result<u32, WorkbenchError> {
    if bytes < IO_SIZE_BYTES_MIN as u64 || bytes > IO_SIZE_BYTES_MAX as u64 {
        return Err(spec_error(format!(
            "-b {}: block size must be between {} and {} bytes (512 to 8M)",
            bytes, IO_SIZE_BYTES_MIN, IO_SIZE_BYTES_MAX
        )));
    }
    if direct && bytes % 512 != 0 {
        return Err(spec_error(format!(
            "-b {bytes}: O_DIRECT needs a block size that is a multiple of 512 bytes (the device's sector); use a multiple of 512, or --buffered"
        )));
    }
    Ok(bytes as u32)
}

/// Checks that hold for every job, single or swept.
pub fn check_job(job: &JobSpec) -> Result<(), WorkbenchError> {
    if job.duration.is_zero() {
        return Err(spec_error("-d 0: the duration must be greater than zero (e.g. -d 10)".into()));
    }
    if job.duration < DURATION_MIN {
        return Err(spec_error(format!("-d {:?}: too short to measure; use at least 100ms", job.duration)));
    }
    if job.duration > DURATION_MAX {
        return Err(spec_error(format!("-d {}s is absurdly long; use at most 24h (e.g. -d 60)", job.duration.as_secs())));
    }
    if let Some(interval) = job.status_interval {
        if interval < STATUS_INTERVAL_MIN || interval > job.duration {
            return Err(spec_error(format!(
                "--status-interval {:?}: use at least 100ms and at most the duration ({:?}), e.g. --status-interval 1",
                interval, job.duration
            )));
        }
    }
    if job.sync && !job.read_write.writes() {
        return Err(spec_error("--sync makes each write durable before it counts: it needs --rw write or --rw mix".into()));
    }
    if job.processes == 0 || job.processes > PROCESSES_MAX {
        return Err(spec_error(format!("{} processes: use 1..={PROCESSES_MAX}", job.processes)));
    }
    if job.block_size_bytes < IO_SIZE_BYTES_MIN as u32 || job.block_size_bytes as usize > IO_SIZE_BYTES_MAX {
        return Err(spec_error(format!("block size {} bytes: use {IO_SIZE_BYTES_MIN}..={IO_SIZE_BYTES_MAX}", job.block_size_bytes)));
    }
    if job.direct && job.block_size_bytes % 512 != 0 {
        return Err(spec_error(format!("block size {} bytes: O_DIRECT needs a multiple of 512; use --buffered", job.block_size_bytes)));
    }
    if job.queue_depth == 0 || job.queue_depth > QUEUE_DEPTH_MAX {
        return Err(spec_error(format!("queue depth {}: use 1..={QUEUE_DEPTH_MAX}", job.queue_depth)));
    }
    if job.targets.is_empty() {
        return Err(spec_error("no target: name a file or directory".into()));
    }
    if let ReadWrite::Mix { write_pct } = job.read_write {
        if write_pct > 100 {
            return Err(spec_error(format!("write percentage {write_pct} is not a percentage (0..=100)")));
        }
    }
    if job.warmup > WARMUP_MAX {
        return Err(spec_error(format!("--warmup {}s is too long; use at most 1h", job.warmup.as_secs())));
    }
    if job.direct && job.offset_bytes % 512 != 0 {
        return Err(spec_error(format!(
            "--offset {}: O_DIRECT needs an offset that is a multiple of 512 bytes; use a multiple of 512, or --buffered",
            job.offset_bytes
        )));
    }
    let mut total_threads = 0u32;
    for t in &job.targets {
        if t.size_bytes == Some(0) {
            return Err(spec_error(format!("{}: size 0; the test file needs at least one block", t.path.display())));
        }
        if let Some(size) = t.size_bytes {
            if size > TEST_FILE_SIZE_BYTES_MAX {
                return Err(spec_error(format!(
                    "{}: size {size} bytes is beyond any device (limit {}); use e.g. --size 4G",
                    t.path.display(),
                    format_size_bytes(TEST_FILE_SIZE_BYTES_MAX)
                )));
            }
        }
        if t.threads == 0 || t.threads > THREADS_PER_TARGET_MAX {
            return Err(spec_error(format!(
                "{}: {} threads; use 1..={THREADS_PER_TARGET_MAX} threads per target",
                t.path.display(),
                t.threads
            )));
        }
        total_threads = total_threads.saturating_add(t.threads);
    }
    if total_threads > THREADS_TOTAL_MAX {
        return Err(spec_error(format!("{total_threads} threads in all; use at most {THREADS_TOTAL_MAX}")));
    }
    let threads_over_processes = total_threads.saturating_mul(job.processes);
    if threads_over_processes > THREADS_TOTAL_MAX {
        return Err(spec_error(format!(
            "{} processes x {total_threads} threads = {threads_over_processes} threads in all; use at most {THREADS_TOTAL_MAX}",
            job.processes
        )));
    }
    if job.offset_bytes > TEST_FILE_SIZE_BYTES_MAX {
        return Err(spec_error(format!("--offset {}: beyond any test file; use an offset inside the file", job.offset_bytes)));
    }
    let arena_bytes = job.queue_depth as u64 * job.block_size_bytes as u64;
    if arena_bytes > ARENA_BYTES_MAX as u64 {
        return Err(spec_error(format!(
            "-o {} x -b {} needs {} of buffers per thread (limit {}); lower -o or -b",
            job.queue_depth,
            format_size_bytes(job.block_size_bytes as u64),
            format_size_bytes(arena_bytes),
            format_size_bytes(ARENA_BYTES_MAX as u64)
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(targets: &[&str]) -> JobOptions {
        JobOptions { targets: targets.iter().map(PathBuf::from).collect(), ..JobOptions::default() }
    }

    #[test]
    fn defaults_make_a_random_8k_read_job() {
        let job = opts(&["/tmp/x"]).job().unwrap();
        assert_eq!(job.pattern, Pattern::Random);
        assert_eq!(job.read_write, ReadWrite::Read);
        assert_eq!(job.block_size_bytes, 8192);
        assert_eq!(job.queue_depth, 8);
        assert_eq!(job.duration, Duration::from_secs(10));
        assert!(job.direct);
        assert_eq!(job.targets[0].threads, 1);
    }

    #[test]
    fn flags_reach_the_job() {
        let o = JobOptions {
            pattern: "seq".into(),
            read_write: "mix".into(),
            write_pct: Some(30),
            block_size: Some("256K".into()),
            threads: Some("2".into()),
            queue_depth: Some("32".into()),
            duration: "3".into(),
            size: Some("64M".into()),
            buffered: true,
            engine: "psync".into(),
            ..opts(&["/a", "/b"])
        };
        let job = o.job().unwrap();
        assert_eq!(job.pattern, Pattern::Sequential);
        assert_eq!(job.read_write, ReadWrite::Mix { write_pct: 30 });
        assert_eq!(job.block_size_bytes, 256 << 10);
        assert_eq!(job.queue_depth, 32);
        assert_eq!(job.targets.len(), 2);
        assert!(job.targets.iter().all(|t| t.threads == 2 && t.size_bytes == Some(64 << 20)));
        assert!(!job.direct);
        assert_eq!(job.engine, EngineKind::Psync);
    }

    #[test]
    fn bad_values_are_refused_with_a_hint() {
        let cases: Vec<(JobOptions, &str)> = vec![
            (opts(&[]), "no target"),
            (JobOptions { block_size: Some("100".into()), ..opts(&["/a"]) }, "between 512"),
            (JobOptions { block_size: Some("16M".into()), ..opts(&["/a"]) }, "between 512"),
            (JobOptions { block_size: Some("1000".into()), ..opts(&["/a"]) }, "--buffered"),
            (JobOptions { duration: "0".into(), ..opts(&["/a"]) }, "greater than zero"),
            (JobOptions { duration: "100000h".into(), ..opts(&["/a"]) }, "absurd"),
            (JobOptions { queue_depth: Some("0".into()), ..opts(&["/a"]) }, "outstanding"),
            (JobOptions { threads: Some("1000".into()), ..opts(&["/a"]) }, "threads per target"),
            (JobOptions { read_write: "mix".into(), ..opts(&["/a"]) }, "--write-pct"),
            (JobOptions { read_write: "mix".into(), write_pct: Some(130), ..opts(&["/a"]) }, "percentage"),
            (JobOptions { read_write: "sideways".into(), ..opts(&["/a"]) }, "unknown --rw"),
            (JobOptions { engine: "spdk".into(), ..opts(&["/a"]) }, "unknown --engine"),
            (JobOptions { offset: Some("1000".into()), ..opts(&["/a"]) }, "offset"),
            (JobOptions { queue_depth: Some("1,2".into()), ..opts(&["/a"]) }, "--sweep"),
            (JobOptions { block_size: Some("8M".into()), queue_depth: Some("1024".into()), ..opts(&["/a"]) }, "lower -o"),
        ];
        for (o, needle) in cases {
            let e = o.job().expect_err(needle).to_string();
            assert!(e.contains(needle), "`{e}` lacks `{needle}`");
        }
        // 1000-byte blocks are fine without O_DIRECT.
        assert!(JobOptions { block_size: Some("1000".into()), buffered: true, ..opts(&["/a"]) }.job().is_ok());
    }

    #[test]
    fn sweep_covers_the_matrix() {
        let o = JobOptions { threads: Some("1,2".into()), ..opts(&["/a"]) };
        let s = o.sweep(false, false).unwrap();
        let points = s.points();
        assert_eq!(points.len(), 2 * 2 * 3 * 2 * 8);
        assert_eq!(points[0].queue_depth, 1);
        assert_eq!(points[7].queue_depth, 128);
        assert_eq!(points[8].targets[0].threads, 2);
        let s = JobOptions { queue_depth: Some("1,4".into()), block_size: Some("8K".into()), ..opts(&["/a"]) }.sweep(true, true).unwrap();
        assert_eq!(s.points().len(), 2);
    }

    #[test]
    fn the_sweep_parser_takes_an_axis_and_a_list() {
        assert_eq!(parse_sweep_axis("threads=1,2,4").unwrap(), (SweepAxis::Threads, vec![1, 2, 4]));
        assert_eq!(parse_sweep_axis("processes=1,8").unwrap(), (SweepAxis::Processes, vec![1, 8]));
        assert_eq!(parse_sweep_axis("qd=1, 4,16").unwrap(), (SweepAxis::Qd, vec![1, 4, 16]));
        let s = opts(&["/a"]).sweep_axis("threads=1,2,4").unwrap();
        let points = s.points();
        assert_eq!(points.len(), 3);
        assert_eq!(points.iter().map(|p| p.targets[0].threads).collect::<Vec<_>>(), vec![1, 2, 4]);
        assert!(points.iter().all(|p| p.queue_depth == 8 && p.processes == 1));
        let p = opts(&["/a"]).sweep_axis("processes=1,3").unwrap().points();
        assert_eq!(p.iter().map(|j| j.processes).collect::<Vec<_>>(), vec![1, 3]);
        assert_eq!(p[1].targets[0].threads, 1);
    }

    #[test]
    fn the_sweep_parser_rejects_bad_values_with_one_line() {
        let cases = [
            ("threads", "AXIS=LIST"),
            ("/data", "put targets before --sweep"),
            ("threds=1,2", "unknown axis `threds`"),
            ("threads=", "no values"),
            ("threads=1,,2", "not a valid"),
            ("threads=1,x", "`x`"),
            ("threads=-1", "not a valid"),
            ("threads=0,1", "1..=64"),
            ("threads=1,65", "1..=64"),
            ("processes=1,2,2", "appears twice"),
            ("processes=100", "1..=64"),
            ("qd=1,99999", "1..="),
            ("threads=99999999999", "not a valid"),
        ];
        for (text, needle) in cases {
            let e = parse_sweep_axis(text).expect_err(text).to_string();
            assert!(e.contains(needle), "`{text}`: `{e}` lacks `{needle}`");
            assert_eq!(e.lines().count(), 1, "{e}");
            assert!(e.starts_with("--sweep"), "{e}");
        }
        let many = (1..=65).map(|v| v.to_string()).collect::<Vec<_>>().join(",");
        assert!(parse_sweep_axis(&format!("qd={many}")).unwrap_err().to_string().contains("at most 64"));
        // -t with --sweep threads= is ambiguous; 8 processes x 64 threads is too many.
        let e = JobOptions { threads: Some("2".into()), ..opts(&["/a"]) }.sweep_axis("threads=1,2").unwrap_err();
        assert!(e.to_string().contains("both set it"), "{e}");
        let e = JobOptions { threads: Some("64".into()), ..opts(&["/a"]) }.sweep_axis("processes=1,8").unwrap_err();
        assert!(e.to_string().contains("threads in all"), "{e}");
    }

    #[test]
    fn sync_and_status_interval_are_checked() {
        let job = JobOptions { read_write: "write".into(), sync: true, status_interval: Some("1".into()), ..opts(&["/a"]) }.job().unwrap();
        assert!(job.sync);
        assert_eq!(job.status_interval, Some(Duration::from_secs(1)));
        let cases: Vec<(JobOptions, &str)> = vec![
            (JobOptions { sync: true, ..opts(&["/a"]) }, "--rw write"),
            (JobOptions { status_interval: Some("10ms".into()), ..opts(&["/a"]) }, "--status-interval"),
            (JobOptions { status_interval: Some("20s".into()), ..opts(&["/a"]) }, "at most the duration"),
            (JobOptions { status_interval: Some("soon".into()), ..opts(&["/a"]) }, "--status-interval"),
            (JobOptions { size: Some("18446744073709551615".into()), ..opts(&["/a"]) }, "beyond any device"),
            (JobOptions { size: Some("16383P".into()), ..opts(&["/a"]) }, "--size"),
            (JobOptions { offset: Some("18446744073709551104".into()), ..opts(&["/a"]) }, "--offset"),
        ];
        for (o, needle) in cases {
            let e = o.job().expect_err(needle).to_string();
            assert!(e.contains(needle), "`{e}` lacks `{needle}`");
        }
    }
}
