//! Writes over the wire, driven by real clients: tokio-postgres (simple and extended
//! protocol, COPY FROM STDIN) and psql (`\copy`), on databases made by `flashscan init`.
//! The oracle is independent of the server: the rows the test itself generated, and the
//! database reopened afterwards through `flashscan sql`'s session.
//!
//! tokio-postgres is already the dev-dependency of tests/wire.rs (in the lock file), so it
//! costs nothing more to build.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use tokio_postgres::{Client, NoTls, SimpleQueryMessage};

mod common;
use common::{config, connect, connect_port, init_db, reopened, simple_rows as rows, serve, spawn_child_server, spawn_inserters, ChildServer, InsertParams, Served};

fn new_db() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = init_db(dir.path(), "db");
    (dir, db)
}


fn code_of(e: &tokio_postgres::Error) -> String {
    e.code().map(|c| c.code().to_string()).unwrap_or_else(|| format!("no SQLSTATE: {e}"))
}

fn message_of(e: &tokio_postgres::Error) -> String {
    e.as_db_error().map(|d| d.message().to_string()).unwrap_or_else(|| format!("{e:?}"))
}


async fn one(client: &Client, sql: &str) -> String {
    rows(client, sql).await[0][0].clone().unwrap_or_default()
}

/// The command tag of a simple-protocol statement ("INSERT 0 3", "COPY 2", ...).
async fn tag(client: &Client, sql: &str) -> u64 {
    let messages = client.simple_query(sql).await.unwrap_or_else(|e| panic!("{sql}: {}", message_of(&e)));
    messages
        .into_iter()
        .find_map(|m| match m {
            SimpleQueryMessage::CommandComplete(n) => Some(n),
            _ => None,
        })
        .expect("command complete")
}


