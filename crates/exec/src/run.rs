//! Running a built-in query end to end: check the options and the projection, prepare the
//! cache (cold: drop; warm: one warm-up pass), raw pass, scan, raw pass (with `--check`),
//! and assemble the report.

use flashscan_io::EngineKind;

use crate::cache::{drop_cached_pages, CacheMode};
use crate::check::{check_report, raw_pass};
use crate::depth::{DepthPolicy, AUTO_DEPTH_START};
use crate::error::ExecError;
use crate::limits::{
    SCAN_IO_SIZE_BYTES_DEFAULT, SCAN_IO_SIZE_BYTES_MAX, SCAN_IO_SIZE_BYTES_MIN, SCAN_QUEUE_DEPTH_DEFAULT, SCAN_QUEUE_DEPTH_MAX,
    SCAN_THREADS_MAX,
};
use crate::queries::{merge_all, AnyKernel, BuiltinQuery};
use crate::report::{PassFigures, ScanReport};
use crate::scan::{scan_plan_with_depth, ReadConfig};
use crate::source::{distinct_paths, projection_of, TableSource};

#[derive(Debug, Clone, Copy)]
pub struct ScanOptions {
    pub io_size_bytes: usize,
    /// Reads in flight per worker: exactly this many when `auto_depth` is off (`--depth`),
    /// else where the depth search starts (`depth.rs`).
    pub queue_depth: u32,
    /// Find the depth while scanning (the default), up to `AUTO_DEPTH_MAX`.
    pub auto_depth: bool,
    pub thread_count: u32,
    pub cache_mode: CacheMode,
    /// Measure the raw read rate of the same files before and after the scan.
    pub check: bool,
    pub engine_kind: EngineKind,
}

impl Default for ScanOptions {
    fn default() -> ScanOptions {
        ScanOptions {
            io_size_bytes: SCAN_IO_SIZE_BYTES_DEFAULT,
            queue_depth: AUTO_DEPTH_START,
            auto_depth: true,
            thread_count: default_thread_count(),
            cache_mode: CacheMode::Direct,
            check: false,
            engine_kind: EngineKind::Auto,
        }
    }
}

/// One worker per core.
pub fn default_thread_count() -> u32 {
    std::thread::available_parallelism().map(|n| n.get() as u32).unwrap_or(1).min(SCAN_THREADS_MAX)
}

impl ScanOptions {
    pub fn validate(&self) -> Result<(), ExecError> {
        if !(SCAN_IO_SIZE_BYTES_MIN..=SCAN_IO_SIZE_BYTES_MAX).contains(&self.io_size_bytes) {
            return Err(ExecError::InvalidOption(format!(
                "I/O size {} bytes out of range {} KiB..{} MiB",
                self.io_size_bytes,
                SCAN_IO_SIZE_BYTES_MIN / 1024,
                SCAN_IO_SIZE_BYTES_MAX >> 20
            )));
        }
        if self.queue_depth == 0 || self.queue_depth > SCAN_QUEUE_DEPTH_MAX {
            return Err(ExecError::InvalidOption(format!("depth {} out of range 1..={SCAN_QUEUE_DEPTH_MAX}", self.queue_depth)));
        }
        if self.thread_count == 0 || self.thread_count > SCAN_THREADS_MAX {
            return Err(ExecError::InvalidOption(format!("threads {} out of range 1..={SCAN_THREADS_MAX}", self.thread_count)));
        }
        Ok(())
    }

    /// How the scan chooses its reads in flight per worker.
    pub fn depth_policy(&self) -> DepthPolicy {
        if self.auto_depth {
            DepthPolicy::auto(self.queue_depth, self.io_size_bytes)
        } else {
            DepthPolicy::Fixed(self.queue_depth)
        }
    }

