//! Runtime filters in a scan unit: the filters DataFusion's operators push into
//! `FlashscanExec` once the plan is final (a hash join's build side: its keys' bounds and
//! membership; a TopK's threshold), evaluated cheaply and only while they pay.
//!
//! **Cheaper forms of the same filter.** A partitioned hash join's filter is
//! `CASE hash_repartition(keys) % N WHEN 0 THEN bounds0 AND hash_lookup0 WHEN 1 THEN … END`.
//! DataFusion's `CaseExpr` evaluates it by comparing the route with every branch's
//! literal, filtering the batch once per branch, evaluating the branch, and merging the
//! branches' results (`merge_n`); each branch's `bounds AND lookup` is a `BinaryExpr` that
//! evaluates the bounds on all rows first. Profiled on TPC-H Q4 at SF 10 (`perf record -g`),
//! that evaluation was 41 % of the query's samples, of which the hash-table probes were
//! 13 %: the filter cost ~24 ns per row, more than the repartition and the join probe it
//! saved (~17 ns), so Q4 ran 1.1 s with filters against 0.8 s without. Here the route
//! is computed once, the rows are dealt to their branch by index, each branch reads only
//! its key columns (taken by index), and bounds the batch's own min/max already satisfy
//! are not evaluated (they are the build side's key range, usually the whole range).
//!
//! **Only while they pay** (`RuntimeFilter::judge`): a filter is tried on a sample of rows
//! and set aside for a while when it keeps more than `RUNTIME_FILTER_KEEP_MAX` of them. Its
//! evaluation is a hash and a probe per row, about what the repartition and the join probe
//! above cost per row they are handed: it pays when it drops most rows.
//!
//! The operators that made a filter were told nothing was pushed (they still do their own
//! work), so any evaluation that keeps at least the rows the filter keeps is correct; the
//! forms here keep exactly those (tests compare them with DataFusion's own evaluation).

use std::cmp::Ordering;
use std::sync::Arc;
use std::time::Instant;

use arrow::array::{Array, ArrayRef, AsArray, RecordBatch, RecordBatchOptions, UInt32Array};
use arrow::buffer::{BooleanBuffer, MutableBuffer};
use arrow::datatypes::{DataType, SchemaRef};
use arrow::util::bit_util;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{DataFusionError, Result, ScalarValue};
use datafusion::logical_expr::{ColumnarValue, Operator};
use datafusion::physical_expr::expressions::{BinaryExpr, CaseExpr, Column, Literal};
use datafusion::physical_expr::utils::{collect_columns, split_conjunction};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_expr_common::physical_expr::{snapshot_generation, snapshot_physical_expr};
use datafusion::physical_plan::metrics::{Count, ExecutionPlanMetricsSet, MetricBuilder, Time};

/// Rows a runtime filter is judged on before the scan decides whether it pays. Small, so
/// a unit of a small table is judged too (one batch of DataFusion's default size; trials repeat
/// while the filter is applied).
pub const RUNTIME_FILTER_TRIAL_ROWS: u64 = 8 * 1024;
/// A runtime filter that keeps more than this share of the rows it is judged on is set
/// aside. Its evaluation (a hash and a probe per row) costs about what the repartition
/// and join probe above it spend per row (TPC-H Q4 at SF 10, EXPLAIN ANALYZE: ~17 ns a row
/// in the repartition and probe against ~10 ns a row for the filter in the forms here),
/// so it pays only when it drops more rows than it keeps; the margin covers the joins
/// whose probe side is cheap (a build side in cache). docs/benchmarks.md (speed6b) has
/// the A/B behind the value.
pub const RUNTIME_FILTER_KEEP_MAX: f64 = 0.5;
/// Rows a set-aside filter skips before it is judged again (a TopK's threshold tightens
/// as the query runs; a join's filter is final once its build side is done).
pub const RUNTIME_FILTER_RETRY_ROWS: u64 = 4 * 1024 * 1024;

/// What runtime filters did in one execution partition, shown by EXPLAIN ANALYZE.
#[derive(Clone)]
pub struct RuntimeFilterMetrics {
    /// Rows filters were evaluated on (a row counts once per live filter).
    input_rows: Count,
    /// Rows they dropped.
    dropped_rows: Count,
    /// Trials after which a filter was set aside for keeping most rows.
    set_aside: Count,
    time: Time,
}

impl RuntimeFilterMetrics {
    pub fn new(set: &ExecutionPlanMetricsSet, partition: usize) -> RuntimeFilterMetrics {
        RuntimeFilterMetrics {
            input_rows: MetricBuilder::new(set).counter("runtime_filter_input_rows", partition),
            dropped_rows: MetricBuilder::new(set).counter("runtime_filter_dropped_rows", partition),
            set_aside: MetricBuilder::new(set).counter("runtime_filter_set_aside", partition),
            time: MetricBuilder::new(set).subset_time("runtime_filter_time", partition),
        }
    }
}

/// One runtime filter in one scan unit, with what it has done so far.
pub struct RuntimeFilter {
    expr: Arc<dyn PhysicalExpr>,
    /// The filter's form for its current generation (a join's filter changes once, from
    /// `true` to the build side's keys; a TopK's with every better row).
    compiled: Option<(u64, Compiled)>,
    /// Rows evaluated (while the filter was live) and rows kept, in the current trial.
    judged_rows: u64,
    kept_rows: u64,
    /// Rows still to hand on unfiltered before the next trial (0: the filter is applied).
    skip_rows: u64,
}

impl RuntimeFilter {
    pub fn new(expr: Arc<dyn PhysicalExpr>) -> RuntimeFilter {
        RuntimeFilter { expr, compiled: None, judged_rows: 0, kept_rows: 0, skip_rows: 0 }
    }

