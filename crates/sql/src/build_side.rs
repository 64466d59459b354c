//! Which input a partitioned hash join builds its table on: the one with fewer estimated
//! rows, as DuckDB picks its build side by cardinality, where DataFusion's `JoinSelection`
//! compares byte sizes first.
//!
//! DataFusion's byte sizes of a join's output come from a projection above it: estimated
//! rows × the Arrow width of every column, 16 bytes per decimal. A scan reports its
//! columns' Arrow size. So TPC-H Q9 at SF 10 weighed part ⋈ lineitem ⋈ supplier (3.26 M
//! rows estimated, and 3.26 M in fact) at 260 MB against partsupp's 8 M rows at 256 MB, and
//! built its hash table on partsupp's 8 M rows; and its orders join built on all 15 M
//! orders (180 MB) against the lineitem side's 13 M estimated rows (1 GB; 3.26 M in fact).
//! A hash table's cost is per row it holds (a hash, an insert into chains that no longer fit
//! a cache), and the probe side of a flashscan scan is cut by the join's runtime filter
//! before it is repartitioned and probed (exec_plan.rs): the side with fewer rows is the
//! one to build on. Bytes still rule where they differ a lot (`BUILD_BYTES_RATIO_MAX`):
//! the build side is held in memory whole.
//!
//! Only a build side that reads a table is turned round (`reads_a_table`).
//!
//! Runs right after `JoinSelection` (before distribution is enforced and before the joins'
//! dynamic filters are made), on the joins it left partitioned (a `CollectLeft` join was
//! chosen because its build side is small; a null-aware anti join cannot swap).
//! `SET flashscan.build_on_fewer_rows = false` (or `FLASHSCAN_SQL_BUILD_ON_FEWER_ROWS=0` for
//! new sessions) keeps DataFusion's choice (for timing the two side by side; same answers).

use std::sync::Arc;

use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TransformedResult, TreeNode};
use datafusion::common::Result;
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::joins::{HashJoinExec, PartitionMode};
use datafusion::physical_plan::projection::ProjectionExec;
use datafusion::physical_plan::statistics::{StatisticsArgs, StatisticsContext};
use datafusion::physical_plan::ExecutionPlan;

/// A partitioned hash join is turned round to build on its input with fewer rows only
/// while that input's estimated bytes are at most this many times the other's: a build
/// side is concatenated and held in memory whole, so rows decide between inputs of about
/// one size, bytes between very different ones. 8: Q9's orders join (the lineitem side at
/// 5.8× orders' bytes, from a row estimate 4× too high) still builds on the fewer rows; a
/// few wide rows against many narrow ones (strings, comments) keeps DataFusion's choice.
pub const BUILD_BYTES_RATIO_MAX: f64 = 8.0;

/// See the module doc.
#[derive(Debug, Default)]
pub struct BuildOnFewerRows;

impl PhysicalOptimizerRule for BuildOnFewerRows {
    fn optimize(&self, plan: Arc<dyn ExecutionPlan>, config: &ConfigOptions) -> Result<Arc<dyn ExecutionPlan>> {
        if !crate::settings::FlashscanSettings::of(config).build_on_fewer_rows || !config.optimizer.join_reordering {
            return Ok(plan);
        }
        plan.transform_up(|node| {
            let Some(join) = node.downcast_ref::<HashJoinExec>() else { return Ok(Transformed::no(node)) };
            if *join.partition_mode() != PartitionMode::Partitioned || !join.join_type().supports_swap() || join.null_aware {
                return Ok(Transformed::no(node));
            }
            if !builds_on_more_rows(join.left().as_ref(), join.right().as_ref())? {
                return Ok(Transformed::no(node));
            }
            Ok(Transformed::yes(join.swap_inputs(PartitionMode::Partitioned)?))
        })
        .data()
    }

    fn name(&self) -> &str {
        "flashscan_build_on_fewer_rows"
    }

    fn schema_check(&self) -> bool {
        true
    }
}

