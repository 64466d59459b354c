//! A SQL session over one flashscan database: every table registered under its name, the
//! statements of a text run one after another, and each result returned with the scan
//! figures of its tables.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::Instant;

use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;
use datafusion::execution::session_state::SessionState;
use datafusion::prelude::{DataFrame, SessionConfig, SessionContext};
use datafusion::logical_expr::{DdlStatement, LogicalPlan};
use datafusion::sql::parser::{DFParser, Statement as DFStatement};
use datafusion::sql::sqlparser::ast::{ObjectType, Statement as SqlStatement};
use flashscan_storage::{Catalog, ColumnDef, ColumnType};
use flashscan_write::WritePath;

use crate::column_statistics::column_store_statistics;
use crate::error::SqlError;
use crate::metrics::{total_of, ScanLog, TableScanFigures};
use crate::reader::{ReadOptions, UnitFigures};
use crate::settings::FlashscanSettings;
use crate::table_provider::FlashscanTable;

#[derive(Debug, Clone, Copy, Default)]
pub struct SessionOptions {
    pub read: ReadOptions,
    /// Execution partitions per scan and per operator; the cores by default.
    pub target_partitions: Option<usize>,
}

/// The answer of one statement.
#[derive(Debug, Clone)]
pub struct QueryOutput {
    /// The statement as run (normalised by the parser).
    pub statement: String,
    pub schema: SchemaRef,
    pub batches: Vec<RecordBatch>,
    pub elapsed_s: f64,
    /// Per table, what its scans read and where their time went.
    pub scans: BTreeMap<String, TableScanFigures>,
    /// What the client is told beside the answer (PostgreSQL's WARNING notices).
    pub warnings: Vec<String>,
}

impl QueryOutput {
    pub fn row_count(&self) -> usize {
        self.batches.iter().map(|b| b.num_rows()).sum()
    }

    /// The warnings, one line each on stderr (`WARNING: …`, as psql prints a notice).
    pub fn print_warnings(&self) {
        for w in &self.warnings {
            eprintln!("WARNING: {w}");
        }
    }

    /// All tables' scan figures added up.
    pub fn scan_total(&self) -> UnitFigures {
        total_of(&self.scans)
    }
}

pub struct FlashscanSession {
    ctx: SessionContext,
    scan_log: Arc<ScanLog>,
    db_dir: PathBuf,
    table_names: RwLock<Vec<String>>,
    /// The views registered (`views.rs`), lower case, sorted.
    view_names: RwLock<Vec<String>>,
    options: SessionOptions,
    /// The catalog, the deltas, and (once a statement writes) the lock and the log.
    write: Arc<WritePath>,
    /// `BEGIN … COMMIT` (session_txn.rs).
    txn: std::sync::Mutex<txn::TxnState>,
}

#[path = "session_txn.rs"]
mod txn;
#[path = "analyze.rs"]
mod analyze;
pub use txn::{ddl_in_block_warning, parse_statements};

/// What a writing session names itself in the database lock.
const WRITER_NAME: &str = "flashscan sql";

impl FlashscanSession {
    /// Opens the database and registers each of its tables. Table names are registered in
    /// lower case, as SQL folds unquoted names to lower case.
    pub fn open(db_dir: &Path, options: SessionOptions) -> Result<FlashscanSession, SqlError> {
        let write = Arc::new(WritePath::open(db_dir)?);
        // `SET flashscan.*` and `SHOW flashscan.*`; a new session starts from the environment.
        let settings = FlashscanSettings::from_env().map_err(|e| SqlError::InvalidArgument(e.to_string()))?;
        let mut config = SessionConfig::new().with_information_schema(true).with_option_extension(settings);
        // Deep expressions, as PostgreSQL takes them (the threads' stacks are sized for it).
        config.options_mut().sql_parser.recursion_limit = datafusion::config::ConfigNonZeroUsize::try_new(crate::SQL_NESTING_DEPTH_MAX)?;
        // A join's build side of up to 4,096 keys (DataFusion's default: 150) reaches the
        // probe side's scan as the keys themselves (an IN list), not only a hash table to
        // probe: integer keys over a small span become a bitmap there
        // (exec_plan/runtime_filter.rs, `KeyBitmap`). TPC-H SF 1, `flashscan sql` with the
        // limit SET to each value (docs/benchmarks.md, session 24): 4,096 took Q17 from 148
        // to 110 ms and Q8 from 125 to 101; at 65,536 DataFusion's making of the list (a
        // literal per key) cost more than the bitmap saved (Q14 56 -> 94 ms, Q4 110 -> 136).
        config.options_mut().optimizer.hash_join_inlist_pushdown_max_distinct_values = 4096;
        if let Some(n) = options.target_partitions {
            if n == 0 {
                return Err(SqlError::InvalidArgument("target partitions must be at least 1".into()));
            }
            config = config.with_target_partitions(n);
        }
        // Small-domain partial aggregates over column stores answered in the scan.
        let ctx = crate::aggregate_pushdown::register(SessionContext::new_with_config(config));
        // Partitioned hash joins build on the input with fewer rows.
        let ctx = crate::build_side::register(ctx);
        // Subqueries DataFusion leaves in a SELECT list or WHERE clause, decorrelated.
        let ctx = crate::subquery_by_domain::register(ctx);
        // Inner joins in the order estimated cardinalities give, not the query's.
        let ctx = crate::join_order::register(ctx);
        let ctx = crate::index_order::register(ctx);
        // Build sides start when their join asks for them: after the filters from above.
        let ctx = crate::deferred_build::register(ctx);
        // A NULL in a filter's AND/OR tree is false: nothing beside it is evaluated.
        let ctx = crate::null_in_filter::register(ctx);
        // nextval / setval over the database's sequences (column defaults call nextval).
        crate::sequence_functions::register(&ctx, &write);
        let scan_log = ScanLog::new();
        let session = FlashscanSession { ctx, scan_log, db_dir: db_dir.to_path_buf(), table_names: RwLock::new(Vec::new()), view_names: RwLock::new(Vec::new()), options, write, txn: Default::default() };
        session.register_tables(&session.current_catalog()?)?;
        Ok(session)
    }

