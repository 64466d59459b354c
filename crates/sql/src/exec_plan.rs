//! The scan node DataFusion runs: one execution partition per scan unit, each read by the
//! flashscan reader on a blocking thread that feeds a bounded channel. The channel's bound
//! is the back-pressure: a slow join or sort above stops the reads instead of filling
//! memory, and a dropped stream (LIMIT reached, query cancelled) stops the scan.

use std::fmt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;
use datafusion::common::stats::Precision;
use datafusion::common::{ColumnStatistics, Result, Statistics};
use datafusion::execution::TaskContext;
use datafusion::physical_expr::{EquivalenceProperties, PhysicalExpr};
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::common::config::ConfigOptions;
use datafusion::physical_plan::filter_pushdown::{ChildPushdownResult, FilterPushdownPhase, FilterPushdownPropagation, PushedDown};
use datafusion::physical_plan::metrics::{ExecutionPlanMetricsSet, MetricBuilder, MetricsSet};
use datafusion::physical_plan::stream::{RecordBatchReceiverStream, RecordBatchStreamAdapter};
use futures::StreamExt;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, Partitioning, PlanProperties, SendableRecordBatchStream, StatisticsArgs,
};
use flashscan_storage::TableMeta;

use crate::error::exec_to_datafusion;
use crate::metrics::{ScanLog, UnitMetrics};
use crate::reader::{read_unit, sql_schema, Flow, ReadOptions, RowFilter, SliceOptions};
use crate::scan_units::ScanUnit;
use crate::settings::FlashscanSettings;

mod runtime_filter;
use runtime_filter::{apply_runtime_filters, RuntimeFilter, RuntimeFilterMetrics};

/// The `ExecutionPlan` methods every leaf scan node of flashscan writes the same way (its
/// `properties` field, no children, no expressions of its own): one definition for
/// `FlashscanExec` and the cluster's `ClusterScanExec` (crates/cluster/src/scan.rs).
/// Expands inside an `impl ExecutionPlan for T` whose `T` has `properties: Arc<PlanProperties>`.
///
/// `leaf_plan_methods!(expressions: field)` also shows DataFusion the expressions in `field`
/// (a `Vec<Arc<dyn PhysicalExpr>>`) through `apply_expressions`: a hash join computes its
/// dynamic filter only when it finds the filter's expression in its probe subtree there.
#[macro_export]
macro_rules! leaf_plan_methods {
    () => {
        $crate::leaf_plan_methods!(@leaf);

        fn apply_expressions(
            &self,
            _f: &mut dyn FnMut(&::std::sync::Arc<dyn ::datafusion::physical_expr::PhysicalExpr>) -> ::datafusion::common::Result<::datafusion::common::tree_node::TreeNodeRecursion>,
        ) -> ::datafusion::common::Result<::datafusion::common::tree_node::TreeNodeRecursion> {
            Ok(::datafusion::common::tree_node::TreeNodeRecursion::Continue)
        }
    };
    (expressions: $field:ident) => {
        $crate::leaf_plan_methods!(@leaf);

        fn apply_expressions(
            &self,
            f: &mut dyn FnMut(&::std::sync::Arc<dyn ::datafusion::physical_expr::PhysicalExpr>) -> ::datafusion::common::Result<::datafusion::common::tree_node::TreeNodeRecursion>,
        ) -> ::datafusion::common::Result<::datafusion::common::tree_node::TreeNodeRecursion> {
            for expression in &self.$field {
                if f(expression)? == ::datafusion::common::tree_node::TreeNodeRecursion::Stop {
                    return Ok(::datafusion::common::tree_node::TreeNodeRecursion::Stop);
                }
            }
            Ok(::datafusion::common::tree_node::TreeNodeRecursion::Continue)
        }
    };
    (@leaf) => {
        fn properties(&self) -> &::std::sync::Arc<::datafusion::physical_plan::PlanProperties> {
            &self.properties
        }

        fn children(&self) -> Vec<&::std::sync::Arc<dyn ::datafusion::physical_plan::ExecutionPlan>> {
            vec![]
        }

        fn replace_children(
            self: ::std::sync::Arc<Self>,
            _children: Vec<::std::sync::Arc<dyn ::datafusion::physical_plan::ExecutionPlan>>,
            _options: ::datafusion::physical_plan::ReplaceChildrenOptions,
        ) -> ::datafusion::common::Result<::std::sync::Arc<dyn ::datafusion::physical_plan::ExecutionPlan>> {
            Ok(self)
        }

        fn with_new_children(
            self: ::std::sync::Arc<Self>,
            children: Vec<::std::sync::Arc<dyn ::datafusion::physical_plan::ExecutionPlan>>,
        ) -> ::datafusion::common::Result<::std::sync::Arc<dyn ::datafusion::physical_plan::ExecutionPlan>> {
            self.replace_children(children, ::datafusion::physical_plan::ReplaceChildrenOptions::new(::datafusion::physical_plan::ChildrenPropertiesMode::Recompute))
        }
    };
}

