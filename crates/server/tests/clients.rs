//! flashscan serve driven by more of the clients people already have: asyncpg (prepared
//! statements, its type introspection, executemany, transactions, binary COPY) and pgbench
//! (`-i -I dtgp` and a short TPC-B run). Each test skips, saying why, only when its client
//! is not installed (.ci/run installs them).

use std::path::{Path, PathBuf};

mod common;
use common::{config, connect, reopened, simple_rows};

/// `name|a|b` lines of a client's output, by name.
fn lines(stdout: &str, name: &str) -> Vec<Vec<String>> {
    stdout.lines().filter_map(|l| l.strip_prefix(&format!("{name}|"))).map(|l| l.split('|').map(str::to_string).collect()).collect()
}

fn one(stdout: &str, name: &str) -> Vec<String> {
    let found = lines(stdout, name);
    assert_eq!(found.len(), 1, "one line {name}: {stdout}");
    found[0].clone()
}

/// asyncpg 0.3x unchanged (crates/server/tests/asyncpg_client.py) on a `flashscan init`
/// database: the numbers it prints are checked against the test's own arithmetic over the
/// rows the script writes, and the rows once more by flashscan sql after the server stopped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn asyncpg_prepares_introspects_types_and_writes() {
    let has_asyncpg = std::process::Command::new("python3").args(["-c", "import asyncpg"]).output().map(|o| o.status.success()).unwrap_or(false);
    if !has_asyncpg {
        eprintln!("SKIPPED asyncpg_prepares_introspects_types_and_writes: python3 with asyncpg is not installed (python3 -m pip install asyncpg)");
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let db = common::init_db(dir.path(), "db");
    let server = flashscan_server::start(config(&db)).await.expect("start");
    let port = server.listen.port().to_string();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/asyncpg_client.py");
    let out = tokio::task::spawn_blocking(move || std::process::Command::new("python3").arg(script).arg(port).output()).await.expect("join").expect("python3 runs");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "asyncpg client failed: {stderr}\n{stdout}");
    let out = stdout.as_str();
    assert_eq!(one(out, "version"), ["15", "0"], "{out}");
    assert_eq!(one(out, "current"), ["public", "flashscan"], "{out}");
    assert_eq!(one(out, "created"), ["CREATE TABLE"], "{out}");
    assert_eq!(one(out, "executemany"), ["40"], "{out}");
    // 40 + 2 committed; the rolled-back row is not there.
    assert_eq!(one(out, "transactions"), ["42", "0"], "{out}");
    // id >= 10 and day < 2024-01-31 (id < 30) and a name other than 'item 12' (NULL names,
    // every 7th id, drop out too): ids 10..29 without 12, 14, 21, 28.
    let ids: Vec<i64> = (10..30).filter(|i| *i != 12 && i % 7 != 0).collect();
    assert_eq!(one(out, "fetchrow"), [ids.len().to_string(), ids.iter().sum::<i64>().to_string()], "{out}");
    // Each type decoded by asyncpg as it wrote it (21 has a NULL name).
    let fetched = lines(out, "fetch");
    assert_eq!(
        fetched,
        vec![
            vec!["3", "item 3", "3.75", "2024-01-04", "2024-01-01 12:03:00", "False", "0.375"],
            vec!["14", "NULL", "17.50", "2024-01-15", "2024-01-01 12:14:00", "True", "1.75"],
            vec!["21", "NULL", "26.25", "2024-01-22", "2024-01-01 12:21:00", "False", "2.625"],
        ],
        "{out}"
    );
    // price = id * 1.25 > 10 means id >= 9; ok means an even id; > 40.5 means id >= 33.
    let count = |f: &dyn Fn(i64) -> bool| (1..=40).filter(|i| f(*i)).count().to_string();
    assert_eq!(one(out, "prepared"), [count(&|i| i >= 9 && i % 2 == 0), count(&|i| i >= 9 && i % 2 == 1), count(&|i| i >= 33 && i % 2 == 0)], "{out}");
    assert_eq!(one(out, "prepared_params"), ["numeric", "bool"], "{out}");
    // The arrays: asyncpg introspected _int8 and _int4 through pg_type.
    assert_eq!(one(out, "int8_array"), ["1,2,3,4"], "{out}");
    // asyncpg names the array type it introspected (`_int8` in pg_type) `int8[]`.
    assert_eq!(one(out, "introspected"), ["ids:int8[]:array:pg_catalog"], "{out}");
    assert_eq!(one(out, "int4_param"), ["2"], "{out}");
    assert_eq!(one(out, "oid_param"), ["_int8"], "{out}");
    let copy = one(out, "copy_records");
    assert_eq!(one(out, "after_copy"), ["1"], "the connection lives on after COPY: {out}");
    let copied = copy[0] == "ok";
    if !copied {
        assert_eq!(copy[0], "FeatureNotSupportedError", "{out}");
        assert!(copy[1].contains("binary"), "the refusal says what is missing: {out}");
    }
    assert_eq!(one(out, "copy_csv"), ["COPY 2"], "{out}");
    // 42 rows, then the binary COPY's one if taken, then the CSV COPY's two (ids 200, 201).
    let (rows, sum) = if copied { (45, 903 + 100 + 401) } else { (44, 903 + 401) };
    assert_eq!(one(out, "total"), [rows.to_string(), sum.to_string()], "{out}");
    server.shutdown().await;
    let on_disk = reopened(&db, "select count(*), sum(id), sum(price), count(name) from items").await;
    let price_cents: i64 = (1..=40).map(|i| i * 125).sum::<i64>() + 225 + if copied { 150 } else { 0 };
    let named = 40 - 5 + 2 + 1 + usize::from(copied);
    assert_eq!(on_disk, vec![vec![rows.to_string(), sum.to_string(), format!("{}.{:02}", price_cents / 100, price_cents % 100), named.to_string()]]);
}