    /// The state one statement plans and runs with: the session's, with a snapshot of
    /// now attached — READ COMMITTED: the statement reads every table as of one moment,
    /// each transaction whole or not at all (`flashscan_write::ReadSnapshot`, which the
    /// tables' scans find here). A copy per statement, so no statement can read another's
    /// (older) snapshot from the session. Inside `BEGIN … COMMIT` the block's own changes
    /// are laid over it: a transaction reads its own writes.
    pub(crate) fn statement_state(&self) -> Result<SessionState, SqlError> {
        let mut state = self.ctx.state();
        let own = self.own_changes()?;
        state.config_mut().set_extension(Arc::new(self.write.read_snapshot_own(own.as_deref())?));
        Ok(state)
    }

    /// Runs a plan made with `state` (from [`FlashscanSession::statement_state`]): a query
    /// or DML on that state and its snapshot; DDL and `SET` on the session, which they
    /// change.
    pub(crate) async fn frame_of(&self, state: SessionState, plan: LogicalPlan) -> datafusion::error::Result<DataFrame> {
        match plan {
            LogicalPlan::Ddl(_) | LogicalPlan::Statement(_) => self.ctx.execute_logical_plan(plan).await,
            plan => Ok(DataFrame::new(state, plan)),
        }
    }

    /// The database's catalog as it is now.
    fn current_catalog(&self) -> Result<Catalog, SqlError> {
        Ok(self.write.catalog()?)
    }

    /// The session's `flashscan.*` settings as they are now.
    pub fn settings(&self) -> FlashscanSettings {
        FlashscanSettings::of(self.ctx.copied_config().options())
    }

    /// (Re)registers every table of `catalog`, each with its delta when the database
    /// takes writes; tables no longer in it are deregistered.
    fn register_tables(&self, catalog: &Catalog) -> Result<(), SqlError> {
        let ctx = &self.ctx;
        let options = self.options;
        let scan_log = &self.scan_log;
        let db_dir = self.db_dir.as_path();
        let settings = self.settings();
        let mut names = self.table_names.write().map_err(|_| SqlError::Internal("table list lock poisoned".into()))?;
        for old in names.drain(..) {
            ctx.deregister_table(old.as_str())?;
        }
        let mut table_names = Vec::new();
        for table in catalog.tables.values() {
            let name = table.name.to_lowercase();
            let mut provider = FlashscanTable::new(table.clone(), db_dir.to_path_buf(), options.read, scan_log.clone(), &settings);
            provider = provider.with_write(self.write.clone());
            if !table.column_defaults.is_empty() {
                provider = provider.with_defaults(crate::column_defaults::planned_defaults(&ctx.state(), table));
            }
            if table.is_column_store() {
                // A directory that does not read or verify leaves the table without
                // statistics; its scan reads the same directories and reports the error.
                if let Ok(stats) = column_store_statistics(db_dir, table, &settings) {
                    provider = provider.with_column_statistics(stats.columns).with_partition_ranges(stats.partition_ranges);
                }
            }
            ctx.register_table(name.as_str(), Arc::new(provider))?;
            table_names.push(name);
        }
        table_names.sort();
        *names = table_names;
        drop(names);
        self.register_views(catalog)
    }

