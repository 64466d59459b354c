//! A flashscan table as DataFusion sees it: its schema, what it can push down, its
//! statistics, and a scan node over its partitions.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;

use arrow::array::Array;
use arrow::datatypes::SchemaRef;
use async_trait::async_trait;
use datafusion::catalog::{Session, TableProvider};
use datafusion::common::stats::Precision;
use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::common::{ColumnStatistics, Result, ScalarValue, Statistics};
use datafusion::logical_expr::{Expr, TableProviderFilterPushDown, TableType};
use datafusion::datasource::memory::MemorySourceConfig;
use datafusion::datasource::sink::DataSinkExec;
use datafusion::logical_expr::dml::InsertOp;
use datafusion::physical_plan::union::UnionExec;
use datafusion::physical_plan::ExecutionPlan;
use flashscan_storage::{PartitionMeta, TableMeta};
use flashscan_write::{ReadSnapshot, SnapshotTable, WritePath};

use crate::exec_plan::{FlashscanExec, ScanSpec};
use crate::metrics::ScanLog;
use crate::pruning::{predicates_of, scan_filter_of, ColumnPredicate, ColumnRange};
use crate::reader::{sql_schema, ReadOptions, RowConjunct, RowFilter};
use crate::settings::FlashscanSettings;
use crate::scan_units::plan_units;

/// Per partition, per column: the range of values, when the format recorded one.
pub type PartitionRanges = Vec<Vec<Option<ColumnRange>>>;

/// The column a table provider made `with_row_ids` adds after the table's own: each row's
/// id (`flashscan_write::RowId`), what UPDATE and DELETE read to name the rows they change.
/// Not a column of the table: `SELECT *` never shows it (the table's own provider has no
/// such column), and a table column may not take the name.
pub const ROW_ID_COLUMN: &str = flashscan_exec::columnstore_source::ROW_ID_FIELD;

pub fn row_id_field() -> arrow::datatypes::Field {
    arrow::datatypes::Field::new(ROW_ID_COLUMN, arrow::datatypes::DataType::UInt64, false)
}

#[derive(Debug)]
pub struct FlashscanTable {
    table: Arc<TableMeta>,
    db_dir: Arc<PathBuf>,
    schema: SchemaRef,
    read_options: ReadOptions,
    scan_log: Arc<ScanLog>,
    /// Indexed like `table.partitions`; empty when the format keeps no ranges (the heap).
    partition_ranges: PartitionRanges,
    /// The column rows were hashed on to pick their partition: `key = constant` and
    /// `key IN (...)` name the only partitions that can hold matching rows.
    partition_key: Option<usize>,
    /// Per column over the whole table (min, max, nulls) for the planner; unknown unless
    /// the format records them (the column store).
    column_statistics: Arc<Vec<ColumnStatistics>>,
    /// Where INSERT goes, and the snapshots scans read committed rows by (pages, and the
    /// rows still only in the delta); `None` for a cluster coordinator's tables.
    write: Option<Arc<WritePath>>,
    /// The registering session's settings: `slices` and `views` shape the schema and the
    /// filters the scan takes over (answered before any scan is planned), so they are the
    /// table's, not the query's; a session that changes them registers its tables again.
    table_settings: FlashscanSettings,
    /// The schema ends with `ROW_ID_COLUMN` (`with_row_ids`).
    row_ids: bool,
    /// Column DEFAULTs, planned (`column_defaults.rs`): DataFusion's INSERT planner fills
    /// the columns an INSERT leaves out with them.
    defaults: Arc<std::collections::HashMap<String, Expr>>,
}

/// What one scan reads (`FlashscanTable::scan_request`).
struct ScanRequest {
    table: Arc<TableMeta>,
    delta: Option<SnapshotTable>,
    /// Table columns, the row id not among them.
    projection: Vec<usize>,
    /// The row id column is asked for (after the projection's columns).
    row_ids: bool,
    predicates: Vec<ColumnPredicate>,
    /// Positions of the filters `predicates` came from.
    usable_filters: Vec<usize>,
}

impl FlashscanTable {
    pub fn new(table: TableMeta, db_dir: PathBuf, read_options: ReadOptions, scan_log: Arc<ScanLog>, settings: &FlashscanSettings) -> FlashscanTable {
        let schema = sql_schema(&table, settings);
        let partition_key = table.column_index(&table.partition_by).ok();
        FlashscanTable {
            partition_key,
            table: Arc::new(table),
            db_dir: Arc::new(db_dir),
            schema,
            read_options,
            scan_log,
            partition_ranges: Vec::new(),
            column_statistics: Arc::new(Vec::new()),
            write: None,
            table_settings: settings.clone(),
            row_ids: false,
            defaults: Arc::default(),
        }
    }

