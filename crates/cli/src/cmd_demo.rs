//! `flashscan demo`: the README's first command. It runs the same commands a user would
//! type — measure the device, load TPC-H, scan cold and warm with `--check` — as child
//! processes of this binary, printing each command before its output so every figure can
//! be rerun by hand, then sums up what the scans reached against the device.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::Context;

use crate::exit::bad_input;

/// Marks a directory as made by `flashscan demo`, so a rerun may reuse it and nothing
/// else is ever written into a directory flashscan did not make.
const DEMO_MARKER: &str = ".flashscan-demo";

#[derive(clap::Args)]
pub struct DemoArgs {
    /// TPC-H scale factor (1 = 6M lineitem rows, about 1 GB on disk).
    #[arg(long, default_value = "1")]
    pub sf: f64,
    /// Folder of its own for the demo (created; reused by a later demo).
    #[arg(long, default_value = "flashscan-demo")]
    pub dir: PathBuf,
    /// Seconds per device measurement.
    #[arg(long, default_value = "3")]
    pub io_seconds: u32,
    /// Queries to run, cold and warm.
    #[arg(long, default_value = "count,count11,sum4,needle,q1")]
    pub queries: String,
}

pub fn run(args: DemoArgs) -> anyhow::Result<()> {
    if !(args.sf > 0.0 && args.sf <= 1000.0) {
        return Err(bad_input(format!("--sf {}: the scale factor must be above 0 and at most 1000", args.sf)));
    }
    prepare_dir(&args.dir)?;
    let exe = std::env::current_exe().context("cannot find the flashscan binary to run the demo's steps")?;
    let started = Instant::now();
    let dir = args.dir.display().to_string();

    println!("== 1. What the device delivers (flashscan io, O_DIRECT)\n");
    let device = format!("{dir}/device.dat");
    let secs = args.io_seconds.to_string();
    let seq = ["io", &device, "--size", "1G", "--pattern", "seq", "-b", "1M", "-o", "16", "-d", &secs, "--warmup", "1"];
    step(&exe, &seq)?;
    let random = ["io", &device, "--pattern", "random", "-b", "8K", "-t", "2", "-o", "32", "-d", &secs, "--warmup", "1"];
    step(&exe, &random)?;

    let db = format!("{dir}/db");
    println!("== 2. Load TPC-H SF {} (lineitem, orders)\n", args.sf);
    if Path::new(&db).join("catalog.json").exists() && tables_present(&exe, &db) {
        println!("(reusing the database loaded by an earlier demo in {db})\n");
    } else {
        let sf = args.sf.to_string();
        step(&exe, &["load", &db, "--sf", &sf, "--tables", "lineitem,orders", "--replace"])?;
    }
    step(&exe, &["partitions", &db, "lineitem"])?;

    println!("== 3. Scans, cold (from the device) and warm (from memory), each checked against a raw read\n");
    let queries: Vec<&str> = args.queries.split(',').map(str::trim).filter(|q| !q.is_empty()).collect();
    // One full report so the reader sees where the time went; the rest as a summary.
    step(&exe, &["scan", &db, "lineitem", "--query", queries.first().copied().unwrap_or("count"), "--cold", "--check"])?;
    let mut rows = Vec::new();
    for q in &queries {
        for cold in [true, false] {
            let mut a = vec!["scan", db.as_str(), "lineitem", "--query", q, "--check", "--json"];
            a.push(if cold { "--cold" } else { "--warm" });
            let report = step_json(&exe, &a)?;
            rows.push(summary_row(q, cold, &report));
        }
    }

    println!("== 4. The same rows as a column store: only the needed columns are read\n");
    let column_store = "lineitem_columnstore";
    if !Command::new(&exe).args(["partitions", &db, column_store, "--json"]).output().map(|o| o.status.success()).unwrap_or(false) {
        step(&exe, &["rebuild", &db, "lineitem", "--compression", "columnstore", "--into", column_store])?;
    }
    for q in ["sum4", "q1"] {
        for cold in [true, false] {
            let mut a = vec!["scan", db.as_str(), column_store, "--query", q, "--check", "--json"];
            a.push(if cold { "--cold" } else { "--warm" });
            let report = step_json(&exe, &a)?;
            rows.push(summary_row(&format!("{q} (columnstore)"), cold, &report));
        }
    }
    print_summary(&rows);
    #[cfg(feature = "sql")]
    {
        println!("\n== 5. SQL over the same tables (Apache DataFusion), and the server for other clients\n");
        step(&exe, &["sql", &db, "select l_returnflag, l_linestatus, count(*) as lines, sum(l_quantity) as quantity from lineitem group by 1, 2 order by 1, 2"])?;
        println!("\nserve it to psql, drivers and BI tools:  flashscan serve {db}   (then: psql -h 127.0.0.1 -p 5432 -U flashscan -d flashscan)");
    }
    println!("\ndemo finished in {:.1} s; the database stays in {db} (remove the folder when done)", started.elapsed().as_secs_f64());
    Ok(())
}