/// Batch slices a unit may have handed on and DataFusion not yet taken. The slices keep
/// their decoded batch alive, so this bounds a scan's memory to about two decoded batches
/// per execution partition.
pub const BATCHES_IN_FLIGHT_MAX: usize = 16;

/// What a scan node reads, fixed at planning time.
#[derive(Debug, Clone)]
pub struct ScanSpec {
    pub table: Arc<TableMeta>,
    pub db_dir: Arc<PathBuf>,
    /// Indexes into the table's columns, in output order.
    pub projection: Vec<usize>,
    pub units: Vec<ScanUnit>,
    pub partitions_total: usize,
    pub partitions_pruned: usize,
    /// Filters used to skip partitions, shown by EXPLAIN.
    pub pruning_filters: Vec<String>,
    /// Column ranges a column store uses to skip row groups by min/max.
    pub scan_filter: flashscan_exec::ScanFilter,
    /// Column stores: the query's filters, evaluated in the scan (DataFusion runs none
    /// above it); the rows handed on all pass.
    pub row_filter: Option<RowFilter>,
    pub limit: Option<usize>,
    pub read_options: ReadOptions,
    /// The whole table's column statistics (indexed like its columns; empty when unknown).
    /// Bounds of the whole table bound any part of it, so a unit reports them as inexact.
    pub column_statistics: Arc<Vec<ColumnStatistics>>,
    /// The share of a sample of the table's rows that pass the row filter's conjuncts
    /// interval analysis cannot bound (`sampled_selectivity`), read once at planning; None:
    /// not sampled (DataFusion's 20 % is taken for them).
    pub sampled_selectivity: Option<f64>,
    /// The switches of the session that planned the scan (`slices` and `views` are the
    /// table provider's: they shaped the schema and the filters it took over).
    pub settings: FlashscanSettings,
    /// The statement's view of a heap table that has deleted rows in its pages: the scan
    /// skips the ones deleted as of the statement's snapshot.
    pub deleted: Option<flashscan_write::SnapshotTable>,
    /// Hand on each row's id (`flashscan_write::RowId`) as a last column, `ROW_ID_COLUMN`
    /// (what UPDATE and DELETE read to name the rows they change).
    pub row_ids: bool,
}

#[derive(Debug)]
pub struct FlashscanExec {
    spec: ScanSpec,
    schema: SchemaRef,
    metrics: ExecutionPlanMetricsSet,
    scan_log: Arc<ScanLog>,
    properties: Arc<PlanProperties>,
    /// Units started and not yet done recording their figures. A unit whose stream was
    /// dropped early (a join with an empty build side, a limit) reads on until its next
    /// batch and records after that: a cluster host waits for zero before shipping this
    /// node's metrics (crates/cluster), so per-task figures are complete.
    units_running: Arc<AtomicUsize>,
    /// Filters DataFusion pushed into the scan once the plan was final (a hash join's build
    /// side: its keys' bounds and membership; a TopK's threshold), over the scan's output
    /// columns. They may change while the query runs and start as `true`; the scan drops
    /// the rows that fail them before handing batches on. The operators that made them
    /// were told nothing was pushed (they still do their own work), so applying them is
    /// only ever a saving.
    runtime_filters: Vec<Arc<dyn PhysicalExpr>>,
    /// The share of rows the scan's row filter is expected to keep (1 without one): the
    /// statistics the planner sees are the filtered rows', as they would be with a
    /// `FilterExec` above the scan (`filter_selectivity`).
    filter_selectivity: f64,
}