#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn insert_create_and_drop_over_the_wire() {
    let (_guard, db) = new_db();
    let server = flashscan_server::start(config(&db)).await.expect("start");
    // The server is the database's writer: a second server is told where to connect.
    let second = flashscan_server::start(config(&db)).await.err().expect("second server refused").to_string();
    assert!(second.contains(&server.listen.to_string()), "{second}");

    let client = connect(&server).await;
    client
        .simple_query("CREATE TABLE items (k bigint NOT NULL, name text, price decimal(10,2), d date) WITH (partitions = 2)")
        .await
        .expect("create");
    assert!(server.shared.tables().iter().any(|t| t.name == "items"), "psql's table list knows the new table");
    assert_eq!(tag(&client, "INSERT INTO items VALUES (1, 'one', 1.50, '2020-01-01'), (2, NULL, 2.25, NULL)").await, 2);

    // Extended protocol: a prepared INSERT with parameters, run many times.
    let stmt = client.prepare("INSERT INTO items (k, name, d) VALUES ($1, $2, $3)").await.expect("prepare");
    assert_eq!(stmt.params().len(), 3);
    assert!(stmt.columns().is_empty(), "INSERT describes no result columns");
    let mut expected_sum_k: i64 = 3;
    for k in 3..=52i64 {
        let date = chrono::NaiveDate::from_ymd_opt(2021, 1, 1).expect("date") + chrono::Duration::days(k);
        let n = client.execute(&stmt, &[&k, &format!("item {k}"), &date]).await.expect("execute");
        assert_eq!(n, 1);
        expected_sum_k += k;
    }
    // INSERT … SELECT from the table itself.
    assert_eq!(tag(&client, "INSERT INTO items SELECT k + 1000, name, price, d FROM items WHERE k <= 10").await, 10);
    expected_sum_k += (1..=10).map(|k| k + 1000).sum::<i64>();
    assert_eq!(one(&client, "select count(*) from items").await, "62");
    assert_eq!(one(&client, "select sum(k) from items").await, expected_sum_k.to_string());
    assert_eq!(one(&client, "select name from items where k = 17").await, "item 17");
    assert_eq!(one(&client, "select cast(price as varchar) from items where k = 1").await, "1.50");
    assert_eq!(one(&client, "select cast(d as varchar) from items where k = 3").await, "2021-01-04");

    // Bad input: one error each, nothing of the statement stays, the connection lives on.
    for (sql, code) in [
        ("INSERT INTO items VALUES (NULL, 'x', 1, NULL)", "23502"),
        ("INSERT INTO items (name, k) VALUES ('x', NULL)", "23502"),
        ("INSERT INTO items VALUES (99, 'x', 1, NULL), ('eighty', 'y', 2, NULL)", ""),
        ("INSERT INTO nowhere VALUES (1)", "42P01"),
        ("UPDATE items SET k = NULL", "23502"),
    ] {
        let e = client.simple_query(sql).await.expect_err(sql);
        if !code.is_empty() {
            assert_eq!(code_of(&e), code, "{sql}: {}", message_of(&e));
        }
        if code == "23502" {
            assert!(message_of(&e).contains("\"k\""), "names the column: {}", message_of(&e));
        }
        assert!(!message_of(&e).contains('\n'), "one line: {}", message_of(&e));
    }
    // A column assigned twice is refused as PostgreSQL refuses it, never the last kept.
    let e = client.simple_query("UPDATE items SET k = 1, K = 2").await.expect_err("two assignments");
    assert!(message_of(&e).contains("multiple assignments to same column \"k\""), "{}", message_of(&e));
    let e = client.execute(&stmt, &[&None::<i64>, &"x", &None::<chrono::NaiveDate>]).await.expect_err("NULL key");
    assert_eq!(code_of(&e), "23502", "{}", message_of(&e));
    assert_eq!(one(&client, "select count(*) from items").await, "62");

    client.simple_query("CREATE TABLE scratch (a int)").await.expect("create scratch");
    assert_eq!(tag(&client, "INSERT INTO scratch VALUES (1)").await, 1);
    client.simple_query("DROP TABLE scratch").await.expect("drop");
    assert!(client.simple_query("select * from scratch").await.is_err());
    assert!(!server.shared.tables().iter().any(|t| t.name == "scratch"));

    let report = server.stop().await.expect("stop").expect("a checkpoint");
    assert_eq!(report.rows_written, 62);
    // Reopened by flashscan sql: the same rows, from pages now.
    assert_eq!(reopened(&db, "select count(*), sum(k) from items").await, vec![vec!["62".to_string(), expected_sum_k.to_string()]]);
    assert_eq!(flashscan_write::unflushed_rows(&db, "items").expect("unflushed"), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_writers_and_readers() {
    let Served { _guard, db, server, client } = serve(new_db()).await;
    client.simple_query("CREATE TABLE events (id bigint NOT NULL, writer int NOT NULL)").await.expect("create");
    const WRITERS: i64 = 16;
    const EACH: i64 = 25;
    let port = server.listen.port();
    let tasks = spawn_inserters(port, WRITERS, EACH, "INSERT INTO events VALUES ($1, $2)", |w, i| -> InsertParams { vec![Box::new(w * 1000 + i), Box::new(w as i32)] });
    // A reader meanwhile: counts only grow.
    let reader = tokio::spawn(async move {
        let c = connect_port(port).await;
        let mut last = 0i64;
        for _ in 0..20 {
            let n: i64 = rows(&c, "select count(*) from events").await[0][0].as_deref().unwrap_or("0").parse().expect("n");
            assert!(n >= last, "count went back from {last} to {n}");
            last = n;
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    });
    for t in tasks {
        t.await.expect("writer");
    }
    reader.await.expect("reader");
    assert_eq!(one(&client, "select count(*) from events").await, (WRITERS * EACH).to_string());
    assert_eq!(one(&client, "select count(distinct id) from events").await, (WRITERS * EACH).to_string());
    let c = server.shared.database.committer.as_ref().expect("committer");
    let statements = c.counters.statements_committed.load(std::sync::atomic::Ordering::Relaxed);
    let transactions = c.counters.transactions_committed.load(std::sync::atomic::Ordering::Relaxed);
    assert!(statements >= (WRITERS * EACH) as u64 && transactions <= statements, "{statements} statements in {transactions} transactions");
    eprintln!("group commit: {statements} statements in {transactions} transactions");
    server.shutdown().await;
    assert_eq!(reopened(&db, "select count(*) from events").await, vec![vec![(WRITERS * EACH).to_string()]]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copy_from_stdin_text_and_csv_all_or_nothing() {
    use futures::SinkExt;
    let Served { _guard, server, client, .. } = serve(new_db()).await;
    client.simple_query("CREATE TABLE c (k bigint NOT NULL, s text, f double, ok boolean, d date)").await.expect("create");

    let text = "1\tone\t1.5\tt\t2020-01-01\n2\t\\N\t-2\tf\t\\N\n3\ttab\\there\t0\ttrue\t2021-12-31\n";
    let sink = client.copy_in("COPY c FROM STDIN").await.expect("copy in");
    futures::pin_mut!(sink);
    sink.send(text.as_bytes()).await.expect("send");
    assert_eq!(sink.finish().await.expect("finish"), 3);

    let csv = "k,s,d\n10,\"a,b\",2022-02-02\n11,,\n12,\"\",2022-02-03\n";
    let sink = client.copy_in("COPY c (k, s, d) FROM STDIN WITH (FORMAT csv, HEADER true)").await.expect("copy in csv");
    futures::pin_mut!(sink);
    sink.send(csv.as_bytes()).await.expect("send");
    assert_eq!(sink.finish().await.expect("finish"), 3);

    assert_eq!(one(&client, "select count(*) from c").await, "6");
    assert_eq!(one(&client, "select s from c where k = 3").await, "tab\there");
    assert_eq!(one(&client, "select s from c where k = 10").await, "a,b");
    assert_eq!(rows(&client, "select s is null from c where k in (11, 12) order by k").await, vec![vec![Some("t".to_string())], vec![Some("f".to_string())]]);
    assert_eq!(one(&client, "select count(*) from c where k = 2 and s is null and d is null and not ok").await, "1");

    // A bad line: one error naming it; none of the copy's rows are inserted.
    let bad = "20\tfine\t1\tt\t2020-01-01\n21\tfine\tnot-a-number\tt\t2020-01-01\n";
    let sink = client.copy_in("COPY c FROM STDIN").await.expect("copy in");
    futures::pin_mut!(sink);
    sink.send(bad.as_bytes()).await.expect("send");
    let e = sink.finish().await.expect_err("bad line");
    let m = message_of(&e);
    assert!(m.contains("line 2") && m.contains("column f") && m.contains("not-a-number") && !m.contains('\n'), "{m}");
    assert_eq!(code_of(&e), "22P04");
    let sink = client.copy_in("COPY c FROM STDIN").await.expect("copy in");
    futures::pin_mut!(sink);
    sink.send("30\tx\n".as_bytes()).await.expect("send");
    let m = message_of(&sink.finish().await.expect_err("short line"));
    assert!(m.contains("line 1") && m.contains("missing data"), "{m}");
    assert_eq!(one(&client, "select count(*) from c").await, "6");
    let e = client.simple_query("COPY nowhere FROM STDIN").await.expect_err("unknown table");
    assert_eq!(code_of(&e), "42P01");

    // psql's \copy sends COPY … FROM STDIN over the simple protocol.
    if std::process::Command::new("psql").arg("--version").output().is_ok() {
        let file = _guard.path().join("rows.csv");
        std::fs::write(&file, "100,from psql,1,t,2023-03-03\n101,\"quoted, comma\",2,f,\n").expect("csv");
        let port = server.listen.port().to_string();
        let copy = format!("\\copy c from '{}' with (format csv)", file.display());
        let out = tokio::task::spawn_blocking(move || {
            std::process::Command::new("psql").args(["-X", "-h", "127.0.0.1", "-p", &port, "-U", "someone", "-d", "x", "-c", &copy]).output()
        })
        .await
        .expect("join")
        .expect("psql");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        assert!(String::from_utf8_lossy(&out.stdout).contains("COPY 2"), "{}", String::from_utf8_lossy(&out.stdout));
        assert_eq!(one(&client, "select s from c where k = 101").await, "quoted, comma");
    } else {
        eprintln!("SKIPPED the psql \\copy part: psql is not installed");
    }
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn begin_commit_and_rollback() {
    let Served { _guard, server, client, .. } = serve(new_db()).await;
    client.simple_query("CREATE TABLE t (k int NOT NULL)").await.expect("create");
    client.batch_execute("BEGIN; INSERT INTO t VALUES (1); INSERT INTO t VALUES (2); ROLLBACK").await.expect("rolled back");
    assert_eq!(one(&client, "select count(*) from t").await, "0");
    client.batch_execute("BEGIN; INSERT INTO t VALUES (1); INSERT INTO t VALUES (2), (3)").await.expect("open block");
    // Other connections do not see the rows before COMMIT.
    let other = connect(&server).await;
    assert_eq!(one(&other, "select count(*) from t").await, "0");
    client.batch_execute("COMMIT").await.expect("commit");
    assert_eq!(one(&other, "select count(*) from t").await, "3");
    // A failure inside the block: later statements are refused, COMMIT rolls back.
    client.batch_execute("BEGIN; INSERT INTO t VALUES (4)").await.expect("begin");
    assert!(client.simple_query("INSERT INTO t VALUES (NULL)").await.is_err());
    let e = client.simple_query("INSERT INTO t VALUES (5)").await.expect_err("aborted block");
    assert_eq!(code_of(&e), "25P02");
    client.batch_execute("COMMIT").await.expect("commit of a failed block");
    assert_eq!(one(&client, "select count(*) from t").await, "3");
    // Several tables in one transaction: all of them at COMMIT, none at ROLLBACK.
    client.simple_query("CREATE TABLE u (k int)").await.expect("create u");
    client.batch_execute("BEGIN; INSERT INTO t VALUES (6); INSERT INTO u VALUES (1), (2)").await.expect("two tables");
    assert_eq!(one(&other, "select count(*) from u").await, "0");
    client.batch_execute("COMMIT").await.expect("commit of two tables");
    assert_eq!(one(&other, "select count(*) from t").await, "4");
    assert_eq!(one(&other, "select count(*) from u").await, "2");
    client.batch_execute("BEGIN; INSERT INTO t VALUES (7); INSERT INTO u VALUES (3)").await.expect("begin");
    client.batch_execute("ROLLBACK").await.expect("rollback");
    assert_eq!(one(&other, "select count(*) from t").await, "4");
    assert_eq!(one(&other, "select count(*) from u").await, "2");
    server.shutdown().await;
}

/// The child half of `sigterm_drains_checkpoints_and_exits`: runs the server as
/// `flashscan serve` does, until a signal. Does nothing in a normal test run.
#[test]
fn child_serve_until_signal() {
    common::serve_in_child(config);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_drains_checkpoints_and_exits() {
    let (_guard, db) = new_db();
    let ChildServer { process: mut child, port, startup_log: mut log, stderr_lines: mut lines_rx } = spawn_child_server("child_serve_until_signal", &db).await;
    let client = connect_port(port).await;
    client.simple_query("CREATE TABLE s (k bigint NOT NULL)").await.expect("create");
    client.simple_query("INSERT INTO s SELECT * FROM (VALUES (1), (2), (3)) AS v(k)").await.expect("insert");
    let stmt = client.prepare("INSERT INTO s VALUES ($1)").await.expect("prepare");
    for k in 4..=200i64 {
        client.execute(&stmt, &[&k]).await.expect("insert");
    }
    // A query running when the signal comes finishes with its answer.
    let reader = connect_port(port).await;
    let running = tokio::spawn(async move { rows(&reader, "select count(*) from s a, s b, s c").await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    // SAFETY: kill(2) on the child we spawned.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGTERM) }, 0);
    let answer = running.await.expect("the running query ends");
    assert_eq!(answer, vec![vec![Some((200i64 * 200 * 200).to_string())]]);
    let started = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break s;
        }
        assert!(started.elapsed() < Duration::from_secs(60), "the server did not stop");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    while let Ok(line) = lines_rx.try_recv() {
        log.push(line);
    }
    let log = log.join("\n");
    assert!(status.success(), "exit status {status}: {log}");
    assert!(log.contains("checkpoint: 200 rows"), "{log}");
    assert!(!db.join(flashscan_server::ownership::SERVE_INFO_FILE_NAME).exists(), "the serve info file is removed");
    // No new connection after the signal; the rows are in pages, nothing left to replay.
    let mut cfg = tokio_postgres::Config::new();
    cfg.host("127.0.0.1").port(port).user("late").dbname("x").connect_timeout(Duration::from_secs(2));
    assert!(cfg.connect(NoTls).await.is_err(), "the server no longer accepts");
    assert_eq!(flashscan_write::unflushed_rows(&db, "s").expect("unflushed"), 0);
    assert_eq!(reopened(&db, "select count(*), sum(k) from s").await, vec![vec!["200".to_string(), (200 * 201 / 2).to_string()]]);
}

/// `flashscan serve`'s start with the removed FLASHSCAN_COMMIT_MODE set (any value, even
/// `hybrid`, the one mode left) or a FLASHSCAN_ON_TASK_MAX that is no count: refused before
/// anything is opened, with one line naming the variable (the child prints it after "child
/// server failed: " and exits 1, as `flashscan serve` prints it after "flashscan serve: "),
/// no "listening", the database not taken (no serve info file). Unset, the same child
/// serves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn removed_commit_mode_or_bad_bound_stops_the_start() {
    let (_guard, db) = new_db();
    const SWITCHES: [&str; 2] = ["FLASHSCAN_COMMIT_MODE", "FLASHSCAN_ON_TASK_MAX"];
    let refused = [
        ("FLASHSCAN_COMMIT_MODE", "inline", "this switch was removed; hybrid is the only commit mode now"),
        ("FLASHSCAN_COMMIT_MODE", "task", "this switch was removed; hybrid is the only commit mode now"),
        ("FLASHSCAN_COMMIT_MODE", "hybrid", "this switch was removed; hybrid is the only commit mode now"),
        ("FLASHSCAN_ON_TASK_MAX", "eight", "expected a count of statements"),
    ];
    for (name, value, why) in refused {
        let out = common::run_child_server("child_serve_until_signal", &db, &[(name, value)], &SWITCHES);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{name}={value}: {stderr}");
        let failed: Vec<&str> = stderr.lines().filter(|l| l.starts_with("child server failed: ")).collect();
        let prefix = format!("child server failed: {name}={value:?}: {why}");
        assert!(failed.len() == 1 && failed[0].starts_with(&prefix), "one line starting {prefix:?}: {stderr}");
        assert!(!stderr.contains("listening on"), "{stderr}");
        assert!(!db.join(flashscan_server::ownership::SERVE_INFO_FILE_NAME).exists(), "{name}={value}: the database was taken");
    }
    // Neither set (as in this test process): the server starts on the same database and
    // takes writes.
    let ChildServer { process: mut child, port, .. } = spawn_child_server("child_serve_until_signal", &db).await;
    let client = connect_port(port).await;
    client.simple_query("CREATE TABLE s (k bigint NOT NULL)").await.expect("create");
    assert_eq!(tag(&client, "INSERT INTO s VALUES (1), (2)").await, 2);
    child.kill().expect("kill the child server");
    let _ = child.wait();
}

async fn try_password(port: u16, password: Option<&str>) -> Result<Client, tokio_postgres::Error> {
    common::try_connect(port, "alice", "x", password).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scram_and_cleartext_passwords_and_no_public_address_without_one() {
    use flashscan_server::startup::PasswordAuth;
    let (guard, db) = new_db();
    // Anything but loopback needs a password file: refused before listening.
    let mut public = config(&db);
    public.listen = Some("0.0.0.0:0".parse().expect("addr"));
    let refused = flashscan_server::start(public).await.err().expect("public address without a password").to_string();
    assert!(refused.contains("--password-file"), "{refused}");
    let pw = guard.path().join("password");
    std::fs::write(&pw, "p\u{e9}ncil s3cret\n").expect("password file");
    for kind in [PasswordAuth::ScramSha256, PasswordAuth::Cleartext] {
        let mut c = config(&db);
        c.password_file = Some(pw.clone());
        c.password_auth = kind;
        let server = flashscan_server::start(c).await.expect("start");
        let port = server.listen.port();
        let e = try_password(port, Some("wrong")).await.err().expect("wrong password");
        assert_eq!(code_of(&e), "28P01", "{kind:?}: {e}");
        assert!(try_password(port, None).await.is_err(), "{kind:?}: no password");
        let ok = try_password(port, Some("p\u{e9}ncil s3cret")).await.unwrap_or_else(|e| panic!("{kind:?}: {e}"));
        assert_eq!(rows(&ok, "select 7").await, vec![vec![Some("7".to_string())]]);
        server.shutdown().await;
    }
    // psql (libpq) speaks SCRAM too.
    if std::process::Command::new("psql").arg("--version").output().is_ok() {
        let mut c = config(&db);
        c.password_file = Some(pw.clone());
        let server = flashscan_server::start(c).await.expect("start");
        let port = server.listen.port().to_string();
        let out = tokio::task::spawn_blocking(move || {
            std::process::Command::new("psql")
                .args(["-X", "-h", "127.0.0.1", "-p", &port, "-U", "bob", "-d", "x", "-Atc", "select 8"])
                .env("PGPASSWORD", "p\u{e9}ncil s3cret")
                .output()
        })
        .await
        .expect("join")
        .expect("psql");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "8");
        server.shutdown().await;
    }
}

/// READ COMMITTED's one snapshot per statement: every transaction inserts one row into `a`
/// and one into `b`, so no statement may see their counts differ. Before statements read a
/// snapshot (each table's delta was read when its scan was planned), 196 of 8,764 answers
/// here were -1: one statement saw half of a committed transaction.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_statement_sees_each_transaction_whole() {
    let Served { _guard, db: _, server, client } = serve(new_db()).await;
    client.batch_execute("CREATE TABLE a (id bigint NOT NULL) WITH (partitions = 2); CREATE TABLE b (id bigint NOT NULL) WITH (partitions = 2)").await.expect("create");
    let until = Instant::now() + Duration::from_secs(3);
    let mut writers = Vec::new();
    for w in 0..4i64 {
        let client = connect(&server).await;
        writers.push(tokio::spawn(async move {
            let mut i = 0i64;
            while Instant::now() < until {
                let id = w * 1_000_000 + i;
                client.batch_execute(&format!("BEGIN; INSERT INTO a VALUES ({id}); INSERT INTO b VALUES ({id}); COMMIT")).await.expect("transaction");
                i += 1;
            }
            i
        }));
    }
    let mut readers = Vec::new();
    for _ in 0..2 {
        let client = connect(&server).await;
        readers.push(tokio::spawn(async move {
            let (mut answers, mut torn) = (0u64, Vec::new());
            while Instant::now() < until {
                let difference = one(&client, "SELECT (SELECT count(*) FROM a) - (SELECT count(*) FROM b)").await;
                answers += 1;
                if difference != "0" {
                    torn.push(difference);
                }
            }
            (answers, torn)
        }));
    }
    let mut committed = 0;
    for w in writers {
        committed += w.await.expect("writer");
    }
    let mut answers = 0;
    for r in readers {
        let (n, torn) = r.await.expect("reader");
        answers += n;
        assert!(torn.is_empty(), "{} of {n} answers saw half a transaction: {:?}", torn.len(), &torn[..torn.len().min(5)]);
    }
    assert!(committed > 20 && answers > 20, "too little ran to tell: {committed} transactions, {answers} answers");
    assert_eq!(one(&client, "SELECT count(*) FROM a").await, committed.to_string());
    assert_eq!(one(&client, "SELECT count(*) FROM b").await, committed.to_string());
    server.shutdown().await;
}

/// UPDATE and DELETE answer PostgreSQL's tags with the rows changed, and a reader beside a
/// stream of transfers always sees the total it started with: each transfer takes 1 from
/// one row and adds it to another in one transaction (both UPDATEs), so a statement that
/// saw half of one would see a total off by one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transfers_keep_the_total_for_every_reader() {
    let Served { _guard, db, server, client } = serve(new_db()).await;
    client.batch_execute("CREATE TABLE acct (id bigint NOT NULL, balance bigint NOT NULL) WITH (partitions = 2)").await.expect("create");
    client.batch_execute("INSERT INTO acct SELECT value, 100 FROM generate_series(1, 20)").await.expect("insert");
    let changed = client.execute("UPDATE acct SET balance = balance + 0 WHERE id <= 5", &[]).await.expect("update");
    assert_eq!(changed, 5, "UPDATE answers the rows it changed");
    let until = Instant::now() + Duration::from_secs(3);
    let mut writers = Vec::new();
    for w in 0..2i64 {
        let client = connect(&server).await;
        writers.push(tokio::spawn(async move {
            let mut i = 0i64;
            while Instant::now() < until {
                let (from, to) = ((w * 7 + i) % 20 + 1, (w * 3 + i * 5 + 1) % 20 + 1);
                if from != to {
                    client
                        .batch_execute(&format!("BEGIN; UPDATE acct SET balance = balance - 1 WHERE id = {from}; UPDATE acct SET balance = balance + 1 WHERE id = {to}; COMMIT"))
                        .await
                        .expect("transfer");
                }
                i += 1;
            }
            i
        }));
    }
    let reader = {
        let client = connect(&server).await;
        tokio::spawn(async move {
            let (mut answers, mut wrong) = (0u64, Vec::new());
            while Instant::now() < until {
                let total = one(&client, "SELECT sum(balance) FROM acct").await;
                answers += 1;
                if total != "2000" {
                    wrong.push(total);
                }
            }
            (answers, wrong)
        })
    };
    let mut transfers = 0;
    for w in writers {
        transfers += w.await.expect("writer");
    }
    let (answers, wrong) = reader.await.expect("reader");
    assert!(wrong.is_empty(), "{} of {answers} totals were not 2000: {:?}", wrong.len(), &wrong[..wrong.len().min(5)]);
    assert!(transfers > 10 && answers > 10, "too little ran to tell: {transfers} transfers, {answers} answers");
    assert_eq!(one(&client, "SELECT count(*) FROM acct").await, "20", "an UPDATE replaces rows, it adds none");
    let deleted = client.execute("DELETE FROM acct WHERE id > 15", &[]).await.expect("delete");
    assert_eq!(deleted, 5);
    let left = one(&client, "SELECT count(*) FROM acct").await;
    server.shutdown().await;
    assert_eq!(left, "15");
    // Reopened (the log replayed): the same rows, the same total of what is left.
    assert_eq!(reopened(&db, "SELECT count(*) FROM acct").await, vec![vec!["15".to_string()]]);
}

/// READ COMMITTED: concurrent UPDATEs of one row both succeed, one after the other — the
/// second waits for the first's transaction, then reads the row as it committed it — so
/// no increment is lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_updates_of_one_row_lose_no_increment() {
    let Served { _guard, db: _, server, client } = serve(new_db()).await;
    client.batch_execute("CREATE TABLE c (id bigint NOT NULL, n bigint NOT NULL); INSERT INTO c VALUES (1, 0), (2, 0)").await.expect("setup");
    // What flashscan does not provide is refused, never taken and ignored: SERIALIZABLE
    // (REPEATABLE READ is tests/own_writes.rs').
    for sql in ["BEGIN ISOLATION LEVEL SERIALIZABLE", "SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL SERIALIZABLE"] {
        let e = client.batch_execute(sql).await.expect_err(sql);
        assert_eq!(common::error_of(&e).split(':').next(), Some("0A000"), "{sql}: {}", common::error_of(&e));
    }
    client.batch_execute("SET synchronous_commit = on; BEGIN ISOLATION LEVEL READ COMMITTED; COMMIT").await.expect("what flashscan provides");
    let mut workers = Vec::new();
    for _ in 0..4 {
        let client = connect(&server).await;
        workers.push(tokio::spawn(async move {
            for _ in 0..25 {
                client.batch_execute("UPDATE c SET n = n + 1 WHERE id = 1").await.expect("increment");
                client.batch_execute("BEGIN; UPDATE c SET n = n + 1 WHERE id = 2; COMMIT").await.expect("increment in a block");
            }
        }));
    }
    for w in workers {
        w.await.expect("worker");
    }
    assert_eq!(rows(&client, "SELECT n FROM c ORDER BY id").await, vec![vec![Some("100".to_string())], vec![Some("100".to_string())]]);
    server.shutdown().await;
}

/// Row locks (crates/write table_lock.rs): while one transaction holds a row it updated,
/// another updates and deletes other rows of the same keyed table at once (before, the
/// table's change lock made it wait); a writer of the held row waits, then changes the
/// version the first one committed (no lost update) or finds it gone (UPDATE 0); an UPDATE
/// that changes a key to a free one does not wait (keys are locked one by one); an INSERT
/// of the key the holder deletes waits for it, then goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn row_locks_let_writers_of_other_rows_go_on() {
    let Served { _guard, db, server, client } = serve(new_db()).await;
    client.batch_execute("CREATE TABLE acct (id bigint PRIMARY KEY, n bigint NOT NULL); INSERT INTO acct SELECT value, 0 FROM generate_series(1, 10)").await.expect("setup");
    let holder = connect(&server).await;
    holder.batch_execute("BEGIN; UPDATE acct SET n = n + 1 WHERE id = 1; DELETE FROM acct WHERE id = 9; DELETE FROM acct WHERE id = 7").await.expect("holds rows 1, 7 and 9");
    // Other rows: answered while the holder is open (a wait would pass the timeout).
    let other = connect(&server).await;
    let quick = async {
        assert_eq!(other.execute("UPDATE acct SET n = n + 5 WHERE id = 2", &[]).await.expect("other row"), 1);
        other.batch_execute("BEGIN; UPDATE acct SET n = n + 5 WHERE id = 3; DELETE FROM acct WHERE id = 4; COMMIT").await.expect("other rows in a block");
        assert_eq!(other.execute("UPDATE acct SET id = 100 WHERE id = 10", &[]).await.expect("key change to a free key"), 1);
    };
    tokio::time::timeout(Duration::from_secs(5), quick).await.expect("writers of other rows do not wait for the holder");
    // The held rows: each writer waits for the holder, then sees what it committed.
    let waiter = |sql: &'static str| {
        let port = server.listen.port();
        tokio::spawn(async move {
            let c = common::connect_port(port).await;
            let started = Instant::now();
            let n = c.execute(sql, &[]).await.expect(sql);
            (n, started.elapsed())
        })
    };
    let increment = waiter("UPDATE acct SET n = n + 10 WHERE id = 1");
    let update_deleted = waiter("UPDATE acct SET n = n + 10 WHERE id = 9");
    // Key 7, not 9: an UPDATE waiting for a row reads its statement again once the row is
    // gone (table_lock.rs), and would then find a new row 9 if this insert had won the race.
    let reinsert = waiter("INSERT INTO acct VALUES (7, 0)");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!increment.is_finished() && !update_deleted.is_finished() && !reinsert.is_finished(), "writers of held rows, and an insert of a key being deleted, wait");
    holder.batch_execute("COMMIT").await.expect("commit");
    let (n1, waited1) = increment.await.expect("increment");
    let (n9, _) = update_deleted.await.expect("update of the deleted row");
    let (inserted, waited_insert) = reinsert.await.expect("insert of the deleted key");
    assert!(waited1 >= Duration::from_millis(250) && waited_insert >= Duration::from_millis(250), "they waited for the holder: {waited1:?}, {waited_insert:?}");
    assert_eq!((n1, n9, inserted), (1, 0, 1), "the increment applied to the committed version, the deleted row is gone, its key is free again");
    let all = "SELECT id, n FROM acct ORDER BY id";
    let expected: Vec<Vec<Option<String>>> = [(1, 11), (2, 5), (3, 5), (5, 0), (6, 0), (7, 0), (8, 0), (100, 0)].iter().map(|(i, n)| vec![Some(i.to_string()), Some(n.to_string())]).collect();
    assert_eq!(rows(&client, all).await, expected);
    server.shutdown().await;
    assert_eq!(reopened(&db, "SELECT sum(id), sum(n) FROM acct").await, vec![vec!["132".to_string(), "21".to_string()]]);
}

