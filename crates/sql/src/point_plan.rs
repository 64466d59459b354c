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
//! and the filter and projection are evaluated over the rows it found, at once: the plan
//! is the lookup holding the statement's answer. (Building a `FilterExec` and a
//! `ProjectionExec` above the lookup — each computing equivalence properties for rows
//! already in hand — was a tenth of the server's CPU under pgbench TPC-B.)
//!
//! Only this shape is taken: a projection of a filter of one table scan (through an
//! alias or not), no subquery in any expression, and an index that answers the filter.
//! Anything else — or anything this path cannot plan — returns `None` and the statement
//! is planned as every other one is: the fast path never changes an answer, only skips
//! work. The answers of both paths are compared by the tests (tests/indexes.rs).

use std::sync::Arc;

use datafusion::catalog::Session;
use datafusion::common::tree_node::TreeNode;
use datafusion::common::{DFSchemaRef, Result, ScalarValue};
use datafusion::datasource::source_as_provider;
use datafusion::execution::context::SessionState;
use datafusion::logical_expr::simplify::SimplifyContext;
use datafusion::logical_expr::utils::split_conjunction_owned;
use datafusion::logical_expr::{Expr, LogicalPlan};
use datafusion::optimizer::simplify_expressions::ExprSimplifier;
use datafusion::arrow::array::{Array, BooleanArray, RecordBatch, RecordBatchOptions};
use datafusion::arrow::compute::filter_record_batch;
use datafusion::physical_plan::ExecutionPlan;

use crate::index_scan::IndexLookupExec;
use crate::table_provider::FlashscanTable;

/// The physical plan of `plan` when it is a point statement an index answers (see the
/// module comment), else `None`.
pub async fn plan(state: &SessionState, plan: &LogicalPlan) -> Option<Arc<dyn ExecutionPlan>> {
    // An error here (an expression this path cannot plan) is the normal path's to report.
    try_plan(state, plan).await.ok().flatten()
}

/// Functions whose result grows with an argument's value (`repeat('x', n)`, `range(n)`):
/// a row calling one may compute for long, so it is not evaluated while planning, on the
/// connection's task (the server runs such plans on its query runtime).
pub const FUNCTIONS_SIZED_BY_ARGUMENT: [&str; 6] = ["repeat", "lpad", "rpad", "range", "generate_series", "array_repeat"];

/// Whether `e` can be planned as an expression over one table's rows: no subquery, no
/// reference to an outer query, no unbound parameter, nothing over many rows, nothing whose
/// cost grows with an argument's value.
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
        ) || matches!(e, Expr::ScalarFunction(f) if FUNCTIONS_SIZED_BY_ARGUMENT.contains(&f.name())))
    })
    // An expression the walk cannot read is not taken.
    .unwrap_or(true)
}

