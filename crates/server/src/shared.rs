//! What every connection shares: the SQL session with the tables, the admission limits,
//! the cancel registry, the authentication method and the live counters.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};

use datafusion::error::DataFusionError;
use datafusion::execution::runtime_env::RuntimeEnvBuilder;
use datafusion::execution::session_state::SessionStateBuilder;
use datafusion::prelude::SessionContext;

use crate::admission::Admission;
use crate::cancel::CancelRegistry;
use crate::sampler::Sampler;
use crate::psql_catalog::CatalogTable;
use crate::query_runtime::QueryRuntime;
use crate::startup::AuthMethod;
use crate::writes::Committer;

/// The database's SQL session and, for a database made by `flashscan init`, its write
/// path (held as the one writer while the server runs).
pub struct Database {
    pub session: Arc<flashscan_sql::FlashscanSession>,
    pub write: Option<Arc<flashscan_write::WritePath>>,
    /// INSERT and COPY rows go through it (group commit); `None` without a write path.
    pub committer: Option<Committer>,
    /// CREATE/DROP TABLE re-register the tables: statements are planned under the read
    /// side, DDL runs under the write side, so no plan sees a table list half-made.
    pub ddl: tokio::sync::RwLock<()>,
}

pub struct Shared {
    /// Tables, `sys.*` views and `flashscan_stats_history` registered; queries run in a
    /// copy of its state with their own memory pool.
    pub base: SessionContext,
    pub admission: Arc<Admission>,
    pub cancels: Arc<CancelRegistry>,
    pub auth: AuthMethod,
    pub query_memory_bytes: usize,
    pub sampler: Arc<Sampler>,
    /// Table names with their catalog oids, for psql's `\dt` and `\d`.
    tables: RwLock<Vec<CatalogTable>>,
    pub database: Database,
    draining: AtomicBool,
    /// Prepared (and literal) `INSERT … VALUES` skip DataFusion per execution
    /// (`fast_insert.rs`); off only to compare against the SQL path.
    pub fast_insert: bool,
    /// Where every query's plan runs (`query_runtime.rs`).
    pub queries: QueryRuntime,
}

impl Shared {
    pub fn new(
        base: SessionContext,
        admission: Arc<Admission>,
        auth: AuthMethod,
        query_memory_bytes: usize,
        sampler: Arc<Sampler>,
        tables: Vec<CatalogTable>,
        database: Database,
        queries: QueryRuntime,
    ) -> Shared {
        Shared {
            base,
            admission,
            cancels: Arc::new(CancelRegistry::default()),
            auth,
            query_memory_bytes,
            sampler,
            tables: RwLock::new(tables),
            database,
            draining: AtomicBool::new(false),
            fast_insert: true,
            queries,
        }
    }

    pub fn with_fast_insert(mut self, on: bool) -> Shared {
        self.fast_insert = on;
        self
    }

    /// A context for one query: the shared catalog and configuration with the connection's
    /// `flashscan.*` `settings` and pid (`pg_backend_pid()`), and a memory pool of
    /// `--query-memory` of its own, so one query over budget fails (or spills) alone.
    pub fn query_context(&self, settings: &flashscan_sql::FlashscanSettings, backend_pid: i32) -> Result<SessionContext, DataFusionError> {
        let runtime = RuntimeEnvBuilder::new().with_memory_limit(self.query_memory_bytes, 1.0).build_arc()?;
        let mut state = SessionStateBuilder::new_from_existing(self.base.state()).with_runtime_env(runtime).build();
        state.config_mut().options_mut().extensions.insert(settings.clone());
        state.config_mut().options_mut().extensions.insert(crate::pg_catalog::Connection { backend_pid });
        // READ COMMITTED: the query reads every table as of now, each transaction whole or
        // not at all (`flashscan_write::ReadSnapshot`, found by the tables' scans here).
        if let Some(write) = &self.database.write {
            let snapshot = write.read_snapshot().map_err(|e| DataFusionError::External(Box::new(e)))?;
            state.config_mut().set_extension(Arc::new(snapshot));
        }
        Ok(SessionContext::new_with_state(state))
    }

    /// The server's `flashscan.*` settings (from its environment at start): a new
    /// connection's.
    pub fn settings(&self) -> flashscan_sql::FlashscanSettings {
        flashscan_sql::FlashscanSettings::of(self.base.copied_config().options())
    }

    pub fn tables(&self) -> Vec<CatalogTable> {
        self.tables.read().map(|t| t.clone()).unwrap_or_else(|p| p.into_inner().clone())
    }

    pub fn set_tables(&self, tables: Vec<CatalogTable>) {
        *self.tables.write().unwrap_or_else(|p| p.into_inner()) = tables;
    }

    pub fn start_draining(&self) {
        self.draining.store(true, Ordering::SeqCst);
    }

    pub fn draining(&self) -> bool {
        self.draining.load(Ordering::SeqCst)
    }
}