/// Row locks beside checkpoints: clients increment a few hot rows of a keyed table (one
/// row per statement, and two rows in ascending order per block) while checkpoints move
/// the rows they hold and wait for from the delta into pages (renaming their locks). No
/// increment is lost and no row appears twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn row_locks_hold_across_checkpoints() {
    let Served { _guard, db: _, server, client } = serve(new_db()).await;
    client.batch_execute("CREATE TABLE hot (id bigint PRIMARY KEY, n bigint NOT NULL); INSERT INTO hot SELECT value, 0 FROM generate_series(1, 5)").await.expect("setup");
    let until = Instant::now() + Duration::from_secs(3);
    let mut workers = Vec::new();
    for w in 0..4u64 {
        let port = server.listen.port();
        workers.push(tokio::spawn(async move {
            let c = common::connect_port(port).await;
            let mut done = 0u64;
            let mut i = w;
            while Instant::now() < until {
                let (a, b) = (i % 5 + 1, (i * 3 + 1) % 5 + 1);
                c.batch_execute(&format!("UPDATE hot SET n = n + 1 WHERE id = {a}")).await.expect("one row");
                let (lo, hi) = (a.min(b), a.max(b));
                if lo != hi {
                    c.batch_execute(&format!("BEGIN; UPDATE hot SET n = n + 1 WHERE id = {lo}; UPDATE hot SET n = n + 1 WHERE id = {hi}; COMMIT")).await.expect("two rows");
                    done += 2;
                }
                done += 1;
                i += 1;
            }
            done
        }));
    }
    let checkpoints = {
        let shared = server.shared.clone();
        tokio::task::spawn_blocking(move || {
            let write = shared.database.committer.as_ref().expect("committer").write_path();
            let mut n = 0;
            while Instant::now() < until {
                write.checkpoint(&flashscan_write::CheckpointOptions::default()).expect("checkpoint");
                n += 1;
                std::thread::sleep(Duration::from_millis(20));
            }
            n
        })
    };
    let mut increments = 0;
    for w in workers {
        increments += w.await.expect("worker");
    }
    let checkpoints = checkpoints.await.expect("checkpoints");
    assert!(checkpoints >= 5 && increments >= 50, "too little ran to tell: {checkpoints} checkpoints, {increments} increments");
    assert_eq!(rows(&client, "SELECT count(*), count(distinct id), sum(n) FROM hot").await, vec![vec![Some("5".into()), Some("5".into()), Some(increments.to_string())]]);
    server.shutdown().await;
}

