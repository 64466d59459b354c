//! Group-commit micro-benchmark: N threads, each appending one small insert record and
//! committing it (waiting until durable), for S seconds, on real files.
//!
//! ```sh
//! cargo run --release -p flashscan-wal --example commit_bench -- DIR THREADS SECONDS [ROW_BYTES] [--buffered] [--json]
//! ```
//! DIR must not hold a log (a fresh `DIR/wal-<threads>-<pid>` is created inside it and
//! removed afterwards). Prints rows/s, commits/s, commits per flush, commit latency p50/p99
//! (hdrhistogram), CPU µs per commit (getrusage of the whole process: committers and the
//! log writer), and log bytes per commit (padding included).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use flashscan_wal::*;
use hdrhistogram::Histogram;

/// Process CPU time in µs, from the one clock (`flashscan_measure`).
fn cpu_us() -> u64 {
    flashscan_measure::cpu::process_cpu_ns() / 1_000
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let positional: Vec<&String> = args.iter().filter(|a| !a.starts_with("--")).collect();
    if positional.len() < 3 {
        eprintln!("usage: commit_bench DIR THREADS SECONDS [ROW_BYTES] [--buffered] [--json]");
        std::process::exit(2);
    }
    let base = std::path::PathBuf::from(positional[0]);
    let parse = |s: &str, what: &str| -> u64 {
        s.parse().unwrap_or_else(|_| {
            eprintln!("{what} must be a number, got {s:?}");
            std::process::exit(2)
        })
    };
    let threads = parse(positional[1], "THREADS").clamp(1, 1024) as usize;
    let seconds = parse(positional[2], "SECONDS").max(1);
    let row_bytes = positional.get(3).map(|s| parse(s, "ROW_BYTES")).unwrap_or(64) as usize;
    let json = args.iter().any(|a| a == "--json");
    let dir = base.join(format!("wal-{threads}-{}", std::process::id()));
    let mut cfg = WalConfig::new(&dir);
    cfg.direct_io = !args.iter().any(|a| a == "--buffered");
    let identity = DatabaseIdentity { id: 0xBE4C_u128 << 64 | std::process::id() as u128, label: "commit_bench".into() };
    let wal = Arc::new(Wal::create(cfg, identity).unwrap_or_else(|e| {
        eprintln!("commit_bench: {e}");
        std::process::exit(1)
    }));
    for n in wal.notices() {
        eprintln!("notice: {n}");
    }
    // Warm up: segment 0 created, page cache and writer thread running.
    let t = wal.begin();
    wal.commit(t).unwrap();
    let stats0 = wal.stats();
    let stop = Arc::new(AtomicBool::new(false));
    let cpu0 = cpu_us();
    let t0 = Instant::now();
    let workers: Vec<_> = (0..threads)
        .map(|k| {
            let wal = wal.clone();
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut h = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).unwrap();
                let row = vec![k as u8; row_bytes];
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let start = Instant::now();
                    let txn = wal.begin();
                    let rec = Record::Insert(InsertRow { txn, table_id: 1, partition: k as u32, page_no: n, row: row.clone() });
                    wal.append(&rec).unwrap();
                    wal.commit(txn).unwrap();
                    h.saturating_record(start.elapsed().as_micros() as u64);
                    n += 1;
                }
                h
            })
        })
        .collect();
    std::thread::sleep(Duration::from_secs(seconds));
    stop.store(true, Ordering::Relaxed);
    let mut h = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).unwrap();
    for w in workers {
        h.add(w.join().unwrap()).unwrap();
    }
    let elapsed_s = t0.elapsed().as_secs_f64();
    let cpu = cpu_us() - cpu0;
    let s = wal.stats();
    let commits = s.commits_count - stats0.commits_count;
    let flushes = s.flushes_count - stats0.flushes_count;
    let bytes = s.bytes_written - stats0.bytes_written;
    // One row per commit: rows/s and commits/s are the same figure.
    let commits_per_s = commits as f64 / elapsed_s;
    let commits_per_flush = if flushes == 0 { 0.0 } else { commits as f64 / flushes as f64 };
    let (latency_us_p50, latency_us_p99) = (h.value_at_quantile(0.5), h.value_at_quantile(0.99));
    let cpu_us_per_commit = cpu as f64 / commits.max(1) as f64;
    let log_bytes_per_commit = bytes as f64 / commits.max(1) as f64;
    if json {
        println!(
            "{{\"threads\":{threads},\"seconds\":{elapsed_s:.2},\"row_bytes\":{row_bytes},\"rows_per_s\":{commits_per_s:.0},\"commits_per_s\":{commits_per_s:.0},\"commits_per_flush\":{commits_per_flush:.2},\"commit_latency_us\":{{\"p50\":{latency_us_p50},\"p99\":{latency_us_p99}}},\"cpu_us_per_commit\":{cpu_us_per_commit:.1},\"log_bytes_per_commit\":{log_bytes_per_commit:.0},\"flushes\":{flushes}}}"
        );
    } else {
        println!(
            "threads {threads:>3}  rows/s {commits_per_s:>9.0}  commits/s {commits_per_s:>9.0}  commits/flush {commits_per_flush:>6.2}  p50 {latency_us_p50:>6} us  p99 {latency_us_p99:>6} us  cpu/commit {cpu_us_per_commit:>6.1} us  log bytes/commit {log_bytes_per_commit:>6.0}"
        );
    }
    match Arc::try_unwrap(wal) {
        Ok(w) => w.close().unwrap(),
        Err(_) => unreachable!("workers joined"),
    }
    // Only what this run created: the fresh directory named after our pid.
    let _ = std::fs::remove_dir_all(&dir);
}
