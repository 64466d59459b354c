//! `flashscan io`: the I/O workbench (SQLIO / DiskSpd / IOMeter / fio for database people).
//! This file only turns flags into a job, picks the mode (run, sweep, verify) and prints;
//! the measuring lives in flashscan-workbench.

use std::path::PathBuf;

use anyhow::Context;
use flashscan_workbench::spec::JobSpec;
use flashscan_workbench::test_file::{prepare_targets, PreparedTarget, TargetNeeds};
use flashscan_workbench::{chart, print_csv, print_json, print_table, runner, sweep, verify, JobOptions, Report, WorkbenchError};
use indicatif::{ProgressBar, ProgressStyle};

use crate::exit::bad_input;

#[derive(clap::Args)]
#[command(after_help = "Examples:
  flashscan io /data -b 8K -o 32 -d 30                    random 8 KB reads, 32 outstanding
  flashscan io -F param.txt -f random -o 8 -b 256K -d 180  a SQLIO parameter file
  flashscan io /data --rw mix --write-pct 30 -t 2 --json   70/30 mix, 2 threads, JSON
  flashscan io /data --sweep -d 2 --csv sweep.csv --chart sweep.svg
  flashscan io /data --verify --size 64M                   check that bytes land where they should")]
pub struct IoArgs {
    /// Files or directories to test (a directory gets `flashscan-io.dat` inside).
    #[arg(value_name = "TARGET")]
    targets: Vec<PathBuf>,
    /// SQLIO parameter file: one target per line, `path threads mask size_MB`, `#` comments.
    #[arg(short = 'F', long = "param-file", value_name = "PARAMFILE")]
    param_file: Option<PathBuf>,
    /// Access pattern: random or seq [default: random].
    #[arg(short = 'f', long)]
    pattern: Option<String>,
    /// read, write, or mix (with --write-pct) [default: read].
    #[arg(short = 'k', long = "rw")]
    rw: Option<String>,
    /// Percentage of writes for --rw mix.
    #[arg(long, value_name = "PCT")]
    write_pct: Option<u32>,
    /// Block size, 512 to 8M (e.g. 8K, 256K, 1M); a list with --sweep [default: 8K].
    #[arg(short = 'b', long = "block-size", value_name = "SIZE")]
    block_size: Option<String>,
    /// Threads per target (overrides the parameter file); a list with --sweep (1,2).
    #[arg(short = 't', long)]
    threads: Option<String>,
    /// Outstanding I/Os per thread; a list with --sweep [default: 8; sweep 1,2,…,128].
    #[arg(short = 'o', long = "outstanding", value_name = "DEPTH")]
    outstanding: Option<String>,
    /// Measured duration (per point with --sweep): 10, 10s, 500ms, 2m.
    #[arg(short = 'd', long, default_value = "10s")]
    duration: String,
    /// Warm-up before measuring; its I/Os and CPU are not counted.
    #[arg(long, default_value = "1s")]
    warmup: String,
    /// Size of test files to create (existing files keep theirs) [default: 1G].
    #[arg(long)]
    size: Option<String>,
    /// Start of the tested region in each file.
    #[arg(long)]
    offset: Option<String>,
    /// Seed of offsets and data, for repeatable runs.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// auto (io_uring, else psync with a notice), uring, psync or null (harness overhead).
    #[arg(long, default_value = "auto")]
    engine: String,
    /// Go through the page cache instead of O_DIRECT.
    #[arg(long)]
    buffered: bool,
    /// Allow writing to files flashscan did not create.
    #[arg(long)]
    force: bool,
    /// Write a known pattern, read it back in random order, report any mismatch.
    #[arg(long, conflicts_with = "sweep")]
    verify: bool,
    /// Run the IOMeter matrix: {seq, random} × {read, write} × block sizes × depths.
    #[arg(long)]
    sweep: bool,
    /// Print one JSON object (a list of them with --sweep).
    #[arg(long, conflicts_with = "csv")]
    json: bool,
    /// Print CSV, or write it to FILE.
    #[arg(long, value_name = "FILE", num_args = 0..=1)]
    csv: Option<Option<PathBuf>>,
    /// With --sweep: write an SVG chart of IOPS, MB/s and p99 against queue depth.
    #[arg(long, value_name = "FILE.svg", requires = "sweep")]
    chart: Option<PathBuf>,
}

/// Workbench errors become exit 2 when the user can fix them, exit 1 otherwise.
fn classify(e: WorkbenchError) -> anyhow::Error {
    if e.is_bad_input() { bad_input(e.to_string()) } else { anyhow::Error::new(e) }
}

fn notice(message: &str) {
    eprintln!("flashscan: notice: {message}");
}

pub fn run(args: IoArgs) -> anyhow::Result<()> {
    let options = JobOptions {
        targets: args.targets.clone(),
        param_file: args.param_file.clone(),
        pattern: args.pattern.clone().unwrap_or_else(|| "random".into()),
        read_write: args.rw.clone().unwrap_or_else(|| "read".into()),
        write_pct: args.write_pct,
        block_size: args.block_size.clone(),
        threads: args.threads.clone(),
        queue_depth: args.outstanding.clone(),
        duration: args.duration.clone(),
        warmup: args.warmup.clone(),
        size: args.size.clone(),
        offset: args.offset.clone(),
        seed: args.seed,
        engine: args.engine.clone(),
        buffered: args.buffered,
        force: args.force,
    };
    if args.sweep {
        return run_sweep(&args, &options);
    }
    let job = options.job().map_err(classify)?;
    let targets = prepare(&job, job.read_write.writes() || args.verify, job.block_size_bytes)?;
    if args.verify {
        return run_verify(&args, &job, &targets);
    }
    let outcome = runner::run(&job, &targets, &notice).map_err(classify)?;
    let report = Report::new(&job, &targets, &outcome);
    emit_single(&args, &report)
}

