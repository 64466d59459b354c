//! A join's build side starts when the join first asks for it, not when the plan starts.
//!
//! DataFusion's `CoalescePartitionsExec` spawns a task per input partition in `execute`,
//! and every operator's `execute` runs when the plan starts (`RepartitionExec` executes
//! its inputs there too). So the build side of a `CollectLeft` hash join deep in a plan
//! (its input coalesced from the partitions of a scan) read its table at once, before the
//! joins above it had built theirs — and before their runtime filters, which the scan
//! applies (exec_plan/runtime_filter.rs), had any keys. TPC-H Q21 at SF 1, EXPLAIN ANALYZE:
//! the supplier scan under `supplier ⋈ lineitem` was meant to keep the ~400 suppliers of
//! the nation the join above builds on; it kept all 10,000 in 4 runs of 4 (one partition
//! in a fifth), so 1.53 M lineitem rows went into the orders join instead of ~60 K.
//!
//! Here each such coalesce is wrapped in `DeferredStartExec`, whose `execute` returns a
//! stream that executes its input on the first poll. A hash join polls its build side
//! first and its probe side only once the build side is done and its filter filled, and a
//! join above polls this join only then: so the build side's scan starts with the filters
//! of every join above it complete. Nothing waits on a filter, so nothing can wait forever
//! (a TopK's filter fills only as its own input runs).
//!
//! Runs last, after DataFusion's post-optimization filter pushdown (which must see the
//! coalesce itself) and before `SanityCheckPlan`. The wrapper reports its input's
//! properties and statistics unchanged. `SET flashscan.deferred_build = false` (or
//! `FLASHSCAN_SQL_DEFERRED_BUILD=0` for new sessions) keeps DataFusion's eager start.

use std::fmt;
use std::sync::Arc;

use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TransformedResult, TreeNode, TreeNodeRecursion};
use datafusion::common::{Result, Statistics};
use datafusion::execution::TaskContext;
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::coalesce_partitions::CoalescePartitionsExec;
use datafusion::physical_plan::joins::{CrossJoinExec, HashJoinExec, NestedLoopJoinExec, PartitionMode};
use datafusion::physical_plan::statistics::{ChildStats, StatisticsArgs};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::execution_plan::{CardinalityEffect, ChildrenPropertiesMode};
use datafusion::physical_plan::{DisplayAs, DisplayFormatType, ExecutionPlan, PlanProperties, ReplaceChildrenOptions, SendableRecordBatchStream};
use futures::{StreamExt, TryStreamExt};

/// Its input, executed at the first poll of its stream (see the module doc).
#[derive(Debug)]
pub struct DeferredStartExec {
    input: Arc<dyn ExecutionPlan>,
}

impl DeferredStartExec {
    pub fn new(input: Arc<dyn ExecutionPlan>) -> DeferredStartExec {
        DeferredStartExec { input }
    }

    pub fn input(&self) -> &Arc<dyn ExecutionPlan> {
        &self.input
    }
}

impl DisplayAs for DeferredStartExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "DeferredStartExec")
    }
}

impl ExecutionPlan for DeferredStartExec {
    fn name(&self) -> &'static str {
        "DeferredStartExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        self.input.properties()
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![&self.input]
    }

    fn apply_expressions(&self, _f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> Result<TreeNodeRecursion>) -> Result<TreeNodeRecursion> {
        Ok(TreeNodeRecursion::Continue)
    }

    fn replace_children(self: Arc<Self>, mut children: Vec<Arc<dyn ExecutionPlan>>, _options: ReplaceChildrenOptions) -> Result<Arc<dyn ExecutionPlan>> {
        match (children.pop(), children.is_empty()) {
            (Some(input), true) => Ok(Arc::new(DeferredStartExec { input })),
            _ => Err(datafusion::error::DataFusionError::Internal("DeferredStartExec takes one child".into())),
        }
    }

    #[allow(deprecated)]
    fn with_new_children(self: Arc<Self>, children: Vec<Arc<dyn ExecutionPlan>>) -> Result<Arc<dyn ExecutionPlan>> {
        self.replace_children(children, ReplaceChildrenOptions::new(ChildrenPropertiesMode::Recompute))
    }

    fn maintains_input_order(&self) -> Vec<bool> {
        vec![true]
    }

    fn cardinality_effect(&self) -> CardinalityEffect {
        CardinalityEffect::Equal
    }

    fn child_stats_requests(&self, partition: Option<usize>) -> Vec<ChildStats> {
        vec![ChildStats::At(partition)]
    }

    fn statistics_from_inputs(&self, input_stats: &[Arc<Statistics>], _args: &StatisticsArgs) -> Result<Arc<Statistics>> {
        Ok(input_stats.first().cloned().unwrap_or_else(|| Arc::new(Statistics::new_unknown(&self.schema()))))
    }

    fn execute(&self, partition: usize, context: Arc<TaskContext>) -> Result<SendableRecordBatchStream> {
        let input = self.input.clone();
        let started = futures::stream::once(async move { input.execute(partition, context) }).try_flatten();
        Ok(Box::pin(RecordBatchStreamAdapter::new(self.schema(), started.boxed())))
    }
}