/// Two transactions that each changed one table and wait to change the other's: one of
/// them fails with 40P01 (deadlock detected) and the other goes on once it rolls back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deadlock_fails_one_transaction_with_40p01() {
    let Served { _guard, db: _, server, client } = serve(new_db()).await;
    client.batch_execute("CREATE TABLE da (id bigint NOT NULL); CREATE TABLE db (id bigint NOT NULL); INSERT INTO da VALUES (1); INSERT INTO db VALUES (1)").await.expect("setup");
    let (one_client, other) = (connect(&server).await, connect(&server).await);
    one_client.batch_execute("BEGIN; DELETE FROM da WHERE id = 1").await.expect("first holds da");
    other.batch_execute("BEGIN; DELETE FROM db WHERE id = 1").await.expect("second holds db");
    let first = tokio::spawn(async move {
        let r = one_client.batch_execute("DELETE FROM db WHERE id = 1").await.map_err(|e| common::error_of(&e));
        let end = if r.is_ok() { "COMMIT" } else { "ROLLBACK" };
        one_client.batch_execute(end).await.expect("end");
        r
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    let second = other.batch_execute("DELETE FROM da WHERE id = 1").await.map_err(|e| common::error_of(&e));
    let end = if second.is_ok() { "COMMIT" } else { "ROLLBACK" };
    other.batch_execute(end).await.expect("end");
    let first = first.await.expect("first");
    let failed: Vec<&String> = [&first, &second].into_iter().filter_map(|r| r.as_ref().err()).collect();
    assert_eq!(failed.len(), 1, "exactly one of them fails: {first:?} / {second:?}");
    assert!(failed[0].contains("40P01") || failed[0].contains("deadlock"), "{}", failed[0]);
    // The one that went on deleted both rows.
    assert_eq!(one(&client, "SELECT (SELECT count(*) FROM da) + (SELECT count(*) FROM db)").await, "0");
    server.shutdown().await;
}

/// A primary key over the wire: a repeated key fails with 23505 naming the constraint and
/// the key, in every write path (INSERT, UPDATE of the key, COPY); two clients inserting
/// the same key at once: the second waits for the first, then fails when it commits or
/// goes on when it rolls back (PostgreSQL's behaviour); inserters of different keys do not
/// wait for each other; an insert of a key whose delete rolls back fails.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_primary_key_holds_for_every_writer() {
    let Served { _guard, db: _, server, client } = serve(new_db()).await;
    client.batch_execute("CREATE TABLE k (id bigint PRIMARY KEY, v text); INSERT INTO k VALUES (1, 'a'), (2, 'b')").await.expect("setup");
    for sql in ["INSERT INTO k VALUES (1, 'again')", "INSERT INTO k VALUES (3, 'x'), (3, 'y')", "UPDATE k SET id = 2 WHERE id = 1"] {
        let e = client.batch_execute(sql).await.expect_err(sql);
        let text = common::error_of(&e);
        assert!(text.starts_with("23505") && text.contains("k_pkey") && text.contains("(id)="), "{sql}: {text}");
    }
    assert_eq!(one(&client, "SELECT count(*) FROM k").await, "2", "nothing of a refused statement was written");
    // An UPDATE that keeps the key passes the check (its old version does not collide).
    assert_eq!(tag(&client, "UPDATE k SET v = 'c' WHERE id = 2").await, 1);
    // The key in PostgreSQL's catalog, where psql's \d and SQLAlchemy look for it.
    assert_eq!(one(&client, "SELECT conname || ':' || contype FROM pg_catalog.pg_constraint").await, "k_pkey:p");
    assert_eq!(one(&client, "SELECT pg_get_indexdef(indexrelid) FROM pg_catalog.pg_index").await.contains("(id)"), true);

    let (first, second) = (connect(&server).await, connect(&server).await);
    first.batch_execute("BEGIN; INSERT INTO k VALUES (10, 'first')").await.expect("first inserts 10");
    let waiter = tokio::spawn(async move {
        let started = Instant::now();
        let r = second.batch_execute("INSERT INTO k VALUES (10, 'second')").await.map_err(|e| common::error_of(&e));
        (r, started.elapsed(), second)
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    first.batch_execute("COMMIT").await.expect("first commits");
    let (r, waited, second) = waiter.await.expect("second");
    let e = r.expect_err("the second insert of 10 fails once the first commits");
    assert!(e.starts_with("23505"), "{e}");
    assert!(waited >= Duration::from_millis(250), "the second waited for the first: {waited:?}");

    first.batch_execute("BEGIN; INSERT INTO k VALUES (11, 'first')").await.expect("first inserts 11");
    let waiter = tokio::spawn(async move { second.batch_execute("INSERT INTO k VALUES (11, 'second')").await.map_err(|e| common::error_of(&e)) });
    tokio::time::sleep(Duration::from_millis(300)).await;
    first.batch_execute("ROLLBACK").await.expect("first rolls back");
    waiter.await.expect("second").expect("the second insert of 11 goes on once the first rolls back");
    assert_eq!(one(&client, "SELECT v FROM k WHERE id = 11").await, "second");
    assert_eq!(one(&client, "SELECT count(*) FROM k").await, "4");

    // Different keys: the second commits while the first is open.
    let second = connect(&server).await;
    first.batch_execute("BEGIN; INSERT INTO k VALUES (12, 'first')").await.expect("first inserts 12");
    tokio::time::timeout(Duration::from_secs(5), second.batch_execute("INSERT INTO k VALUES (13, 'second'); INSERT INTO k VALUES (14, 'second')"))
        .await
        .expect("an inserter of other keys does not wait")
        .expect("13 and 14");
    // A key the open transaction deletes: an inserter waits, and fails when the delete rolls back.
    first.batch_execute("DELETE FROM k WHERE id = 2").await.expect("first deletes 2");
    let waiter = tokio::spawn(async move { second.batch_execute("INSERT INTO k VALUES (2, 'second')").await.map_err(|e| common::error_of(&e)) });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!waiter.is_finished(), "an insert of a key being deleted waits");
    first.batch_execute("ROLLBACK").await.expect("first rolls back");
    let e = waiter.await.expect("second").expect_err("2 is still there");
    assert!(e.starts_with("23505"), "{e}");
    assert_eq!(one(&client, "SELECT count(*) FROM k").await, "6");
    server.shutdown().await;
}

/// A prepared statement's plan is made at Parse, but every execution reads the rows
/// committed before it began (its own snapshot), not those of the Parse: here rows
/// inserted after PREPARE, by this connection and by another, and rows deleted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prepared_select_sees_rows_committed_after_prepare() {
    let Served { _guard, db: _, server, client } = serve(new_db()).await;
    client.batch_execute("CREATE TABLE p (id bigint NOT NULL, v bigint) WITH (partitions = 2)").await.expect("create");
    let count = client.prepare("SELECT count(*) FROM p").await.expect("prepare count");
    let by_key = client.prepare("SELECT v FROM p WHERE id = $1").await.expect("prepare by key");
    let n = |rows: Vec<tokio_postgres::Row>| rows[0].get::<_, i64>(0);
    assert_eq!(n(client.query(&count, &[]).await.expect("count")), 0);
    assert!(client.query(&by_key, &[&7i64]).await.expect("by key").is_empty());
    client.batch_execute("INSERT INTO p SELECT value, value * 10 FROM generate_series(1, 100)").await.expect("insert");
    assert_eq!(n(client.query(&count, &[]).await.expect("count")), 100);
    assert_eq!(n(client.query(&by_key, &[&7i64]).await.expect("by key")), 70);
    let other = connect(&server).await;
    other.batch_execute("INSERT INTO p VALUES (1000, 5); DELETE FROM p WHERE id = 7").await.expect("other writes");
    assert_eq!(n(client.query(&count, &[]).await.expect("count")), 100);
    assert!(client.query(&by_key, &[&7i64]).await.expect("by key").is_empty(), "a deleted row is not read by a prepared plan");
    assert_eq!(n(client.query(&by_key, &[&1000i64]).await.expect("by key")), 5);
    server.shutdown().await;
}

