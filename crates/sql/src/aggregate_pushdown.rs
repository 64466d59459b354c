//! Small-domain GROUP BY with SUM / AVG / COUNT / MIN / MAX answered inside the column
//! store scan (issue 13 item 6): a physical optimizer rule finds a partial
//! `AggregateExec` over a `FlashscanExec` (through a `ProjectionExec`) whose group keys are
//! columns and whose aggregates are ones `aggregate_kernel` computes exactly, and puts a
//! `FlashscanAggregateExec` in its place. That node reads each scan unit with the scan's
//! own decoder (`SliceDecoder`: the same row-group skipping, filters and late
//! materialization as `FlashscanExec`), hands the slices to the kernel with decimals as
//! unscaled i64 and dictionary strings as codes, and emits exactly the partial
//! aggregate's state: the final aggregate above is untouched, so answers are the same bits.
//!
//! Anything the rule cannot prove it answers exactly stays DataFusion's plan. At run time
//! a unit whose values could overflow the kernel's i64 arithmetic, or with more than
//! `aggregate_kernel::GROUPS_MAX` groups, is answered by the original partial aggregate
//! instead (the unit is read again: correct, only slower). `SET flashscan.aggregate_pushdown
//! = false` turns the rule off for a session (for timing the two side by side; settings.rs).

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use arrow::array::{ArrayRef, BooleanArray};
use arrow::datatypes::{DataType, SchemaRef};
use arrow::record_batch::{RecordBatch, RecordBatchOptions};
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{DataFusionError, Result, ScalarValue};
use datafusion::execution::TaskContext;
use datafusion::logical_expr::Operator;
use datafusion::physical_expr::expressions::{BinaryExpr, CastExpr, Column, Literal, TryCastExpr};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::aggregates::{AggregateExec, AggregateMode};
use datafusion::physical_plan::metrics::{ExecutionPlanMetricsSet, MetricBuilder, MetricsSet};
use datafusion::physical_plan::projection::ProjectionExec;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{DisplayAs, DisplayFormatType, ExecutionPlan, PlanProperties, SendableRecordBatchStream};
use futures::StreamExt;
use flashscan_exec::scan::ReadConfig;
use flashscan_exec::segment_slices::{IntegerRange, SliceDecoder};
use flashscan_exec::segments::{RowGroupSegments, SegmentSink};
use flashscan_exec::{scan_batches, BatchSink, ColumnStoreTable, ExecError};
use flashscan_storage::columnstore::VecPool;

use crate::aggregate_kernel::{state_type_supported, GROUPS_MAX, AggregateKernel, AggregateKind, AggregateSpec, KernelError, KernelSpec, ValueExpr};
use crate::error::exec_to_datafusion;
use crate::exec_plan::{FlashscanExec, ScanSpec};
use crate::metrics::{ScanLog, UnitMetrics};
use crate::reader::{sql_schema, FilterDecodePlan, RowFilter, UnitFigures};
use crate::settings::FlashscanSettings;
use crate::scan_units::ScanUnit;

/// The optimizer rule (registered in `session.rs`, before DataFusion's `EnsureCooperative`).
#[derive(Debug, Default)]
pub struct AggregatePushdown;

impl PhysicalOptimizerRule for AggregatePushdown {
    fn optimize(&self, plan: Arc<dyn ExecutionPlan>, config: &ConfigOptions) -> Result<Arc<dyn ExecutionPlan>> {
        if !FlashscanSettings::of(config).aggregate_pushdown {
            return Ok(plan);
        }
        plan.transform_up(|node| {
            let Some(aggregate) = node.downcast_ref::<AggregateExec>() else { return Ok(Transformed::no(node)) };
            match pushdown_plan(aggregate, &node) {
                Some(exec) => Ok(Transformed::yes(Arc::new(exec) as Arc<dyn ExecutionPlan>)),
                None => Ok(Transformed::no(node)),
            }
        })
        .map(|t| t.data)
    }

