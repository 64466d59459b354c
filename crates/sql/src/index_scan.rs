//! Index lookups chosen for a scan: when a query's filters fix the leading columns of one
//! of the table's SQL indexes to constants (`=`, `IN`, `a = 1 OR a = 2`), the table
//! provider reads only the rows the index names (crates/write `key_index.rs`,
//! `SnapshotTable::rows_by_index`) instead of scanning every page. The filters stay
//! Inexact: DataFusion evaluates them again on the rows that come back, so an index entry
//! of a dead row or an old version can never show.
//!
//! The choice: the index whose key has the most leading columns fixed (a unique index with
//! all of them fixed finds at most one row per key); at most `LOOKUP_KEYS_MAX` keys (the
//! product of the IN lists), past which the scan reads the table. A range (`<`, `<=`, `>`,
//! `>=`, BETWEEN) on the column after the fixed ones is a range of keys (arrow's row
//! format orders keys as SQL orders their values, floats aside); a range that finds more
//! than [`range_rows_max`] rows is left to the scan. Whether a scan would be cheaper for
//! an equality key that matches much of the table is not weighed yet (no statistics of
//! key frequency: issue 32).

use std::fmt;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef};
use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;
use datafusion::common::{Result, ScalarValue, Statistics};
use datafusion::execution::TaskContext;
use datafusion::logical_expr::Operator;
use datafusion::physical_expr::EquivalenceProperties;
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{DisplayAs, DisplayFormatType, ExecutionPlan, Partitioning, PlanProperties, SendableRecordBatchStream};
use flashscan_write::key_index::{prefix_successor, Key, KeyIndex, KeyLookup};

use crate::pruning::ColumnPredicate;

/// Keys one lookup takes at most (the product of the IN lists).
pub const LOOKUP_KEYS_MAX: usize = 10_000;

/// Rows a range lookup reads at most in a table of `table_rows`: a tenth of them, and at
/// least 1,000. Past that a scan, which reads the pages in order at the device's speed,
/// beats one random page per row (a lookup also holds its rows in one batch).
pub fn range_rows_max(table_rows: u64) -> usize {
    usize::try_from(table_rows / 10).unwrap_or(usize::MAX).max(1_000)
}

/// An index and what to look up in it.
#[derive(Debug, Clone)]
pub struct IndexChoice {
    pub index: Arc<KeyIndex>,
    pub lookup: KeyLookup,
    /// How many leading key columns the filters fix.
    pub columns_fixed: usize,
    /// For EXPLAIN: `a = const`, `b IN (3 values)`, `c range`.
    pub description: String,
}

impl IndexChoice {
    /// Keys looked up (1 for a range).
    pub fn key_count(&self) -> usize {
        match &self.lookup {
            KeyLookup::Keys { keys, .. } => keys.len(),
            KeyLookup::Range { .. } => 1,
        }
    }
}

/// The constants a predicate fixes a column to, if it fixes it.
fn fixed_values(p: &ColumnPredicate) -> Option<&[ScalarValue]> {
    match p {
        ColumnPredicate::Compare { op: Operator::Eq, value, .. } => Some(std::slice::from_ref(value)),
        ColumnPredicate::InList { values, .. } => Some(values),
        _ => None,
    }
}

/// The bounds a predicate puts on its column: (lower, upper), each a value and whether it
/// is included.
fn range_bounds(p: &ColumnPredicate) -> (Option<(&ScalarValue, bool)>, Option<(&ScalarValue, bool)>) {
    match p {
        ColumnPredicate::Compare { op: Operator::Gt, value, .. } => (Some((value, false)), None),
        ColumnPredicate::Compare { op: Operator::GtEq, value, .. } => (Some((value, true)), None),
        ColumnPredicate::Compare { op: Operator::Lt, value, .. } => (None, Some((value, false))),
        ColumnPredicate::Compare { op: Operator::LtEq, value, .. } => (None, Some((value, true))),
        ColumnPredicate::Between { low, high, .. } => (Some((low, true)), Some((high, true))),
        _ => (None, None),
    }
}

