//! What every connection shares: the SQL session with the tables, the admission limits,
//! the cancel registry, the authentication method and the live counters.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use datafusion::error::DataFusionError;
use datafusion::execution::runtime_env::RuntimeEnvBuilder;
use datafusion::execution::session_state::SessionStateBuilder;
use datafusion::prelude::SessionContext;

use crate::admission::Admission;
use crate::cancel::CancelRegistry;
use crate::sampler::Sampler;
use crate::startup::AuthMethod;

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
    pub tables: Vec<crate::psql_catalog::CatalogTable>,
    draining: AtomicBool,
}

impl Shared {
    pub fn new(
        base: SessionContext,
        admission: Arc<Admission>,
        auth: AuthMethod,
        query_memory_bytes: usize,
        sampler: Arc<Sampler>,
        tables: Vec<crate::psql_catalog::CatalogTable>,
    ) -> Shared {
        Shared {
            base,
            admission,
            cancels: Arc::new(CancelRegistry::default()),
            auth,
            query_memory_bytes,
            sampler,
            tables,
            draining: AtomicBool::new(false),
        }
    }

    /// A context for one query: the shared catalog and configuration, and a memory pool
    /// of `--query-memory` of its own, so one query over budget fails (or spills) alone.
    pub fn query_context(&self) -> Result<SessionContext, DataFusionError> {
        let runtime = RuntimeEnvBuilder::new().with_memory_limit(self.query_memory_bytes, 1.0).build_arc()?;
        let state = SessionStateBuilder::new_from_existing(self.base.state()).with_runtime_env(runtime).build();
        Ok(SessionContext::new_with_state(state))
    }

    pub fn start_draining(&self) {
        self.draining.store(true, Ordering::SeqCst);
    }

    pub fn draining(&self) -> bool {
        self.draining.load(Ordering::SeqCst)
    }
}
