//! The group-by kernel behind `aggregate_pushdown`: SUM / AVG / COUNT / MIN / MAX of
//! integer-domain expressions (decimals as their unscaled integers, integers, + − ×, the
//! rescaling casts DataFusion inserts) grouped by a few columns of small domain, fed the
//! scan's slices and answering **exactly the partial aggregate's state** (so DataFusion's
//! final aggregate above is unchanged and the answers are the same bits).
//!
//! Why it is faster than DataFusion's partial aggregate over the same rows:
//! - values stay i64 (a decimal of ≤ 18 digits is its unscaled i64; the scan hands it on
//!   unwidened, `SliceDecoder::with_kernel_columns`), the arithmetic is i64 over a slice at
//!   a time, and per-slice sums are i64 added once per slice into i128 totals. Overflow is
//!   ruled out by construction: each slice's inputs are bounded by their min/max, the
//!   expression's interval is computed from them in i128, and the slice goes the i64 way
//!   only when every intermediate and `rows × bound` of every sum fit in i64 — otherwise the
//!   kernel gives up (`KernelError::Fallback`) and the original plan answers;
//! - a group key that the column store keeps dictionary-coded arrives as its codes: a
//!   slice's group of each row is one table lookup over the codes (the table filled once
//!   per new code combination), no string is hashed or compared per row.
//!
//! Exactness: every operation is on exact integers, as DataFusion's Decimal128 arithmetic
//! is (its results are exact or an overflow error, and overflow is ruled out here), so any
//! order of summation gives the same sums. Floats are never pushed (their sums depend on
//! the order), nor AVG of integers (its state is a float).

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, Date32Array, Decimal128Array, Int32Array, Int64Array, PrimitiveArray, UInt64Array};
use arrow::buffer::{BooleanBuffer, NullBuffer};
use arrow::datatypes::{DataType, Date32Type, Decimal128Type, Decimal64Type, Int32Type, Int64Type, UInt32Type};
use datafusion::common::ScalarValue;

/// Groups one partition's kernel may hold: "small domain". More than this and the kernel
/// gives up for the partition (the original plan answers): hash aggregation is then the
/// better tool, and the per-group state arrays here are dense.
pub const GROUPS_MAX: usize = 4096;

/// Entries of the per-slice table from code combinations to groups, at most (256 KB of
/// u32): beyond it a slice's rows find their groups through a hash map instead.
const CODE_TABLE_ENTRIES_MAX: usize = 1 << 16;

/// An integer-domain expression over the kernel's input columns. Decimals are their
/// unscaled integers; the planner (`aggregate_pushdown`) put in the rescaling DataFusion's
/// decimal arithmetic does implicitly, so the nodes are plain integer operations.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ValueExpr {
    /// Kernel input column `i` (its values as i64).
    Input(usize),
    Literal(i64),
    Add(Box<ValueExpr>, Box<ValueExpr>),
    Sub(Box<ValueExpr>, Box<ValueExpr>),
    Mul(Box<ValueExpr>, Box<ValueExpr>),
    /// × 10^k: a decimal brought to a larger scale.
    Scale(Box<ValueExpr>, u32),
}

impl ValueExpr {
    fn inputs(&self, out: &mut Vec<usize>) {
        match self {
            ValueExpr::Input(i) => {
                if !out.contains(i) {
                    out.push(*i)
                }
            }
            ValueExpr::Literal(_) => {}
            ValueExpr::Add(a, b) | ValueExpr::Sub(a, b) | ValueExpr::Mul(a, b) => {
                a.inputs(out);
                b.inputs(out);
            }
            ValueExpr::Scale(a, _) => a.inputs(out),
        }
    }

