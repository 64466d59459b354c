//! flashscan-server: `flashscan serve DB`, the PostgreSQL wire protocol over flashscan's
//! SQL (DataFusion), fair under load, with live counters.
//!
//! - [`startup`]: connection limit, authentication, backend keys;
//! - [`handler`]: simple and extended query protocols, COPY TO STDOUT, streaming rows;
//! - [`statement`]: SET/SHOW/BEGIN/COPY/DECLARE/FETCH recognised before DataFusion;
//! - [`cursors`]: a connection's server-side cursors (DECLARE, FETCH, MOVE, CLOSE);
//! - [`psql_catalog`]: the catalog answers psql's `\d` needs;
//! - [`admission`]: query slots, queue timeout, scan buffer budget;
//! - [`query_runtime`]: every query's plan runs on a runtime of its own (a constant row
//!   on its connection's task); [`planning`]: a connection's DataFusion state, kept
//!   between its statements;
//! - [`cancel`]: cancel requests; [`hangup`]: a client gone mid-query ends it;
//!   [`params`]: bind parameters;
//! - [`sampler`], [`stats_tables`], [`http`]: the one-second counters as SQL, Prometheus
//!   text and a live page;
//! - [`ownership`]: one process serves a database.
//!
//! The protocol itself is pgwire's (see docs/server.md for why pgwire rather than
//! datafusion-postgres).