    /// (Re)registers every view of `catalog`, each planned again over the tables registered
    /// now (`views.rs`). A view may read another: views are planned in rounds until a round
    /// plans none; those left are registered as unplannable, with the error of their last
    /// try, so reading one fails naming it.
    fn register_views(&self, catalog: &Catalog) -> Result<(), SqlError> {
        let mut names = self.view_names.write().map_err(|_| SqlError::Internal("view list lock poisoned".into()))?;
        for old in names.drain(..) {
            self.ctx.deregister_table(old.as_str())?;
        }
        // One copy of the state for all views: its catalog is the session's (shared), so a
        // view registered in one round is seen by the next.
        let state = self.ctx.state();
        let mut pending: Vec<(&flashscan_storage::ViewEntry, Option<SqlError>)> = catalog.views.iter().map(|v| (v, None)).collect();
        let mut registered = Vec::new();
        loop {
            let mut progressed = false;
            let mut left = Vec::new();
            for (view, _) in pending {
                // Planning resolves names in in-memory schemas: nothing in it waits on I/O.
                match futures::executor::block_on(crate::views::plan_view_query(&state, &view.name, &view.sql, &view.columns)) {
                    Ok(plan) => {
                        let provider = datafusion::catalog::view::ViewTable::new(plan, Some(view.sql.clone()));
                        self.ctx.register_table(view.name.as_str(), Arc::new(provider))?;
                        registered.push(view.name.clone());
                        progressed = true;
                    }
                    Err(e) => left.push((view, Some(e))),
                }
            }
            pending = left;
            if !progressed || pending.is_empty() {
                break;
            }
        }
        for (view, error) in pending {
            let cause = error.unwrap_or_else(|| SqlError::Internal("not planned".into()));
            self.ctx.register_table(view.name.as_str(), Arc::new(crate::views::UnplannableView::new(view, &cause)))?;
            registered.push(view.name.clone());
        }
        registered.sort();
        *names = registered;
        Ok(())
    }

    /// Plans every view again over what the session holds now. A front end that registers
    /// more after opening (the server's `pg_catalog` tables and functions, its SQL
    /// dialect) calls it so views that read those plan too.
    pub fn refresh_views(&self) -> Result<(), SqlError> {
        self.register_views(&self.current_catalog()?)
    }

    /// True when `name` (lower case) is a view of this session.
    pub fn is_view(&self, name: &str) -> bool {
        self.view_names.read().map(|n| n.iter().any(|v| v == name)).unwrap_or(false)
    }

    pub fn view_names(&self) -> Vec<String> {
        self.view_names.read().map(|n| n.clone()).unwrap_or_default()
    }

    /// Takes the database lock and the log for this session's first write (a second
    /// writer gets an error naming the holder), then sees the database as it is now.
    fn ensure_writer(&self) -> Result<&Arc<WritePath>, SqlError> {
        let w = &self.write;
        if w.become_writer(WRITER_NAME)? {
            self.register_tables(&w.catalog()?)?;
        }
        Ok(w)
    }

    /// Takes the database lock and the log now, naming `holder` in the lock (`flashscan
    /// serve` does at start: it is the database's one writer while it runs), and returns
    /// the write path its tables insert through (a database made by `flashscan load` gets
    /// its log here).
    pub fn take_writer(&self, holder: &str) -> Result<Arc<WritePath>, SqlError> {
        if self.write.become_writer(holder)? {
            self.register_tables(&self.write.catalog()?)?;
        }
        Ok(self.write.clone())
    }

    pub fn context(&self) -> &SessionContext {
        &self.ctx
    }

    /// The write path: its limits, automatic checkpoint figures and log counters.
    pub fn write_path(&self) -> &Arc<flashscan_write::WritePath> {
        &self.write
    }

    pub fn db_dir(&self) -> &Path {
        &self.db_dir
    }

    pub fn table_names(&self) -> Vec<String> {
        self.table_names.read().map(|n| n.clone()).unwrap_or_default()
    }

    /// Runs every statement of `sql` in order and returns their answers; stops at the
    /// first error. `BEGIN … COMMIT` may span calls (the shell runs one statement per
    /// call); an error inside an open block aborts it.
    pub async fn run(&self, sql: &str) -> Result<Vec<QueryOutput>, SqlError> {
        let statements = parse_statements(&crate::column_defaults::reorder_sequence_options(sql))?;
        if statements.is_empty() {
            return Err(SqlError::Syntax("no statement to run".into()));
        }
        let mut outputs = Vec::with_capacity(statements.len());
        for statement in statements {
            match self.run_statement(statement).await {
                Ok(o) => outputs.push(o),
                Err(e) => return Err(self.abort_on_error(e)),
            }
        }
        Ok(outputs)
    }