/// What DataFusion's `FilterExec` assumes a predicate keeps when interval analysis cannot
/// say (its `FILTER_EXEC_DEFAULT_SELECTIVITY`, 20 %), taken for the scan's filter alike.
const FILTER_SELECTIVITY_UNKNOWN: f64 = 0.2;

/// The share of rows `spec`'s row filter keeps, estimated as DataFusion's `FilterExec`
/// estimates it: interval analysis of each conjunct against the table's min/max (ranges on
/// one column: `l_receiptdate` over one year of seven keeps ~1/7), conjuncts taken as
/// independent; for whatever the analysis cannot bound (string matches, IN lists) the
/// share a sample of the table kept (`sampled_selectivity`), else 20 % once as `FilterExec`
/// takes. Without it a filtered scan reported the whole table: the join planner then
/// built its hash table on the other, larger side (TPC-H Q12 hashed all of orders
/// instead of the year of lineitem kept; Q10 all of customer instead of a quarter of
/// orders), where DataFusion over Parquet, with its filter above the scan, did not.
fn filter_selectivity(spec: &ScanSpec) -> f64 {
    if spec.row_filter.is_none() {
        return 1.0;
    }
    let mut selectivity = 1.0;
    let mut unbounded = false;
    for analysed in analysed_selectivities(spec) {
        match analysed {
            Some(s) => selectivity *= s,
            None => unbounded = true,
        }
    }
    if unbounded {
        selectivity *= spec.sampled_selectivity.unwrap_or(FILTER_SELECTIVITY_UNKNOWN);
    }
    selectivity
}

/// Per conjunct of `spec`'s row filter, the share of rows interval analysis says it keeps
/// (against the table's min/max), or None when the analysis cannot bound it.
fn analysed_selectivities(spec: &ScanSpec) -> Vec<Option<f64>> {
    use datafusion::physical_expr::intervals::utils::check_support;
    use datafusion::physical_expr::{analyze, AnalysisContext};
    let Some(filter) = &spec.row_filter else { return Vec::new() };
    let schema = sql_schema(&spec.table, &spec.settings);
    filter
        .conjuncts
        .iter()
        .map(|conjunct| {
            let columns: Vec<usize> = conjunct.inputs.iter().map(|&i| filter.columns.get(i).copied()).collect::<Option<_>>()?;
            let statistics: Vec<ColumnStatistics> = columns.iter().map(|&c| spec.column_statistics.get(c).cloned()).collect::<Option<_>>()?;
            let own = Arc::new(schema.project(&columns).ok()?);
            if !check_support(&conjunct.predicate, &own) {
                return None;
            }
            let context = AnalysisContext::try_from_statistics(&own, &statistics).ok()?;
            analyze(&conjunct.predicate, context, &own).ok()?.selectivity.filter(|s| (0.0..=1.0).contains(s))
        })
        .collect()
}

/// The share of a sample of `spec`'s table (`reader::sample_filter_selectivity`: the first
/// rows of one of its row groups) that passes the row filter's conjuncts interval analysis cannot
/// bound; None without such conjuncts, with `flashscan.filter_sample` off, or when the sample cannot be
/// read (the estimate then falls back to 20 %; the scan itself reports any real error).
/// Read once when the table provider plans the scan: a join planner that takes a string
/// match for 20 % (as DataFusion's `FilterExec` does) builds hash tables on the wrong side
/// (TPC-H Q9: `p_name LIKE '%green%'` keeps 5.4 %, docs/benchmarks.md speed7a).
pub fn sampled_selectivity(spec: &ScanSpec) -> Option<f64> {
    if !spec.settings.filter_sample || !spec.table.is_column_store() {
        return None;
    }
    let filter = spec.row_filter.as_ref()?;
    let unbounded: Vec<usize> = analysed_selectivities(spec).iter().enumerate().filter(|(_, s)| s.is_none()).map(|(k, _)| k).collect();
    if unbounded.is_empty() {
        return None;
    }
    crate::reader::sample_filter_selectivity(&spec.table, &spec.db_dir, &spec.units, &filter.subset(&unbounded), &spec.read_options, &spec.settings).ok().flatten()
}