/// Whether a join building on `build` and probing `probe` should swap them: `build` reads
/// a table (`reads_a_table`), has more estimated rows than `probe` (both known), and
/// `probe` is not more than `BUILD_BYTES_RATIO_MAX` times `build`'s bytes (when both are
/// known).
fn builds_on_more_rows(build: &dyn ExecutionPlan, probe: &dyn ExecutionPlan) -> Result<bool> {
    if !reads_a_table(build) {
        return Ok(false);
    }
    // As `JoinSelection` computes them (its statistics registry is off by default).
    let statistics = StatisticsContext::new();
    let (b, p) = (statistics.compute(build, &StatisticsArgs::new())?, statistics.compute(probe, &StatisticsArgs::new())?);
    let (Some(&build_rows), Some(&probe_rows)) = (b.num_rows.get_value(), p.num_rows.get_value()) else { return Ok(false) };
    if build_rows <= probe_rows {
        return Ok(false);
    }
    Ok(match (b.total_byte_size.get_value(), p.total_byte_size.get_value()) {
        (Some(&build_bytes), Some(&probe_bytes)) => probe_bytes as f64 <= BUILD_BYTES_RATIO_MAX * build_bytes as f64,
        _ => true,
    })
}

/// `plan` is a table's scan (a leaf), under projections only. Only such a build side is
/// turned round: its rows are the table's (exact, or estimated from its own filter), and
/// as the probe side the scan applies the join's runtime filter before its rows are
/// repartitioned and probed, which is where the swap pays. A build side computed by other
/// operators keeps DataFusion's choice: its estimate can be far off (TPC-H Q15's
/// `total_revenue = (SELECT max(...))` keeps one row, estimated at a fifth of the
/// aggregate's), and a scan on the probe side is what its runtime filter cuts.
fn reads_a_table(plan: &dyn ExecutionPlan) -> bool {
    if let Some(projection) = plan.downcast_ref::<ProjectionExec>() {
        return reads_a_table(projection.input().as_ref());
    }
    plan.children().is_empty()
}

/// `ctx` with the rule right after DataFusion's `JoinSelection`.
pub fn register(ctx: datafusion::prelude::SessionContext) -> datafusion::prelude::SessionContext {
    crate::rule_order::with_physical_rule(ctx, Arc::new(BuildOnFewerRows), crate::rule_order::At::After("join_selection"))
}

#[cfg(test)]
mod tests {
    use arrow::datatypes::{DataType, Field, Schema};
    use datafusion::common::stats::Precision;
    use datafusion::common::{JoinType, NullEquality, Statistics};
    use datafusion::execution::TaskContext;
    use datafusion::physical_expr::expressions::Column;
    use datafusion::physical_expr::{EquivalenceProperties, PhysicalExpr};
    use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
    use datafusion::physical_plan::filter::FilterExec;
    use datafusion::physical_plan::{DisplayAs, DisplayFormatType, Partitioning, PlanProperties, SendableRecordBatchStream};

    use super::*;

    /// A leaf that reports given statistics (nothing is executed here).
    #[derive(Debug)]
    struct Sized {
        name: &'static str,
        statistics: Statistics,
        properties: Arc<PlanProperties>,
    }

    impl Sized {
        fn leaf(name: &'static str, rows: usize, bytes: Option<usize>) -> Arc<dyn ExecutionPlan> {
            let schema = Arc::new(Schema::new(vec![Field::new(format!("{name}_key"), DataType::Int64, false)]));
            let mut statistics = Statistics::new_unknown(&schema).with_num_rows(Precision::Inexact(rows));
            if let Some(b) = bytes {
                statistics = statistics.with_total_byte_size(Precision::Inexact(b));
            }
            let properties = Arc::new(PlanProperties::new(
                EquivalenceProperties::new(schema.clone()),
                Partitioning::UnknownPartitioning(2),
                EmissionType::Incremental,
                Boundedness::Bounded,
            ));
            Arc::new(Sized { name, statistics, properties })
        }
    }

    impl DisplayAs for Sized {
        fn fmt_as(&self, _t: DisplayFormatType, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            write!(f, "{}", self.name)
        }
    }

    impl ExecutionPlan for Sized {
        fn name(&self) -> &'static str {
            "Sized"
        }

        crate::leaf_plan_methods!();

        fn execute(&self, _partition: usize, _context: Arc<TaskContext>) -> Result<SendableRecordBatchStream> {
            Err(datafusion::error::DataFusionError::Internal("not executed in this test".into()))
        }

