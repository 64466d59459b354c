//! The cluster from the command line (docs/cluster.md): `load --host I/N` on two hosts,
//! `flashscan worker` processes on loopback ports, `cluster make` / `cluster check`,
//! `sql --cluster` giving the single machine's answers; a host asked for another host's
//! task refuses in one line; a dead worker fails the query within 30 s naming the host.
#![cfg(feature = "cluster")]

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// What issue 17 promises for a dead host.
const DEAD_HOST_ERROR_WITHIN: Duration = Duration::from_secs(30);
/// A command of this test that has not finished in this long hangs: the test fails.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(120);

fn flashscan() -> Command {
    Command::new(env!("CARGO_BIN_EXE_flashscan"))
}

/// Runs `args` with a deadline (a hang fails the test instead of stalling it).
fn run(args: &[&str]) -> Output {
    let mut child = flashscan().args(args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap_or_else(|e| panic!("{e}"));
    let started = Instant::now();
    loop {
        if child.try_wait().unwrap_or_else(|e| panic!("{e}")).is_some() {
            return child.wait_with_output().unwrap_or_else(|e| panic!("{e}"));
        }
        if started.elapsed() > COMMAND_TIMEOUT {
            let _ = child.kill();
            panic!("flashscan {args:?} did not finish in {COMMAND_TIMEOUT:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn ok(args: &[&str]) -> String {
    let o = run(args);
    assert!(o.status.success(), "flashscan {args:?} failed: {}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn path(p: &Path) -> &str {
    p.to_str().unwrap_or_else(|| panic!("non-UTF-8 temp path {}", p.display()))
}

/// A port free now (the worker binds it a moment later).
fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("{e}"));
    l.local_addr().unwrap_or_else(|e| panic!("{e}")).port()
}

/// A `flashscan worker` process; killed when dropped.
struct Worker {
    child: Child,
    address: String,
}

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_worker(db: &Path) -> Worker {
    let address = format!("127.0.0.1:{}", free_port());
    let mut child = flashscan().args(["worker", path(db), "--listen", &address]).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap_or_else(|e| panic!("{e}"));
    let started = Instant::now();
    while std::net::TcpStream::connect(&address).is_err() {
        if let Ok(Some(status)) = child.try_wait() {
            let mut err = String::new();
            if let Some(mut e) = child.stderr.take() {
                let _ = e.read_to_string(&mut err);
            }
            panic!("worker {address} exited {status}: {err}");
        }
        assert!(started.elapsed() < Duration::from_secs(30), "worker {address} does not listen");
        std::thread::sleep(Duration::from_millis(50));
    }
    Worker { child, address }
}

struct Setup {
    dir: tempfile::TempDir,
    single: PathBuf,
    hosts: Vec<PathBuf>,
}

fn load_all(tables: &str) -> Setup {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let single = dir.path().join("single");
    ok(&["load", path(&single), "--sf", "0.01", "--tables", tables, "--partitions", "4", "--threads", "2"]);
    let hosts: Vec<PathBuf> = (0..2)
        .map(|i| {
            let db = dir.path().join(format!("host{i}"));
            ok(&["load", path(&db), "--sf", "0.01", "--tables", tables, "--partitions", "4", "--threads", "2", "--host", &format!("{i}/2")]);
            db
        })
        .collect();
    Setup { dir, single, hosts }
}

fn one_line_error(o: &Output, code: i32) -> String {
    let err = String::from_utf8_lossy(&o.stderr).trim().to_string();
    assert_eq!(o.status.code(), Some(code), "exit code; stderr: {err}");
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    err
}

#[test]
fn workers_make_check_and_sql_cluster_give_the_single_machine_answers() {
    let s = load_all("orders,lineitem");
    // `rebuild --host`: the hosts' lineitem becomes a column store (its filters then travel
    // with the scan tasks); a wrong --host is refused in one line.
    let wrong = run(&["rebuild", path(&s.hosts[0]), "lineitem", "--compression", "columnstore", "--host", "1/2"]);
    let err = one_line_error(&wrong, 2);
    assert!(err.contains("host 0/2, not 1/2"), "{err}");
    for (i, db) in s.hosts.iter().enumerate() {
        ok(&["rebuild", path(db), "lineitem", "--compression", "columnstore", "--host", &format!("{i}/2")]);
    }
    let workers: Vec<Worker> = s.hosts.iter().map(|db| start_worker(db)).collect();
    let file = s.dir.path().join("cluster.json");
    let made = ok(&["cluster", "make", path(&file), "--host", &format!("{}={}", workers[0].address, path(&s.hosts[0])), "--host", &format!("{}={}", workers[1].address, path(&s.hosts[1]))]);
    assert!(made.contains("2 hosts, 2 tables"), "{made}");
    // cluster.json is never overwritten.
    let again = run(&["cluster", "make", path(&file), "--host", &format!("{}={}", workers[0].address, path(&s.hosts[0]))]);
    one_line_error(&again, 2);
    let checked = ok(&["cluster", "check", path(&file)]);
    assert!(checked.contains("ok") && checked.contains("8 partitions of 2 tables") && checked.contains("2 host catalogs read"), "{checked}");

    for sql in [
        "SELECT count(*), sum(l_quantity), min(l_shipdate), max(l_comment) FROM lineitem",
        "SELECT l_returnflag, l_linestatus, count(*) AS n, sum(l_extendedprice) AS s FROM lineitem GROUP BY l_returnflag, l_linestatus ORDER BY l_returnflag, l_linestatus",
        "SELECT o_orderpriority, count(*) FROM orders JOIN lineitem ON o_orderkey = l_orderkey WHERE l_commitdate < l_receiptdate GROUP BY o_orderpriority ORDER BY o_orderpriority",
        "SELECT o_orderkey, o_totalprice FROM orders WHERE o_orderkey = 4",
        "SELECT l_shipmode, count(*), sum(l_quantity) FROM lineitem WHERE l_quantity < 10 AND l_comment LIKE '%ly%' GROUP BY l_shipmode ORDER BY l_shipmode",
    ] {
        let expected = ok(&["sql", path(&s.single), sql, "--csv"]);
        let got = ok(&["sql", "--cluster", path(&file), sql, "--csv"]);
        assert_eq!(got, expected, "{sql}");
        assert!(expected.lines().count() >= 2, "{sql}: rows expected: {expected}");
    }

    // A host's database alone answers for its own partitions and says so on stderr (its
    // refusal of SQL writes is tested in crates/write).
    let alone = run(&["sql", path(&s.hosts[0]), "SELECT count(*) FROM orders", "--csv"]);
    assert_eq!(alone.status.code(), Some(0));
    let note = String::from_utf8_lossy(&alone.stderr);
    assert!(note.contains("host 0 of 2") && note.contains("--cluster"), "{note}");

    // EXPLAIN ANALYZE: the distributed plan and a table of tasks with host, partitions,
    // rows and bytes.
    let explained = ok(&["sql", "--cluster", path(&file), "EXPLAIN ANALYZE SELECT count(*) FROM lineitem WHERE l_quantity < 5"]);
    assert!(explained.contains("bytes read") && explained.contains("partitions") && explained.contains(&workers[1].address), "{explained}");

    // A cluster.json whose addresses are swapped sends host 0's task to host 1's worker:
    // it refuses, in one line, naming itself and the host the task was planned for.
    let text = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{e}"));
    let (a0, a1) = (&workers[0].address, &workers[1].address);
    let swapped = text.replace(a0.as_str(), "ADDRESS0").replace(a1.as_str(), a0.as_str()).replace("ADDRESS0", a1.as_str());
    let swapped_file = s.dir.path().join("swapped.json");
    std::fs::write(&swapped_file, swapped).unwrap_or_else(|e| panic!("{e}"));
    // (A sum, not count(*): DataFusion answers count(*) from the exact row count, no scan.)
    let refused = run(&["sql", "--cluster", path(&swapped_file), "SELECT sum(l_quantity) FROM lineitem"]);
    let err = one_line_error(&refused, refused.status.code().unwrap_or(-1));
    assert_ne!(refused.status.code(), Some(0));
    assert!(err.contains("refuses") && err.contains("planned for host"), "{err}");

    // A partition of another host on the command line: `load --host` into a host of
    // another slot is refused too.
    let other = run(&["load", path(&s.hosts[0]), "--sf", "0.01", "--tables", "nation", "--partitions", "4", "--host", "1/2"]);
    let err = one_line_error(&other, 2);
    assert!(err.contains("0/2"), "{err}");
    let bad = run(&["load", path(&s.hosts[0]), "--sf", "0.01", "--tables", "nation", "--host", "2/2"]);
    one_line_error(&bad, 2);
    // A worker over a database that is not a cluster host.
    let plain = run(&["worker", path(&s.single), "--listen", "127.0.0.1:1"]);
    let err = one_line_error(&plain, 2);
    assert!(err.contains("not a cluster host"), "{err}");
}

#[test]
fn a_dead_worker_fails_the_query_naming_the_host_within_30_s() {
    let s = load_all("lineitem");
    let w0 = start_worker(&s.hosts[0]);
    let mut w1 = start_worker(&s.hosts[1]);
    let file = s.dir.path().join("cluster.json");
    ok(&["cluster", "make", path(&file), "--host", &format!("{}={}", w0.address, path(&s.hosts[0])), "--host", &format!("{}={}", w1.address, path(&s.hosts[1]))]);
    let sql = "SELECT l_returnflag, count(*) FROM lineitem GROUP BY l_returnflag";
    ok(&["sql", "--cluster", path(&file), sql]);
    let _ = w1.child.kill();
    let _ = w1.child.wait();
    let started = Instant::now();
    let o = run(&["sql", "--cluster", path(&file), sql]);
    let took = started.elapsed();
    let err = one_line_error(&o, 1);
    assert!(took < DEAD_HOST_ERROR_WITHIN, "took {took:?}: {err}");
    assert!(err.contains(&w1.address) && err.contains("host 1"), "{err}");
}