    /// Records that `kept` of `rows` passed; sets the filter aside once a trial shows it
    /// keeps most rows. True when it was set aside.
    fn judge(&mut self, rows: usize, kept: usize) -> bool {
        self.judged_rows += rows as u64;
        self.kept_rows += kept as u64;
        let mut set_aside = false;
        if self.judged_rows >= RUNTIME_FILTER_TRIAL_ROWS {
            if self.kept_rows as f64 > RUNTIME_FILTER_KEEP_MAX * self.judged_rows as f64 {
                self.skip_rows = RUNTIME_FILTER_RETRY_ROWS;
                set_aside = true;
            }
            self.judged_rows = 0;
            self.kept_rows = 0;
        }
        set_aside
    }

    /// The filter's form for its current state.
    fn compiled(&mut self, schema: &SchemaRef) -> Result<&Compiled> {
        let generation = snapshot_generation(&self.expr);
        if self.compiled.as_ref().is_none_or(|(g, _)| *g != generation) {
            let current = snapshot_physical_expr(self.expr.clone())?;
            self.compiled = Some((generation, Compiled::of(&current, schema)));
        }
        match &self.compiled {
            Some((_, compiled)) => Ok(compiled),
            None => Err(DataFusionError::Internal("runtime filter not compiled".into())),
        }
    }
}

/// `batch` without the rows that fail any of `filters` (a null fails). A filter still `true`
/// (a hash join whose build side is not finished) costs one look at its generation. A
/// filter that keeps most rows is set aside for a while (`RuntimeFilter::judge`): the
/// operators above apply it anyway, so skipping it changes no answer.
pub fn apply_runtime_filters(filters: &mut [RuntimeFilter], batch: RecordBatch, metrics: Option<&RuntimeFilterMetrics>) -> Result<RecordBatch> {
    let mut batch = batch;
    for filter in filters {
        if batch.num_rows() == 0 {
            break;
        }
        if filter.skip_rows > 0 {
            filter.skip_rows = filter.skip_rows.saturating_sub(batch.num_rows() as u64);
            continue;
        }
        let start = Instant::now();
        let rows = batch.num_rows();
        let compiled = filter.compiled(&batch.schema())?;
        if matches!(compiled, Compiled::Constant(true)) {
            // Not filled yet (or no longer filtering): nothing to judge.
            continue;
        }
        if matches!(compiled, Compiled::KeysOnly) {
            // Set aside for good (its generation is final: a join's filter once filled).
            filter.skip_rows = u64::MAX;
            if let Some(m) = metrics {
                m.set_aside.add(1);
            }
            continue;
        }
        let selection = compiled.selection(&batch)?;
        let kept = match selection {
            Selection::All => rows,
            Selection::Nothing => 0,
            Selection::Mask(ref mask) => mask.count_set_bits(),
        };
        batch = match selection {
            Selection::Mask(mask) if kept < rows => arrow::compute::filter_record_batch(&batch, &arrow::array::BooleanArray::new(mask, None))?,
            Selection::Mask(_) | Selection::All => batch,
            Selection::Nothing => batch.slice(0, 0),
        };
        let set_aside = filter.judge(rows, kept);
        if let Some(m) = metrics {
            m.input_rows.add(rows);
            m.dropped_rows.add(rows - kept);
            m.set_aside.add(set_aside as usize);
            m.time.add_elapsed(start);
        }
    }
    Ok(batch)
}

/// Which rows of a batch pass.
#[derive(Debug)]
enum Selection {
    All,
    Nothing,
    /// A bit per row (set: passes).
    Mask(BooleanBuffer),
}

impl Selection {
    fn and(self, other: Selection) -> Selection {
        match (self, other) {
            (Selection::Nothing, _) | (_, Selection::Nothing) => Selection::Nothing,
            (Selection::All, s) | (s, Selection::All) => s,
            (Selection::Mask(a), Selection::Mask(b)) => Selection::Mask(&a & &b),
        }
    }
}

/// A runtime filter's current expression in the form the scan evaluates.
#[derive(Debug)]
enum Compiled {
    /// A literal: every row passes (true) or none (false or null).
    Constant(bool),
    Conjuncts(Conjuncts),
    Routed(Routed),
    /// Any other expression, evaluated as it is.
    Expr(Arc<dyn PhysicalExpr>),
    /// A join's membership test (hash table or IN list) over every column of the batch:
    /// not applied. The join it came from (here or through the repartition on the same
    /// keys) does the same hash and probe on the same rows, so dropping a row early saves
    /// nothing but the copy of its other columns — and it has none. Measured on TPC-H Q4
    /// (`EXISTS` on l_orderkey, the lineitem scan hands on l_orderkey alone): applied, the
    /// filter dropped 96 % of 38 M rows and still cost more CPU than it saved.
    KeysOnly,
}

impl Compiled {
    fn of(expr: &Arc<dyn PhysicalExpr>, schema: &SchemaRef) -> Compiled {
        if is_membership_over_every_column(expr, schema) {
            return Compiled::KeysOnly;
        }
        if let Some(literal) = expr.downcast_ref::<Literal>() {
            return match literal.value() {
                ScalarValue::Boolean(value) => Compiled::Constant(value == &Some(true)),
                _ => Compiled::Expr(expr.clone()),
            };
        }
        if let Some(case) = expr.downcast_ref::<CaseExpr>() {
            return Routed::of(case, schema).map_or_else(|| Compiled::Expr(expr.clone()), Compiled::Routed);
        }
        Compiled::Conjuncts(Conjuncts::of(expr, None))
    }

    fn selection(&self, batch: &RecordBatch) -> Result<Selection> {
        match self {
            Compiled::Constant(true) => Ok(Selection::All),
            Compiled::Constant(false) => Ok(Selection::Nothing),
            Compiled::Conjuncts(c) => c.selection(batch, &mut Extents::of(batch)),
            Compiled::Routed(r) => r.selection(batch),
            Compiled::Expr(e) => selection_of(e, batch),
            Compiled::KeysOnly => Ok(Selection::All),
        }
    }
}