    /// Runs one statement (the last answer when the text holds several).
    pub async fn run_one(&self, sql: &str) -> Result<QueryOutput, SqlError> {
        let mut outputs = self.run(sql).await?;
        outputs.pop().ok_or_else(|| SqlError::Syntax("no statement to run".into()))
    }

    async fn run_statement(&self, statement: datafusion::sql::parser::Statement) -> Result<QueryOutput, SqlError> {
        let warning = self.ddl_in_block(&statement);
        let mut output = self.run_statement_unwarned(statement).await?;
        output.warnings.extend(warning);
        Ok(output)
    }

    async fn run_statement_unwarned(&self, statement: datafusion::sql::parser::Statement) -> Result<QueryOutput, SqlError> {
        if let Some(result) = self.transaction_control(&statement).await {
            return result;
        }
        if let DFStatement::Statement(s) = &statement {
            if let SqlStatement::Copy { to: false, .. } = s.as_ref() {
                return self.copy_from(s).await;
            }
        }
        if let datafusion::sql::parser::Statement::CopyTo(copy) = statement {
            return self.run_copy(copy).await;
        }
        let text = statement.to_string();
        if let Some((what, target)) = crate::views::write_target(&statement) {
            if self.is_view(&target) {
                return Err(crate::views::refuse_write_into_view(what, &target));
            }
        }
        if crate::returning::has_returning(&statement) {
            return Err(SqlError::Plan(
                "RETURNING is answered over the wire (`flashscan serve`), not yet in `flashscan sql`: run the statement, then SELECT the rows in the same transaction".into(),
            ));
        }
        if crate::returning::has_on_conflict(&statement) {
            return Err(SqlError::Plan("INSERT … ON CONFLICT is taken over the wire (`flashscan serve`), not yet in `flashscan sql`: INSERT … SELECT … WHERE NOT EXISTS (…) does the same".into()));
        }
        // INSERT: `DEFAULT` written for a value, identity columns (column_defaults.rs).
        let mut statement = statement;
        if let DFStatement::Statement(s) = &mut statement {
            if matches!(s.as_ref(), SqlStatement::Insert(_)) {
                crate::column_defaults::prepare_insert(&self.write, s)?;
            }
        }
        // INSERT: the columns it fills, to name a NOT NULL column DataFusion names by position.
        let mut insert_columns: Option<crate::dml::InsertColumns> = None;
        if let DFStatement::Statement(s) = &statement {
            match s.as_ref() {
                SqlStatement::CreateTable(ct) => return self.create_table(ct.clone(), text).await,
                SqlStatement::CreateView(cv) => return self.create_view(cv, text).await,
                SqlStatement::CreateSequence { .. } => {
                    let started = Instant::now();
                    let Some((name, meta, if_not_exists)) = crate::column_defaults::create_sequence_request(s)? else { return Err(SqlError::Internal("CREATE SEQUENCE".into())) };
                    let w = self.ensure_writer()?;
                    let created = w.create_sequence(&name, meta, if_not_exists)?;
                    return status_output(text, if created { format!("sequence {name}") } else { format!("sequence {name} exists") }, started);
                }
                SqlStatement::Drop { object_type: ObjectType::Sequence, if_exists, names, .. } => {
                    let started = Instant::now();
                    let w = self.ensure_writer()?;
                    let names: Vec<String> = names.iter().map(crate::column_defaults::table_name_of).collect();
                    let dropped = w.drop_sequences(&names, *if_exists)?;
                    return status_output(text, format!("dropped {}", if dropped.is_empty() { "nothing".into() } else { dropped.join(", ") }), started);
                }
                // CASCADE drops nothing more: a table or view another view reads is refused
                // whether it is given or not (the write path names the view), so it is taken
                // only where there is nothing to cascade to.
                SqlStatement::Drop { object_type: ObjectType::View, if_exists, names, .. } => {
                    let started = Instant::now();
                    if self.in_transaction() {
                        return Err(SqlError::Plan("DROP VIEW inside BEGIN … COMMIT is not supported (it commits on its own): run it outside the transaction".into()));
                    }
                    let w = self.ensure_writer()?;
                    let names: Vec<String> = names.iter().map(crate::views::object_name).collect();
                    let dropped = w.drop_views(&names, *if_exists)?;
                    self.register_tables(&w.catalog()?)?;
                    return status_output(text, format!("dropped {}", if dropped.is_empty() { "nothing".into() } else { dropped.join(", ") }), started);
                }
                SqlStatement::Drop { object_type: ObjectType::Table, if_exists, names, .. } => {
                    let started = Instant::now();
                    let w = self.ensure_writer()?;
                    let mut dropped = Vec::new();
                    for n in names {
                        let name = n.0.last().map(|p| p.to_string()).unwrap_or_default();
                        let name = name.trim_matches('"').to_string();
                        if w.drop_table(&name, *if_exists)? {
                            dropped.push(name);
                        }
                    }
                    self.register_tables(&w.catalog()?)?;
                    return status_output(text, format!("dropped {}", if dropped.is_empty() { "nothing".into() } else { dropped.join(", ") }), started);
                }
                SqlStatement::CreateIndex(ci) => {
                    let started = Instant::now();
                    let (table, def) = crate::index_ddl::create_index(ci)?;
                    let name = def.name.clone();
                    let w = self.ensure_writer()?;
                    let created = w.create_index(&table, def, ci.if_not_exists)?;
                    self.register_tables(&w.catalog()?)?;
                    return status_output(text, if created { format!("index {name} on {table}") } else { format!("index {name} exists") }, started);
                }
                SqlStatement::Drop { object_type: ObjectType::Index, if_exists, names, .. } => {
                    let started = Instant::now();
                    let w = self.ensure_writer()?;
                    let mut dropped = Vec::new();
                    for n in names {
                        let name = crate::index_ddl::bare_name(n);
                        if w.drop_index(None, &name, false, *if_exists)? {
                            dropped.push(name);
                        }
                    }
                    self.register_tables(&w.catalog()?)?;
                    return status_output(text, format!("dropped {}", if dropped.is_empty() { "nothing".into() } else { dropped.join(", ") }), started);
                }
                SqlStatement::AlterTable(at) => {
                    if let Some(change) = crate::alter::column_change(at)? {
                        return self.alter_columns(at, change, text).await;
                    }
                    let started = Instant::now();
                    let w = self.ensure_writer()?;
                    let message = match crate::index_ddl::alter_table(at)? {
                        crate::index_ddl::AlterKey::Add { table, def } => {
                            let name = def.name.clone();
                            w.create_index(&table, def, false)?;
                            format!("constraint {name} on {table}")
                        }
                        crate::index_ddl::AlterKey::DropConstraint { table, name, if_exists } => {
                            if w.drop_index(Some(&table), &name, true, if_exists)? {
                                format!("dropped constraint {name}")
                            } else {
                                format!("constraint {name} does not exist")
                            }
                        }
                    };
                    self.register_tables(&w.catalog()?)?;
                    return status_output(text, message, started);
                }
                SqlStatement::Truncate(truncate) => return self.truncate(truncate, text).await,
                SqlStatement::Analyze(analyze) => return self.analyze(analyze, text).await,
                SqlStatement::Update(_) | SqlStatement::Delete(_) | SqlStatement::Merge(_) => {
                    let Some((_, table)) = crate::change::change_target(&statement)? else {
                        return Err(SqlError::Internal("UPDATE or DELETE without a target".into()));
                    };
                    return self.run_change(statement, table).await;
                }
                SqlStatement::Insert(insert) => {
                    let w = self.ensure_writer()?;
                    insert_columns = crate::dml::insert_column_names(&w, insert);
                    if self.in_transaction() {
                        if let Some(output) = self.insert_in_transaction(statement.clone()).await? {
                            return Ok(output);
                        }
                    }
                }
                _ => {}
            }
        }
        // Figures of an earlier, failed statement must not count against this one.
        self.scan_log.take();
        let started = Instant::now();
        let mut table_setting_changed = false;
        let state = self.statement_state()?;
        let result = async {
            let plan = crate::output_names::statement_to_plan(&state, statement).await?;
            table_setting_changed = sets_a_table_setting(&plan);
            // A point statement an index answers, planned without the optimizers
            // (point_plan.rs); everything else as DataFusion plans it.
            let (schema, batches) = match crate::point_plan::plan(&state, &plan).await {
                Some(point) => (plan.schema().inner().clone(), datafusion::physical_plan::collect(point, state.task_ctx()).await?),
                None => {
                    let frame = self.frame_of(state, plan).await?;
                    let schema = frame.schema().inner().clone();
                    (schema, frame.collect().await?)
                }
            };
            // Column stores hand strings on as views; answers keep the declared Utf8.
            Ok::<_, datafusion::error::DataFusionError>(crate::reader::answer_strings_as_utf8(schema, batches)?)
        }
        .await;
        let elapsed_s = started.elapsed().as_secs_f64();
        let scans = self.scan_log.take();
        let (schema, batches) = result.map_err(|e| crate::dml::name_null_column(self.explain_error(SqlError::from(e)), insert_columns.as_ref()))?;
        if table_setting_changed {
            self.register_tables(&self.current_catalog()?)?;
        }
        Ok(QueryOutput { statement: text, schema, batches, elapsed_s, scans, warnings: Vec::new() })
    }

