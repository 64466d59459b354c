//! `flashscan sql --cluster cluster.json "QUERY"`: plans once over the hosts' merged
//! catalogs, runs each scan task on the host that owns its partitions
//! (datafusion-distributed), and returns the answer with per-task figures.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use datafusion::execution::SessionStateBuilder;
use datafusion::logical_expr::LogicalPlan;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::prelude::{SessionConfig, SessionContext};
use datafusion_distributed::{
    DesiredTaskCountEvent, DistributedExec, DistributedExt, DistributedMetricsFormat, RouteTasksEvent, ScaleUpLeafNodeEvent, SessionStateBuilderExt,
};
use flashscan_sql::metrics::{ScanLog, TableScanFigures};
use flashscan_sql::{FlashscanSettings, FlashscanTable, QueryOutput, ReadOptions, SqlError};

use crate::cluster_file::ClusterFile;
use crate::codec::ScanCodec;
use crate::error::ClusterError;
use crate::figures::{task_figures, TaskFigures};
use crate::network::{Channels, Topology};
use crate::planner::{contains_cluster_scan, desired_task_count, route, scale_up, GatherOnOneHost, ToClusterScans, SCAN_TASKS_MIN};

#[derive(Debug, Clone, Copy, Default)]
pub struct ClusterOptions {
    /// Execution partitions per scan and operator, on the coordinator and every host.
    pub target_partitions: Option<usize>,
}

/// One statement's answer on the cluster.
#[derive(Debug, Clone)]
pub struct ClusterOutput {
    /// The answer, with per-table scan figures summed over the hosts.
    pub output: QueryOutput,
    /// What each scan task read, on which host.
    pub tasks: Vec<TaskFigures>,
    /// `EXPLAIN ANALYZE`: the distributed plan with per-task metrics.
    pub explain: Option<String>,
}

pub struct ClusterSession {
    /// Plans with datafusion-distributed's planner.
    ctx: SessionContext,
    /// The same, plus `GatherOnOneHost`: for plans the planner leaves on one machine.
    gather: SessionContext,
    topology: Topology,
    path: PathBuf,
}

impl ClusterSession {
    /// Reads cluster.json, checks it and every host's catalog, and registers each table as
    /// the whole cluster holds it.
    pub fn open(path: &Path, options: ClusterOptions) -> Result<ClusterSession, ClusterError> {
        let file = ClusterFile::read(path)?;
        let tables = file.merged_tables(path)?;
        let topology = Topology::of(&file)?;
        // The coordinator reads no data file; the first host's catalog directory stands in
        // for the database directory the planner's table objects want.
        let plan_dir = file.hosts.first().and_then(|h| h.database.clone()).unwrap_or_default();
        // The coordinator's `flashscan.*` switches, from its environment as a session's are.
        let settings = FlashscanSettings::from_env().map_err(|e| ClusterError::InvalidArgument(e.to_string()))?;
        let ctx = context(&topology, options, &settings, false)?;
        let gather = context(&topology, options, &settings, true)?;
        let scan_log = ScanLog::new();
        for (name, table) in tables {
            let provider = Arc::new(FlashscanTable::new(table, plan_dir.clone(), ReadOptions::default(), scan_log.clone(), &settings));
            ctx.register_table(name.to_lowercase().as_str(), provider.clone())?;
            gather.register_table(name.to_lowercase().as_str(), provider)?;
        }
        Ok(ClusterSession { ctx, gather, topology, path: path.to_path_buf() })
    }

    pub fn topology(&self) -> &Topology {
        &self.topology
    }

    /// Runs each statement of `sql` in order (queries and EXPLAIN only: hosts are loaded
    /// with `flashscan load --host`, not written through the coordinator).
    pub async fn run(&self, sql: &str) -> Result<Vec<ClusterOutput>, ClusterError> {
        let statements = datafusion::sql::parser::DFParser::parse_sql(sql).map_err(|e| ClusterError::Sql(SqlError::from(datafusion::error::DataFusionError::from(e))))?;
        if statements.is_empty() {
            return Err(ClusterError::Sql(SqlError::Syntax("no statement to run".into())));
        }
        let mut outputs = Vec::new();
        for statement in statements {
            outputs.push(self.run_one(&statement.to_string()).await?);
        }
        Ok(outputs)
    }

    /// The plan `sql` runs as (after the fallback to one host), for EXPLAIN-like tools and tests.
    pub async fn physical_plan(&self, sql: &str) -> Result<Arc<dyn ExecutionPlan>, ClusterError> {
        let state = self.ctx.state();
        let logical = state.create_logical_plan(sql).await?;
        let plan = state.create_physical_plan(&logical).await?;
        if !plan.is::<DistributedExec>() && contains_cluster_scan(&plan)? {
            return Ok(self.gather.state().create_physical_plan(&logical).await?);
        }
        Ok(plan)
    }

