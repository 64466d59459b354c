//! Queries compute on a tokio runtime of their own, away from the connections.
//!
//! tokio does not preempt a task: a worker runs a task until it returns `Pending`. A
//! DataFusion operator can compute for seconds inside one poll (a nested-loop join with a
//! predicate that rejects every pair returns nothing until its input ends), so with the
//! queries on the server's runtime two such queries on two workers froze everything else:
//! `select 1` from another client waited 9.8 s, a cancel request or a client's hang-up was
//! read only when a heavy query ended (bench/concurrency/responsiveness.py, docs/server.md
//! "Responsiveness while queries hold every core"). DataFusion's own advice is the same
//! split (its `thread_pools` example): the network on one runtime, the CPU-bound plans on
//! another.
//!
//! Here the connections, cancel requests, the hang-up checks and the group committer stay on
//! the server's runtime (its workers are never held by a plan); a query is planned there
//! (milliseconds at most, and its errors come before any row), and executed on this one:
//! `ExecutionPlan::execute` spawns the partitions' tasks on the runtime it is called on. It has a worker for every partition of every query that
//! may run at once (`--max-active-queries` × partitions), so an admitted query always finds
//! an idle worker: the operating system shares the cores among them, as it shares them among
//! PostgreSQL's backends. Batches cross to the connection's task through a channel of
//! [`BATCHES_IN_FLIGHT`].
//!
//! One kind of plan stays on the connection's task: a constant row (`SELECT 1`, a driver's
//! `SELECT version()`), which reads no table and computes one row once ([`runs_inline`]).
//! The hop to this runtime and back is two cross-thread wake-ups, a large part of such a
//! statement's round trip (docs/server.md, "The fixed cost of a statement"), and such a
//! plan cannot hold a worker the way a join over a table can.


use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use arrow::array::RecordBatch;
use datafusion::error::DataFusionError;
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_expr::{PhysicalExpr, ScalarFunctionExpr};
use datafusion::physical_plan::empty::EmptyExec;
use datafusion::physical_plan::placeholder_row::PlaceholderRowExec;
use datafusion::physical_plan::coalesce_partitions::CoalescePartitionsExec;
use datafusion::physical_plan::filter::FilterExec;
use datafusion::physical_plan::limit::{GlobalLimitExec, LocalLimitExec};
use datafusion::physical_plan::projection::ProjectionExec;
use datafusion::physical_plan::repartition::RepartitionExec;
use datafusion::physical_plan::execution_plan::{ChildrenPropertiesMode, ReplaceChildrenOptions};
use datafusion::physical_plan::{ExecutionPlanProperties, Partitioning};
use flashscan_sql::exec_plan::{FlashscanExec, INLINE_UNIT_PAGES_MAX};
use datafusion::physical_plan::ExecutionPlan;
use futures::{FutureExt, StreamExt};
use tokio::sync::mpsc;

/// Batches a query may compute ahead of its client: one being sent, one ready. More only
/// holds memory the query's pool does not see.
pub const BATCHES_IN_FLIGHT: usize = 2;
/// Workers at most, whatever `--max-active-queries` × partitions says: threads are cheap
/// while parked, but not free (a stack each).
pub const QUERY_WORKERS_MAX: usize = 512;

/// The runtime the queries' plans run on; shut down (without waiting) when dropped.
pub struct QueryRuntime {
    runtime: Option<tokio::runtime::Runtime>,
    pub workers: usize,
}

impl std::fmt::Debug for QueryRuntime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QueryRuntime").field("workers", &self.workers).finish()
    }
}

impl QueryRuntime {
    /// A worker per partition of every query that may run at once.
    pub fn for_queries(max_active_queries: usize, partitions: usize) -> std::io::Result<QueryRuntime> {
        let workers = max_active_queries.saturating_mul(partitions.max(1)).clamp(1, QUERY_WORKERS_MAX);
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(workers).thread_name("flashscan-query").thread_stack_size(flashscan_sql::SQL_THREAD_STACK_BYTES).enable_all().build()?;
        Ok(QueryRuntime { runtime: Some(runtime), workers })
    }