    /// `COPY (query) TO 'file.parquet' | 'file.csv'` (or `COPY table TO ...`): the answer
    /// streamed into a new file by `flashscan_storage::export` (a new file only, never a
    /// replaced one; nothing visible until it is complete). DataFusion's own COPY would
    /// overwrite and is not built with Parquet here, so flashscan writes the file itself.
    /// Answers one row: the rows written.
    async fn run_copy(&self, copy: datafusion::sql::parser::CopyToStatement) -> Result<QueryOutput, SqlError> {
        use datafusion::sql::parser::{CopyToSource, Statement};
        use flashscan_storage::export::{check_new_target, ExportFormat, ExportWriter};
        use futures::StreamExt;
        let text = copy.to_string();
        if !copy.partitioned_by.is_empty() || !copy.options.is_empty() {
            return Err(SqlError::InvalidArgument("COPY TO writes one file: PARTITIONED BY and OPTIONS are not supported".into()));
        }
        if copy.target.contains("://") {
            return Err(SqlError::InvalidArgument(format!("COPY TO {:?}: give a local file path", copy.target)));
        }
        let target = PathBuf::from(&copy.target);
        let format = ExportFormat::of(&target, copy.stored_as.as_deref())?;
        // Before running the query: a name that is taken fails at once.
        check_new_target(&target)?;
        let statement = match copy.source {
            CopyToSource::Query(query) => Statement::Statement(Box::new(datafusion::sql::sqlparser::ast::Statement::Query(query))),
            CopyToSource::Relation(name) => {
                let mut parsed = DFParser::parse_sql(&format!("SELECT * FROM {name}")).map_err(SqlError::from)?;
                parsed.pop_front().ok_or_else(|| SqlError::Syntax("COPY TO without a source".into()))?
            }
        };
        self.scan_log.take();
        let started = Instant::now();
        let state = self.statement_state()?;
        let result = async {
            let plan = crate::output_names::statement_to_plan(&state, statement).await.map_err(SqlError::from)?;
            let frame = self.frame_of(state, plan).await.map_err(SqlError::from)?;
            let mut stream = frame.execute_stream().await.map_err(SqlError::from)?;
            // Column stores hand strings on as views; files keep the declared Utf8.
            let schema = crate::reader::answer_schema(&stream.schema());
            let mut writer = ExportWriter::create(&target, format, schema.clone())?;
            while let Some(batch) = stream.next().await {
                let batch = crate::reader::batch_as(&schema, &batch.map_err(SqlError::from)?).map_err(|e| SqlError::Internal(e.to_string()))?;
                writer.write(&batch)?;
            }
            Ok::<u64, SqlError>(writer.finish()?)
        }
        .await;
        let elapsed_s = started.elapsed().as_secs_f64();
        let scans = self.scan_log.take();
        let rows = result.map_err(|e| self.explain_error(e))?;
        let schema = Arc::new(arrow::datatypes::Schema::new(vec![arrow::datatypes::Field::new("count", arrow::datatypes::DataType::UInt64, false)]));
        let column: arrow::array::ArrayRef = Arc::new(arrow::array::UInt64Array::from(vec![rows]));
        let batch = RecordBatch::try_new(schema.clone(), vec![column]).map_err(|e| SqlError::Internal(e.to_string()))?;
        Ok(QueryOutput { statement: text, schema, batches: vec![batch], elapsed_s, scans, warnings: Vec::new() })
    }

