//! The `flashscan` binary: parses the command line and hands each subcommand to its own
//! module (`cmd_*.rs`). Errors reach the user as one line on stderr and exit code 2 for bad
//! input (flags, files, data), 1 for failures during a run.

use clap::{Parser, Subcommand};

/// mimalloc instead of glibc malloc: column store scans allocate a 4-16 MB vector per
/// column per row group; glibc hands such sizes back to the kernel on free, so every scan
/// paid page faults and page zeroing for each (15 % of a warm SUM of 4 columns in `perf`).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod cmd_bench;
mod cmd_bench_checkpoint;
mod cmd_bench_compression;
mod cmd_bench_costs;
mod cmd_bench_inserts;
mod cmd_cluster;
mod cmd_demo;
mod cmd_drop;
mod cmd_index;
mod cmd_io;
mod cmd_load;
mod cmd_lookup;
mod cmd_partitions;
mod cmd_rebuild;
mod cmd_scan;
mod cmd_serve;
mod cmd_sql;
mod cmd_stats;
mod cmd_verify;
mod cmd_write;
mod exit;
#[cfg(feature = "sql")]
mod sql_shell;

#[derive(Parser)]
#[command(name = "flashscan", version, about = "A flash-first table engine with a built-in I/O workbench")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Make a small TPC-H database, measure the device, load, scan cold and warm, report.
    Demo(cmd_demo::DemoArgs),
    /// The I/O workbench: what your storage can do (SQLIO / DiskSpd / fio for database people).
    Io(cmd_io::IoArgs),
    /// Make an empty database that takes SQL writes (catalog + write-ahead log).
    Init(cmd_write::InitArgs),
    /// Write the committed rows still only in the log as heap pages; then the log recycles.
    Checkpoint(cmd_write::CheckpointArgs),
    /// Open the log as the writer, replay committed rows, report (and --verify them).
    Recover(cmd_write::RecoverArgs),
    /// Load TPC-H tables (generated) or Parquet/CSV files into a database directory.
    Load(cmd_load::LoadArgs),
    /// Rows and pages per partition of a table.
    Partitions(cmd_partitions::PartitionsArgs),
    /// Scan a table with a built-in query and report where the time went.
    Scan(cmd_scan::ScanArgs),
    /// Rebuild a table as heap, row or page compressed, column store or column store archive.
    Rebuild(cmd_rebuild::RebuildArgs),
    /// Drop a table: out of the catalog (atomically), then its files removed.
    Drop(cmd_drop::DropArgs),
    /// Create B+tree indexes.
    #[command(subcommand)]
    Index(cmd_index::IndexCommand),
    /// Key lookups through an index, one read at a time or with asynchronous prefetch.
    Lookup(cmd_lookup::LookupArgs),
    /// Buffer pool and wait counters since start or reset.
    Stats(cmd_stats::StatsArgs),
    /// Read and check every page, row group, segment and index node (exit 1 on damage).
    Verify(cmd_verify::VerifyArgs),
    /// Measurement tables from the source articles, run here.
    #[command(subcommand)]
    Bench(cmd_bench::BenchCommand),
    /// SQL over flashscan tables (Apache DataFusion).
    Sql(cmd_sql::SqlArgs),
    /// Serve the database over the PostgreSQL wire protocol (psql, drivers, BI tools).
    Serve(cmd_serve::ServeArgs),
    /// Serve a cluster host's partitions to `flashscan sql --cluster` (docs/cluster.md).
    Worker(cmd_cluster::WorkerArgs),
    /// cluster.json: make it from the hosts' databases, check every partition is owned once.
    #[command(subcommand)]
    Cluster(cmd_cluster::ClusterCommand),
}