pub mod admission;
pub mod cancel;
pub mod config;
pub mod copy_from;
pub mod cursors;
pub mod error;
pub mod fast_insert;
pub mod handler;
pub mod hangup;
pub mod http;
pub mod information_schema;
pub mod ownership;
pub mod params;
pub mod pg_catalog;
mod pg_json;
pub mod pg_keys;
pub mod pg_proc;
pub mod pg_settings;
pub mod pg_syntax;
pub mod plan_reuse;
pub mod plan_shapes;
pub mod planning;
pub mod psql_catalog;
pub mod query_runtime;
pub mod sampler;
pub mod scram;
pub mod shared;
pub mod startup;
pub mod statement;
pub mod stats_tables;
pub mod synchronous_commit;
pub mod writes;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use datafusion::catalog::MemorySchemaProvider;
use flashscan_sql::{FlashscanSession, SessionOptions};
use query_runtime::QueryRuntime;
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
use crate::psql_catalog::{CatalogRelations, CatalogSequence, CatalogTable, FIRST_SEQUENCE_OID, FIRST_TABLE_OID};
use crate::sampler::Sampler;
use crate::shared::{Database, Shared};
use crate::writes::Committer;
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

    fn copy_handler(&self) -> Arc<impl pgwire::api::copy::CopyHandler> {
        self.query.clone()
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

/// What the server names itself in the database lock.
pub const WRITER_NAME: &str = "flashscan serve";

/// The tables, views and sequences psql's `\d` sees, with oids in name order.
pub async fn catalog_relations(base: &datafusion::prelude::SessionContext, db_dir: &std::path::Path) -> Result<CatalogRelations, ServerError> {
    let catalog = flashscan_storage::Catalog::read(db_dir).map_err(flashscan_sql::SqlError::from)?;
    // Tables and views share one namespace and one oid sequence, in name order.
    type Relation = (String, String, Option<String>, Vec<flashscan_storage::KeyIndexDef>, Vec<flashscan_storage::ColumnDefaultMeta>);
    let mut names: Vec<Relation> = catalog.tables.values().map(|t| (t.name.to_lowercase(), t.format.clone(), None, t.indexes.clone(), t.column_defaults.clone())).collect();
    names.extend(catalog.views.iter().map(|v| (v.name.clone(), String::new(), Some(v.sql.clone()), Vec::new(), Vec::new())));
    names.sort_by(|a, b| a.0.cmp(&b.0));
    let mut tables = Vec::new();
    for (i, (name, format, view_definition, indexes, column_defaults)) in names.into_iter().enumerate() {
        let provider = base.table_provider(name.as_str()).await.map_err(flashscan_sql::SqlError::from)?;
        tables.push(CatalogTable { oid: FIRST_TABLE_OID + i as i64, name, schema: provider.schema(), format, view_definition, indexes, column_defaults });
    }
    // A sequence a column draws from counts in that column's type (SERIAL: integer).
    let owner = |sequence: &str| {
        tables.iter().find_map(|t: &CatalogTable| {
            let d = t.column_defaults.iter().find(|d| d.sequence.as_deref() == Some(sequence))?;
            t.schema.field_with_name(&d.column).ok().map(|f| (f.data_type().clone(), d.identity || d.always))
        })
    };
    // `catalog.sequences` is a BTreeMap: name order.
    let sequences = catalog
        .sequences
        .iter()
        .enumerate()
        .map(|(i, (name, meta))| {
            let (data_type, identity) = owner(name).unwrap_or((arrow::datatypes::DataType::Int64, false));
            CatalogSequence { oid: FIRST_SEQUENCE_OID + i as i64, name: name.clone(), meta: meta.clone(), data_type, identity }
        })
        .collect();
    Ok(CatalogRelations { tables, sequences })
}

/// Opens the database, takes ownership of it (for a database made by `flashscan init`:
/// the writer's lock and the log) and starts listening.
pub async fn start(config: ServerConfig) -> Result<RunningServer, ServerError> {
    config.validate()?;
    // Commit settings from the environment (docs/server.md), read once, before anything is
    // opened: a bad value, or the removed FLASHSCAN_COMMIT_MODE, stops the start with a
    // one-line error.
    writes::refuse_removed_commit_mode().map_err(ServerError::InvalidArgument)?;
    let on_task_max = writes::on_task_max_from_env().map_err(ServerError::InvalidArgument)?;
    let auth = AuthMethod::from_password_file_with(config.password_file.as_deref(), config.password_auth)?;
    let session = Arc::new(FlashscanSession::open(&config.db_dir, SessionOptions { target_partitions: config.target_partitions, ..SessionOptions::default() })?);
    // The server is the database's one writer: the lock and the log (a database made by
    // `flashscan load` gets its log here).
    let write = match session.take_writer(WRITER_NAME) {
        Ok(w) => Some(w),
        Err(flashscan_sql::SqlError::Write(e @ flashscan_write::WriteError::Locked { .. })) => {
            return Err(match ownership::read_serve_info(&config.db_dir) {
                Some(_) => ServerError::DatabaseBusy(ownership::busy_message(&config.db_dir)),
                None => ServerError::DatabaseBusy(e.to_string()),
            })
        }
        Err(e) => return Err(e.into()),
    };
    let ownership = DatabaseOwnership::held_by_write_path(&config.db_dir);
    let base = session.context().clone();
    // psql, drivers and BI tools write PostgreSQL's dialect.
    base.state_ref().write().config_mut().options_mut().sql_parser.dialect = datafusion::config::Dialect::PostgreSQL;
    let relations = catalog_relations(&base, &config.db_dir).await?;
    pg_catalog::register_functions(&base);
    pg_catalog::register(&base, &relations.tables, &relations.sequences).map_err(flashscan_sql::SqlError::from)?;
    // Views were planned when the session opened, before the dialect, functions and
    // pg_catalog tables above: planned again now, and the catalog made with their columns.
    session.refresh_views()?;
    let CatalogRelations { tables, sequences } = catalog_relations(&base, &config.db_dir).await?;
    pg_catalog::register(&base, &tables, &sequences).map_err(flashscan_sql::SqlError::from)?;
    let admission = Admission::new(
        config.max_connections,
        config.max_active_queries,
        config.queue_timeout,
        config.scan_buffer_budget_bytes,
        config.scan_buffer_bytes_per_query(),
    );
    let committer = write
        .clone()
        .map(|w| Committer::with_on_task_max(w, config.commit_workers, on_task_max).map(|c| c.watching_queries(admission.clone())))
        .transpose()?;
    let database = Database { session: session.clone(), write, committer, ddl: tokio::sync::RwLock::new(()) };
    let sampler = Sampler::new(&config.db_dir, admission.clone(), config::SAMPLE_RING_SECONDS);
    if let (Some(c), Some(w)) = (&database.committer, &database.write) {
        sampler.set_write_source(sampler::WriteSource { counters: c.counters.clone(), write: w.clone() });
    }
    base.register_table("flashscan_stats_history", Arc::new(StatsTable::new(StatsView::History, sampler.clone())))
        .map_err(flashscan_sql::SqlError::from)?;
    // `pg_cursors`: each connection sees its own cursors.
    let cursor_lists = Arc::new(cursors::CursorLists::default());
    base.register_table(datafusion::common::TableReference::partial("pg_catalog", "pg_cursors"), Arc::new(cursors::CursorsTable::new(cursor_lists.clone())))
        .map_err(flashscan_sql::SqlError::from)?;
    if let Some(catalog) = base.catalog("datafusion") {
        catalog.register_schema("sys", Arc::new(MemorySchemaProvider::new())).map_err(flashscan_sql::SqlError::from)?;
        base.register_table("sys.dm_io_virtual_file_stats", Arc::new(StatsTable::new(StatsView::FileStats, sampler.clone())))
            .map_err(flashscan_sql::SqlError::from)?;
    }
    let queries = QueryRuntime::for_queries(config.max_active_queries, config.target_partitions.unwrap_or_else(config::cores))
        .map_err(|e| ServerError::InvalidArgument(format!("cannot start the query runtime's threads: {e}")))?;
    let shared = Arc::new(Shared::new(base, admission, auth, config.query_memory_bytes, sampler.clone(), tables, database, queries, cursor_lists).with_fast_insert(config.fast_insert));

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

/// The write path checks its automatic checkpoint triggers after each commit; a server that
/// stops taking INSERTs would never reach the time trigger, so it also asks every
/// `CHECKPOINT_POLL_S`. A failed automatic checkpoint changes nothing committed: the write
/// path keeps its error in `auto_checkpoint_stats`, and the next trigger tries again.
async fn checkpoint_when_due(write: Arc<flashscan_write::WritePath>) {
    /// Seconds between checks: small beside the default interval trigger (300 s).
    const CHECKPOINT_POLL_S: u64 = 10;
    every_period_blocking(Duration::from_secs(CHECKPOINT_POLL_S), move || write.checkpoint_if_due()).await
}

/// Runs `work` on a blocking thread (off the async workers) once per `period`, the first
/// time one period from now, until the task is dropped; a late run delays the next one
/// rather than bunching them up. Its result is not looked at: each `work` keeps its own.
pub(crate) async fn every_period_blocking<R: Send + 'static>(period: Duration, work: impl Fn() -> R + Clone + Send + 'static) {
    let mut tick = tokio::time::interval(period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await;
    loop {
        tick.tick().await;
        let _ = tokio::task::spawn_blocking(work.clone()).await;
    }
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
    if let Some(write) = shared.database.write.clone() {
        background.spawn(checkpoint_when_due(write));
    }
    if let Some(l) = http {
        background.spawn(http::serve_http(l, shared.clone()));
    }
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                if let Ok((socket, _)) = accepted {
                    let h = handlers.clone();
                    let fd = std::os::fd::AsRawFd::as_raw_fd(&socket);
                    connections.spawn(hangup::serving(fd, async move {
                        let _ = pgwire::tokio::process_socket(socket, None, h).await;
                    }));
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
    let writes_waiting = |s: &Shared| s.database.committer.as_ref().map(|c| c.counters.statements_waiting.load(std::sync::atomic::Ordering::Relaxed)).unwrap_or(0);
    while (!shared.admission.idle() || writes_waiting(&shared) > 0) && started.elapsed() < config::DRAIN_TIMEOUT {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    connections.abort_all();
    while connections.join_next().await.is_some() {}
    background.abort_all();
}

impl RunningServer {
    /// [`RunningServer::stop`], printing a failed checkpoint on stderr.
    pub async fn shutdown(self) {
        if let Err(e) = self.stop().await {
            eprintln!("flashscan serve: {e}");
        }
    }

    /// Stops accepting, lets running queries and writes finish (at most `DRAIN_TIMEOUT`),
    /// closes every connection, commits what the committer holds, then checkpoints a
    /// database that takes writes (its delta into pages, the log recycled) so the next
    /// open replays nothing; releases the database.
    pub async fn stop(self) -> Result<Option<flashscan_write::CheckpointReport>, ServerError> {
        let _ = self.stop.send(true);
        let _ = self.accept_task.await;
        let shared = self.shared.clone();
        let _ = tokio::task::spawn_blocking(move || {
            if let Some(c) = &shared.database.committer {
                c.stop();
            }
        })
        .await;
        let Some(write) = self.shared.database.write.clone() else { return Ok(None) };
        let report = tokio::task::spawn_blocking(move || write.checkpoint(&flashscan_write::CheckpointOptions::default()))
            .await
            .map_err(|e| ServerError::InvalidArgument(format!("the checkpoint thread failed: {e}")))?
            .map_err(|e| ServerError::Sql(flashscan_sql::SqlError::Write(e)))?;
        Ok(Some(report))
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
    eprintln!("flashscan serve: shutting down: no new connections; running queries and writes get {} s to finish", config::DRAIN_TIMEOUT.as_secs());
    if let Some(report) = server.stop().await? {
        eprintln!(
            "flashscan serve: checkpoint: {} rows in {} pages written to {} new files ({:.3} s); the log holds nothing to replay",
            report.rows_written, report.pages_written, report.files_created, report.elapsed_s
        );
    }
    eprintln!("flashscan serve: stopped");
    Ok(())
}
