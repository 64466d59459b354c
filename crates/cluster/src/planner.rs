//! Where flashscan plugs into datafusion-distributed's planner (its event hooks):
//!
//! 1. `ToClusterScans` (a physical optimizer rule, last): every `FlashscanExec` DataFusion
//!    planned over the merged catalog becomes a `ClusterScanExec`, which never reads on the
//!    coordinator.
//! 2. Desired task count: a scan wants one task per host that holds a partition it reads.
//! 3. Scale up: the scan becomes a `DistributedLeafExec` with one variant per task, each
//!    naming its host and partitions (`ClusterScanExec::host_variants`).
//! 4. Route: each task of a stage with cluster scans goes to the host its variants name.
//! 5. `GatherOnOneHost`: when the distributed planner leaves a plan undistributed (one
//!    task in every stage, e.g. `key = constant` pruned to one host), the whole query is
//!    put behind one network boundary, so it still runs on the host that has the data.

use std::sync::Arc;

use datafusion::common::tree_node::{Transformed, TransformedResult, TreeNode, TreeNodeRecursion};
use datafusion::common::Result;
use datafusion::config::ConfigOptions;
use datafusion::error::DataFusionError;
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::coalesce_partitions::CoalescePartitionsExec;
use datafusion::physical_plan::ExecutionPlan;
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

/// Rule 5: the whole plan on one host, behind one network boundary.
#[derive(Debug, Default)]
pub struct GatherOnOneHost;

impl PhysicalOptimizerRule for GatherOnOneHost {
    fn optimize(&self, plan: Arc<dyn ExecutionPlan>, _config: &ConfigOptions) -> Result<Arc<dyn ExecutionPlan>> {
        if !contains_cluster_scan(&plan)? {
            return Ok(plan);
        }
        let single: Arc<dyn ExecutionPlan> =
            if plan.properties().partitioning.partition_count() > 1 { Arc::new(CoalescePartitionsExec::new(plan)) } else { plan };
        Ok(Arc::new(NetworkCoalesceExec::try_new(single, 1, 1)?))
    }

    fn name(&self) -> &str {
        "flashscan_gather_on_one_host"
    }

    fn schema_check(&self) -> bool {
        true
    }
}

pub fn contains_cluster_scan(plan: &Arc<dyn ExecutionPlan>) -> Result<bool> {
    plan.exists(|n| Ok(n.downcast_ref::<ClusterScanExec>().is_some()))
}

/// Hook 2: one task per host the scan reads from (at least one).
pub fn desired_task_count(topology: &Topology, ev: DesiredTaskCountEvent<'_>) -> Option<Result<DesiredTaskCountEventResponse>> {
    let scan = ev.plan.downcast_ref::<ClusterScanExec>()?;
    let hosts = scan.hosts_involved(topology.host_count()).len().max(1);
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
    // Tasks that read nothing go round robin, starting after the hosts that have work.
    let count = topology.urls.len();
    let mut next_free = 0usize;
    let urls = hosts
        .iter()
        .map(|h| match h {
            Some(h) => topology.urls[*h as usize % count].clone(),
            None => {
                next_free += 1;
                topology.urls[(next_free - 1) % count].clone()
            }
        })
        .collect();
    Some(Ok(RouteTasksEventResponse::new(urls)))
}
