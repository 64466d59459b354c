//! The fast path of `INSERT INTO t [(cols)] VALUES (…)[, (…)]` with `$n` parameters,
//! literals and `now()` / `CURRENT_TIMESTAMP`: recognised once, in the plan DataFusion made at Parse time; each Execute then
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
//! INSERT). Anything else — an expression other than a column, a literal, a placeholder,
//! `now()` or a cast; a literal whose cast fails; a parameter not of its column's type; a NULL for a
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
    /// `now()` / `CURRENT_TIMESTAMP`: the execution's clock, in the VALUES column's type
    /// (DataFusion's `now()`: nanoseconds in the session's zone), then cast to the
    /// column's as the SQL path's projection would. Read per execution, never at Parse:
    /// pgbench's history INSERT is one, and without this cell it took the SQL path (its
    /// logical optimizer and physical planner were 15 % of the server's CPU under pgbench).
    Now { zone: Option<Arc<str>>, column_type: DataType },
    /// A column's `nextval('seq')` DEFAULT (SERIAL, identity): one value per row from the
    /// write path's sequence, cast to the column's type. Without the write path, or when
    /// the sequence refuses (unknown, exhausted), the execution takes the SQL path, which
    /// reports it; a value drawn by an execution that then takes the SQL path is used up
    /// (a gap, which sequences allow).
    NextVal { sequence: String },
}

/// Where a `nextval` cell draws from: the write path's sequence, remembered by the
/// connection's session (`currval`, `lastval`).
#[derive(Clone, Copy)]
pub struct Draw<'a> {
    pub write: &'a flashscan_write::WritePath,
    pub session: &'a flashscan_sql::sequence_functions::SessionSequences,
}

impl Cell {
    /// This cell's value for one execution (`params` already of their placeholders' types);
    /// `None` sends the execution to the SQL path.
    /// `now_ns`: the execution's clock, one reading for all its rows (as PostgreSQL's
    /// `now()` is one value per statement).
    fn value<'a>(&'a self, params: &'a [ScalarValue], column_type: &DataType, now_ns: i64, draw: Option<Draw<'_>>) -> Option<std::borrow::Cow<'a, ScalarValue>> {
        use std::borrow::Cow;
        match self {
            Cell::NextVal { sequence } => {
                let draw = draw?;
                let v = *draw.session.next_values(draw.write, sequence, 1).ok()?.first()?;
                ScalarValue::Int64(Some(v)).cast_to(column_type).ok().map(Cow::Owned)
            }
            Cell::Value(v) => Some(Cow::Borrowed(v)),
            Cell::Param(k) => {
                let v = params.get(*k)?;
                (v.data_type() == *column_type).then_some(Cow::Borrowed(v))
            }
            Cell::Now { zone, column_type } => {
                ScalarValue::TimestampNanosecond(Some(now_ns), zone.clone()).cast_to(column_type).ok().map(Cow::Owned)
            }
        }
    }
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