/// True when `expr` tests membership in a join's build side (a hash table lookup or an IN
/// list) and reads every column of `schema`.
fn is_membership_over_every_column(expr: &Arc<dyn PhysicalExpr>, schema: &SchemaRef) -> bool {
    use datafusion::common::tree_node::TreeNodeRecursion;
    use datafusion::physical_expr::expressions::InListExpr;
    use datafusion::physical_plan::joins::HashTableLookupExpr;
    let mut membership = false;
    let _ = expr.apply(|e| {
        membership |= e.downcast_ref::<HashTableLookupExpr>().is_some() || e.downcast_ref::<InListExpr>().is_some_and(|l| !l.negated());
        Ok(if membership { TreeNodeRecursion::Stop } else { TreeNodeRecursion::Continue })
    });
    let read = collect_columns(expr);
    membership && (0..schema.fields().len()).all(|i| read.iter().any(|c| c.index() == i))
}

/// The rows for which `expr` is true.
fn selection_of(expr: &Arc<dyn PhysicalExpr>, batch: &RecordBatch) -> Result<Selection> {
    match expr.evaluate(batch)? {
        ColumnarValue::Scalar(ScalarValue::Boolean(Some(true))) => Ok(Selection::All),
        ColumnarValue::Scalar(ScalarValue::Boolean(_)) => Ok(Selection::Nothing),
        ColumnarValue::Scalar(other) => Err(DataFusionError::Internal(format!("runtime filter {expr} gave {other:?}, not a boolean"))),
        ColumnarValue::Array(array) => {
            let array = datafusion::common::cast::as_boolean_array(&array)?;
            Ok(Selection::Mask(match array.nulls() {
                Some(nulls) => array.values() & nulls.inner(),
                None => array.values().clone(),
            }))
        }
    }
}

/// A conjunction, each conjunct evaluated on the whole batch and the results ANDed.
#[derive(Debug)]
struct Conjuncts(Vec<Conjunct>);

#[derive(Debug)]
enum Conjunct {
    /// `column op value` with `op` one of `<`, `<=`, `>`, `>=`: skipped for a batch whose
    /// own min and max satisfy it (and that has no null in the column). `source` is the
    /// column in the scan's batch (`column` may be renumbered in a routed branch's).
    Bound { source: usize, op: Operator, value: ScalarValue, expr: Arc<dyn PhysicalExpr> },
    /// `column IN (integers)` over a span the bitmap covers: a bit test per row.
    Members(KeyBitmap),
    Other(Arc<dyn PhysicalExpr>),
}

/// Spans of keys a bitmap covers whatever its density: 2^20 bits, 128 KB, in the L2 cache.
pub const KEY_BITMAP_SPAN_MIN_BITS: u64 = 1 << 20;
/// Beyond `KEY_BITMAP_SPAN_MIN_BITS`, a bitmap holds at least one key per this many bits
/// (sparser, a hash set of the keys is smaller than the bitmap and stays in cache).
pub const KEY_BITMAP_BITS_PER_KEY_MAX: u64 = 64;

/// The keys of a join's build side as bits over `low..low + span`, from the IN list
/// DataFusion pushes into the probe side's scan (`hash_join_inlist_pushdown_max_*`, set
/// by the session). DataFusion evaluates that list as a hash set: a hash and a probe per
/// row, ~11 ns a row on TPC-H Q17 at SF 1 (EXPLAIN ANALYZE: 135 ms of the query's 330 ms
/// of CPU, for the 204 part keys its two lineitem scans test 12 M rows against); here it
/// is a subtraction, a compare and a bit test, with no branch per row.
#[derive(Debug)]
pub(crate) struct KeyBitmap {
    /// The column of the batch the filter reads (after a routed branch's renumbering).
    column: usize,
    low: i64,
    /// Values `low..low + span` have a bit; every other value is not a key.
    span: u64,
    words: Vec<u64>,
}

impl KeyBitmap {
    /// The bitmap of `expr` when it is `column IN (integer literals)`, not negated, whose
    /// keys span few enough bits (`KEY_BITMAP_*`).
    fn of(expr: &Arc<dyn PhysicalExpr>) -> Option<KeyBitmap> {
        use datafusion::physical_expr::expressions::InListExpr;
        let list = expr.downcast_ref::<InListExpr>()?;
        if list.negated() {
            return None;
        }
        let column = list.expr().downcast_ref::<Column>()?.index();
        let mut keys: Vec<i64> = Vec::with_capacity(list.list().len());
        for item in list.list() {
            // A NULL in the list never makes a row pass (x IN (…, NULL) is true or null).
            match integer_of(item.downcast_ref::<Literal>()?.value())? {
                Some(k) => keys.push(k),
                None => continue,
            }
        }
        let (&low, &high) = (keys.iter().min()?, keys.iter().max()?);
        let span = u64::try_from(i128::from(high) - i128::from(low) + 1).ok()?;
        if span > KEY_BITMAP_SPAN_MIN_BITS.max(KEY_BITMAP_BITS_PER_KEY_MAX.saturating_mul(keys.len() as u64)) {
            return None;
        }
        let mut words = vec![0u64; span.div_ceil(64) as usize];
        for k in keys {
            let d = k.wrapping_sub(low) as u64;
            words[(d >> 6) as usize] |= 1 << (d & 63);
        }
        Some(KeyBitmap { column, low, span, words })
    }

