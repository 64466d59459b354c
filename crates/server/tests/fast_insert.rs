//! The prepared-INSERT fast path (`crates/server/src/fast_insert.rs`) against the SQL path:
//! two servers on two databases made alike, one with the fast path and one without
//! (`ServerConfig::fast_insert = false`, every INSERT planned and run by DataFusion); the
//! same statements to both; the same rows and the same errors back. Then many prepared
//! inserters at once, durable after a reopen, and a kill -9 that loses no acknowledged
//! commit. The oracle for rows is the other server and the values the test generated;
//! durability is read back by `flashscan sql`'s session, independent of the server.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use flashscan_server::ServerConfig;
use tokio_postgres::types::{ToSql, Type};
use tokio_postgres::{Client, SimpleQueryMessage};

mod common;
use common::{connect, connect_port, error_of, init_db, reopened, simple_rows as rows, spawn_child_server, spawn_inserters, InsertParams};

fn config(db: &Path, fast_insert: bool) -> ServerConfig {
    let mut c = common::config(db);
    c.fast_insert = fast_insert;
    c
}

/// A simple-protocol statement's row count.
async fn simple_count(client: &Client, sql: &str) -> Result<u64, tokio_postgres::Error> {
    let messages = client.simple_query(sql).await?;
    Ok(messages.into_iter().find_map(|m| match m {
        SimpleQueryMessage::CommandComplete(n) => Some(n),
        _ => None,
    }).unwrap_or(u64::MAX))
}


const ALL_TYPES: &str =
    "CREATE TABLE all_types (k bigint NOT NULL, i int, f double, d decimal(12,2), w decimal(30,6), day date, ts timestamp, s text, b boolean) WITH (partitions = 2)";