/// The sequence of a `nextval('seq')` default (under the cast DataFusion puts to the
/// column's type), if `e` is one.
fn nextval_of(e: &Expr) -> Option<String> {
    match unalias(e) {
        Expr::Cast(c) => nextval_of(&c.expr),
        Expr::ScalarFunction(f) if f.name() == "nextval" => match f.args.as_slice() {
            [Expr::Literal(ScalarValue::Utf8(Some(name)) | ScalarValue::Utf8View(Some(name)), _)] => Some(flashscan_sql::sequence_functions::sequence_name(name)),
            _ => None,
        },
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
    if let Expr::ScalarFunction(f) = unalias(e) {
        // `now()` returns its VALUES column's type (a nanosecond timestamp in the session's zone).
        let DataType::Timestamp(arrow::datatypes::TimeUnit::Nanosecond, zone) = values_type else { return None };
        return (f.name() == "now" && f.args.is_empty()).then(|| Cell::Now { zone: zone.clone(), column_type: column_type.clone() });
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
            NextVal(String),
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
                None if nextval_of(inner).is_some() => Source::NextVal(nextval_of(inner)?),
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
                    Source::NextVal(sequence) => Cell::NextVal { sequence: sequence.clone() },
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
        self.batch_drawing(params, None)
    }

    /// [`FastInsert::batch`], drawing the values of `nextval` defaults through `draw` (without it such a statement takes the SQL path).
    pub fn batch_drawing(&self, params: &[ScalarValue], draw: Option<Draw<'_>>) -> Option<RecordBatch> {
        let now_ns = chrono::Utc::now().timestamp_nanos_opt()?;
        if let [row] = self.rows.as_slice() {
            return self.one_row_batch(row, params, now_ns, draw);
        }
        self.any_rows_batch(params, now_ns, draw)
    }

    /// [`FastInsert::batch`] for any number of rows: a column at a time through
    /// `ScalarValue::iter_to_array`.
    fn any_rows_batch(&self, params: &[ScalarValue], now_ns: i64, draw: Option<Draw<'_>>) -> Option<RecordBatch> {
        let mut columns: Vec<ArrayRef> = Vec::with_capacity(self.schema.fields().len());
        for (i, field) in self.schema.fields().iter().enumerate() {
            let mut values = Vec::with_capacity(self.rows.len());
            for row in &self.rows {
                let v = row[i].value(params, field.data_type(), now_ns, draw)?.into_owned();
                if self.not_null[i] && v.is_null() {
                    return None;
                }
                values.push(v);
            }
            columns.push(ScalarValue::iter_to_array(values).ok()?);
        }
        RecordBatch::try_new(Arc::clone(&self.schema), columns).ok()
    }

    /// [`FastInsert::batch`] of a one-row statement (pgbench's, a driver's prepared
    /// singleton INSERT): each cell becomes a one-element array straight from its value
    /// (`ScalarValue::to_array`), without cloning it and without `iter_to_array`'s
    /// generic builder — that path was 6.6 % of the server's CPU at 64 clients (perf,
    /// docs/benchmarks.md, server7). The same checks as the general path; the same arrays
    /// (the general path's `iter_to_array` of one value builds the same one-element array).
    fn one_row_batch(&self, row: &[Cell], params: &[ScalarValue], now_ns: i64, draw: Option<Draw<'_>>) -> Option<RecordBatch> {
        let mut columns: Vec<ArrayRef> = Vec::with_capacity(row.len());
        for (i, (cell, field)) in row.iter().zip(self.schema.fields().iter()).enumerate() {
            let v = cell.value(params, field.data_type(), now_ns, draw)?;
            if self.not_null[i] && v.is_null() {
                return None;
            }
            columns.push(v.to_array().ok()?);
        }
        RecordBatch::try_new(Arc::clone(&self.schema), columns).ok()
    }
}

#[cfg(test)]
mod tests {
    use arrow::datatypes::{Field, Schema, TimeUnit};

    use super::*;

    /// The one-row shortcut gives exactly the general path's batch, for every type the
    /// fast path meets (parameters and constants, NULLs where allowed), and declines
    /// exactly where it does (a NULL for NOT NULL, a parameter of another type, a missing one).
    #[test]
    fn one_row_batches_equal_the_general_paths() {
        let types = [
            DataType::Int64,
            DataType::Int32,
            DataType::Float64,
            DataType::Decimal128(12, 2),
            DataType::Date32,
            DataType::Timestamp(TimeUnit::Microsecond, None),
            DataType::Utf8,
            DataType::Boolean,
        ];
        let values = [
            ScalarValue::Int64(Some(-7)),
            ScalarValue::Int32(Some(42)),
            ScalarValue::Float64(Some(2.5)),
            ScalarValue::Decimal128(Some(12345), 12, 2),
            ScalarValue::Date32(Some(19_000)),
            ScalarValue::TimestampMicrosecond(Some(1_700_000_000_000_000), None),
            ScalarValue::Utf8(Some("one row per transaction".into())),
            ScalarValue::Boolean(Some(true)),
        ];
        let schema: SchemaRef = Arc::new(Schema::new(types.iter().enumerate().map(|(i, t)| Field::new(format!("c{i}"), t.clone(), i != 0)).collect::<Vec<_>>()));
        let not_null: Vec<bool> = (0..types.len()).map(|i| i == 0).collect();
        // Even columns from parameters, odd ones constants.
        let row: Vec<Cell> = (0..types.len()).map(|i| if i % 2 == 0 { Cell::Param(i / 2) } else { Cell::Value(values[i].clone()) }).collect();
        let fast = FastInsert { table: "t".into(), schema, not_null, rows: vec![row] };
        let params: Vec<ScalarValue> = (0..types.len()).step_by(2).map(|i| values[i].clone()).collect();
        let one = fast.batch(&params).expect("one row");
        assert_eq!(one.num_rows(), 1);
        assert_eq!(Some(one.clone()), fast.any_rows_batch(&params, 0, None));
        assert_eq!(one.column(6).as_any().downcast_ref::<arrow::array::StringArray>().map(|a| a.value(0)), Some("one row per transaction"));
        // NULLs in nullable columns: the same batch both ways.
        let mut with_nulls = params.clone();
        for (k, i) in (0..types.len()).step_by(2).enumerate().skip(1) {
            with_nulls[k] = ScalarValue::try_from(&types[i]).expect("typed null");
        }
        let nulls = fast.batch(&with_nulls).expect("nulls in nullable columns");
        assert_eq!(nulls.column(2).null_count(), 1);
        assert_eq!(Some(nulls), fast.any_rows_batch(&with_nulls, 0, None));
        // Declined by both: NULL for NOT NULL, a parameter of another type, one missing.
        let mut null_key = params.clone();
        null_key[0] = ScalarValue::Int64(None);
        let mut other_type = params.clone();
        other_type[0] = ScalarValue::Int32(Some(1));
        for bad in [null_key, other_type, params[..2].to_vec()] {
            assert!(fast.batch(&bad).is_none(), "{bad:?}");
            assert!(fast.any_rows_batch(&bad, 0, None).is_none(), "{bad:?}");
        }
    }

    /// `now()` is read per execution (never frozen at Parse), once for all the rows of
    /// one execution, and cast to the column's type as the SQL path's projection casts it.
    #[test]
    fn now_is_each_executions_clock() {
        let column_type = DataType::Timestamp(TimeUnit::Microsecond, None);
        let schema: SchemaRef = Arc::new(Schema::new(vec![Field::new("ts", column_type.clone(), true)]));
        let now = Cell::Now { zone: Some(Arc::from("+00:00")), column_type: column_type.clone() };
        let fast = FastInsert { table: "t".into(), schema, not_null: vec![false], rows: vec![vec![now.clone()], vec![now]] };
        let micros = |b: &RecordBatch, row: usize| b.column(0).as_any().downcast_ref::<arrow::array::TimestampMicrosecondArray>().map(|a| a.value(row)).unwrap_or(-1);
        let before = chrono::Utc::now().timestamp_micros();
        let first = fast.batch(&[]).expect("two rows");
        std::thread::sleep(std::time::Duration::from_millis(2));
        let second = fast.batch(&[]).expect("two rows");
        let after = chrono::Utc::now().timestamp_micros();
        assert_eq!(micros(&first, 0), micros(&first, 1), "one clock reading per execution");
        assert!(before <= micros(&first, 0) && micros(&first, 0) < micros(&second, 0) && micros(&second, 0) <= after);
    }
}
