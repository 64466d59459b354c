//! What each scan task read, on which host: from the metrics datafusion-distributed brings
//! back from the workers. A host labels its scan's metrics with the table, its host number
//! and its partitions (`ClusterScanExec::metrics`), so the figures say where they come
//! from wherever the library attaches them in the plan.

use std::collections::BTreeMap;
use std::sync::Arc;

use datafusion::common::tree_node::{TreeNode, TreeNodeRecursion};
use datafusion::physical_plan::metrics::{Label, Metric, MetricsSet};
use datafusion::physical_plan::ExecutionPlan;
use datafusion_distributed::DistributedMetricsFormat;

use crate::error::ClusterError;
use crate::network::Topology;

pub const LABEL_SCAN: &str = "flashscan_scan";
pub const LABEL_TABLE: &str = "flashscan_table";
pub const LABEL_HOST: &str = "flashscan_host";
pub const LABEL_PARTITIONS: &str = "flashscan_partitions";

/// One scan task's figures.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TaskFigures {
    /// Which scan of the query (a table scanned twice has two).
    pub scan: u64,
    pub table: String,
    pub host: u32,
    pub address: String,
    pub partitions: String,
    /// Execution partitions (units) of the task that read something.
    pub units: u64,
    pub bytes_read: u64,
    pub pages_read: u64,
    pub rows_scanned: u64,
    /// Rows the scan handed on (after a limit).
    pub rows_output: u64,
}

/// `metrics` with the labels that say where they were measured.
pub fn labelled(metrics: &MetricsSet, scan: u64, table: &str, host: u32, host_count: u32, partitions: &[u32]) -> MetricsSet {
    let partitions = partitions.iter().map(|p| p.to_string()).collect::<Vec<_>>().join(",");
    let mut out = MetricsSet::new();
    for m in metrics.iter() {
        let mut labels = m.labels().to_vec();
        labels.push(Label::new(LABEL_SCAN, scan.to_string()));
        labels.push(Label::new(LABEL_TABLE, table.to_string()));
        labels.push(Label::new(LABEL_HOST, format!("{host}/{host_count}")));
        labels.push(Label::new(LABEL_PARTITIONS, partitions.clone()));
        let mut metric = Metric::new_with_labels(m.value().clone(), m.partition(), labels).with_type(m.metric_type());
        if let Some(category) = m.metric_category() {
            metric = metric.with_category(category);
        }
        out.push(Arc::new(metric));
    }
    out
}

/// Per task (table, host, partitions), the scan figures of an executed plan.
pub async fn task_figures(plan: &Arc<dyn ExecutionPlan>, topology: &Topology) -> Result<Vec<TaskFigures>, ClusterError> {
    let with_metrics = datafusion_distributed::rewrite_distributed_plan_with_metrics(plan.clone(), DistributedMetricsFormat::Aggregated).await?;
    // (table, host, partitions) -> (metric name, execution partition) -> value. Keyed, not
    // summed, while walking: a node may be reached through a metrics wrapper and itself.
    let mut seen: BTreeMap<(String, String, String, String), BTreeMap<(String, usize), usize>> = BTreeMap::new();
    with_metrics.apply(|node| {
        if let Some(metrics) = node.metrics() {
            for m in metrics.iter() {
                let label = |name: &str| m.labels().iter().find(|l| l.name() == name).map(|l| l.value().to_string());
                let (Some(scan), Some(table), Some(host), Some(partitions)) = (label(LABEL_SCAN), label(LABEL_TABLE), label(LABEL_HOST), label(LABEL_PARTITIONS)) else { continue };
                let entry = seen.entry((scan, table, host, partitions)).or_default();
                entry.insert((m.value().name().to_string(), m.partition().unwrap_or(0)), m.value().as_usize());
            }
        }
        Ok(TreeNodeRecursion::Continue)
    })?;
    let mut tasks = Vec::new();
    for ((scan, table, host, partitions), values) in seen {
        let sum = |name: &str| values.iter().filter(|((n, _), _)| n == name).map(|(_, v)| *v as u64).sum::<u64>();
        let host_index: u32 = host.split('/').next().and_then(|h| h.parse().ok()).unwrap_or(u32::MAX);
        let address = topology.addresses.get(host_index as usize).cloned().unwrap_or_default();
        let units = values.iter().filter(|((n, _), v)| n == "bytes_read" && **v > 0).count() as u64;
        tasks.push(TaskFigures {
            scan: scan.parse().unwrap_or(0),
            table,
            host: host_index,
            address,
            partitions,
            units,
            bytes_read: sum("bytes_read"),
            pages_read: sum("pages_read"),
            rows_scanned: sum("rows_scanned"),
            rows_output: sum("output_rows"),
        });
    }
    Ok(tasks)
}

/// The per-task figures as a text table (EXPLAIN ANALYZE).
pub fn render_tasks(tasks: &[TaskFigures]) -> String {
    let mut t = comfy_table::Table::new();
    t.load_preset(comfy_table::presets::ASCII_MARKDOWN);
    t.set_header(["table", "host", "address", "partitions", "rows scanned", "rows out", "pages", "bytes read"]);
    for f in tasks {
        t.add_row([
            f.table.clone(),
            f.host.to_string(),
            f.address.clone(),
            f.partitions.clone(),
            f.rows_scanned.to_string(),
            f.rows_output.to_string(),
            f.pages_read.to_string(),
            f.bytes_read.to_string(),
        ]);
    }
    format!("{t}\n")
}
