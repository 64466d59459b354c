//! `flashscan io`: the I/O workbench (SQLIO / DiskSpd / IOMeter / fio for database people).
//! This file only turns flags into a job, picks the mode (run, sweep, verify) and prints;
//! the measuring lives in flashscan-workbench.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;

use flashscan_workbench::job_file::{self, JobDocument};
use flashscan_workbench::processes::{self, ChildSpawner};
use flashscan_workbench::report::IntervalReport;
use flashscan_workbench::runner::IntervalOutcome;
use flashscan_workbench::spec::JobSpec;
use flashscan_workbench::test_file::{prepare_targets, PreparedTarget, TargetNeeds};
use flashscan_workbench::{chart, html, output, print_csv, print_json, print_table, sweep, verify, JobOptions, Report, SweepAxis};
use indicatif::{ProgressBar, ProgressStyle};

use crate::exit::{bad_input, workbench_error as classify};

/// Largest child request read on stdin (`--child`): a job is a few KB.
const CHILD_REQUEST_BYTES_MAX: u64 = 16 << 20;

#[derive(clap::Args)]
#[command(after_help = "Examples:
  flashscan io /data -b 8K -o 32 -d 30                    random 8 KB reads, 32 outstanding
  flashscan io -F param.txt -f random -o 8 -b 256K -d 180  a SQLIO parameter file
  flashscan io /data --rw mix --write-pct 30 -t 2 --json   70/30 mix, 2 threads, JSON
  flashscan io /data --sweep -d 2 --csv sweep.csv --chart sweep.svg
  flashscan io /data --sweep threads=1,2,4 --html threads.html      IOPS and p99 against threads
  flashscan io /data --sweep processes=1,2,4,8 -b 8K -o 1           separate processes
  flashscan io /data -f seq --rw write -b 4K -o 1 --sync             the wait of a log flush
  flashscan io /data -d 60 --status-interval 1 --chart timeline.svg  one line per second
  flashscan io /data --save-job job.json; flashscan io --job job.json   the same test again
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
    /// Make every write durable before it counts (O_DSYNC: a flush per write, as a log
    /// commit waits for); with --rw write, e.g. -f seq -b 4K -o 1.
    #[arg(long)]
    sync: bool,
    /// Print one line per interval while the test runs (that interval's IOPS, MB/s, p50/p99,
    /// outstanding I/Os), and keep the series in --json, --csv, --chart and --html: 1, 500ms.
    #[arg(long, value_name = "SECONDS")]
    status_interval: Option<String>,
    /// Write a known pattern, read it back in random order, report any mismatch.
    #[arg(long, conflicts_with = "sweep")]
    verify: bool,
    /// Run the IOMeter matrix ({seq, random} × {read, write} × block sizes × depths), or
    /// sweep one knob: threads=1,2,4 | processes=1,2,4 (separate processes) | qd=1,4,16.
    #[arg(long, value_name = "AXIS=LIST", num_args = 0..=1)]
    sweep: Option<Option<String>>,
    /// Replay a saved job: the file --save-job wrote, or the --json of a result or a sweep.
    #[arg(long, value_name = "FILE", conflicts_with_all = [
        "targets", "param_file", "pattern", "rw", "write_pct", "block_size", "threads", "outstanding", "duration",
        "warmup", "size", "offset", "seed", "engine", "buffered", "sync", "status_interval", "sweep", "verify"
    ])]
    job: Option<PathBuf>,
    /// Write every setting of this run to FILE (JSON) for --job; refuses an existing FILE.
    #[arg(long, value_name = "FILE")]
    save_job: Option<PathBuf>,
    /// Print one JSON object (a list of them with --sweep).
    #[arg(long, conflicts_with = "csv")]
    json: bool,
    /// Print CSV, or write it to FILE (never replacing an existing file).
    #[arg(long, value_name = "FILE", num_args = 0..=1)]
    csv: Option<Option<PathBuf>>,
    /// Write an SVG chart: a sweep's IOPS, MB/s and p99 against the swept value, or a run's
    /// timeline (with --status-interval). Never replaces an existing file.
    #[arg(long, value_name = "FILE.svg")]
    chart: Option<PathBuf>,
    /// Write one self-contained HTML report (tables and charts inline, no scripts).
    #[arg(long, value_name = "FILE.html")]
    html: Option<PathBuf>,
    /// Internal: run the job read on stdin as one process of --sweep processes=.
    #[arg(long, hide = true)]
    child: bool,
}

