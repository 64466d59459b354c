//! What to run: the options as the user gave them ([`JobOptions`], strings from the command
//! line) and the checked job ([`JobSpec`]) or sweep ([`SweepSpec`]) the runner executes.
//! All validation happens here, before any file is touched, so bad input costs nothing.

use std::path::PathBuf;
use std::time::Duration;

use flashscan_io::limits::{ARENA_BYTES_MAX, IO_SIZE_BYTES_MAX, IO_SIZE_BYTES_MIN, QUEUE_DEPTH_MAX};
use flashscan_io::EngineKind;
use serde::Serialize;

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
/// Size of a test file flashscan creates when neither `--size` nor the parameter file says.
pub const TEST_FILE_SIZE_BYTES_DEFAULT: u64 = 1 << 30;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
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
#[derive(Debug, Clone)]
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
}

/// The IOMeter matrix: every combination is one [`JobSpec`] derived from `base`.
#[derive(Debug, Clone)]
pub struct SweepSpec {
    pub base: JobSpec,
    pub patterns: Vec<Pattern>,
    pub read_writes: Vec<ReadWrite>,
    pub block_sizes_bytes: Vec<u32>,
    pub queue_depths: Vec<u32>,
    /// Threads per target; empty keeps each target's own count.
    pub thread_counts: Vec<u32>,
}

pub const SWEEP_BLOCK_SIZES_DEFAULT: &str = "8K,64K,256K";
pub const SWEEP_QUEUE_DEPTHS_DEFAULT: &str = "1,2,4,8,16,32,64,128";

impl SweepSpec {
    /// Every point of the matrix, in the order they run: pattern, direction, block size,
    /// threads, then queue depth innermost (the chart's x axis).
    pub fn points(&self) -> Vec<JobSpec> {
        let threads: Vec<Option<u32>> =
            if self.thread_counts.is_empty() { vec![None] } else { self.thread_counts.iter().map(|t| Some(*t)).collect() };
        let mut out = Vec::new();
        for &pattern in &self.patterns {
            for &read_write in &self.read_writes {
                for &block_size_bytes in &self.block_sizes_bytes {
                    for &t in &threads {
                        for &queue_depth in &self.queue_depths {
                            let mut job = self.base.clone();
                            job.pattern = pattern;
                            job.read_write = read_write;
                            job.block_size_bytes = block_size_bytes;
                            job.queue_depth = queue_depth;
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
        if t.threads == 0 || t.threads > THREADS_PER_TARGET_MAX {
            return Err(spec_error(format!(
                "{}: {} threads; use 1..={THREADS_PER_TARGET_MAX} threads per target",
                t.path.display(),
                t.threads
            )));
        }
        total_threads += t.threads;
    }
    if total_threads > THREADS_TOTAL_MAX {
        return Err(spec_error(format!("{total_threads} threads in all; use at most {THREADS_TOTAL_MAX}")));
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
}