/// Whether the index's key order is the order SQL compares values of `data_type` in, so a
/// range of keys is a range of values. Floats are left out: the row format orders -0.0
/// before 0.0 and NaN after everything, which a comparison need not.
fn ranges_by_key_order(data_type: &arrow::datatypes::DataType) -> bool {
    use arrow::datatypes::DataType as T;
    matches!(
        data_type,
        T::Int8 | T::Int16 | T::Int32 | T::Int64 | T::UInt8 | T::UInt16 | T::UInt32 | T::UInt64 | T::Decimal128(..) | T::Decimal256(..) | T::Utf8 | T::LargeUtf8 | T::Date32 | T::Date64 | T::Timestamp(..) | T::Time32(_) | T::Time64(_)
    )
}

/// `values` as the column stores them; a value that does not convert without loss is
/// dropped (it cannot equal any value of the column).
fn as_column_type(values: &[ScalarValue], field: &arrow::datatypes::Field) -> Option<ArrayRef> {
    let mut kept: Vec<ScalarValue> = Vec::with_capacity(values.len());
    for v in values {
        if let Some(exact) = exactly_as_column_type(v, field) {
            kept.push(exact);
        }
    }
    if kept.is_empty() {
        return Some(arrow::array::new_empty_array(field.data_type()));
    }
    ScalarValue::iter_to_array(kept).ok()
}

/// `v` in the column's type, if it converts without loss (5.5 into an integer column is 5,
/// which must not find 5).
fn exactly_as_column_type(v: &ScalarValue, field: &arrow::datatypes::Field) -> Option<ScalarValue> {
    let array = v.to_array().ok()?;
    let cast = arrow::compute::cast(&array, field.data_type()).ok()?;
    if cast.is_null(0) {
        return None;
    }
    let back = arrow::compute::cast(&cast, &v.data_type()).ok().and_then(|b| ScalarValue::try_from_array(&b, 0).ok());
    if back.as_ref() != Some(v) {
        return None;
    }
    ScalarValue::try_from_array(&cast, 0).ok()
}

/// How one index could serve the filters.
struct Fit<'a> {
    index: &'a Arc<KeyIndex>,
    fixed: usize,
    full_unique: bool,
    /// A range predicate on the column after the fixed ones (only when they fix one key).
    ranged: bool,
}

/// The best index lookup for `predicates` (columns index the table), if any: a unique
/// index with every column fixed, then the most leading columns fixed by `=` / `IN`, then
/// a range (`<`, `<=`, `>`, `>=`, BETWEEN) on the next column.
pub fn choose(indexes: &[Arc<KeyIndex>], predicates: &[ColumnPredicate], column_names: &[String]) -> Option<IndexChoice> {
    let mut best: Option<Fit> = None;
    for index in indexes {
        let fixed = index.columns().iter().take_while(|c| predicates.iter().any(|p| p.column() == **c && fixed_values(p).is_some())).count();
        let one_key = index.columns()[..fixed].iter().all(|c| predicates.iter().any(|p| p.column() == *c && fixed_values(p).is_some_and(|v| v.len() == 1)));
        let ranged = one_key
            && index.columns().get(fixed).is_some_and(|c| {
                ranges_by_key_order(index.fields()[fixed].data_type()) && predicates.iter().any(|p| p.column() == *c && range_bounds(p) != (None, None))
            });
        if fixed == 0 && !ranged {
            continue;
        }
        let fit = Fit { index, fixed, full_unique: index.is_unique() && fixed == index.columns().len(), ranged };
        let better = match &best {
            None => true,
            Some(b) => (fit.full_unique, fit.fixed, fit.ranged) > (b.full_unique, b.fixed, b.ranged),
        };
        if better {
            best = Some(fit);
        }
    }
    let Fit { index, fixed, full_unique, ranged } = best?;
    // Per fixed column, its values (the intersection of every predicate fixing it is
    // left to DataFusion's filter: the first such predicate is taken).
    let mut columns: Vec<ArrayRef> = Vec::with_capacity(fixed);
    let mut description = Vec::new();
    let mut combinations = 1usize;
    for (j, c) in index.columns()[..fixed].iter().enumerate() {
        let p = predicates.iter().find(|p| p.column() == *c && fixed_values(p).is_some())?;
        let values = as_column_type(fixed_values(p)?, &index.fields()[j])?;
        combinations = combinations.checked_mul(values.len())?;
        if combinations > LOOKUP_KEYS_MAX {
            return None;
        }
        let name = column_names.get(*c).cloned().unwrap_or_default();
        description.push(if values.len() == 1 { format!("{name} = const") } else { format!("{name} IN ({} values)", values.len()) });
        columns.push(values);
    }
    if ranged && !full_unique && combinations == 1 {
        let c = index.columns()[fixed];
        description.push(format!("{} range", column_names.get(c).cloned().unwrap_or_default()));
        let lookup = range_lookup(index, &columns, fixed, predicates.iter().filter(|p| p.column() == c))?;
        return Some(IndexChoice { index: index.clone(), lookup, columns_fixed: fixed, description: description.join(", ") });
    }
    if fixed == 0 {
        return None;
    }
    // Every combination of the fixed columns' values, as key columns of equal length.
    let mut indices: Vec<Vec<u32>> = vec![Vec::with_capacity(combinations); fixed];
    for n in 0..combinations {
        let mut rest = n;
        for (j, c) in columns.iter().enumerate().rev() {
            indices[j].push((rest % c.len()) as u32);
            rest /= c.len();
        }
    }
    let key_columns: Vec<ArrayRef> = columns.iter().zip(&indices).map(|(c, i)| arrow::compute::take(c.as_ref(), &arrow::array::UInt32Array::from(i.clone()), None)).collect::<std::result::Result<_, _>>().ok()?;
    let keys: Vec<Key> = if combinations == 0 { Vec::new() } else { index.keys_of(&key_columns).ok()? };
    let lookup = KeyLookup::Keys { keys, prefix: fixed < index.columns().len() };
    Some(IndexChoice { index: index.clone(), lookup, columns_fixed: fixed, description: description.join(", ") })
}