    fn name(&self) -> &str {
        "flashscan_aggregate_pushdown"
    }

    fn schema_check(&self) -> bool {
        true
    }
}

/// The kernel's plan for `aggregate`, or None when any part of it is not one the kernel
/// answers exactly (then DataFusion's plan stays).
fn pushdown_plan(aggregate: &AggregateExec, node: &Arc<dyn ExecutionPlan>) -> Option<FlashscanAggregateExec> {
    if *aggregate.mode() != AggregateMode::Partial || !aggregate.group_expr().is_single() || aggregate.filter_expr().iter().any(Option::is_some) {
        return None;
    }
    if aggregate.limit_options().is_some() {
        return None;
    }
    // The scan, through at most one projection.
    let input = aggregate.input();
    let (projection, scan_node) = match input.downcast_ref::<ProjectionExec>() {
        Some(p) => (Some(p.expr().iter().map(|e| e.expr.clone()).collect::<Vec<_>>()), p.input().clone()),
        None => (None, input.clone()),
    };
    let scan = scan_node.downcast_ref::<FlashscanExec>()?;
    let spec = scan.spec();
    if !spec.table.is_column_store()
        || spec.limit.is_some()
        // Deleted rows as the snapshot sees them: the scan takes them out (not the kernel's
        // own reading of the row groups).
        || spec.deleted.is_some()
        || spec.row_ids
        || !scan.runtime_filter_exprs().is_empty()
        || !spec.settings.slices
        || !flashscan_exec::segments::vector_kernels_enabled()
    {
        return None;
    }
    let scan_schema = scan_node.schema();
    // An expression over the aggregate's input as one over the scan's output.
    let resolve = |e: &Arc<dyn PhysicalExpr>| -> Option<Arc<dyn PhysicalExpr>> {
        match &projection {
            None => Some(e.clone()),
            Some(exprs) => e
                .clone()
                .transform_up(|x| match x.downcast_ref::<Column>() {
                    Some(c) => exprs.get(c.index()).cloned().map(Transformed::yes).ok_or_else(|| DataFusionError::Internal("column beyond the projection".into())),
                    None => Ok(Transformed::no(x)),
                })
                .ok()
                .map(|t| t.data),
        }
    };
    let mut compiler = Compiler { scan_schema: scan_schema.clone(), inputs: Vec::new() };

    // Group keys: scan columns.
    let output_schema = aggregate.schema();
    let mut keys = Vec::new();
    let mut key_types = Vec::new();
    let mut key_names = Vec::new();
    for (k, (expr, name)) in aggregate.group_expr().expr().iter().enumerate() {
        let resolved = resolve(expr)?;
        let column = resolved.downcast_ref::<Column>()?;
        let data_type = scan_schema.field(column.index()).data_type().clone();
        if !matches!(data_type, DataType::Utf8 | DataType::Utf8View | DataType::Int32 | DataType::Int64 | DataType::Date32 | DataType::Decimal128(_, _)) {
            return None;
        }
        // An integer key whose table-wide range is wider than the kernel's group limit is
        // taken as a large domain (the kernel would give up after its first groups).
        if let Some(s) = spec.projection.get(column.index()).and_then(|&c| spec.column_statistics.get(c)) {
            let as_i64 = |v: Option<&ScalarValue>| match v {
                Some(ScalarValue::Int64(Some(x))) => Some(*x as i128),
                Some(ScalarValue::Int32(Some(x)) | ScalarValue::Date32(Some(x))) => Some(*x as i128),
                _ => None,
            };
            if let (Some(lo), Some(hi)) = (as_i64(s.min_value.get_value()), as_i64(s.max_value.get_value())) {
                if hi - lo >= GROUPS_MAX as i128 {
                    return None;
                }
            }
        }
        let output_type = output_schema.fields().get(k)?.data_type().clone();
        if output_type != data_type {
            return None;
        }
        keys.push(compiler.input(column.index(), true));
        key_types.push(output_type);
        key_names.push(name.clone());
    }
    // Aggregates: their state fields, in the partial schema's order after the keys.
    let mut expressions: Vec<ValueExpr> = Vec::new();
    let mut aggregates = Vec::new();
    let mut field = keys.len();
    for a in aggregate.aggr_expr() {
        if a.is_distinct() || a.ignore_nulls() || !a.order_bys().is_empty() {
            return None;
        }
        let kind = match a.fun().name() {
            "sum" => AggregateKind::Sum,
            "avg" => AggregateKind::Avg,
            "count" => AggregateKind::Count,
            "min" => AggregateKind::Min,
            "max" => AggregateKind::Max,
            _ => return None,
        };
        let arguments = a.expressions();
        let [argument] = arguments.as_slice() else { return None };
        let argument = resolve(argument)?;
        let state_count = if kind == AggregateKind::Avg { 2 } else { 1 };
        let state_types: Vec<DataType> = (field..field + state_count).map(|i| output_schema.fields().get(i).map(|f| f.data_type().clone())).collect::<Option<_>>()?;
        field += state_count;
        if !state_types.iter().all(state_type_supported) {
            return None;
        }
        let argument_type = argument.data_type(&scan_schema).ok()?;
        // COUNT of a constant that is not null counts rows.
        let counts_rows = kind == AggregateKind::Count && argument.downcast_ref::<Literal>().is_some_and(|l| !l.value().is_null());
        let argument = if counts_rows {
            None
        } else {
            // Exact integer-domain arithmetic only: decimals and integers, and AVG of
            // decimals only (AVG of integers keeps a float sum).
            let fits = match kind {
                AggregateKind::Avg => matches!(argument_type, DataType::Decimal128(_, _)),
                _ => matches!(argument_type, DataType::Decimal128(_, _) | DataType::Int64 | DataType::Int32),
            };
            if !fits {
                return None;
            }
            let (value, _) = compiler.value(&argument)?;
            let index = match expressions.iter().position(|e| *e == value) {
                Some(i) => i,
                None => {
                    expressions.push(value);
                    expressions.len() - 1
                }
            };
            Some(index)
        };
        // The state types are DataFusion's for this argument (checked, not assumed).
        let expected = match (kind, &argument_type) {
            (AggregateKind::Count, _) => vec![DataType::Int64],
            (AggregateKind::Sum, DataType::Decimal128(p, s)) => vec![DataType::Decimal128((*p + 10).min(38), *s)],
            (AggregateKind::Sum, _) => vec![DataType::Int64],
            (AggregateKind::Min | AggregateKind::Max, t) => vec![t.clone()],
            (AggregateKind::Avg, DataType::Decimal128(_, s)) => {
                if !matches!(state_types.get(1), Some(DataType::Decimal128(_, t) | DataType::Decimal64(_, t)) if t == s) {
                    return None;
                }
                vec![DataType::UInt64, state_types[1].clone()]
            }
            (AggregateKind::Avg, _) => return None,
        };
        if expected != state_types {
            return None;
        }
        aggregates.push(AggregateSpec { kind, argument, state_types });
    }
    if field != output_schema.fields().len() {
        return None;
    }
    let kernel = KernelSpec { keys, key_types, expressions, aggregates };
    // Kernel inputs go out in the kernel's form (a decimal value as its unscaled i64, a
    // string key as dictionary codes) unless the scan's own filter reads them (its
    // conjuncts evaluate the declared types) or a decimal is also a key.
    let filter_columns: Vec<usize> = spec.row_filter.as_ref().map(|f| f.columns.clone()).unwrap_or_default();
    let table_columns: Vec<usize> = compiler.inputs.iter().map(|(scan_column, _)| spec.projection.get(*scan_column).copied()).collect::<Option<_>>()?;
    let kernel_columns: Vec<bool> = compiler
        .inputs
        .iter()
        .zip(&table_columns)
        .map(|(&(scan_column, is_key), table_column)| {
            let t = scan_schema.field(scan_column).data_type();
            !filter_columns.contains(table_column) && if is_decimal(t) { !is_key } else { is_key && matches!(t, DataType::Utf8 | DataType::Utf8View) }
        })
        .collect();
    let properties = node.properties().clone();
    let aggregate_names: Vec<String> = aggregate.aggr_expr().iter().map(|a| a.name().to_string()).collect();
    Some(FlashscanAggregateExec {
        spec: spec.clone(),
        scan_log: scan.scan_log().clone(),
        kernel: Arc::new(kernel),
        table_columns,
        kernel_columns,
        original: node.clone(),
        schema: output_schema,
        properties,
        metrics: ExecutionPlanMetricsSet::new(),
        display: format!("gby=[{}], aggr=[{}]", key_names.join(", "), aggregate_names.join(", ")),
    })
}