/// A prepared statement whose table was dropped and made again is planned again: the new
/// table's rows when its columns are the same, PostgreSQL's "cached plan must not change
/// result type" (0A000) when they are not, and the planner's error when it is gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prepared_statement_is_planned_again_after_drop_and_create() {
    let Served { _guard, db: _, server, client } = serve(new_db()).await;
    client.batch_execute("CREATE TABLE r (id bigint NOT NULL, v bigint); INSERT INTO r VALUES (1, 10), (2, 20)").await.expect("create");
    let by_key = client.prepare("SELECT v FROM r WHERE id = $1").await.expect("prepare");
    let all = client.prepare("SELECT * FROM r").await.expect("prepare all");
    let insert = client.prepare("INSERT INTO r VALUES ($1, $2)").await.expect("prepare insert");
    assert_eq!(client.query(&by_key, &[&2i64]).await.expect("by key")[0].get::<_, i64>(0), 20);

    client.batch_execute("DROP TABLE r; CREATE TABLE r (id bigint NOT NULL, v bigint); INSERT INTO r VALUES (2, 200)").await.expect("again");
    assert_eq!(client.query(&by_key, &[&2i64]).await.expect("by key after drop and create")[0].get::<_, i64>(0), 200);
    client.execute(&insert, &[&3i64, &300i64]).await.expect("prepared insert into the new table");
    assert_eq!(client.query(&by_key, &[&3i64]).await.expect("by key")[0].get::<_, i64>(0), 300);
    assert_eq!(client.query(&all, &[]).await.expect("all").len(), 2);

    // Another column type: the plan would change its result's type.
    client.batch_execute("DROP TABLE r; CREATE TABLE r (id bigint NOT NULL, v text); INSERT INTO r VALUES (2, 'two')").await.expect("text column");
    let e = client.query(&by_key, &[&2i64]).await.expect_err("result type changed");
    assert_eq!(code_of(&e), "0A000", "{}", message_of(&e));
    assert!(message_of(&e).contains("cached plan must not change result type"), "{}", message_of(&e));
    // The same text prepared now plans against the table as it is.
    let fresh = client.prepare("SELECT v FROM r WHERE id = $1").await.expect("prepare again");
    assert_eq!(client.query(&fresh, &[&2i64]).await.expect("fresh")[0].get::<_, String>(0), "two");

    client.batch_execute("DROP TABLE r").await.expect("drop");
    let e = client.query(&fresh, &[&2i64]).await.expect_err("table gone");
    assert!(message_of(&e).contains('r'), "{}", message_of(&e));
    assert!(client.query(&all, &[]).await.is_err(), "a statement over a dropped table fails");
    server.shutdown().await;
}