    /// The same table with `ROW_ID_COLUMN` after its columns: what UPDATE and DELETE scan.
    pub fn with_row_ids(&self) -> FlashscanTable {
        let mut fields: Vec<_> = self.schema.fields().iter().cloned().collect();
        fields.push(Arc::new(row_id_field()));
        FlashscanTable {
            table: self.table.clone(),
            db_dir: self.db_dir.clone(),
            schema: Arc::new(arrow::datatypes::Schema::new(fields)),
            read_options: self.read_options,
            scan_log: self.scan_log.clone(),
            partition_ranges: self.partition_ranges.clone(),
            partition_key: self.partition_key,
            column_statistics: self.column_statistics.clone(),
            write: self.write.clone(),
            table_settings: self.table_settings.clone(),
            row_ids: true,
            defaults: self.defaults.clone(),
        }
    }

    /// The table's column DEFAULTs, planned.
    pub fn with_defaults(mut self, defaults: Arc<std::collections::HashMap<String, Expr>>) -> FlashscanTable {
        self.defaults = defaults;
        self
    }

    /// The write path INSERT goes to and scans read snapshots of.
    pub fn with_write(mut self, write: Arc<WritePath>) -> FlashscanTable {
        self.write = Some(write);
        self
    }

    /// The table as a statement's snapshot sees it: its pages, and the rows still only in
    /// its delta that the snapshot sees. The statement's snapshot comes with the session
    /// state (`flashscan sql` and the server attach one per statement, so every table of a
    /// statement is read as of one moment); without one, a snapshot of now. A checkpoint
    /// moves delta rows into pages and starts a fresh delta, so a provider never keeps the
    /// pair it was registered with. Column store tables take no writes and are not in a
    /// snapshot: their registered meta is the committed one.
    fn view(&self, state: Option<&dyn Session>) -> (Arc<TableMeta>, Option<SnapshotTable>) {
        let attached = state.and_then(|s| s.config().get_extension::<ReadSnapshot>());
        let snapshot = attached.or_else(|| self.write.as_ref().and_then(|w| w.read_snapshot().ok()).map(Arc::new));
        match snapshot.as_ref().and_then(|s| s.table(&self.table.name)) {
            Some(t) => (t.table().clone(), Some(t.clone())),
            None => (self.table.clone(), None),
        }
    }

    /// What a scan of `projection` under `filters` reads, from the statement's snapshot.
    fn scan_request(&self, state: &dyn Session, projection: Option<&Vec<usize>>, filters: &[Expr]) -> Result<ScanRequest> {
        let (table, delta) = self.view(Some(state));
        let mut projection: Vec<usize> = match projection {
            Some(p) => p.clone(),
            None => (0..self.schema.fields().len()).collect(),
        };
        // The row id is the last column of the schema; DataFusion asks for columns in
        // schema order, so it comes last in the projection too.
        let row_ids = self.row_ids && projection.last() == Some(&table.columns.len());
        if row_ids {
            projection.pop();
        }
        if projection.iter().any(|&c| c >= table.columns.len()) {
            return Err(datafusion::error::DataFusionError::Internal(format!("table {}: the row id column must be the last one scanned", table.name)));
        }
        let mut predicates = Vec::new();
        let mut usable_filters = Vec::new();
        for (i, f) in filters.iter().enumerate() {
            if let Some(p) = self.usable_predicates(f) {
                predicates.extend(p);
                usable_filters.push(i);
            }
        }
        Ok(ScanRequest { table, delta, projection, row_ids, predicates, usable_filters })
    }

    /// The scan as an index lookup when `filters` let one of the table's SQL indexes
    /// answer it (the first step of `scan`), else `None`: what a point statement planned
    /// without DataFusion's optimizers reads (point_plan.rs).
    pub async fn index_scan(&self, state: &dyn Session, filters: &[Expr]) -> Result<Option<Arc<dyn ExecutionPlan>>> {
        let ScanRequest { table, delta, projection, row_ids, predicates, .. } = self.scan_request(state, None, filters)?;
        self.index_lookup(state, &table, delta.as_ref(), &predicates, &projection, row_ids).await
    }

    /// The rows one of the table's SQL indexes finds for `predicates` under the
    /// statement's snapshot (index_scan.rs), as a plan; `None` when no index fits, or the
    /// index does not cover the snapshot (the scan reads the table then). An index not
    /// built yet is built first (once per process: a scan of its key columns).
    async fn index_lookup(
        &self,
        state: &dyn Session,
        table: &TableMeta,
        snapshot: Option<&SnapshotTable>,
        predicates: &[ColumnPredicate],
        projection: &[usize],
        row_ids: bool,
    ) -> Result<Option<Arc<dyn ExecutionPlan>>> {
        let (Some(snapshot), Some(write)) = (snapshot, self.write.as_ref()) else { return Ok(None) };
        if predicates.is_empty() || table.is_column_store() || !self.scan_settings(state).index_lookups {
            return Ok(None);
        }
        let names: Vec<String> = table.columns.iter().map(|c| c.name.clone()).collect();
        let indexes = snapshot.indexes();
        let Some(choice) = crate::index_scan::choose(&indexes, predicates, &names) else { return Ok(None) };
        if !choice.index.is_built() {
            build_indexes(write, &table.name)?;
        }
        let ids_max = match choice.lookup {
            flashscan_write::key_index::KeyLookup::Range { .. } => crate::index_scan::range_rows_max(table.row_count + self.delta_rows()),
            flashscan_write::key_index::KeyLookup::Keys { .. } => usize::MAX,
        };
        let found = snapshot.rows_by_index(&choice.index, &choice.lookup, ids_max, projection, &self.db_dir).map_err(|e| datafusion::error::DataFusionError::External(Box::new(e)))?;
        let Some((batch, ids)) = found else { return Ok(None) };
        self.lookup_plan(table, &choice, batch, ids, projection, row_ids).map(Some)
    }