fn is_decimal(t: &DataType) -> bool {
    matches!(t, DataType::Decimal128(_, _))
}

/// Turns scan-side expressions into the kernel's, collecting the scan columns they read.
struct Compiler {
    scan_schema: SchemaRef,
    /// Kernel input i: (scan column, whether it is a group key).
    inputs: Vec<(usize, bool)>,
}

impl Compiler {
    fn input(&mut self, scan_column: usize, as_key: bool) -> usize {
        match self.inputs.iter().position(|(c, _)| *c == scan_column) {
            Some(i) => {
                self.inputs[i].1 |= as_key;
                i
            }
            None => {
                self.inputs.push((scan_column, as_key));
                self.inputs.len() - 1
            }
        }
    }

    /// `expr` (over the scan's output) as a kernel expression with its scale (0 for
    /// integers), when it is exact integer-domain arithmetic the kernel does.
    fn value(&mut self, expr: &Arc<dyn PhysicalExpr>) -> Option<(ValueExpr, u32)> {
        let data_type = expr.data_type(&self.scan_schema).ok()?;
        let scale = match data_type {
            DataType::Decimal128(_, s) if s >= 0 => s as u32,
            DataType::Int64 | DataType::Int32 => 0,
            _ => return None,
        };
        if let Some(c) = expr.downcast_ref::<Column>() {
            // A table column: decimals of ≤ 18 digits are the store's i64s.
            if matches!(data_type, DataType::Decimal128(p, _) if p > 18) {
                return None;
            }
            return Some((ValueExpr::Input(self.input(c.index(), false)), scale));
        }
        if let Some(l) = expr.downcast_ref::<Literal>() {
            let v: i64 = match l.value() {
                ScalarValue::Decimal128(Some(v), _, _) => i64::try_from(*v).ok()?,
                ScalarValue::Int64(Some(v)) => *v,
                ScalarValue::Int32(Some(v)) => i64::from(*v),
                _ => return None,
            };
            return Some((ValueExpr::Literal(v), scale));
        }
        if let Some(b) = expr.downcast_ref::<BinaryExpr>() {
            let (left, ls) = self.value(b.left())?;
            let (right, rs) = self.value(b.right())?;
            let is_int = scale == 0 && !is_decimal(&data_type);
            return match b.op() {
                Operator::Plus | Operator::Minus => {
                    // Decimal add/sub: both sides brought to the result's scale.
                    if is_int && (ls != 0 || rs != 0) {
                        return None;
                    }
                    let left = rescale(left, scale.checked_sub(ls)?);
                    let right = rescale(right, scale.checked_sub(rs)?);
                    let node = if *b.op() == Operator::Plus { ValueExpr::Add(Box::new(left), Box::new(right)) } else { ValueExpr::Sub(Box::new(left), Box::new(right)) };
                    Some((node, scale))
                }
                Operator::Multiply => (ls + rs == scale).then(|| (ValueExpr::Mul(Box::new(left), Box::new(right)), scale)),
                _ => None,
            };
        }
        // Casts that only widen: an integer or decimal to a decimal with at least as many
        // digits before and after the point (exact: × 10^k), or an integer to Int64.
        let (inner, to) = if let Some(c) = expr.downcast_ref::<CastExpr>() {
            (c.expr(), c.cast_type().clone())
        } else if let Some(c) = expr.downcast_ref::<TryCastExpr>() {
            (c.expr(), c.cast_type().clone())
        } else {
            return None;
        };
        let from = inner.data_type(&self.scan_schema).ok()?;
        let (from_p, from_s) = match from {
            DataType::Decimal128(p, s) if s >= 0 => (p as i32, s as i32),
            DataType::Int64 => (19, 0),
            DataType::Int32 => (10, 0),
            _ => return None,
        };
        let (inner, inner_scale) = self.value(inner)?;
        match to {
            DataType::Decimal128(p, s) if s as i32 >= from_s && (p as i32 - s as i32) >= (from_p - from_s) => Some((rescale(inner, (s as i32 - from_s) as u32), s as u32)).filter(|_| inner_scale as i32 == from_s),
            DataType::Int64 if from_s == 0 && !is_decimal(&from) => Some((inner, 0)),
            _ => None,
        }
    }
}

