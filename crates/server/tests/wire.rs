//! flashscan serve driven by real clients: tokio-postgres (simple and extended protocol,
//! COPY, cancel) and psql (catalog queries), against the same database opened through
//! `flashscan sql`'s session as the oracle.
//!
//! Data: TPC-H at a small scale factor, loaded once through the storage crate (lineitem
//! rebuilt as a column store), copied into a fresh directory for each server (one process
//! owns a database).

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use arrow::array::RecordBatch;
use arrow::datatypes::DataType;
use arrow::util::display::{ArrayFormatter, FormatOptions};
use flashscan_server::RunningServer;
use flashscan_sql::{FlashscanSession, SessionOptions};
use tokio_postgres::{Client, NoTls};

mod common;
use common::{config, serve, simple_rows as wire_rows, Served};

const SCALE_FACTOR: f64 = 0.01;
const TABLES: [&str; 3] = ["lineitem", "part", "orders"];

/// A query that runs for many seconds at this scale (a 60K x 60K nested loop): long enough
/// to cancel, time out or abandon.
const LONG_QUERY: &str = "select count(*) from lineitem a, lineitem b where a.l_orderkey + b.l_orderkey < 0";

fn template_db() -> &'static Path {
    static DB: OnceLock<PathBuf> = OnceLock::new();
    DB.get_or_init(|| {
        // One template per test run, shared by its test processes: `cargo test` runs every
        // test in one process, but nextest starts a process per test, all at once, so the
        // template is keyed by the runner (the parent process), built under a name of this
        // process's own and renamed into place — the first to finish wins, the others use
        // it. Templates of runners that have exited are removed.
        let tmp = Path::new(env!("CARGO_TARGET_TMPDIR"));
        // SAFETY: getppid and getpid cannot fail.
        let (runner, me) = unsafe { (libc::getppid(), libc::getpid()) };
        let dir = tmp.join(format!("server-wire-template-run{runner}"));
        if dir.is_dir() {
            return dir;
        }
        remove_templates_of_exited_processes(tmp);
        let building = tmp.join(format!("server-wire-template-build{me}"));
        let _ = std::fs::remove_dir_all(&building);
        for table in TABLES {
            let source = flashscan_storage::load::tpch::tpch_source(table, SCALE_FACTOR, 2).expect("tpch source");
            let options = flashscan_storage::load::LoadOptions { partition_count: 2, threads: 2, ..Default::default() };
            flashscan_storage::load::load_table(&building, source, &options).expect("load");
        }
        let target = flashscan_storage::RebuildTarget::parse("columnstore").expect("target");
        flashscan_storage::rebuild_table(&building, "lineitem", target, &flashscan_storage::RebuildOptions::default()).expect("rebuild");
        if std::fs::rename(&building, &dir).is_err() {
            // Another test process of this run renamed its template first.
            assert!(dir.is_dir(), "template {} neither renamed nor present", dir.display());
            let _ = std::fs::remove_dir_all(&building);
        }
        dir
    })
}

/// Removes `server-wire-template-{run,build}PID` directories whose process has exited.
fn remove_templates_of_exited_processes(tmp: &Path) {
    let Ok(entries) = std::fs::read_dir(tmp) else { return };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let pid = name.strip_prefix("server-wire-template-run").or_else(|| name.strip_prefix("server-wire-template-build"));
        let Some(pid) = pid.and_then(|p| p.parse::<libc::pid_t>().ok()) else { continue };
        // SAFETY: signal 0 only checks that the process exists.
        let gone = unsafe { libc::kill(pid, 0) } != 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH);
        if gone {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("read_dir") {
        let entry = entry.expect("entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("type").is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copy");
        }
    }
}

/// A private copy of the test database (each server owns its directory), removed when
/// the returned guard drops.
fn fresh_db() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("db");
    copy_dir(template_db(), &path);
    (dir, path)
}

async fn connect(server: &RunningServer) -> Client {
    try_connect(server, "tester", None).await.expect("connect")
}

async fn try_connect(server: &RunningServer, user: &str, password: Option<&str>) -> Result<Client, tokio_postgres::Error> {
    common::try_connect(server.listen.port(), user, "flashscan", password).await
}

/// The server's message (tokio-postgres prints only "db error" for server errors).
fn message_of(e: &tokio_postgres::Error) -> String {
    e.as_db_error().map(|d| d.message().to_string()).unwrap_or_else(|| format!("{e:?}"))
}

fn code_of(e: &tokio_postgres::Error) -> String {
    e.code().map(|c| c.code().to_string()).unwrap_or_else(|| format!("no SQLSTATE: {e}"))
}

/// Rows as text as flashscan sql's session computes them (the oracle).
async fn oracle_rows(db: &Path, sql: &str) -> Vec<Vec<Option<String>>> {
    let session = FlashscanSession::open(db, SessionOptions::default()).expect("session");
    let out = session.run_one(sql).await.expect("oracle query");
    batches_as_text(&out.batches)
}

fn batches_as_text(batches: &[RecordBatch]) -> Vec<Vec<Option<String>>> {
    let options = FormatOptions::default();
    let mut rows = Vec::new();
    for b in batches {
        let formatters: Vec<ArrayFormatter> = b.columns().iter().map(|c| ArrayFormatter::try_new(c.as_ref(), &options).expect("formatter")).collect();
        for r in 0..b.num_rows() {
            rows.push(
                b.columns()
                    .iter()
                    .zip(&formatters)
                    .map(|(c, f)| {
                        if c.is_null(r) {
                            None
                        } else {
                            let s = f.value(r).to_string();
                            Some(match c.data_type() {
                                DataType::Boolean => if s == "true" { "t".into() } else { "f".into() },
                                _ => s,
                            })
                        }
                    })
                    .collect(),
            );
        }
    }
    rows
}


/// Equal as text, numbers within a relative 1e-9 (float sums may differ in the last digit
/// between two runs of the same plan: partition order).
fn assert_same_rows(sql: &str, wire: &[Vec<Option<String>>], oracle: &[Vec<Option<String>>]) {
    assert_eq!(wire.len(), oracle.len(), "{sql}: row counts");
    for (r, (w, o)) in wire.iter().zip(oracle).enumerate() {
        assert_eq!(w.len(), o.len(), "{sql}: row {r} width");
        for (c, (a, b)) in w.iter().zip(o).enumerate() {
            let same = match (a, b) {
                (Some(a), Some(b)) if a != b => match (a.parse::<f64>(), b.parse::<f64>()) {
                    (Ok(x), Ok(y)) => (x - y).abs() <= 1e-9 * x.abs().max(y.abs()).max(1.0),
                    _ => false,
                },
                (a, b) => a == b,
            };
            assert!(same, "{sql}: row {r} column {c}: wire {a:?} vs flashscan sql {b:?}");
        }
    }
}

fn tpch_query(n: usize) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("../sql/tests/tpch/q{n:02}.sql"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tpch_answers_over_the_wire_equal_flashscan_sql() {
    let Served { _guard, db, server, client } = serve(fresh_db()).await;
    let queries = [
        tpch_query(1),
        tpch_query(6),
        tpch_query(14),
        "select l_orderkey, l_linenumber, l_quantity, l_extendedprice, l_shipdate, l_returnflag, l_comment from lineitem order by l_orderkey, l_linenumber limit 50".to_string(),
        "select p_partkey, p_size, p_retailprice, p_size > 10 as big, cast(p_retailprice as double) / 3 as third from part order by p_partkey limit 20".to_string(),
        "select count(*), min(o_orderdate), max(o_totalprice) from orders".to_string(),
    ];
    for sql in &queries {
        let wire = wire_rows(&client, sql).await;
        let oracle = oracle_rows(&db, sql).await;
        assert!(!wire.is_empty(), "{sql}: no rows");
        assert_same_rows(sql, &wire, &oracle);
    }
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prepared_statements_take_parameters_and_type_their_results() {
    let Served { _guard, db, server, client } = serve(fresh_db()).await;
    let stmt = client
        .prepare("select count(*) as n, sum(l_quantity) as q from lineitem where l_linenumber = $1 and l_returnflag = $2 and l_shipdate <= $3")
        .await
        .expect("prepare");
    assert_eq!(stmt.params().len(), 3);
    for (line, flag, date) in [(1i32, "R", "1995-01-01"), (3, "N", "1998-12-01"), (7, "A", "1993-06-30")] {
        let d = chrono::NaiveDate::parse_from_str(date, "%Y-%m-%d").expect("date");
        let row = client.query_one(&stmt, &[&line, &flag, &d]).await.expect("execute");
        let n: i64 = row.get(0);
        let literal = format!("select count(*) from lineitem where l_linenumber = {line} and l_returnflag = '{flag}' and l_shipdate <= date '{date}'");
        let oracle = oracle_rows(&db, &literal).await;
        assert_eq!(Some(n.to_string()), oracle[0][0].clone(), "{literal}");
    }
    // Every type flashscan produces arrives typed (binary results), NULLs included.
    let row = client
        .query_one(
            "select cast(1 as smallint) a, cast(2 as int) b, cast(3 as bigint) c, cast(1.5 as double) d, cast(2.5 as real) e, true f, 'x' g, date '2020-01-02' h, cast(12.34 as decimal(10,2)) i, cast(null as int) j",
            &[],
        )
        .await
        .expect("typed row");
    use tokio_postgres::types::Type;
    let types: Vec<Type> = row.columns().iter().map(|c| c.type_().clone()).collect();
    assert_eq!(types, vec![Type::INT2, Type::INT4, Type::INT8, Type::FLOAT8, Type::FLOAT4, Type::BOOL, Type::TEXT, Type::DATE, Type::NUMERIC, Type::INT4]);
    assert_eq!((row.get::<_, i16>(0), row.get::<_, i32>(1), row.get::<_, i64>(2)), (1, 2, 3));
    assert_eq!((row.get::<_, f64>(3), row.get::<_, f32>(4), row.get::<_, bool>(5)), (1.5, 2.5, true));
    assert_eq!(row.get::<_, &str>(6), "x");
    assert_eq!(row.get::<_, chrono::NaiveDate>(7), chrono::NaiveDate::from_ymd_opt(2020, 1, 2).expect("date"));
    assert_eq!(row.get::<_, Option<i32>>(9), None);
    // Decimals over the wire as text (simple protocol) keep their scale.
    assert_eq!(wire_rows(&client, "select cast(12.3 as decimal(10,2))").await, vec![vec![Some("12.30".to_string())]]);
    // Unaliased items are named as PostgreSQL names them (psql prints these, pandas keys by
    // them), prepared or not, by key or by scan; aliases stay as written.
    let names = |columns: &[tokio_postgres::Column]| columns.iter().map(|c| c.name().to_string()).collect::<Vec<_>>();
    for sql in [
        "select count(*), sum(l_quantity), max(lineitem.l_linenumber), l_returnflag, 1, l_linenumber + 1, cast(l_linenumber as bigint), 'x'::text from lineitem group by l_returnflag, l_linenumber order by 4, 2 limit 1",
        "select count(*), sum(l_quantity), max(lineitem.l_linenumber), l_returnflag, 1, l_linenumber + 1, cast(l_linenumber as bigint), 'x'::text from lineitem where l_linenumber = 3 group by l_returnflag, l_linenumber limit 1",
    ] {
        let prepared = client.prepare(sql).await.expect("prepare");
        assert_eq!(names(prepared.columns()), ["count", "sum", "max", "l_returnflag", "?column?", "?column?", "l_linenumber", "text"], "{sql}");
        let simple = client.simple_query(sql).await.expect("simple");
        let row = simple.iter().find_map(|m| if let tokio_postgres::SimpleQueryMessage::Row(r) = m { Some(r) } else { None }).expect("a row");
        assert_eq!(row.columns().iter().map(|c| c.name()).collect::<Vec<_>>(), ["count", "sum", "max", "l_returnflag", "?column?", "?column?", "l_linenumber", "text"]);
    }
    let prepared = client.prepare("select count(*) as n, l_linenumber + 1 as next from lineitem group by l_linenumber").await.expect("prepare");
    assert_eq!(names(prepared.columns()), ["n", "next"]);
    // A series' column is named after its alias, as in PostgreSQL (pgbench's server-side
    // generation writes `FROM generate_series(1, n) AS aid`).
    assert_eq!(wire_rows(&client, "select sum(aid), max(g) from generate_series(1, 10) as aid, generate_series(1, 2) g").await, vec![vec![Some("110".to_string()), Some("2".to_string())]]);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_request_stops_the_query_and_the_connection_lives_on() {
    let Served { _guard, server, client, .. } = serve(fresh_db()).await;
    let token = client.cancel_token();
    let canceller = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(500)).await;
        token.cancel_query(NoTls).await
    });
    let started = Instant::now();
    let err = client.simple_query(LONG_QUERY).await.expect_err("canceled");
    assert_eq!(code_of(&err), "57014", "{err}");
    assert!(started.elapsed() < Duration::from_secs(20), "cancel took {:?}", started.elapsed());
    canceller.await.expect("join").expect("cancel sent");
    assert_eq!(wire_rows(&client, "select 1").await, vec![vec![Some("1".to_string())]]);
    // statement_timeout: the same, by the clock.
    client.simple_query("SET statement_timeout = 300").await.expect("set");
    assert_eq!(wire_rows(&client, "show statement_timeout").await, vec![vec![Some("300ms".to_string())]]);
    let err = client.simple_query(LONG_QUERY).await.expect_err("timed out");
    assert_eq!(code_of(&err), "57014", "{err}");
    assert!(message_of(&err).contains("statement timeout"), "{}", message_of(&err));
    wait_until_idle(&server).await;
    server.shutdown().await;
}