    fn selection(&self, batch: &RecordBatch) -> Result<Selection> {
        use arrow::datatypes::{Date32Type, Int32Type, Int64Type};
        let array = batch.columns().get(self.column).ok_or_else(|| DataFusionError::Internal(format!("key bitmap column {} not in the batch", self.column)))?;
        let rows = array.len();
        let mut words: Vec<u64> = vec![0; rows.div_ceil(64)];
        match array.data_type() {
            DataType::Int64 => self.pack(array.as_primitive::<Int64Type>().values().iter().copied(), &mut words),
            DataType::Int32 => self.pack(array.as_primitive::<Int32Type>().values().iter().map(|&v| i64::from(v)), &mut words),
            DataType::Date32 => self.pack(array.as_primitive::<Date32Type>().values().iter().map(|&v| i64::from(v)), &mut words),
            _ => {
                let wide = arrow::compute::cast(array, &DataType::Int64)?;
                self.pack(wide.as_primitive::<Int64Type>().values().iter().copied(), &mut words)
            }
        }
        let bits = BooleanBuffer::new(arrow::buffer::Buffer::from_vec(words), 0, rows);
        Ok(Selection::Mask(match array.nulls() {
            Some(nulls) if nulls.null_count() > 0 => &bits & nulls.inner(),
            _ => bits,
        }))
    }

    /// A bit per value (Arrow's order), set for the keys; no branch per value.
    fn pack(&self, values: impl Iterator<Item = i64>, out: &mut [u64]) {
        let (low, span, bitmap) = (self.low, self.span, self.words.as_slice());
        let mut word = 0u64;
        let mut at = 0usize;
        for v in values {
            let d = v.wrapping_sub(low) as u64;
            let inside = d < span;
            // Outside, bit 0 is read (the least key's, always set) and masked off.
            let d = if inside { d } else { 0 };
            let bit = (bitmap[(d >> 6) as usize] >> (d & 63)) & inside as u64;
            word |= bit << (at & 63);
            at += 1;
            if at & 63 == 0 {
                out[at / 64 - 1] = word;
                word = 0;
            }
        }
        if at & 63 != 0 {
            out[at / 64] = word;
        }
    }
}

/// A literal's value as an i64 key: Some(None) for a NULL, None for a type keys are not.
fn integer_of(value: &ScalarValue) -> Option<Option<i64>> {
    Some(match value {
        ScalarValue::Int8(v) => v.map(i64::from),
        ScalarValue::Int16(v) => v.map(i64::from),
        ScalarValue::Int32(v) | ScalarValue::Date32(v) => v.map(i64::from),
        ScalarValue::Int64(v) => *v,
        ScalarValue::UInt8(v) => v.map(i64::from),
        ScalarValue::UInt16(v) => v.map(i64::from),
        ScalarValue::UInt32(v) => v.map(i64::from),
        _ => return None,
    })
}

/// The min and max of the columns of one scan batch that bounds name, each computed once
/// per batch (a routed filter's branches test their bounds against the whole batch's:
/// what holds for every row of the batch holds for every row of a branch).
struct Extents<'a> {
    batch: &'a RecordBatch,
    known: Vec<(usize, Option<(ScalarValue, ScalarValue)>)>,
}

impl<'a> Extents<'a> {
    fn of(batch: &'a RecordBatch) -> Extents<'a> {
        Extents { batch, known: Vec::new() }
    }

    /// True when `column op value` holds for every row of the batch.
    fn bound_holds(&mut self, column: usize, op: Operator, value: &ScalarValue) -> bool {
        let at = match self.known.iter().position(|(c, _)| *c == column) {
            Some(at) => at,
            None => {
                let extent = self.batch.columns().get(column).and_then(min_max);
                self.known.push((column, extent));
                self.known.len() - 1
            }
        };
        match self.known.get(at) {
            Some((_, Some((min, max)))) => bound_holds_for(min, max, op, value),
            _ => false,
        }
    }
}

impl Conjuncts {
    /// See `Conjunct::of`.
    fn of(expr: &Arc<dyn PhysicalExpr>, sources: Option<&[usize]>) -> Conjuncts {
        Conjuncts(split_conjunction(expr).into_iter().map(|c| Conjunct::of(c.clone(), sources)).collect())
    }

