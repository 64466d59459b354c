//! `flashscan io` as a user runs it: the built binary on small files in temporary
//! directories. Checks output shapes, exit codes and messages, never timings.

use std::path::Path;
use std::process::{Command, Output};

mod common;
use common::{stderr, stdout};

fn flashscan(args: &[&str]) -> Output {
    flashscan_env(args, &[])
}

fn flashscan_env(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_flashscan"));
    c.arg("io").args(args).env_remove("FLASHSCAN_DISABLE_URING");
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().expect("the flashscan binary runs")
}

/// The test directory's `data` folder, where the workbench makes its test files (the
/// outputs a test checks go beside it).
fn data_dir(dir: &tempfile::TempDir) -> String {
    let d = dir.path().join("data");
    std::fs::create_dir(&d).unwrap();
    d.to_str().unwrap().to_string()
}

/// Quick run flags: tiny file, short run.
const QUICK: [&str; 8] = ["--size", "4M", "-b", "4K", "-d", "200ms", "--warmup", "50ms"];

fn quick<'a>(dir: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut v = vec![dir];
    v.extend_from_slice(&QUICK);
    v.extend_from_slice(extra);
    v
}

fn json(o: &Output) -> serde_json::Value {
    assert!(o.status.success(), "exit {:?}\nstderr: {}", o.status.code(), stderr(o));
    serde_json::from_str(&stdout(o)).unwrap_or_else(|e| panic!("not JSON ({e}): {}", stdout(o)))
}

/// A 1 MiB file flashscan did not make (bytes `i % modulus`); its content, to show later
/// that nothing touched it.
fn foreign_file(path: &Path, modulus: u32) -> Vec<u8> {
    let content: Vec<u8> = (0..(1u32 << 20)).map(|i| (i % modulus) as u8).collect();
    std::fs::write(path, &content).unwrap();
    content
}

fn files_in(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect()
}

/// Exit 2, one `flashscan: ...` line containing `needle`.
fn assert_bad_input(o: &Output, needle: &str) {
    common::assert_one_line_bad_input(o, needle);
    assert!(stderr(o).starts_with("flashscan: "), "{}", stderr(o));
}

#[test]
fn json_has_every_documented_field() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let v = json(&flashscan(&quick(d, &["-t", "2", "-o", "4", "--json"])));
    for key in ["iops", "mb_per_s", "cpu_user_pct", "cpu_sys_pct", "cpu_us_per_io", "ios_count", "block_size_bytes", "queue_depth"] {
        assert!(v[key].is_number(), "{key} missing: {v}");
    }
    for key in ["p50", "p90", "p99", "p99_9", "max"] {
        assert!(v["latency_us"][key].is_number(), "latency_us.{key} missing");
    }
    assert_eq!(v["latency_ms_buckets"].as_array().unwrap().len(), 25);
    assert!(v["engine"].is_string());
    assert_eq!(v["block_size_bytes"], 4096);
    assert_eq!(v["queue_depth"], 4);
    let targets = v["targets"].as_array().unwrap();
    assert_eq!(targets.len(), 1);
    assert!(targets[0]["iops"].is_number() && targets[0]["latency_us"]["p99"].is_number());
    let threads = targets[0]["threads"].as_array().unwrap();
    assert_eq!(threads.len(), 2);
    for t in threads {
        for key in ["iops", "mb_per_s", "cpu_us_per_io", "cpu_user_pct"] {
            assert!(t[key].is_number(), "thread {key} missing");
        }
        assert_eq!(t["latency_ms_buckets"].as_array().unwrap().len(), 25);
    }
    assert!(v["ios_count"].as_u64().unwrap() > 0);
}

#[test]
fn table_and_csv_print_the_same_run() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let o = flashscan(&quick(d, &[]));
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    assert!(text.contains("IOPS") && text.contains("p99.9 µs") && text.contains("% of I/Os"), "{text}");
    let o = flashscan(&quick(d, &["--csv"]));
    assert!(o.status.success(), "{}", stderr(&o));
    let csv = stdout(&o);
    let lines: Vec<&str> = csv.lines().collect();
    assert!(lines[0].starts_with("scope,target,thread,engine"));
    assert!(lines[1].starts_with("total,"));
    let columns = lines[0].split(',').count();
    assert!(lines.iter().all(|l| l.split(',').count() == columns));
}

