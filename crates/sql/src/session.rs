//! A SQL session over one flashscan database: every table registered under its name, the
//! statements of a text run one after another, and each result returned with the scan
//! figures of its tables.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;
use datafusion::prelude::{SessionConfig, SessionContext};
use datafusion::sql::parser::DFParser;
use flashscan_storage::Database;

use crate::column_statistics::column_store_statistics;
use crate::error::SqlError;
use crate::metrics::{total_of, ScanLog, TableScanFigures};
use crate::reader::{ReadOptions, UnitFigures};
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
}

impl QueryOutput {
    pub fn row_count(&self) -> usize {
        self.batches.iter().map(|b| b.num_rows()).sum()
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
    table_names: Vec<String>,
}

impl FlashscanSession {
    /// Opens the database and registers each of its tables. Table names are registered in
    /// lower case, as SQL folds unquoted names to lower case.
    pub fn open(db_dir: &Path, options: SessionOptions) -> Result<FlashscanSession, SqlError> {
        let db = Database::open(db_dir)?;
        let mut config = SessionConfig::new().with_information_schema(true);
        if let Some(n) = options.target_partitions {
            if n == 0 {
                return Err(SqlError::InvalidArgument("target partitions must be at least 1".into()));
            }
            config = config.with_target_partitions(n);
        }
        let ctx = SessionContext::new_with_config(config);
        let scan_log = ScanLog::new();
        let mut table_names = Vec::new();
        for table in db.tables() {
            let name = table.name.to_lowercase();
            let mut provider = FlashscanTable::new(table.clone(), db.dir().to_path_buf(), options.read, scan_log.clone());
            if table.is_column_store() {
                // A directory that does not read or verify leaves the table without
                // statistics; its scan reads the same directories and reports the error.
                if let Ok(stats) = column_store_statistics(db.dir(), table) {
                    provider = provider.with_column_statistics(stats.columns).with_partition_ranges(stats.partition_ranges);
                }
            }
            ctx.register_table(name.as_str(), Arc::new(provider))?;
            table_names.push(name);
        }
        table_names.sort();
        Ok(FlashscanSession { ctx, scan_log, db_dir: db_dir.to_path_buf(), table_names })
    }

    pub fn context(&self) -> &SessionContext {
        &self.ctx
    }

    pub fn db_dir(&self) -> &Path {
        &self.db_dir
    }

    pub fn table_names(&self) -> &[String] {
        &self.table_names
    }

    /// Runs every statement of `sql` in order and returns their answers; stops at the
    /// first error.
    pub async fn run(&self, sql: &str) -> Result<Vec<QueryOutput>, SqlError> {
        let statements = DFParser::parse_sql(sql).map_err(SqlError::from)?;
        if statements.is_empty() {
            return Err(SqlError::Syntax("no statement to run".into()));
        }
        let mut outputs = Vec::with_capacity(statements.len());
        for statement in statements {
            outputs.push(self.run_statement(statement).await?);
        }
        Ok(outputs)
    }

    /// Runs one statement (the last answer when the text holds several).
    pub async fn run_one(&self, sql: &str) -> Result<QueryOutput, SqlError> {
        let mut outputs = self.run(sql).await?;
        outputs.pop().ok_or_else(|| SqlError::Syntax("no statement to run".into()))
    }

    async fn run_statement(&self, statement: datafusion::sql::parser::Statement) -> Result<QueryOutput, SqlError> {
        if let datafusion::sql::parser::Statement::CopyTo(copy) = statement {
            return self.run_copy(copy).await;
        }
        let text = statement.to_string();
        // Figures of an earlier, failed statement must not count against this one.
        self.scan_log.take();
        let started = Instant::now();
        let result = async {
            let plan = self.ctx.state().statement_to_plan(statement).await?;
            let frame = self.ctx.execute_logical_plan(plan).await?;
            let schema = frame.schema().inner().clone();
            let batches = frame.collect().await?;
            Ok::<_, datafusion::error::DataFusionError>((schema, batches))
        }
        .await;
        let elapsed_s = started.elapsed().as_secs_f64();
        let scans = self.scan_log.take();
        let (schema, batches) = result.map_err(|e| self.explain_error(SqlError::from(e)))?;
        Ok(QueryOutput { statement: text, schema, batches, elapsed_s, scans })
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
        let result = async {
            let plan = self.ctx.state().statement_to_plan(statement).await.map_err(SqlError::from)?;
            let frame = self.ctx.execute_logical_plan(plan).await.map_err(SqlError::from)?;
            let mut stream = frame.execute_stream().await.map_err(SqlError::from)?;
            let mut writer = ExportWriter::create(&target, format, stream.schema())?;
            while let Some(batch) = stream.next().await {
                writer.write(&batch.map_err(SqlError::from)?)?;
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
        Ok(QueryOutput { statement: text, schema, batches: vec![batch], elapsed_s, scans })
    }

    /// Adds what the user needs to fix an unknown table: the tables there are.
    fn explain_error(&self, error: SqlError) -> SqlError {
        match error {
            SqlError::Plan(m) if m.contains("table '") && m.contains("not found") => {
                let known = if self.table_names.is_empty() { "(none)".to_string() } else { self.table_names.join(", ") };
                SqlError::Plan(format!("{m}; tables in {}: {known}", self.db_dir.display()))
            }
            other => other,
        }
    }
}
