//! Where flashscan plugs into datafusion-distributed's planner (its event hooks):
//!
//! 1. `ToClusterScans` (a physical optimizer rule, last): every `FlashscanExec` DataFusion
//!    planned over the merged catalog becomes a `ClusterScanExec`, which never reads on the
//!    coordinator.
//! 2. Desired task count: a scan wants one task per host that holds a partition it reads.
//! 3. Scale up: the scan becomes a `DistributedLeafExec` with one variant per task, each
//!    naming its host and partitions (`ClusterScanExec::host_variants`).
//! 4. Route: each task of a stage with cluster scans goes to the host its variants name.
//! 5. `GatherOnOneHost`: when the distributed planner still leaves a plan undistributed
//!    (every stage capped at one task), each scan goes behind a network boundary of its
//!    own, so it still runs on the host that has the data.

use std::sync::Arc;

use datafusion::common::tree_node::{Transformed, TransformedResult, TreeNode, TreeNodeRecursion};
use datafusion::common::Result;
use datafusion::config::ConfigOptions;
use datafusion::error::DataFusionError;
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::{ChildrenPropertiesMode, ExecutionPlan, ReplaceChildrenOptions};
use datafusion_distributed::{
    DesiredTaskCountEvent, DesiredTaskCountEventResponse, DistributedLeafExec, NetworkBoundaryExt, NetworkCoalesceExec, RouteTasksEvent,
    RouteTasksEventResponse, ScaleUpLeafNodeEvent, ScaleUpLeafNodeEventResponse,
};
use flashscan_sql::exec_plan::FlashscanExec;

use crate::network::Topology;
use crate::scan::ClusterScanExec;

/// Rule 1: `FlashscanExec` -> `ClusterScanExec`.
#[derive(Debug, Default)]
pub struct ToClusterScans;

impl PhysicalOptimizerRule for ToClusterScans {
    fn optimize(&self, plan: Arc<dyn ExecutionPlan>, _config: &ConfigOptions) -> Result<Arc<dyn ExecutionPlan>> {
        plan.transform_up(|node| {
            let Some(scan) = node.downcast_ref::<FlashscanExec>() else { return Ok(Transformed::no(node)) };
            let planned = FlashscanExec::new(scan.spec().clone(), flashscan_sql::metrics::ScanLog::new())?;
            Ok(Transformed::yes(Arc::new(ClusterScanExec::planned(Arc::new(planned))) as Arc<dyn ExecutionPlan>))
        })
        .data()
    }

    fn name(&self) -> &str {
        "flashscan_to_cluster_scans"
    }

    fn schema_check(&self) -> bool {
        true
    }
}

/// Tasks a scan stage gets at least. datafusion-distributed removes a network boundary
/// whose producer and consumer both have one task (`prepare_network_boundaries`), which
/// would leave a scan of one host (`key = constant`, or any scan on a one-host cluster) in
/// the coordinator's stage, where it cannot read. With two, the boundary stays; the second
/// task reads nothing and is routed to the same host (`route`), so no other host is touched.
pub const SCAN_TASKS_MIN: usize = 2;

/// Rule 5, for plans the distributed planner still leaves on one machine (a stage capped
/// at one task, say a join that cannot broadcast): each scan, with the filters and
/// projections right above it, goes behind its own network boundary of `SCAN_TASKS_MIN`
/// tasks, so it runs on the host that owns its partitions; the rest of the plan runs on
/// the coordinator over what the hosts send.
#[derive(Debug, Default)]
pub struct GatherOnOneHost;

impl PhysicalOptimizerRule for GatherOnOneHost {
    fn optimize(&self, plan: Arc<dyn ExecutionPlan>, config: &ConfigOptions) -> Result<Arc<dyn ExecutionPlan>> {
        if !contains_cluster_scan(&plan)? {
            return Ok(plan);
        }
        // This rule runs after DataFusion enforced distribution and ordering, and a network
        // boundary changes its input's partitioning and drops its ordering: a parent that
        // needed either makes the query fail here, never answer wrongly.
        let gathered = gather_scans(plan)?;
        datafusion::physical_optimizer::sanity_checker::SanityCheckPlan::new().optimize(gathered, config)
    }

    fn name(&self) -> &str {
        "flashscan_gather_on_one_host"
    }

    fn schema_check(&self) -> bool {
        true
    }
}

/// Operators that turn each input row into at most one output row on their own: they run
/// on the host with the scan (an empty task's empty input gives an empty output).
fn is_row_local(plan: &Arc<dyn ExecutionPlan>) -> bool {
    matches!(plan.name(), "FilterExec" | "ProjectionExec" | "CoalesceBatchesExec")
}

