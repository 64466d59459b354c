//! The cluster's scan node: flashscan's scan (`FlashscanExec`) as it travels between the
//! coordinator and the hosts.
//!
//! On the coordinator a `ClusterScanExec` stands where DataFusion planned a
//! `FlashscanExec` (the `planned` scan, kept for its statistics and display); it never reads.
//! The distributed planner asks for one variant per task, each naming one host and the
//! partitions of that host the scan reads (`host_variants`). A variant travels as a
//! [`ScanRequest`] (codec.rs): table name, projection, column ranges, limit and partition
//! numbers — never a file path. The host rebuilds the scan from its own catalog (host.rs)
//! and keeps it in `local`, the only field that reads.

use std::collections::BTreeSet;
use std::fmt;
use std::sync::Arc;

use arrow::datatypes::SchemaRef;
use datafusion::common::{Result, Statistics};
use datafusion::execution::TaskContext;
use datafusion::physical_expr::EquivalenceProperties;
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::metrics::MetricsSet;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, Partitioning, PlanProperties, SendableRecordBatchStream, StatisticsArgs,
};
use flashscan_sql::exec_plan::FlashscanExec;
use flashscan_sql::scan_units::plan_units;
use datafusion_proto::physical_plan::DefaultPhysicalExtensionCodec;
use flashscan_sql::reader::{RowConjunct, RowFilter};
use flashscan_storage::{HostSlot, PartitionMeta, TableMeta};
use serde::{Deserialize, Serialize};

/// How long a host waits for its stopped units to record their figures before it ships a
/// task's metrics: a stopped unit finishes decoding at most one batch (milliseconds); past
/// this the figures go as they are (a stuck read is not the metrics' problem to solve).
pub const UNIT_FIGURES_WAIT_MAX: std::time::Duration = std::time::Duration::from_secs(5);
const UNIT_FIGURES_POLL: std::time::Duration = std::time::Duration::from_millis(1);

/// What travels from the coordinator to a host for one scan task (JSON in the plan's
/// extension bytes). No path: the host finds the partitions' pages in its own catalog.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScanRequest {
    /// Which scan of the query (a table may be scanned several times): shared by the
    /// scan's tasks, so figures of one scan add up and two scans stay apart.
    pub scan: u64,
    pub table: String,
    /// The host this task must run on (`None`: a task with nothing to read, any host).
    pub host: Option<u32>,
    /// Hosts in the cluster, so a host of another cluster shape refuses.
    pub host_count: u32,
    /// The partitions this task reads, by partition number.
    pub partitions: Vec<u32>,
    /// Indexes into the table's columns, in output order.
    pub projection: Vec<usize>,
    /// Column ranges a column store uses to skip row groups (min/max).
    pub ranges: Vec<RangeRequest>,
    /// The query's filters a column store scan evaluates itself (DataFusion was told they
    /// are exact and runs no filter above the scan, so they must travel with it).
    #[serde(default)]
    pub row_filter: Option<RowFilterRequest>,
    /// Filters the coordinator pruned partitions with (for EXPLAIN).
    pub pruning_filters: Vec<String>,
    /// Rows per execution partition, at most.
    pub limit: Option<usize>,
    pub partitions_total: usize,
    pub partitions_pruned: usize,
    /// The execution partitions the coordinator wanted per scan (its target partitions):
    /// the host cuts its partitions into units the same way.
    pub units_wanted: usize,
    /// Execution partitions of this task's scan: the most any host's share needs, so
    /// every task of the stage has the same count (the units a host has fewer of are empty).
    pub output_partitions: usize,
}

/// A scan's own filter as it travels: the table columns it reads and each conjunct's
/// inputs (positions in `columns`) with its predicate in DataFusion's protobuf form
/// (datafusion-proto: the well-kept encoding of physical expressions the distributed plan
/// itself uses).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RowFilterRequest {
    pub columns: Vec<usize>,
    pub conjuncts: Vec<ConjunctRequest>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConjunctRequest {
    pub inputs: Vec<usize>,
    pub predicate_proto: Vec<u8>,
}

