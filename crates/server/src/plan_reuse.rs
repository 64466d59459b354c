//! Plans kept to run again: a constant row's physical plan, per connection and statement
//! text (issue 32 item 3; docs/server.md, "The fixed cost of a statement").
//!
//! `SELECT 1` (a driver's `SELECT version()`, a pooler's health check) spent most of its
//! server time in DataFusion's planning: SQL to logical plan, the logical optimizer, the
//! physical planner and optimizer — for a plan that is the same every time. A plan may be
//! kept and run again only when running it again gives what planning it again would:
//!
//! - it reads no table (a scan's plan carries the snapshot and the files of its planning:
//!   `FlashscanTable::scan`), and has no parameter (`$1` is bound before planning);
//! - every function in it is `Immutable`: the planner folds `Stable` ones (`now()`,
//!   `current_setting`) into literals of its own moment, and `Volatile` ones are left out
//!   for simplicity;
//! - its physical plan is one [`runs_inline`] accepts (projections over one empty row),
//!   whose operators keep no state between executions;
//! - the connection's settings and the server's catalog generation are those it was
//!   planned with (`regclass` functions fold the table list in); otherwise it is dropped.
//!
//! A kept plan is looked up by the statement's text, the simple protocol's and a prepared
//! statement's alike (the same text plans the same way); a prepared statement with
//! parameters never is.
//!
//! [`runs_inline`]: crate::query_runtime::runs_inline

use std::collections::HashMap;
use std::sync::Arc;

use arrow::datatypes::SchemaRef;
use datafusion::common::tree_node::{TreeNode, TreeNodeRecursion};
use datafusion::error::DataFusionError;
use datafusion::execution::TaskContext;
use datafusion::logical_expr::{Expr, LogicalPlan, Volatility};
use datafusion::physical_plan::ExecutionPlan;

/// Kept plans per connection at most; when full, nothing more is kept (a client that sends
/// many different constant statements plans each, as before).
pub const KEPT_PLANS_MAX: usize = 64;
/// Statement texts longer than this are not kept (the key is the whole text).
pub const KEPT_PLAN_TEXT_BYTES_MAX: usize = 4096;

/// A constant row's plan, ready to run again.
#[derive(Clone)]
pub struct KeptPlan {
    pub physical: Arc<dyn ExecutionPlan>,
    /// The logical plan's schema: what the client was (or will be) described.
    pub schema: SchemaRef,
    /// What it runs with: no table, so no snapshot; a memory pool of its own.
    pub task_ctx: Arc<TaskContext>,
}

impl KeptPlan {
    /// The plan for one more execution: each operator made again with its metrics empty
    /// (DataFusion's `reset_plan_states`). Executing the kept nodes themselves would add
    /// each execution's metrics to theirs, for as long as the connection lives.
    pub fn for_execution(&self) -> Result<Arc<dyn ExecutionPlan>, DataFusionError> {
        datafusion::physical_plan::execution_plan::reset_plan_states(self.physical.clone())
    }
}

impl std::fmt::Debug for KeptPlan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeptPlan").field("schema", &self.schema).finish_non_exhaustive()
    }
}

/// A connection's kept plans by statement text (valid for one settings and generation:
/// `planning.rs` clears them with the planning state).
#[derive(Default, Debug)]
pub struct KeptPlans {
    by_text: HashMap<String, KeptPlan>,
}

impl KeptPlans {
    pub fn get(&self, text: &str) -> Option<&KeptPlan> {
        self.by_text.get(text)
    }

    /// Keeps `plan` for `text` if there is room; true if kept.
    pub fn keep(&mut self, text: &str, plan: KeptPlan) -> bool {
        if text.len() > KEPT_PLAN_TEXT_BYTES_MAX || (self.by_text.len() >= KEPT_PLANS_MAX && !self.by_text.contains_key(text)) {
            return false;
        }
        self.by_text.insert(text.to_string(), plan);
        true
    }

    pub fn clear(&mut self) {
        self.by_text.clear();
    }

    pub fn len(&self) -> usize {
        self.by_text.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_text.is_empty()
    }
}

/// True when the logical `plan` computes the same rows whenever it runs: constants and
/// `Immutable` functions over no table (see the module comment). Plan nodes and expressions
/// are allowed by name; anything else (a scan, a subquery, a placeholder, an aggregate)
/// says no.
pub fn is_constant(plan: &LogicalPlan) -> bool {
    let mut constant = true;
    let _ = plan.apply_with_subqueries(|node| {
        let node_ok = matches!(node, LogicalPlan::Projection(_) | LogicalPlan::EmptyRelation(_) | LogicalPlan::Values(_) | LogicalPlan::SubqueryAlias(_));
        let exprs_ok = node_ok
            && node
                .apply_expressions(|e| {
                    if expression_is_constant(e) {
                        Ok(TreeNodeRecursion::Continue)
                    } else {
                        constant = false;
                        Ok(TreeNodeRecursion::Stop)
                    }
                })
                .is_ok();
        if node_ok && exprs_ok && constant {
            Ok(TreeNodeRecursion::Continue)
        } else {
            constant = false;
            Ok(TreeNodeRecursion::Stop)
        }
    });
    constant
}