/// The same statements, in the same order, to one server; what each answered (row count
/// or "SQLSTATE: message").
async fn workload(client: &Client) -> Vec<String> {
    let mut answers = Vec::new();
    let mut record = |r: Result<u64, tokio_postgres::Error>| answers.push(r.map(|n| n.to_string()).unwrap_or_else(|e| error_of(&e)));
    client.simple_query(ALL_TYPES).await.expect("create");
    // Every column a parameter; decimals sent as text (cast by the server), NULLs spread.
    let all = client
        .prepare_typed(
            "INSERT INTO all_types VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
            &[Type::INT8, Type::INT4, Type::FLOAT8, Type::TEXT, Type::TEXT, Type::DATE, Type::TIMESTAMP, Type::TEXT, Type::BOOL],
        )
        .await
        .expect("prepare");
    let epoch = chrono::NaiveDate::from_ymd_opt(1999, 12, 31).expect("date");
    for k in 0..40i64 {
        let i = (k % 5 != 0).then_some((k * 7 - 100) as i32);
        let f = (k % 6 != 0).then_some(k as f64 / 3.0);
        let d = (k % 4 != 0).then(|| format!("{}.{:02}", k * 11 - 200, k % 100));
        let w = (k % 7 != 0).then(|| format!("{}.{:06}", k * 123_456_789_012, k * 13));
        let day = (k % 3 != 0).then(|| epoch + chrono::Duration::days(k * 37));
        let ts = (k % 8 != 0).then(|| (epoch + chrono::Duration::days(k)).and_hms_micro_opt(1, 2, 3, (k * 1001) as u32).expect("ts"));
        let s = (k % 9 != 0).then(|| format!("row {k} é ' \" \\ ,"));
        let b = (k % 2 == 0).then_some(k % 4 == 0);
        let params: [&(dyn ToSql + Sync); 9] = [&k, &i, &f, &d, &w, &day, &ts, &s, &b];
        record(client.execute(&all, &params).await);
    }
    // A column list, literals and parameters mixed, two rows per execution.
    let mixed = client.prepare("INSERT INTO all_types (s, k, d) VALUES ($1, $2, 1.25), ('literal', $3, NULL)").await.expect("prepare mixed");
    for k in 100..110i64 {
        let s = format!("mixed {k}");
        record(client.execute(&mixed, &[&s, &k, &(k + 1000)]).await);
    }
    // Literal INSERTs (simple protocol).
    for sql in [
        "INSERT INTO all_types VALUES (2000, -5, 2.5e3, -12.34, 1234567.125, '2024-02-29', '2024-02-29 12:34:56.789', 'héllo', true)",
        "INSERT INTO all_types (k, s) VALUES (2001, NULL), (2002, ''), (2003, 'x')",
        "INSERT INTO all_types (k, day, ts) VALUES (2004, DATE '1970-01-01', TIMESTAMP '1969-12-31 23:59:59.999999')",
    ] {
        record(simple_count(client, sql).await);
    }
    // Errors: each must be the SQL path's, word for word.
    record(client.execute(&all, &[&None::<i64>, &None::<i32>, &None::<f64>, &None::<String>, &None::<String>, &None::<chrono::NaiveDate>, &None::<chrono::NaiveDateTime>, &None::<String>, &None::<bool>]).await);
    record(client.execute(&all, &[&1i64, &None::<i32>, &None::<f64>, &Some("12345678901.5"), &None::<String>, &None::<chrono::NaiveDate>, &None::<chrono::NaiveDateTime>, &None::<String>, &None::<bool>]).await);
    record(client.execute(&all, &[&1i64, &None::<i32>, &None::<f64>, &Some("twelve"), &None::<String>, &None::<chrono::NaiveDate>, &None::<chrono::NaiveDateTime>, &None::<String>, &None::<bool>]).await);
    record(client.execute(&mixed, &[&"null key", &None::<i64>, &7i64]).await);
    let typed_text = client.prepare_typed("INSERT INTO all_types (k, i) VALUES ($1, $2)", &[Type::INT8, Type::TEXT]).await.expect("prepare typed");
    record(client.execute(&typed_text, &[&3000i64, &"seven"]).await);
    record(client.execute(&typed_text, &[&3001i64, &"99999999999"]).await);
    for sql in [
        "INSERT INTO all_types VALUES (NULL, 1, 1, 1, 1, NULL, NULL, 'x', NULL)",
        "INSERT INTO all_types (i) VALUES (1)",
        "INSERT INTO all_types (k, i) VALUES (3002, 99999999999)",
        "INSERT INTO all_types (k, day) VALUES (3003, 'not a date')",
        "INSERT INTO all_types (k, nope) VALUES (3004, 1)",
        "INSERT INTO nowhere VALUES (1)",
    ] {
        record(simple_count(client, sql).await);
    }
    match client.prepare("INSERT INTO all_types (k, nope) VALUES ($1, $2)").await {
        Ok(_) => answers.push("prepared an unknown column".into()),
        Err(e) => answers.push(error_of(&e)),
    }
    answers
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fast_path_gives_the_sql_paths_rows_and_errors() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fast_db = init_db(dir.path(), "fast");
    let sql_db = init_db(dir.path(), "sql");
    let fast = flashscan_server::start(config(&fast_db, true)).await.expect("start fast");
    let sql = flashscan_server::start(config(&sql_db, false)).await.expect("start sql");
    let (fc, sc) = (connect(&fast).await, connect(&sql).await);
    let fast_answers = workload(&fc).await;
    let sql_answers = workload(&sc).await;
    assert_eq!(fast_answers, sql_answers, "same row counts and the same errors");
    // The oracle of the test itself: 40 + 10 x 2 + 1 + 3 + 1 rows; errors are errors.
    assert_eq!(fast_answers.iter().filter(|a| a.parse::<u64>().is_ok()).map(|a| a.parse::<u64>().unwrap_or(0)).sum::<u64>(), 65);
    for (i, a) in fast_answers.iter().enumerate().skip(53) {
        assert!(a.contains(": ") && !a.starts_with("no SQLSTATE"), "answer {i} should be a PostgreSQL error: {a}");
        assert!(!a.contains('\n'), "one line: {a}");
    }
    assert!(fast_answers[53].starts_with("23502"), "{}", fast_answers[53]);
    assert!(fast_answers[56].starts_with("23502"), "{}", fast_answers[56]);

    let all = "select k, i, f, cast(d as varchar), cast(w as varchar), cast(day as varchar), cast(ts as varchar), s, b from all_types order by k, s";
    let fast_rows = rows(&fc, all).await;
    assert_eq!(fast_rows, rows(&sc, all).await, "the same rows");
    assert_eq!(fast_rows.len(), 65);
    let row = |k: &str| fast_rows.iter().find(|r| r[0].as_deref() == Some(k)).cloned().unwrap_or_default();
    assert_eq!(row("7")[1].as_deref(), Some("-51"));
    assert_eq!(row("7")[3].as_deref(), Some("-123.07"));
    assert_eq!(row("8")[7].as_deref(), Some("row 8 é ' \" \\ ,"));
    assert_eq!(row("0")[1], None, "NULL stays NULL");
    assert_eq!(row("2000")[3].as_deref(), Some("-12.34"));
    assert_eq!(row("2000")[4].as_deref(), Some("1234567.125000"));
    assert_eq!(row("1105")[7].as_deref(), Some("literal"));
    assert_eq!(row("105")[3].as_deref(), Some("1.25"));

    let fast_count = fast.shared.database.committer.as_ref().expect("committer").counters.statements_fast_path.load(Relaxed);
    let sql_count = sql.shared.database.committer.as_ref().expect("committer").counters.statements_fast_path.load(Relaxed);
    assert!(fast_count >= 53, "the fast path took the good statements: {fast_count}");
    assert_eq!(sql_count, 0, "the SQL server never takes it");
    fast.shutdown().await;
    sql.shutdown().await;
    // Durable: the same rows reopened by the SQL session.
    let q = "select count(*), sum(k), count(i), count(d), count(w), count(day), count(ts), count(s), count(b) from all_types";
    assert_eq!(reopened(&fast_db, q).await, reopened(&sql_db, q).await);
}