fn notice(message: &str) {
    eprintln!("flashscan: notice: {message}");
}

pub fn run(args: IoArgs) -> anyhow::Result<()> {
    if args.child {
        return run_child();
    }
    check_outputs(&args)?;
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
        sync: args.sync,
        status_interval: args.status_interval.clone(),
    };
    let document = match (&args.job, &args.sweep) {
        (Some(path), _) => job_file::read_job_document(path, args.force).map_err(classify)?,
        (None, Some(None)) => {
            let spec = options.sweep(args.pattern.is_some(), args.rw.is_some()).map_err(classify)?;
            JobDocument::Sweep { axis: spec.axis, points: spec.points() }
        }
        (None, Some(Some(axis))) => {
            let spec = options.sweep_axis(axis).map_err(classify)?;
            JobDocument::Sweep { axis: spec.axis, points: spec.points() }
        }
        (None, None) => JobDocument::Single(options.job().map_err(classify)?),
    };
    match document {
        JobDocument::Single(job) => run_single(&args, &job),
        JobDocument::Sweep { axis, points } => run_sweep(&args, axis, &points),
    }
}

/// Output files must be new names, distinct from each other: checked before anything runs.
fn check_outputs(args: &IoArgs) -> anyhow::Result<()> {
    let mut paths: Vec<(&str, &PathBuf)> = Vec::new();
    if let Some(Some(p)) = &args.csv {
        paths.push(("--csv", p));
    }
    for (flag, p) in [("--chart", &args.chart), ("--html", &args.html), ("--save-job", &args.save_job)] {
        if let Some(p) = p {
            paths.push((flag, p));
        }
    }
    for (i, (flag, p)) in paths.iter().enumerate() {
        if let Some((other, _)) = paths[..i].iter().find(|(_, q)| q == p) {
            return Err(bad_input(format!("{flag} and {other} both name {}; give each output its own file", p.display())));
        }
        output::check_free(p).map_err(classify)?;
    }
    if args.chart.is_some() && args.sweep.is_none() && args.job.is_none() && args.status_interval.is_none() && !args.verify {
        return Err(bad_input("--chart on a single run draws its timeline: add --status-interval (e.g. --status-interval 1), or use --sweep"));
    }
    Ok(())
}

fn write_output(path: &Path, bytes: &[u8], what: &str) -> anyhow::Result<()> {
    output::write_new(path, bytes).map_err(classify)?;
    eprintln!("flashscan: {what} written to {}", path.display());
    Ok(())
}

/// `flashscan io --child`: one process of `--sweep processes=`; job on stdin, outcome on stdout.
fn run_child() -> anyhow::Result<()> {
    let mut text = String::new();
    std::io::stdin()
        .take(CHILD_REQUEST_BYTES_MAX)
        .read_to_string(&mut text)
        .map_err(|e| bad_input(format!("--child: cannot read the job on stdin: {e}")))?;
    let out = processes::run_child(&text, &notice).map_err(classify)?;
    println!("{out}");
    Ok(())
}

/// Starts `flashscan io --child` from this very binary.
fn spawn_child() -> Command {
    let exe = std::env::current_exe().unwrap_or_else(|_| PathBuf::from("flashscan"));
    let mut c = Command::new(exe);
    c.arg("io").arg("--child");
    c
}

/// Wall-clock time of day (UTC), for interval lines.
fn clock_utc() -> String {
    let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0) % 86_400;
    format!("{:02}:{:02}:{:02}", secs / 3600, secs / 60 % 60, secs % 60)
}

fn interval_line(i: &IntervalReport) -> String {
    let f = &i.figures;
    format!(
        "{} UTC  t={:>7.2}s  {:>9.0} IOPS  {:>9.2} MB/s  p50 {:>9.1} µs  p99 {:>9.1} µs  {:>4} outstanding",
        clock_utc(),
        i.t_s,
        f.iops,
        f.mb_per_s,
        f.latency_us.p50,
        f.latency_us.p99,
        i.outstanding_ios
    )
}

