//! `flashscan bench compression`: the table of seed 001, measured here. For each storage
//! format — heap (none), row, page, columnstore, columnstore_archive — the table's size on
//! disk and, for COUNT of 11 columns and SUM of 4 (and any other built-in query asked
//! for), cold and warm: elapsed, MB/s read, rows/s, CPU % and decode time.
//!
//! Each format lives in a copy of the table, `TABLE__FORMAT`, made by a rebuild into a new
//! table (the user's table is never changed) and kept for later runs (`flashscan drop`
//! removes them); the table's own format is measured on the table itself. Runs are interleaved
//! (round by round, every format in turn) so drift in the device's rate hits all formats
//! alike; each figure is the median over the rounds.

use std::path::Path;

use serde::Serialize;

use flashscan_exec::run::default_thread_count;
use flashscan_exec::{open_source, run_query, BuiltinQuery, CacheMode, ScanOptions, ScanReport};
use flashscan_measure::stats::median;
use flashscan_storage::{rebuild_table, Database, RebuildOptions, RebuildTarget};

use crate::error::BenchError;

/// The formats, in the article's order, by their `--compression` names.
pub const FORMATS: [&str; 5] = ["none", "row", "page", "columnstore", "columnstore_archive"];

#[derive(Debug, Clone)]
pub struct CompressionBenchOptions {
    /// `--compression` names, from `FORMATS`.
    pub formats: Vec<String>,
    pub queries: Vec<BuiltinQuery>,
    pub cache_modes: Vec<CacheMode>,
    pub rounds: u32,
    /// I/O size, depth, threads, engine (the cache mode is set per run).
    pub scan: ScanOptions,
    /// Rebuild the format copies even when they exist.
    pub rebuild: bool,
    /// Column store row group size (None: the default ~1M rows).
    pub row_group_rows: Option<usize>,
}

/// One format: its copy of the table and its size.
#[derive(Debug, Clone, Serialize)]
pub struct FormatSize {
    pub format: String,
    pub table: String,
    pub size_bytes: u64,
    /// Size over the heap's (none), when the heap was measured.
    pub size_ratio_to_heap: Option<f64>,
    /// Seconds the rebuild took, when it ran in this bench.
    pub rebuild_s: Option<f64>,
}