/// `now()` / `CURRENT_TIMESTAMP` in VALUES (pgbench's history INSERT) takes the fast path,
/// simple and prepared, and stores each execution's own clock: between what the client
/// read before and after it, never a value frozen when the statement was prepared.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn now_in_values_takes_the_fast_path_with_each_executions_time() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = init_db(dir.path(), "db");
    let server = flashscan_server::start(config(&db, true)).await.expect("start");
    let client = connect(&server).await;
    client.simple_query("CREATE TABLE history (tid int, delta int, mtime timestamp, filler text)").await.expect("create");
    let fast = || server.shared.database.committer.as_ref().expect("committer").counters.statements_fast_path.load(Relaxed);
    let utc = || chrono::Utc::now().naive_utc().format("%Y-%m-%d %H:%M:%S%.6f").to_string();
    let taken_before = fast();
    let before = utc();
    assert_eq!(simple_count(&client, "INSERT INTO history (tid, delta, mtime) VALUES (1, -2849, CURRENT_TIMESTAMP)").await.expect("simple"), 1);
    let prepared = client.prepare("INSERT INTO history (tid, delta, mtime) VALUES ($1, $2, now())").await.expect("prepare");
    tokio::time::sleep(Duration::from_millis(20)).await;
    let between = utc();
    client.execute(&prepared, &[&2i32, &7i32]).await.expect("prepared");
    let after = utc();
    assert_eq!(fast() - taken_before, 2, "both took the fast path");
    let count = |lo: &str, hi: &str| format!("select count(*) from history where mtime >= TIMESTAMP '{lo}' and mtime <= TIMESTAMP '{hi}'");
    assert_eq!(rows(&client, &count(&before, &after)).await, vec![vec![Some("2".to_string())]], "both stored a time between the client's readings");
    assert_eq!(rows(&client, &count(&between, &after)).await, vec![vec![Some("1".to_string())]], "the prepared one its execution's, not its Parse's");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_prepared_inserters_are_durable() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = init_db(dir.path(), "db");
    let server = flashscan_server::start(config(&db, true)).await.expect("start");
    let client = connect(&server).await;
    client.simple_query("CREATE TABLE events (id bigint NOT NULL, writer int NOT NULL, note text)").await.expect("create");
    const WRITERS: i64 = 24;
    const EACH: i64 = 40;
    let tasks = spawn_inserters(server.listen.port(), WRITERS, EACH, "INSERT INTO events VALUES ($1, $2, $3)", |w, i| -> InsertParams {
        vec![Box::new(w * 1000 + i), Box::new(w as i32), Box::new(format!("w{w} i{i}"))]
    });
    for t in tasks {
        t.await.expect("writer");
    }
    let total = WRITERS * EACH;
    let expected_sum: i64 = (0..WRITERS).flat_map(|w| (0..EACH).map(move |i| w * 1000 + i)).sum();
    assert_eq!(rows(&client, "select count(*), count(distinct id), sum(id) from events").await, vec![vec![Some(total.to_string()), Some(total.to_string()), Some(expected_sum.to_string())]]);
    let counters = &server.shared.database.committer.as_ref().expect("committer").counters;
    assert!(counters.statements_fast_path.load(Relaxed) >= total as u64);
    eprintln!(
        "group commit: {} statements in {} transactions",
        counters.statements_committed.load(Relaxed),
        counters.transactions_committed.load(Relaxed)
    );
    server.shutdown().await;
    assert_eq!(
        reopened(&db, "select count(*), sum(id), count(note) from events").await,
        vec![vec![total.to_string(), expected_sum.to_string(), total.to_string()]]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transactions_across_tables_with_prepared_inserts() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = init_db(dir.path(), "db");
    let server = flashscan_server::start(config(&db, true)).await.expect("start");
    let mut client = connect(&server).await;
    let other = connect(&server).await;
    client.batch_execute("CREATE TABLE orders (id bigint NOT NULL, total decimal(10,2)); CREATE TABLE lines (order_id bigint NOT NULL, item text NOT NULL)").await.expect("create");
    let count = |sql: &'static str| {
        let other = &other;
        async move { rows(other, sql).await[0][0].clone().unwrap_or_default() }
    };
    // Committed: both tables, only after COMMIT.
    {
        let tx = client.transaction().await.expect("begin");
        let order = tx.prepare_typed("INSERT INTO orders VALUES ($1, $2)", &[Type::INT8, Type::TEXT]).await.expect("prepare");
        let line = tx.prepare("INSERT INTO lines VALUES ($1, $2)").await.expect("prepare");
        for id in 1..=5i64 {
            tx.execute(&order, &[&id, &None::<String>]).await.expect("order");
            for n in 0..3 {
                tx.execute(&line, &[&id, &format!("item {id}.{n}")]).await.expect("line");
            }
        }
        assert_eq!(count("select count(*) from orders").await, "0", "not visible before COMMIT");
        assert_eq!(count("select count(*) from lines").await, "0");
        tx.commit().await.expect("commit");
    }
    assert_eq!(count("select count(*) from orders").await, "5");
    assert_eq!(count("select count(*) from lines").await, "15");
    // Rolled back: neither table.
    {
        let tx = client.transaction().await.expect("begin");
        tx.execute("INSERT INTO orders VALUES (6, 1.5)", &[]).await.expect("order");
        tx.execute("INSERT INTO lines VALUES (6, 'x')", &[]).await.expect("line");
        tx.rollback().await.expect("rollback");
    }
    assert_eq!(count("select count(*) from orders").await, "5");
    assert_eq!(count("select count(*) from lines").await, "15");
    // An error inside the block aborts it (25P02) until ROLLBACK; nothing of it is written.
    {
        let tx = client.transaction().await.expect("begin");
        let line = tx.prepare("INSERT INTO lines VALUES ($1, $2)").await.expect("prepare");
        tx.execute(&line, &[&7i64, &"kept?"]).await.expect("line");
        let e = tx.execute(&line, &[&7i64, &None::<String>]).await.expect_err("NULL item");
        assert!(error_of(&e).starts_with("23502"), "{}", error_of(&e));
        let e = tx.execute(&line, &[&8i64, &"after the error"]).await.expect_err("aborted block");
        assert!(error_of(&e).starts_with("25P02"), "{}", error_of(&e));
        let e = tx.execute("select 1", &[]).await.expect_err("aborted block refuses queries too");
        assert!(error_of(&e).starts_with("25P02"), "{}", error_of(&e));
        tx.rollback().await.expect("rollback");
    }
    assert_eq!(count("select count(*) from lines").await, "15");
    // The session works again after ROLLBACK.
    assert_eq!(client.execute("INSERT INTO lines VALUES (9, 'after')", &[]).await.expect("insert"), 1);
    server.shutdown().await;
    assert_eq!(reopened(&db, "select count(*), sum(id) from orders").await, vec![vec!["5".to_string(), "15".to_string()]]);
    assert_eq!(reopened(&db, "select count(*) from lines").await, vec![vec!["16".to_string()]]);
}