    /// `ORDER BY c [ASC|DESC] [NULLS FIRST|LAST] LIMIT n` through an index that starts with
    /// `c` (index_order.rs): keys in that order, a chunk at a time, the rows of each under
    /// the snapshot, until `n` rows (all of the last key's) are found. `None` when it cannot
    /// (the scan then reads the table): no such index, the transaction's own rows in the
    /// table, a column store, or more than `ORDERED_KEYS_MAX` keys looked at (rows of many
    /// keys deleted since the index last shed them).
    async fn ordered_lookup(
        &self,
        state: &dyn Session,
        table: &TableMeta,
        snapshot: Option<&SnapshotTable>,
        order: &crate::index_order::IndexOrder,
        predicates: &[ColumnPredicate],
        projection: &[usize],
        row_ids: bool,
    ) -> Result<Option<Arc<dyn ExecutionPlan>>> {
        use flashscan_write::key_index::{prefix_successor, Key, KeyLookup};
        use std::ops::Bound;
        /// Keys an ordered lookup looks at before it leaves the work to the scan.
        const ORDERED_KEYS_MAX: usize = 100_000;
        let (Some(snapshot), Some(write)) = (snapshot, self.write.as_ref()) else { return Ok(None) };
        if row_ids || table.is_column_store() || snapshot.has_own_changes() || !self.scan_settings(state).index_lookups {
            return Ok(None);
        }
        let Some(column) = self.column_index(&order.column) else { return Ok(None) };
        // Unique indexes first: one row per key.
        let mut fitting: Vec<_> = snapshot.indexes().into_iter().filter(|i| i.columns().first() == Some(&column)).collect();
        fitting.sort_by_key(|i| !i.is_unique());
        let Some(index) = fitting.into_iter().next() else { return Ok(None) };
        if !index.is_built() {
            build_indexes(write, &table.name)?;
        }
        let on_column: Vec<&ColumnPredicate> = predicates.iter().filter(|p| p.column() == column).collect();
        let null_key = index.null_first_column_key().map_err(|e| datafusion::error::DataFusionError::External(Box::new(e)))?;
        let not_null_from: Key = prefix_successor(&null_key).ok_or_else(|| datafusion::error::DataFusionError::Internal("a NULL key with no successor".into()))?;
        let null_region = (Bound::Included(null_key.clone()), Bound::Excluded(not_null_from.clone()));
        // The rows of non-NULL keys the filters on the column keep (a comparison is never
        // true of NULL), then where the ORDER BY puts the NULLs.
        let (lower, upper) = if on_column.is_empty() {
            (Bound::Included(not_null_from.clone()), Bound::Unbounded)
        } else {
            match crate::index_scan::range_lookup(&index, &[], 0, on_column.iter().copied()) {
                Some(KeyLookup::Range { lower: Bound::Unbounded, upper }) => (Bound::Included(not_null_from.clone()), upper),
                Some(KeyLookup::Range { lower, upper }) => (lower, upper),
                _ => return Ok(None),
            }
        };
        let not_null = (lower, upper);
        let segments: Vec<(Bound<Key>, Bound<Key>)> = match (on_column.is_empty(), order.ascending == order.nulls_first) {
            (false, _) => vec![not_null],
            // ASC NULLS FIRST, DESC NULLS LAST: NULL keys first in ascending key order.
            (true, true) if order.ascending => vec![null_region, not_null],
            (true, true) => vec![not_null, null_region],
            (true, false) if order.ascending => vec![not_null, null_region],
            (true, false) => vec![null_region, not_null],
        };
        // A unique index holds one row per key: n keys are enough unless rows were deleted
        // or are not visible; each further chunk doubles.
        let mut chunk = if index.is_unique() { order.rows } else { order.rows.max(16) };
        let (mut batches, mut ids, mut rows_found, mut keys_seen) = (Vec::new(), Vec::new(), 0usize, 0usize);
        'segments: for (mut lower, mut upper) in segments {
            loop {
                let as_ref = |b: &Bound<Key>| match b {
                    Bound::Included(k) => Bound::Included(k.to_vec()),
                    Bound::Excluded(k) => Bound::Excluded(k.to_vec()),
                    Bound::Unbounded => Bound::Unbounded,
                };
                let (l, u) = (as_ref(&lower), as_ref(&upper));
                let keys = index.keys_between(l.as_ref().map(|k| &k[..]), u.as_ref().map(|k| &k[..]), order.ascending, chunk);
                let Some(last) = keys.last().cloned() else { break };
                keys_seen += keys.len();
                let exhausted = keys.len() < chunk;
                let lookup = KeyLookup::Keys { keys, prefix: false };
                let found = snapshot.rows_by_index(&index, &lookup, usize::MAX, projection, &self.db_dir).map_err(|e| datafusion::error::DataFusionError::External(Box::new(e)))?;
                let Some((batch, found_ids)) = found else { return Ok(None) };
                rows_found += batch.num_rows();
                batches.push(batch);
                ids.extend(found_ids);
                if rows_found >= order.rows {
                    break 'segments;
                }
                if keys_seen > ORDERED_KEYS_MAX {
                    return Ok(None);
                }
                if exhausted {
                    break;
                }
                if order.ascending {
                    lower = Bound::Excluded(last);
                } else {
                    upper = Bound::Excluded(last);
                }
                chunk = chunk.saturating_mul(2);
            }
        }
        let schema = match batches.first() {
            Some(b) => b.schema(),
            None => return self.lookup_plan(table, &self.ordered_choice(&index, order), arrow::record_batch::RecordBatch::new_empty(Arc::new(arrow::datatypes::Schema::new(projection.iter().map(|&c| self.schema.field(c).clone()).collect::<Vec<_>>()))), Vec::new(), projection, row_ids).map(Some),
        };
        let batch = arrow::compute::concat_batches(&schema, &batches)?;
        self.lookup_plan(table, &self.ordered_choice(&index, order), batch, ids, projection, row_ids).map(Some)
    }

    fn ordered_choice(&self, index: &Arc<flashscan_write::key_index::KeyIndex>, order: &crate::index_order::IndexOrder) -> crate::index_scan::IndexChoice {
        let direction = if order.ascending { "ascending" } else { "descending" };
        crate::index_scan::IndexChoice {
            index: index.clone(),
            lookup: flashscan_write::key_index::KeyLookup::Keys { keys: Vec::new(), prefix: false },
            columns_fixed: 0,
            description: format!("{} {direction}, first {} rows", order.column, order.rows),
        }
    }

    /// The rows an index lookup found as the scan's plan: cast to the table's types, with
    /// the row ids when UPDATE or DELETE asks.
    fn lookup_plan(&self, table: &TableMeta, choice: &crate::index_scan::IndexChoice, batch: arrow::record_batch::RecordBatch, ids: Vec<u64>, projection: &[usize], row_ids: bool) -> Result<Arc<dyn ExecutionPlan>> {
        let mut fields: Vec<_> = projection.iter().map(|&c| Arc::new(self.schema.field(c).clone())).collect();
        let mut columns: Vec<arrow::array::ArrayRef> = batch
            .columns()
            .iter()
            .zip(&fields)
            .map(|(c, f)| if c.data_type() == f.data_type() { Ok(c.clone()) } else { arrow::compute::cast(c, f.data_type()) })
            .collect::<std::result::Result<_, _>>()?;
        if row_ids {
            fields.push(Arc::new(row_id_field()));
            columns.push(Arc::new(arrow::array::UInt64Array::from(ids)));
        }
        let schema = Arc::new(arrow::datatypes::Schema::new(fields));
        let batch = arrow::record_batch::RecordBatch::try_new_with_options(schema, columns, &arrow::record_batch::RecordBatchOptions::new().with_row_count(Some(batch.num_rows())))?;
        Ok(Arc::new(crate::index_scan::IndexLookupExec::new(&table.name, choice, batch)))
    }

    /// Committed rows only in the delta now.
    fn delta_rows(&self) -> u64 {
        self.view(None).1.map(|d| d.delta_row_count()).unwrap_or(0)
    }

    /// Per column statistics for the planner; ignored unless one per column.
    pub fn with_column_statistics(mut self, columns: Vec<ColumnStatistics>) -> FlashscanTable {
        if columns.len() == self.table.columns.len() {
            self.column_statistics = Arc::new(columns);
        }
        self
    }

    /// Min/max per partition and column, from a format that records them. Lengths that do
    /// not match the table are ignored: wrong ranges would drop rows.
    pub fn with_partition_ranges(mut self, ranges: PartitionRanges) -> FlashscanTable {
        let columns = self.table.columns.len();
        if ranges.len() == self.table.partitions.len() && ranges.iter().all(|r| r.len() == columns) {
            self.partition_ranges = ranges;
        }
        self
    }

    pub fn table(&self) -> &TableMeta {
        &self.table
    }

    fn column_index(&self, name: &str) -> Option<usize> {
        self.table.columns.iter().position(|c| c.name == name)
    }

    /// The filter's predicates, if it is made of simple comparisons and at least one of
    /// them can rule out partitions (by range or by hash). The others do no harm: pruning
    /// skips a partition only when some predicate proves it holds no matching row.
    fn usable_predicates(&self, filter: &Expr) -> Option<Vec<ColumnPredicate>> {
        let predicates = predicates_of(filter, &|n| self.column_index(n))?;
        let has_ranges = |c: usize| {
            !self.partition_ranges.is_empty() && self.partition_ranges.iter().all(|p| p.get(c).is_some_and(|r| r.is_some()))
        };
        let column_store_skips = self.table.is_column_store() && !scan_filter_of(&predicates, &self.schema).ranges.is_empty();
        // `=`, IN or a range on a column of one of the table's indexes: part of an index
        // lookup (index_scan.rs decides whether the predicates together make one).
        let index_lookup = |p: &ColumnPredicate| {
            use datafusion::logical_expr::Operator as Op;
            matches!(p, ColumnPredicate::Compare { op: Op::Eq | Op::Lt | Op::LtEq | Op::Gt | Op::GtEq, .. } | ColumnPredicate::InList { .. } | ColumnPredicate::Between { .. })
                && self.table.indexes.iter().any(|i| i.columns.iter().any(|c| self.column_index(c) == Some(p.column())))
        };
        (column_store_skips || predicates.iter().any(|p| has_ranges(p.column()) || self.hash_partitions(p).is_some() || index_lookup(p))).then_some(predicates)
    }

    /// The partitions (indexes) that can hold rows passing `p`, when `p` pins the
    /// partition key to constants; `None` otherwise.
    fn hash_partitions(&self, p: &ColumnPredicate) -> Option<BTreeSet<u32>> {
        let key = self.partition_key?;
        let values: Vec<&ScalarValue> = match p {
            ColumnPredicate::Compare { column, op: datafusion::logical_expr::Operator::Eq, value } if *column == key => vec![value],
            ColumnPredicate::InList { column, values } if *column == key => values.iter().collect(),
            _ => return None,
        };
        let key_type = self.schema.field(key).data_type().clone();
        let partition_count = u32::try_from(self.table.partitions.len()).ok().filter(|&n| n > 0)?;
        let mut partitions = BTreeSet::new();
        for v in values {
            // The constant as the key column stores it (width, decimal scale), so it hashes
            // as the loader hashed the rows; a constant that does not convert prunes nothing.
            let array = v.to_array().ok()?;
            let array = arrow::compute::cast(&array, &key_type).ok()?;
            if array.null_count() > 0 {
                return None;
            }
            let mut out = Vec::with_capacity(1);
            flashscan_storage::partitioning::partition_rows(&array, partition_count, &mut out).ok()?;
            partitions.extend(out);
        }
        Some(partitions)
    }

    /// The settings a scan of this table runs with: the planning session's, but the table's
    /// own `slices` and `views` (`table_settings`).
    fn scan_settings(&self, state: &dyn Session) -> FlashscanSettings {
        let mut settings = FlashscanSettings::of(state.config().options());
        settings.slices = self.table_settings.slices;
        settings.views = self.table_settings.views;
        settings
    }

    /// The scan itself evaluates `filter`: a column store, a deterministic filter on this
    /// table's columns only (no subquery, no outer reference). Its delta rows, which the
    /// scan of row groups does not read, are filtered the same way (`scan`).
    fn scan_evaluates(&self, filter: &Expr) -> bool {
        if !self.table.is_column_store() || !self.table_settings.slices || filter.is_volatile() {
            return false;
        }
        let mut ok = true;
        let _ = filter.apply(|e| {
            match e {
                Expr::Column(c) if self.column_index(&c.name).is_none() => ok = false,
                Expr::ScalarSubquery(_) | Expr::Exists(_) | Expr::InSubquery(_) | Expr::OuterReferenceColumn(..) | Expr::Placeholder(_) => ok = false,
                _ => {}
            }
            Ok(if ok { TreeNodeRecursion::Continue } else { TreeNodeRecursion::Stop })
        });
        ok
    }

    /// The filters the scan evaluates, split into conjuncts, each a predicate over the
    /// columns it reads (so one on a single dictionary-coded string column can be evaluated
    /// on the dictionary's entries).
    fn row_filter(&self, state: &dyn Session, filters: &[Expr]) -> Result<Option<RowFilter>> {
        let mut conjuncts_exprs = Vec::new();
        for f in filters.iter().filter(|f| self.scan_evaluates(f)) {
            conjuncts_exprs.extend(datafusion::logical_expr::utils::split_conjunction(f).into_iter().cloned());
        }
        if conjuncts_exprs.is_empty() {
            return Ok(None);
        }
        let mut columns: Vec<usize> = Vec::new();
        let mut conjuncts = Vec::with_capacity(conjuncts_exprs.len());
        for expr in self.merge_column_comparisons(conjuncts_exprs) {
            // Columns by name, unqualified: the predicate runs on a batch of just its columns.
            let mut own: Vec<usize> = Vec::new();
            let expr = expr
                .transform(|e| {
                    Ok(match e {
                        Expr::Column(c) => {
                            if let Some(i) = self.column_index(&c.name) {
                                if !own.contains(&i) {
                                    own.push(i);
                                }
                            }
                            Transformed::yes(Expr::Column(datafusion::common::Column::new_unqualified(c.name)))
                        }
                        other => Transformed::no(other),
                    })
                })?
                .data;
            let schema = self.schema.project(&own)?;
            let df_schema = datafusion::common::DFSchema::try_from(schema)?;
            let predicate = state.create_physical_expr(expr, &df_schema)?;
            let inputs = own
                .iter()
                .map(|&c| match columns.iter().position(|&d| d == c) {
                    Some(p) => p,
                    None => {
                        columns.push(c);
                        columns.len() - 1
                    }
                })
                .collect();
            conjuncts.push(RowConjunct { inputs, predicate });
        }
        Ok(Some(RowFilter { columns, conjuncts, piecewise_like: FlashscanSettings::of(state.config().options()).piecewise_like }))
    }

    /// `conjuncts` with the comparisons of one column with constants ANDed into one
    /// conjunct per column, in the place of the first (`l_shipdate >= d1`, `l_shipdate < d2`
    /// become one): the scan then reads the column once for them and, on an integer column,
    /// compares the values with one range (`RowConjunct::integer_range`).
    fn merge_column_comparisons(&self, conjuncts: Vec<Expr>) -> Vec<Expr> {
        let mut out: Vec<Expr> = Vec::with_capacity(conjuncts.len());
        // Per column, where its merged comparisons are in `out`.
        let mut at: Vec<(usize, usize)> = Vec::new();
        for expr in conjuncts {
            let column = match predicates_of(&expr, &|n| self.column_index(n)).as_deref() {
                Some([p @ (ColumnPredicate::Compare { .. } | ColumnPredicate::Between { .. })]) => Some(p.column()),
                _ => None,
            };
            match column.and_then(|c| at.iter().find(|(d, _)| *d == c)) {
                Some(&(_, position)) => {
                    let first = std::mem::replace(&mut out[position], Expr::Literal(ScalarValue::Null, None));
                    out[position] = first.and(expr);
                }
                None => {
                    if let Some(c) = column {
                        at.push((c, out.len()));
                    }
                    out.push(expr);
                }
            }
        }
        out
    }

    /// Whether the column statistics and partition ranges, read from the row groups of the
    /// table as it was registered, still describe `table` (a snapshot's): a checkpoint
    /// since turned a column store's delta rows into more row groups, and a min/max that
    /// misses them would prune partitions or answer MIN/MAX wrongly. Stale ones are not
    /// used (the session reads them again when it next registers its tables).
    fn statistics_hold(&self, table: &TableMeta) -> bool {
        table.partitions.len() == self.table.partitions.len() && table.partitions.iter().zip(&self.table.partitions).all(|(a, b)| a.row_groups == b.row_groups)
    }

    fn partition_may_match(&self, partition_position: usize, predicates: &[ColumnPredicate], ranges_hold: bool) -> bool {
        let Some(partition) = self.table.partitions.get(partition_position) else { return true };
        let ranges = self.partition_ranges.get(partition_position).filter(|_| ranges_hold);
        predicates.iter().all(|p| {
            if let Some(kept) = self.hash_partitions(p) {
                if !kept.contains(&partition.index) {
                    return false;
                }
            }
            match ranges.and_then(|r| r.get(p.column())) {
                Some(Some(range)) => p.may_match(range),
                _ => true,
            }
        })
    }
}