/// datafusion-distributed 4.0.0's coordinator awaits its background tasks with tokio's
/// `JoinSet::join_all` (`QueryCoordinator::drain_pending_tasks`), which panics with "task N
/// was cancelled" when a query that already failed tears those tasks down. tokio catches the
/// panic in its worker thread; the query's own error is reported (one line, right exit code)
/// either way, but the default hook would print the library's panic and backtrace above it
/// (seen in `cluster_cli`: a host refusing a misplanned scan). Only that exact panic, on a
/// tokio worker thread, is kept quiet; every other panic prints as before. Remove when the
/// library drains with `join_next` (not reported upstream yet: no network here).
fn quiet_cancelled_task_panics() {
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let message = info.payload().downcast_ref::<String>().map(String::as_str).or_else(|| info.payload().downcast_ref::<&str>().copied()).unwrap_or("");
        let on_tokio_worker = std::thread::current().name().is_some_and(|n| n.starts_with("tokio-rt"));
        let from_join_set = info.location().is_some_and(|l| l.file().contains("tokio") && l.file().ends_with("join_set.rs"));
        let cancelled = message.starts_with("task ") && message.ends_with(" was cancelled");
        if !(on_tokio_worker && from_join_set && cancelled) {
            default_hook(info);
        }
    }));
}

fn main() {
    quiet_cancelled_task_panics();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => exit::report_usage_error_and_exit(e),
    };
    if matches!(cli.command, Command::Sql(_)) {
        keep_freed_memory();
    }
    // The server runs the same queries, so the same allocator setting. Measured neutral
    // there (docs/benchmarks.md, session 10: 10 clients, mix / Q1 / Q6 within 1-5 % either
    // way): a long-lived process reuses the memory it faulted, so the zeroing is paid
    // once. Kept for one setting across the query commands.
    if matches!(cli.command, Command::Sql(_) | Command::Serve(_)) {
        small_pages_only(std::env::var_os("MIMALLOC_ALLOW_THP").is_some());
    }
    let result = match cli.command {
        Command::Demo(a) => cmd_demo::run(a),
        Command::Io(a) => cmd_io::run(a),
        Command::Init(a) => cmd_write::init(a),
        Command::Checkpoint(a) => cmd_write::checkpoint(a),
        Command::Recover(a) => cmd_write::recover(a),
        Command::Load(a) => cmd_load::run(a),
        Command::Partitions(a) => cmd_partitions::run(a),
        Command::Scan(a) => cmd_scan::run(a),
        Command::Rebuild(a) => cmd_rebuild::run(a),
        Command::Drop(a) => cmd_drop::run(a),
        Command::Index(c) => cmd_index::run(c),
        Command::Lookup(a) => cmd_lookup::run(a),
        Command::Stats(a) => cmd_stats::run(a),
        Command::Verify(a) => cmd_verify::run(a),
        Command::Sql(a) => cmd_sql::run(a),
        Command::Serve(a) => cmd_serve::run(a),
        Command::Worker(a) => cmd_cluster::worker(a),
        Command::Cluster(c) => cmd_cluster::run(c),
        Command::Bench(c) => cmd_bench::run(c),
    };
    if let Err(e) = result {
        exit::report_and_exit(e);
    }
}

