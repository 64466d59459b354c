//! A connection's DataFusion planning state: made once, kept between its statements.
//!
//! DataFusion's recipe for one query, `SessionContext::state()`, copies the whole session
//! state: the registries of every scalar, aggregate and window function (hundreds of named
//! entries, each key a `String`), the configuration, the rule lists. The server made that
//! copy four times per statement, and once more through `SessionStateBuilder` to give the
//! query its own memory pool, which registers every function again — most of the fixed cost
//! of `SELECT 1` over the wire (docs/server.md, "The fixed cost of a statement").
//!
//! Here a connection keeps one state with its own `flashscan.*` settings, and lends it to
//! each statement in turn (a connection runs one statement at a time, so the lease is never
//! contended; a lease lost to a dropped future only costs the next statement a fresh copy).
//! The state is made again when the connection's settings change, or when DDL changed what
//! the server's session holds beyond the shared catalog (`Shared::catalog_changed`: the
//! `regclass` functions carry the table list). The query's memory pool is not part of it:
//! it goes to the query's execution (`task_context`), the only place DataFusion reads it.

use std::ops::Deref;
use std::sync::{Arc, Mutex};

use datafusion::error::DataFusionError;
use datafusion::execution::runtime_env::RuntimeEnvBuilder;
use datafusion::execution::session_state::SessionState;
use datafusion::execution::TaskContext;
use flashscan_sql::FlashscanSettings;

use crate::plan_reuse::{KeptPlan, KeptPlans};
use crate::plan_shapes::{ShapeEntry, Shapes};
use crate::shared::Shared;

/// A planning state and what it was made from.
struct Kept {
    state: SessionState,
    settings: FlashscanSettings,
    /// `Shared::catalog_generation` when made.
    generation: u64,
}

/// One connection's planning state, between statements.
#[derive(Default)]
pub struct ConnectionPlanning {
    kept: Mutex<Option<Kept>>,
    /// Constant rows' physical plans by statement text (`plan_reuse.rs`), valid for
    /// `kept_plans_of`'s settings and generation.
    kept_plans: Mutex<KeptPlansOf>,
    /// The connection's memory of its `nextval`s (`currval`, `lastval`), in every state it
    /// plans with.
    pub sequences: flashscan_sql::sequence_functions::SessionSequences,
}

#[derive(Default)]
struct KeptPlansOf {
    plans: KeptPlans,
    /// Logical plans by statement shape (`plan_shapes.rs`).
    shapes: Shapes,
    settings: Option<FlashscanSettings>,
    generation: u64,
}

impl KeptPlansOf {
    /// Kept plans valid now (planned with `settings` in `generation`), or None.
    fn valid(&self, settings: &FlashscanSettings, generation: u64) -> bool {
        self.generation == generation && self.settings.as_ref() == Some(settings)
    }

    /// Ready to keep a plan made with `settings` in `generation`: what was kept for others
    /// is dropped.
    fn for_keeping(&mut self, settings: &FlashscanSettings, generation: u64) -> &mut KeptPlansOf {
        if !self.valid(settings, generation) {
            self.plans.clear();
            self.shapes.clear();
            self.generation = generation;
            self.settings = Some(settings.clone());
        }
        self
    }
}

impl std::fmt::Debug for ConnectionPlanning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConnectionPlanning").finish_non_exhaustive()
    }
}

impl ConnectionPlanning {
    /// The plan kept for `text`, if it was planned with these settings in this generation.
    pub fn kept_plan(&self, shared: &Shared, settings: &FlashscanSettings, text: &str) -> Option<KeptPlan> {
        let kept = self.kept_plans.lock().unwrap_or_else(|p| p.into_inner());
        if !kept.valid(settings, shared.catalog_generation()) {
            return None;
        }
        kept.plans.get(text).cloned()
    }

    /// Keeps `plan` for `text`, planned with `settings` in `generation` (read before
    /// planning began: a DDL meanwhile only makes the plan unused).
    pub fn keep_plan(&self, settings: &FlashscanSettings, generation: u64, text: &str, plan: KeptPlan) {
        let mut kept = self.kept_plans.lock().unwrap_or_else(|p| p.into_inner());
        kept.for_keeping(settings, generation).plans.keep(text, plan);
    }

    /// What is known of the statement shape `key` with these settings in `generation`:
    /// `Err(())` when nothing is and no more shapes can be kept (the statement is planned,
    /// not learned).
    pub fn shape(&self, settings: &FlashscanSettings, generation: u64, key: &str) -> Result<Option<ShapeEntry>, ()> {
        let kept = self.kept_plans.lock().unwrap_or_else(|p| p.into_inner());
        if !kept.valid(settings, generation) {
            return Ok(None);
        }
        match kept.shapes.get(key) {
            Some(entry) => Ok(Some(entry.clone())),
            None if kept.shapes.is_full() => Err(()),
            None => Ok(None),
        }
    }