fn is_scan_chain(plan: &Arc<dyn ExecutionPlan>) -> bool {
    if plan.downcast_ref::<ClusterScanExec>().is_some() {
        return true;
    }
    let children = plan.children();
    is_row_local(plan) && children.len() == 1 && is_scan_chain(children[0])
}

fn gather_scans(plan: Arc<dyn ExecutionPlan>) -> Result<Arc<dyn ExecutionPlan>> {
    if is_scan_chain(&plan) {
        return Ok(Arc::new(NetworkCoalesceExec::try_new(plan, SCAN_TASKS_MIN, 1)?));
    }
    let children: Vec<Arc<dyn ExecutionPlan>> = plan.children().into_iter().cloned().collect();
    if children.is_empty() {
        return Ok(plan);
    }
    let gathered = children.into_iter().map(gather_scans).collect::<Result<Vec<_>>>()?;
    plan.replace_children(gathered, ReplaceChildrenOptions::new(ChildrenPropertiesMode::Recompute))
}

pub fn contains_cluster_scan(plan: &Arc<dyn ExecutionPlan>) -> Result<bool> {
    plan.exists(|n| Ok(n.downcast_ref::<ClusterScanExec>().is_some()))
}

/// Hook 2: one task per host the scan reads from (at least one).
pub fn desired_task_count(topology: &Topology, ev: DesiredTaskCountEvent<'_>) -> Option<Result<DesiredTaskCountEventResponse>> {
    let scan = ev.plan.downcast_ref::<ClusterScanExec>()?;
    let hosts = scan.hosts_involved(topology.host_count()).len().max(SCAN_TASKS_MIN);
    Some(Ok(DesiredTaskCountEventResponse::desired(hosts)))
}

/// Hook 3: one variant per task, each on one host.
pub fn scale_up(topology: &Topology, ev: ScaleUpLeafNodeEvent<'_>) -> Option<Result<ScaleUpLeafNodeEventResponse>> {
    let scan = ev.plan.downcast_ref::<ClusterScanExec>()?;
    let units_wanted = ev.session_config.target_partitions();
    Some(scan.host_variants(topology.host_count(), ev.task_count, units_wanted).and_then(|variants| {
        DistributedLeafExec::try_new(Arc::clone(ev.plan), variants).map(|leaf| ScaleUpLeafNodeEventResponse::new(Arc::new(leaf)))
    }))
}

/// Hook 4: the URL of each task of a stage whose leaves are cluster scans. Stages without
/// one are left to the library's routing (`None`).
pub fn route(topology: &Topology, ev: RouteTasksEvent<'_>) -> Option<Result<RouteTasksEventResponse>> {
    let mut hosts: Vec<Option<u32>> = vec![None; ev.task_count];
    let mut found = false;
    let mut conflict: Option<String> = None;
    let walked = ev.plan.apply(|node| {
        // The stage ends at a network boundary: what lies below runs in other stages.
        if node.as_ref().is_network_boundary() {
            return Ok(TreeNodeRecursion::Jump);
        }
        let Some(leaf) = node.downcast_ref::<DistributedLeafExec>() else { return Ok(TreeNodeRecursion::Continue) };
        if leaf.original().downcast_ref::<ClusterScanExec>().is_none() {
            return Ok(TreeNodeRecursion::Continue);
        }
        found = true;
        for (task, variant) in leaf.variants().iter().enumerate() {
            let Some(host) = variant.downcast_ref::<ClusterScanExec>().and_then(|v| v.host()) else { continue };
            match hosts.get_mut(task) {
                Some(slot @ None) => *slot = Some(host),
                Some(Some(other)) if *other != host => conflict = Some(format!("task {task} would read host {other} and host {host}")),
                _ => {}
            }
        }
        Ok(TreeNodeRecursion::Continue)
    });
    if let Err(e) = walked {
        return Some(Err(e));
    }
    if !found {
        return None;
    }
    if let Some(c) = conflict {
        return Some(Err(DataFusionError::Plan(format!("a stage joins scans of different hosts ({c}): this query shape is not supported on a cluster yet"))));
    }
    // Tasks that read nothing go round robin over the hosts that have work in this stage
    // (no other host is touched: `key = constant` stays on its host), or over all hosts
    // when none has.
    let count = topology.urls.len();
    let mut working: Vec<u32> = hosts.iter().flatten().copied().collect();
    working.sort_unstable();
    working.dedup();
    if working.is_empty() {
        working = (0..count as u32).collect();
    }
    let mut next_free = 0usize;
    let urls = hosts
        .iter()
        .map(|h| {
            let host = match h {
                Some(h) => *h,
                None => {
                    next_free += 1;
                    working[(next_free - 1) % working.len()]
                }
            };
            topology.urls[host as usize % count].clone()
        })
        .collect();
    Some(Ok(RouteTasksEventResponse::new(urls)))
}