/// `exec_plan::sampled_selectivity(spec)` on tokio's blocking threads when there is a
/// runtime (else here). DataFusion plans a query's leaves concurrently (its
/// `planning_concurrency`, the cores): a sample that blocked the planner's task read one
/// table's filter columns after another (TPC-H Q16: part's, then supplier's); awaited off
/// the task, they are read side by side. A sample that cannot finish (its thread panicked)
/// leaves the estimate to DataFusion's default, as one that cannot be read does.
async fn sample_off_the_planner(spec: &ScanSpec) -> Option<f64> {
    if spec.row_filter.is_none() {
        return None;
    }
    let Ok(runtime) = tokio::runtime::Handle::try_current() else { return crate::exec_plan::sampled_selectivity(spec) };
    let spec = spec.clone();
    runtime.spawn_blocking(move || crate::exec_plan::sampled_selectivity(&spec)).await.ok().flatten()
}

#[async_trait]
impl TableProvider for FlashscanTable {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn table_type(&self) -> TableType {
        TableType::Base
    }

    fn get_column_default(&self, column: &str) -> Option<&Expr> {
        self.defaults.get(column)
    }

    fn supports_filters_pushdown(&self, filters: &[&Expr]) -> Result<Vec<TableProviderFilterPushDown>> {
        Ok(filters
            .iter()
            .map(|f| match self.usable_predicates(f) {
                // The ORDER BY … LIMIT marker: TRUE for every row, taken out by `scan`.
                _ if crate::index_order::marker_order(f).is_some() => TableProviderFilterPushDown::Exact,
                // A column store evaluates the filter in its scan, on the filter's columns
                // first (late materialization), and on its delta rows: DataFusion need not
                // run it again.
                _ if self.scan_evaluates(f) => TableProviderFilterPushDown::Exact,
                // Inexact: ranges skip whole partitions; the filter still runs on the rest.
                Some(_) => TableProviderFilterPushDown::Inexact,
                None => TableProviderFilterPushDown::Unsupported,
            })
            .collect())
    }