    /// Runs `execute` (a physical plan's `execute`, which spawns the plan's partition
    /// tasks on the current runtime) and polls its stream on the query runtime. Planning
    /// stays with the caller: it is short, and its errors come before any row. The returned
    /// stream owns the query: dropped, the query stops at its next await.
    pub fn start<F>(&self, execute: F) -> QueryStream
    where
        F: FnOnce() -> Result<SendableRecordBatchStream, DataFusionError> + Send + 'static,
    {
        let (tx, rx) = mpsc::channel(BATCHES_IN_FLIGHT);
        let runtime = self.runtime.as_ref().expect("the query runtime lives until dropped");
        let task = runtime.spawn(async move {
            let mut batches = match execute() {
                Ok(s) => s,
                Err(e) => {
                    let _ = tx.send(Err(e)).await;
                    return;
                }
            };
            while let Some(item) = batches.next().await {
                if tx.send(item).await.is_err() {
                    return; // the connection dropped the query
                }
            }
        });
        QueryStream { source: Source::Runtime { batches: rx, task, ended: false } }
    }
}

/// Functions whose result grows with an argument's value (`repeat('x', n)`, `range(n)`): a
/// row calling one may compute for long, so it goes to the query runtime. (The planner
/// evaluates calls on constants itself, on the connection's task like all planning; what
/// reaches the plan has a volatile argument, `repeat('x', (random() * 1e9)::int)`.)
use flashscan_sql::point_plan::FUNCTIONS_SIZED_BY_ARGUMENT;

/// True for a plan that computes at most one row from constants, reading no table: a
/// projection of expressions over DataFusion's one empty row (or no row). Such a plan is
/// run on the connection's task ([`QueryStream::inline`]).
pub fn runs_inline(plan: &Arc<dyn ExecutionPlan>) -> bool {
    if plan.downcast_ref::<PlaceholderRowExec>().is_some() || plan.downcast_ref::<EmptyExec>().is_some() {
        return plan.children().is_empty();
    }
    let Some(projection) = plan.downcast_ref::<ProjectionExec>() else { return false };
    projection.expr().iter().all(|p| bounded_expression(&p.expr)) && plan.children().iter().all(|c| runs_inline(c))
}

/// Rows of an index lookup run on the connection's task at most: about what a unit of
/// `INLINE_UNIT_PAGES_MAX` heap pages holds of 100-byte rows.
const INLINE_LOOKUP_ROWS_MAX: usize = INLINE_UNIT_PAGES_MAX as usize * 80;

/// A key lookup over a small table (`SELECT * FROM t WHERE id = $1` with no index: a
/// filter over one scan unit of at most `INLINE_UNIT_PAGES_MAX` pages), made to run on the
/// connection's task as [`runs_inline`]'s constant rows do: the round-robin repartition and
/// the merge of partitions the physical optimizer put around the filter are taken out (one
/// unit gives one partition), and the scan reads its unit at the first poll (the task
/// context's `ReadSmallUnitsInline`). Before, such a lookup crossed four threads and back —
/// connection, query runtime, the repartition's task, a blocking thread for the scan —
/// and the hand-offs (thread park/unpark, futex, scheduling) were a third of its server
/// CPU (docs/server.md, "The fixed cost of a statement"). Its work is bounded by the unit's
/// pages, as a constant row's is by its expressions; everything else goes to the runtime.
pub fn small_scan_plan(plan: &Arc<dyn ExecutionPlan>) -> Option<Arc<dyn ExecutionPlan>> {
    let small = one_partition(plan)?;
    (small.output_partitioning().partition_count() == 1).then_some(small)
}