/// One (format, query, cache) measurement: medians over the rounds.
#[derive(Debug, Clone, Serialize)]
pub struct CompressionRun {
    pub format: String,
    pub query: String,
    pub cache: String,
    pub rounds: u32,
    pub elapsed_s: f64,
    pub mb_per_s: f64,
    pub rows_per_s: f64,
    /// CPU time over (elapsed x cores): 100 % is every core busy the whole scan.
    pub cpu_pct: f64,
    pub decode_s: f64,
    pub bytes_read: u64,
    pub rows_scanned: u64,
    /// The query's answer, identical across formats (checked).
    #[serde(skip)]
    pub answer: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct CompressionReport {
    pub table: String,
    pub row_count: u64,
    pub cores: u32,
    pub formats: Vec<FormatSize>,
    pub runs: Vec<CompressionRun>,
}

/// The copy of `table` that holds `format`.
pub fn copy_name(table: &str, format: &str) -> String {
    format!("{}__{}", table.to_ascii_lowercase(), format)
}

/// Makes (or reuses) one copy per format, then measures every query in every cache mode.
pub fn run(db_dir: &Path, table: &str, options: &CompressionBenchOptions, progress: &mut dyn FnMut(&str)) -> Result<CompressionReport, BenchError> {
    if options.rounds == 0 {
        return Err(BenchError::InvalidOption("--rounds must be at least 1".into()));
    }
    let mut targets = Vec::new();
    for format in &options.formats {
        if !FORMATS.contains(&format.as_str()) {
            return Err(BenchError::InvalidOption(format!("format {format:?}: choose from {}", FORMATS.join(", "))));
        }
        targets.push((format.clone(), RebuildTarget::parse(format)?));
    }
    let source_meta = Database::open(db_dir)?.table(table)?.clone();

    let mut sizes = Vec::new();
    for (format, target) in &targets {
        // The table itself when it is already in this format; a copy otherwise.
        let copy = if source_meta.table_format()? == *target { source_meta.name.clone() } else { copy_name(&source_meta.name, format) };
        let db = Database::open(db_dir)?;
        let existing = db.catalog().tables.get(&copy).filter(|t| t.row_count == source_meta.row_count && t.table_format().ok() == Some(*target));
        let rebuild_s = if copy == source_meta.name {
            None
        } else if existing.is_some() && !options.rebuild {
            progress(&format!("{format}: reusing table {copy}"));
            None
        } else {
            progress(&format!("{format}: rebuilding {} into {copy} …", source_meta.name));
            let rebuild = RebuildOptions { into_table: Some(copy.clone()), row_group_rows: options.row_group_rows, ..RebuildOptions::default() };
            let report = rebuild_table(db_dir, &source_meta.name, *target, &rebuild)?;
            progress(&format!("{format}: {} bytes in {:.1} s", report.new_size_bytes, report.seconds));
            Some(report.seconds)
        };
        let db = Database::open(db_dir)?;
        sizes.push(FormatSize { format: format.clone(), table: copy.clone(), size_bytes: db.table(&copy)?.size_bytes, size_ratio_to_heap: None, rebuild_s });
    }
    let heap_bytes = sizes.iter().find(|s| s.format == "none").map(|s| s.size_bytes);
    for s in &mut sizes {
        s.size_ratio_to_heap = heap_bytes.filter(|h| *h > 0).map(|h| s.size_bytes as f64 / h as f64);
    }

    // samples[(format, query, cache)] = one report per round.
    let mut samples: Vec<Vec<ScanReport>> = Vec::new();
    let mut keys = Vec::new();
    for query in &options.queries {
        for cache in &options.cache_modes {
            for size in &sizes {
                keys.push((size.clone(), query.clone(), *cache));
                samples.push(Vec::new());
            }
        }
    }
    let db = Database::open(db_dir)?;
    for round in 0..options.rounds {
        for (i, (size, query, cache)) in keys.iter().enumerate() {
            let source = open_source(&db, &size.table)?;
            let scan = ScanOptions { cache_mode: *cache, check: false, ..options.scan };
            let report = run_query(source.as_ref(), query, &scan)?;
            progress(&format!(
                "round {}/{}: {} {} {}: {:.3} s, {:.0} MB/s",
                round + 1,
                options.rounds,
                size.format,
                query.name(),
                cache.name(),
                report.figures.elapsed_s,
                report.figures.mb_per_s
            ));
            samples[i].push(report);
        }
    }

    let cores = default_thread_count();
    let mut runs = Vec::new();
    for ((size, query, cache), reports) in keys.iter().zip(samples) {
        let answer = format!("{:?}", reports[0].result);
        for r in &reports {
            let other = format!("{:?}", r.result);
            if other != answer {
                return Err(BenchError::AnswersDiffer(format!("{} on {} gave two different answers in two rounds: the table or the scan is broken", query.name(), size.table)));
            }
        }
        let pick = |f: &dyn Fn(&ScanReport) -> f64| median(reports.iter().map(f).collect());
        runs.push(CompressionRun {
            format: size.format.clone(),
            query: query.name().to_string(),
            cache: cache.name().to_string(),
            rounds: options.rounds,
            elapsed_s: pick(&|r| r.figures.elapsed_s),
            mb_per_s: pick(&|r| r.figures.mb_per_s),
            rows_per_s: pick(&|r| r.figures.rows_per_s),
            cpu_pct: pick(&|r| if r.figures.elapsed_s > 0.0 { r.figures.cpu_s / (r.figures.elapsed_s * cores as f64) * 100.0 } else { 0.0 }),
            decode_s: pick(&|r| r.figures.decode_s),
            bytes_read: reports[0].figures.bytes_read,
            rows_scanned: reports[0].figures.rows_scanned,
            answer,
        });
    }
    // Every format must answer every query alike: a benchmark of wrong answers is worthless.
    for run in &runs {
        if let Some(first) = runs.iter().find(|r| r.query == run.query) {
            if first.answer != run.answer {
                return Err(BenchError::AnswersDiffer(format!(
                    "{} answers differently on {} and {}: a format is broken; rerun with --rebuild",
                    run.query, first.format, run.format
                )));
            }
        }
    }
    Ok(CompressionReport { table: source_meta.name.clone(), row_count: source_meta.row_count, cores, formats: sizes, runs })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_are_named_by_format() {
        assert_eq!(copy_name("LineItem", "columnstore_archive"), "lineitem__columnstore_archive");
    }
}