/// The range of keys whose first `fixed` columns are `prefix` (one value each) and whose
/// next column meets the bounds of `ranges`: the first lower and the first upper bound
/// that convert to the column's type exactly (the others, and the ones that do not
/// convert, are left to DataFusion's filter, which runs again on what the lookup finds).
pub fn range_lookup<'a>(index: &KeyIndex, prefix: &[ArrayRef], fixed: usize, ranges: impl Iterator<Item = &'a ColumnPredicate>) -> Option<KeyLookup> {
    use std::ops::Bound;
    let field = &index.fields()[fixed];
    let (mut lower, mut upper) = (None, None);
    for p in ranges {
        let (l, u) = range_bounds(p);
        if lower.is_none() {
            lower = l.and_then(|(v, inclusive)| exactly_as_column_type(v, field).map(|v| (v, inclusive)));
        }
        if upper.is_none() {
            upper = u.and_then(|(v, inclusive)| exactly_as_column_type(v, field).map(|v| (v, inclusive)));
        }
    }
    // The key of the prefix followed by `v`.
    let key_with = |v: &ScalarValue| -> Option<Key> {
        let mut columns = prefix.to_vec();
        columns.push(v.to_array().ok()?);
        index.keys_of(&columns).ok()?.into_iter().next()
    };
    let prefix_key = if fixed == 0 { None } else { Some(index.keys_of(prefix).ok()?.into_iter().next()?) };
    let lower = match lower {
        Some((v, true)) => Bound::Included(key_with(&v)?),
        // Past every key that starts with (prefix, v): longer keys share that start.
        Some((v, false)) => Bound::Included(prefix_successor(&key_with(&v)?)?),
        None => prefix_key.clone().map_or(Bound::Unbounded, Bound::Included),
    };
    let after_prefix = || prefix_key.as_deref().and_then(prefix_successor).map_or(Bound::Unbounded, Bound::Excluded);
    let upper = match upper {
        Some((v, false)) => Bound::Excluded(key_with(&v)?),
        Some((v, true)) => prefix_successor(&key_with(&v)?).map_or_else(after_prefix, Bound::Excluded),
        None => after_prefix(),
    };
    Some(KeyLookup::Range { lower, upper })
}