fn one_partition(plan: &Arc<dyn ExecutionPlan>) -> Option<Arc<dyn ExecutionPlan>> {
    if let Some(scan) = plan.downcast_ref::<FlashscanExec>() {
        return (scan.unit_count() <= 1 && scan.page_count() <= INLINE_UNIT_PAGES_MAX).then(|| plan.clone());
    }
    // An index lookup's rows were read at planning: nothing left to wait for, and the
    // filter and projection above it run over at most as many rows as a small unit holds.
    if let Some(lookup) = plan.downcast_ref::<flashscan_sql::index_scan::IndexLookupExec>() {
        return (lookup.row_count() <= INLINE_LOOKUP_ROWS_MAX).then(|| plan.clone());
    }
    if let Some(r) = plan.downcast_ref::<RepartitionExec>() {
        return match r.partitioning() {
            Partitioning::RoundRobinBatch(_) => one_partition(r.input()),
            _ => None,
        };
    }
    if let Some(c) = plan.downcast_ref::<CoalescePartitionsExec>() {
        // Its fetch (a LIMIT pushed into it) would be lost with it.
        return if c.fetch().is_none() { one_partition(c.input()) } else { None };
    }
    let kept = plan.downcast_ref::<FilterExec>().is_some()
        || plan.downcast_ref::<ProjectionExec>().is_some()
        || plan.downcast_ref::<GlobalLimitExec>().is_some()
        || plan.downcast_ref::<LocalLimitExec>().is_some();
    if !kept {
        return None;
    }
    if let Some(p) = plan.downcast_ref::<ProjectionExec>() {
        if !p.expr().iter().all(|e| bounded_expression(&e.expr)) {
            return None;
        }
    }
    let children = plan.children();
    let [child] = children.as_slice() else { return None };
    let new_child = one_partition(child)?;
    if Arc::ptr_eq(&new_child, child) {
        return Some(plan.clone());
    }
    // The child's partitioning changed: the node's properties are computed again.
    plan.clone().replace_children(vec![new_child], ReplaceChildrenOptions::new(ChildrenPropertiesMode::Recompute)).ok()
}

fn bounded_expression(expr: &Arc<dyn PhysicalExpr>) -> bool {
    if let Some(f) = expr.downcast_ref::<ScalarFunctionExpr>() {
        if FUNCTIONS_SIZED_BY_ARGUMENT.contains(&f.name()) {
            return false;
        }
    }
    expr.children().iter().all(|c| bounded_expression(c))
}

impl QueryStream {
    /// Runs a plan [`runs_inline`] accepts on the caller's task: its one partition is polled
    /// by `next`, a panic in it is an error (as on the runtime), not the connection's end.
    pub fn inline(plan: Arc<dyn ExecutionPlan>, task_ctx: Arc<TaskContext>) -> QueryStream {
        debug_assert!(runs_inline(&plan) || small_scan_plan(&plan).is_some_and(|p| Arc::ptr_eq(&p, &plan)));
        let schema = plan.schema();
        let started = std::panic::catch_unwind(AssertUnwindSafe(|| datafusion::physical_plan::execute_stream(plan, task_ctx)));
        let stream = match started {
            Ok(Ok(s)) => s,
            Ok(Err(e)) => error_stream(schema, e),
            Err(panic) => error_stream(schema, panic_error(panic.as_ref())),
        };
        QueryStream { source: Source::Inline { batches: stream, ended: false } }
    }
}

fn error_stream(schema: arrow::datatypes::SchemaRef, e: DataFusionError) -> SendableRecordBatchStream {
    Box::pin(datafusion::physical_plan::stream::RecordBatchStreamAdapter::new(schema, futures::stream::once(async move { Err(e) })))
}

fn panic_error(panic: &(dyn std::any::Any + Send)) -> DataFusionError {
    let what = panic.downcast_ref::<&str>().map(|s| s.to_string()).or_else(|| panic.downcast_ref::<String>().cloned()).unwrap_or_default();
    DataFusionError::Execution(format!("the query stopped: panic: {what}"))
}

impl Drop for QueryRuntime {
    fn drop(&mut self) {
        // Dropping a runtime blocks until its tasks end, which tokio refuses inside another
        // runtime (the server's); a query's tasks are aborted by their QueryStream anyway.
        if let Some(r) = self.runtime.take() {
            r.shutdown_background();
        }
    }
}

