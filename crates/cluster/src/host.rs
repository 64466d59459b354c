//! A cluster host as its worker sees it: its database, its place, and the one function that
//! turns a [`ScanRequest`] into a scan of its own files — or refuses.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use datafusion::execution::TaskContext;
use flashscan_sql::exec_plan::{FlashscanExec, ScanSpec};
use flashscan_sql::metrics::ScanLog;
use flashscan_sql::scan_units::plan_units;
use flashscan_sql::{FlashscanSettings, ReadOptions};
use flashscan_storage::{Catalog, HostSlot, PartitionMeta};

use crate::error::ClusterError;
use crate::scan::{ClusterScanExec, ScanRequest};

#[derive(Debug)]
pub struct HostState {
    db_dir: PathBuf,
    slot: HostSlot,
    /// How this host names itself in errors: "host 1/2 (127.0.0.1:7001)".
    label: String,
    read_options: ReadOptions,
    /// Every scan this host ran, by table (bytes, pages, rows): the host's own totals.
    scan_log: Arc<ScanLog>,
    /// The `flashscan.*` switches this host's scans run with, from its environment.
    settings: FlashscanSettings,
}

impl HostState {
    /// Opens a cluster host's database (its catalog must carry a host place).
    pub fn open(db_dir: &Path, address: &str, read_options: ReadOptions) -> Result<HostState, ClusterError> {
        let catalog = Catalog::read(db_dir)?;
        let place = catalog.host.as_ref().ok_or_else(|| {
            ClusterError::InvalidArgument(format!("{} is not a cluster host: load it with `flashscan load DB --host I/N` (docs/cluster.md)", db_dir.display()))
        })?;
        let slot = place.slot();
        let settings = FlashscanSettings::from_env().map_err(|e| ClusterError::InvalidArgument(e.to_string()))?;
        Ok(HostState { db_dir: db_dir.to_path_buf(), slot, label: format!("host {slot} ({address})"), read_options, scan_log: ScanLog::new(), settings })
    }

    pub fn slot(&self) -> HostSlot {
        self.slot
    }

    pub fn label(&self) -> &str {
        &self.label
    }

    pub fn scan_log(&self) -> &Arc<ScanLog> {
        &self.scan_log
    }

    /// The scan `request` asks for, over this host's files. Refuses (one line naming this
    /// host, the table and the partition) a request for a partition it does not own, or
    /// one planned for another host or cluster shape. The catalog is read again for each
    /// task, so a reload between queries is seen (a reload during one is refused below).
    pub fn scan(&self, request: ScanRequest, ctx: &TaskContext) -> Result<ClusterScanExec, ClusterError> {
        let refuse = |reason: String| ClusterError::Refused(format!("{} refuses the scan of {}: {reason}", self.label, request.table));
        if request.host_count != self.slot.count || request.host.is_some_and(|h| h != self.slot.index) {
            let planned_for = request.host.map(|h| format!("host {h}/{}", request.host_count)).unwrap_or_else(|| format!("a cluster of {}", request.host_count));
            return Err(refuse(format!("the task was planned for {planned_for}: check cluster.json with `flashscan cluster check`")));
        }
        if let Some(&p) = request.partitions.iter().find(|&&p| !self.slot.owns(p)) {
            let owner = HostSlot::owner_of(p, self.slot.count);
            return Err(refuse(format!("partition {p} is not here (host {owner}/{} owns it)", self.slot.count)));
        }
        let catalog = Catalog::read(&self.db_dir)?;
        if catalog.host.as_ref().map(|h| h.slot()) != Some(self.slot) {
            return Err(refuse("the database is no longer this host (reloaded?): restart the worker".into()));
        }
        let table = catalog.tables.get(&request.table).ok_or_else(|| refuse("no such table here".into()))?;
        if request.partitions_total != table.partitions.len() {
            return Err(refuse(format!("the coordinator planned {} partitions, this host's table has {}", request.partitions_total, table.partitions.len())));
        }
        let columns = table.columns.len();
        if request.projection.iter().chain(request.ranges.iter().map(|r| &r.column)).any(|&c| c >= columns) {
            return Err(refuse(format!("a column number is past the table's {columns} columns")));
        }
        let share: Vec<&PartitionMeta> = table.partitions.iter().filter(|p| request.partitions.contains(&p.index)).collect();
        // Every partition asked for must be read here: one missing from this host's table
        // would silently shorten the answer.
        let asked: std::collections::BTreeSet<u32> = request.partitions.iter().copied().collect();
        if share.len() != asked.len() {
            let missing: Vec<u32> = asked.iter().copied().filter(|p| !share.iter().any(|m| m.index == *p)).collect();
            return Err(refuse(format!("partitions {missing:?} are not in this host's table: the catalog changed since the coordinator read it (reload cluster.json's catalogs)")));
        }
        let units = plan_units(&share, request.units_wanted);
        if units.len() > request.output_partitions {
            return Err(refuse(format!(
                "its partitions make {} scan units, the coordinator planned {}: the catalog changed since the coordinator read it (reload cluster.json's catalogs)",
                units.len(),
                request.output_partitions
            )));
        }
        // The filter the scan evaluates itself, on a column store only (as on one machine).
        let row_filter = match (&request.row_filter, table.is_column_store()) {
            (Some(f), true) => Some(f.decode(table, ctx, &self.settings).map_err(|e| refuse(format!("its filter does not decode: {e}")))?),
            (Some(_), false) => return Err(refuse("a scan filter was sent for a table that is not a column store here".into())),
            (None, _) => None,
        };
        let spec = ScanSpec {
            table: Arc::new(table.clone()),
            db_dir: Arc::new(self.db_dir.clone()),
            projection: request.projection.clone(),
            units,
            partitions_total: request.partitions_total,
            partitions_pruned: request.partitions_pruned,
            pruning_filters: request.pruning_filters.clone(),
            scan_filter: if table.is_column_store() { request.scan_filter() } else { flashscan_exec::ScanFilter::none() },
            row_filter,
            limit: request.limit,
            read_options: self.read_options,
            column_statistics: Arc::new(Vec::new()),
            // No statistics on a host: the coordinator planned the query.
            sampled_selectivity: None,
            settings: self.settings.clone(),
            // A cluster host takes no SQL writes: its tables have no deleted rows.
            deleted: None,
            row_ids: false,
        };
        let local = FlashscanExec::new(spec, self.scan_log.clone()).map_err(|e| refuse(flashscan_sql::SqlError::from(e).to_string()))?;
        Ok(ClusterScanExec::on_host(request, Arc::new(local), self.label.clone()))
    }
}

/// The partitions of `catalog`'s tables, for messages: "lineitem [1, 3]".
pub fn describe_share(catalog: &Catalog) -> String {
    let Some(place) = &catalog.host else { return String::new() };
    place.partitions.iter().map(|(t, p)| format!("{t} {p:?}")).collect::<Vec<_>>().join(", ")
}