#[test]
fn verify_through_the_binary_on_both_engines() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    for engine in ["uring", "psync"] {
        let o = flashscan(&[d, "--verify", "--size", "2M", "-b", "8K", "-o", "8", "--engine", engine]);
        assert!(o.status.success(), "{engine}: {}", stderr(&o));
        assert!(stdout(&o).contains(" 0 mismatched"), "{}", stdout(&o));
        let v = json(&flashscan(&[d, "--verify", "--size", "2M", "-b", "4K", "--engine", engine, "--json"]));
        assert_eq!(v["ok"], true);
        assert_eq!(v["targets"][0]["blocks_count"], 512);
    }
}

#[test]
fn disabled_uring_falls_back_to_psync_with_a_notice() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let o = flashscan_env(&quick(d, &["-t", "2", "--json"]), &[("FLASHSCAN_DISABLE_URING", "1")]);
    let v = json(&o);
    assert_eq!(v["engine"], "psync");
    let err = stderr(&o);
    assert!(err.contains("io_uring unavailable") && err.contains("psync"), "{err}");
    assert_eq!(err.matches("io_uring unavailable").count(), 1, "one notice, not one per thread: {err}");
}

#[test]
fn the_null_engine_measures_the_harness() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let v = json(&flashscan(&quick(d, &["--engine", "null", "-o", "32", "--json"])));
    assert_eq!(v["engine"], "null");
    assert!(v["ios_count"].as_u64().unwrap() > 1000);
}

#[test]
fn parameter_files_as_sqlio_writes_them() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.dat");
    let b = dir.path().join("b.dat");
    let params = dir.path().join("param.txt");
    std::fs::write(&params, format!("# two files\n{} 2 0x0 4\n\n{} 1 0x0 2   # second\n", a.display(), b.display())).unwrap();
    let v = json(&flashscan(&["-F", params.to_str().unwrap(), "-b", "4K", "-d", "200ms", "--warmup", "0", "--json"]));
    let targets = v["targets"].as_array().unwrap();
    assert_eq!(targets.len(), 2);
    assert_eq!(targets[0]["threads"].as_array().unwrap().len(), 2);
    assert_eq!(targets[0]["size_bytes"], 4 << 20);
    assert_eq!(targets[1]["size_bytes"], 2 << 20);
    assert_eq!(v["threads_count"], 3);

    std::fs::write(&params, format!("{} 1 0x0 4\n{} x 0x0 4\n", a.display(), b.display())).unwrap();
    let o = flashscan(&["-F", params.to_str().unwrap()]);
    assert_bad_input(&o, &format!("{}:2:", params.display()));
    assert!(stderr(&o).contains("thread count"));
}

#[test]
fn sweep_writes_csv_and_chart() {
    let dir = tempfile::tempdir().unwrap();
    let d: &str = &data_dir(&dir);
    let csv = dir.path().join("sweep.csv");
    let svg = dir.path().join("sweep.svg");
    let o = flashscan(&[
        d, "--sweep", "-b", "4K", "-o", "1,2", "-d", "150ms", "--warmup", "0", "--size", "2M",
        "--csv", csv.to_str().unwrap(), "--chart", svg.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = std::fs::read_to_string(&csv).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    // {seq, random} x {read, write} x one block size x two depths.
    assert_eq!(lines.len(), 1 + 8, "{text}");
    assert!(lines[1].contains(",sequential,read,") && lines[1].contains(",4096,1,"), "{}", lines[1]);
    let chart = std::fs::read_to_string(&svg).unwrap();
    assert!(chart.contains("<svg") && chart.contains("IOPS"));
    assert!(stdout(&o).contains("QD"));
}

#[test]
fn bad_input_exits_2_with_one_line_and_leaves_no_file() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let missing = dir.path().join("no/such/dir/file.dat");
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec![missing.to_str().unwrap()], "does not exist"),
        (vec![d, "--size", "100T"], "not enough free space"),
        (vec![d, "-b", "1000"], "--buffered"),
        (vec![d, "--offset", "1000"], "--buffered"),
        (vec![d, "-b", "16M"], "512 to 8M"),
        (vec![d, "-b", "8Q"], "unknown size suffix"),
        (vec![d, "-d", "0"], "greater than zero"),
        (vec![d, "-d", "99999h"], "absurd"),
        (vec![d, "-o", "0"], "outstanding"),
        (vec![d, "--rw", "mix"], "--write-pct"),
        (vec![d, "--engine", "spdk"], "unknown --engine"),
        (vec![], "no target"),
        (vec![d, "-F", "/nonexistent/param.txt"], "parameter file"),
    ];
    for (args, needle) in cases {
        let o = flashscan(&args);
        assert_bad_input(&o, needle);
        assert!(files_in(dir.path()).is_empty(), "{args:?} left {:?}", files_in(dir.path()));
    }
    // A directory nothing can be created in (proc has no space and takes no files).
    let o = flashscan(&["/proc/self", "--size", "4M"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).starts_with("flashscan: "));
    // Unknown flags are refused by the argument parser (clap, in main.rs): exit 2 too.
    for args in [&[d, "--no-such-flag"][..], &["--no-such-flag", d][..], &[d, "-Z"][..]] {
        let o = flashscan(args);
        assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
        assert!(stderr(&o).contains("unexpected argument"), "{}", stderr(&o));
    }
    assert!(files_in(dir.path()).is_empty());
}