    /// How a scan of `source` chooses its depth. A column store keeps the fixed default
    /// unless `--depth` says otherwise: its reads are a row group's segments, decoded
    /// together once all have arrived, and its scans are bound by decode (tens of MB
    /// read); a deeper queue only spreads the reads over more row groups at once and
    /// delays the first (cold SF 1 sum4 0.039 -> 0.047 s, q1 0.127 -> 0.151 s when it
    /// searched; docs/scan.md).
    pub fn depth_policy_for(&self, source: &dyn TableSource) -> DepthPolicy {
        if self.auto_depth && source.is_column_store() {
            DepthPolicy::Fixed(SCAN_QUEUE_DEPTH_DEFAULT)
        } else {
            self.depth_policy()
        }
    }

    /// The raw passes of `--check` read at the most reads in flight the scan may use: the
    /// device's rate for these reads, which a depth the scan chose itself must approach.
    pub fn raw_depth_policy_for(&self, source: &dyn TableSource) -> DepthPolicy {
        DepthPolicy::Fixed(self.depth_policy_for(source).slots())
    }

    pub fn read_config(&self) -> ReadConfig {
        ReadConfig {
            io_size_bytes: self.io_size_bytes,
            queue_depth: self.queue_depth,
            thread_count: self.thread_count,
            direct: self.cache_mode.direct(),
            engine_kind: self.engine_kind,
        }
    }
}

/// Runs `query` over `source` and reports the answer and where the time went.
pub fn run_query(source: &dyn TableSource, query: &BuiltinQuery, options: &ScanOptions) -> Result<ScanReport, ExecError> {
    options.validate()?;
    let column_names = query.columns();
    let names: Vec<&str> = column_names.iter().map(|s| s.as_str()).collect();
    let projection = projection_of(source, query.name(), &names)?;
    let config = options.read_config();
    let filter = query.scan_filter(source)?;
    let plan = source.plan_reads(&projection, &filter, config.io_size_bytes)?;

    let mut cache_actions = Vec::new();
    match options.cache_mode {
        CacheMode::Cold => cache_actions = drop_cached_pages(&distinct_paths(&source.runs()))?,
        CacheMode::Warm => {
            let warm_up = raw_pass(&plan, &config, options.raw_depth_policy_for(source))?;
            cache_actions.push(format!("warm-up pass: {:.0} MB buffered in {:.2} s", warm_up.bytes_read() as f64 / 1e6, warm_up.elapsed_s()));
        }
        CacheMode::Direct => cache_actions.push("O_DIRECT: page cache bypassed, not dropped".into()),
    }

    let raw_depth = options.raw_depth_policy_for(source);
    let raw_before = if options.check { Some(raw_pass(&plan, &config, raw_depth)?) } else { None };
    let (kernels, stats) = scan_plan_with_depth(source, &plan, &projection, &config, options.depth_policy_for(source), &|_| Ok(AnyKernel::new(query)))?;
    let raw_after = if options.check { Some(raw_pass(&plan, &config, raw_depth)?) } else { None };

    let result = merge_all(kernels)?.unwrap_or_default();
    let figures = PassFigures::of(&stats);
    let check = match (&raw_before, &raw_after) {
        (Some(before), Some(after)) => {
            let values = source.is_column_store().then(|| figures.rows_scanned * projection.len() as u64);
            Some(check_report(&figures, before, after, &config, &stats.depth, values))
        }
        _ => None,
    };
    let mut notices = stats.notices.clone();
    for extra in raw_before.iter().chain(raw_after.iter()).flat_map(|s| s.notices.iter()) {
        if !notices.contains(extra) {
            notices.push(extra.clone());
        }
    }
    Ok(ScanReport {
        query: query.name().to_string(),
        sql: query.sql(source.table_name()),
        table: source.table_name().to_string(),
        format: source.format_name(),
        result,
        partitions_count: source.partition_count(),
        figures,
        cache: options.cache_mode.name().to_string(),
        cache_actions,
        engine: stats.engine_name.to_string(),
        threads: options.thread_count,
        queue_depth: stats.depth.depth_final,
        queue_depth_mode: stats.depth.mode.to_string(),
        queue_depth_steps: stats.depth.steps.clone(),
        io_size_bytes: stats.io_size_bytes,
        notices,
        skipped: stats.skipped,
        check,
    })
}