    /// CREATE TABLE: options and refusals here, column types and NOT NULL as DataFusion
    /// plans them, one catalog commit in the write path.
    async fn create_table(&self, mut ct: datafusion::sql::sqlparser::ast::CreateTable, text: String) -> Result<QueryOutput, SqlError> {
        let started = Instant::now();
        let keys = crate::index_ddl::take_key_constraints(&mut ct)?;
        let defaults = crate::column_defaults::take_column_defaults(&mut ct)?;
        crate::dml::refuse_unsupported_create(&ct)?;
        let options = crate::dml::table_options(&mut ct)?;
        let if_not_exists = ct.if_not_exists;
        let plan = self.ctx.state().statement_to_plan(DFStatement::Statement(Box::new(SqlStatement::CreateTable(ct)))).await?;
        let LogicalPlan::Ddl(DdlStatement::CreateMemoryTable(create)) = plan else {
            return Err(SqlError::Plan("CREATE TABLE: this form is not supported; list the columns".into()));
        };
        if !create.column_defaults.is_empty() {
            return Err(SqlError::Internal("column DEFAULT left in the statement after they were taken out".into()));
        }
        crate::column_defaults::check_defaults(&self.ctx.state(), create.input.schema().as_arrow(), &defaults).await?;
        let name = create.name.table().to_string();
        let columns = create
            .input
            .schema()
            .fields()
            .iter()
            .map(|f| Ok(ColumnDef { name: f.name().clone(), column_type: ColumnType::from_arrow(f.name(), f.data_type())?, nullable: f.is_nullable() }))
            .collect::<Result<Vec<_>, SqlError>>()?;
        let w = self.ensure_writer()?;
        let mut new = crate::dml::new_table(name, columns, options, if_not_exists);
        new.indexes = keys;
        new.column_defaults = defaults.defaults;
        new.sequences = defaults.sequences;
        let table = w.create_table(new)?;
        self.register_tables(&w.catalog()?)?;
        status_output(text, format!("table {} ({} partitions, hashed on {})", table.name, table.partitions.len(), table.partition_by), started)
    }

