//! What every connection shares: the SQL session with the tables, the admission limits,
//! the cancel registry, the authentication method and the live counters.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use datafusion::execution::session_state::SessionState;
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
    /// Tables, `sys.*` views and `flashscan_stats_history` registered; connections plan in
    /// a copy of its state (`planning.rs`), queries run with their own memory pool.
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
    /// See `catalog_generation`.
    catalog_generation: AtomicU64,
    /// Every connection's cursors by pid, for `pg_cursors`.
    pub cursor_lists: Arc<crate::cursors::CursorLists>,
    /// Statements planned by shape (`plan_shapes.rs`), over all connections.
    pub shapes: ShapeCounters,
}

/// What `plan_shapes.rs` did, counted over all connections.
#[derive(Default, Debug)]
pub struct ShapeCounters {
    /// Statements whose plan was a kept shape's with their literals put in.
    pub reused: AtomicU64,
    /// Shapes learned (their first statement planned twice to check).
    pub learned: AtomicU64,
    /// Shapes found not to plan the same with other literals: planned every time.
    pub refused: AtomicU64,
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
        cursor_lists: Arc<crate::cursors::CursorLists>,
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
            catalog_generation: AtomicU64::new(0),
            cursor_lists,
            shapes: ShapeCounters::default(),
        }
    }

    pub fn with_fast_insert(mut self, on: bool) -> Shared {
        self.fast_insert = on;
        self
    }

    /// A planning state for a connection with `settings` (its `flashscan.*` switches): the
    /// shared catalog, functions and configuration. Kept by the connection between its
    /// statements (`planning.rs`); made again after `catalog_changed`.
    pub fn planning_state(&self, settings: &flashscan_sql::FlashscanSettings, backend_pid: i32, sequences: &flashscan_sql::sequence_functions::SessionSequences) -> SessionState {
        let mut state = self.base.state();
        state.config_mut().options_mut().extensions.insert(settings.clone());
        state.config_mut().options_mut().extensions.insert(crate::pg_catalog::Connection { backend_pid });
        state.config_mut().options_mut().extensions.insert(sequences.clone());
        state
    }

    /// Counts changes to `base` that a kept planning state does not see (the catalog's
    /// tables are shared; the functions that list them are not).
    pub fn catalog_generation(&self) -> u64 {
        self.catalog_generation.load(Ordering::Acquire)
    }

    /// After DDL re-registered `base`'s catalog functions: connections make new planning
    /// states for their next statements.
    pub fn catalog_changed(&self) {
        self.catalog_generation.fetch_add(1, Ordering::AcqRel);
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
