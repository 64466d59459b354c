//! A NULL in a filter's AND/OR tree is false there: `WHERE x BETWEEN NULL AND x / y`
//! passes no row, so `x / y` need never be evaluated.
//!
//! DataFusion folds `x >= NULL` to NULL but keeps `NULL AND (x <= x / y)` (NULL AND e is
//! false or NULL, not a constant) and then evaluates `x / y` on every row — a "Divide by
//! zero" where y is 0, on a query PostgreSQL answers with no rows (its planner reads a
//! WHERE clause's NULL as FALSE, `canonicalize_qual`). A filter keeps a row only where its
//! predicate is true, so inside the AND/OR tree of a filter's predicate (never under NOT
//! or in any other expression) a NULL is replaced by FALSE; DataFusion's own rules then
//! fold the predicate and drop a filter that is always false. Found on the SQLite
//! sqllogictest corpus (random/groupby/slt_good_12.test: two records PostgreSQL passed).

use std::sync::Arc;

use datafusion::common::tree_node::Transformed;
use datafusion::common::Result;
use datafusion::logical_expr::{lit, BinaryExpr, Expr, Filter, LogicalPlan, Operator};
use datafusion::optimizer::{ApplyOrder, OptimizerConfig, OptimizerRule};

/// `e` with every NULL reached through AND and OR replaced by FALSE.
fn null_is_false(e: Expr) -> Transformed<Expr> {
    match e {
        Expr::Literal(v, _) if v.is_null() => Transformed::yes(lit(false)),
        Expr::BinaryExpr(BinaryExpr { left, op: op @ (Operator::And | Operator::Or), right }) => {
            let (l, r) = (null_is_false(*left), null_is_false(*right));
            let changed = l.transformed || r.transformed;
            let e = Expr::BinaryExpr(BinaryExpr::new(Box::new(l.data), op, Box::new(r.data)));
            if changed {
                Transformed::yes(e)
            } else {
                Transformed::no(e)
            }
        }
        other => Transformed::no(other),
    }
}

#[derive(Debug, Default)]
pub struct NullIsFalseInFilters;

impl OptimizerRule for NullIsFalseInFilters {
    fn name(&self) -> &str {
        "flashscan_null_is_false_in_filters"
    }

    fn apply_order(&self) -> Option<ApplyOrder> {
        Some(ApplyOrder::BottomUp)
    }

    fn supports_rewrite(&self) -> bool {
        true
    }

    fn rewrite(&self, plan: LogicalPlan, _config: &dyn OptimizerConfig) -> Result<Transformed<LogicalPlan>> {
        let LogicalPlan::Filter(filter) = plan else { return Ok(Transformed::no(plan)) };
        let predicate = null_is_false(filter.predicate.clone());
        if !predicate.transformed {
            return Ok(Transformed::no(LogicalPlan::Filter(filter)));
        }
        Ok(Transformed::yes(LogicalPlan::Filter(Filter::try_new(predicate.data, Arc::clone(&filter.input))?)))
    }
}

/// `ctx` with the rule right after DataFusion's first expression simplification (which
/// folds `x >= NULL` to NULL), before `eliminate_filter` drops a filter that is false.
pub fn register(ctx: datafusion::prelude::SessionContext) -> datafusion::prelude::SessionContext {
    crate::rule_order::with_logical_rule(ctx, Arc::new(NullIsFalseInFilters), crate::rule_order::At::After("simplify_expressions"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::prelude::SessionContext;

    async fn answer(ctx: &SessionContext, sql: &str) -> Result<usize> {
        let batches = ctx.sql(sql).await?.collect().await?;
        Ok(batches.iter().map(|b| b.num_rows()).sum())
    }

    #[tokio::test]
    async fn a_null_conjunct_passes_no_row_and_leaves_the_rest_unevaluated() {
        let ctx = register(SessionContext::new());
        ctx.sql("CREATE TABLE t (x INT, y INT) AS VALUES (1, 2), (3, 0), (NULL, 1)").await.expect("create").collect().await.expect("made");
        // PostgreSQL 15 answers these with no rows and no error.
        assert_eq!(answer(&ctx, "SELECT * FROM t WHERE x BETWEEN NULL AND x / y").await.expect("no division"), 0);
        assert_eq!(answer(&ctx, "SELECT * FROM t WHERE (x >= NULL AND x <= x / y) OR x = 1").await.expect("the OR's other arm"), 1);
        // Not under NOT, nor outside a filter: there the division still runs, as in PostgreSQL.
        assert!(answer(&ctx, "SELECT * FROM t WHERE NOT (x >= NULL AND x <= x / y)").await.is_err());
        assert!(answer(&ctx, "SELECT x BETWEEN NULL AND x / y FROM t").await.is_err());
        // Without the rule DataFusion divides by zero (the behaviour this rule exists for).
        let plain = SessionContext::new();
        plain.sql("CREATE TABLE t (x INT, y INT) AS VALUES (1, 2), (3, 0)").await.expect("create").collect().await.expect("made");
        assert!(answer(&plain, "SELECT * FROM t WHERE x BETWEEN NULL AND x / y").await.is_err());
    }
}