    /// ALTER TABLE's column and name changes (`alter.rs`; the write path's `alter_table`).
    async fn alter_columns(&self, at: &datafusion::sql::sqlparser::ast::AlterTable, change: crate::alter::ColumnChange, text: String) -> Result<QueryOutput, SqlError> {
        use crate::alter::ColumnChange;
        use flashscan_write::{AlterOutcome, Alteration};
        let started = Instant::now();
        let w = self.ensure_writer()?;
        let name = crate::index_ddl::bare_name(&at.name);
        let catalog = w.catalog()?;
        let Some(table) = catalog.tables.values().find(|t| t.name.eq_ignore_ascii_case(&name)).cloned() else {
            if at.if_exists && catalog.view(&name).is_none() {
                return status_output(text, format!("relation \"{name}\" does not exist, skipping"), started);
            }
            if catalog.view(&name).is_some() {
                return Err(SqlError::Plan(format!("{name} is a view, and ALTER TABLE changes tables: CREATE OR REPLACE VIEW {name} AS … changes a view (ALTER VIEW is not supported)")));
            }
            let known = catalog.tables.keys().cloned().collect::<Vec<_>>().join(", ");
            return Err(SqlError::from(flashscan_write::WriteError::from(flashscan_storage::StorageError::UnknownTable { name, known })));
        };
        let state = self.ctx.state();
        let outcome = match change {
            ColumnChange::Add { column, if_not_exists } => {
                let added = crate::alter::added_column(&state, &table.name, &column).await?;
                let (data_type, fill) = (added.column.column_type.arrow_type(), added.fill.clone());
                let values = move |n: usize| {
                    fill.values(n).map_err(|e| flashscan_storage::StorageError::InvalidArgument(format!("the new column's values ({data_type}) for {n} rows: {}", crate::error::one_line(&e.to_string()))))
                };
                let fill = match added.fill {
                    crate::alter::AddedFill::Sequence { name, meta } => flashscan_write::ColumnFill::Sequence { name, meta },
                    _ => flashscan_write::ColumnFill::Values(&values),
                };
                w.alter_table(&table.name, Alteration::AddColumn { column: added.column, default: added.default, if_not_exists, fill })?
            }
            ColumnChange::Drop { column, if_exists } => w.alter_table(&table.name, Alteration::DropColumn { column, if_exists })?,
            ColumnChange::Rename { from, to } => w.alter_table(&table.name, Alteration::RenameColumn { from, to })?,
            ColumnChange::SetDefault { column, default } => {
                let default = match default {
                    Some(e) => Some(crate::alter::checked_default(&state, &table, &column, &e).await?),
                    None => None,
                };
                w.alter_table(&table.name, Alteration::SetDefault { column, default })?
            }
            ColumnChange::RenameTable { to } => w.alter_table(&table.name, Alteration::RenameTable { to })?,
            ColumnChange::Change { column, data_type, nullable } => {
                let column_type = match data_type {
                    Some(t) => Some(crate::alter::planned_type(&state, &table.name, &t).await?),
                    None => None,
                };
                w.alter_table(&table.name, Alteration::ChangeColumn { column, column_type, nullable })?
            }
        };
        self.register_tables(&w.catalog()?)?;
        let (AlterOutcome::Done(message) | AlterOutcome::Skipped(message)) = outcome;
        status_output(text, message, started)
    }

    /// CREATE [OR REPLACE] VIEW: the query planned now (an error here is the statement's),
    /// then the view into the catalog in one commit and registered (`views.rs`).
    async fn create_view(&self, cv: &datafusion::sql::sqlparser::ast::CreateView, text: String) -> Result<QueryOutput, SqlError> {
        let started = Instant::now();
        let request = crate::views::ViewRequest::of(cv)?;
        if self.in_transaction() {
            return Err(SqlError::Plan("CREATE VIEW inside BEGIN … COMMIT is not supported (it commits on its own): run it outside the transaction".into()));
        }
        let w = self.ensure_writer()?;
        let catalog = w.catalog()?;
        if request.if_not_exists && catalog.view(&request.name).is_some() {
            return status_output(text, format!("view {} exists", request.name), started);
        }
        let state = self.ctx.state();
        let plan = crate::views::plan_view_query(&state, &request.name, &request.query_sql, &request.declared_columns).await.map_err(|e| self.explain_error(e))?;
        let reads = crate::views::relations_read(&state, &request.query_sql, &catalog)?;
        let entry = crate::views::entry_of(&request, &plan, reads);
        let columns = entry.columns.len();
        w.create_view(entry, request.or_replace)?;
        self.register_tables(&w.catalog()?)?;
        status_output(text, format!("view {} ({columns} columns)", request.name), started)
    }