        fn statistics_from_inputs(&self, _input_stats: &[Arc<Statistics>], _args: &StatisticsArgs) -> Result<Arc<Statistics>> {
            Ok(Arc::new(self.statistics.clone()))
        }
    }

    fn join(left: Arc<dyn ExecutionPlan>, right: Arc<dyn ExecutionPlan>, mode: PartitionMode) -> Arc<dyn ExecutionPlan> {
        let key = |plan: &Arc<dyn ExecutionPlan>| Arc::new(Column::new(plan.schema().field(0).name(), 0)) as Arc<dyn PhysicalExpr>;
        let on = vec![(key(&left), key(&right))];
        Arc::new(HashJoinExec::try_new(left, right, on, None, &JoinType::Inner, None, mode, NullEquality::NullEqualsNothing, false).unwrap_or_else(|e| panic!("{e}")))
    }

    /// What the outermost hash join builds on, as EXPLAIN shows it.
    fn build_side(plan: &Arc<dyn ExecutionPlan>) -> String {
        let mut found = None;
        let _ = plan.apply(|node| {
            if let (Some(j), None) = (node.downcast_ref::<HashJoinExec>(), &found) {
                found = Some(datafusion::physical_plan::displayable(j.left().as_ref()).one_line().to_string().trim().to_string());
            }
            Ok(datafusion::common::tree_node::TreeNodeRecursion::Continue)
        });
        found.unwrap_or_default()
    }

    fn optimized(plan: Arc<dyn ExecutionPlan>) -> Arc<dyn ExecutionPlan> {
        BuildOnFewerRows.optimize(plan, &ConfigOptions::default()).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn a_partitioned_join_builds_on_the_input_with_fewer_rows() {
        // Q9's partsupp join: 8 M rows of 256 MB against 3.26 M rows of 260 MB.
        let plan = optimized(join(Sized::leaf("partsupp", 8_000_000, Some(256 << 20)), Sized::leaf("lineitem_side", 3_260_000, Some(260 << 20)), PartitionMode::Partitioned));
        assert_eq!(build_side(&plan), "lineitem_side");
        // The output keeps the join's column order (a projection restores it).
        assert_eq!(plan.schema().field(0).name(), "partsupp_key");
        // Already on the fewer rows, or rows unknown: unchanged.
        let plan = optimized(join(Sized::leaf("small", 1_000, Some(1 << 30)), Sized::leaf("big", 2_000, Some(1 << 10)), PartitionMode::Partitioned));
        assert_eq!(build_side(&plan), "small");
    }

    #[test]
    fn bytes_rule_where_they_differ_a_lot_and_collect_left_is_kept() {
        // Fewer rows but more than BUILD_BYTES_RATIO_MAX times the bytes: DataFusion's choice.
        let wide = (BUILD_BYTES_RATIO_MAX as usize + 1) << 20;
        let plan = optimized(join(Sized::leaf("narrow", 2_000_000, Some(1 << 20)), Sized::leaf("wide", 1_000_000, Some(wide)), PartitionMode::Partitioned));
        assert_eq!(build_side(&plan), "narrow");
        // A build side computed by other operators (here a filter) keeps DataFusion's choice.
        let always = Arc::new(datafusion::physical_expr::expressions::Literal::new(datafusion::common::ScalarValue::Boolean(Some(true))));
        let computed: Arc<dyn ExecutionPlan> = Arc::new(FilterExec::try_new(always, Sized::leaf("filtered", 3_000_000, Some(1 << 20))).unwrap_or_else(|e| panic!("{e}")));
        let statistics = StatisticsContext::new().compute(computed.as_ref(), &StatisticsArgs::new()).unwrap_or_else(|e| panic!("{e}"));
        assert!(statistics.num_rows.get_value().is_some_and(|&rows| rows > 1_000), "{statistics:?}");
        let plan = optimized(join(computed, Sized::leaf("fewer", 1_000, Some(1 << 20)), PartitionMode::Partitioned));
        assert!(build_side(&plan).starts_with("FilterExec"), "{}", build_side(&plan));
        // A broadcast (CollectLeft) join was chosen for its small build side: kept.
        let plan = optimized(join(Sized::leaf("broadcast", 200_000, Some(1 << 19)), Sized::leaf("probe", 100_000, Some(1 << 19)), PartitionMode::CollectLeft));
        assert_eq!(build_side(&plan), "broadcast");
    }
}