/// `e` × 10^k (folded into a literal).
fn rescale(e: ValueExpr, k: u32) -> ValueExpr {
    if k == 0 {
        return e;
    }
    match e {
        ValueExpr::Literal(v) => match 10i64.checked_pow(k).and_then(|f| v.checked_mul(f)) {
            Some(v) => ValueExpr::Literal(v),
            None => ValueExpr::Scale(Box::new(ValueExpr::Literal(v)), k),
        },
        e => ValueExpr::Scale(Box::new(e), k),
    }
}

/// A partial aggregate answered by flashscan's kernel over a column store scan. Emits the
/// replaced `AggregateExec`'s schema (its state), a partition per scan unit as it did.
#[derive(Debug)]
pub struct FlashscanAggregateExec {
    spec: ScanSpec,
    scan_log: Arc<ScanLog>,
    kernel: Arc<KernelSpec>,
    /// Kernel input i is table column `table_columns[i]`.
    table_columns: Vec<usize>,
    /// Kernel inputs decoded as the kernel's (unscaled i64 decimals, dictionary codes).
    kernel_columns: Vec<bool>,
    /// The partial aggregate this replaced: what answers a unit the kernel gives up on.
    original: Arc<dyn ExecutionPlan>,
    schema: SchemaRef,
    properties: Arc<PlanProperties>,
    metrics: ExecutionPlanMetricsSet,
    display: String,
}

