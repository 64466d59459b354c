//! ALTER TABLE over the wire: the changes, PostgreSQL's SQLSTATEs, the catalogs clients read,
//! a statement prepared before the change, and DDL inside a transaction block (committed as
//! it runs, said with a WARNING).

use std::path::PathBuf;

use futures::StreamExt;
use tokio_postgres::{AsyncMessage, NoTls};

mod common;
use common::{connect, fails, init_db, serve, simple_rows as rows, Served};

fn new_db() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = init_db(dir.path(), "db");
    (dir, db)
}

fn texts(rows: Vec<Vec<Option<String>>>) -> Vec<Vec<String>> {
    rows.into_iter().map(|r| r.into_iter().map(|v| v.unwrap_or_else(|| "NULL".into())).collect()).collect()
}

/// Each column of `table` with its type and default, as psql's `\d` reads them.
fn described(table: &str) -> String {
    format!(
        "SELECT a.attname, format_type(a.atttypid, a.atttypmod), pg_get_expr(d.adbin, d.adrelid) FROM pg_attribute a \
         LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum WHERE a.attrelid = '{table}'::regclass AND a.attnum > 0 ORDER BY a.attnum"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn columns_change_with_postgresql_errors_and_catalogs() {
    let Served { _guard, db: _db, server, client } = serve(new_db()).await;
    client.batch_execute("CREATE TABLE items (id SERIAL PRIMARY KEY, name TEXT); INSERT INTO items (name) VALUES ('a'), ('b')").await.expect("setup");
    let before = client.prepare("SELECT * FROM items ORDER BY id").await.expect("prepare");
    let ids = client.prepare("SELECT id FROM items ORDER BY id").await.expect("prepare");

    client.batch_execute("ALTER TABLE items ADD COLUMN qty INT NOT NULL DEFAULT 5").await.expect("add");
    assert_eq!(texts(rows(&client, "SELECT * FROM items ORDER BY id").await), [["1", "a", "5"], ["2", "b", "5"]]);
    // A statement prepared before: its result columns changed (0A000, as PostgreSQL), or
    // not (it runs).
    let e = client.query(&before, &[]).await.expect_err("result type changed");
    assert_eq!(e.as_db_error().map(|d| d.code().code()), Some("0A000"), "{e}");
    assert_eq!(client.query(&ids, &[]).await.expect("ids").len(), 2);
    // What clients read about the table follows (psql's \d query).
    let columns = texts(rows(&client, &described("items")).await);
    assert_eq!(columns, [["id", "integer", "nextval('items_id_seq'::regclass)"], ["name", "text", "NULL"], ["qty", "integer", "5"]]);
    let columns = texts(rows(&client, "SELECT column_name, data_type, column_default, is_nullable FROM information_schema.columns WHERE table_name = 'items' ORDER BY ordinal_position").await);
    assert_eq!(columns[2], ["qty", "integer", "5", "NO"]);

    fails(&client, "ALTER TABLE items ADD COLUMN qty INT", "42701").await;
    fails(&client, "ALTER TABLE items DROP COLUMN nope", "42703").await;
    fails(&client, "ALTER TABLE nope ADD COLUMN a INT", "42P01").await;
    fails(&client, "ALTER TABLE items ADD COLUMN z INT NOT NULL", "23502").await;
    // USING is not in the parser's dialect: a syntax error naming it.
    let e = fails(&client, "ALTER TABLE items ALTER COLUMN name TYPE INT USING 1", "42601").await;
    assert!(e.contains("USING"), "{e}");

    client.batch_execute("ALTER TABLE items RENAME COLUMN name TO title; ALTER TABLE items ALTER COLUMN qty TYPE BIGINT").await.expect("rename, type");
    client.batch_execute("ALTER TABLE items RENAME TO goods").await.expect("rename table");
    client.batch_execute("INSERT INTO goods (title) VALUES ('c')").await.expect("insert");
    assert_eq!(texts(rows(&client, "SELECT id, title, qty FROM goods ORDER BY id").await), [["1", "a", "5"], ["2", "b", "5"], ["3", "c", "5"]]);
    let tables = texts(rows(&client, "SELECT tablename FROM pg_tables WHERE schemaname = 'public'").await);
    assert_eq!(tables, [["goods"]]);
    let columns = texts(rows(&client, &described("goods")).await);
    assert_eq!(columns, [["id", "integer", "nextval('items_id_seq'::regclass)"], ["title", "text", "NULL"], ["qty", "bigint", "5"]]);
    drop(server);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ddl_inside_a_block_commits_as_it_runs_and_says_so() {
    let Served { _guard, db: _db, server, client: first } = serve(new_db()).await;
    let mut cfg = tokio_postgres::Config::new();
    cfg.host("127.0.0.1").port(server.listen.port()).user("writer").dbname("flashscan");
    let (client, mut connection) = cfg.connect(NoTls).await.expect("connect");
    let (notices_tx, mut notices) = tokio::sync::mpsc::unbounded_channel::<String>();
    tokio::spawn(async move {
        let mut messages = futures::stream::poll_fn(move |cx| connection.poll_message(cx));
        while let Some(Ok(m)) = messages.next().await {
            if let AsyncMessage::Notice(n) = m {
                let _ = notices_tx.send(format!("{}: {}", n.severity(), n.message()));
            }
        }
    });
    client.batch_execute("CREATE TABLE t (a INT)").await.expect("create");
    assert!(notices.try_recv().is_err(), "no warning outside a block");
    client.batch_execute("BEGIN; ALTER TABLE t ADD COLUMN b INT; ROLLBACK").await.expect("block");
    let warning = notices.recv().await.expect("a warning");
    assert!(warning.starts_with("WARNING") && warning.contains("ALTER TABLE") && warning.contains("ROLLBACK"), "{warning}");
    // The column stayed, as the warning said; another client sees it.
    let other = connect(&server).await;
    let columns: Vec<String> = texts(rows(&other, &described("t")).await).into_iter().map(|r| r[0].clone()).collect();
    assert_eq!(columns, ["a", "b"]);
    drop(first);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rows_staged_before_a_rewrite_are_never_written_in_the_old_shape() {
    let Served { _guard, db: _db, server, client } = serve(new_db()).await;
    client.batch_execute("CREATE TABLE t (a INT); INSERT INTO t VALUES (0)").await.expect("setup");
    client.batch_execute("BEGIN; INSERT INTO t VALUES (1)").await.expect("staged");
    let other = connect(&server).await;
    other.batch_execute("ALTER TABLE t ADD COLUMN b INT DEFAULT 7").await.expect("alter");
    // The block's rows were made for the old columns: its COMMIT fails, nothing written.
    let e = client.batch_execute("COMMIT").await.expect_err("commit after the rewrite");
    assert!(common::error_of(&e).contains("ALTER TABLE"), "{}", common::error_of(&e));
    assert_eq!(texts(rows(&client, "SELECT a, b FROM t").await), [["0", "7"]]);
    client.batch_execute("INSERT INTO t (a) VALUES (2)").await.expect("insert after");
    assert_eq!(texts(rows(&other, "SELECT a, b FROM t ORDER BY a").await), [["0", "7"], ["2", "7"]]);
}