impl FlashscanExec {
    pub fn new(spec: ScanSpec, scan_log: Arc<ScanLog>) -> Result<FlashscanExec> {
        // What the table provider declares (strings as views for column stores).
        let mut schema = sql_schema(&spec.table, &spec.settings).project(&spec.projection)?;
        if spec.row_ids {
            let mut fields: Vec<_> = schema.fields().iter().cloned().collect();
            fields.push(Arc::new(crate::table_provider::row_id_field()));
            schema = arrow::datatypes::Schema::new(fields);
        }
        let schema = Arc::new(schema);
        // An empty scan still has one partition, which yields nothing: operators above
        // expect at least one.
        let partition_count = spec.units.len().max(1);
        let properties = PlanProperties::new(
            EquivalenceProperties::new(schema.clone()),
            Partitioning::UnknownPartitioning(partition_count),
            EmissionType::Incremental,
            Boundedness::Bounded,
        );
        let filter_selectivity = filter_selectivity(&spec);
        Ok(FlashscanExec {
            spec,
            schema,
            metrics: ExecutionPlanMetricsSet::new(),
            scan_log,
            properties: Arc::new(properties),
            units_running: Arc::default(),
            runtime_filters: Vec::new(),
            filter_selectivity,
        })
    }

    pub fn spec(&self) -> &ScanSpec {
        &self.spec
    }

    /// Where the scan's figures go (the aggregate pushdown's node reports there too).
    pub fn scan_log(&self) -> &Arc<ScanLog> {
        &self.scan_log
    }

    /// The runtime filters DataFusion pushed into this scan (none until the plan is final).
    pub fn runtime_filter_exprs(&self) -> &[Arc<dyn PhysicalExpr>] {
        &self.runtime_filters
    }

    /// Units of this node that started and have not yet recorded their figures.
    pub fn units_running(&self) -> usize {
        self.units_running.load(Ordering::Acquire)
    }

    fn statistics_of(&self, units: &[ScanUnit], exact: bool) -> Statistics {
        // A limit applies to each partition on its own.
        let limit = self.spec.limit.map(|l| l as u64).unwrap_or(u64::MAX);
        let rows: u64 = units.iter().map(|u| u.row_count.min(limit)).sum();
        let bytes: u64 = units.iter().map(|u| u.bytes()).sum();
        let num_rows = if exact { Precision::Exact(rows as usize) } else { Precision::Inexact(rows as usize) };
        // Rows the scan's own filter drops are not handed on (exact is false with a filter).
        let (num_rows, bytes) = if self.spec.row_filter.is_some() {
            (num_rows.with_estimated_selectivity(self.filter_selectivity), Precision::Inexact(bytes as usize).with_estimated_selectivity(self.filter_selectivity))
        } else {
            (num_rows, Precision::Inexact(bytes as usize))
        };
        let mut statistics = Statistics::new_unknown(&self.schema).with_num_rows(num_rows).with_total_byte_size(bytes);
        let table_columns = &self.spec.column_statistics;
        if !table_columns.is_empty() {
            // Null counts are the table's; a part may hold fewer, so they become inexact too.
            let whole = exact && units.len() == self.spec.units.len() && self.spec.limit.is_none();
            // Column sizes are the whole table's: scaled to the rows handed on (these
            // units, the limit, the filter), as the row count is.
            let share = if self.spec.table.row_count == 0 { 0.0 } else { rows as f64 / self.spec.table.row_count as f64 }
                * if self.spec.row_filter.is_some() { self.filter_selectivity } else { 1.0 };
            // The bytes of the columns handed on, when every one is known (as DataFusion's
            // Parquet source reports them): the join planner hashes the smaller input.
            // `flashscan.column_bytes` off: the pages of all the table's columns, as before
            // (for timing the two side by side).
            let projected: Option<f64> = self
                .spec
                .projection
                .iter()
                .map(|&c| table_columns.get(c).and_then(|s| s.byte_size.get_value().copied()).map(|b| b as f64 * share))
                .sum();
            if let Some(projected) = projected.filter(|_| self.spec.settings.column_bytes) {
                statistics.total_byte_size = if whole { Precision::Exact(projected as usize) } else { Precision::Inexact(projected as usize) };
            }
            // Per column sizes stay unknown to the operators above: with them DataFusion
            // sums sizes through projections and joins too (Statistics::project), and its
            // join outputs' sizes (inputs' columns, unscaled by the join's selectivity)
            // then outweighed scans: TPC-H Q21 hashed 38 M lineitem rows for its anti join
            // (1.6× the CPU at SF 10) instead of the semi join's output. Scan against scan
            // is what the scan's size decides (Q13: customer's keys, not orders).
            statistics.column_statistics = self
                .spec
                .projection
                .iter()
                .map(|&c| {
                    let mut s = table_columns.get(c).cloned().unwrap_or_else(ColumnStatistics::new_unknown);
                    s.byte_size = Precision::Absent;
                    if whole { s } else { s.to_inexact() }
                })
                // The row id column, last (`row_ids`): one entry per column of the schema.
                .chain(self.spec.row_ids.then(ColumnStatistics::new_unknown))
                .collect();
        }
        statistics
    }
}