/// A client whose connection task the test holds: aborting it closes the socket, as a
/// killed client does.
async fn killable_client(server: &RunningServer, user: &str) -> (Client, tokio::task::JoinHandle<Result<(), tokio_postgres::Error>>) {
    let mut cfg = tokio_postgres::Config::new();
    cfg.host("127.0.0.1").port(server.listen.port()).user(user).dbname("x");
    let (client, connection) = cfg.connect(NoTls).await.expect("connect");
    (client, tokio::spawn(connection))
}

/// Polls `done` (async: a blocked worker would stall the server's tasks on it) for up to 60 s,
/// generous for a loaded 2-core machine where a dozen test servers share the cores.
async fn wait_for(what: &str, done: impl Fn() -> bool) {
    let started = Instant::now();
    while !done() {
        assert!(started.elapsed() < Duration::from_secs(60), "{what}: not within 60 s");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

async fn wait_until_idle(server: &RunningServer) {
    let started = Instant::now();
    while !server.shared.admission.idle() {
        assert!(started.elapsed() < Duration::from_secs(30), "queries still running after 30 s");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_past_the_limit_get_53300_not_a_hang() {
    let (_guard, db) = fresh_db();
    let mut c = config(&db);
    c.max_connections = 2;
    c.max_active_queries = 2;
    let server = flashscan_server::start(c).await.expect("start");
    let a = connect(&server).await;
    let b = connect(&server).await;
    let refused = tokio::time::timeout(Duration::from_secs(10), try_connect(&server, "third", None)).await.expect("no hang");
    let err = refused.err().expect("refused");
    assert_eq!(code_of(&err), "53300", "{err}");
    // The two connected clients still work; a place freed is a place taken.
    assert_eq!(wire_rows(&a, "select 2").await.len(), 1);
    drop(b);
    let started = Instant::now();
    let c3 = loop {
        match try_connect(&server, "again", None).await {
            Ok(c) => break c,
            Err(_) if started.elapsed() < Duration::from_secs(10) => tokio::time::sleep(Duration::from_millis(50)).await,
            Err(e) => panic!("no place after a client left: {e}"),
        }
    };
    assert_eq!(wire_rows(&c3, "select 3").await.len(), 1);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_query_over_its_memory_budget_fails_alone() {
    let (_guard, db) = fresh_db();
    let mut c = config(&db);
    c.query_memory_bytes = 1 << 20;
    let server = flashscan_server::start(c).await.expect("start");
    let client = connect(&server).await;
    // A hash join whose build side (60K comments) does not fit in 1 MiB and cannot spill.
    let sql = "select count(*) from lineitem a join lineitem b on a.l_comment = b.l_comment";
    match client.simple_query(sql).await {
        Err(e) => {
            assert_eq!(code_of(&e), "53200", "{e}");
            assert!(message_of(&e).contains("--query-memory"), "{}", message_of(&e));
        }
        // Spilled instead: then the answer must be right.
        Ok(_) => {
            let wire = wire_rows(&client, sql).await;
            assert_same_rows(sql, &wire, &oracle_rows(&db, sql).await);
        }
    }
    // The server and the connection keep serving.
    let small = "select count(*) from part";
    assert_same_rows(small, &wire_rows(&client, small).await, &oracle_rows(&db, small).await);
    server.shutdown().await;
}

// The server's connections run on this test's two workers, its queries' plans on the query
// runtime (server/query_runtime.rs). Before that split, the long query's two partitions held
// both workers for seconds at a time and the watcher below slept through the whole query
// (CI saw it once).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_killed_mid_query_frees_its_slot() {
    let (_guard, db) = fresh_db();
    let server = flashscan_server::start(config(&db)).await.expect("start");
    let (client, conn_task) = killable_client(&server, "victim").await;
    // On by default at 1 s; a tenth of that keeps the check well inside the query's length
    // (~3 s here) on a fast machine too. SHOW and RESET know the setting.
    assert_eq!(wire_rows(&client, "show client_connection_check_interval").await, vec![vec![Some("1000ms".to_string())]]);
    client.simple_query("SET client_connection_check_interval = 0").await.expect("off");
    assert_eq!(wire_rows(&client, "show client_connection_check_interval").await, vec![vec![Some("0".to_string())]]);
    client.simple_query("RESET client_connection_check_interval").await.expect("reset");
    assert_eq!(wire_rows(&client, "show client_connection_check_interval").await, vec![vec![Some("1000ms".to_string())]]);
    client.simple_query("SET client_connection_check_interval = '100ms'").await.expect("set");
    let query = tokio::spawn(async move { client.simple_query(LONG_QUERY).await.map(|_| ()) });
    let running = &server.shared.admission.counters.queries_running;
    wait_for("the query runs", || running.load(std::sync::atomic::Ordering::Relaxed) == 1 || query.is_finished()).await;
    if query.is_finished() {
        panic!("the query ended before it was seen running: {:?}", query.await);
    }
    // The socket closes under the running query (like a killed client).
    conn_task.abort();
    let _ = query.await;
    let killed = Instant::now();
    wait_until_idle(&server).await;
    // The server noticed the hang-up (server/hangup.rs) and ended the query: it did not run
    // to its end on behalf of nobody.
    let counters = &server.shared.admission.counters;
    let load = |c: &std::sync::atomic::AtomicU64| c.load(std::sync::atomic::Ordering::Relaxed);
    assert_eq!((load(&counters.queries_canceled), load(&counters.queries_completed)), (1, 0), "freed after {:?}", killed.elapsed());
    eprintln!("the slot was free {:?} after the client died", killed.elapsed());
    let other = connect(&server).await;
    assert_eq!(wire_rows(&other, "select 4").await, vec![vec![Some("4".to_string())]]);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_killed_while_its_query_waits_for_a_slot_never_takes_it() {
    let (_guard, db) = fresh_db();
    let mut c = config(&db);
    c.max_active_queries = 1;
    let server = flashscan_server::start(c).await.expect("start");
    let counters = &server.shared.admission.counters;
    let load = |c: &std::sync::atomic::AtomicUsize| c.load(std::sync::atomic::Ordering::Relaxed);
    // The one slot: a long query.
    let holder = connect(&server).await;
    let token = holder.cancel_token();
    let long = tokio::spawn(async move { holder.simple_query(LONG_QUERY).await.map(|_| ()) });
    wait_for("the long query runs", || load(&counters.queries_running) == 1).await;
    // A second client's query waits for it; then the client dies.
    let (client, conn_task) = killable_client(&server, "queued").await;
    client.simple_query("SET client_connection_check_interval = 100").await.expect("set");
    let queued = tokio::spawn(async move { client.simple_query("select 1").await.map(|_| ()) });
    wait_for("the second query queues", || load(&counters.queries_queued) == 1).await;
    conn_task.abort();
    let _ = queued.await;
    let killed = Instant::now();
    wait_for("the dead client leaves the queue", || load(&counters.queries_queued) == 0).await;
    eprintln!("the dead client left the queue {:?} after it died", killed.elapsed());
    assert_eq!(load(&counters.queries_running), 1, "the long query still holds the slot");
    token.cancel_query(NoTls).await.expect("cancel sent");
    let _ = long.await;
    wait_until_idle(&server).await;
    // The dead client's query never started.
    assert_eq!(counters.queries_started.load(std::sync::atomic::Ordering::Relaxed), 1);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_concurrent_readers_get_the_same_answers() {
    let (_guard, db) = fresh_db();
    let mut c = config(&db);
    c.max_active_queries = 3;
    let server = flashscan_server::start(c).await.expect("start");
    let q6 = tpch_query(6);
    let expected = oracle_rows(&db, &q6).await;
    let small = "select count(*) from part where p_size < 10";
    let expected_small = oracle_rows(&db, small).await;
    let mut tasks = Vec::new();
    for i in 0..40 {
        let port = server.listen.port();
        let (q6, small) = (q6.clone(), small.to_string());
        tasks.push(tokio::spawn(async move {
            let mut cfg = tokio_postgres::Config::new();
            cfg.host("127.0.0.1").port(port).user(format!("reader{i}").as_str()).dbname("x");
            let (client, connection) = cfg.connect(NoTls).await.expect("connect");
            tokio::spawn(connection);
            let sql = if i % 2 == 0 { q6 } else { small };
            let a = wire_rows(&client, &sql).await;
            // The extended protocol too.
            let rows = client.query(sql.as_str(), &[]).await.expect("extended");
            (sql, a, rows.len())
        }));
    }
    for t in tasks {
        let (sql, rows, n_extended) = t.await.expect("join");
        let oracle = if sql == small { &expected_small } else { &expected };
        assert_same_rows(&sql, &rows, oracle);
        assert_eq!(n_extended, oracle.len());
    }
    let completed = server.shared.admission.counters.queries_completed.load(std::sync::atomic::Ordering::Relaxed);
    assert!(completed >= 80, "completed {completed}");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copy_to_stdout_streams_the_query_as_csv() {
    let Served { _guard, db, server, client } = serve(fresh_db()).await;
    let sql = "select p_partkey, p_name, p_retailprice from part order by p_partkey limit 25";
    let stream = client.copy_out(format!("COPY ({sql}) TO STDOUT WITH (FORMAT csv, HEADER true)").as_str()).await.expect("copy");
    use futures::StreamExt;
    let chunks: Vec<_> = stream.collect().await;
    let mut text = String::new();
    for c in chunks {
        text.push_str(std::str::from_utf8(&c.expect("chunk")).expect("utf8"));
    }
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("p_partkey,p_name,p_retailprice"));
    let oracle = oracle_rows(&db, sql).await;
    let body: Vec<&str> = lines.collect();
    assert_eq!(body.len(), oracle.len());
    for (line, row) in body.iter().zip(&oracle) {
        let expected: Vec<String> = row.iter().map(|c| c.clone().unwrap_or_default()).collect();
        assert_eq!(line.split(',').map(str::to_string).collect::<Vec<_>>(), expected);
    }
    server.shutdown().await;
}

/// A database made by `flashscan load` takes writes at once: the server gave it a log when
/// it started (issue 28: every database has a log), and the rows survive a restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_loaded_database_takes_inserts_at_once() {
    let Served { _guard, db, server, client } = serve(fresh_db()).await;
    let count = |rows: Vec<tokio_postgres::SimpleQueryMessage>| -> i64 {
        rows.iter()
            .find_map(|m| match m {
                tokio_postgres::SimpleQueryMessage::Row(r) => r.get(0).and_then(|v| v.parse().ok()),
                _ => None,
            })
            .expect("a count")
    };
    let before = count(client.simple_query("select count(*) from part").await.expect("count"));
    client.simple_query("insert into part select * from part where p_partkey <= 3").await.expect("insert into a loaded table");
    assert_eq!(count(client.simple_query("select count(*) from part").await.expect("count")), before + 3);
    server.shutdown().await;
    let server = flashscan_server::start(config(&db)).await.expect("restart");
    let client = connect(&server).await;
    assert_eq!(count(client.simple_query("select count(*) from part").await.expect("count")), before + 3, "the rows are durable");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_process_owns_the_database_and_writes_are_refused() {
    let (_guard, db) = fresh_db();
    let server = flashscan_server::start(config(&db)).await.expect("start");
    let second = flashscan_server::start(config(&db)).await;
    let message = second.err().expect("second server refused").to_string();
    assert!(message.contains(&server.listen.to_string()) && message.contains("connect"), "{message}");
    let client = connect(&server).await;
    for sql in ["create table t as select 1", "merge into part using part p on part.p_partkey = p.p_partkey when matched then delete", "set datafusion.execution.batch_size = 10"] {
        let err = client.simple_query(sql).await.expect_err(sql);
        assert!(["25006", "0A000"].contains(&code_of(&err).as_str()), "{sql}: {err}");
    }
    server.shutdown().await;
    // Released on shutdown.
    let again = flashscan_server::start(config(&db)).await.expect("restart after shutdown");
    again.shutdown().await;
}

/// `SET flashscan.*` is the connection's: its later queries plan with it (no runtime filter
/// reaches the probe scan with `runtime_filters` off), SHOW reads it, another connection
/// keeps the server's, answers stay the same, RESET returns to the server's; the table
/// settings, unknown names and values that are not switches are refused with their codes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flashscan_settings_are_the_connections() {
    let Served { _guard, server, client, .. } = serve(fresh_db()).await;
    let other = connect(&server).await;
    let count = "select count(*) from lineitem join orders on l_orderkey = o_orderkey where o_totalprice > 400000";
    let explain = format!("explain {count}");
    let shown = |on: bool| vec![vec![Some(on.to_string())]];
    assert_eq!(wire_rows(&client, "show flashscan.runtime_filters").await, shown(true));
    client.simple_query("SET flashscan.runtime_filters = on").await.expect("set on");
    let plan = format!("{:?}", wire_rows(&client, &explain).await);
    assert!(plan.contains("runtime_filters=["), "on: the probe scan takes the join's filter: {plan}");
    client.simple_query("SET flashscan.runtime_filters = off").await.expect("set off");
    assert_eq!(wire_rows(&client, "show flashscan.runtime_filters").await, shown(false));
    let plan = format!("{:?}", wire_rows(&client, &explain).await);
    assert!(!plan.contains("runtime_filters=["), "off: no runtime filter in the scan: {plan}");
    assert_eq!(wire_rows(&other, "show flashscan.runtime_filters").await, shown(true), "another connection keeps the server's");
    let plan = format!("{:?}", wire_rows(&other, &explain).await);
    assert!(plan.contains("runtime_filters=["), "{plan}");
    assert_eq!(wire_rows(&client, count).await, wire_rows(&other, count).await);
    for (sql, code) in [
        ("SET flashscan.views = false", "55P02"),
        ("SET flashscan.runtime_filters = maybe", "22023"),
        ("SET flashscan.no_such_switch = true", "42704"),
        // PostgreSQL settings flashscan keeps at one value: that value is taken, others refused;
        // settings it does not have are refused, never taken and ignored.
        ("SET DateStyle = 'German'", "55P02"),
        ("SET search_path = other_schema", "55P02"),
        ("SET work_mem = '64MB'", "0A000"),
        ("SET extra_float_digits = 0", "22023"),
        ("SHOW flashscan.no_such_switch", "42704"),
    ] {
        let err = client.simple_query(sql).await.expect_err(sql);
        assert_eq!(code_of(&err), code, "{sql}: {err}");
    }
    assert_eq!(wire_rows(&client, "show transaction_read_only").await, vec![vec![Some("off".to_string())]], "the server takes writes");
    for sql in ["SET DateStyle = 'ISO, MDY'", "SET datestyle TO ISO", "SET client_encoding = 'UTF8'", "SET search_path = \"$user\", public", "SET application_name = 'reports'", "SET extra_float_digits = 3", "SET TimeZone = 'UTC'"] {
        client.simple_query(sql).await.unwrap_or_else(|e| panic!("{sql}: {e}"));
    }
    assert_eq!(wire_rows(&client, "show flashscan.runtime_filters").await, shown(false), "a refused SET changes nothing");
    client.simple_query("RESET flashscan.runtime_filters").await.expect("reset");
    assert_eq!(wire_rows(&client, "show flashscan.runtime_filters").await, shown(true));
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_password_file_means_md5_authentication() {
    let (_guard, db) = fresh_db();
    let pw = _guard.path().join("password");
    std::fs::write(&pw, "s3cret\n").expect("password file");
    let mut c = config(&db);
    c.password_file = Some(pw.clone());
    c.password_auth = flashscan_server::startup::PasswordAuth::Md5;
    let server = flashscan_server::start(c).await.expect("start");
    let err = try_connect(&server, "alice", Some("wrong")).await.err().expect("wrong password refused");
    assert_eq!(code_of(&err), "28P01", "{err}");
    let err = try_connect(&server, "alice", None).await.err().expect("no password refused");
    assert!(format!("{err:?}").to_lowercase().contains("password"), "{err:?}");
    let ok = try_connect(&server, "alice", Some("s3cret")).await.expect("right password");
    assert_eq!(wire_rows(&ok, "select 5").await.len(), 1);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_counters_as_sql_metrics_and_a_page() {
    let (_guard, db) = fresh_db();
    let mut c = config(&db);
    c.http = Some("127.0.0.1:0".parse().expect("addr"));
    let server = flashscan_server::start(c).await.expect("start");
    let client = connect(&server).await;
    wire_rows(&client, &tpch_query(6)).await;
    tokio::time::sleep(Duration::from_millis(2300)).await;
    let rows = wire_rows(&client, "select interval_s, bytes_read_total, queries_completed_total, sample_time from flashscan_stats_history order by sample_time").await;
    assert!(rows.len() >= 2, "{rows:?}");
    let last = rows.last().expect("a sample");
    let interval: f64 = last[0].as_deref().unwrap_or("0").parse().expect("interval");
    assert!(interval > 0.5 && interval < 5.0, "interval {interval}");
    assert!(last[1].as_deref().unwrap_or("0").parse::<u64>().expect("bytes") > 0, "the Q6 scan read bytes: {last:?}");
    assert!(last[2].as_deref().unwrap_or("0").parse::<u64>().expect("queries") >= 1);
    let files = wire_rows(&client, "select file_name, num_of_reads, num_of_bytes_read from sys.dm_io_virtual_file_stats where num_of_bytes_read > 0").await;
    assert!(files.iter().any(|r| r[0].as_deref().unwrap_or("").contains("lineitem")), "{files:?}");
    let http = server.http.expect("http address");
    let metrics = http_get(http, "/metrics").await;
    assert!(metrics.contains("# TYPE flashscan_queries_completed_total counter"), "{metrics}");
    assert!(metrics.contains("flashscan_file_read_bytes_total{file=\""), "{metrics}");
    let page = http_get(http, "/").await;
    assert!(page.contains("<svg") || page.contains("svg"), "dashboard page");
    assert!(!page.contains("http://") && !page.contains("https://"), "the page fetches nothing from the network");
    let history = http_get(http, "/api/history?seconds=10").await;
    assert!(history.contains("\"interval_s\""), "{history}");
    server.shutdown().await;
}

async fn http_get(addr: std::net::SocketAddr, path: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await.expect("connect http");
    s.write_all(format!("GET {path} HTTP/1.0\r\nHost: x\r\n\r\n").as_bytes()).await.expect("write");
    let mut out = String::new();
    s.read_to_string(&mut out).await.expect("read");
    assert!(out.starts_with("HTTP/1.0 200"), "{path}: {}", out.lines().next().unwrap_or(""));
    out
}

/// psql's own describe queries (`\dt`, `\d TABLE`) against the server. Skipped, with the
/// reason printed, where psql is not installed (.ci/run installs postgresql-client).
/// A name a catalog cast does not find gets PostgreSQL's SQLSTATE (42704 for a type, 42P01
/// for a relation, 3F000 for a schema), and a found one prints its name in a result.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn catalog_casts_print_names_and_unknown_names_get_postgresqls_codes() {
    let Served { _guard, db: _db, server, client } = serve(fresh_db()).await;
    use tokio_postgres::error::SqlState;
    for (sql, code) in [
        ("select 'no_such_type'::regtype", SqlState::UNDEFINED_OBJECT),
        ("select 'no_such_table'::regclass", SqlState::UNDEFINED_TABLE),
        ("select 'no_such_schema'::regnamespace", SqlState::INVALID_SCHEMA_NAME),
    ] {
        let e = client.simple_query(sql).await.expect_err(sql);
        assert_eq!(e.code(), Some(&code), "{sql}: {e:?}");
    }
    assert_eq!(wire_rows(&client, "select 'lineitem'::regclass, 'int4'::regtype::text").await, vec![vec![Some("lineitem".to_string()), Some("integer".to_string())]]);
    // Inside an expression the cast is the oid: a join by it finds the table.
    let n = wire_rows(&client, "select count(*) from pg_attribute where attrelid = 'lineitem'::regclass and attnum > 0").await;
    assert_eq!(n, vec![vec![Some("16".to_string())]]);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn psql_lists_and_describes_tables() {
    if std::process::Command::new("psql").arg("--version").output().is_err() {
        eprintln!("SKIPPED psql_lists_and_describes_tables: psql is not installed (apt-get install postgresql-client)");
        return;
    }
    let (_guard, db) = fresh_db();
    let server = flashscan_server::start(config(&db)).await.expect("start");
    let port = server.listen.port().to_string();
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new("psql")
            .args(["-X", "-h", "127.0.0.1", "-p", &port, "-U", "someone", "-d", "anydb", "-c", "\\dt", "-c", "\\d lineitem", "-c", "select count(*) from part", "-c", "\\l", "-c", PG_CATALOG_COLUMNS, "-c", INFORMATION_SCHEMA_COLUMNS, "-c", "\\dt line*", "-c", "select 'unqualified:' || relname from pg_class where relname = 'part'", "-c", "select 'part'::regclass, 'int8'::regtype, c.oid::regclass from pg_class c where c.relname = 'lineitem'"])
            .env_remove("PGPASSWORD")
            .output()
    })
    .await
    .expect("join")
    .expect("psql runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "psql failed: {stderr}\n{stdout}");
    assert!(stdout.contains("List of relations"), "{stdout}");
    for t in TABLES {
        assert!(stdout.contains(&format!(" public | {t} ")), "{t} listed: {stdout}");
    }
    assert!(stdout.contains("Table \"public.lineitem\""), "{stdout}");
    // Every step of `\d lineitem` ran on the catalog tables (none recognised by its text):
    // psql stops at the first error, and prints the column header only after all of them.
    assert!(!stderr.contains("ERROR"), "{stderr}");
    assert!(stdout.lines().any(|l| l.contains("Column") && l.contains("Type") && l.contains("Collation") && l.contains("Nullable")), "{stdout}");
    // Nullability comes from pg_attribute.attnotnull (TPC-H's columns are NOT NULL).
    assert!(stdout.lines().any(|l| l.contains(" l_orderkey ") && l.contains("bigint") && l.contains("not null")), "{stdout}");
    assert!(stdout.lines().any(|l| l.contains("l_orderkey") && l.contains("bigint")), "{stdout}");
    assert!(stdout.lines().any(|l| l.contains("l_shipdate") && l.contains("date")), "{stdout}");
    assert!(stdout.contains("2000"), "count of part at SF 0.01: {stdout}");
    // \l reads the real pg_database (with pg_get_userbyid, pg_encoding_to_char).
    assert!(stdout.contains("List of databases"), "{stdout}");
    assert!(stdout.lines().any(|l| l.contains("flashscan") && l.contains("UTF8")), "{stdout}");
    // What drivers and BI tools ask: pg_class/pg_attribute/pg_type, information_schema.
    assert!(stdout.lines().any(|l| l.contains("p_partkey") && l.contains("bigint") && l.contains("int8")), "{stdout}");
    assert!(stdout.lines().any(|l| l.contains("p_retailprice") && l.contains("numeric(15,2)")), "{stdout}");
    assert!(stdout.lines().any(|l| l.contains("p_name") && l.contains("text")), "information_schema.columns: {stdout}");
    // `\dt PATTERN` runs on pg_catalog (OPERATOR(pg_catalog.~) normalised): lineitem a second
    // time, part not; pg_class found without `pg_catalog.` (the search path).
    assert_eq!(stdout.matches(" public | lineitem ").count(), 2, "{stdout}");
    assert_eq!(stdout.matches(" public | part ").count(), 1, "{stdout}");
    // A regclass/regtype result prints the name, under PostgreSQL's column names.
    let header = stdout.lines().position(|l| l.split('|').map(str::trim).collect::<Vec<_>>() == ["regclass", "regtype", "oid"]);
    let row = header.and_then(|h| stdout.lines().nth(h + 2)).map(|l| l.split('|').map(str::trim).collect::<Vec<_>>());
    assert_eq!(row, Some(vec!["part", "bigint", "lineitem"]), "{stdout}");
    assert!(stdout.contains("unqualified:part"), "{stdout}");
    server.shutdown().await;
}

/// psycopg 3 (crates/server/tests/psycopg_client.py): a parameterised query, prepared
/// executions, `::regtype`/`::regclass` casts, psycopg's `TypeInfo.fetch` (which asks
/// `to_regtype` inside a savepoint) and the catalog queries a `\d`-like tool writes, checked
/// against flashscan sql's answers on the same files. Skipped, with the reason printed,
/// where python3 or psycopg is missing (.ci/run installs psycopg with pip).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn psycopg_queries_parameters_and_types() {
    let has_psycopg = std::process::Command::new("python3").args(["-c", "import psycopg"]).output().map(|o| o.status.success()).unwrap_or(false);
    if !has_psycopg {
        eprintln!("SKIPPED psycopg_queries_parameters_and_types: python3 with psycopg 3 is not installed (pip install \"psycopg[binary]\")");
        return;
    }
    let (_guard, db) = fresh_db();
    let server = flashscan_server::start(config(&db)).await.expect("start");
    let port = server.listen.port().to_string();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/psycopg_client.py");
    let out = tokio::task::spawn_blocking(move || std::process::Command::new("python3").arg(script).arg(port).output()).await.expect("join").expect("python3 runs");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "psycopg client failed: {stderr}\n{stdout}");
    let lines = |name: &str| -> Vec<Vec<String>> {
        stdout.lines().filter_map(|l| l.strip_prefix(&format!("{name}|"))).map(|l| l.split('|').map(str::to_string).collect()).collect()
    };
    let as_text = |rows: Vec<Vec<Option<String>>>| -> Vec<Vec<String>> { rows.into_iter().map(|r| r.into_iter().map(|v| v.unwrap_or_else(|| "NULL".into())).collect()).collect() };
    // Parameters bound server-side give the literal query's answer.
    let params = lines("params");
    let oracle = as_text(oracle_rows(&db, "select count(*), sum(p_size), min(p_name) from part where p_size < 10 and p_brand = 'Brand#13'").await);
    assert_eq!(params, oracle, "{stdout}");
    assert_ne!(params[0][0], "0", "the parameters select rows: {stdout}");
    let dated = as_text(oracle_rows(&db, "select count(*) from lineitem where l_shipdate < date '1994-01-01' and l_quantity > 30").await);
    assert_eq!(lines("date_param"), dated, "{stdout}");
    let by_size = as_text(oracle_rows(&db, "select count(*) from part where p_size between 1 and 6 group by p_size order by p_size").await);
    assert_eq!(lines("prepared"), vec![by_size.into_iter().map(|r| r[0].clone()).collect::<Vec<_>>()], "{stdout}");
    // ::regtype by parameter and literal; an oid's name; psycopg's TypeInfo.
    assert_eq!(lines("regtype"), vec![vec!["integer", "numeric", "bigint", "integer"]], "{stdout}");
    assert_eq!(lines("typeinfo"), vec![vec!["numeric", "1700", "1231", "numeric"]], "{stdout}");
    assert_eq!(lines("typeinfo_missing"), vec![vec!["NULL"]], "{stdout}");
    // The catalog's columns of part are flashscan's, in order, with PostgreSQL's types.
    let names: Vec<String> =
        as_text(oracle_rows(&db, "select column_name from information_schema.columns where table_name = 'part' order by ordinal_position").await).into_iter().map(|r| r[0].clone()).collect();
    let columns = lines("columns");
    assert_eq!(columns.iter().map(|r| r[0].clone()).collect::<Vec<_>>(), names, "{stdout}");
    for (name, pg_type) in [("p_partkey", "bigint"), ("p_name", "text"), ("p_retailprice", "numeric(15,2)")] {
        assert!(columns.iter().any(|r| r[0] == name && r[1] == pg_type), "{name} {pg_type}: {stdout}");
    }
    assert_eq!(lines("regclass_columns"), vec![names], "{stdout}");
    let bad = lines("bad_cast");
    assert!(bad.len() == 1 && bad[0].len() == 2 && bad[0][1].contains("type \"no_such_type\" does not exist"), "{stdout}");
    assert_eq!(bad[0][0], "UndefinedObject", "SQLSTATE 42704, as PostgreSQL: {stdout}");
    assert_eq!(lines("after_rollback"), vec![vec!["42"]], "{stdout}");
    server.shutdown().await;
}

/// SQLAlchemy 2 with psycopg 3 (`postgresql+psycopg://`) and pandas, unchanged
/// (crates/server/tests/sqlalchemy_client.py), on an empty database made by `flashscan
/// init`: `to_sql` creates and fills a table (and refuses a second time with
/// if_exists='fail'), reflection reads it back (tables, columns with their types, no keys
/// or indexes), a Core select binds parameters, `read_sql` of a query and of a table name,
/// whole and in chunks, returns the DataFrame written; a unit of work reads its own rows,
/// rolls a nested transaction back to its SAVEPOINT, and an engine runs at REPEATABLE
/// READ. The rows are then checked once more
/// by `flashscan sql`'s session on the files, after the server stopped. Skipped, with the
/// reason printed, where python3, SQLAlchemy, pandas or psycopg is missing (.ci/run
/// installs them with pip).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlalchemy_and_pandas_work_unchanged() {
    let has_modules = std::process::Command::new("python3").args(["-c", "import sqlalchemy, pandas, psycopg"]).output().map(|o| o.status.success()).unwrap_or(false);
    if !has_modules {
        eprintln!("SKIPPED sqlalchemy_and_pandas_work_unchanged: python3 with sqlalchemy, pandas and psycopg 3 is not installed (pip install sqlalchemy pandas \"psycopg[binary]\")");
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let db = common::init_db(dir.path(), "db");
    let server = flashscan_server::start(config(&db)).await.expect("start");
    let port = server.listen.port().to_string();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/sqlalchemy_client.py");
    let out = tokio::task::spawn_blocking(move || std::process::Command::new("python3").arg(script).arg(port).output()).await.expect("join").expect("python3 runs");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "sqlalchemy client failed: {stderr}\n{stdout}");
    let lines = |name: &str| -> Vec<Vec<String>> {
        stdout.lines().filter_map(|l| l.strip_prefix(&format!("{name}|"))).map(|l| l.split('|').map(str::to_string).collect()).collect()
    };
    let one = |name: &str| -> Vec<String> {
        let found = lines(name);
        assert_eq!(found.len(), 1, "one line {name}: {stdout}");
        found[0].clone()
    };
    // Connected: the dialect parsed version() as PostgreSQL 15.0.
    assert_eq!(one("version"), ["15", "0"], "{stdout}");
    assert_eq!(one("current"), ["public", "flashscan"], "{stdout}");
    assert_eq!(one("backend_pid"), ["True", "True"], "pg_backend_pid() is the connection's: {stdout}");
    // to_sql: refused a second time (pandas saw the table); its rows are counted below, as
    // read back. (It returns -1 here and against PostgreSQL 15 alike: SQLAlchemy's batched
    // executemany reports no row count.)
    assert_eq!(one("to_sql"), ["-1"], "{stdout}");
    assert!(one("to_sql_again")[0].contains("already exists"), "{stdout}");
    assert_eq!(one("to_sql_append"), ["-1"], "{stdout}");
    // Reflection: the table, its columns with PostgreSQL's types, nullable, no default;
    // no primary key, index, foreign key, unique constraint or comment.
    assert_eq!(one("tables"), ["frames"], "{stdout}");
    assert_eq!(one("has_table"), ["True", "False"], "{stdout}");
    let columns = lines("column");
    let expected_columns = [["id", "BIGINT"], ["name", "TEXT"], ["score", "DOUBLE PRECISION"], ["ok", "BOOLEAN"], ["at", "TIMESTAMP"]];
    assert_eq!(columns.iter().map(|c| [c[0].as_str(), c[1].as_str()]).collect::<Vec<_>>(), expected_columns, "{stdout}");
    assert!(columns.iter().all(|c| c[2] == "True" && c[3] == "NULL"), "nullable, no default: {stdout}");
    for name in ["pk", "indexes", "foreign_keys", "unique"] {
        assert_eq!(one(name), ["0"], "{name}: {stdout}");
    }
    assert_eq!(one("comment"), ["NULL"], "{stdout}");
    assert_eq!(one("reflected"), ["frames"], "{stdout}");
    assert_eq!(one("reflected_columns"), ["id:BIGINT", "name:TEXT", "score:DOUBLE PRECISION", "ok:BOOLEAN", "at:TIMESTAMP"], "{stdout}");
    // Core select with bound parameters: id >= 2 and name <> 'beta' (NULL names drop out).
    assert_eq!(one("core_select"), ["4:délta:-1e+300", "4:délta:-1e+300"], "{stdout}");
    assert_eq!(one("core_count"), ["4"], "{stdout}");
    // read_sql gives back the DataFrame written (twice over), by query and by table name.
    assert_eq!(one("read_sql_rows"), ["8"], "{stdout}");
    assert_eq!(one("read_sql_query"), ["same"], "{stdout}");
    assert_eq!(one("read_sql_params"), ["1:0.1", "1:0.1", "2:2.5", "2:2.5"], "0.1 stays a double: {stdout}");
    assert_eq!(one("read_sql_table"), ["same"], "{stdout}");
    let dtypes = one("read_sql_table_dtypes");
    assert!(dtypes[0] == "id:int64" && dtypes[2] == "score:float64" && dtypes[3] == "ok:bool" && dtypes[4].starts_with("at:datetime64"), "{stdout}");
    assert_eq!(one("read_sql_chunks"), ["3", "3", "2"], "{stdout}");
    assert_eq!(one("read_sql_table_chunks"), ["5", "3"], "{stdout}");
    // A tz-aware column's moments, in UTC (Berlin is UTC+1 in January, +2 in June).
    assert_eq!(one("moments"), ["2024-01-01T09:00:00", "2024-06-01T10:00:00"], "{stdout}");
    // The index as a plain column named `index` works; pandas' own index (index=True) is
    // a CREATE INDEX, taken, and a lookup by it finds its row.
    assert_eq!(one("to_sql_reset_index"), ["-1"], "{stdout}");
    assert_eq!(one("index_column"), ["0:1", "1:2", "2:3", "3:4"], "{stdout}");
    assert_eq!(one("to_sql_index"), ["-1"], "{stdout}");
    assert_eq!(one("indexed_lookup"), ["2:3"], "{stdout}");
    assert_eq!(one("keyed_pk"), ["keyed_pkey", "id"], "{stdout}");
    assert_eq!(one("keyed_unique"), ["keyed_code_key:code"], "{stdout}");
    // The primary key's index is not listed (SQLAlchemy leaves it out for PostgreSQL too);
    // the unique constraint's is, and a two-column index keeps its column order.
    assert_eq!(one("keyed_indexes"), ["keyed_code_key:code:True", "keyed_v:v,code:False"], "{stdout}");
    // A unit of work: its rows read back before COMMIT, a nested transaction (SAVEPOINT)
    // rolled back on 23505 while the outer one commits, an engine at REPEATABLE READ.
    assert_eq!(one("own_writes"), ["1:11", "2:20"], "{stdout}");
    assert_eq!(one("nested"), ["rolled_back", "23505"], "{stdout}");
    assert_eq!(one("after_nested"), ["1:a:11", "2:b:20", "3:c:30"], "{stdout}");
    assert_eq!(one("isolation"), ["REPEATABLE READ", "3"], "{stdout}");
    // The ORM: keys from the SERIAL column, read back by INSERT … RETURNING.
    assert_eq!(one("orm_flush_id"), ["1"], "{stdout}");
    assert_eq!(one("orm_ids"), ["2", "3", "4", "5"], "{stdout}");
    assert_eq!(one("orm_server_default"), ["5"], "{stdout}");
    // Reflected: the SERIAL's nextval (so SQLAlchemy knows the key is the database's), the
    // constant default, none for the plain column.
    assert_eq!(one("reflected_defaults"), ["nextval('items_id_seq'::regclass)", "True", "5", "NULL"], "{stdout}");
    assert_eq!(one("orm_rows"), ["1:uno:5", "3:n1:5", "4:n2:5", "5:n3:5"], "{stdout}");
    // An identity column and a sequence: each value PostgreSQL 15's for the same script
    // (the listed sequences are this database's; the options come from pg_sequence as json).
    assert_eq!(one("identity_ids"), ["10", "15"], "{stdout}");
    assert_eq!(one("identity_currval"), ["15"], "{stdout}");
    assert_eq!(one("identity_options"), ["always=False", "cache=1", "cycle=False", "increment=5", "maxvalue=2147483647", "minvalue=1", "start=10"], "{stdout}");
    assert_eq!(one("identity_default"), ["NULL", "True"], "{stdout}");
    assert_eq!(one("identity_reflected"), ["10"], "{stdout}");
    assert_eq!(one("sequence_next"), ["3", "4"], "{stdout}");
    assert_eq!(one("sequences"), ["counter", "ident_id_seq", "items_id_seq", "True"], "{stdout}");
    assert_eq!(one("sequence_dropped"), ["False"], "{stdout}");
    server.shutdown().await;
    // The rows on disk, as flashscan sql reads them after the server stopped.
    let on_disk = common::reopened(&db, "select id, name, score, ok, at from frames order by id, name").await;
    let expected_rows = [
        ["1", "alpha", "0.1", "true", "2024-01-01T10:00:00"],
        ["2", "beta", "2.5", "false", "2024-02-29T23:59:59.123456"],
        ["3", "", "", "true", "1999-12-31T00:00:00"],
        ["4", "délta", "-1e300", "false", "2030-06-15T12:00:00"],
    ];
    let doubled: Vec<Vec<String>> = expected_rows.iter().flat_map(|r| [r, r]).map(|r| r.iter().map(|v| v.to_string()).collect()).collect();
    assert_eq!(on_disk, doubled);
}

const PG_CATALOG_COLUMNS: &str = "SELECT a.attnum, a.attname, pg_catalog.format_type(a.atttypid, a.atttypmod) AS type, t.typname \
    FROM pg_catalog.pg_attribute a JOIN pg_catalog.pg_class c ON c.oid = a.attrelid \
    JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace JOIN pg_catalog.pg_type t ON t.oid = a.atttypid \
    WHERE c.relname = 'part' AND n.nspname = 'public' AND c.relkind = 'r' AND a.attnum > 0 ORDER BY a.attnum";
const INFORMATION_SCHEMA_COLUMNS: &str =
    "SELECT column_name, data_type FROM information_schema.columns WHERE table_name = 'part' ORDER BY ordinal_position";

/// One connection speaking the simple protocol by hand: tokio-postgres keeps command tags
/// to itself, and these tests are about them.
struct RawClient {
    stream: tokio::net::TcpStream,
}

impl RawClient {
    async fn connect(port: u16) -> RawClient {
        use tokio::io::AsyncWriteExt;
        let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.expect("connect");
        let mut body = 196_608i32.to_be_bytes().to_vec();
        for (k, v) in [("user", "tester"), ("database", "flashscan")] {
            body.extend_from_slice(k.as_bytes());
            body.push(0);
            body.extend_from_slice(v.as_bytes());
            body.push(0);
        }
        body.push(0);
        let mut message = ((body.len() + 4) as i32).to_be_bytes().to_vec();
        message.extend(body);
        stream.write_all(&message).await.expect("startup");
        let mut client = RawClient { stream };
        let greeting = client.read_until_ready().await;
        assert!(!greeting.iter().any(|m| m.starts_with("E:")), "{greeting:?}");
        client
    }

    /// What a simple query answers, message by message: `C:<command tag>`, `D:<first
    /// column>` (`D:NULL`), `E:<SQLSTATE>:<message>`.
    async fn query(&mut self, sql: &str) -> Vec<String> {
        use tokio::io::AsyncWriteExt;
        let mut message = vec![b'Q'];
        message.extend(((sql.len() + 5) as i32).to_be_bytes());
        message.extend(sql.as_bytes());
        message.push(0);
        self.stream.write_all(&message).await.expect("query");
        self.read_until_ready().await
    }

    async fn read_until_ready(&mut self) -> Vec<String> {
        use tokio::io::AsyncReadExt;
        let text = |b: &[u8]| String::from_utf8_lossy(b.split(|c| *c == 0).next().unwrap_or_default()).to_string();
        let mut out = Vec::new();
        loop {
            let kind = self.stream.read_u8().await.expect("message kind");
            let len = self.stream.read_i32().await.expect("message length");
            let mut body = vec![0u8; len as usize - 4];
            self.stream.read_exact(&mut body).await.expect("message body");
            match kind {
                b'C' => out.push(format!("C:{}", text(&body))),
                b'D' => {
                    let first = i32::from_be_bytes(body[2..6].try_into().expect("column length"));
                    out.push(if first < 0 { "D:NULL".to_string() } else { format!("D:{}", String::from_utf8_lossy(&body[6..6 + first as usize])) });
                }
                b'E' => {
                    let fields: Vec<(u8, String)> = body.split(|c| *c == 0).filter(|f| !f.is_empty()).map(|f| (f[0], String::from_utf8_lossy(&f[1..]).to_string())).collect();
                    let field = |k: u8| fields.iter().find(|(c, _)| *c == k).map(|(_, v)| v.clone()).unwrap_or_default();
                    out.push(format!("E:{}:{}", field(b'C'), field(b'M')));
                }
                b'Z' => return out,
                _ => {}
            }
        }
    }
}

fn data(rows: impl IntoIterator<Item = i64>) -> Vec<String> {
    rows.into_iter().map(|r| format!("D:{r}")).collect()
}

/// DECLARE, FETCH in every forward form, MOVE and CLOSE over the simple protocol answer
/// with PostgreSQL's command tags, the rows in the query's order, and PostgreSQL's
/// SQLSTATEs for what is refused; a cursor without HOLD ends with its block, a WITH HOLD
/// one outlives COMMIT (not ROLLBACK); a connection's open cursors are bounded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cursors_answer_with_postgresqls_tags_and_errors() {
    let (_guard, db) = fresh_db();
    let server = flashscan_server::start(config(&db)).await.expect("start");
    let part_count = oracle_rows(&db, "select count(*) from part").await[0][0].clone().expect("count").parse::<i64>().expect("number");
    let mut c = RawClient::connect(server.listen.port()).await;
    let out = c
        .query("BEGIN; DECLARE c CURSOR FOR select p_partkey from part order by p_partkey; FETCH 3 FROM c; FETCH NEXT FROM c; MOVE FORWARD 10 IN c; FETCH FORWARD 2 FROM c; FETCH ALL FROM c; FETCH c; MOVE ALL IN c; CLOSE c; COMMIT")
        .await;
    let mut expected: Vec<String> = vec!["C:BEGIN".into(), "C:DECLARE CURSOR".into()];
    expected.extend(data(1..=3));
    expected.push("C:FETCH 3".into());
    expected.extend(data([4]));
    expected.push("C:FETCH 1".into());
    expected.push("C:MOVE 10".into());
    expected.extend(data(15..=16));
    expected.push("C:FETCH 2".into());
    expected.extend(data(17..=part_count));
    expected.push(format!("C:FETCH {}", part_count - 16));
    expected.extend(["C:FETCH 0", "C:MOVE 0", "C:CLOSE CURSOR", "C:COMMIT"].map(String::from));
    assert_eq!(out, expected);
    // BINARY, quoted names, CLOSE ALL.
    let out = c.query("BEGIN; DECLARE \"Two Words\" NO SCROLL CURSOR WITHOUT HOLD FOR values (1), (2); FETCH 1 IN \"Two Words\"; CLOSE ALL; ROLLBACK").await;
    assert_eq!(out, ["C:BEGIN", "C:DECLARE CURSOR", "D:1", "C:FETCH 1", "C:CLOSE CURSOR ALL", "C:ROLLBACK"]);
    // Refusals, each with PostgreSQL's SQLSTATE.
    let err = |out: &[String]| out.iter().find(|m| m.starts_with("E:")).cloned().unwrap_or_else(|| format!("no error in {out:?}"));
    assert_eq!(err(&c.query("DECLARE c CURSOR FOR select 1").await), "E:25P01:DECLARE CURSOR can only be used in transaction blocks");
    assert_eq!(err(&c.query("FETCH 1 FROM nope").await), "E:34000:cursor \"nope\" does not exist");
    assert_eq!(err(&c.query("CLOSE nope").await), "E:34000:cursor \"nope\" does not exist");
    let duplicate = c.query("BEGIN; DECLARE c CURSOR FOR select 1; DECLARE c CURSOR FOR select 2").await;
    assert_eq!(err(&duplicate), "E:42P03:cursor \"c\" already exists");
    assert_eq!(c.query("ROLLBACK").await, ["C:ROLLBACK"]);
    for backward in ["FETCH BACKWARD 1 FROM c", "FETCH PRIOR FROM c", "MOVE -2 IN c", "FETCH ABSOLUTE 3 FROM c"] {
        let e = err(&c.query(backward).await);
        assert!(e.starts_with("E:0A000:") && e.contains("forward only"), "{backward}: {e}");
    }
    let e = err(&c.query("BEGIN; DECLARE s SCROLL CURSOR FOR select 1").await);
    assert!(e.starts_with("E:0A000:") && e.contains("NO SCROLL"), "{e}");
    c.query("ROLLBACK").await;
    // Without HOLD: gone at COMMIT. WITH HOLD: kept past COMMIT, gone at ROLLBACK of its block.
    let out = c.query("BEGIN; DECLARE plain CURSOR FOR select 1; DECLARE kept CURSOR WITH HOLD FOR select p_partkey from part order by p_partkey; FETCH 1 FROM kept; COMMIT").await;
    assert_eq!(out, ["C:BEGIN", "C:DECLARE CURSOR", "C:DECLARE CURSOR", "D:1", "C:FETCH 1", "C:COMMIT"]);
    assert_eq!(err(&c.query("FETCH plain").await), "E:34000:cursor \"plain\" does not exist");
    assert_eq!(c.query("FETCH 2 FROM kept").await, ["D:2", "D:3", "C:FETCH 2"]);
    let out = c.query("BEGIN; DECLARE gone CURSOR WITH HOLD FOR select 1; ROLLBACK").await;
    assert_eq!(out, ["C:BEGIN", "C:DECLARE CURSOR", "C:ROLLBACK"]);
    assert_eq!(err(&c.query("FETCH gone").await), "E:34000:cursor \"gone\" does not exist");
    // WITH HOLD outside a block: materialised at once (its statement commits).
    assert_eq!(c.query("DECLARE now_held CURSOR WITH HOLD FOR values (7), (8); FETCH ALL FROM now_held; CLOSE now_held; CLOSE kept").await, [
        "C:DECLARE CURSOR",
        "D:7",
        "D:8",
        "C:FETCH 2",
        "C:CLOSE CURSOR",
        "C:CLOSE CURSOR"
    ]);
    // pg_cursors lists this connection's cursors, and no other's.
    let out = c.query("BEGIN; DECLARE listed CURSOR FOR select 1; DECLARE \"Held One\" BINARY CURSOR WITH HOLD FOR select 2; SELECT name || ':' || is_holdable || ':' || is_binary || ':' || statement FROM pg_cursors ORDER BY name").await;
    assert_eq!(&out[3..], ["D:Held One:true:true:DECLARE \"Held One\" BINARY CURSOR WITH HOLD FOR select 2", "D:listed:false:false:DECLARE listed CURSOR FOR select 1", "C:SELECT 2"]);
    let mut other = RawClient::connect(server.listen.port()).await;
    assert_eq!(other.query("SELECT count(*) FROM pg_catalog.pg_cursors").await, ["D:0", "C:SELECT 1"]);
    assert_eq!(c.query("ROLLBACK; SELECT count(*) FROM pg_cursors").await, ["C:ROLLBACK", "D:0", "C:SELECT 1"]);
    // DISCARD ALL closes every cursor, held ones too.
    assert_eq!(c.query("DECLARE d1 CURSOR WITH HOLD FOR values (1); DISCARD ALL").await, ["C:DECLARE CURSOR", "C:DISCARD ALL"]);
    assert_eq!(err(&c.query("FETCH d1").await), "E:34000:cursor \"d1\" does not exist");
    // An error in the block closes its cursors with it.
    let out = c.query("BEGIN; DECLARE doomed CURSOR FOR select 1; select * from no_such_table").await;
    assert!(err(&out).starts_with("E:42P01"), "{out:?}");
    c.query("ROLLBACK").await;
    assert_eq!(err(&c.query("FETCH doomed").await), "E:34000:cursor \"doomed\" does not exist");
    // At most CURSORS_OPEN_PER_CONNECTION_MAX open; each read to its end has freed its slot.
    c.query("BEGIN").await;
    for i in 0..flashscan_server::cursors::CURSORS_OPEN_PER_CONNECTION_MAX {
        let out = c.query(&format!("DECLARE c{i} CURSOR FOR select {i}; FETCH ALL FROM c{i}")).await;
        assert_eq!(out, ["C:DECLARE CURSOR".to_string(), format!("D:{i}"), "C:FETCH 1".to_string()]);
    }
    let e = err(&c.query("DECLARE one_more CURSOR FOR select 1").await);
    assert!(e.starts_with("E:54000:") && e.contains("CLOSE one first"), "{e}");
    assert_eq!(c.query("ROLLBACK").await, ["C:ROLLBACK"]);
    server.shutdown().await;
}

/// A cursor streams: DECLARE over a 120-million-row join and FETCH 5 answer at once (a
/// materialised result would take hours and all memory), the open cursor holds one query
/// slot while its query has rows left, and CLOSE frees it. The same through tokio-postgres'
/// extended protocol, with a bound parameter.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cursor_streams_and_holds_one_query_slot_until_closed() {
    let (_guard, db) = fresh_db();
    let server = flashscan_server::start(config(&db)).await.expect("start");
    let running = || server.shared.admission.counters.queries_running.load(std::sync::atomic::Ordering::Relaxed);
    let mut c = RawClient::connect(server.listen.port()).await;
    let out = tokio::time::timeout(Duration::from_secs(120), c.query("BEGIN; DECLARE big CURSOR FOR select l_orderkey, p_partkey from lineitem, part; FETCH 5 FROM big"))
        .await
        .expect("DECLARE and FETCH 5 of a huge join do not wait for the whole result");
    assert_eq!(out.iter().filter(|m| m.starts_with("D:")).count(), 5, "{out:?}");
    assert_eq!(out.last().map(String::as_str), Some("C:FETCH 5"));
    assert_eq!(running(), 1, "the open cursor holds its query slot");
    assert_eq!(c.query("MOVE 1000 IN big").await, ["C:MOVE 1000"]);
    let counters = &server.shared.admission.counters;
    let canceled = counters.queries_canceled.load(std::sync::atomic::Ordering::Relaxed);
    assert_eq!(c.query("CLOSE big").await, ["C:CLOSE CURSOR"]);
    wait_for("the slot freed by CLOSE", || running() == 0).await;
    assert_eq!(counters.queries_canceled.load(std::sync::atomic::Ordering::Relaxed), canceled, "a cursor closed early is not a canceled query");
    c.query("COMMIT").await;
    // tokio-postgres: DECLARE with a parameter (extended protocol), FETCH's rows typed.
    let client = connect(&server).await;
    client.batch_execute("BEGIN").await.expect("begin");
    client.execute("DECLARE p CURSOR FOR select p_partkey, p_name from part where p_partkey < $1 order by p_partkey", &[&4i64]).await.expect("declare");
    let rows = client.query("FETCH ALL FROM p", &[]).await.expect("fetch");
    let keys: Vec<i64> = rows.iter().map(|r| r.get::<_, i64>(0)).collect();
    assert_eq!(keys, [1, 2, 3]);
    let names = oracle_rows(&db, "select p_name from part where p_partkey = 2").await;
    assert_eq!(Some(rows[1].get::<_, String>(1)), names[0][0].clone());
    client.batch_execute("COMMIT").await.expect("commit");
    server.shutdown().await;
}

/// psycopg 3's named cursors (crates/server/tests/psycopg_cursors_client.py), unchanged:
/// iteration with `itersize`, `fetchmany`/`fetchone`/`fetchall`, `scroll` forward (and
/// backward refused in one line), a binary cursor, WITH HOLD past COMMIT, and the command
/// tags; rows checked against flashscan sql's answers. Skipped, with the reason printed,
/// where python3 or psycopg is missing (.ci/run installs psycopg with pip).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn psycopg_named_cursors_stream_unchanged() {
    let has_psycopg = std::process::Command::new("python3").args(["-c", "import psycopg"]).output().map(|o| o.status.success()).unwrap_or(false);
    if !has_psycopg {
        eprintln!("SKIPPED psycopg_named_cursors_stream_unchanged: python3 with psycopg 3 is not installed (pip install \"psycopg[binary]\")");
        return;
    }
    let (_guard, db) = fresh_db();
    let server = flashscan_server::start(config(&db)).await.expect("start");
    let port = server.listen.port().to_string();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/psycopg_cursors_client.py");
    let out = tokio::task::spawn_blocking(move || std::process::Command::new("python3").arg(script).arg(port).output()).await.expect("join").expect("python3 runs");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "psycopg cursor client failed: {stderr}\n{stdout}");
    let one = |name: &str| -> Vec<String> {
        let found: Vec<Vec<String>> = stdout.lines().filter_map(|l| l.strip_prefix(&format!("{name}|"))).map(|l| l.split('|').map(str::to_string).collect()).collect();
        assert_eq!(found.len(), 1, "one line {name}: {stdout}");
        found[0].clone()
    };
    let text = |rows: Vec<Vec<Option<String>>>| -> Vec<String> { rows.into_iter().flatten().map(|v| v.unwrap_or_else(|| "NULL".into())).collect() };
    let iterated = text(oracle_rows(&db, "select count(*), sum(p_partkey), min(p_partkey), max(p_partkey) from part where p_size < 20").await);
    assert_eq!(one("iterated"), iterated, "{stdout}");
    let part_count: usize = text(oracle_rows(&db, "select count(*) from part").await)[0].parse().expect("count");
    assert_eq!(one("fetchmany"), ["1,2,3,4,5", "6", "17", &(part_count - 16).to_string()], "{stdout}");
    let back = one("scroll_back");
    assert_eq!(&back[..2], ["FeatureNotSupported", "0A000"], "{stdout}");
    assert!(back[2].contains("forward only"), "{stdout}");
    let binary: Vec<String> = text(oracle_rows(&db, "select p_partkey || ':' || p_name || ':' || cast(p_retailprice as varchar) from part where p_partkey <= 3 order by p_partkey").await);
    assert_eq!(one("binary"), binary, "{stdout}");
    assert_eq!(one("withhold"), ["1", "2,3,4"], "{stdout}");
    assert_eq!(one("stolen"), ["1,2"], "{stdout}");
    assert_eq!(one("tags"), ["DECLARE CURSOR", "FETCH 2", "MOVE 3", &format!("FETCH {}", part_count - 5), "FETCH 0", "CLOSE CURSOR"], "{stdout}");
    assert_eq!(one("outside_block"), ["25P01", "DECLARE CURSOR can only be used in transaction blocks"], "{stdout}");
    server.shutdown().await;
}