fn prepare(job: &JobSpec, writes: bool, block_size_bytes: u32) -> anyhow::Result<Vec<PreparedTarget>> {
    let needs = TargetNeeds { writes, force: job.force, direct: job.direct, block_size_bytes, offset_bytes: job.offset_bytes };
    prepare_targets(&job.targets, needs, job.seed, &mut |m| eprintln!("flashscan: {m}")).map_err(classify)
}

fn emit_single(args: &IoArgs, report: &Report) -> anyhow::Result<()> {
    if args.json {
        println!("{}", print_json::to_json(report));
        return Ok(());
    }
    match &args.csv {
        Some(Some(path)) => {
            std::fs::write(path, print_csv::to_csv(report)).map_err(|e| bad_input(format!("cannot write {}: {e}", path.display())))?;
            print!("{}", print_table::to_table(report));
        }
        Some(None) => print!("{}", print_csv::to_csv(report)),
        None => print!("{}", print_table::to_table(report)),
    }
    Ok(())
}

fn run_verify(args: &IoArgs, job: &JobSpec, targets: &[PreparedTarget]) -> anyhow::Result<()> {
    let report = verify::run_verify(job, targets, &notice).map_err(classify)?;
    if args.json {
        println!("{}", print_json::to_json(&report));
    } else {
        for t in &report.targets {
            println!(
                "verify {}: {} blocks of {} bytes written and read back with engine {}, {} mismatched 8-byte words",
                t.path, t.blocks_count, report.block_size_bytes, report.engine, t.mismatched_words_count
            );
            for m in &t.mismatches {
                println!("  offset {}: expected {:#018x}, found {:#018x}", m.offset_bytes, m.expected, m.found);
            }
        }
    }
    if let Some(bad) = report.targets.iter().find(|t| t.mismatched_words_count > 0) {
        let first = bad.mismatches.first().map(|m| m.offset_bytes).unwrap_or(0);
        anyhow::bail!(
            "verify failed: {} mismatched words in {}, the first at offset {first}",
            bad.mismatched_words_count,
            bad.path
        );
    }
    Ok(())
}

fn run_sweep(args: &IoArgs, options: &JobOptions) -> anyhow::Result<()> {
    let spec = options.sweep(args.pattern.is_some(), args.rw.is_some()).map_err(classify)?;
    let writes = spec.read_writes.iter().any(|rw| rw.writes());
    let block_max = spec.block_sizes_bytes.iter().copied().max().unwrap_or(spec.base.block_size_bytes);
    let targets = prepare(&spec.base, writes, block_max)?;
    let points = spec.points();
    let per_point_s = (spec.base.duration + spec.base.warmup).as_secs_f64();
    let bar = ProgressBar::new(points.len() as u64);
    bar.set_style(
        ProgressStyle::with_template("{bar:30} {pos}/{len} points, {msg} (about {eta} left)")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    bar.set_message(format!("{per_point_s:.1} s each"));
    let reports = sweep::run_sweep(&spec, &targets, &|m| bar.suspend(|| notice(m)), &mut |_, _, r| {
        bar.set_message(format!(
            "last: {} {} {} QD{} {:.0} IOPS",
            r.pattern, r.rw, r.block_size_bytes, r.queue_depth, r.figures.iops
        ));
        bar.inc(1);
    })
    .map_err(classify)?;
    bar.finish_and_clear();
    if let Some(path) = &args.chart {
        chart::write_chart(&reports, path).map_err(classify)?;
        eprintln!("flashscan: chart written to {}", path.display());
    }
    let csv = sweep::to_csv(&reports);
    if args.json {
        println!("{}", print_json::to_json(&reports));
        return Ok(());
    }
    match &args.csv {
        Some(Some(path)) => {
            std::fs::write(path, &csv).with_context(|| format!("cannot write {}", path.display())).map_err(|e| bad_input(format!("{e:#}")))?;
            eprintln!("flashscan: CSV written to {}", path.display());
        }
        Some(None) => {
            print!("{csv}");
            return Ok(());
        }
        None => {}
    }
    print!("{}", sweep_table(&reports));
    Ok(())
}

fn sweep_table(reports: &[Report]) -> String {
    let mut table = comfy_table::Table::new();
    table.load_preset(comfy_table::presets::UTF8_FULL_CONDENSED);
    table.set_header(vec!["pattern", "rw", "block", "threads", "QD", "IOPS", "MB/s", "p50 µs", "p99 µs", "CPU µs/IO"]);
    for r in reports {
        let f = &r.figures;
        table.add_row(vec![
            r.pattern.clone(),
            r.rw.clone(),
            r.block_size_bytes.to_string(),
            r.threads_count.to_string(),
            r.queue_depth.to_string(),
            format!("{:.0}", f.iops),
            format!("{:.1}", f.mb_per_s),
            format!("{:.1}", f.latency_us.p50),
            format!("{:.1}", f.latency_us.p99),
            format!("{:.2}", f.cpu_us_per_io),
        ]);
    }
    table.to_string() + "\n"
}