impl DisplayAs for FlashscanExec {
    fn fmt_as(&self, t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        let s = &self.spec;
        let columns: Vec<&str> = s.projection.iter().filter_map(|&i| s.table.columns.get(i).map(|c| c.name.as_str())).collect();
        match t {
            DisplayFormatType::Default | DisplayFormatType::Verbose => {
                write!(
                    f,
                    "FlashscanExec: table={}, format={}, partitions={}/{}, units={}, projection=[{}]",
                    s.table.name,
                    s.table.format,
                    s.partitions_total - s.partitions_pruned,
                    s.partitions_total,
                    s.units.len(),
                    columns.join(", ")
                )?;
                if !s.pruning_filters.is_empty() {
                    write!(f, ", pruning=[{}]", s.pruning_filters.join(", "))?;
                }
                if let Some(filter) = &s.row_filter {
                    write!(f, ", filter=[{filter}]")?;
                }
                if !self.runtime_filters.is_empty() {
                    let filters: Vec<String> = self.runtime_filters.iter().map(|f| f.to_string()).collect();
                    write!(f, ", runtime_filters=[{}]", filters.join(", "))?;
                }
                if let Some(limit) = s.limit {
                    write!(f, ", limit={limit}")?;
                }
                Ok(())
            }
            DisplayFormatType::TreeRender => {
                writeln!(f, "table={}", s.table.name)?;
                writeln!(f, "format={}", s.table.format)?;
                write!(f, "partitions={}/{}", s.partitions_total - s.partitions_pruned, s.partitions_total)
            }
        }
    }
}