/// The rows an index lookup found, read at planning time under the statement's snapshot
/// (as the delta's rows are): one batch, shown by EXPLAIN with the index and its keys.
#[derive(Debug)]
pub struct IndexLookupExec {
    table: String,
    index: String,
    description: String,
    keys: usize,
    /// Rows the index found.
    rows_found: usize,
    batch: RecordBatch,
    /// Set when `batch` is a point statement's answer (`answered`): the filter and the
    /// output expressions it was computed with, formatted only by EXPLAIN.
    answered: Option<(datafusion::logical_expr::Expr, Vec<datafusion::logical_expr::Expr>)>,
    properties: Arc<PlanProperties>,
}

fn lookup_properties(batch: &RecordBatch) -> Arc<PlanProperties> {
    Arc::new(PlanProperties::new(EquivalenceProperties::new(batch.schema()), Partitioning::UnknownPartitioning(1), EmissionType::Incremental, Boundedness::Bounded))
}

impl IndexLookupExec {
    pub fn new(table: &str, choice: &IndexChoice, batch: RecordBatch) -> IndexLookupExec {
        IndexLookupExec {
            table: table.to_string(),
            index: choice.index.name().to_string(),
            description: choice.description.clone(),
            keys: choice.key_count(),
            rows_found: batch.num_rows(),
            properties: lookup_properties(&batch),
            batch,
            answered: None,
        }
    }

    /// Rows found (before the filter above runs again).
    pub fn row_count(&self) -> usize {
        self.batch.num_rows()
    }

    /// The rows the index found (the table's columns, as the lookup's schema says).
    pub fn rows(&self) -> &RecordBatch {
        &self.batch
    }

    /// The statement's rows, when this lookup holds a point statement's answer (`answered`).
    pub fn answer(&self) -> Option<&RecordBatch> {
        self.answered.as_ref().map(|_| &self.batch)
    }

    /// The same lookup holding `answer`, the statement's rows computed from the ones found
    /// (point_plan.rs: the filter and projection evaluated at once, no operators above),
    /// with the `filter` and `projection` it was computed with, for EXPLAIN.
    pub fn answered(&self, answer: RecordBatch, filter: datafusion::logical_expr::Expr, projection: Vec<datafusion::logical_expr::Expr>) -> IndexLookupExec {
        IndexLookupExec {
            table: self.table.clone(),
            index: self.index.clone(),
            description: self.description.clone(),
            keys: self.keys,
            rows_found: self.rows_found,
            properties: lookup_properties(&answer),
            batch: answer,
            answered: Some((filter, projection)),
        }
    }
}

impl DisplayAs for IndexLookupExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "IndexLookupExec: table={} index={} ({}) keys={} rows={}", self.table, self.index, self.description, self.keys, self.rows_found)?;
        if let Some((filter, projection)) = &self.answered {
            let projection: Vec<String> = projection.iter().map(|e| e.to_string()).collect();
            write!(f, " answered: filter={filter} projection=[{}] rows={}", projection.join(", "), self.batch.num_rows())?;
        }
        Ok(())
    }
}

impl ExecutionPlan for IndexLookupExec {
    fn name(&self) -> &'static str {
        "IndexLookupExec"
    }

    crate::leaf_plan_methods!();

    fn execute(&self, partition: usize, _context: Arc<TaskContext>) -> Result<SendableRecordBatchStream> {
        if partition != 0 {
            return Err(datafusion::error::DataFusionError::Internal(format!("IndexLookupExec has one partition, asked for {partition}")));
        }
        let batch = self.batch.clone();
        let schema: SchemaRef = batch.schema();
        Ok(Box::pin(RecordBatchStreamAdapter::new(schema, futures::stream::once(async move { Ok(batch) }))))
    }

    fn statistics_from_inputs(&self, _input_stats: &[Arc<Statistics>], _args: &datafusion::physical_plan::StatisticsArgs) -> Result<Arc<Statistics>> {
        let mut s = Statistics::new_unknown(&self.batch.schema());
        s.num_rows = datafusion::common::stats::Precision::Exact(self.batch.num_rows());
        Ok(Arc::new(s))
    }
}
