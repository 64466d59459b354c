//! `ORDER BY c LIMIT n` through an index whose first column is `c` (issue 29 item 3): the
//! first rows in the index's order instead of a scan of the whole table and a top-n sort.
//!
//! Two halves, because the rows must be read under each execution's own snapshot:
//! - a **logical optimizer rule** (the last one) finds `Limit → Sort(c) → [Projection] →
//!   TableScan` over a flashscan table with an index on `c` first, where every filter of
//!   the scan is on `c` alone, and adds a marker to the scan's filters:
//!   `flashscan_index_order(c, n, ascending, nulls_first)`. The marker is a function that
//!   is TRUE for every row, so a plan that keeps it anywhere else still answers right;
//! - the **table provider's scan** (`FlashscanTable::ordered_lookup`) takes the marker out
//!   and reads keys in the asked order — `[lower, upper)` of the filters on `c`, NULLs
//!   where the ORDER BY puts them — a chunk at a time, the rows of each key through the
//!   statement's snapshot, until at least n rows are found (every row of the last key too,
//!   so ties are whole). The Sort and Limit above stay: they order and cut what comes
//!   back, so the answer is the plan's whatever the index holds. Anything it cannot do
//!   (no fitting index, the transaction's own uncommitted rows in the table, a column
//!   store) leaves the ordinary scan.

use std::sync::Arc;

use arrow::array::{ArrayRef, BooleanArray};
use arrow::datatypes::DataType;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{Column, Result, ScalarValue};
use datafusion::logical_expr::{
    ColumnarValue, Expr, LogicalPlan, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, SortExpr, TableScan, Volatility,
};
use datafusion::optimizer::{OptimizerConfig, OptimizerRule};

use crate::table_provider::FlashscanTable;

/// The marker's name.
pub const MARKER: &str = "flashscan_index_order";

/// Rows an ordered lookup may return at most (`n` of the LIMIT): past it the scan's top-n
/// sort is as good, and the lookup would hold them all in one batch.
pub const ORDERED_ROWS_MAX: usize = 10_000;

/// What the marker asks: the first `rows` rows of the table in `column`'s order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexOrder {
    pub column: String,
    pub rows: usize,
    pub ascending: bool,
    pub nulls_first: bool,
}

/// The marker function: TRUE for every row.
#[derive(Debug, PartialEq, Eq, Hash)]
struct Marker {
    signature: Signature,
}

impl ScalarUDFImpl for Marker {
    fn name(&self) -> &str {
        MARKER
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn return_type(&self, _args: &[DataType]) -> Result<DataType> {
        Ok(DataType::Boolean)
    }
    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        Ok(ColumnarValue::Array(Arc::new(BooleanArray::from(vec![true; args.number_rows])) as ArrayRef))
    }
}

fn marker_udf() -> Arc<ScalarUDF> {
    Arc::new(ScalarUDF::new_from_impl(Marker { signature: Signature::variadic_any(Volatility::Volatile) }))
}

/// The marker for `order`.
fn marker(column: &Column, order: &IndexOrder) -> Expr {
    marker_udf().call(vec![
        Expr::Column(column.clone()),
        Expr::Literal(ScalarValue::UInt64(Some(order.rows as u64)), None),
        Expr::Literal(ScalarValue::Boolean(Some(order.ascending)), None),
        Expr::Literal(ScalarValue::Boolean(Some(order.nulls_first)), None),
    ])
}

/// What `filter` asks, if it is the marker.
pub fn marker_order(filter: &Expr) -> Option<IndexOrder> {
    let Expr::ScalarFunction(f) = filter else { return None };
    if f.func.name() != MARKER {
        return None;
    }
    let [Expr::Column(c), Expr::Literal(ScalarValue::UInt64(Some(rows)), _), Expr::Literal(ScalarValue::Boolean(Some(ascending)), _), Expr::Literal(ScalarValue::Boolean(Some(nulls_first)), _)] = f.args.as_slice() else {
        return None;
    };
    Some(IndexOrder { column: c.name.clone(), rows: usize::try_from(*rows).ok()?, ascending: *ascending, nulls_first: *nulls_first })
}

/// The logical rule (see the module comment).
#[derive(Debug, Default)]
pub struct IndexOrderRule;