impl ExecutionPlan for FlashscanExec {
    fn name(&self) -> &'static str {
        "FlashscanExec"
    }

    // The runtime filters: the joins that made them look for them here.
    crate::leaf_plan_methods!(expressions: runtime_filters);

    fn execute(&self, partition: usize, context: Arc<TaskContext>) -> Result<SendableRecordBatchStream> {
        // Decoders hand on whole pages' or row groups' worth of rows (up to a million);
        // DataFusion's operators are tuned for batches that stay in the CPU caches, so
        // batches go up in slices of the session's batch size (zero-copy views).
        let batch_rows = context.session_config().batch_size().max(1);
        let mut builder = RecordBatchReceiverStream::builder(self.schema.clone(), BATCHES_IN_FLIGHT_MAX);
        let Some(unit) = self.spec.units.get(partition).cloned() else {
            // The one partition of an empty scan (or one DataFusion should not ask for).
            return Ok(builder.build());
        };
        let spec = self.spec.clone();
        let runtime_filters = self.runtime_filters.clone();
        let unit_metrics = UnitMetrics::new(&self.metrics, partition);
        let output_rows = MetricBuilder::new(&self.metrics).output_rows(partition);
        let filter_metrics = (!runtime_filters.is_empty()).then(|| RuntimeFilterMetrics::new(&self.metrics, partition));
        let scan_log = self.scan_log.clone();
        let statement = scan_log.statement();
        let running = UnitRunning::start(&self.units_running);
        let unit_run = UnitRun { spec, unit, runtime_filters, filter_metrics, output_rows, unit_metrics, scan_log, statement, batch_rows };
        if context.session_config().get_extension::<ReadSmallUnitsInline>().is_some() && unit_run.unit.page_count <= INLINE_UNIT_PAGES_MAX {
            // On the caller's task, at the first poll: no hop to a blocking thread and back.
            let read = async move {
                let _running = running;
                let batches = std::sync::Mutex::new(Vec::new());
                let mut unit_run = unit_run;
                // A few pages: pread, not an io_uring made and torn down for two reads.
                unit_run.spec.read_options.engine_kind = flashscan_io::EngineKind::Psync;
                let result = unit_run.run(&|item| {
                    batches.lock().unwrap_or_else(|p| p.into_inner()).push(item);
                    true
                });
                let mut batches = batches.into_inner().unwrap_or_else(|p| p.into_inner());
                if let Err(e) = result {
                    batches.push(Err(e));
                }
                futures::stream::iter(batches)
            };
            return Ok(Box::pin(RecordBatchStreamAdapter::new(self.schema.clone(), futures::stream::once(read).flatten())));
        }
        // The unit starts reading when its stream is first polled, not here: a hash join
        // polls its probe side only once its build side is done, so the join's runtime
        // filter is complete before the first row is read (started here, a unit filled
        // its channel with rows no filter had seen yet — at small scales the whole unit).
        let start = async move {
            let tx = builder.tx();
            builder.spawn_blocking(move || {
                let _running = running;
                // A send fails only when the stream was dropped: nobody wants more rows.
                unit_run.run(&|item| tx.blocking_send(item).is_ok())
            });
            builder.build()
        };
        Ok(Box::pin(RecordBatchStreamAdapter::new(self.schema.clone(), futures::stream::once(start).flatten())))
    }

    fn metrics(&self) -> Option<MetricsSet> {
        Some(self.metrics.clone_inner())
    }

    fn statistics_from_inputs(&self, _input_stats: &[Arc<Statistics>], args: &StatisticsArgs) -> Result<Arc<Statistics>> {
        // Row counts are exact only when nothing is skipped: pruned partitions and row
        // groups skipped by min/max take rows away.
        // A filter in the scan takes rows away too.
        let exact = self.spec.partitions_pruned == 0 && self.spec.scan_filter.ranges.is_empty() && self.spec.row_filter.is_none() && self.spec.deleted.is_none();
        let stats = match args.partition() {
            Some(p) => match self.spec.units.get(p) {
                Some(u) => self.statistics_of(std::slice::from_ref(u), exact && u.row_count_exact),
                None => self.statistics_of(&[], true),
            },
            None => self.statistics_of(&self.spec.units, exact),
        };
        Ok(Arc::new(stats))
    }

    fn fetch(&self) -> Option<usize> {
        self.spec.limit
    }

    /// Takes the filters DataFusion's operators push down once the plan is final (the
    /// `Post` phase: hash join build sides, TopK) unless the session's
    /// `flashscan.runtime_filters` is off, applies them in the scan, and reports
    /// every filter as not pushed: the operators above keep doing their own filtering, so
    /// the scan applying them early is a saving, never a change of answers.
    fn handle_child_pushdown_result(
        &self,
        phase: FilterPushdownPhase,
        child_pushdown_result: ChildPushdownResult,
        config: &ConfigOptions,
    ) -> Result<FilterPushdownPropagation<Arc<dyn ExecutionPlan>>> {
        let filters: Vec<Arc<dyn PhysicalExpr>> = child_pushdown_result.parent_filters.into_iter().map(|f| f.filter).collect();
        let result = FilterPushdownPropagation::with_parent_pushdown_result(vec![PushedDown::No; filters.len()]);
        let new: Vec<Arc<dyn PhysicalExpr>> = filters
            .into_iter()
            .filter(|f| !self.runtime_filters.iter().any(|g| g.as_ref() == f.as_ref()))
            .collect();
        if phase != FilterPushdownPhase::Post || new.is_empty() || !FlashscanSettings::of(config).runtime_filters {
            return Ok(result);
        }
        let mut exec = FlashscanExec::new(self.spec.clone(), self.scan_log.clone())?;
        exec.runtime_filters = self.runtime_filters.iter().cloned().chain(new).collect();
        Ok(result.with_updated_node(Arc::new(exec)))
    }

    fn with_fetch(&self, limit: Option<usize>) -> Option<Arc<dyn ExecutionPlan>> {
        let mut spec = self.spec.clone();
        spec.limit = limit;
        let mut exec = FlashscanExec::new(spec, self.scan_log.clone()).ok()?;
        exec.runtime_filters = self.runtime_filters.clone();
        Some(Arc::new(exec) as Arc<dyn ExecutionPlan>)
    }
}