    /// The rows of `batch` that pass; `extents` are of the scan's batch `batch` was taken from.
    fn selection(&self, batch: &RecordBatch, extents: &mut Extents) -> Result<Selection> {
        let mut selection = Selection::All;
        for conjunct in &self.0 {
            let expr = match conjunct {
                Conjunct::Bound { source, op, value, expr } => {
                    if extents.bound_holds(*source, *op, value) {
                        continue;
                    }
                    expr
                }
                Conjunct::Members(bitmap) => {
                    selection = selection.and(bitmap.selection(batch)?);
                    if matches!(selection, Selection::Nothing) {
                        break;
                    }
                    continue;
                }
                Conjunct::Other(expr) => expr,
            };
            selection = selection.and(selection_of(expr, batch)?);
            if matches!(selection, Selection::Nothing) {
                break;
            }
        }
        Ok(selection)
    }
}

impl Conjunct {
    /// `expr` over a batch whose columns are the scan batch's `sources` (None: the same).
    fn of(expr: Arc<dyn PhysicalExpr>, sources: Option<&[usize]>) -> Conjunct {
        let bound = (|| {
            let binary = expr.downcast_ref::<BinaryExpr>()?;
            let column = binary.left().downcast_ref::<Column>()?.index();
            let value = binary.right().downcast_ref::<Literal>()?.value().clone();
            let op = *binary.op();
            matches!(op, Operator::Lt | Operator::LtEq | Operator::Gt | Operator::GtEq).then_some((column, op, value))
        })();
        let source = |column: usize| match sources {
            Some(sources) => sources.get(column).copied(),
            None => Some(column),
        };
        if let Some(bitmap) = KeyBitmap::of(&expr) {
            return Conjunct::Members(bitmap);
        }
        match bound.and_then(|(column, op, value)| Some((source(column)?, op, value))) {
            Some((source, op, value)) => Conjunct::Bound { source, op, value, expr },
            None => Conjunct::Other(expr),
        }
    }
}

/// True when `array op value` holds for every row: no nulls, and its min (for `>`, `>=`)
/// or max (for `<`, `<=`) compares so. False when unsure (other types, values of another type).
#[cfg(test)]
fn bound_holds_for_every_row(array: &ArrayRef, op: Operator, value: &ScalarValue) -> bool {
    match min_max(array) {
        Some((min, max)) => bound_holds_for(&min, &max, op, value),
        None => false,
    }
}

/// True when `x op value` holds for every `x` from `min` to `max`.
fn bound_holds_for(min: &ScalarValue, max: &ScalarValue, op: Operator, value: &ScalarValue) -> bool {
    if value.is_null() {
        return false;
    }
    match op {
        Operator::GtEq => matches!(min.partial_cmp(value), Some(Ordering::Greater | Ordering::Equal)),
        Operator::Gt => min.partial_cmp(value) == Some(Ordering::Greater),
        Operator::LtEq => matches!(max.partial_cmp(value), Some(Ordering::Less | Ordering::Equal)),
        Operator::Lt => max.partial_cmp(value) == Some(Ordering::Less),
        _ => false,
    }
}

/// The least and greatest value of an integer, date or decimal array without nulls (None
/// with a null, empty, or of another type).
fn min_max(array: &ArrayRef) -> Option<(ScalarValue, ScalarValue)> {
    use arrow::datatypes::{Date32Type, Date64Type, Decimal128Type, Int16Type, Int32Type, Int64Type, Int8Type, UInt16Type, UInt32Type, UInt64Type, UInt8Type};
    if array.null_count() > 0 {
        return None;
    }
    macro_rules! of {
        ($t:ty) => {{
            let (min, max) = extent(array.as_primitive::<$t>().values())?;
            Some((ScalarValue::new_primitive::<$t>(Some(min), array.data_type()).ok()?, ScalarValue::new_primitive::<$t>(Some(max), array.data_type()).ok()?))
        }};
    }
    match array.data_type() {
        DataType::Int8 => of!(Int8Type),
        DataType::Int16 => of!(Int16Type),
        DataType::Int32 => of!(Int32Type),
        DataType::Int64 => of!(Int64Type),
        DataType::UInt8 => of!(UInt8Type),
        DataType::UInt16 => of!(UInt16Type),
        DataType::UInt32 => of!(UInt32Type),
        DataType::UInt64 => of!(UInt64Type),
        DataType::Date32 => of!(Date32Type),
        DataType::Date64 => of!(Date64Type),
        DataType::Decimal128(_, _) => of!(Decimal128Type),
        _ => None,
    }
}

/// The least and greatest of `values`, in one pass without branches (arrow's `min` and
/// `max` are two passes, and were 5 % of TPC-H Q4's samples at SF 10 run per branch).
fn extent<T: Copy + PartialOrd>(values: &[T]) -> Option<(T, T)> {
    let (&first, rest) = values.split_first()?;
    let (mut min, mut max) = (first, first);
    for &v in rest {
        min = if v < min { v } else { min };
        max = if v > max { v } else { max };
    }
    Some((min, max))
}

/// `CASE route % N WHEN 0 THEN f0 WHEN 1 THEN f1 … ELSE constant END`, a partitioned hash
/// join's filter (`route` is the repartition's hash of the keys): the route computed once,
/// each row evaluated by its own branch only.
#[derive(Debug)]
struct Routed {
    /// The unsigned 64-bit value whose remainder picks the branch.
    route: Arc<dyn PhysicalExpr>,
    /// One branch per remainder 0..N.
    branches: Vec<Branch>,
}

#[derive(Debug)]
enum Branch {
    Constant(bool),
    /// Conjuncts over `columns` of the batch (renumbered 0.. in that order), evaluated on
    /// the branch's rows of those columns only.
    Keys { columns: Vec<usize>, schema: SchemaRef, conjuncts: Conjuncts },
}

/// Remainders (partitions) a routed filter may have: one branch vector each.
const ROUTED_BRANCHES_MAX: u64 = 4096;

impl Routed {
    fn of(case: &CaseExpr, schema: &SchemaRef) -> Option<Routed> {
        let base = case.expr()?.downcast_ref::<BinaryExpr>()?;
        if *base.op() != Operator::Modulo || base.left().data_type(schema).ok()? != DataType::UInt64 {
            return None;
        }
        let ScalarValue::UInt64(Some(n)) = base.right().downcast_ref::<Literal>()?.value() else { return None };
        if *n == 0 || *n > ROUTED_BRANCHES_MAX {
            return None;
        }
        let otherwise = match case.else_expr() {
            None => false,
            Some(e) => match e.downcast_ref::<Literal>()?.value() {
                ScalarValue::Boolean(v) => v == &Some(true),
                _ => return None,
            },
        };
        let mut branches: Vec<Option<Branch>> = (0..*n).map(|_| None).collect();
        for (when, then) in case.when_then_expr() {
            let ScalarValue::UInt64(Some(p)) = when.downcast_ref::<Literal>()?.value() else { return None };
            let slot = branches.get_mut(usize::try_from(*p).ok()?)?;
            if slot.is_some() {
                // A repeated WHEN: the first one wins in CASE; keep it simple and decline.
                return None;
            }
            *slot = Some(Branch::of(then, schema)?);
        }
        Some(Routed { route: base.left().clone(), branches: branches.into_iter().map(|b| b.unwrap_or(Branch::Constant(otherwise))).collect() })
    }