/// psql's `\d t` shows a table's keys and indexes and `\di` lists them: the SQL indexes
/// are relations of `pg_class` (relkind 'i', access method btree) under the oids `pg_index`
/// names them by.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn psql_describes_keys_and_indexes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = common::init_db(dir.path(), "db");
    let server = flashscan_server::start(config(&db)).await.expect("start");
    let mut c = RawClient::connect(server.listen.port()).await;
    let out = c.query("CREATE TABLE keyed (id BIGINT PRIMARY KEY, code TEXT UNIQUE, v INT); CREATE INDEX keyed_v ON keyed (v)").await;
    assert_eq!(out, ["C:CREATE TABLE", "C:CREATE INDEX"]);
    assert_eq!(
        c.query("SELECT c.relname || '|' || c.relkind || '|' || am.amname FROM pg_catalog.pg_index i JOIN pg_catalog.pg_class c ON c.oid = i.indexrelid JOIN pg_catalog.pg_am am ON am.oid = c.relam ORDER BY 1").await,
        ["D:keyed_code_key|i|btree", "D:keyed_pkey|i|btree", "D:keyed_v|i|btree", "C:SELECT 3"]
    );
    assert_eq!(c.query("SELECT relhasindex FROM pg_catalog.pg_class WHERE relname = 'keyed'").await, ["D:t", "C:SELECT 1"]);
    if std::process::Command::new("psql").arg("--version").output().is_ok() {
        let port = server.listen.port().to_string();
        let out = tokio::task::spawn_blocking(move || std::process::Command::new("psql").args(["-X", "-h", "127.0.0.1", "-p", &port, "-U", "someone", "-d", "anydb", "-c", "\\d keyed", "-c", "\\di", "-c", "\\dt"]).env_remove("PGPASSWORD").output())
            .await
            .expect("join")
            .expect("psql runs");
        let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert!(out.status.success() && !stderr.contains("ERROR"), "psql failed: {stderr}\n{stdout}");
        assert!(stdout.contains("Indexes:"), "\\d keyed: {stdout}");
        assert!(stdout.lines().any(|l| l.contains("\"keyed_pkey\" PRIMARY KEY") && l.contains("(id)")), "\\d keyed: {stdout}");
        assert!(stdout.lines().any(|l| l.contains("\"keyed_code_key\" UNIQUE") && l.contains("(code)")), "\\d keyed: {stdout}");
        assert!(stdout.lines().any(|l| l.contains("\"keyed_v\" btree (v)")), "\\d keyed: {stdout}");
        assert!(stdout.lines().any(|l| l.contains(" keyed_v ") && l.contains("index") && l.contains("keyed")), "\\di: {stdout}");
        assert!(!stdout.lines().any(|l| l.contains(" keyed_v ") && l.contains("table")), "\\dt lists tables only: {stdout}");
    } else {
        eprintln!("psql is not installed: \\d keyed and \\di not checked (apt-get install postgresql-client)");
    }
    // DROP INDEX, with PostgreSQL's tag: gone from the catalog; IF EXISTS of a missing one
    // is a notice's worth, not an error; a missing one without it is an error.
    assert_eq!(c.query("DROP INDEX keyed_v").await, ["C:DROP INDEX"]);
    assert_eq!(c.query("SELECT count(*) FROM pg_catalog.pg_class WHERE relname = 'keyed_v'").await, ["D:0", "C:SELECT 1"]);
    assert_eq!(c.query("DROP INDEX IF EXISTS keyed_v").await, ["C:DROP INDEX"]);
    let missing = c.query("drop index keyed_v").await;
    assert!(missing.len() == 1 && missing[0].starts_with("E:") && missing[0].contains("keyed_v"), "{missing:?}");
    server.shutdown().await;
}