/// Pages a scan unit may have to be read on the caller's task when the query's context
/// carries [`ReadSmallUnitsInline`]: 1 MiB, a few hundred microseconds of decoding.
pub const INLINE_UNIT_PAGES_MAX: u64 = 128;

/// A `TaskContext` extension: the query runs on its caller's task (the server runs a key
/// lookup over a small table on the connection's task, `flashscan_server::query_runtime`),
/// so units of at most [`INLINE_UNIT_PAGES_MAX`] pages are read at the stream's first poll,
/// there, with pread, and not on a blocking thread that hands the batches back.
#[derive(Debug, Default, Clone, Copy)]
pub struct ReadSmallUnitsInline;

impl FlashscanExec {
    /// Pages the scan reads at most (all its units; deltas are not pages).
    pub fn page_count(&self) -> u64 {
        self.spec.units.iter().map(|u| u.page_count).sum()
    }

    /// Units (partitions of the scan).
    pub fn unit_count(&self) -> usize {
        self.spec.units.len()
    }
}

/// One unit of a scan, read and handed on batch by batch through `send`.
struct UnitRun {
    spec: ScanSpec,
    unit: ScanUnit,
    runtime_filters: Vec<Arc<dyn PhysicalExpr>>,
    filter_metrics: Option<RuntimeFilterMetrics>,
    output_rows: datafusion::physical_plan::metrics::Count,
    unit_metrics: UnitMetrics,
    scan_log: Arc<ScanLog>,
    statement: u64,
    batch_rows: usize,
}

impl UnitRun {
    /// Reads the unit; `send` takes each batch (or a runtime filter's error) and says false
    /// when nobody wants more.
    fn run(self, send: &(dyn Fn(Result<RecordBatch>) -> bool + Sync)) -> Result<()> {
        let UnitRun { spec, unit, runtime_filters, filter_metrics, output_rows, unit_metrics, scan_log, statement, batch_rows } = self;
        let rows_left = AtomicUsize::new(spec.limit.unwrap_or(usize::MAX));
        // Called on this thread only; a mutex makes the closure Sync (never contended).
        let runtime_filters = std::sync::Mutex::new(runtime_filters.into_iter().map(RuntimeFilter::new).collect::<Vec<_>>());
        let deliver = |batch: RecordBatch| -> Flow {
            let filtered = match runtime_filters.lock() {
                Ok(mut filters) => apply_runtime_filters(&mut filters, batch, filter_metrics.as_ref()),
                Err(_) => Err(datafusion::error::DataFusionError::Internal("runtime filter state poisoned".into())),
            };
            let batch = match filtered {
                Ok(b) => b,
                Err(e) => {
                    // The stream ends with the error; the scan stops.
                    let _ = send(Err(e));
                    return Flow::Stop;
                }
            };
            let mut offset = 0;
            while offset < batch.num_rows() {
                let left = rows_left.load(Ordering::Relaxed);
                let rows = (batch.num_rows() - offset).min(batch_rows).min(left);
                rows_left.store(left - rows, Ordering::Relaxed);
                output_rows.add(rows);
                if !send(Ok(batch.slice(offset, rows))) || left - rows == 0 {
                    return Flow::Stop;
                }
                offset += rows;
            }
            Flow::Continue
        };
        let slices = SliceOptions { batch_rows, row_filter: spec.row_filter.clone(), settings: spec.settings.clone(), deleted: spec.deleted.clone(), row_ids: spec.row_ids };
        let figures = read_unit(&spec.table, &spec.db_dir, &unit, &spec.projection, &spec.scan_filter, &slices, &spec.read_options, &deliver).map_err(exec_to_datafusion)?;
        unit_metrics.record(&figures);
        scan_log.record_unit(statement, &spec.table.name, &figures);
        Ok(())
    }
}

/// One running unit in `FlashscanExec::units_running`, until dropped (after the unit
/// recorded its figures, or failed, or its closure never ran).
struct UnitRunning(Arc<AtomicUsize>);

impl UnitRunning {
    fn start(count: &Arc<AtomicUsize>) -> UnitRunning {
        count.fetch_add(1, Ordering::AcqRel);
        UnitRunning(count.clone())
    }
}

impl Drop for UnitRunning {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}