/// See the module doc.
#[derive(Debug, Default)]
pub struct DeferBuildSides;

/// The build sides of `plan` (the input each join collects whole before it reads the other).
fn build_side_index(plan: &dyn ExecutionPlan) -> Option<usize> {
    if let Some(join) = plan.downcast_ref::<HashJoinExec>() {
        return (*join.partition_mode() == PartitionMode::CollectLeft).then_some(0);
    }
    if plan.downcast_ref::<NestedLoopJoinExec>().is_some() || plan.downcast_ref::<CrossJoinExec>().is_some() {
        return Some(0);
    }
    None
}

impl PhysicalOptimizerRule for DeferBuildSides {
    fn optimize(&self, plan: Arc<dyn ExecutionPlan>, config: &ConfigOptions) -> Result<Arc<dyn ExecutionPlan>> {
        if !crate::settings::FlashscanSettings::of(config).deferred_build {
            return Ok(plan);
        }
        plan.transform_up(|node| {
            let Some(at) = build_side_index(node.as_ref()) else { return Ok(Transformed::no(node)) };
            let mut children: Vec<Arc<dyn ExecutionPlan>> = node.children().into_iter().cloned().collect();
            let Some(build) = children.get(at) else { return Ok(Transformed::no(node)) };
            if build.downcast_ref::<CoalescePartitionsExec>().is_none() {
                return Ok(Transformed::no(node));
            }
            children[at] = Arc::new(DeferredStartExec::new(build.clone()));
            // The same properties: the join's dynamic filter (already pushed into scans)
            // and everything cached stay as they are.
            node.replace_children(children, ReplaceChildrenOptions::new(ChildrenPropertiesMode::Recompute)).map(Transformed::yes)
        })
        .data()
    }

    fn name(&self) -> &str {
        "flashscan_defer_build_sides"
    }

    fn schema_check(&self) -> bool {
        true
    }
}