    fn statistics(&self) -> Option<Statistics> {
        let (table, delta) = self.view(None);
        let delta_rows = delta.as_ref().map(|d| d.delta_row_count()).unwrap_or(0);
        let deleted_rows = delta.as_ref().map(|d| d.deleted_row_count()).unwrap_or(0);
        let mut statistics = Statistics::new_unknown(&self.schema)
            .with_num_rows(Precision::Exact((table.row_count + delta_rows).saturating_sub(deleted_rows) as usize))
            .with_total_byte_size(Precision::Inexact(table.size_bytes as usize));
        if !self.column_statistics.is_empty() && delta_rows == 0 && deleted_rows == 0 && !self.row_ids && self.statistics_hold(&table) {
            statistics.column_statistics = self.column_statistics.to_vec();
        }
        // ANALYZE's distinct counts: sketches, so inexact, and older still after any write.
        if let Some(measured) = self.table.statistics.as_ref().filter(|m| m.distinct_counts.len() == self.table.columns.len()) {
            for (column, distinct) in statistics.column_statistics.iter_mut().zip(&measured.distinct_counts) {
                if let Some(d) = distinct {
                    column.distinct_count = Precision::Inexact(*d as usize);
                }
            }
        }
        Some(statistics)
    }

    async fn scan(&self, state: &dyn Session, projection: Option<&Vec<usize>>, filters: &[Expr], limit: Option<usize>) -> Result<Arc<dyn ExecutionPlan>> {
        // The ORDER BY … LIMIT marker (index_order.rs) is TRUE for every row: taken out here.
        let order = filters.iter().find_map(crate::index_order::marker_order);
        let unmarked: Vec<Expr>;
        let filters = if order.is_some() {
            unmarked = filters.iter().filter(|f| crate::index_order::marker_order(f).is_none()).cloned().collect();
            &unmarked[..]
        } else {
            filters
        };
        let ScanRequest { table, delta, projection, row_ids, predicates, usable_filters } = self.scan_request(state, projection, filters)?;
        if let Some(order) = &order {
            if let Some(lookup) = self.ordered_lookup(state, &table, delta.as_ref(), order, &predicates, &projection, row_ids).await? {
                return Ok(lookup);
            }
        }
        if let Some(lookup) = self.index_lookup(state, &table, delta.as_ref(), &predicates, &projection, row_ids).await? {
            return Ok(lookup);
        }
        // Shown by EXPLAIN and the scan's report; formatted only for a scan of the pages.
        let pruning_filters: Vec<String> = usable_filters.iter().map(|&i| filters[i].to_string()).collect();
        let statistics_hold = self.statistics_hold(&table);
        let kept_positions: Vec<usize> = (0..table.partitions.len()).filter(|i| self.partition_may_match(*i, &predicates, statistics_hold)).collect();
        let kept: Vec<&PartitionMeta> = kept_positions.iter().map(|&i| &table.partitions[i]).collect();
        let partitions_total = table.partitions.len();
        let partitions_pruned = partitions_total - kept.len();
        let units = plan_units(&kept, state.config().target_partitions());
        let full_scan_bytes = table.page_count() * flashscan_storage::PAGE_SIZE_BYTES as u64;
        let row_filter = self.row_filter(state, filters)?;
        self.scan_log.record_plan(&table.name, partitions_total as u64, partitions_pruned as u64, full_scan_bytes);
        let mut spec = ScanSpec {
            table: table.clone(),
            db_dir: self.db_dir.clone(),
            projection: projection.clone(),
            units,
            partitions_total,
            partitions_pruned,
            scan_filter: if table.is_column_store() { scan_filter_of(&predicates, &self.schema) } else { flashscan_exec::ScanFilter::none() },
            row_filter: row_filter.clone(),
            pruning_filters,
            limit,
            read_options: self.read_options,
            column_statistics: match (statistics_hold, delta.as_ref().is_some_and(|d| d.deleted_row_count() > 0)) {
                (false, _) => Arc::new(Vec::new()),
                // Deleted rows may hold a min or a max: bounds still, never exact answers.
                (true, true) => Arc::new(self.column_statistics.iter().cloned().map(ColumnStatistics::to_inexact).collect()),
                (true, false) => self.column_statistics.clone(),
            },
            sampled_selectivity: None,
            settings: self.scan_settings(state),
            deleted: delta.clone().filter(|d| d.has_deleted_page_rows()),
            row_ids,
        };
        spec.sampled_selectivity = sample_off_the_planner(&spec).await;
        let pages: Arc<dyn ExecutionPlan> = Arc::new(FlashscanExec::new(spec, self.scan_log.clone())?);
        let Some(delta) = delta.as_ref().filter(|d| d.has_rows_beyond_pages()) else { return Ok(pages) };
        // The delta of each partition the hash pruning keeps (rows are hashed to partitions
        // as a load hashes them, so that pruning holds; the min/max ranges of a column
        // store's row groups say nothing of its delta rows), decoded as the pages are.
        let schema = pages.schema();
        let mut batches = Vec::new();
        for p in (0..table.partitions.len()).filter(|&i| self.partition_may_match(i, &predicates, false)) {
            let decoded = match &row_filter {
                None => delta.decode_delta(p, &projection, row_ids),
                Some(_) => delta.decode_delta(p, &(0..table.columns.len()).collect::<Vec<_>>(), row_ids),
            }
            .map_err(|e| datafusion::error::DataFusionError::External(Box::new(e)))?;
            let decoded = match (decoded, &row_filter) {
                // The filter the scan of the row groups evaluates (it may be the only one:
                // DataFusion takes it as exact), on the delta's rows too.
                (Some((b, ids)), Some(filter)) => Some(filtered_rows(&b, ids, filter, &self.schema, &projection)?),
                (decoded, _) => decoded,
            };
            if let Some((b, ids)) = decoded {
                // As the scan declares them (a column store's strings are views).
                let mut columns = b
                    .columns()
                    .iter()
                    .zip(schema.fields())
                    .map(|(c, f)| if c.data_type() == f.data_type() { Ok(c.clone()) } else { arrow::compute::cast(c, f.data_type()) })
                    .collect::<std::result::Result<Vec<_>, _>>()?;
                if row_ids {
                    columns.push(Arc::new(arrow::array::UInt64Array::from(ids)));
                }
                batches.push(arrow::record_batch::RecordBatch::try_new_with_options(
                    schema.clone(),
                    columns,
                    &arrow::record_batch::RecordBatchOptions::new().with_row_count(Some(b.num_rows())),
                )?);
            }
        }
        if batches.is_empty() {
            return Ok(pages);
        }
        let delta_exec: Arc<dyn ExecutionPlan> = MemorySourceConfig::try_new_exec(&[batches], schema, None)?;
        UnionExec::try_new(vec![pages, delta_exec])
    }