/// A constant row's plan is kept between executions (plan_reuse.rs), but only where running
/// it again answers what planning it again would: `now()` moves on (the planner folds it
/// into a literal), `random()` differs, and the answers of kept plans are the statements'.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kept_constant_plans_answer_like_fresh_ones() {
    let Served { _guard, db: _, server, client } = serve(new_db()).await;
    for _ in 0..3 {
        assert_eq!(one(&client, "SELECT 1").await, "1");
        assert_eq!(one(&client, "SELECT 2 + 3").await, "5");
        assert_eq!(one(&client, "SELECT 'a' || 'b'").await, "ab");
    }
    let prepared = client.prepare("SELECT 40 + 2").await.expect("prepare");
    for _ in 0..3 {
        assert_eq!(client.query(&prepared, &[]).await.expect("prepared")[0].get::<_, i64>(0), 42);
    }
    let with_param = client.prepare("SELECT $1::text || '!'").await.expect("prepare with a parameter");
    for k in ["a", "b", "c"] {
        assert_eq!(client.query(&with_param, &[&k]).await.expect("with a parameter")[0].get::<_, String>(0), format!("{k}!"));
    }
    for sql in ["SELECT now()::text", "SELECT random()::text"] {
        let first = one(&client, sql).await;
        tokio::time::sleep(Duration::from_millis(5)).await;
        let second = one(&client, sql).await;
        assert_ne!(first, second, "{sql} answered the same twice: a kept plan froze it");
        let p = client.prepare(sql).await.expect("prepare");
        let a: String = client.query(&p, &[]).await.expect("a")[0].get(0);
        tokio::time::sleep(Duration::from_millis(5)).await;
        let b: String = client.query(&p, &[]).await.expect("b")[0].get(0);
        assert_ne!(a, b, "{sql} prepared answered the same twice");
    }
    // A table's rows are never kept: the count follows the inserts.
    client.batch_execute("CREATE TABLE c (id bigint NOT NULL)").await.expect("create");
    for n in 1..=3 {
        client.batch_execute(&format!("INSERT INTO c VALUES ({n})")).await.expect("insert");
        assert_eq!(one(&client, "SELECT count(*) FROM c").await, n.to_string());
    }
    server.shutdown().await;
}