impl DisplayAs for FlashscanAggregateExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        let s = &self.spec;
        let columns: Vec<&str> = self.table_columns.iter().filter_map(|&i| s.table.columns.get(i).map(|c| c.name.as_str())).collect();
        write!(f, "FlashscanAggregateExec: mode=Partial, {}, table={}, units={}, columns=[{}]", self.display, s.table.name, s.units.len(), columns.join(", "))?;
        if let Some(filter) = &s.row_filter {
            write!(f, ", filter=[{filter}]")?;
        }
        Ok(())
    }
}

impl ExecutionPlan for FlashscanAggregateExec {
    fn name(&self) -> &'static str {
        "FlashscanAggregateExec"
    }

    crate::leaf_plan_methods!();

    fn execute(&self, partition: usize, context: Arc<TaskContext>) -> Result<SendableRecordBatchStream> {
        let unit = self.spec.units.get(partition).cloned();
        let job = UnitJob {
            spec: self.spec.clone(),
            kernel: self.kernel.clone(),
            table_columns: self.table_columns.clone(),
            kernel_columns: self.kernel_columns.clone(),
            schema: self.schema.clone(),
            batch_rows: context.session_config().batch_size().max(1),
            cancelled: Arc::new(AtomicBool::new(false)),
        };
        let cancel = CancelOnDrop(job.cancelled.clone());
        let unit_metrics = UnitMetrics::new(&self.metrics, partition);
        let output_rows = MetricBuilder::new(&self.metrics).output_rows(partition);
        let fallbacks = MetricBuilder::new(&self.metrics).global_counter("kernel_fallbacks");
        let scan_log = self.scan_log.clone();
        let statement = scan_log.statement();
        let original = self.original.clone();
        let schema = self.schema.clone();
        let start = async move {
            let _cancel = cancel;
            let table = job.spec.table.name.clone();
            let outcome = tokio::task::spawn_blocking(move || job.run(unit.as_ref())).await;
            let single = |r: Result<RecordBatch>| futures::stream::once(async move { r }).boxed();
            match outcome {
                Ok(Ok((Some(batch), figures))) => {
                    unit_metrics.record(&figures);
                    scan_log.record_unit(statement, &table, &figures);
                    output_rows.add(batch.num_rows());
                    single(Ok(batch))
                }
                // The kernel gave up: the original partial aggregate answers this unit.
                Ok(Ok((None, _))) => {
                    fallbacks.add(1);
                    match original.execute(partition, context) {
                        Ok(stream) => stream.boxed(),
                        Err(e) => single(Err(e)),
                    }
                }
                Ok(Err(e)) => single(Err(e)),
                Err(e) => single(Err(DataFusionError::External(Box::new(e)))),
            }
        };
        Ok(Box::pin(RecordBatchStreamAdapter::new(schema, futures::stream::once(start).flatten())))
    }

    fn metrics(&self) -> Option<MetricsSet> {
        Some(self.metrics.clone_inner())
    }
}