/// Keeps memory a query frees inside the process (mimalloc's `purge_delay` = -1) for the
/// commands that run queries and exit (`flashscan sql`). By default mimalloc hands freed
/// pages back to the kernel a while (1 s in the v3 built here) after they are freed; a query
/// frees and allocates batches, hash tables and group buffers all the time, so the kernel
/// zeroed the same memory again and again (TPC-H Q16 at SF 10: a third of `perf`'s samples in `clear_page_erms`; 5-7 K minor
/// faults against 2 K kept). The memory goes back to the kernel when the process exits; a
/// long-running server (`flashscan serve`) keeps mimalloc's default. `MIMALLOC_PURGE_DELAY`
/// in the environment still wins (mimalloc reads it at start-up; this sets the option only
/// when it is unset). docs/benchmarks.md (speed7a) has the A/B.
fn keep_freed_memory() {
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_some() {
        return;
    }
    // `mi_option_purge_delay` in mimalloc.h (v3, the version libmimalloc-sys 0.1.49 builds by
    // default); the `mimalloc` crate names options only with its `extended` feature, whose
    // dependency is not vendored here. Checked against the option's default before it is
    // set, so another layout of the enum leaves the allocator as it is: 1000 ms in the v3
    // that is built (src/options.c), 10 ms in mimalloc's docs and v2. (The check compared
    // with 10 only, so the option was never set: Q13 at SF 10 still made ~690 `madvise`
    // calls handing memory back, 8 with it set — docs/benchmarks.md, speed8.)
    const MI_OPTION_PURGE_DELAY: std::ffi::c_int = 15;
    const PURGE_DELAY_DEFAULTS_MS: [std::ffi::c_long; 2] = [1000, 10];
    extern "C" {
        fn mi_option_get(option: std::ffi::c_int) -> std::ffi::c_long;
        fn mi_option_set(option: std::ffi::c_int, value: std::ffi::c_long);
    }
    // SAFETY: both are plain option accessors of the linked allocator (mimalloc.h), callable
    // at any time from any thread; the option index is checked against its default first.
    unsafe {
        if PURGE_DELAY_DEFAULTS_MS.contains(&mi_option_get(MI_OPTION_PURGE_DELAY)) {
            mi_option_set(MI_OPTION_PURGE_DELAY, -1);
        }
    }
}

/// Turns transparent huge pages off for the commands that run queries and exit (`flashscan
/// sql`), as `MIMALLOC_ALLOW_THP=0` would: mimalloc v3 (the version built here) asks for
/// huge pages on its arenas (`madvise(MADV_HUGEPAGE)`), so the first touch of a fresh 2 MB
/// page zeroes all of it in the kernel at once. A query process lives a second or less and
/// touches most of its memory once: that zeroing was a third to a half of TPC-H Q16's CPU at
/// SF 10 (`perf`: `clear_page_erms`; 0.3-0.5 s system time against 0.14 s with 4 KB pages,
/// same resident size), the reason the same DataFusion aggregates ran slower above
/// flashscan's scans than in DataFusion-Python (whose mimalloc v2 faults 4 KB pages) —
/// docs/benchmarks.md, Q16. `already_chosen` (`MIMALLOC_ALLOW_THP` in the environment):
/// the user's setting stands. Returns whether huge pages are now off for the process.
fn small_pages_only(already_chosen: bool) -> bool {
    if already_chosen {
        return false;
    }
    #[cfg(target_os = "linux")]
    {
        // A kernel without the call (before 3.15) fails it and keeps its default: slower,
        // same answers.
        // SAFETY: PR_SET_THP_DISABLE takes plain integer arguments and only sets a flag of
        // this process (inherited by its children); no memory is passed.
        unsafe { libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0) == 0 }
    }
    #[cfg(not(target_os = "linux"))]
    {
        false
    }
}

/// The `--json` output of every command: its report as one pretty-printed JSON document
/// on stdout.
fn print_json(report: &impl serde::Serialize) -> anyhow::Result<()> {
    println!("{}", serde_json::to_string_pretty(report)?);
    Ok(())
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    /// PR_GET_THP_DISABLE: 1 when transparent huge pages are off for this process.
    fn huge_pages_off() -> bool {
        // SAFETY: reads a flag of this process; no memory is passed.
        unsafe { libc::prctl(libc::PR_GET_THP_DISABLE, 0, 0, 0, 0) == 1 }
    }

    #[test]
    fn sql_turns_transparent_huge_pages_off_unless_the_user_chose() {
        // Off already when the test runs with MIMALLOC_ALLOW_THP=0 (mimalloc sets the same flag).
        let off_before = huge_pages_off();
        // The user's choice in the environment stands: nothing is changed.
        assert!(!super::small_pages_only(true));
        assert_eq!(huge_pages_off(), off_before);
        assert!(super::small_pages_only(false));
        assert!(huge_pages_off());
        // What the kernel reports for the process (Linux 5.0 and later show the line).
        let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
        if let Some(line) = status.lines().find(|l| l.starts_with("THP_enabled:")) {
            assert_eq!(line.split_whitespace().nth(1), Some("0"), "{line}");
        }
    }
}