fn run_single(args: &IoArgs, job: &JobSpec) -> anyhow::Result<()> {
    let targets = prepare(job, job.read_write.writes() || args.verify, job.block_size_bytes)?;
    if let Some(path) = &args.save_job {
        write_output(path, job_file::single_to_json(job, Some(&targets)).as_bytes(), "job")?;
    }
    if args.verify {
        return run_verify(args, job, &targets);
    }
    // Interval lines go to stdout, unless stdout carries JSON or CSV.
    let lines_to_stderr = args.json || matches!(args.csv, Some(None));
    let cpu_count = flashscan_workbench::cpu::cpu_count();
    let mut print_interval = |o: &IntervalOutcome| {
        let line = interval_line(&IntervalReport::new(o, cpu_count));
        if lines_to_stderr {
            eprintln!("{line}");
        } else {
            println!("{line}");
        }
    };
    let spawner: &ChildSpawner = &spawn_child;
    let outcome = processes::run_job(job, &targets, &notice, Some(spawner), Some(&mut print_interval)).map_err(classify)?;
    let report = Report::new(job, &targets, &outcome);
    if let Some(path) = &args.chart {
        write_output(path, chart::timeline_svg(&report).map_err(classify)?.as_bytes(), "chart")?;
    }
    if let Some(path) = &args.html {
        write_output(path, html::run_page(&report).map_err(classify)?.as_bytes(), "HTML report")?;
    }
    emit_single(args, &report)
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
            write_output(path, print_csv::to_csv(report).as_bytes(), "CSV")?;
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

fn run_sweep(args: &IoArgs, axis: SweepAxis, points: &[JobSpec]) -> anyhow::Result<()> {
    let Some(first) = points.first() else { return Err(bad_input("the sweep has no points")) };
    let same_files = |p: &JobSpec| p.targets.iter().map(|t| &t.path).eq(first.targets.iter().map(|t| &t.path));
    if !points.iter().all(same_files) {
        return Err(bad_input("the sweep's points name different files; every point of a sweep runs on the same targets"));
    }
    let writes = points.iter().any(|p| p.read_write.writes());
    let block_max = points.iter().map(|p| p.block_size_bytes).max().unwrap_or(first.block_size_bytes);
    let targets = prepare(first, writes, block_max)?;
    if let Some(path) = &args.save_job {
        write_output(path, job_file::sweep_to_json(axis, points, Some(&targets)).as_bytes(), "job")?;
    }
    let per_point_s = (first.duration + first.warmup).as_secs_f64();
    let bar = ProgressBar::new(points.len() as u64);
    bar.set_style(
        ProgressStyle::with_template("{bar:30} {pos}/{len} points, {msg} (about {eta} left)")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    bar.set_message(format!("{per_point_s:.1} s each"));
    let spawner: &ChildSpawner = &spawn_child;
    let reports = sweep::run_sweep(points, axis, &targets, &|m| bar.suspend(|| notice(m)), Some(spawner), &mut |_, _, r| {
        bar.set_message(format!(
            "last: {} {} {} t{} p{} QD{} {:.0} IOPS",
            r.pattern, r.rw, r.block_size_bytes, r.threads_count, r.processes, r.queue_depth, r.figures.iops
        ));
        bar.inc(1);
    })
    .map_err(classify)?;
    bar.finish_and_clear();
    if let Some(path) = &args.chart {
        write_output(path, chart::sweep_svg(&reports, axis).map_err(classify)?.as_bytes(), "chart")?;
    }
    if let Some(path) = &args.html {
        write_output(path, html::sweep_page(&reports, axis).map_err(classify)?.as_bytes(), "HTML report")?;
    }
    let csv = sweep::to_csv(&reports);
    if args.json {
        println!("{}", print_json::to_json(&reports));
        return Ok(());
    }
    match &args.csv {
        Some(Some(path)) => write_output(path, csv.as_bytes(), "CSV")?,
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
    table.set_header(vec!["pattern", "rw", "block", "threads", "processes", "QD", "IOPS", "MB/s", "p50 µs", "p99 µs", "CPU µs/IO"]);
    for r in reports {
        let f = &r.figures;
        table.add_row(vec![
            r.pattern.clone(),
            r.rw.clone(),
            r.block_size_bytes.to_string(),
            r.threads_count.to_string(),
            r.processes.to_string(),
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
