//! flashscan-server: `flashscan serve DB`, the PostgreSQL wire protocol over flashscan's
//! SQL (DataFusion), fair under load, with live counters.
//!
//! - [`startup`]: connection limit, authentication, backend keys;
//! - [`handler`]: simple and extended query protocols, COPY TO STDOUT, streaming rows;
//! - [`statement`]: SET/SHOW/BEGIN/COPY recognised before DataFusion;
//! - [`psql_catalog`]: the catalog answers psql's `\d` needs;
//! - [`admission`]: query slots, queue timeout, scan buffer budget;
//! - [`cancel`]: cancel requests; [`params`]: bind parameters;
//! - [`sampler`], [`stats_tables`], [`http`]: the one-second counters as SQL, Prometheus
//!   text and a live page;
//! - [`ownership`]: one process serves a database.
//!
//! The protocol itself is pgwire's (see docs/server.md for why pgwire rather than
//! datafusion-postgres).

pub mod admission;
pub mod cancel;
pub mod config;
pub mod error;
pub mod handler;
pub mod http;
pub mod ownership;
pub mod params;
pub mod psql_catalog;
pub mod sampler;
pub mod shared;
pub mod startup;
pub mod statement;
pub mod stats_tables;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use datafusion::catalog::MemorySchemaProvider;
use flashscan_sql::{FlashscanSession, SessionOptions};
use pgwire::api::cancel::CancelHandler;
use pgwire::api::PgWireServerHandlers;
use pgwire::messages::cancel::CancelRequest;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinSet;

pub use config::ServerConfig;
pub use error::ServerError;

use crate::admission::Admission;
use crate::handler::QueryHandler;
use crate::ownership::DatabaseOwnership;
use crate::psql_catalog::{CatalogTable, FIRST_TABLE_OID};
use crate::sampler::Sampler;
use crate::shared::Shared;
use crate::startup::{AuthMethod, Startup};
use crate::stats_tables::{StatsTable, StatsView};

/// pgwire asks this for each connection's handlers.
struct Handlers {
    shared: Arc<Shared>,
    query: Arc<QueryHandler>,
    cancel: Arc<CancelByKey>,
}

struct CancelByKey {
    shared: Arc<Shared>,
}

#[async_trait]
impl CancelHandler for CancelByKey {
    async fn on_cancel_request(&self, request: CancelRequest) {
        self.shared.cancels.cancel(request.pid, &request.secret_key.to_bytes());
    }
}

impl PgWireServerHandlers for Handlers {
    fn simple_query_handler(&self) -> Arc<impl pgwire::api::query::SimpleQueryHandler> {
        self.query.clone()
    }

    fn extended_query_handler(&self) -> Arc<impl pgwire::api::query::ExtendedQueryHandler> {
        self.query.clone()
    }

    fn startup_handler(&self) -> Arc<impl pgwire::api::auth::StartupHandler> {
        Arc::new(Startup { shared: self.shared.clone() })
    }

    fn cancel_handler(&self) -> Arc<impl CancelHandler> {
        self.cancel.clone()
    }
}

/// A server accepting connections; `shutdown` drains it.
pub struct RunningServer {
    pub listen: SocketAddr,
    pub http: Option<SocketAddr>,
    pub shared: Arc<Shared>,
    stop: watch::Sender<bool>,
    accept_task: tokio::task::JoinHandle<()>,
    _ownership: DatabaseOwnership,
}

async fn bind_listener(config: &ServerConfig) -> Result<(TcpListener, bool), ServerError> {
    if let Some(addr) = config.listen {
        let l = TcpListener::bind(addr).await.map_err(|e| ServerError::Listen { addr: addr.to_string(), source: e })?;
        return Ok((l, false));
    }
    let mut last = None;
    for i in 0..config::LISTEN_PORT_TRIES {
        let addr = SocketAddr::from(([127, 0, 0, 1], config::LISTEN_PORT_DEFAULT + i));
        match TcpListener::bind(addr).await {
            Ok(l) => return Ok((l, i > 0)),
            Err(e) => last = Some((addr, e)),
        }
    }
    let (addr, e) = last.ok_or_else(|| ServerError::InvalidArgument("no port to try".into()))?;
    Err(ServerError::Listen { addr: format!("{addr} (and the {} ports below it)", config::LISTEN_PORT_TRIES - 1), source: e })
}