fn prepare_dir(dir: &Path) -> anyhow::Result<()> {
    if dir.exists() {
        if !dir.join(DEMO_MARKER).exists() {
            return Err(bad_input(format!(
                "{} exists and was not made by flashscan demo: pass --dir NEW_FOLDER",
                dir.display()
            )));
        }
        return Ok(());
    }
    std::fs::create_dir_all(dir).map_err(|e| bad_input(format!("cannot create {}: {e}: pass --dir to a writable place", dir.display())))?;
    std::fs::write(dir.join(DEMO_MARKER), b"made by flashscan demo\n")
        .map_err(|e| bad_input(format!("cannot write in {}: {e}", dir.display())))?;
    Ok(())
}

fn tables_present(exe: &Path, db: &str) -> bool {
    ["lineitem", "orders"].iter().all(|t| {
        Command::new(exe).args(["partitions", db, t, "--json"]).output().map(|o| o.status.success()).unwrap_or(false)
    })
}

/// Runs one step with its output going straight to the terminal.
fn step(exe: &Path, args: &[&str]) -> anyhow::Result<()> {
    println!("$ flashscan {}", args.join(" "));
    let status = Command::new(exe).args(args).status().with_context(|| format!("cannot run flashscan {}", args[0]))?;
    println!();
    if !status.success() {
        anyhow::bail!("demo step `flashscan {}` failed ({status})", args.join(" "));
    }
    Ok(())
}

fn step_json(exe: &Path, args: &[&str]) -> anyhow::Result<serde_json::Value> {
    println!("$ flashscan {}", args.join(" "));
    let out = Command::new(exe).args(args).output().with_context(|| format!("cannot run flashscan {}", args[0]))?;
    if !out.status.success() {
        anyhow::bail!("demo step `flashscan {}` failed: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim());
    }
    serde_json::from_slice(&out.stdout).with_context(|| format!("`flashscan {}` printed no JSON", args.join(" ")))
}

fn summary_row(query: &str, cold: bool, r: &serde_json::Value) -> Vec<String> {
    let f = |k: &str| r.get(k).and_then(|v| v.as_f64()).unwrap_or(f64::NAN);
    vec![
        query.to_string(),
        if cold { "cold" } else { "warm" }.to_string(),
        format!("{:.3}", f("elapsed_s")),
        format!("{:.1}", f("bytes_read") / 1e6),
        format!("{:.0}", f("mb_per_s")),
        format!("{:.1}", f("rows_per_s") / 1e6),
        format!("{:.2}", f("cpu_us_per_page")),
        format!("{:.0}", f("raw_mb_per_s")),
        depth_cell(r),
        format!("{:.0} %", f("efficiency") * 100.0),
        r.get("verdict").and_then(|v| v.as_str()).unwrap_or("").to_string(),
    ]
}

/// Reads in flight per worker the scan ended with, and whether it found that itself.
fn depth_cell(r: &serde_json::Value) -> String {
    let depth = r.get("queue_depth").and_then(|v| v.as_u64()).map_or_else(|| "?".to_string(), |d| d.to_string());
    match r.get("queue_depth_mode").and_then(|v| v.as_str()) {
        Some("auto") => format!("{depth} (found)"),
        _ => depth,
    }
}

fn print_summary(rows: &[Vec<String>]) {
    let mut t = comfy_table::Table::new();
    t.load_preset(comfy_table::presets::ASCII_MARKDOWN);
    t.set_header(["query", "mode", "elapsed s", "MB read", "MB/s", "M rows/s", "CPU µs/page", "raw MB/s", "depth", "efficiency", "verdict"]);
    for r in rows {
        t.add_row(r);
    }
    println!("== Summary: scan speed against what the same files deliver raw\n\n{t}");
}
