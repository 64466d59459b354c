//! The fast path of `INSERT INTO t [(cols)] VALUES (…)[, (…)]` with `$n` parameters and
//! literals: recognised once, in the plan DataFusion made at Parse time; each Execute then
//! builds the statement's rows straight from the bound parameters and hands them to the
//! group committer — no logical plan bound, no physical plan made and run per execution
//! (that cost ~400 µs of CPU per single-row INSERT, see docs/server.md).
//!
//! **One conversion, not two.** The rows are what DataFusion's own plan would compute:
//! the recognised plan is DataFusion's (`Dml` over a projection over `Values`), its casts
//! are applied with the same Arrow cast kernel (`ScalarValue::cast_to`), parameters arrive
//! already cast to the types DataFusion inferred for their placeholders (the table's column
//! types, `params::decode_params`), and the rows then go through the write crate's one
//! commit protocol (its page encoder checks types, decimal ranges and row sizes as for any
//! INSERT). Anything else — an expression other than a column, a literal, a placeholder or
//! a cast; a literal whose cast fails; a parameter not of its column's type; a NULL for a
//! NOT NULL column — is not handled here: that statement (or that one execution) takes the
//! SQL path, so every error is the SQL path's error, word for word.

use std::sync::Arc;

use arrow::array::ArrayRef;
use arrow::datatypes::{DataType, SchemaRef};
use arrow::record_batch::RecordBatch;
use datafusion::common::ScalarValue;
use datafusion::logical_expr::dml::InsertOp;
use datafusion::logical_expr::{Expr, LogicalPlan, WriteOp};

/// Where one value of a row comes from.
#[derive(Debug, Clone)]
enum Cell {
    /// Parameter `$n` (0-based here), already of the column's type.
    Param(usize),
    /// A constant, already cast to the column's type.
    Value(ScalarValue),
}

/// A recognised `INSERT … VALUES`: the rows' recipe, one cell per row and column.
#[derive(Debug, Clone)]
pub struct FastInsert {
    /// The table as the SQL path names it to the committer.
    pub table: String,
    /// The rows' schema: the INSERT input's (the table's columns and types).
    schema: SchemaRef,
    /// Per column: the table column is NOT NULL (a NULL there takes the SQL path).
    not_null: Vec<bool>,
    rows: Vec<Vec<Cell>>,
}

/// Strips the aliases DataFusion puts around the projection's expressions.
fn unalias(e: &Expr) -> &Expr {
    match e {
        Expr::Alias(a) => unalias(&a.expr),
        other => other,
    }
}

/// A constant expression (a literal under casts) evaluated as DataFusion would; `None` if
/// it is not one or its cast fails (the SQL path then reports that failure itself).
fn constant(e: &Expr) -> Option<ScalarValue> {
    match e {
        Expr::Literal(v, _) => Some(v.clone()),
        Expr::Cast(c) => constant(&c.expr)?.cast_to(c.field.data_type()).ok(),
        Expr::Alias(a) => constant(&a.expr),
        _ => None,
    }
}

/// A VALUES cell for a column of type `column_type` whose VALUES column has type
/// `values_type`.
fn cell(e: &Expr, values_type: &DataType, column_type: &DataType) -> Option<Cell> {
    if let Expr::Placeholder(p) = e {
        let index = p.id.strip_prefix('$')?.parse::<usize>().ok()?.checked_sub(1)?;
        let typed = p.field.as_ref().map(|f| f.data_type())?;
        // The parameter arrives of its placeholder's type; only when that is the column's
        // type is the projection's cast a no-op.
        return (typed == column_type && values_type == column_type).then_some(Cell::Param(index));
    }
    let v = constant(e)?;
    let v = if v.data_type() == *values_type { v } else { v.cast_to(values_type).ok()? };
    let v = if v.data_type() == *column_type { v } else { v.cast_to(column_type).ok()? };
    Some(Cell::Value(v))
}

impl FastInsert {
    /// Recognises DataFusion's plan of `INSERT INTO t [(cols)] VALUES …`; `None` for any
    /// other statement (it takes the SQL path).
    pub fn from_plan(plan: &LogicalPlan) -> Option<FastInsert> {
        let LogicalPlan::Dml(dml) = plan else { return None };
        if !matches!(dml.op, WriteOp::Insert(InsertOp::Append)) {
            return None;
        }
        let LogicalPlan::Projection(projection) = dml.input.as_ref() else { return None };
        let LogicalPlan::Values(values) = projection.input.as_ref() else { return None };
        let schema = projection.schema.inner().clone();
        let target = dml.target.schema();
        if target.fields().len() != schema.fields().len() {
            return None;
        }
        let not_null: Vec<bool> = target.fields().iter().map(|f| !f.is_nullable()).collect();
        // Per output column: the VALUES column it reads (with its type) or a constant.
        enum Source {
            Values(usize),
            Constant(ScalarValue),
        }
        let mut sources = Vec::with_capacity(schema.fields().len());
        for (i, e) in projection.expr.iter().enumerate() {
            let column_type = schema.field(i).data_type();
            let inner = unalias(e);
            let column = match inner {
                Expr::Column(c) => Some(c),
                Expr::Cast(c) if c.field.data_type() == column_type => match c.expr.as_ref() {
                    Expr::Column(col) => Some(col),
                    _ => None,
                },
                _ => None,
            };
            let source = match column {
                Some(c) => Source::Values(values.schema.index_of_column(c).ok()?),
                None => {
                    let v = constant(inner)?;
                    Source::Constant(if v.data_type() == *column_type { v } else { v.cast_to(column_type).ok()? })
                }
            };
            sources.push(source);
        }
        let mut rows = Vec::with_capacity(values.values.len());
        for row in &values.values {
            let mut cells = Vec::with_capacity(sources.len());
            for (i, source) in sources.iter().enumerate() {
                cells.push(match source {
                    Source::Constant(v) => Cell::Value(v.clone()),
                    Source::Values(j) => cell(row.get(*j)?, values.schema.field(*j).data_type(), schema.field(i).data_type())?,
                });
            }
            rows.push(cells);
        }
        if rows.is_empty() {
            return None;
        }
        Some(FastInsert { table: dml.table_name.table().to_string(), schema, not_null, rows })
    }

    /// Rows the statement inserts per execution.
    pub fn row_count(&self) -> usize {
        self.rows.len()
    }

    /// The statement's rows for these parameters (already decoded and cast to their
    /// placeholders' types); `None` when this execution must take the SQL path (a NULL for
    /// a NOT NULL column, a parameter of another type, a missing parameter): its error is
    /// then the SQL path's.
    pub fn batch(&self, params: &[ScalarValue]) -> Option<RecordBatch> {
        let mut columns: Vec<ArrayRef> = Vec::with_capacity(self.schema.fields().len());
        for (i, field) in self.schema.fields().iter().enumerate() {
            let mut values = Vec::with_capacity(self.rows.len());
            for row in &self.rows {
                let v = match &row[i] {
                    Cell::Value(v) => v.clone(),
                    Cell::Param(k) => {
                        let v = params.get(*k)?;
                        if v.data_type() != *field.data_type() {
                            return None;
                        }
                        v.clone()
                    }
                };
                if self.not_null[i] && v.is_null() {
                    return None;
                }
                values.push(v);
            }
            columns.push(ScalarValue::iter_to_array(values).ok()?);
        }
        RecordBatch::try_new(Arc::clone(&self.schema), columns).ok()
    }
}