/// The child half of `kill_9_loses_no_acknowledged_insert`: the server as `flashscan serve`
/// runs it. Does nothing in a normal test run.
#[test]
fn child_serve_until_killed() {
    common::serve_in_child(|db| config(db, true));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_loses_no_acknowledged_insert() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = init_db(dir.path(), "db");
    let mut child = spawn_child_server("child_serve_until_killed", &db).await;
    let port = child.port;
    let admin = connect_port(port).await;
    admin.simple_query("CREATE TABLE t (id bigint NOT NULL, v text)").await.expect("create");
    // Writers insert until the server dies; every acknowledged id is recorded.
    let acknowledged = Arc::new(Mutex::new(Vec::<i64>::new()));
    let mut writers = Vec::new();
    for w in 0..8i64 {
        let acked = acknowledged.clone();
        writers.push(tokio::spawn(async move {
            let c = connect_port(port).await;
            let stmt = c.prepare("INSERT INTO t (id, v) VALUES ($1, $2)").await.expect("prepare");
            for i in 0.. {
                let id = w * 1_000_000 + i;
                match c.execute(&stmt, &[&id, &format!("value {id}")]).await {
                    Ok(_) => acked.lock().expect("acked").push(id),
                    Err(_) => return,
                }
            }
        }));
    }
    let started = Instant::now();
    while acknowledged.lock().expect("acked").len() < 300 && started.elapsed() < Duration::from_secs(60) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // SAFETY: kill(2) on the child we spawned.
    assert_eq!(unsafe { libc::kill(child.process.id() as i32, libc::SIGKILL) }, 0);
    let _ = child.process.wait();
    for w in writers {
        w.await.expect("writer ends");
    }
    let acked: BTreeSet<i64> = acknowledged.lock().expect("acked").iter().copied().collect();
    assert!(acked.len() >= 300, "{} acknowledged", acked.len());
    // Reopened by the SQL session: the log replayed. Every acknowledged row is there, and
    // nothing that was never sent.
    let found: BTreeSet<i64> = reopened(&db, "select id from t").await.into_iter().map(|r| r[0].parse::<i64>().expect("id")).collect();
    let lost: Vec<_> = acked.difference(&found).take(10).collect();
    assert!(lost.is_empty(), "acknowledged but lost after kill -9: {lost:?} ({} acked, {} found)", acked.len(), found.len());
    assert!(found.iter().all(|id| id % 1_000_000 < 1_000_000 && id / 1_000_000 < 8));
    let values = reopened(&db, "select count(*) from t where v = concat('value ', cast(id as varchar))").await;
    assert_eq!(values, vec![vec![found.len().to_string()]], "every row whole");
    // And a new server takes over the database (the killed one's info file is stale).
    let server = flashscan_server::start(config(&db, true)).await.expect("restart after kill -9");
    let c = connect(&server).await;
    assert_eq!(rows(&c, "select count(*) from t").await, vec![vec![Some(found.len().to_string())]]);
    server.shutdown().await;
}