    async fn insert_into(&self, _state: &dyn Session, input: Arc<dyn ExecutionPlan>, insert_op: InsertOp) -> Result<Arc<dyn ExecutionPlan>> {
        if insert_op != InsertOp::Append {
            return Err(datafusion::error::DataFusionError::Plan(format!("INSERT {insert_op} is not supported yet: INSERT INTO appends rows")));
        }
        let Some(write) = &self.write else {
            return Err(datafusion::error::DataFusionError::Plan(format!(
                "table {} takes no INSERT through a cluster coordinator: insert on the host that owns the database (`flashscan sql` or `flashscan serve` there)",
                self.table.name
            )));
        };
        let sink = crate::dml::WriteSink { write: write.clone(), table: self.table.name.clone(), schema: self.schema.clone() };
        Ok(Arc::new(DataSinkExec::new(input, Arc::new(sink), None)))
    }
}

/// The rows of `batch` (every column of the table, as decoded from the delta) that pass
/// `filter`, projected to `projection`, with their `ids` (empty: none asked for). Columns
/// are cast to the provider's types first (`schema`: a column store's strings are views),
/// which the filter was planned against.
fn filtered_rows(batch: &arrow::record_batch::RecordBatch, ids: Vec<u64>, filter: &crate::reader::RowFilter, schema: &SchemaRef, projection: &[usize]) -> Result<(arrow::record_batch::RecordBatch, Vec<u64>)> {
    let typed = crate::reader::batch_as(&Arc::new(schema.project(&(0..batch.num_columns()).collect::<Vec<_>>())?), batch)?;
    let keep = filter.keep(&typed).map_err(|e| datafusion::error::DataFusionError::External(Box::new(e)))?;
    let ids = if ids.is_empty() { ids } else { ids.into_iter().zip(keep.values().iter()).filter_map(|(id, k)| k.then_some(id)).collect() };
    Ok((arrow::compute::filter_record_batch(&typed, &keep)?.project(projection)?, ids))
}

/// Builds the table's SQL indexes not built yet (once per process: a scan of their key
/// columns), off the async workers when there are several.
fn build_indexes(write: &Arc<flashscan_write::WritePath>, table: &str) -> Result<()> {
    let built = match tokio::runtime::Handle::try_current().map(|h| h.runtime_flavor()) {
        Ok(tokio::runtime::RuntimeFlavor::MultiThread) => tokio::task::block_in_place(|| write.built_indexes(table)),
        _ => write.built_indexes(table),
    };
    built.map(drop).map_err(|e| datafusion::error::DataFusionError::External(Box::new(e)))
}
