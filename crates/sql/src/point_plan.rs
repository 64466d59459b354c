//! Point statements planned without DataFusion's optimizers.
//!
//! A statement that reads one table through one of its SQL indexes — `SELECT … FROM t
//! WHERE id = 5`, and the reads of `UPDATE t SET … WHERE id = 5` and `DELETE FROM t WHERE
//! id = 5` (change.rs) — has one possible plan: the index lookup, the filter, the
//! projection. DataFusion's logical optimizer (about 30 rules) and physical optimizer
//! (about 15, each walking the plan) cost such a statement more than its work: profiled
//! under pgbench TPC-B on `flashscan serve`, planning was 50 % of the server's CPU
//! (logical optimization 15 %, physical planning 35 %), the index lookup 11 %
//! (docs/server.md, "The fixed cost of a statement"). Here the plan is built directly
//! from the unoptimized logical plan: the filter is type-coerced and simplified as the
//! optimizer would (so `aid = 5` over an INT column compares INTs), the table provider
//! answers it from an index (`FlashscanTable::index_scan`, the very lookup `scan` makes),
//! and the filter and projection expressions become physical expressions over the
//! lookup's rows.
//!
//! Only this shape is taken: a projection of a filter of one table scan (through an
//! alias or not), no subquery in any expression, and an index that answers the filter.
//! Anything else — or anything this path cannot plan — returns `None` and the statement
//! is planned as every other one is: the fast path never changes an answer, only skips
//! work. The answers of both paths are compared by the tests (tests/indexes.rs).

use std::sync::Arc;

use datafusion::catalog::Session;
use datafusion::common::tree_node::TreeNode;
use datafusion::common::{DFSchemaRef, Result};
use datafusion::datasource::source_as_provider;
use datafusion::execution::context::SessionState;
use datafusion::logical_expr::simplify::SimplifyContext;
use datafusion::logical_expr::utils::split_conjunction_owned;
use datafusion::logical_expr::{Expr, LogicalPlan};
use datafusion::optimizer::simplify_expressions::ExprSimplifier;
use datafusion::physical_plan::filter::FilterExec;
use datafusion::physical_plan::projection::ProjectionExec;
use datafusion::physical_plan::ExecutionPlan;

use crate::table_provider::FlashscanTable;

/// The physical plan of `plan` when it is a point statement an index answers (see the
/// module comment), else `None`.
pub async fn plan(state: &SessionState, plan: &LogicalPlan) -> Option<Arc<dyn ExecutionPlan>> {
    // An error here (an expression this path cannot plan) is the normal path's to report.
    try_plan(state, plan).await.ok().flatten()
}

/// Whether `e` can be planned as an expression over one table's rows: no subquery, no
/// reference to an outer query, no unbound parameter, nothing over many rows.
fn over_one_row(e: &Expr) -> bool {
    !e.exists(|e| {
        Ok(matches!(
            e,
            Expr::ScalarSubquery(_)
                | Expr::InSubquery(_)
                | Expr::Exists(_)
                | Expr::SetComparison(_)
                | Expr::OuterReferenceColumn(..)
                | Expr::Placeholder(_)
                | Expr::AggregateFunction(_)
                | Expr::WindowFunction(_)
                | Expr::GroupingSet(_)
                | Expr::Unnest(_)
        ))
    })
    // An expression the walk cannot read is not taken.
    .unwrap_or(true)
}

async fn try_plan(state: &SessionState, plan: &LogicalPlan) -> Result<Option<Arc<dyn ExecutionPlan>>> {
    let LogicalPlan::Projection(projection) = plan else { return Ok(None) };
    let LogicalPlan::Filter(filter) = projection.input.as_ref() else { return Ok(None) };
    let scan = match filter.input.as_ref() {
        LogicalPlan::TableScan(scan) => scan,
        LogicalPlan::SubqueryAlias(alias) => match alias.input.as_ref() {
            LogicalPlan::TableScan(scan) => scan,
            _ => return Ok(None),
        },
        _ => return Ok(None),
    };
    // Unoptimized: no columns dropped, no filters or limit pushed into the scan yet.
    if scan.projection.is_some() || !scan.filters.is_empty() || scan.fetch.is_some() {
        return Ok(None);
    }
    if !over_one_row(&filter.predicate) || !projection.expr.iter().all(over_one_row) {
        return Ok(None);
    }
    let provider = source_as_provider(&scan.source)?;
    let Some(table) = provider.downcast_ref::<FlashscanTable>() else { return Ok(None) };
    let schema: &DFSchemaRef = filter.input.schema();
    let simplifier = ExprSimplifier::new(
        SimplifyContext::builder()
            .with_schema(schema.clone())
            .with_config_options(state.config_options().clone())
            .with_query_execution_start_time(state.execution_props().query_execution_start_time)
            .build(),
    );
    let predicate = simplifier.simplify(simplifier.coerce(filter.predicate.clone(), schema)?)?;
    let Some(lookup) = table.index_scan(state as &dyn Session, &split_conjunction_owned(predicate.clone())).await? else { return Ok(None) };
    if lookup.schema().fields().len() != schema.fields().len() {
        return Ok(None);
    }
    let filtered: Arc<dyn ExecutionPlan> = Arc::new(FilterExec::try_new(state.create_physical_expr(predicate, schema)?, lookup)?);
    let mut exprs = Vec::with_capacity(projection.expr.len());
    for (e, field) in projection.expr.iter().zip(projection.schema.fields()) {
        // Simplified as the optimizer would: `now()` and friends become the statement's
        // start time, constants fold.
        let e = simplifier.simplify(simplifier.coerce(e.clone(), schema)?)?;
        exprs.push((state.create_physical_expr(e, schema)?, field.name().clone()));
    }
    let out = ProjectionExec::try_new(exprs, filtered)?;
    // The rows must have the types the statement's description promised the client.
    let same_types = out.schema().fields().iter().zip(projection.schema.fields()).all(|(a, b)| a.data_type() == b.data_type());
    if !same_types || out.schema().fields().len() != projection.schema.fields().len() {
        return Ok(None);
    }
    Ok(Some(Arc::new(out)))
}