    fn selection(&self, batch: &RecordBatch) -> Result<Selection> {
        let rows = batch.num_rows();
        let route = self.route.evaluate(batch)?.into_array(rows)?;
        let Some(route) = route.as_primitive_opt::<arrow::datatypes::UInt64Type>() else {
            return Err(DataFusionError::Internal(format!("runtime filter route {} is not UInt64", self.route)));
        };
        if route.null_count() > 0 {
            // CASE sends a null route to ELSE; rare enough (a hash is never null) to not
            // special-case: every row by its branch would be wrong for them.
            return Err(DataFusionError::Internal(format!("runtime filter route {} gave nulls", self.route)));
        }
        let n = self.branches.len() as u64;
        let mut rows_of: Vec<Vec<u32>> = (0..n).map(|_| Vec::with_capacity(rows / n as usize + 16)).collect();
        for (row, hash) in route.values().iter().enumerate() {
            // `rows` fits u32: batches are at most the session's batch size.
            if let Some(list) = rows_of.get_mut((hash % n) as usize) {
                list.push(row as u32);
            }
        }
        let mut bits = MutableBuffer::from_len_zeroed(rows.div_ceil(8));
        let mut any = false;
        let mut extents = Extents::of(batch);
        for (branch, list) in self.branches.iter().zip(rows_of) {
            if list.is_empty() {
                continue;
            }
            let mut set = |row: u32| {
                bit_util::set_bit(bits.as_slice_mut(), row as usize);
                any = true;
            };
            match branch {
                Branch::Constant(false) => {}
                Branch::Constant(true) => list.iter().for_each(|&r| set(r)),
                Branch::Keys { columns, schema, conjuncts } => {
                    let count = list.len();
                    let indices = UInt32Array::from(list);
                    let taken = columns.iter().map(|&c| arrow::compute::take(batch.column(c).as_ref(), &indices, None)).collect::<Result<Vec<_>, _>>()?;
                    let keys = RecordBatch::try_new_with_options(schema.clone(), taken, &RecordBatchOptions::new().with_row_count(Some(count)))?;
                    match conjuncts.selection(&keys, &mut extents)? {
                        Selection::Nothing => {}
                        Selection::All => indices.values().iter().for_each(|&r| set(r)),
                        Selection::Mask(mask) => mask.set_indices().for_each(|i| set(indices.value(i))),
                    }
                }
            }
        }
        if !any {
            return Ok(Selection::Nothing);
        }
        Ok(Selection::Mask(BooleanBuffer::new(bits.into(), 0, rows)))
    }
}

impl Branch {
    fn of(then: &Arc<dyn PhysicalExpr>, schema: &SchemaRef) -> Option<Branch> {
        if let Some(literal) = then.downcast_ref::<Literal>() {
            return match literal.value() {
                ScalarValue::Boolean(v) => Some(Branch::Constant(v == &Some(true))),
                _ => None,
            };
        }
        let mut columns: Vec<usize> = collect_columns(then).iter().map(|c| c.index()).collect();
        columns.sort_unstable();
        columns.dedup();
        let renumbered = then
            .clone()
            .transform_up(|e| {
                Ok(match e.downcast_ref::<Column>() {
                    Some(c) => match columns.iter().position(|&i| i == c.index()) {
                        Some(at) => Transformed::yes(Arc::new(Column::new(c.name(), at)) as Arc<dyn PhysicalExpr>),
                        None => Transformed::no(e),
                    },
                    None => Transformed::no(e),
                })
            })
            .ok()?
            .data;
        let conjuncts = Conjuncts::of(&renumbered, Some(&columns));
        Some(Branch::Keys { schema: Arc::new(schema.project(&columns).ok()?), columns, conjuncts })
    }
}

#[cfg(test)]
mod tests {
    use arrow::array::{BooleanArray, Int64Array, UInt64Array};
    use arrow::datatypes::{Field, Schema};
    use datafusion::physical_expr::expressions::{lit, InListExpr};
    use proptest::prelude::*;

    use super::*;

    /// A batch of 8,192 values 0..8191 in column `a`, and the filter `a < below`.
    fn batch_and_filter(below: i64) -> (RecordBatch, RuntimeFilter) {
        let schema = Arc::new(Schema::new(vec![Field::new("a", DataType::Int64, false)]));
        let batch = RecordBatch::try_new(schema, vec![Arc::new(Int64Array::from_iter_values(0..8192))]).unwrap_or_else(|e| panic!("{e}"));
        let expr: Arc<dyn PhysicalExpr> = Arc::new(BinaryExpr::new(Arc::new(Column::new("a", 0)), Operator::Lt, lit(below)));
        (batch, RuntimeFilter::new(expr))
    }

    fn apply(filters: &mut [RuntimeFilter], batch: &RecordBatch) -> usize {
        apply_runtime_filters(filters, batch.clone(), None).unwrap_or_else(|e| panic!("{e}")).num_rows()
    }

    #[test]
    fn a_selective_runtime_filter_stays_applied() {
        // Keeps 40 % of the rows: below the share that sets a filter aside.
        let kept = (0.4 * 8192.0) as i64;
        let (batch, filter) = batch_and_filter(kept);
        let mut filters = [filter];
        for _ in 0..64 {
            assert_eq!(apply(&mut filters, &batch), kept as usize);
        }
    }

    #[test]
    fn a_runtime_filter_keeping_most_rows_is_set_aside_then_tried_again() {
        // Keeps 60 %: more than it saves.
        let kept = (0.6 * 8192.0) as usize;
        let (batch, filter) = batch_and_filter(kept as i64);
        let mut filters = [filter];
        let trial_batches = (RUNTIME_FILTER_TRIAL_ROWS / 8192) as usize;
        for _ in 0..trial_batches {
            assert_eq!(apply(&mut filters, &batch), kept);
        }
        // Set aside: batches go on whole (the operators above still filter them).
        let aside_batches = (RUNTIME_FILTER_RETRY_ROWS / 8192) as usize;
        for _ in 0..aside_batches {
            assert_eq!(apply(&mut filters, &batch), 8192);
        }
        // Then judged again.
        assert_eq!(apply(&mut filters, &batch), kept);
    }

    #[test]
    fn a_filter_still_true_is_not_judged() {
        let schema = Arc::new(Schema::new(vec![Field::new("a", DataType::Int64, false)]));
        let batch = RecordBatch::try_new(schema, vec![Arc::new(Int64Array::from_iter_values(0..8192))]).unwrap_or_else(|e| panic!("{e}"));
        let mut filters = [RuntimeFilter::new(lit(true))];
        for _ in 0..16 {
            assert_eq!(apply(&mut filters, &batch), 8192);
        }
        assert_eq!(filters[0].skip_rows, 0, "a `true` filter (build side not done) is not set aside");
    }

