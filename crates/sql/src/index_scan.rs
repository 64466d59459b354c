//! Index lookups chosen for a scan: when a query's filters fix the leading columns of one
//! of the table's SQL indexes to constants (`=`, `IN`, `a = 1 OR a = 2`), the table
//! provider reads only the rows the index names (crates/write `key_index.rs`,
//! `SnapshotTable::rows_by_index`) instead of scanning every page. The filters stay
//! Inexact: DataFusion evaluates them again on the rows that come back, so an index entry
//! of a dead row or an old version can never show.
//!
//! The choice: the index whose key has the most leading columns fixed (a unique index with
//! all of them fixed finds at most one row per key); at most `LOOKUP_KEYS_MAX` keys (the
//! product of the IN lists), past which the scan reads the table. Whether a scan would be
//! cheaper for a key that matches much of the table is not weighed yet (no statistics of
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
use flashscan_write::key_index::{Key, KeyIndex};

use crate::pruning::ColumnPredicate;

/// Keys one lookup takes at most (the product of the IN lists).
pub const LOOKUP_KEYS_MAX: usize = 10_000;

/// An index and the keys to look up in it.
#[derive(Debug, Clone)]
pub struct IndexChoice {
    pub index: Arc<KeyIndex>,
    pub keys: Vec<Key>,
    /// The keys fix fewer columns than the index has: each is a prefix.
    pub prefix: bool,
    /// How many leading key columns the filters fix.
    pub columns_fixed: usize,
    /// For EXPLAIN: `a = 1`, `b IN (…)`.
    pub description: String,
}

/// The constants a predicate fixes a column to, if it fixes it.
fn fixed_values(p: &ColumnPredicate) -> Option<&[ScalarValue]> {
    match p {
        ColumnPredicate::Compare { op: Operator::Eq, value, .. } => Some(std::slice::from_ref(value)),
        ColumnPredicate::InList { values, .. } => Some(values),
        _ => None,
    }
}

/// `values` as the column stores them; a value that does not convert without loss is
/// dropped (it cannot equal any value of the column).
fn as_column_type(values: &[ScalarValue], field: &arrow::datatypes::Field) -> Option<ArrayRef> {
    let mut kept: Vec<ScalarValue> = Vec::with_capacity(values.len());
    for v in values {
        let Ok(array) = v.to_array() else { return None };
        let Ok(cast) = arrow::compute::cast(&array, field.data_type()) else { continue };
        if cast.is_null(0) {
            continue;
        }
        // Round trip: 5.5 into an integer column is 5, which must not find 5.
        let back = arrow::compute::cast(&cast, &v.data_type()).ok().and_then(|b| ScalarValue::try_from_array(&b, 0).ok());
        if back.as_ref() != Some(v) {
            continue;
        }
        kept.push(ScalarValue::try_from_array(&cast, 0).ok()?);
    }
    if kept.is_empty() {
        return Some(arrow::array::new_empty_array(field.data_type()));
    }
    ScalarValue::iter_to_array(kept).ok()
}

/// The best index lookup for `predicates` (columns index the table), if any.
pub fn choose(indexes: &[Arc<KeyIndex>], predicates: &[ColumnPredicate], column_names: &[String]) -> Option<IndexChoice> {
    let mut best: Option<(usize, bool, &Arc<KeyIndex>)> = None;
    for index in indexes {
        let fixed = index.columns().iter().take_while(|c| predicates.iter().any(|p| p.column() == **c && fixed_values(p).is_some())).count();
        if fixed == 0 {
            continue;
        }
        let full_unique = index.is_unique() && fixed == index.columns().len();
        let better = match best {
            None => true,
            Some((f, u, _)) => (full_unique && !u) || (full_unique == u && fixed > f),
        };
        if better {
            best = Some((fixed, full_unique, index));
        }
    }
    let (fixed, _, index) = best?;
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
    Some(IndexChoice { index: index.clone(), keys, prefix: fixed < index.columns().len(), columns_fixed: fixed, description: description.join(", ") })
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
            keys: choice.keys.len(),
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