/// A SERIAL (or identity) column's `nextval` default takes the fast path too, prepared and
/// with RETURNING: one value per row from the sequence, the rows the SQL path would write.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serial_defaults_take_the_fast_path_with_and_without_returning() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = init_db(dir.path(), "db");
    let server = flashscan_server::start(config(&db, true)).await.expect("start");
    let client = connect(&server).await;
    client.simple_query("CREATE TABLE items (id SERIAL PRIMARY KEY, name text NOT NULL, qty int DEFAULT 5)").await.expect("create");
    let fast = || server.shared.database.committer.as_ref().expect("committer").counters.statements_fast_path.load(Relaxed);
    let taken_before = fast();
    let plain = client.prepare("INSERT INTO items (name) VALUES ($1)").await.expect("prepare");
    client.execute(&plain, &[&"a"]).await.expect("plain");
    let returning = client.prepare("INSERT INTO items (name) VALUES ($1) RETURNING id, qty").await.expect("prepare returning");
    let row = client.query_one(&returning, &[&"b"]).await.expect("returning");
    assert_eq!((row.get::<_, i32>(0), row.get::<_, i32>(1)), (2, 5));
    assert_eq!(simple_count(&client, "INSERT INTO items (name) VALUES ('c'), ('d')").await.expect("two rows"), 2);
    assert_eq!(fast() - taken_before, 3, "all three took the fast path");
    assert_eq!(
        rows(&client, "SELECT id, name, qty FROM items ORDER BY id").await,
        [["1", "a", "5"], ["2", "b", "5"], ["3", "c", "5"], ["4", "d", "5"]].iter().map(|r| r.iter().map(|v| Some(v.to_string())).collect::<Vec<_>>()).collect::<Vec<_>>()
    );
    server.shutdown().await;
}