    /// A partitioned join's filter as DataFusion 55 builds it (shared_bounds.rs): a route
    /// (here the key times a constant, in place of the repartition hash) modulo
    /// `branches`, each branch `key >= lo AND key <= hi AND key IN (…)`, ELSE `otherwise`.
    fn routed_filter(branches: u64, sets: &[Vec<i64>], otherwise: bool) -> Arc<dyn PhysicalExpr> {
        let schema = test_schema();
        let key: Arc<dyn PhysicalExpr> = Arc::new(Column::new("key", 0));
        let route: Arc<dyn PhysicalExpr> = Arc::new(BinaryExpr::new(Arc::new(Column::new("route", 1)), Operator::Modulo, lit(ScalarValue::UInt64(Some(branches)))));
        let when_then = sets
            .iter()
            .enumerate()
            .take(branches as usize)
            .filter(|(_, set)| !set.is_empty())
            .map(|(p, set)| {
                let lo = set.iter().copied().min().unwrap_or(0);
                let hi = set.iter().copied().max().unwrap_or(0);
                let bounds: Arc<dyn PhysicalExpr> = Arc::new(BinaryExpr::new(
                    Arc::new(BinaryExpr::new(key.clone(), Operator::GtEq, lit(lo))),
                    Operator::And,
                    Arc::new(BinaryExpr::new(key.clone(), Operator::LtEq, lit(hi))),
                ));
                let list: Vec<Arc<dyn PhysicalExpr>> = set.iter().map(|&v| lit(v)).collect();
                let member: Arc<dyn PhysicalExpr> = Arc::new(InListExpr::try_new(key.clone(), list, false, &schema).unwrap_or_else(|e| panic!("{e}")));
                let then: Arc<dyn PhysicalExpr> = Arc::new(BinaryExpr::new(bounds, Operator::And, member));
                (lit(ScalarValue::UInt64(Some(p as u64))), then)
            })
            .collect();
        Arc::new(CaseExpr::try_new(Some(route), when_then, Some(lit(otherwise))).unwrap_or_else(|e| panic!("{e}")))
    }

    fn test_schema() -> SchemaRef {
        Arc::new(Schema::new(vec![Field::new("key", DataType::Int64, true), Field::new("route", DataType::UInt64, false), Field::new("other", DataType::Int64, true)]))
    }

    fn mask_of(selection: Selection, rows: usize) -> Vec<bool> {
        match selection {
            Selection::All => vec![true; rows],
            Selection::Nothing => vec![false; rows],
            Selection::Mask(m) => m.iter().collect(),
        }
    }

    fn oracle_mask(expr: &Arc<dyn PhysicalExpr>, batch: &RecordBatch) -> Vec<bool> {
        let value = expr.evaluate(batch).and_then(|v| v.into_array(batch.num_rows())).unwrap_or_else(|e| panic!("{e}"));
        let array = value.as_any().downcast_ref::<BooleanArray>().unwrap_or_else(|| panic!("not booleans"));
        (0..array.len()).map(|i| array.is_valid(i) && array.value(i)).collect()
    }

    proptest! {
        /// The forms the scan evaluates select exactly the rows DataFusion's own evaluation
        /// of the same expression does: routed CASE filters with IN lists and bounds (some
        /// bounds every row satisfies, so they are skipped), NULL keys, empty branches,
        /// either ELSE; and the plain conjunction of one branch.
        #[test]
        fn compiled_filters_select_what_datafusion_selects(
            keys in proptest::collection::vec(proptest::option::weighted(0.9, -50i64..50), 0..300),
            multiplier in 1u64..1000,
            branches in 1u64..5,
            sets in proptest::collection::vec(proptest::collection::vec(-60i64..60, 0..12), 4),
            otherwise in any::<bool>(),
            nulls in any::<bool>(),
        ) {
            // Without nulls the bounds a batch's min and max satisfy are skipped.
            let keys: Vec<Option<i64>> = if nulls { keys } else { keys.into_iter().map(|k| Some(k.unwrap_or(0))).collect() };
            let schema = test_schema();
            let rows = keys.len();
            let key_array = Int64Array::from(keys.clone());
            let route = UInt64Array::from_iter_values(keys.iter().map(|k| k.unwrap_or(7).unsigned_abs().wrapping_mul(multiplier)));
            let other = Int64Array::from_iter_values(0..rows as i64);
            let batch = RecordBatch::try_new(schema.clone(), vec![Arc::new(key_array), Arc::new(route), Arc::new(other)]).unwrap_or_else(|e| panic!("{e}"));
            // CASE needs one WHEN at least: the first branch has keys.
            let mut sets = sets;
            if sets[0].is_empty() {
                sets[0].push(0);
            }
            let routed = routed_filter(branches, &sets, otherwise);
            let compiled = Compiled::of(&routed, &schema);
            prop_assert!(matches!(compiled, Compiled::Routed(_)), "{compiled:?}");
            let got = mask_of(compiled.selection(&batch).unwrap_or_else(|e| panic!("{e}")), rows);
            prop_assert_eq!(got, oracle_mask(&routed, &batch));
            // One branch alone: bounds AND membership as plain conjuncts.
            if let Some((_, then)) = routed.downcast_ref::<CaseExpr>().and_then(|c| c.when_then_expr().first().cloned()) {
                let compiled = Compiled::of(&then, &schema);
                prop_assert!(matches!(compiled, Compiled::Conjuncts(_)));
                let got = mask_of(compiled.selection(&batch).unwrap_or_else(|e| panic!("{e}")), rows);
                prop_assert_eq!(got, oracle_mask(&then, &batch));
            }
        }
    }