#[test]
fn a_file_flashscan_did_not_create_is_never_written_without_force() {
    let dir = tempfile::tempdir().unwrap();
    let theirs = dir.path().join("theirs.dat");
    let content = foreign_file(&theirs, 251);
    let t = theirs.to_str().unwrap();
    for extra in [&["--rw", "write"][..], &["--rw", "mix", "--write-pct", "10"][..], &["--verify"][..]] {
        let mut args = vec![t, "-b", "4K", "-d", "200ms", "--warmup", "0"];
        args.extend_from_slice(extra);
        assert_bad_input(&flashscan(&args), "--force");
    }
    assert_eq!(std::fs::read(&theirs).unwrap(), content, "the file must be untouched");
    // Reads are fine.
    let o = flashscan(&[t, "-b", "4K", "-d", "200ms", "--warmup", "0"]);
    assert!(o.status.success(), "{}", stderr(&o));
    // And --force allows writes.
    let o = flashscan(&[t, "-b", "4K", "-d", "200ms", "--warmup", "0", "--rw", "write", "--force"]);
    assert!(o.status.success(), "{}", stderr(&o));
}

#[test]
fn status_interval_prints_lines_and_json_carries_the_series() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let o = flashscan(&[d, "--size", "4M", "-b", "4K", "-d", "1s", "--warmup", "50ms", "--status-interval", "250ms", "--json"]);
    let v = json(&o);
    let intervals = v["intervals"].as_array().unwrap();
    assert_eq!(intervals.len(), 4, "{intervals:?}");
    for (k, i) in intervals.iter().enumerate() {
        assert!((i["t_s"].as_f64().unwrap() - 0.25 * (k + 1) as f64).abs() < 1e-6);
        for key in ["iops", "mb_per_s", "outstanding_ios"] {
            assert!(i[key].is_number(), "{key} missing: {i}");
        }
        assert!(i["latency_us"]["p50"].is_number() && i["latency_us"]["p99"].is_number());
    }
    let sum: u64 = intervals.iter().map(|i| i["ios_count"].as_u64().unwrap()).sum();
    assert_eq!(sum, v["ios_count"].as_u64().unwrap(), "the deltas add up to the total");
    // The lines went to stderr (stdout is the JSON), one per interval, with the time.
    let lines: Vec<String> = stderr(&o).lines().filter(|l| l.contains(" UTC ") && l.contains(" IOPS ")).map(String::from).collect();
    assert_eq!(lines.len(), 4, "{}", stderr(&o));
    assert!(lines[0].contains("UTC") && lines[0].contains("t=") && lines[0].contains("p99") && lines[0].contains("outstanding"));
    // CSV has the timeline rows; the chart is the timeline.
    let svg = dir.path().join("timeline.svg");
    let csv = dir.path().join("timeline.csv");
    let o = flashscan(&[
        d, "--size", "4M", "-b", "4K", "-d", "600ms", "--warmup", "0", "--status-interval", "200ms", "--csv", csv.to_str().unwrap(),
        "--chart", svg.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o).lines().filter(|l| l.contains(" UTC ") && l.contains(" IOPS ")).count(), 3, "{}", stdout(&o));
    let text = std::fs::read_to_string(&csv).unwrap();
    assert_eq!(text.lines().filter(|l| l.starts_with("interval,")).count(), 3, "{text}");
    assert!(text.lines().next().unwrap().ends_with(",t_s,outstanding_ios"));
    let chart = std::fs::read_to_string(&svg).unwrap();
    assert!(chart.contains("<svg") && chart.contains("IOPS per interval"));
    // --chart on a single run without intervals says what to add.
    assert_bad_input(&flashscan(&quick(d, &["--chart", dir.path().join("x.svg").to_str().unwrap()])), "--status-interval");
}