    pub async fn run_one(&self, sql: &str) -> Result<ClusterOutput, ClusterError> {
        let trimmed = sql.trim_start();
        let analyze = trimmed.get(..15).is_some_and(|head| head.eq_ignore_ascii_case("EXPLAIN ANALYZE"));
        let query = match trimmed.get(15..) {
            Some(rest) if analyze => rest.trim_start(),
            _ => sql,
        };
        let started = Instant::now();
        let state = self.ctx.state();
        let logical = state.create_logical_plan(query).await?;
        if matches!(logical, LogicalPlan::Dml(_) | LogicalPlan::Ddl(_) | LogicalPlan::Copy(_)) {
            return Err(ClusterError::InvalidArgument(format!(
                "{}: a cluster runs queries only; load each host with `flashscan load DB --host I/N`",
                self.path.display()
            )));
        }
        let mut plan = state.create_physical_plan(&logical).await?;
        if !plan.is::<DistributedExec>() && contains_cluster_scan(&plan)? {
            // Every stage got one task (say a key pruned to one host): run it all there.
            plan = self.gather.state().create_physical_plan(&logical).await?;
        }
        let schema = plan.schema();
        let result = datafusion::physical_plan::collect(plan.clone(), self.ctx.task_ctx()).await;
        let batches = match result {
            Ok(b) => b,
            Err(e) => return Err(self.name_the_host(e).await),
        };
        let elapsed_s = started.elapsed().as_secs_f64();
        let tasks = task_figures(&plan, &self.topology).await?;
        let explain = if analyze { Some(datafusion_distributed::explain_analyze(plan.clone(), DistributedMetricsFormat::PerTask).await?) } else { None };
        let mut scans: BTreeMap<String, TableScanFigures> = BTreeMap::new();
        for t in &tasks {
            let s = scans.entry(t.table.clone()).or_default();
            s.figures.bytes_read += t.bytes_read;
            s.figures.pages_read += t.pages_read;
            s.figures.rows_scanned += t.rows_scanned;
            s.units_read += t.units;
        }
        let output = QueryOutput { statement: sql.to_string(), schema, batches, elapsed_s, scans, warnings: Vec::new() };
        Ok(ClusterOutput { output, tasks, explain })
    }

    /// A failed query's error, plus the hosts that no longer answer (a host that died
    /// mid-query leaves a transport error that does not say which host it was).
    async fn name_the_host(&self, e: datafusion::error::DataFusionError) -> ClusterError {
        let error = SqlError::from(e);
        let mut down = self.topology.unreachable_hosts().await;
        // A host dying mid-query can break the query's stream before its listening socket
        // is closed: a transport error with every host still accepting connections is
        // probed again, a few times, before it is reported without a host.
        let transport = error.to_string().contains("transport error");
        for _ in 0..crate::network::PROBE_RETRIES {
            if !down.is_empty() || !transport {
                break;
            }
            tokio::time::sleep(crate::network::PROBE_RETRY_AFTER).await;
            down = self.topology.unreachable_hosts().await;
        }
        if down.is_empty() {
            return ClusterError::Sql(error);
        }
        let text = error.to_string();
        if down.iter().all(|h| text.contains(h.as_str())) {
            return ClusterError::HostDown(text);
        }
        ClusterError::HostDown(format!("{text}; {} not answering", down.join(" and ")))
    }
}

fn context(topology: &Topology, options: ClusterOptions, settings: &FlashscanSettings, gather: bool) -> Result<SessionContext, ClusterError> {
    let mut config = SessionConfig::new().with_information_schema(true).with_option_extension(settings.clone());
    if let Some(n) = options.target_partitions {
        if n == 0 {
            return Err(ClusterError::InvalidArgument("target partitions must be at least 1".into()));
        }
        config = config.with_target_partitions(n);
    }
    let mut builder = SessionStateBuilder::new().with_config(config).with_default_features().with_physical_optimizer_rule(Arc::new(ToClusterScans));
    if gather {
        builder = builder.with_physical_optimizer_rule(Arc::new(GatherOnOneHost));
    }
    let (t1, t2, t3) = (topology.clone(), topology.clone(), topology.clone());
    let state = builder
        .with_distributed_worker_resolver(topology.clone())
        .with_distributed_channel_resolver(Channels::new(topology.clone()))
        .with_distributed_planner()
        .with_distributed_user_codec(ScanCodec::coordinator())
        .with_distributed_desired_task_count_handler(move |ev: DesiredTaskCountEvent<'_>| desired_task_count(&t1, ev))
        .with_distributed_scale_up_leaf_node_handler(move |ev: ScaleUpLeafNodeEvent<'_>| scale_up(&t2, ev))
        .with_distributed_route_tasks_handler(move |ev: RouteTasksEvent<'_>| route(&t3, ev))
        .with_distributed_metrics_collection(true)?
        // At least `SCAN_TASKS_MIN` tasks per stage even on a one-host cluster (the default
        // cap is the number of hosts): see planner.rs.
        .with_distributed_max_tasks_per_stage(topology.urls.len().max(SCAN_TASKS_MIN))?
        .build();
    Ok(SessionContext::from(state))
}

pub fn plan_is_distributed(plan: &Arc<dyn ExecutionPlan>) -> bool {
    plan.is::<DistributedExec>()
}