/// `ctx` with `DeferBuildSides` just before `SanityCheckPlan` (the last rule).
pub fn register(ctx: datafusion::prelude::SessionContext) -> datafusion::prelude::SessionContext {
    crate::rule_order::with_physical_rule(ctx, Arc::new(DeferBuildSides), crate::rule_order::At::Before(&["SanityCheckPlan"]))
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use arrow::datatypes::{DataType, Field, Schema};
    use datafusion::common::{JoinType, NullEquality};
    use datafusion::physical_expr::expressions::Column;
    use datafusion::physical_expr::EquivalenceProperties;
    use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
    use datafusion::physical_plan::Partitioning;

    use super::*;

    /// A leaf of two partitions that counts the partitions executed (each an empty stream).
    #[derive(Debug)]
    struct Counted {
        executed: Arc<AtomicUsize>,
        properties: Arc<PlanProperties>,
    }

    impl Counted {
        fn leaf(name: &str, executed: &Arc<AtomicUsize>) -> Arc<dyn ExecutionPlan> {
            let schema = Arc::new(Schema::new(vec![Field::new(name, DataType::Int64, false)]));
            let properties = Arc::new(PlanProperties::new(EquivalenceProperties::new(schema), Partitioning::UnknownPartitioning(2), EmissionType::Incremental, Boundedness::Bounded));
            Arc::new(Counted { executed: executed.clone(), properties })
        }
    }

    impl DisplayAs for Counted {
        fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
            write!(f, "Counted")
        }
    }

    impl ExecutionPlan for Counted {
        fn name(&self) -> &'static str {
            "Counted"
        }

        crate::leaf_plan_methods!();

        fn execute(&self, _partition: usize, _context: Arc<TaskContext>) -> Result<SendableRecordBatchStream> {
            self.executed.fetch_add(1, Ordering::SeqCst);
            Ok(Box::pin(RecordBatchStreamAdapter::new(self.schema(), futures::stream::empty())))
        }
    }

    fn join(left: Arc<dyn ExecutionPlan>, right: Arc<dyn ExecutionPlan>, mode: PartitionMode) -> Arc<dyn ExecutionPlan> {
        let key = |plan: &Arc<dyn ExecutionPlan>| Arc::new(Column::new(plan.schema().field(0).name(), 0)) as Arc<dyn PhysicalExpr>;
        let on = vec![(key(&left), key(&right))];
        Arc::new(HashJoinExec::try_new(left, right, on, None, &JoinType::Inner, None, mode, NullEquality::NullEqualsNothing, false).unwrap_or_else(|e| panic!("{e}")))
    }

    fn optimized(plan: Arc<dyn ExecutionPlan>, deferred_build: bool) -> Arc<dyn ExecutionPlan> {
        let mut config = ConfigOptions::new();
        let mut settings = crate::settings::FlashscanSettings::default();
        settings.deferred_build = deferred_build;
        config.extensions.insert(settings);
        DeferBuildSides.optimize(plan, &config).unwrap_or_else(|e| panic!("{e}"))
    }

    fn shape(plan: &Arc<dyn ExecutionPlan>) -> String {
        datafusion::physical_plan::displayable(plan.as_ref()).indent(false).to_string().lines().map(|l| l.trim().split(':').next().unwrap_or("").to_string()).collect::<Vec<_>>().join(" / ")
    }

    #[tokio::test]
    async fn the_input_is_executed_at_the_first_poll_not_before() {
        let executed = Arc::new(AtomicUsize::new(0));
        let deferred = DeferredStartExec::new(Counted::leaf("a", &executed));
        let mut stream = deferred.execute(1, Arc::new(TaskContext::default())).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(executed.load(Ordering::SeqCst), 0, "executed when the plan started");
        assert!(stream.next().await.is_none());
        assert_eq!(executed.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn a_collect_left_build_side_gathered_from_partitions_is_deferred_once() {
        let executed = Arc::new(AtomicUsize::new(0));
        let build = Arc::new(CoalescePartitionsExec::new(Counted::leaf("b", &executed))) as Arc<dyn ExecutionPlan>;
        let plan = join(build.clone(), Counted::leaf("p", &executed), PartitionMode::CollectLeft);
        let once = optimized(plan.clone(), true);
        assert_eq!(shape(&once), "HashJoinExec / DeferredStartExec / CoalescePartitionsExec / Counted / Counted");
        assert_eq!(shape(&optimized(once, true)), "HashJoinExec / DeferredStartExec / CoalescePartitionsExec / Counted / Counted", "run twice, wrapped once");
        assert_eq!(shape(&optimized(plan, false)), "HashJoinExec / CoalescePartitionsExec / Counted / Counted", "off: DataFusion's plan");
        // Not a build side: a coalesce at the root, or on a join's probe side.
        let probe = join(Counted::leaf("b", &executed), build.clone(), PartitionMode::CollectLeft);
        assert_eq!(shape(&optimized(probe, true)), "HashJoinExec / Counted / CoalescePartitionsExec / Counted");
        assert_eq!(shape(&optimized(build, true)), "CoalescePartitionsExec / Counted");
        assert_eq!(executed.load(Ordering::SeqCst), 0, "planning executes nothing");
    }

    #[test]
    fn the_wrapper_keeps_its_input_s_properties_and_statistics() {
        let executed = Arc::new(AtomicUsize::new(0));
        let input = Arc::new(CoalescePartitionsExec::new(Counted::leaf("b", &executed))) as Arc<dyn ExecutionPlan>;
        let deferred = DeferredStartExec::new(input.clone());
        assert_eq!(deferred.schema(), input.schema());
        assert_eq!(deferred.properties().output_partitioning().partition_count(), 1);
        let stats = Arc::new(Statistics::new_unknown(&input.schema()).with_num_rows(datafusion::common::stats::Precision::Exact(7)));
        let args = StatisticsArgs::new();
        let got = deferred.statistics_from_inputs(&[stats.clone()], &args).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(got.num_rows, stats.num_rows);
    }
}
