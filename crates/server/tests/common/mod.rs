//! What every server test file needs: a server on a free loopback port (or in a child
//! process), a tokio-postgres client connected to it, and a simple-protocol query's rows
//! as text.
#![allow(dead_code)] // each test file uses its own part

use std::io::BufRead;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use tempfile::TempDir;

use flashscan_sql::{FlashscanSession, SessionOptions};

use flashscan_server::{RunningServer, ServerConfig};
use tokio::sync::mpsc::UnboundedReceiver;
use tokio::task::JoinHandle;
use tokio_postgres::types::ToSql;
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
/// Runs `sql`, expecting an error whose text starts with SQLSTATE `code` (any error when
/// `code` is empty); returns the error's text.
pub async fn fails(client: &Client, sql: &str, code: &str) -> String {
    let e = client.simple_query(sql).await.err().unwrap_or_else(|| panic!("{sql}: expected {code}, it succeeded"));
    let text = error_of(&e);
    assert!(text.starts_with(code), "{sql}: expected {code}, got {text}");
    text
}

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

/// A new empty database `DIR/NAME` made by `flashscan init`.
pub fn init_db(dir: &Path, name: &str) -> PathBuf {
    let db = dir.join(name);
    flashscan_write::init_database(&db, &flashscan_write::InitOptions::default()).expect("init");
    db
}

/// Where the parent test tells its child process which database to serve.
const CHILD_DB_VARIABLE: &str = "FLASHSCAN_TEST_SERVE_DB";

/// The child half of a test that needs a server in another process (to kill it, or to
/// signal it): serves the database the parent named, as `flashscan serve` does, until a
/// signal. Does nothing in a normal test run (the variable is unset).
pub fn serve_in_child(config: impl FnOnce(&Path) -> ServerConfig) {
    let Ok(db) = std::env::var(CHILD_DB_VARIABLE) else { return };
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("runtime");
    if let Err(e) = runtime.block_on(flashscan_server::serve_until_signal(config(Path::new(&db)))) {
        eprintln!("child server failed: {e}");
        std::process::exit(1);
    }
}

/// A server in a child process: this test binary run again with only the test `child_test`
/// (which calls [`serve_in_child`]), serving `db`.
pub struct ChildServer {
    pub process: Child,
    /// The port the child announced ("listening on ADDR").
    pub port: u16,
    /// The child's stderr up to and including that line.
    pub startup_log: Vec<String>,
    /// Its stderr lines after it.
    pub stderr_lines: UnboundedReceiver<String>,
}

pub async fn spawn_child_server(child_test: &str, db: &Path) -> ChildServer {
    let mut process = Command::new(std::env::current_exe().expect("test binary"))
        .args(["--exact", child_test, "--nocapture", "--test-threads", "1"])
        .env(CHILD_DB_VARIABLE, db)
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .expect("spawn the child server");
    let stderr = process.stderr.take().expect("stderr");
    let (lines_tx, mut stderr_lines) = tokio::sync::mpsc::unbounded_channel::<String>();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = lines_tx.send(line);
        }
    });
    let mut startup_log = Vec::new();
    let port = loop {
        let line = tokio::time::timeout(Duration::from_secs(60), stderr_lines.recv()).await.expect("the server starts").expect("a line");
        startup_log.push(line.clone());
        if let Some(rest) = line.split("listening on ").nth(1) {
            let addr: SocketAddr = rest.split_whitespace().next().expect("addr").parse().expect("socket address");
            break addr.port();
        }
    };
    ChildServer { process, port, startup_log, stderr_lines }
}

/// The child test `child_test` (which calls [`serve_in_child`]) run to its end on `db`, with
/// `env` set and `env_removed` unset: for a server that must refuse to start.
pub fn run_child_server(child_test: &str, db: &Path, env: &[(&str, &str)], env_removed: &[&str]) -> std::process::Output {
    let mut command = Command::new(std::env::current_exe().expect("test binary"));
    command.args(["--exact", child_test, "--nocapture", "--test-threads", "1"]).env(CHILD_DB_VARIABLE, db).stdin(Stdio::null());
    for name in env_removed {
        command.env_remove(name);
    }
    command.envs(env.iter().copied());
    command.output().expect("run the child server")
}

/// The parameters of one execution of a prepared INSERT.
pub type InsertParams = Vec<Box<dyn ToSql + Sync + Send>>;

/// `writers` connections inserting at once: writer `w` prepares `insert` and executes it
/// `each` times, the `i`th time with `params(w, i)`; every execution must insert one row.
/// The caller awaits the handles.
pub fn spawn_inserters(port: u16, writers: i64, each: i64, insert: &'static str, params: fn(i64, i64) -> InsertParams) -> Vec<JoinHandle<()>> {
    (0..writers)
        .map(|w| {
            tokio::spawn(async move {
                let c = connect_port(port).await;
                let stmt = c.prepare(insert).await.expect("prepare");
                for i in 0..each {
                    let values = params(w, i);
                    let refs: Vec<&(dyn ToSql + Sync)> = values.iter().map(|v| &**v as &(dyn ToSql + Sync)).collect();
                    assert_eq!(c.execute(&stmt, &refs).await.expect("insert"), 1);
                }
            })
        })
        .collect()
}

/// A test's server: its database (deleted with `_guard`), the server on it with the test
/// configuration, and a client connected to it.
pub struct Served {
    pub _guard: TempDir,
    pub db: PathBuf,
    pub server: RunningServer,
    pub client: Client,
}

/// Starts the server on a test's database (`(guard, db)` as the test file makes them).
pub async fn serve((guard, db): (TempDir, PathBuf)) -> Served {
    let server = flashscan_server::start(config(&db)).await.expect("start");
    let client = connect(&server).await;
    Served { _guard: guard, db, server, client }
}