/// Opens the database, takes ownership of it and starts listening.
pub async fn start(config: ServerConfig) -> Result<RunningServer, ServerError> {
    config.validate()?;
    let ownership = DatabaseOwnership::acquire(&config.db_dir)?;
    let auth = AuthMethod::from_password_file(config.password_file.as_deref())?;
    let session = FlashscanSession::open(&config.db_dir, SessionOptions { target_partitions: config.target_partitions, ..SessionOptions::default() })?;
    let base = session.context().clone();
    // psql, drivers and BI tools write PostgreSQL's dialect.
    base.state_ref().write().config_mut().options_mut().sql_parser.dialect = datafusion::config::Dialect::PostgreSQL;

    let db = flashscan_storage::Database::open(&config.db_dir).map_err(flashscan_sql::SqlError::from)?;
    let mut tables = Vec::new();
    let mut names: Vec<(String, String)> = db.tables().map(|t| (t.name.to_lowercase(), t.format.clone())).collect();
    names.sort();
    for (i, (name, format)) in names.into_iter().enumerate() {
        let provider = base.table_provider(name.as_str()).await.map_err(flashscan_sql::SqlError::from)?;
        tables.push(CatalogTable { oid: FIRST_TABLE_OID + i as i64, name, schema: provider.schema(), format });
    }

    let admission = Admission::new(
        config.max_connections,
        config.max_active_queries,
        config.queue_timeout,
        config.scan_buffer_budget_bytes,
        config.scan_buffer_bytes_per_query(),
    );
    let sampler = Sampler::new(&config.db_dir, admission.clone(), config::SAMPLE_RING_SECONDS);
    base.register_table("flashscan_stats_history", Arc::new(StatsTable::new(StatsView::History, sampler.clone())))
        .map_err(flashscan_sql::SqlError::from)?;
    if let Some(catalog) = base.catalog("datafusion") {
        catalog.register_schema("sys", Arc::new(MemorySchemaProvider::new())).map_err(flashscan_sql::SqlError::from)?;
        base.register_table("sys.dm_io_virtual_file_stats", Arc::new(StatsTable::new(StatsView::FileStats, sampler.clone())))
            .map_err(flashscan_sql::SqlError::from)?;
    }
    let shared = Arc::new(Shared::new(base, admission, auth, config.query_memory_bytes, sampler.clone(), tables));

    let (listener, moved) = bind_listener(&config).await?;
    let listen = listener.local_addr().map_err(|e| ServerError::Listen { addr: "bound socket".into(), source: e })?;
    if moved {
        eprintln!("flashscan serve: port {} is taken; listening on {listen} instead", config::LISTEN_PORT_DEFAULT);
    }
    ownership.publish(listen)?;

    let http = match config.http {
        Some(addr) => {
            let l = TcpListener::bind(addr).await.map_err(|e| ServerError::Listen { addr: addr.to_string(), source: e })?;
            let bound = l.local_addr().map_err(|e| ServerError::Listen { addr: addr.to_string(), source: e })?;
            Some((l, bound))
        }
        None => None,
    };
    let http_addr = http.as_ref().map(|(_, a)| *a);

    let (stop, stop_rx) = watch::channel(false);
    let handlers = Arc::new(Handlers {
        shared: shared.clone(),
        query: Arc::new(QueryHandler::new(shared.clone())),
        cancel: Arc::new(CancelByKey { shared: shared.clone() }),
    });
    let accept_task = tokio::spawn(accept_loop(listener, handlers, shared.clone(), stop_rx, sampler, http.map(|(l, _)| l)));
    Ok(RunningServer { listen, http: http_addr, shared, stop, accept_task, _ownership: ownership })
}

async fn accept_loop(
    listener: TcpListener,
    handlers: Arc<Handlers>,
    shared: Arc<Shared>,
    mut stop: watch::Receiver<bool>,
    sampler: Arc<Sampler>,
    http: Option<TcpListener>,
) {
    let mut background = JoinSet::new();
    background.spawn(sampler.run());
    if let Some(l) = http {
        background.spawn(http::serve_http(l, shared.clone()));
    }
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                if let Ok((socket, _)) = accepted {
                    let h = handlers.clone();
                    connections.spawn(async move {
                        let _ = pgwire::tokio::process_socket(socket, None, h).await;
                    });
                }
            }
            // Reap finished connection tasks so the set does not grow.
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
            _ = stop.changed() => break,
        }
    }
    // Drain: no new connections or queries start; running queries get DRAIN_TIMEOUT.
    drop(listener);
    shared.start_draining();
    let started = Instant::now();
    while !shared.admission.idle() && started.elapsed() < config::DRAIN_TIMEOUT {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    connections.abort_all();
    while connections.join_next().await.is_some() {}
    background.abort_all();
}

impl RunningServer {
    /// Stops accepting, lets running queries finish (at most `DRAIN_TIMEOUT`), closes
    /// every connection and releases the database.
    pub async fn shutdown(self) {
        let _ = self.stop.send(true);
        let _ = self.accept_task.await;
    }
}

/// Runs until SIGTERM or SIGINT, then drains. Prints where it listens on stderr.
pub async fn serve_until_signal(config: ServerConfig) -> Result<(), ServerError> {
    let server = start(config).await?;
    let port = server.listen.port();
    eprintln!(
        "flashscan serve: listening on {} (connect: psql -h {} -p {port} -U flashscan -d flashscan)",
        server.listen,
        server.listen.ip()
    );
    if let Some(h) = server.http {
        eprintln!("flashscan serve: dashboard http://{h}/  metrics http://{h}/metrics");
    }
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).map_err(|e| ServerError::Io { what: "installing the SIGTERM handler", path: "-".into(), source: e })?;
    let mut int = signal(SignalKind::interrupt()).map_err(|e| ServerError::Io { what: "installing the SIGINT handler", path: "-".into(), source: e })?;
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
    eprintln!("flashscan serve: shutting down: draining running queries (at most {} s)", config::DRAIN_TIMEOUT.as_secs());
    server.shutdown().await;
    eprintln!("flashscan serve: stopped");
    Ok(())
}