    /// Keeps what was learned of the shape `key`, planned with `settings` in `generation`
    /// (read before planning began).
    pub fn keep_shape(&self, settings: &FlashscanSettings, generation: u64, key: &str, entry: ShapeEntry) {
        let mut kept = self.kept_plans.lock().unwrap_or_else(|p| p.into_inner());
        kept.for_keeping(settings, generation).shapes.keep(key, entry);
    }

    /// The connection's state for one statement, with `settings` (the connection's now) and
    /// the statement's start time (DataFusion's `now()`); given back when the lease drops.
    /// `own`: the connection's open transaction's own changes, which the statement reads.
    pub fn lease(&self, shared: &Shared, settings: &FlashscanSettings, backend_pid: i32, own: Option<&flashscan_write::own_writes::OwnChanges>) -> PlanningLease<'_> {
        let generation = shared.catalog_generation();
        let kept = self.kept.lock().unwrap_or_else(|p| p.into_inner()).take();
        let mut kept = match kept {
            Some(k) if k.generation == generation && k.settings == *settings => k,
            _ => Kept { state: shared.planning_state(settings, backend_pid, &self.sequences), settings: settings.clone(), generation },
        };
        kept.state.mark_start_execution();
        // READ COMMITTED: the statement reads every table as of now, each transaction whole
        // or not at all (`flashscan_write::ReadSnapshot`, found by the tables' scans). Taken
        // per lease, so a kept state never carries an older statement's snapshot. (Without
        // one — a poisoned write path — each scan takes its own.)
        if let Some(Ok(snapshot)) = shared.database.write.as_ref().map(|w| w.read_snapshot_own(own)) {
            kept.state.config_mut().set_extension(Arc::new(snapshot));
        }
        PlanningLease { home: self, kept: Some(kept) }
    }
}

/// A connection's planning state lent to one statement.
pub struct PlanningLease<'a> {
    home: &'a ConnectionPlanning,
    kept: Option<Kept>,
}

impl Deref for PlanningLease<'_> {
    type Target = SessionState;

    fn deref(&self) -> &SessionState {
        // Some from `lease` until `drop`.
        &self.kept.as_ref().expect("a lease holds its state until dropped").state
    }
}

impl std::ops::DerefMut for PlanningLease<'_> {
    /// A statement may attach what it reads with (an UPDATE's own snapshot): the next
    /// lease attaches its own.
    fn deref_mut(&mut self) -> &mut SessionState {
        &mut self.kept.as_mut().expect("a lease holds its state until dropped").state
    }
}

impl Drop for PlanningLease<'_> {
    fn drop(&mut self) {
        if let Some(k) = self.kept.take() {
            let mut home = self.home.kept.lock().unwrap_or_else(|p| p.into_inner());
            // A newer state put back meanwhile (a lease given up mid-statement) stays.
            if home.is_none() {
                *home = Some(k);
            }
        }
    }
}

impl PlanningLease<'_> {
    /// What a query's plan runs with: the state's configuration and functions, and a memory
    /// pool of `query_memory_bytes` of its own, so one query over budget fails (or spills)
    /// alone.
    /// With `read_inline`, its scans read small units on the caller's task
    /// (`query_runtime::small_scan_plan`).
    pub fn task_context(&self, query_memory_bytes: usize, read_inline: bool) -> Result<Arc<TaskContext>, DataFusionError> {
        let runtime = RuntimeEnvBuilder::new().with_memory_limit(query_memory_bytes, 1.0).build_arc()?;
        let context = TaskContext::from(&**self).with_runtime(runtime);
        if !read_inline {
            return Ok(Arc::new(context));
        }
        let config = context.session_config().clone().with_extension(Arc::new(flashscan_sql::exec_plan::ReadSmallUnitsInline));
        Ok(Arc::new(context.with_session_config(config)))
    }
}

/// What a plan holding its answer runs with (an answered `IndexLookupExec`: its `execute`
/// hands out the rows it holds and reads nothing from its context): one for the process.
pub fn answered_task_context() -> Arc<TaskContext> {
    static CONTEXT: std::sync::OnceLock<Arc<TaskContext>> = std::sync::OnceLock::new();
    CONTEXT.get_or_init(|| Arc::new(TaskContext::default())).clone()
}

impl PlanningLease<'_> {
    /// What a kept constant row runs with, each time (`plan_reuse.rs`): the state's
    /// configuration without the statement's snapshot (it reads no table, and a kept
    /// snapshot would keep old deltas alive), no function registries (its functions are in
    /// its physical expressions already), a memory pool of `query_memory_bytes`.
    pub fn kept_task_context(&self, query_memory_bytes: usize) -> Result<Arc<TaskContext>, DataFusionError> {
        let runtime = RuntimeEnvBuilder::new().with_memory_limit(query_memory_bytes, 1.0).build_arc()?;
        let mut config = self.config().clone();
        config.set_extension(Arc::new(flashscan_write::ReadSnapshot::default()));
        let id = self.session_id().to_string();
        Ok(Arc::new(TaskContext::new(None, id, config, Default::default(), Default::default(), Default::default(), Default::default(), runtime)))
    }
}