/// CREATE [OR REPLACE] VIEW and DROP VIEW over the wire on a database made by `flashscan
/// init`: PostgreSQL's tags; SELECT reads the view; psql's catalog (pg_class relkind 'v',
/// pg_views, pg_get_viewdef) and information_schema (table_type VIEW, views) list it; writes
/// into it and DROP TABLE of what it reads are refused in one line naming it; the view is
/// durable (flashscan sql reads it after the server stopped); a view whose table went away
/// behind its back fails when read, naming itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn views_are_kept_listed_and_guard_their_tables() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = common::init_db(dir.path(), "db");
    let server = flashscan_server::start(config(&db)).await.expect("start");
    let mut c = RawClient::connect(server.listen.port()).await;
    let err = |out: &[String]| out.iter().find(|m| m.starts_with("E:")).cloned().unwrap_or_else(|| format!("no error in {out:?}"));
    let out = c
        .query("CREATE TABLE t (a bigint, b text); INSERT INTO t VALUES (1, 'one'), (2, 'two'), (3, 'three'); CREATE VIEW v (x) AS SELECT a, b FROM t WHERE a > 1; CREATE VIEW w AS SELECT x * 10 AS y FROM v")
        .await;
    assert_eq!(out, ["C:CREATE TABLE", "C:INSERT 0 3", "C:CREATE VIEW", "C:CREATE VIEW"]);
    assert_eq!(c.query("SELECT x, b FROM v ORDER BY x").await, ["D:2", "D:3", "C:SELECT 2"]);
    assert_eq!(c.query("SELECT y FROM w ORDER BY y").await, ["D:20", "D:30", "C:SELECT 2"]);
    // The catalog: psql's \dv reads pg_class.relkind, \d+ v pg_get_viewdef; information_schema.
    assert_eq!(c.query("SELECT relname FROM pg_catalog.pg_class WHERE relkind = 'v' ORDER BY relname").await, ["D:v", "D:w", "C:SELECT 2"]);
    assert_eq!(c.query("SELECT relkind FROM pg_catalog.pg_class WHERE relname = 't'").await, ["D:r", "C:SELECT 1"]);
    let definition = c.query("SELECT definition FROM pg_catalog.pg_views WHERE viewname = 'v'").await;
    assert!(definition.len() == 2 && definition[0].starts_with("D:SELECT a, b FROM t WHERE a > 1"), "{definition:?}");
    let viewdef = c.query("SELECT pg_catalog.pg_get_viewdef(c.oid, true) FROM pg_catalog.pg_class c WHERE c.relname = 'v'").await;
    assert_eq!(viewdef[0], definition[0], "{viewdef:?}");
    assert_eq!(c.query("SELECT table_type FROM information_schema.tables WHERE table_name = 'v'").await, ["D:VIEW", "C:SELECT 1"]);
    // information_schema.views in PostgreSQL's shape (issue 30): the views only, each with
    // its query as `view_definition`, read-only.
    assert_eq!(c.query("SELECT table_name FROM information_schema.views ORDER BY table_name").await, ["D:v", "D:w", "C:SELECT 2"]);
    assert_eq!(c.query("SELECT view_definition = pg_catalog.pg_get_viewdef(c.oid) FROM information_schema.views v JOIN pg_catalog.pg_class c ON c.relname = v.table_name WHERE v.table_name = 'v'").await, ["D:t", "C:SELECT 1"]);
    assert_eq!(c.query("SELECT is_updatable FROM information_schema.views WHERE table_name = 'w'").await, ["D:NO", "C:SELECT 1"]);
    // psql's \dv and \d v, where psql is installed. (`\d+` of any relation stops at
    // `pg_catalog.unnest(…)` in its second query, which the catalog does not take yet.)
    if std::process::Command::new("psql").arg("--version").output().is_ok() {
        let port = server.listen.port().to_string();
        let out = tokio::task::spawn_blocking(move || {
            std::process::Command::new("psql").args(["-X", "-h", "127.0.0.1", "-p", &port, "-U", "someone", "-d", "anydb", "-c", "\\dv", "-c", "\\d v"]).env_remove("PGPASSWORD").output()
        })
        .await
        .expect("join")
        .expect("psql runs");
        let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert!(out.status.success() && !stderr.contains("ERROR"), "psql failed: {stderr}\n{stdout}");
        assert!(stdout.lines().any(|l| l.contains(" public | v ") && l.contains("view")), "\\dv: {stdout}");
        assert!(!stdout.lines().any(|l| l.contains(" public | t ")), "\\dv lists views only: {stdout}");
        assert!(stdout.contains("View \"public.v\""), "\\d v: {stdout}");
        assert!(stdout.lines().any(|l| l.trim_start().starts_with("x ") && l.contains("bigint")), "\\d v columns: {stdout}");
    } else {
        eprintln!("psql is not installed: \\dv and \\d v not checked (apt-get install postgresql-client)");
    }
    // Read-only, and what a view reads cannot be dropped from under it.
    for write in ["INSERT INTO v VALUES (9, 'nine')", "UPDATE v SET x = 1", "DELETE FROM v"] {
        let e = err(&c.query(write).await);
        assert!(e.starts_with("E:0A000:") && e.contains("view v") && e.contains("read-only"), "{write}: {e}");
    }
    let e = err(&c.query("DROP TABLE t").await);
    assert!(e.starts_with("E:2BP01:") && e.contains("view v reads it") && e.contains("DROP VIEW v first"), "{e}");
    let e = err(&c.query("DROP VIEW v").await);
    assert!(e.starts_with("E:2BP01:") && e.contains("view w reads it"), "{e}");
    let e = err(&c.query("DROP TABLE t CASCADE").await);
    assert!(e.starts_with("E:2BP01:") && e.contains("CASCADE is not supported"), "{e}");
    assert!(err(&c.query("DROP TABLE v").await).starts_with("E:42809:"), "a view is not a table");
    assert!(err(&c.query("DROP VIEW t").await).starts_with("E:42809:"), "a table is not a view");
    assert!(err(&c.query("CREATE VIEW t AS SELECT 1 AS one").await).starts_with("E:42P07:"), "the tables' namespace");
    assert!(err(&c.query("CREATE VIEW v AS SELECT 1 AS one").await).starts_with("E:42P07:"));
    assert!(err(&c.query("CREATE VIEW bad AS SELECT * FROM no_such_table").await).starts_with("E:42P01:"));
    // OR REPLACE keeps the columns (and may add some); renaming one is refused.
    assert!(err(&c.query("CREATE OR REPLACE VIEW v AS SELECT b FROM t").await).starts_with("E:42P16:"));
    assert_eq!(c.query("CREATE OR REPLACE VIEW v (x) AS SELECT a, b, a * 2 AS twice FROM t; SELECT count(*) FROM v").await, ["C:CREATE VIEW", "D:3", "C:SELECT 1"]);
    assert_eq!(c.query("DROP VIEW IF EXISTS nothing_here, w").await, ["C:DROP VIEW"]);
    // A view over the catalog sees the catalog as it is now, here and after a restart.
    assert_eq!(c.query("CREATE VIEW view_names AS SELECT relname FROM pg_class WHERE relkind = 'v'; SELECT relname FROM view_names ORDER BY 1").await, [
        "C:CREATE VIEW",
        "D:v",
        "D:view_names",
        "C:SELECT 2"
    ]);
    server.shutdown().await;
    // Durable: flashscan sql's session reads the view after the server stopped.
    assert_eq!(common::reopened(&db, "select x, twice from v order by x").await, [["1", "2"], ["2", "4"], ["3", "6"]]);
    // A view whose table disappeared behind its back (an edited catalog): reading it fails,
    // naming the view and what to do; the rest of the database works.
    let mut catalog = flashscan_storage::Catalog::read(&db).expect("catalog");
    catalog.views.push(flashscan_storage::ViewEntry { name: "orphan".into(), sql: "SELECT z FROM gone".into(), columns: vec!["z".into()], reads: vec!["gone".into()] });
    catalog.write_atomic(&db).expect("write catalog");
    let server = flashscan_server::start(config(&db)).await.expect("start again");
    let mut c = RawClient::connect(server.listen.port()).await;
    let e = err(&c.query("SELECT * FROM orphan").await);
    assert!(e.contains("view orphan cannot be read") && e.contains("DROP VIEW orphan"), "{e}");
    assert_eq!(c.query("SELECT count(*) FROM v").await, ["D:3", "C:SELECT 1"]);
    assert_eq!(c.query("SELECT relname FROM view_names ORDER BY 1").await, ["D:orphan", "D:v", "D:view_names", "C:SELECT 3"]);
    assert_eq!(c.query("DROP VIEW orphan, v, view_names").await, ["C:DROP VIEW"]);
    assert_eq!(c.query("DROP TABLE t").await, ["C:DROP TABLE"]);
    server.shutdown().await;
}