/// One running query: on the query runtime, or inline on the caller's task.
pub struct QueryStream {
    source: Source,
}

enum Source {
    Runtime {
        batches: mpsc::Receiver<Result<RecordBatch, DataFusionError>>,
        task: tokio::task::JoinHandle<()>,
        /// The task's end was awaited (a JoinHandle is awaited once).
        ended: bool,
    },
    Inline {
        batches: SendableRecordBatchStream,
        /// Ended (its end, or a panic): not polled again.
        ended: bool,
    },
}

impl QueryStream {
    /// The next batch; `None` at the end.
    pub async fn next(&mut self) -> Option<Result<RecordBatch, DataFusionError>> {
        match &mut self.source {
            Source::Runtime { batches, task, ended } => {
                let item = batches.recv().await;
                if item.is_none() && !*ended {
                    // The sender is gone, so the task is ending: at the end of its rows, or in a
                    // panic of the plan, which must be an error, not a short answer.
                    let end = task.await;
                    *ended = true;
                    if let Err(e) = end {
                        if e.is_panic() {
                            return Some(Err(DataFusionError::Execution(format!("the query stopped: {e}"))));
                        }
                    }
                }
                item
            }
            Source::Inline { batches, ended } => {
                if *ended {
                    return None;
                }
                match AssertUnwindSafe(batches.next()).catch_unwind().await {
                    Ok(Some(item)) => Some(item),
                    Ok(None) => {
                        *ended = true;
                        None
                    }
                    Err(panic) => {
                        *ended = true;
                        Some(Err(panic_error(panic.as_ref())))
                    }
                }
            }
        }
    }
}

