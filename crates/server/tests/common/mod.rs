//! What every server test file needs: a server on a free loopback port, a tokio-postgres
//! client connected to it, and a simple-protocol query's rows as text.
#![allow(dead_code)] // each test file uses its own part

use std::path::Path;

use flashscan_sql::{FlashscanSession, SessionOptions};

use flashscan_server::{RunningServer, ServerConfig};
use tokio_postgres::{Client, NoTls, SimpleQueryMessage};

/// The server's defaults on port 0: the kernel picks a free one (tests run in parallel).
pub fn config(db: &Path) -> ServerConfig {
    let mut c = ServerConfig::new(db.to_path_buf());
    c.listen = Some("127.0.0.1:0".parse().expect("addr"));
    c
}

/// A client as `user` on database `dbname`, with a password when given; its connection
/// runs on the test's runtime.
pub async fn try_connect(port: u16, user: &str, dbname: &str, password: Option<&str>) -> Result<Client, tokio_postgres::Error> {
    let mut cfg = tokio_postgres::Config::new();
    cfg.host("127.0.0.1").port(port).user(user).dbname(dbname);
    if let Some(p) = password {
        cfg.password(p);
    }
    let (client, connection) = cfg.connect(NoTls).await?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    Ok(client)
}

pub async fn connect_port(port: u16) -> Client {
    try_connect(port, "writer", "flashscan", None).await.expect("connect")
}

pub async fn connect(server: &RunningServer) -> Client {
    connect_port(server.listen.port()).await
}

/// `SQLSTATE: message` of a server error (tokio-postgres prints only "db error").
pub fn error_of(e: &tokio_postgres::Error) -> String {
    match e.as_db_error() {
        Some(d) => format!("{}: {}", d.code().code(), d.message()),
        None => format!("no SQLSTATE: {e}"),
    }
}

/// The rows of a simple-protocol query, each value as text (None for NULL).
pub async fn simple_rows(client: &Client, sql: &str) -> Vec<Vec<Option<String>>> {
    let messages = client.simple_query(sql).await.unwrap_or_else(|e| panic!("{sql}: {}", error_of(&e)));
    messages
        .into_iter()
        .filter_map(|m| match m {
            SimpleQueryMessage::Row(r) => Some((0..r.len()).map(|i| r.get(i).map(str::to_string)).collect()),
            _ => None,
        })
        .collect()
}

/// Rows as `flashscan sql`'s session sees them after the server stopped (the log replayed
/// or the checkpoint read): independent of the server's own answers.
pub async fn reopened(db: &Path, sql: &str) -> Vec<Vec<String>> {
    let session = FlashscanSession::open(db, SessionOptions::default()).expect("session");
    let out = session.run_one(sql).await.expect("query");
    let mut result = Vec::new();
    for b in &out.batches {
        let formatters: Vec<_> = b
            .columns()
            .iter()
            .map(|c| arrow::util::display::ArrayFormatter::try_new(c.as_ref(), &arrow::util::display::FormatOptions::default()).expect("fmt"))
            .collect();
        for r in 0..b.num_rows() {
            result.push(formatters.iter().map(|f| f.value(r).to_string()).collect());
        }
    }
    result
}