    /// A join's membership filter over a batch of its key columns alone is set aside (the
    /// join repeats the same work); over a batch with other columns it is applied.
    #[test]
    fn a_membership_filter_over_its_keys_alone_is_set_aside() {
        let filter = routed_filter(2, &[vec![1, 2, 3], vec![4, 5]], false);
        let full = test_schema();
        let keys_only = Arc::new(full.project(&[0, 1]).unwrap_or_else(|e| panic!("{e}")));
        let rows = 8192i64;
        let key = Arc::new(Int64Array::from_iter_values(0..rows)) as ArrayRef;
        let route = Arc::new(UInt64Array::from_iter_values((0..rows as u64).map(|k| k * 7))) as ArrayRef;
        let other = Arc::new(Int64Array::from_iter_values(0..rows)) as ArrayRef;
        let narrow = RecordBatch::try_new(keys_only, vec![key.clone(), route.clone()]).unwrap_or_else(|e| panic!("{e}"));
        let wide = RecordBatch::try_new(full, vec![key, route, other]).unwrap_or_else(|e| panic!("{e}"));
        let mut filters = [RuntimeFilter::new(filter.clone())];
        assert_eq!(apply(&mut filters, &narrow), rows as usize, "set aside: every row goes on");
        assert_eq!(filters[0].skip_rows, u64::MAX);
        let mut filters = [RuntimeFilter::new(filter.clone())];
        let want = oracle_mask(&filter, &wide).iter().filter(|&&k| k).count();
        assert!(want < 10);
        assert_eq!(apply(&mut filters, &wide), want, "applied: only the keys in the build side go on");
    }

    #[test]
    fn bounds_every_row_satisfies_are_skipped_and_others_are_not() {
        let array: ArrayRef = Arc::new(Int64Array::from_iter_values(10..20));
        assert!(bound_holds_for_every_row(&array, Operator::GtEq, &ScalarValue::Int64(Some(10))));
        assert!(!bound_holds_for_every_row(&array, Operator::Gt, &ScalarValue::Int64(Some(10))));
        assert!(bound_holds_for_every_row(&array, Operator::LtEq, &ScalarValue::Int64(Some(19))));
        assert!(!bound_holds_for_every_row(&array, Operator::Lt, &ScalarValue::Int64(Some(19))));
        // Another type, or a null in the column: evaluated, not assumed.
        assert!(!bound_holds_for_every_row(&array, Operator::GtEq, &ScalarValue::Int32(Some(0))));
        let with_null: ArrayRef = Arc::new(Int64Array::from(vec![Some(15), None]));
        assert!(!bound_holds_for_every_row(&with_null, Operator::GtEq, &ScalarValue::Int64(Some(0))));
    }

    proptest! {
        /// A key bitmap selects exactly the rows DataFusion's IN list does: Int32 and Int64
        /// columns with nulls, values far outside the keys' span (i64's extremes too), a NULL
        /// in the list; and a list whose keys are too sparse is left to DataFusion.
        #[test]
        fn key_bitmaps_select_what_the_in_list_selects(
            keys in proptest::collection::vec(-2000i64..2000, 1..200),
            values in proptest::collection::vec(proptest::option::weighted(0.9, prop_oneof![-2100i64..2100, Just(i64::MIN), Just(i64::MAX)]), 0..700),
            null_in_list in any::<bool>(),
            narrow in any::<bool>(),
        ) {
            let data_type = if narrow { DataType::Int32 } else { DataType::Int64 };
            let schema = Arc::new(Schema::new(vec![Field::new("key", data_type.clone(), true)]));
            let column: ArrayRef = if narrow {
                Arc::new(arrow::array::Int32Array::from(values.iter().map(|v| v.map(|v| v.clamp(i32::MIN as i64, i32::MAX as i64) as i32)).collect::<Vec<_>>()))
            } else {
                Arc::new(Int64Array::from(values.clone()))
            };
            let batch = RecordBatch::try_new(schema.clone(), vec![column]).unwrap_or_else(|e| panic!("{e}"));
            let literal = |k: i64| if narrow { lit(ScalarValue::Int32(Some(k as i32))) } else { lit(k) };
            let mut list: Vec<Arc<dyn PhysicalExpr>> = keys.iter().map(|&k| literal(k)).collect();
            if null_in_list {
                list.push(lit(if narrow { ScalarValue::Int32(None) } else { ScalarValue::Int64(None) }));
            }
            let expr: Arc<dyn PhysicalExpr> = Arc::new(InListExpr::try_new(Arc::new(Column::new("key", 0)), list, false, &schema).unwrap_or_else(|e| panic!("{e}")));
            let bitmap = KeyBitmap::of(&expr);
            prop_assert!(bitmap.is_some(), "4,000 values span at most 4,000 bits");
            let got = mask_of(bitmap.map(|b| b.selection(&batch).unwrap_or_else(|e| panic!("{e}"))).unwrap_or(Selection::Nothing), values.len());
            prop_assert_eq!(got, oracle_mask(&expr, &batch));
        }
    }

    #[test]
    fn a_sparse_or_negated_in_list_is_not_a_bitmap() {
        let schema = Arc::new(Schema::new(vec![Field::new("key", DataType::Int64, true)]));
        let in_list = |keys: &[i64], negated: bool| -> Arc<dyn PhysicalExpr> {
            Arc::new(InListExpr::try_new(Arc::new(Column::new("key", 0)), keys.iter().map(|&k| lit(k)).collect(), negated, &schema).unwrap_or_else(|e| panic!("{e}")))
        };
        let spread = KEY_BITMAP_SPAN_MIN_BITS as i64 * 4;
        assert!(KeyBitmap::of(&in_list(&[0, spread], false)).is_none(), "two keys 4 M apart");
        assert!(KeyBitmap::of(&in_list(&[0, KEY_BITMAP_SPAN_MIN_BITS as i64 - 1], false)).is_some(), "within the span every density is taken");
        assert!(KeyBitmap::of(&in_list(&[1, 2, 3], true)).is_none(), "NOT IN");
        assert!(KeyBitmap::of(&in_list(&[i64::MIN, i64::MAX], false)).is_none(), "a span past u64");
    }
}