/// pgbench: `/usr/lib/postgresql/N/bin/pgbench` (Debian's postgresql-N, which
/// postgresql-contrib installs; /usr/bin/pgbench is only a wrapper that needs it), or a
/// `pgbench` on PATH that runs.
fn pgbench() -> Option<PathBuf> {
    let mut versions: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql").ok()?.filter_map(|e| e.ok()).map(|e| e.path().join("bin/pgbench")).filter(|p| p.exists()).collect();
    versions.sort();
    versions.pop().or_else(|| {
        let runs = std::process::Command::new("pgbench").arg("--version").output().map(|o| o.status.success()).unwrap_or(false);
        runs.then(|| PathBuf::from("pgbench"))
    })
}

/// pgbench's TPC-B against the server: `pgbench -i -I dtgp` (drop, create the four tables,
/// generate the rows client-side: TRUNCATE, INSERT … SELECT, COPY FROM STDIN; then ALTER
/// TABLE … ADD PRIMARY KEY on three of them, which the UPDATEs then read through; no
/// VACUUM, which flashscan refuses), then a 3-second run over the
/// simple protocol with 2 clients and 10 transactions per client over the extended
/// protocol. Checked: no failed transaction, and TPC-B's invariant over what the runs
/// wrote — every transaction adds the same delta to one account, teller and branch and
/// logs it in pgbench_history, so the four sums are equal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pgbench_initializes_and_runs_tpcb() {
    let Some(bin) = pgbench() else {
        eprintln!("SKIPPED pgbench_initializes_and_runs_tpcb: pgbench is not installed (apt-get install postgresql-contrib)");
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let db = common::init_db(dir.path(), "db");
    let server = flashscan_server::start(config(&db)).await.expect("start");
    let port = server.listen.port().to_string();
    let run = |args: Vec<String>| {
        let bin = bin.clone();
        let port = port.clone();
        tokio::task::spawn_blocking(move || {
            let out = std::process::Command::new(&bin).args(["-h", "127.0.0.1", "-p", &port, "-U", "flashscan"]).args(&args).arg("flashscan").output().expect("pgbench runs");
            let text = format!("{}\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
            assert!(out.status.success(), "pgbench {args:?} failed:\n{text}");
            text
        })
    };
    let init = run(["-i", "-I", "dtgp", "-s", "1"].map(String::from).to_vec()).await.expect("join");
    assert!(init.contains("done in"), "{init}");
    let client = connect(&server).await;
    let counts = simple_rows(&client, "select (select count(*) from pgbench_accounts), (select count(*) from pgbench_tellers), (select count(*) from pgbench_branches), (select count(*) from pgbench_history)").await;
    assert_eq!(counts, vec![vec![Some("100000".into()), Some("10".into()), Some("1".into()), Some("0".into())]]);
    let mut transactions = 0_u64;
    for args in [["-n", "-M", "simple", "-c", "2", "-j", "2", "-T", "3"], ["-n", "-M", "extended", "-c", "1", "-j", "1", "-t", "10"]] {
        let out = run(args.map(String::from).to_vec()).await.expect("join");
        let field = |name: &str| -> u64 {
            out.lines().find_map(|l| l.strip_prefix(name)).and_then(|v| v.split_whitespace().next()).and_then(|v| v.split('/').next()).and_then(|v| v.parse().ok()).unwrap_or_else(|| panic!("{name} in\n{out}"))
        };
        let done = field("number of transactions actually processed: ");
        assert!(done > 0, "{out}");
        assert_eq!(field("number of failed transactions: "), 0, "{out}");
        transactions += done;
    }
    let sums = simple_rows(
        &client,
        "select (select count(*) from pgbench_history), (select sum(delta) from pgbench_history), (select sum(abalance) from pgbench_accounts), \
         (select sum(tbalance) from pgbench_tellers), (select sum(bbalance) from pgbench_branches)",
    )
    .await;
    let row = &sums[0];
    assert_eq!(row[0].as_deref(), Some(transactions.to_string().as_str()), "one history row per transaction: {sums:?}");
    assert!(row[1..].iter().all(|s| s == &row[1]), "TPC-B's sums agree: {sums:?}");
    drop(client);
    server.shutdown().await;
    let on_disk = reopened(&db, "select count(*), sum(delta) from pgbench_history").await;
    assert_eq!(on_disk, vec![vec![transactions.to_string(), row[1].clone().unwrap_or_else(|| "NULL".into())]]);
}