/// Sets the flag when the stream is dropped: the unit's reader stops at its next row group.
struct CancelOnDrop(Arc<AtomicBool>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// What one unit's blocking task needs.
struct UnitJob {
    spec: ScanSpec,
    kernel: Arc<KernelSpec>,
    table_columns: Vec<usize>,
    kernel_columns: Vec<bool>,
    schema: SchemaRef,
    batch_rows: usize,
    cancelled: Arc<AtomicBool>,
}

impl UnitJob {
    /// Reads the unit into the kernel: the state batch, or None when the kernel gave up.
    fn run(&self, unit: Option<&ScanUnit>) -> Result<(Option<RecordBatch>, UnitFigures)> {
        let mut kernel = AggregateKernel::new(self.kernel.clone());
        let mut figures = UnitFigures::default();
        if let Some(unit) = unit {
            match self.read(unit, kernel).map_err(exec_to_datafusion)? {
                (Some(k), f) => {
                    kernel = k;
                    figures = f;
                }
                (None, _) => return Ok((None, figures)),
            }
        }
        match kernel.finish() {
            Ok(columns) => {
                let options = RecordBatchOptions::new().with_row_count(Some(columns.first().map_or(0, |c| c.len())));
                Ok((Some(RecordBatch::try_new_with_options(self.schema.clone(), columns, &options)?), figures))
            }
            Err(KernelError::Fallback(_)) => Ok((None, figures)),
            Err(KernelError::Arrow(e)) => Err(e.into()),
            Err(KernelError::DataFusion(e)) => Err(e),
        }
    }

    /// Reads `unit`'s row groups (as `reader::read_unit` does for `FlashscanExec`) into
    /// `kernel`; None when the kernel gave up.
    fn read(&self, unit: &ScanUnit, kernel: AggregateKernel) -> Result<(Option<AggregateKernel>, UnitFigures), ExecError> {
        let spec = &self.spec;
        let keep = |partition: u32, row_group: usize| partition == unit.partition_index && unit.row_groups.contains(&row_group);
        // `spec.deleted` is None here (the pushdown steps aside otherwise): a table without
        // a snapshot reads its deleted rows file.
        let source = ColumnStoreTable::with_selection(&spec.db_dir, &spec.table, &keep)?.with_deleted_rows_file(&spec.db_dir)?;
        let options = &spec.read_options;
        let config = ReadConfig { io_size_bytes: options.io_size_bytes, queue_depth: options.queue_depth, thread_count: 1, direct: options.direct, engine_kind: options.engine_kind };
        // The kernel's inputs, then the filter's columns it does not read.
        let row_filter = spec.row_filter.as_ref();
        let FilterDecodePlan { decode_columns, filter_slots, ranges } = FilterDecodePlan::new(&self.table_columns, row_filter, &sql_schema(&spec.table, &spec.settings));
        let mut kernel_mask = self.kernel_columns.clone();
        kernel_mask.resize(decode_columns.len(), false);
        let gave_up = AtomicBool::new(false);
        let kernel_slot = std::sync::Mutex::new(Some(kernel));
        let make_sink = |_worker: u32| -> Result<KernelSink<'_>, ExecError> {
            let kernel = kernel_slot.lock().ok().and_then(|mut k| k.take()).ok_or_else(|| ExecError::Internal("aggregate kernel asked for twice".into()))?;
            Ok(KernelSink {
                kernel,
                inputs: self.table_columns.len(),
                kernel_mask: kernel_mask.clone(),
                row_filter: row_filter.map(|f| (f, filter_slots.clone())),
                ranges: ranges.clone(),
                batch_rows: self.batch_rows,
                views: spec.settings.string_views(),
                pool: VecPool::default(),
                gave_up: &gave_up,
                cancelled: &self.cancelled,
                rows: AtomicU64::new(0),
            })
        };
        let scanned = scan_batches(&source, &decode_columns, &spec.scan_filter, &config, &make_sink);
        // A sink's `Stopped` ends the scan successfully: the kernel that gave up mid-slice
        // holds part of the unit only, and is dropped.
        if gave_up.load(Ordering::Relaxed) {
            return Ok((None, UnitFigures::default()));
        }
        match scanned {
            Ok((mut sinks, stats)) => {
                let t = stats.total();
                let figures = UnitFigures {
                    bytes_read: t.read.bytes_read,
                    reads_count: t.read.reads_count,
                    pages_read: t.pages_read,
                    rows_scanned: t.rows_scanned,
                    io_wait_ns: t.read.io_wait_ns,
                    decode_ns: t.decode_ns + t.query_ns,
                    deliver_ns: 0,
                    elapsed_ns: stats.elapsed_ns,
                };
                let sink = sinks.pop().ok_or_else(|| ExecError::Internal("scan returned no kernel".into()))?;
                Ok((Some(sink.kernel), figures))
            }
            Err(ExecError::Stopped) if self.cancelled.load(Ordering::Relaxed) => Err(ExecError::Internal("query cancelled".into())),
            Err(e) => Err(e),
        }
    }
}