    /// The interval of the expression's values given each input's, in i128; None when
    /// some intermediate is outside i64 (then the i64 arithmetic could overflow).
    fn bounds(&self, inputs: &[Option<(i64, i64)>]) -> Option<(i128, i128)> {
        let fits = |(lo, hi): (i128, i128)| (lo >= i128::from(i64::MIN) && hi <= i128::from(i64::MAX)).then_some((lo, hi));
        let result = match self {
            // An input without values in this slice (all null, or no rows): any value.
            ValueExpr::Input(i) => inputs.get(*i).copied().flatten().map_or((0, 0), |(lo, hi)| (i128::from(lo), i128::from(hi))),
            ValueExpr::Literal(v) => (i128::from(*v), i128::from(*v)),
            ValueExpr::Add(a, b) => {
                let ((a0, a1), (b0, b1)) = (a.bounds(inputs)?, b.bounds(inputs)?);
                (a0 + b0, a1 + b1)
            }
            ValueExpr::Sub(a, b) => {
                let ((a0, a1), (b0, b1)) = (a.bounds(inputs)?, b.bounds(inputs)?);
                (a0 - b1, a1 - b0)
            }
            ValueExpr::Mul(a, b) => {
                let ((a0, a1), (b0, b1)) = (a.bounds(inputs)?, b.bounds(inputs)?);
                // Both within i64: the products fit i128.
                let p = [a0 * b0, a0 * b1, a1 * b0, a1 * b1];
                (p.iter().copied().min().unwrap_or(0), p.iter().copied().max().unwrap_or(0))
            }
            ValueExpr::Scale(a, k) => {
                let (a0, a1) = a.bounds(inputs)?;
                let f = 10i128.checked_pow(*k)?;
                (a0.checked_mul(f)?, a1.checked_mul(f)?)
            }
        };
        fits(result)
    }

    /// The expression over one slice (`rows` values per input). Wrapping operations: the
    /// caller checked `bounds` first, so nothing wraps; they only keep a bug from panicking.
    fn evaluate(&self, inputs: &[Vec<i64>], rows: usize) -> Vec<i64> {
        match self {
            ValueExpr::Input(i) => inputs.get(*i).map_or_else(|| vec![0; rows], |v| v.clone()),
            ValueExpr::Literal(v) => vec![*v; rows],
            ValueExpr::Add(a, b) => binary(a, b, inputs, rows, i64::wrapping_add),
            ValueExpr::Sub(a, b) => binary(a, b, inputs, rows, i64::wrapping_sub),
            ValueExpr::Mul(a, b) => binary(a, b, inputs, rows, i64::wrapping_mul),
            ValueExpr::Scale(a, k) => {
                let f = 10i64.wrapping_pow(*k);
                let mut v = a.evaluate(inputs, rows);
                v.iter_mut().for_each(|x| *x = x.wrapping_mul(f));
                v
            }
        }
    }
}