#[test]
fn outputs_never_replace_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let d: &str = &data_dir(&dir);
    let theirs = dir.path().join("theirs.txt");
    std::fs::write(&theirs, b"precious").unwrap();
    let link = dir.path().join("report.csv");
    std::os::unix::fs::symlink(&theirs, &link).unwrap();
    let t = theirs.to_str().unwrap();
    let l = link.to_str().unwrap();
    for flag_args in [
        vec!["--csv", t],
        vec!["--csv", l],
        vec!["--html", t],
        vec!["--html", l],
        vec!["--save-job", l],
        vec!["--sweep", "-o", "1", "--chart", l],
    ] {
        let mut args = quick(d, &[]);
        args.extend_from_slice(&flag_args);
        let o = flashscan(&args);
        assert_bad_input(&o, "remove it or pick another name");
    }
    assert_eq!(std::fs::read(&theirs).unwrap(), b"precious");
    assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink());
    // A new name works once; the second run refuses to replace what the first wrote.
    let csv = dir.path().join("new.csv");
    let c = csv.to_str().unwrap();
    assert!(flashscan(&quick(d, &["--csv", c])).status.success());
    assert_bad_input(&flashscan(&quick(d, &["--csv", c])), "remove it or pick another name");
    let twice = dir.path().join("twice.out");
    let t2 = twice.to_str().unwrap();
    assert_bad_input(&flashscan(&quick(d, &["--csv", t2, "--html", t2])), "its own file");
    assert!(!twice.exists());
}

#[test]
fn a_forged_mark_does_not_allow_writes() {
    let dir = tempfile::tempdir().unwrap();
    let victim = dir.path().join("victim.dat");
    let content = foreign_file(&victim, 253);
    let link = dir.path().join("bench.dat");
    std::os::unix::fs::symlink(&victim, &link).unwrap();
    std::fs::write(dir.path().join(".bench.dat.flashscan"), b"").unwrap();
    let l = link.to_str().unwrap();
    for extra in [&["--rw", "write"][..], &["--verify"][..], &["--rw", "write", "--sync"][..]] {
        let mut args = vec![l, "-b", "4K", "-d", "200ms", "--warmup", "0"];
        args.extend_from_slice(extra);
        assert_bad_input(&flashscan(&args), "--force");
    }
    assert_eq!(std::fs::read(&victim).unwrap(), content, "the link's target is untouched");
}

#[test]
fn huge_sizes_and_offsets_are_refused_and_leave_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    for (args, needle) in [
        (vec![d, "--size", "18446744073709551615"], "--size"),
        (vec![d, "--size", "18446744073709551616"], "too large"),
        (vec![d, "--size", "16777215T"], "--size"),
        (vec![d, "--offset", "18446744073709551104"], "--offset"),
        (vec![d, "--status-interval", "0"], "--status-interval"),
        (vec![d, "--sync"], "--rw write"),
    ] {
        assert_bad_input(&flashscan(&args), needle);
        assert!(files_in(dir.path()).is_empty(), "{args:?} left {:?}", files_in(dir.path()));
    }
}

#[test]
fn bad_sweep_values_exit_2_with_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    for (value, needle) in [
        ("threads=0", "1..=64"),
        ("threads=1,1", "twice"),
        ("cores=1,2", "unknown axis"),
        ("processes=", "no values"),
        ("processes=1,two", "`two`"),
        ("processes=65", "1..=64"),
    ] {
        assert_bad_input(&flashscan(&[d, "--sweep", value]), needle);
    }
    assert!(files_in(dir.path()).is_empty());
}