/// `column = value` (either way round), the value not NULL, the column an integer or text
/// one, and the value of the column's own type — or an integer the column's integer type
/// holds exactly (pgbench's `aid = 5678` over an INT column: compared in the wider type
/// after coercion, which gives the same rows): the predicate `column = value` in the
/// column's type, which coercion and simplification leave as it is and which compares as
/// Arrow's `eq` does. The column's index, the value, and the predicate.
fn key_comparison(predicate: &Expr, schema: &DFSchemaRef) -> Option<(usize, ScalarValue, Expr)> {
    use datafusion::arrow::datatypes::DataType;
    let Expr::BinaryExpr(b) = predicate else { return None };
    if b.op != datafusion::logical_expr::Operator::Eq {
        return None;
    }
    let ((Expr::Column(c), Expr::Literal(v, None)) | (Expr::Literal(v, None), Expr::Column(c))) = (b.left.as_ref(), b.right.as_ref()) else { return None };
    let i = schema.maybe_index_of_column(c)?;
    let column_type = schema.field(i).data_type();
    if v.is_null() || !(column_type.is_integer() || matches!(column_type, DataType::Utf8 | DataType::Utf8View | DataType::LargeUtf8)) {
        return None;
    }
    if &v.data_type() == column_type {
        return Some((i, v.clone(), predicate.clone()));
    }
    if !(column_type.is_integer() && v.data_type().is_integer()) {
        return None;
    }
    // Exactly: the value converts and converts back unchanged.
    let narrowed = v.cast_to(column_type).ok()?;
    if narrowed.is_null() || narrowed.cast_to(&v.data_type()).ok()? != *v {
        return None;
    }
    let rewritten = Expr::Column(c.clone()).eq(Expr::Literal(narrowed.clone(), None));
    Some((i, narrowed, rewritten))
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
    // Made only when an expression needs it (its context copies the session's options).
    let simplifier = std::sync::OnceLock::new();
    let simplifier = || {
        simplifier.get_or_init(|| {
            ExprSimplifier::new(
                SimplifyContext::builder()
                    .with_schema(schema.clone())
                    .with_config_options(state.config_options().clone())
                    .with_query_execution_start_time(state.execution_props().query_execution_start_time)
                    .build(),
            )
        })
    };
    let key = key_comparison(&filter.predicate, schema);
    let predicate = match &key {
        // Already what coercion and simplification would make of it.
        Some((_, _, predicate)) => predicate.clone(),
        None => simplifier().simplify(simplifier().coerce(filter.predicate.clone(), schema)?)?,
    };
    let Some(lookup) = table.index_scan(state as &dyn Session, &split_conjunction_owned(predicate.clone())).await? else { return Ok(None) };
    let Some(found) = lookup.downcast_ref::<IndexLookupExec>() else { return Ok(None) };
    let rows = found.rows();
    if rows.num_columns() != schema.fields().len() {
        return Ok(None);
    }
    // The filter again over the rows found: the index fixes the key, the rest of the
    // predicate (and a prefix key's other columns) is checked here.
    let keep = match key {
        Some((column, value, _)) => datafusion::arrow::compute::kernels::cmp::eq(rows.column(column), &value.to_scalar()?)?,
        None => {
            let keep = state.create_physical_expr(predicate.clone(), schema)?.evaluate(rows)?.into_array(rows.num_rows())?;
            let Some(keep) = keep.as_any().downcast_ref::<BooleanArray>() else { return Ok(None) };
            keep.clone()
        }
    };
    let kept = filter_record_batch(rows, &keep)?;
    let mut columns = Vec::with_capacity(projection.expr.len());
    for e in &projection.expr {
        // A column (an UPDATE's projection is mostly its unassigned columns) is the rows'
        // own: coercing and simplifying it, then evaluating it, was 30 % of this path's CPU.
        let mut bare = e;
        while let Expr::Alias(a) = bare {
            bare = &a.expr;
        }
        if let Expr::Column(c) = bare {
            if let Some(i) = schema.maybe_index_of_column(c) {
                columns.push(kept.column(i).clone());
                continue;
            }
        }
        // Simplified as the optimizer would: `now()` and friends become the statement's
        // start time, constants fold.
        let e = simplifier().simplify(simplifier().coerce(e.clone(), schema)?)?;
        columns.push(state.create_physical_expr(e, schema)?.evaluate(&kept)?.into_array(kept.num_rows())?);
    }
    // The rows must have the types the statement's description promised the client
    // (RecordBatch::try_new also refuses a NULL in a column promised NOT NULL).
    let promised = Arc::new(projection.schema.as_arrow().clone());
    if columns.len() != promised.fields().len() || columns.iter().zip(promised.fields()).any(|(c, f)| c.data_type() != f.data_type()) {
        return Ok(None);
    }
    let options = RecordBatchOptions::new().with_row_count(Some(kept.num_rows()));
    let Ok(answer) = RecordBatch::try_new_with_options(promised, columns, &options) else { return Ok(None) };
    Ok(Some(Arc::new(found.answered(answer, predicate, projection.expr.clone()))))
}