/// `f` of two operands, elementwise; a literal operand is not broadcast into a vector.
fn binary(a: &ValueExpr, b: &ValueExpr, inputs: &[Vec<i64>], rows: usize, f: fn(i64, i64) -> i64) -> Vec<i64> {
    match (a, b) {
        (ValueExpr::Literal(x), _) => {
            let mut v = b.evaluate(inputs, rows);
            v.iter_mut().for_each(|y| *y = f(*x, *y));
            v
        }
        (_, ValueExpr::Literal(y)) => {
            let mut v = a.evaluate(inputs, rows);
            v.iter_mut().for_each(|x| *x = f(*x, *y));
            v
        }
        (ValueExpr::Input(i), ValueExpr::Input(j)) => match (inputs.get(*i), inputs.get(*j)) {
            (Some(x), Some(y)) => x.iter().zip(y).map(|(x, y)| f(*x, *y)).collect(),
            _ => vec![0; rows],
        },
        _ => {
            let mut x = a.evaluate(inputs, rows);
            let y = b.evaluate(inputs, rows);
            x.iter_mut().zip(&y).for_each(|(x, y)| *x = f(*x, *y));
            x
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AggregateKind {
    Sum,
    Avg,
    Count,
    Min,
    Max,
}

/// One aggregate: its kind, the expression it reads (None: COUNT(*), every row), and the
/// types of the state fields DataFusion's partial aggregate emits for it (checked by the
/// planner: SUM one, AVG [count UInt64, sum], COUNT one Int64, MIN/MAX one).
#[derive(Debug, Clone)]
pub struct AggregateSpec {
    pub kind: AggregateKind,
    pub argument: Option<usize>,
    pub state_types: Vec<DataType>,
}

/// What a kernel computes: group keys (kernel input columns, and the types the partial
/// aggregate emits them as), the distinct argument expressions, the aggregates.
#[derive(Debug, Clone)]
pub struct KernelSpec {
    pub keys: Vec<usize>,
    pub key_types: Vec<DataType>,
    pub expressions: Vec<ValueExpr>,
    pub aggregates: Vec<AggregateSpec>,
}

#[derive(Debug, thiserror::Error)]
pub enum KernelError {
    /// The kernel cannot answer exactly (too many groups, values whose arithmetic could
    /// overflow i64, an input it does not know): the original plan answers instead.
    #[error("aggregate kernel gives up: {0}")]
    Fallback(String),
    #[error(transparent)]
    Arrow(#[from] arrow::error::ArrowError),
    #[error(transparent)]
    DataFusion(#[from] datafusion::error::DataFusionError),
}

fn fallback(what: impl Into<String>) -> KernelError {
    KernelError::Fallback(what.into())
}

/// One group key column's values seen so far, each with its id (dense from 0), and the
/// last dictionary's code → id table (the same values array for every slice of a row group).
#[derive(Default)]
struct KeyColumn {
    ids: HashMap<ScalarValue, u32>,
    values: Vec<ScalarValue>,
    dictionary: Option<(ArrayRef, Vec<u32>)>,
}

impl KeyColumn {
    fn intern(&mut self, value: ScalarValue) -> Result<u32, KernelError> {
        if let Some(id) = self.ids.get(&value) {
            return Ok(*id);
        }
        if self.values.len() >= GROUPS_MAX {
            return Err(fallback(format!("more than {GROUPS_MAX} distinct values in a group key")));
        }
        let id = self.values.len() as u32;
        self.ids.insert(value.clone(), id);
        self.values.push(value);
        Ok(id)
    }

    /// The slice's rows as local codes, with the code count: a dictionary's codes (its
    /// null one after the entries), or for any other array the values' ids. `ids[code]` is
    /// then filled by `id_of_code`.
    fn codes(&mut self, array: &ArrayRef) -> Result<(Vec<u32>, usize), KernelError> {
        if let Some(dictionary) = array.as_dictionary_opt::<UInt32Type>() {
            let entries = dictionary.values();
            let null_code = entries.len() as u32;
            let same = self.dictionary.as_ref().is_some_and(|(a, _)| std::ptr::addr_eq(Arc::as_ptr(a), Arc::as_ptr(entries)));
            if !same {
                self.dictionary = Some((entries.clone(), vec![u32::MAX; entries.len() + 1]));
            }
            let keys = dictionary.keys();
            let codes: Vec<u32> = match keys.nulls().filter(|n| n.null_count() > 0) {
                Some(nulls) => keys.values().iter().enumerate().map(|(i, &k)| if nulls.is_null(i) { null_code } else { k }).collect(),
                None => keys.values().to_vec(),
            };
            if codes.iter().any(|&c| c > null_code) {
                return Err(fallback("a dictionary code beyond its entries"));
            }
            return Ok((codes, entries.len() + 1));
        }
        // Not dictionary-coded here (another codec): one value at a time (slow, rare).
        self.dictionary = None;
        let mut codes = Vec::with_capacity(array.len());
        for i in 0..array.len() {
            codes.push(self.intern(ScalarValue::try_from_array(array, i)?)?);
        }
        Ok((codes, self.values.len()))
    }

    /// The id of local `code` from the last `codes` call.
    fn id_of_code(&mut self, code: u32) -> Result<u32, KernelError> {
        let Some((entries, table)) = &self.dictionary else { return Ok(code) };
        if let Some(&id) = table.get(code as usize).filter(|&&id| id != u32::MAX) {
            return Ok(id);
        }
        let value = if (code as usize) < entries.len() { ScalarValue::try_from_array(entries, code as usize)? } else { ScalarValue::try_from(entries.data_type())? };
        let id = self.intern(value)?;
        if let Some((_, table)) = &mut self.dictionary {
            if let Some(slot) = table.get_mut(code as usize) {
                *slot = id;
            }
        }
        Ok(id)
    }
}

/// One aggregate's totals per group.
#[derive(Default)]
struct Totals {
    sums: Vec<i128>,
    /// Non-null values (rows, for COUNT(*)).
    counts: Vec<u64>,
    mins: Vec<i64>,
    maxs: Vec<i64>,
}

/// A partition's kernel: feed it slices (`add_slice`), then take the partial aggregate's
/// state (`finish`).
pub struct AggregateKernel {
    spec: Arc<KernelSpec>,
    keys: Vec<KeyColumn>,
    /// Group of each combination of key ids.
    group_of_ids: HashMap<Vec<u32>, u32>,
    /// Key ids of each group.
    groups: Vec<Vec<u32>>,
    totals: Vec<Totals>,
    /// Inputs each expression reads.
    expression_inputs: Vec<Vec<usize>>,
}

impl AggregateKernel {
    pub fn new(spec: Arc<KernelSpec>) -> AggregateKernel {
        let expression_inputs = spec
            .expressions
            .iter()
            .map(|e| {
                let mut v = Vec::new();
                e.inputs(&mut v);
                v
            })
            .collect();
        let mut kernel = AggregateKernel {
            keys: spec.keys.iter().map(|_| KeyColumn::default()).collect(),
            group_of_ids: HashMap::new(),
            groups: Vec::new(),
            totals: spec.aggregates.iter().map(|_| Totals::default()).collect(),
            expression_inputs,
            spec,
        };
        if kernel.spec.keys.is_empty() {
            // Without GROUP BY there is one group, rows or not (one state row).
            kernel.new_group(Vec::new());
        }
        kernel
    }

    fn new_group(&mut self, ids: Vec<u32>) -> u32 {
        let g = self.groups.len() as u32;
        self.group_of_ids.insert(ids.clone(), g);
        self.groups.push(ids);
        for t in &mut self.totals {
            t.sums.push(0);
            t.counts.push(0);
            t.mins.push(i64::MAX);
            t.maxs.push(i64::MIN);
        }
        g
    }

    fn group_of(&mut self, ids: Vec<u32>) -> Result<u32, KernelError> {
        if let Some(&g) = self.group_of_ids.get(&ids) {
            return Ok(g);
        }
        if self.groups.len() >= GROUPS_MAX {
            return Err(fallback(format!("more than {GROUPS_MAX} groups")));
        }
        Ok(self.new_group(ids))
    }

    /// The group of each of the slice's `rows` rows.
    fn group_ids(&mut self, columns: &[ArrayRef], rows: usize) -> Result<Vec<u32>, KernelError> {
        if self.spec.keys.is_empty() {
            return Ok(vec![0; rows]);
        }
        let mut codes = Vec::with_capacity(self.spec.keys.len());
        for (k, &input) in self.spec.keys.clone().iter().enumerate() {
            let array = columns.get(input).ok_or_else(|| fallback("a key column is missing"))?;
            if array.len() != rows {
                return Err(fallback("a key column's length differs from the slice's"));
            }
            codes.push(self.keys[k].codes(array)?);
        }
        let entries = codes.iter().try_fold(1usize, |product, (_, count)| product.checked_mul(*count)).filter(|&n| n <= CODE_TABLE_ENTRIES_MAX);
        let mut out = Vec::with_capacity(rows);
        match entries {
            Some(entries) => {
                // One lookup per row in a table over the code combinations, filled as new
                // combinations appear.
                let mut table = vec![u32::MAX; entries];
                for i in 0..rows {
                    let mut index = 0usize;
                    for (c, count) in &codes {
                        index = index * count + c[i] as usize;
                    }
                    let mut g = table[index];
                    if g == u32::MAX {
                        let ids = (0..codes.len()).map(|k| self.keys[k].id_of_code(codes[k].0[i])).collect::<Result<Vec<u32>, _>>()?;
                        g = self.group_of(ids)?;
                        table[index] = g;
                    }
                    out.push(g);
                }
            }
            None => {
                for i in 0..rows {
                    let ids = (0..codes.len()).map(|k| self.keys[k].id_of_code(codes[k].0[i])).collect::<Result<Vec<u32>, _>>()?;
                    out.push(self.group_of(ids)?);
                }
            }
        }
        Ok(out)
    }

    /// Adds one slice: `columns` are the kernel's input columns (`rows` rows each). On
    /// `KernelError::Fallback` the kernel's state is incomplete: drop it.
    pub fn add_slice(&mut self, columns: &[ArrayRef], rows: usize) -> Result<(), KernelError> {
        if rows == 0 {
            return Ok(());
        }
        let groups = self.group_ids(columns, rows)?;
        let group_count = self.groups.len();
        // Each input read by an expression as i64, with its bounds and nulls.
        let input_count = columns.len();
        let mut values: Vec<Vec<i64>> = vec![Vec::new(); input_count];
        let mut bounds: Vec<Option<(i64, i64)>> = vec![None; input_count];
        let mut nulls: Vec<Option<NullBuffer>> = vec![None; input_count];
        for inputs in &self.expression_inputs {
            for &i in inputs {
                if !values[i].is_empty() {
                    continue;
                }
                let array = columns.get(i).ok_or_else(|| fallback("an input column is missing"))?;
                if array.len() != rows {
                    return Err(fallback("an input column's length differs from the slice's"));
                }
                values[i] = integers(array)?;
                // Over every slot, null ones too (whatever they hold): wider, never wrong.
                bounds[i] = values[i].iter().fold(None, |b: Option<(i64, i64)>, &v| Some(b.map_or((v, v), |(lo, hi)| (lo.min(v), hi.max(v)))));
                nulls[i] = array.nulls().filter(|n| n.null_count() > 0).cloned();
            }
        }
        // Rows per group in this slice (COUNT(*), and the count of any argument without nulls).
        let mut row_counts = vec![0u64; group_count];
        for &g in &groups {
            row_counts[g as usize] += 1;
        }
        let mut evaluated: Vec<Option<(Vec<i64>, Option<BooleanBuffer>, i128)>> = vec![None; self.spec.expressions.len()];
        for (a, aggregate) in self.spec.aggregates.iter().enumerate() {
            let Some(e) = aggregate.argument else {
                let t = &mut self.totals[a];
                for (g, n) in row_counts.iter().enumerate() {
                    t.counts[g] += n;
                }
                continue;
            };
            if evaluated[e].is_none() {
                let expression = &self.spec.expressions[e];
                let (lo, hi) = expression.bounds(&bounds).ok_or_else(|| fallback("an expression's values could leave i64"))?;
                let magnitude = lo.abs().max(hi.abs());
                let valid = self.expression_inputs[e].iter().filter_map(|&i| nulls[i].as_ref()).fold(None, |acc: Option<BooleanBuffer>, n| {
                    Some(match acc {
                        Some(b) => &b & n.inner(),
                        None => n.inner().clone(),
                    })
                });
                evaluated[e] = Some((expression.evaluate(&values, rows), valid, magnitude));
            }
            let Some((v, valid, magnitude)) = &evaluated[e] else { continue };
            let t = &mut self.totals[a];
            let sums = matches!(aggregate.kind, AggregateKind::Sum | AggregateKind::Avg);
            // The slice's sums in i64: `rows × magnitude` fits, so no partial overflows.
            if sums && magnitude.checked_mul(rows as i128).is_none_or(|m| m > i128::from(i64::MAX)) {
                return Err(fallback("a slice's sum could leave i64"));
            }
            match valid {
                None => {
                    for (g, n) in row_counts.iter().enumerate() {
                        t.counts[g] += n;
                    }
                    match aggregate.kind {
                        AggregateKind::Sum | AggregateKind::Avg => {
                            let mut partial = vec![0i64; group_count];
                            for (&g, &x) in groups.iter().zip(v) {
                                partial[g as usize] += x;
                            }
                            for (s, p) in t.sums.iter_mut().zip(&partial) {
                                *s += i128::from(*p);
                            }
                        }
                        AggregateKind::Min | AggregateKind::Max => {
                            for (&g, &x) in groups.iter().zip(v) {
                                let g = g as usize;
                                t.mins[g] = t.mins[g].min(x);
                                t.maxs[g] = t.maxs[g].max(x);
                            }
                        }
                        AggregateKind::Count => {}
                    }
                }
                Some(valid) => {
                    let mut partial = vec![0i64; group_count];
                    for ((&g, &x), ok) in groups.iter().zip(v).zip(valid.iter()) {
                        if !ok {
                            continue;
                        }
                        let g = g as usize;
                        t.counts[g] += 1;
                        partial[g] += x;
                        t.mins[g] = t.mins[g].min(x);
                        t.maxs[g] = t.maxs[g].max(x);
                    }
                    if sums {
                        for (s, p) in t.sums.iter_mut().zip(&partial) {
                            *s += i128::from(*p);
                        }
                    }
                }
            }
        }
        Ok(())
    }

    /// The partial aggregate's state: the group keys, then each aggregate's state fields.
    /// Without GROUP BY, one row even for no input (as DataFusion's); with it, a row per group.
    pub fn finish(self) -> Result<Vec<ArrayRef>, KernelError> {
        let grouped = !self.spec.keys.is_empty();
        let mut out: Vec<ArrayRef> = Vec::new();
        for (k, key_type) in self.spec.key_types.iter().enumerate() {
            let column = &self.keys[k];
            let values = self.groups.iter().map(|ids| column.values[ids[k] as usize].clone());
            let array = if self.groups.is_empty() { arrow::array::new_empty_array(key_type) } else { ScalarValue::iter_to_array(values)? };
            out.push(if array.data_type() == key_type { array } else { arrow::compute::cast(&array, key_type)? });
        }
        for (aggregate, t) in self.spec.aggregates.iter().zip(&self.totals) {
            let seen = |g: usize| t.counts[g] > 0;
            let n = self.groups.len();
            match aggregate.kind {
                AggregateKind::Count => out.push(state_array((0..n).map(|g| Some(i128::from(t.counts[g]))), &aggregate.state_types[0])?),
                AggregateKind::Sum => out.push(state_array((0..n).map(|g| seen(g).then_some(t.sums[g])), &aggregate.state_types[0])?),
                AggregateKind::Min => out.push(state_array((0..n).map(|g| seen(g).then_some(i128::from(t.mins[g]))), &aggregate.state_types[0])?),
                AggregateKind::Max => out.push(state_array((0..n).map(|g| seen(g).then_some(i128::from(t.maxs[g]))), &aggregate.state_types[0])?),
                AggregateKind::Avg => {
                    // DataFusion's grouped AVG leaves both fields null for a group without
                    // values; its ungrouped one has count 0 and a null sum.
                    let count = (0..n).map(|g| (!grouped || seen(g)).then_some(i128::from(t.counts[g])));
                    out.push(state_array(count, &aggregate.state_types[0])?);
                    out.push(state_array((0..n).map(|g| seen(g).then_some(t.sums[g])), &aggregate.state_types[1])?);
                }
            }
        }
        Ok(out)
    }
}

/// An input column's values as i64: decimals unscaled (the scan's kernel columns are
/// Int64 already), integers and dates widened.
fn integers(array: &ArrayRef) -> Result<Vec<i64>, KernelError> {
    Ok(match array.data_type() {
        DataType::Int64 => array.as_primitive::<Int64Type>().values().to_vec(),
        DataType::Int32 => array.as_primitive::<Int32Type>().values().iter().map(|&v| i64::from(v)).collect(),
        DataType::Date32 => array.as_primitive::<Date32Type>().values().iter().map(|&v| i64::from(v)).collect(),
        DataType::Decimal64(_, _) => array.as_primitive::<Decimal64Type>().values().to_vec(),
        DataType::Decimal128(_, _) => {
            let values = array.as_primitive::<Decimal128Type>().values();
            let mut out = Vec::with_capacity(values.len());
            for (i, &v) in values.iter().enumerate() {
                out.push(match i64::try_from(v) {
                    Ok(v) => v,
                    // A null slot may hold anything; a value outside i64 is not for this kernel.
                    Err(_) if array.is_null(i) => 0,
                    Err(_) => return Err(fallback("a decimal outside i64")),
                });
            }
            out
        }
        other => return Err(fallback(format!("input of type {other}"))),
    })
}

/// A state column of `data_type` from exact integers. A SUM of Int64 wraps as DataFusion's
/// does (the low 64 bits of the exact sum are the wrapped sum).
fn state_array(values: impl Iterator<Item = Option<i128>>, data_type: &DataType) -> Result<ArrayRef, KernelError> {
    let values: Vec<Option<i128>> = values.collect();
    let narrow = |v: i128, what: &str| -> Result<i64, KernelError> { i64::try_from(v).map_err(|_| fallback(format!("{what} outside i64"))) };
    Ok(match data_type {
        DataType::Decimal128(p, s) => Arc::new(Decimal128Array::from(values).with_precision_and_scale(*p, *s)?),
        DataType::Decimal64(p, s) => {
            let v = values.iter().map(|v| v.map(|v| narrow(v, "a Decimal64 state")).transpose()).collect::<Result<Vec<_>, _>>()?;
            Arc::new(PrimitiveArray::<Decimal64Type>::from(v).with_precision_and_scale(*p, *s)?)
        }
        DataType::Int64 => Arc::new(Int64Array::from(values.iter().map(|v| v.map(|v| v as i64)).collect::<Vec<_>>())),
        DataType::UInt64 => Arc::new(UInt64Array::from(values.iter().map(|v| v.map(|v| v as u64)).collect::<Vec<_>>())),
        DataType::Int32 => Arc::new(Int32Array::from(values.iter().map(|v| v.map(|v| v as i32)).collect::<Vec<_>>())),
        DataType::Date32 => Arc::new(Date32Array::from(values.iter().map(|v| v.map(|v| v as i32)).collect::<Vec<_>>())),
        other => return Err(fallback(format!("a state of type {other}"))),
    })
}

/// State types the kernel can emit (the planner checks each state field against it).
pub fn state_type_supported(data_type: &DataType) -> bool {
    matches!(data_type, DataType::Decimal128(_, _) | DataType::Decimal64(_, _) | DataType::Int64 | DataType::UInt64 | DataType::Int32 | DataType::Date32)
}