impl Drop for QueryStream {
    fn drop(&mut self) {
        if let Source::Runtime { task, .. } = &self.source {
            task.abort();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::datatypes::Schema;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    use std::time::{Duration, Instant};
    use tokio::sync::oneshot;

    fn one_batch_stream() -> SendableRecordBatchStream {
        let schema = Arc::new(Schema::new(vec![arrow::datatypes::Field::new("x", arrow::datatypes::DataType::Int64, false)]));
        let batch = RecordBatch::try_new(schema.clone(), vec![Arc::new(arrow::array::Int64Array::from(vec![1, 2, 3]))]).unwrap();
        Box::pin(datafusion::physical_plan::stream::RecordBatchStreamAdapter::new(schema, futures::stream::iter(vec![Ok(batch)])))
    }

    /// The point of the module: a plan that holds its worker for a long time (a busy loop
    /// that never awaits) leaves the caller's runtime free.
    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn a_plan_that_never_yields_does_not_hold_the_callers_worker() {
        let queries = QueryRuntime::for_queries(1, 1).expect("runtime");
        let spinning = Arc::new(AtomicBool::new(true));
        let spin = spinning.clone();
        let mut stream = queries.start(move || {
            while spin.load(Ordering::Relaxed) {
                std::hint::spin_loop();
            }
            Ok(one_batch_stream())
        });
        // This runtime's one worker still runs timers and tasks while the plan spins.
        let started = Instant::now();
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(started.elapsed() < Duration::from_secs(5));
        assert!(tokio::spawn(async { 7 }).await.unwrap() == 7);
        spinning.store(false, Ordering::Relaxed);
        let batch = stream.next().await.expect("a batch").expect("ok");
        assert_eq!(batch.num_rows(), 3);
        assert!(stream.next().await.is_none());
        drop(queries);
    }

    #[tokio::test]
    async fn an_execute_error_is_the_first_item() {
        let queries = QueryRuntime::for_queries(2, 2).expect("runtime");
        assert_eq!(queries.workers, 4);
        let mut s = queries.start(|| Err(DataFusionError::Execution("cannot open the file".into())));
        assert!(s.next().await.expect("the error").unwrap_err().to_string().contains("cannot open the file"));
        assert!(s.next().await.is_none());
        drop(queries);
    }

    #[tokio::test]
    async fn a_dropped_stream_stops_its_query() {
        let queries = QueryRuntime::for_queries(1, 1).expect("runtime");
        let (dropped_tx, dropped_rx) = oneshot::channel::<()>();
        struct Signal(Option<oneshot::Sender<()>>);
        impl Drop for Signal {
            fn drop(&mut self) {
                let _ = self.0.take().map(|s| s.send(()));
            }
        }
        let s = queries.start(move || {
            let signal = Signal(Some(dropped_tx));
            let never = futures::stream::once(async move {
                let _signal = signal;
                futures::future::pending::<()>().await;
                Ok(RecordBatch::new_empty(Arc::new(Schema::empty())))
            });
            Ok(Box::pin(datafusion::physical_plan::stream::RecordBatchStreamAdapter::new(Arc::new(Schema::empty()), never)) as SendableRecordBatchStream)
        });
        drop(s);
        // Sent (dropped while pending) or closed (dropped before its first poll): either
        // way the plan's future is gone.
        let _ = tokio::time::timeout(Duration::from_secs(10), dropped_rx).await.expect("aborted in time");
        drop(queries);
    }

    async fn physical(ctx: &datafusion::prelude::SessionContext, sql: &str) -> Arc<dyn ExecutionPlan> {
        ctx.sql(sql).await.expect("plans").create_physical_plan().await.expect("physical plan")
    }

    #[tokio::test]
    async fn constant_rows_run_inline_and_table_reads_do_not() {
        let ctx = datafusion::prelude::SessionContext::new();
        for sql in ["select 1", "select 1 as a, 'x' || 'y' as b", "select random()", "select 1 where false", "select repeat('x', 3)"] {
            assert!(runs_inline(&physical(&ctx, sql).await), "{sql}");
        }
        for sql in [
            "select * from (values (1), (2)) as t(a)",
            "select * from generate_series(1, 10)",
            "select repeat('x', (random() * 3)::int)",
        ] {
            assert!(!runs_inline(&physical(&ctx, sql).await), "{sql}");
        }
    }

    #[tokio::test]
    async fn an_inline_query_streams_its_row_then_ends() {
        let ctx = datafusion::prelude::SessionContext::new();
        let mut s = QueryStream::inline(physical(&ctx, "select 41 + 1 as answer").await, ctx.task_ctx());
        let batch = s.next().await.expect("a batch").expect("ok");
        assert_eq!(batch.num_rows(), 1);
        assert!(s.next().await.is_none());
        assert!(s.next().await.is_none(), "ended stays ended");
    }

    #[tokio::test]
    async fn a_panic_in_an_inline_query_is_an_error() {
        use datafusion::logical_expr::{create_udf, ColumnarValue, Volatility};
        let ctx = datafusion::prelude::SessionContext::new();
        let panics = Arc::new(|_: &[ColumnarValue]| -> datafusion::error::Result<ColumnarValue> { panic!("operator bug") });
        ctx.register_udf(create_udf("panics", vec![], arrow::datatypes::DataType::Int64, Volatility::Volatile, panics));
        let plan = physical(&ctx, "select panics()").await;
        assert!(runs_inline(&plan));
        let mut s = QueryStream::inline(plan, ctx.task_ctx());
        let item = s.next().await.expect("an error, not the end");
        assert!(item.unwrap_err().to_string().contains("operator bug"));
        assert!(s.next().await.is_none());
    }

    #[tokio::test]
    async fn a_panicking_plan_is_an_error_not_an_end() {
        let queries = QueryRuntime::for_queries(1, 1).expect("runtime");
        let schema = Arc::new(Schema::empty());
        let mut s = queries.start(move || {
            let panicking = futures::stream::once(async {
                if true {
                    panic!("operator bug");
                }
                Ok::<RecordBatch, DataFusionError>(RecordBatch::new_empty(Arc::new(Schema::empty())))
            });
            Ok(Box::pin(datafusion::physical_plan::stream::RecordBatchStreamAdapter::new(schema, panicking)) as SendableRecordBatchStream)
        });
        let item = s.next().await.expect("an error, not the end");
        assert!(item.unwrap_err().to_string().contains("stopped"));
        drop(queries);
    }
}
