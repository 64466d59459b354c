//! Running a built-in query end to end: check the options and the projection, prepare the
//! cache (cold: drop; warm: one warm-up pass), raw pass, scan, raw pass (with `--check`),
//! and assemble the report.

use flashscan_io::EngineKind;

use crate::cache::{drop_cached_pages, CacheMode};
use crate::check::{check_report, raw_pass};
use crate::error::ExecError;
use crate::limits::{
    SCAN_IO_SIZE_BYTES_DEFAULT, SCAN_IO_SIZE_BYTES_MAX, SCAN_IO_SIZE_BYTES_MIN, SCAN_QUEUE_DEPTH_DEFAULT,
    SCAN_QUEUE_DEPTH_MAX, SCAN_THREADS_MAX,
};
use crate::queries::{merge_all, AnyKernel, BuiltinQuery};
use crate::report::{PassFigures, ScanReport};
use crate::scan::{scan_plan, ReadConfig};
use crate::source::{distinct_paths, projection_of, TableSource};

#[derive(Debug, Clone, Copy)]
pub struct ScanOptions {
    pub io_size_bytes: usize,
    pub queue_depth: u32,
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
            queue_depth: SCAN_QUEUE_DEPTH_DEFAULT,
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
            let warm_up = raw_pass(&plan, &config)?;
            cache_actions.push(format!("warm-up pass: {:.0} MB buffered in {:.2} s", warm_up.bytes_read() as f64 / 1e6, warm_up.elapsed_s()));
        }
        CacheMode::Direct => cache_actions.push("O_DIRECT: page cache bypassed, not dropped".into()),
    }

    let raw_before = if options.check { Some(raw_pass(&plan, &config)?) } else { None };
    let (kernels, stats) = scan_plan(source, &plan, &projection, &config, &|_| Ok(AnyKernel::new(query)))?;
    let raw_after = if options.check { Some(raw_pass(&plan, &config)?) } else { None };

    let result = merge_all(kernels)?.unwrap_or_default();
    let figures = PassFigures::of(&stats);
    let check = match (&raw_before, &raw_after) {
        (Some(before), Some(after)) => {
            let values = source.is_column_store().then(|| figures.rows_scanned * projection.len() as u64);
            Some(check_report(&figures, before, after, &config, values))
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
        queue_depth: options.queue_depth,
        io_size_bytes: stats.io_size_bytes,
        notices,
        skipped: stats.skipped,
        check,
    })
}