/// `synchronous_commit` (issue 31): SET, SET LOCAL inside a block, RESET, SHOW, and the
/// startup packet's options; `off` commits are acknowledged before their flush, visible at
/// once, and durable after a clean shutdown; bad values and a SET LOCAL outside a block are
/// refused (22023), never ignored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn synchronous_commit_off_set_local_reset_show_and_startup_options() {
    let Served { _guard, db, server, client } = serve(new_db()).await;
    client.batch_execute("CREATE TABLE s (id bigint NOT NULL, note text)").await.expect("create");
    assert_eq!(one(&client, "SHOW synchronous_commit").await, "on");
    client.batch_execute("SET synchronous_commit = off").await.expect("off");
    assert_eq!(one(&client, "SHOW synchronous_commit").await, "off");
    for i in 0..20 {
        assert_eq!(tag(&client, &format!("INSERT INTO s VALUES ({i}, 'delayed')")).await, 1);
    }
    // Visible at once, to this connection and to another.
    assert_eq!(one(&client, "SELECT count(*) FROM s").await, "20");
    let other = connect(&server).await;
    assert_eq!(one(&other, "SELECT count(*) FROM s").await, "20");
    assert_eq!(one(&other, "SHOW synchronous_commit").await, "on", "a setting of one connection");
    // SET LOCAL: the block's commit only.
    client.batch_execute("BEGIN; SET LOCAL synchronous_commit TO on; INSERT INTO s VALUES (100, 'strict');").await.expect("block");
    assert_eq!(one(&client, "SHOW synchronous_commit").await, "on");
    client.batch_execute("COMMIT").await.expect("commit");
    assert_eq!(one(&client, "SHOW synchronous_commit").await, "off", "SET LOCAL ends with its block");
    client.batch_execute("RESET synchronous_commit").await.expect("reset");
    assert_eq!(one(&client, "SHOW synchronous_commit").await, "on");
    for (sql, says) in [("SET synchronous_commit = sometimes", "use on or off"), ("SET LOCAL synchronous_commit = off", "outside a transaction block")] {
        let e = client.batch_execute(sql).await.expect_err(sql);
        assert_eq!(code_of(&e), "22023", "{sql}: {}", message_of(&e));
        assert!(message_of(&e).contains(says), "{sql}: {}", message_of(&e));
    }
    // The startup packet's options (what PGOPTIONS sends).
    let mut cfg = tokio_postgres::Config::new();
    cfg.host("127.0.0.1").port(server.listen.port()).user("writer").dbname("flashscan").options("-c synchronous_commit=off");
    let (started_off, connection) = cfg.connect(tokio_postgres::NoTls).await.expect("connect with options");
    tokio::spawn(async move {
        let _ = connection.await;
    });
    assert_eq!(one(&started_off, "SHOW synchronous_commit").await, "off");
    assert_eq!(tag(&started_off, "INSERT INTO s VALUES (200, 'delayed, from the options')").await, 1);
    started_off.batch_execute("SET synchronous_commit = on; RESET synchronous_commit").await.expect("reset");
    assert_eq!(one(&started_off, "SHOW synchronous_commit").await, "off", "RESET returns to the connection's start value");
    cfg.options("-c synchronous_commit=maybe");
    assert!(cfg.connect(tokio_postgres::NoTls).await.is_err(), "a bad startup value refuses the connection");
    // Every other `-c` option is applied as SET applies it, never dropped: a setting SET
    // takes is in force, one SET refuses refuses the connection.
    cfg.options("-c statement_timeout=1234 -c flashscan.index_lookups=false");
    let (with_options, connection) = cfg.connect(tokio_postgres::NoTls).await.expect("connect with options");
    tokio::spawn(async move {
        let _ = connection.await;
    });
    assert_eq!(one(&with_options, "SHOW statement_timeout").await, "1234ms");
    assert_eq!(one(&with_options, "SHOW flashscan.index_lookups").await, "false");
    drop(with_options);
    for refused in ["-c datafusion.execution.batch_size=1", "-c statement_timeout=soon", "-c flashscan.no_such_switch=1"] {
        cfg.options(refused);
        assert!(cfg.connect(tokio_postgres::NoTls).await.is_err(), "{refused}: refused, not ignored");
    }
    drop((client, other, started_off));
    server.shutdown().await;
    // A clean shutdown flushes the delayed commits: all 22 rows after the log's replay.
    assert_eq!(reopened(&db, "SELECT count(*) FROM s").await, vec![vec!["22".to_string()]]);
}