/// The scan's sink: slices of each row group (filtered as `FlashscanExec` filters them)
/// into the kernel.
struct KernelSink<'a> {
    kernel: AggregateKernel,
    /// The first `inputs` decoded columns are the kernel's; the rest the filter's only.
    inputs: usize,
    kernel_mask: Vec<bool>,
    row_filter: Option<(&'a RowFilter, Vec<usize>)>,
    ranges: Vec<Option<IntegerRange>>,
    batch_rows: usize,
    views: bool,
    pool: VecPool,
    gave_up: &'a AtomicBool,
    cancelled: &'a AtomicBool,
    rows: AtomicU64,
}

impl KernelSink<'_> {
    fn add(&mut self, columns: &[ArrayRef], rows: usize) -> Result<(), ExecError> {
        self.rows.fetch_add(rows as u64, Ordering::Relaxed);
        match self.kernel.add_slice(columns, rows) {
            Ok(()) => Ok(()),
            Err(KernelError::Fallback(_)) => {
                self.gave_up.store(true, Ordering::Relaxed);
                Err(ExecError::Stopped)
            }
            Err(KernelError::Arrow(e)) => Err(e.into()),
            Err(KernelError::DataFusion(e)) => Err(ExecError::Internal(e.to_string())),
        }
    }
}