    /// TRUNCATE [TABLE] t [, …]: every table emptied in one catalog commit (the write
    /// path's `truncate_tables`). Options PostgreSQL has and flashscan would not honour
    /// (partitions, CASCADE into referencing tables, identity sequences) are refused.
    async fn truncate(&self, truncate: &datafusion::sql::sqlparser::ast::Truncate, text: String) -> Result<QueryOutput, SqlError> {
        use datafusion::sql::sqlparser::ast::{CascadeOption, TruncateIdentityOption};
        let started = Instant::now();
        if truncate.partitions.is_some() || truncate.on_cluster.is_some() {
            return Err(SqlError::Plan("TRUNCATE … PARTITION / ON CLUSTER is not supported: TRUNCATE the whole table".into()));
        }
        if matches!(truncate.cascade, Some(CascadeOption::Cascade)) {
            return Err(SqlError::Plan("TRUNCATE … CASCADE is not supported: flashscan has no foreign keys, so name every table to empty".into()));
        }
        let restart_identity = matches!(truncate.identity, Some(TruncateIdentityOption::Restart));
        let names: Vec<String> = truncate.table_names.iter().map(|t| t.name.0.last().map(|p| p.to_string()).unwrap_or_default().trim_matches('"').to_string()).collect();
        let w = self.ensure_writer()?;
        let known = w.catalog()?;
        let names: Vec<&str> = if truncate.if_exists { names.iter().map(String::as_str).filter(|n| known.tables.keys().any(|k| k.eq_ignore_ascii_case(n))).collect() } else { names.iter().map(String::as_str).collect() };
        if !names.is_empty() {
            w.truncate_tables_restarting(&names, restart_identity)?;
        }
        self.register_tables(&w.catalog()?)?;
        status_output(text, format!("truncated {}", if names.is_empty() { "nothing".to_string() } else { names.join(", ") }), started)
    }

    /// Adds what the user needs to fix an unknown table: the tables there are.
    fn explain_error(&self, error: SqlError) -> SqlError {
        match error {
            SqlError::Plan(m) if m.contains("table '") && m.contains("not found") => {
                let names = self.table_names();
                let known = if names.is_empty() { "(none)".to_string() } else { names.join(", ") };
                SqlError::Plan(format!("{m}; tables in {}: {known}", self.db_dir.display()))
            }
            // DataFusion's "could not find config namespace for key \"datestyle\"" says
            // neither what is settable here nor where PostgreSQL's settings are.
            other if other.to_string().contains("could not find config namespace for key") => {
                let key = other.to_string().split('"').nth(1).unwrap_or("that setting").to_string();
                SqlError::Plan(format!(
                    "SET {key}: not a setting of `flashscan sql`, which takes datafusion.* and flashscan.* (SHOW ALL lists them); PostgreSQL's session settings (synchronous_commit, DateStyle, search_path …) are taken over the wire by `flashscan serve`"
                ))
            }
            other => other,
        }
    }
}

/// A one-row answer for DDL: what it did.
/// `SET flashscan.slices` or `SET flashscan.views`: settings the tables are registered with
/// (`FlashscanSettings::TABLE_KEYS`).
fn sets_a_table_setting(plan: &LogicalPlan) -> bool {
    let LogicalPlan::Statement(datafusion::logical_expr::Statement::SetVariable(set)) = plan else { return false };
    let key = set.variable.to_ascii_lowercase();
    FlashscanSettings::TABLE_KEYS.iter().any(|k| key.strip_prefix("flashscan.") == Some(k))
}

fn status_output(statement: String, status: String, started: Instant) -> Result<QueryOutput, SqlError> {
    let schema = Arc::new(arrow::datatypes::Schema::new(vec![arrow::datatypes::Field::new("status", arrow::datatypes::DataType::Utf8, false)]));
    let batch = RecordBatch::try_new(schema.clone(), vec![Arc::new(arrow::array::StringArray::from(vec![status]))]).map_err(|e| SqlError::Internal(e.to_string()))?;
    Ok(QueryOutput { statement, schema, batches: vec![batch], elapsed_s: started.elapsed().as_secs_f64(), scans: BTreeMap::new(), warnings: Vec::new() })
}