impl RowFilterRequest {
    pub fn of(filter: &RowFilter) -> Result<RowFilterRequest> {
        let conjuncts = filter
            .conjuncts
            .iter()
            .map(|c| {
                let node = datafusion_proto::physical_plan::to_proto::serialize_physical_expr(&c.predicate, &DefaultPhysicalExtensionCodec {})?;
                Ok(ConjunctRequest { inputs: c.inputs.clone(), predicate_proto: prost::Message::encode_to_vec(&node) })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(RowFilterRequest { columns: filter.columns.clone(), conjuncts })
    }

    /// The filter again, against `table`'s columns as SQL sees them (the schema the
    /// coordinator built each conjunct against); functions are found in `ctx`; evaluated as
    /// the host's `settings` say.
    pub fn decode(&self, table: &TableMeta, ctx: &TaskContext, settings: &flashscan_sql::FlashscanSettings) -> Result<RowFilter> {
        let schema = flashscan_sql::reader::sql_schema(table, settings);
        let conjuncts = self
            .conjuncts
            .iter()
            .map(|c| {
                let own: Vec<usize> = c
                    .inputs
                    .iter()
                    .map(|&i| {
                        self.columns
                            .get(i)
                            .copied()
                            .ok_or_else(|| datafusion::error::DataFusionError::Plan(format!("a scan filter names input {i} of its {} columns", self.columns.len())))
                    })
                    .collect::<Result<_>>()?;
                let own_schema = schema.project(&own)?;
                let node: datafusion_proto::protobuf::PhysicalExprNode = prost::Message::decode(c.predicate_proto.as_slice())
                    .map_err(|e| datafusion::error::DataFusionError::Plan(format!("a scan filter does not decode: {e}")))?;
                let predicate = datafusion_proto::physical_plan::from_proto::parse_physical_expr(&node, ctx, &own_schema, &DefaultPhysicalExtensionCodec {})?;
                Ok(RowConjunct { inputs: c.inputs.clone(), predicate })
            })
            .collect::<Result<Vec<_>>>()?;
        // The columns themselves must be the table's (a bad number is refused here).
        schema.project(&self.columns)?;
        Ok(RowFilter { columns: self.columns.clone(), conjuncts, piecewise_like: settings.piecewise_like })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RangeRequest {
    pub column: usize,
    pub min: Option<i64>,
    pub max: Option<i64>,
}

impl ScanRequest {
    pub fn scan_filter(&self) -> flashscan_exec::ScanFilter {
        flashscan_exec::ScanFilter { ranges: self.ranges.iter().map(|r| flashscan_exec::source::ColumnRange { column: r.column, min: r.min, max: r.max }).collect() }
    }
}

#[derive(Debug)]
pub struct ClusterScanExec {
    /// Set on every variant; `None` on the coordinator's whole-table node.
    request: Option<ScanRequest>,
    /// The coordinator's scan of the whole table (merged catalog): statistics, variants.
    planned: Option<Arc<FlashscanExec>>,
    /// On a host: the scan of its own partitions, read from its own files.
    local: Option<Arc<FlashscanExec>>,
    /// Where the node stands, for messages ("host 1/2 (127.0.0.1:7001)").
    place: String,
    schema: SchemaRef,
    properties: Arc<PlanProperties>,
}

fn properties_of(schema: &SchemaRef, partitions: usize) -> Arc<PlanProperties> {
    Arc::new(PlanProperties::new(
        EquivalenceProperties::new(schema.clone()),
        Partitioning::UnknownPartitioning(partitions.max(1)),
        EmissionType::Incremental,
        Boundedness::Bounded,
    ))
}

impl ClusterScanExec {
    /// The coordinator's node for a scan DataFusion planned over the merged catalog.
    pub fn planned(scan: Arc<FlashscanExec>) -> ClusterScanExec {
        ClusterScanExec { request: None, schema: scan.schema(), properties: scan.properties().clone(), planned: Some(scan), local: None, place: "the coordinator".into() }
    }

    /// A task's variant: `request` with the schema the planned scan produces.
    pub fn variant(request: ScanRequest, schema: SchemaRef) -> ClusterScanExec {
        let properties = properties_of(&schema, request.output_partitions);
        ClusterScanExec { request: Some(request), planned: None, local: None, place: "the coordinator".into(), schema, properties }
    }

    /// On a host: the variant with the host's own scan behind it.
    pub fn on_host(request: ScanRequest, local: Arc<FlashscanExec>, place: String) -> ClusterScanExec {
        let schema = local.schema();
        let properties = properties_of(&schema, request.output_partitions);
        ClusterScanExec { request: Some(request), planned: None, local: Some(local), place, schema, properties }
    }

    pub fn request(&self) -> Option<&ScanRequest> {
        self.request.as_ref()
    }

    /// The host a variant must run on.
    pub fn host(&self) -> Option<u32> {
        self.request.as_ref().and_then(|r| r.host)
    }

    pub fn local(&self) -> Option<&Arc<FlashscanExec>> {
        self.local.as_ref()
    }

    /// Partitions the planned scan reads (the ones pruning kept that hold pages).
    fn kept_partitions(&self) -> BTreeSet<u32> {
        self.planned.as_ref().map(|p| p.spec().units.iter().map(|u| u.partition_index).collect()).unwrap_or_default()
    }

    /// The hosts that hold a partition this scan reads.
    pub fn hosts_involved(&self, host_count: u32) -> BTreeSet<u32> {
        self.kept_partitions().into_iter().map(|p| HostSlot::owner_of(p, host_count)).collect()
    }

    /// One variant per task: task `i` reads the partitions of one host and runs there
    /// (route.rs sends it). With at least as many tasks as hosts, task `i` is host `i`
    /// (every scan of a stage agrees on which task is which host); with fewer tasks, the
    /// hosts involved take the first tasks. Tasks left over read nothing.
    pub fn host_variants(&self, host_count: u32, task_count: usize, units_wanted: usize) -> Result<Vec<Arc<dyn ExecutionPlan>>> {
        let Some(planned) = &self.planned else {
            return datafusion::common::internal_err!("a cluster scan variant was asked for variants");
        };
        let spec = planned.spec();
        let kept = self.kept_partitions();
        let involved: Vec<u32> = self.hosts_involved(host_count).into_iter().collect();
        if involved.len() > task_count {
            return datafusion::common::plan_err!(
                "table {} lives on {} hosts but the distributed plan gave its stage {task_count} task(s): this query shape is not supported on a cluster yet",
                spec.table.name,
                involved.len()
            );
        }
        let task_hosts: Vec<Option<u32>> = if task_count >= host_count as usize {
            (0..task_count).map(|i| (i < host_count as usize && involved.contains(&(i as u32))).then_some(i as u32)).collect()
        } else {
            (0..task_count).map(|i| involved.get(i).copied()).collect()
        };
        let share = |host: u32| -> Vec<&PartitionMeta> { spec.table.partitions.iter().filter(|p| kept.contains(&p.index) && HostSlot::owner_of(p.index, host_count) == host).collect() };
        let output_partitions = task_hosts.iter().flatten().map(|&h| plan_units(&share(h), units_wanted).len()).max().unwrap_or(1).max(1);
        let row_filter = spec.row_filter.as_ref().map(RowFilterRequest::of).transpose()?;
        static NEXT_SCAN: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        let scan = NEXT_SCAN.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let variants = task_hosts
            .iter()
            .map(|host| {
                let partitions: Vec<u32> = host.map(|h| share(h).iter().map(|p| p.index).collect()).unwrap_or_default();
                let request = ScanRequest {
                    scan,
                    table: spec.table.name.clone(),
                    host: *host,
                    host_count,
                    partitions,
                    projection: spec.projection.clone(),
                    ranges: spec.scan_filter.ranges.iter().map(|r| RangeRequest { column: r.column, min: r.min, max: r.max }).collect(),
                    row_filter: row_filter.clone(),
                    pruning_filters: spec.pruning_filters.clone(),
                    limit: spec.limit,
                    partitions_total: spec.partitions_total,
                    partitions_pruned: spec.partitions_pruned,
                    units_wanted,
                    output_partitions,
                };
                Arc::new(ClusterScanExec::variant(request, self.schema.clone())) as Arc<dyn ExecutionPlan>
            })
            .collect();
        Ok(variants)
    }
}

impl DisplayAs for ClusterScanExec {
    fn fmt_as(&self, t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        match (&self.request, &self.planned) {
            (Some(r), _) => {
                let host = r.host.map(|h| format!("{h}/{}", r.host_count)).unwrap_or_else(|| "none".into());
                write!(f, "ClusterScanExec: table={}, host={host}, partitions={:?}", r.table, r.partitions)?;
                if let Some(local) = &self.local {
                    write!(f, " <- ")?;
                    local.fmt_as(t, f)?;
                }
                Ok(())
            }
            (None, Some(planned)) => {
                write!(f, "ClusterScanExec: ")?;
                planned.fmt_as(t, f)
            }
            (None, None) => write!(f, "ClusterScanExec"),
        }
    }
}

impl ExecutionPlan for ClusterScanExec {
    fn name(&self) -> &'static str {
        "ClusterScanExec"
    }

    flashscan_sql::leaf_plan_methods!();

    fn execute(&self, partition: usize, context: Arc<TaskContext>) -> Result<SendableRecordBatchStream> {
        let Some(local) = &self.local else {
            // The coordinator holds no data: a scan here would be a planning bug, never
            // a silent read of whatever files sit beside the coordinator's catalogs.
            return datafusion::common::internal_err!("a cluster scan reached {} instead of the host that owns its partitions", self.place);
        };
        if partition < local.properties().partitioning.partition_count() && !local.spec().units.is_empty() {
            return local.execute(partition, context);
        }
        // A share with fewer units than the stage's tasks have partitions: nothing to read.
        Ok(Box::pin(RecordBatchStreamAdapter::new(self.schema.clone(), futures::stream::empty())))
    }

    fn metrics(&self) -> Option<MetricsSet> {
        let local = self.local.as_ref()?;
        // The worker ships a task's metrics once its streams ended or were dropped; a unit
        // whose stream was dropped early still reads to its next batch and records its
        // figures after that. Wait for them (bounded), so a task's figures are complete.
        // `metrics` is synchronous and the worker calls it on a runtime thread: the wait tells
        // a multi-thread runtime so that thread's other tasks move elsewhere meanwhile.
        let wait = || {
            let started = std::time::Instant::now();
            while local.units_running() > 0 && started.elapsed() < UNIT_FIGURES_WAIT_MAX {
                std::thread::sleep(UNIT_FIGURES_POLL);
            }
        };
        if local.units_running() > 0 {
            match tokio::runtime::Handle::try_current() {
                Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => tokio::task::block_in_place(wait),
                _ => wait(),
            }
        }
        let metrics = local.metrics()?;
        let r = self.request.as_ref()?;
        Some(crate::figures::labelled(&metrics, r.scan, &r.table, r.host.unwrap_or(u32::MAX), r.host_count, &r.partitions))
    }

    fn statistics_from_inputs(&self, input_stats: &[Arc<Statistics>], args: &StatisticsArgs) -> Result<Arc<Statistics>> {
        match (&self.planned, &self.local) {
            (Some(p), _) => p.statistics_from_inputs(input_stats, args),
            (None, Some(l)) if args.partition().is_none_or(|p| p < l.properties().partitioning.partition_count()) => l.statistics_from_inputs(input_stats, args),
            _ => Ok(Arc::new(Statistics::new_unknown(&self.schema))),
        }
    }
}