fn expression_is_constant(expr: &Expr) -> bool {
    let mut constant = true;
    let _ = expr.apply(|e| {
        let ok = match e {
            Expr::Alias(_)
            | Expr::Column(_)
            | Expr::Literal(..)
            | Expr::BinaryExpr(_)
            | Expr::Like(_)
            | Expr::SimilarTo(_)
            | Expr::Not(_)
            | Expr::IsNotNull(_)
            | Expr::IsNull(_)
            | Expr::IsTrue(_)
            | Expr::IsFalse(_)
            | Expr::IsUnknown(_)
            | Expr::IsNotTrue(_)
            | Expr::IsNotFalse(_)
            | Expr::IsNotUnknown(_)
            | Expr::Negative(_)
            | Expr::Between(_)
            | Expr::Case(_)
            | Expr::Cast(_)
            | Expr::TryCast(_)
            | Expr::InList(_) => true,
            Expr::ScalarFunction(f) => f.func.signature().volatility == Volatility::Immutable,
            _ => false,
        };
        if ok {
            Ok(TreeNodeRecursion::Continue)
        } else {
            constant = false;
            Ok(TreeNodeRecursion::Stop)
        }
    });
    constant
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::prelude::SessionContext;

    async fn plan_of(ctx: &SessionContext, sql: &str) -> LogicalPlan {
        ctx.state().create_logical_plan(sql).await.unwrap_or_else(|e| panic!("{sql}: {e}"))
    }

    #[tokio::test]
    async fn constants_and_immutable_functions_only() {
        let ctx = SessionContext::new();
        ctx.sql("CREATE TABLE t (a BIGINT) AS VALUES (1), (2)").await.expect("table");
        for sql in ["SELECT 1", "SELECT 1 AS one, 'x' || 'y', abs(-3)", "SELECT CASE WHEN 1 > 2 THEN 'a' ELSE 'b' END", "VALUES (1, 'a'), (2, 'b')"] {
            assert!(is_constant(&plan_of(&ctx, sql).await), "{sql} is constant");
        }
        for sql in [
            "SELECT now()",
            "SELECT random()",
            "SELECT a FROM t",
            "SELECT count(*) FROM t",
            "SELECT (SELECT max(a) FROM t)",
            "SELECT 1 WHERE EXISTS (SELECT 1 FROM t)",
            "SELECT $1",
            "SELECT 1 + $1",
            "SELECT count(*)",
        ] {
            assert!(!is_constant(&plan_of(&ctx, sql).await), "{sql} is not constant");
        }
    }

    /// Running a kept plan again leaves the kept operators as they were: executing them
    /// directly would add metrics to them at every execution.
    #[tokio::test]
    async fn executions_of_a_kept_plan_leave_it_unchanged() {
        use futures::StreamExt;
        let ctx = SessionContext::new();
        let plan = plan_of(&ctx, "SELECT 1 AS one, 2 + 3 AS five").await;
        assert!(is_constant(&plan));
        let physical = ctx.state().create_physical_plan(&plan).await.expect("physical");
        let kept = KeptPlan { physical: physical.clone(), schema: plan.schema().inner().clone(), task_ctx: ctx.task_ctx() };
        let metrics_count = |p: &Arc<dyn ExecutionPlan>| p.metrics().map(|m| m.iter().count()).unwrap_or(0);
        let before = metrics_count(&physical);
        for _ in 0..3 {
            let run = kept.for_execution().expect("for execution");
            assert!(!Arc::ptr_eq(&run, &physical), "a fresh plan each time");
            let mut batches = datafusion::physical_plan::execute_stream(run, kept.task_ctx.clone()).expect("execute");
            let batch = batches.next().await.expect("a batch").expect("no error");
            assert_eq!((batch.num_rows(), batch.num_columns()), (1, 2));
        }
        assert_eq!(metrics_count(&physical), before, "the kept plan's metrics did not grow");
        // What the fresh copy avoids: executing the kept node itself registers metrics.
        let _ = datafusion::physical_plan::execute_stream(physical.clone(), kept.task_ctx.clone()).expect("execute");
        assert!(metrics_count(&physical) > before, "executing a node directly adds metrics to it");
    }

    #[test]
    fn kept_plans_are_bounded() {
        let ctx = SessionContext::new();
        let plan = KeptPlan {
            physical: Arc::new(datafusion::physical_plan::empty::EmptyExec::new(Arc::new(arrow::datatypes::Schema::empty()))),
            schema: Arc::new(arrow::datatypes::Schema::empty()),
            task_ctx: ctx.task_ctx(),
        };
        let mut kept = KeptPlans::default();
        for i in 0..KEPT_PLANS_MAX {
            assert!(kept.keep(&format!("SELECT {i}"), plan.clone()));
        }
        assert!(!kept.keep("SELECT 'one too many'", plan.clone()));
        assert!(kept.keep("SELECT 0", plan.clone()), "a text already kept is replaced");
        assert_eq!(kept.len(), KEPT_PLANS_MAX);
        assert!(!kept.keep(&"x".repeat(KEPT_PLAN_TEXT_BYTES_MAX + 1), plan));
        kept.clear();
        assert!(kept.is_empty());
    }
}