impl OptimizerRule for IndexOrderRule {
    fn name(&self) -> &str {
        "flashscan_index_order"
    }

    fn supports_rewrite(&self) -> bool {
        true
    }

    fn rewrite(&self, plan: LogicalPlan, config: &dyn OptimizerConfig) -> Result<Transformed<LogicalPlan>> {
        if !crate::settings::FlashscanSettings::of(&config.options()).index_lookups {
            return Ok(Transformed::no(plan));
        }
        plan.transform_down(|node| {
            let LogicalPlan::Sort(sort) = &node else { return Ok(Transformed::no(node)) };
            let (Some(fetch), [SortExpr { expr: Expr::Column(column), asc, nulls_first }]) = (sort.fetch, sort.expr.as_slice()) else { return Ok(Transformed::no(node)) };
            if fetch == 0 || fetch > ORDERED_ROWS_MAX {
                return Ok(Transformed::no(node));
            }
            let order = IndexOrder { column: column.name.clone(), rows: fetch, ascending: *asc, nulls_first: *nulls_first };
            let rewritten = mark_scan(sort.input.as_ref(), column, &order)?;
            match rewritten {
                Some(input) => {
                    let mut sort = sort.clone();
                    sort.input = Arc::new(input);
                    Ok(Transformed::yes(LogicalPlan::Sort(sort)))
                }
                None => Ok(Transformed::no(node)),
            }
        })
    }
}

/// `plan` (under the Sort) with the marker among its scan's filters, when it is a scan of a
/// flashscan table (through projections that keep `column` as it is) whose index starts
/// with `column` and whose filters name `column` alone.
fn mark_scan(plan: &LogicalPlan, column: &Column, order: &IndexOrder) -> Result<Option<LogicalPlan>> {
    match plan {
        LogicalPlan::Projection(p) => {
            // The sort column must be a column of the input, passed through unchanged.
            let passes = p.expr.iter().any(|e| match e {
                Expr::Column(c) => c.name == column.name,
                Expr::Alias(a) => matches!(a.expr.as_ref(), Expr::Column(c) if c.name == column.name) && a.name == column.name,
                _ => false,
            });
            if !passes {
                return Ok(None);
            }
            let Some(input) = mark_scan(p.input.as_ref(), column, order)? else { return Ok(None) };
            Ok(Some(plan.with_new_exprs(plan.expressions(), vec![input])?))
        }
        // A filter the scan could not take whole (it runs again above it), on the column.
        LogicalPlan::Filter(f) if f.predicate.column_refs().iter().all(|c| c.name == column.name) => {
            let Some(input) = mark_scan(f.input.as_ref(), column, order)? else { return Ok(None) };
            Ok(Some(plan.with_new_exprs(plan.expressions(), vec![input])?))
        }
        LogicalPlan::TableScan(scan) => mark_table_scan(scan, column, order).map(|s| s.map(LogicalPlan::TableScan)),
        _ => Ok(None),
    }
}

fn mark_table_scan(scan: &TableScan, column: &Column, order: &IndexOrder) -> Result<Option<TableScan>> {
    if scan.filters.iter().any(|f| marker_order(f).is_some()) {
        return Ok(None);
    }
    let Ok(provider) = datafusion::datasource::source_as_provider(&scan.source) else { return Ok(None) };
    let Some(table) = provider.downcast_ref::<FlashscanTable>() else { return Ok(None) };
    let meta = table.table();
    if meta.is_column_store() || !meta.indexes.iter().any(|i| i.columns.first().is_some_and(|c| c == &order.column)) {
        return Ok(None);
    }
    // Every filter names the ordered column alone (others would throw away rows the lookup
    // counted on); a fetch of the scan itself would cut before the order.
    let own_column = |f: &Expr| f.column_refs().iter().all(|c| c.name == column.name);
    if scan.fetch.is_some() || !scan.filters.iter().all(own_column) {
        return Ok(None);
    }
    let mut marked = scan.clone();
    marked.filters.push(marker(column, order));
    Ok(Some(marked))
}

/// `ctx` with the rule last (after filters and limits are pushed down).
pub fn register(ctx: datafusion::prelude::SessionContext) -> datafusion::prelude::SessionContext {
    crate::rule_order::with_logical_rule(ctx, Arc::new(IndexOrderRule), crate::rule_order::At::End)
}