#[test]
fn thread_and_process_sweeps_with_chart_and_html() {
    let dir = tempfile::tempdir().unwrap();
    let d: &str = &data_dir(&dir);
    for axis in ["threads=1,2", "processes=1,2"] {
        let name = axis.split('=').next().unwrap();
        let html = dir.path().join(format!("{name}.html"));
        let svg = dir.path().join(format!("{name}.svg"));
        let o = flashscan(&[
            d, "--sweep", axis, "--size", "4M", "-b", "4K", "-o", "2", "-d", "300ms", "--warmup", "100ms", "--json",
            "--html", html.to_str().unwrap(), "--chart", svg.to_str().unwrap(),
        ]);
        let v = json(&o);
        let points = v.as_array().unwrap();
        assert_eq!(points.len(), 2);
        assert!(points.iter().all(|p| p["iops"].as_f64().unwrap() > 0.0));
        match name {
            "threads" => {
                assert_eq!(points[1]["threads_count"], 2);
                assert_eq!(points[1]["processes"], 1);
            }
            _ => {
                assert_eq!(points[1]["processes"], 2);
                // Two processes of one thread each: both threads are in the result.
                assert_eq!(points[1]["targets"][0]["threads"].as_array().unwrap().len(), 2);
                assert_eq!(points[1]["threads_count"], 1, "threads per process");
            }
        }
        assert_eq!(points[0]["job"]["sweep"], name);
        let page = std::fs::read_to_string(&html).unwrap();
        assert!(page.starts_with("<!DOCTYPE html>") && page.contains("<svg") && page.contains("Points"));
        // Self-contained: no script, no style sheet or image fetched (the SVG's xmlns is a name, not a fetch).
        for fetch in ["<script", "<link", "src=", "href=", "<?xml", "url("] {
            assert!(!page.contains(fetch), "{fetch} in the page");
        }
        let chart = std::fs::read_to_string(&svg).unwrap();
        assert!(chart.contains(if name == "threads" { "threads per target" } else { "separate processes" }), "{chart:.300}");
    }
}

#[test]
fn a_saved_job_and_a_results_json_replay_the_same_test() {
    let dir = tempfile::tempdir().unwrap();
    let d: &str = &data_dir(&dir);
    let job = dir.path().join("job.json");
    let first = json(&flashscan(&[
        d, "--size", "4M", "-b", "8K", "-o", "3", "-t", "2", "-f", "seq", "--rw", "write", "--sync", "-d", "300ms", "--warmup", "0",
        "--seed", "42", "--status-interval", "100ms", "--save-job", job.to_str().unwrap(), "--json",
    ]));
    let saved: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&job).unwrap()).unwrap();
    assert_eq!(saved, first["job"], "the saved job is the one the result records");
    assert_eq!(saved["sync"], true);
    assert_eq!(saved["duration_us"], 300_000);
    // Replaying the job file, and replaying the result itself, run the same settings.
    let result_file = dir.path().join("result.json");
    std::fs::write(&result_file, serde_json::to_string(&first).unwrap()).unwrap();
    for file in [&job, &result_file] {
        let again = json(&flashscan(&["--job", file.to_str().unwrap(), "--json"]));
        assert_eq!(again["job"], first["job"], "replaying {}", file.display());
        assert_eq!(again["intervals"].as_array().unwrap().len(), 3);
        assert_eq!(again["queue_depth"], 3);
        assert_eq!(again["sync"], true);
    }
    // A job and flags that would change it do not mix.
    let o = flashscan(&["--job", job.to_str().unwrap(), "-o", "8"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    // A broken job file: one line.
    let broken = dir.path().join("broken.json");
    std::fs::write(&broken, saved.to_string().replace("\"queue_depth\":3", "\"queue_depth\":0")).unwrap();
    assert_bad_input(&flashscan(&["--job", broken.to_str().unwrap()]), "queue depth");
    assert_bad_input(&flashscan(&["--job", dir.path().join("none.json").to_str().unwrap()]), "cannot read");
}