impl BatchSink for KernelSink<'_> {
    /// Whole batches (a scan without segments): the filter, then the kernel. Strings here
    /// are Utf8 where the filter was built for views: the kernel gives up on that case.
    fn consume(&mut self, batch: &RecordBatch) -> Result<(), ExecError> {
        if self.cancelled.load(Ordering::Relaxed) {
            return Err(ExecError::Stopped);
        }
        let batch = match &self.row_filter {
            Some((filter, slots)) => {
                if self.views && batch.schema().fields().iter().any(|f| f.data_type() == &DataType::Utf8) {
                    self.gave_up.store(true, Ordering::Relaxed);
                    return Err(ExecError::Stopped);
                }
                let mut selection: Option<arrow::buffer::BooleanBuffer> = None;
                for conjunct in &filter.conjuncts {
                    let columns: Vec<usize> = conjunct.inputs.iter().map(|&i| slots[i]).collect();
                    let result = conjunct.evaluate(&batch.project(&columns)?, filter.piecewise_like)?;
                    let passing = match arrow::array::Array::nulls(&result) {
                        Some(nulls) => result.values() & nulls.inner(),
                        None => result.values().clone(),
                    };
                    selection = Some(match selection {
                        Some(s) => &s & &passing,
                        None => passing,
                    });
                }
                match selection {
                    Some(s) => arrow::compute::filter_record_batch(batch, &BooleanArray::new(s, None))?,
                    None => batch.clone(),
                }
            }
            None => batch.clone(),
        };
        let columns: Vec<ArrayRef> = batch.columns().iter().take(self.inputs).cloned().collect();
        self.add(&columns, batch.num_rows())
    }

    fn segment_sink(&mut self) -> Option<&mut dyn SegmentSink> {
        Some(self as &mut dyn SegmentSink)
    }
}

impl SegmentSink for KernelSink<'_> {
    fn consume_segments(&mut self, group: &RowGroupSegments<'_>) -> Result<(), ExecError> {
        if self.cancelled.load(Ordering::Relaxed) {
            return Err(ExecError::Stopped);
        }
        let mut slices = SliceDecoder::open(group, self.batch_rows, self.views, &mut self.pool)?.with_output_columns(self.inputs).with_kernel_columns(&self.kernel_mask);
        let row_filter: Option<(&RowFilter, Vec<usize>)> = self.row_filter.as_ref().map(|(f, s)| (*f, s.clone()));
        let evaluators = row_filter.as_ref().map(|(f, _)| f.evaluators()).unwrap_or_default();
        let slice_filter = row_filter.as_ref().map(|(f, slots)| f.slice_filter(slots, &evaluators, &self.ranges));
        while let Some(batch) = slices.next_slice(group, slice_filter.as_ref())? {
            if batch.num_rows() > 0 {
                let rows = batch.num_rows();
                self.add(batch.columns(), rows)?;
            }
        }
        Ok(())
    }
}

/// `ctx` with `AggregatePushdown` among its physical optimizer rules: after DataFusion's
/// own (the partial/final split, projection and filter pushdown are done), before
/// `EnsureCooperative` and the sanity check.
pub fn register(ctx: datafusion::prelude::SessionContext) -> datafusion::prelude::SessionContext {
    crate::rule_order::with_physical_rule(ctx, Arc::new(AggregatePushdown), crate::rule_order::At::Before(&["EnsureCooperative", "SanityCheckPlan"]))
}
