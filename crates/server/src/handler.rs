//! Queries over the wire: the simple protocol (text, several statements) and the extended
//! protocol (Parse/Bind/Describe/Execute, parameters, prepared statements), both running
//! through one path: admission, a per-query DataFusion context with its memory pool,
//! `statement_timeout`, cancel, and rows streamed to the client batch by batch.

use std::fmt::Debug;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow::array::{Array, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow_pg::encoder::{encode_value, Encoder};
use async_trait::async_trait;
use datafusion::common::ParamValues;
use datafusion::error::DataFusionError;
use datafusion::logical_expr::dml::InsertOp;
use datafusion::logical_expr::{LogicalPlan, WriteOp};
use datafusion::execution::context::SQLOptions;
use futures::future::{BoxFuture, Fuse};
use futures::{stream, FutureExt, Sink, Stream, StreamExt};
use pgwire::api::portal::{Format, Portal};
use pgwire::api::query::{ExtendedQueryHandler, SimpleQueryHandler};
use pgwire::api::results::{
    CopyCsvOptions, CopyEncoder, CopyResponse, CopyTextOptions, DescribePortalResponse, DescribeStatementResponse, FieldInfo,
    QueryResponse, Response, Tag,
};
use pgwire::api::stmt::{QueryParser, StoredStatement};
use pgwire::api::store::PortalStore;
use pgwire::api::{ClientInfo, ClientPortalStore, Type};
use pgwire::error::{ErrorInfo, PgWireError, PgWireResult};
use pgwire::messages::data::DataRow;
use pgwire::messages::PgWireBackendMessage;
use pgwire::api::copy::CopyHandler;
use pgwire::messages::copy::{CopyData, CopyDone, CopyFail};

use crate::admission::{AdmissionRefusal, QuerySlot};
use crate::cancel::QueryCancel;
use crate::config::parse_duration_setting;
use crate::error::{pg_error, pg_fatal, sql_error_to_pg, sqlstate};
use crate::hangup;
use crate::query_runtime::QueryStream;
use crate::fast_insert::FastInsert;
use crate::params::{decode_params, pg_type_for_param};
use crate::plan_reuse::KeptPlan;
use crate::plan_shapes::ShapeEntry;
use crate::shared::Shared;
use crate::startup::{Backend, DurationSetting};
use crate::cursors::{cursor_sqlstate, Cursor, HELD_CURSOR_BYTES_MAX};
use crate::statement::{classify, split_statements, Command, CopyFromOptions, DeclareCursor, FetchCount};
use crate::writes::{CopyIn, Transaction};

/// A statement parsed once (Parse) and run many times (Bind/Execute).
#[derive(Debug)]
pub struct Prepared {
    pub command: Command,
    /// For `Command::Sql`: the plan with its `$n` placeholders.
    pub plan: Option<LogicalPlan>,
    /// DataFusion's types for `$1..$n` (None where it could not infer one).
    pub param_types: Vec<Option<DataType>>,
    /// The result's columns; None for statements without rows.
    pub schema: Option<SchemaRef>,
    /// For `INSERT … VALUES` of parameters and literals: the rows' recipe, so Execute
    /// commits without DataFusion (`fast_insert.rs`).
    pub fast: Option<FastInsert>,
    /// `Shared::catalog_generation` before `plan` was made. The plan holds the tables it
    /// read as they were then: after CREATE/DROP TABLE or VIEW it is planned again from
    /// the text before it runs (`Replanned`).
    pub generation: u64,
    /// The plan made again after DDL, and its generation; replaced after the next DDL.
    pub replanned: std::sync::Mutex<Option<Replanned>>,
}

/// A prepared statement's plan made again from its text in a later catalog generation.
#[derive(Debug, Clone)]
pub struct Replanned {
    pub generation: u64,
    pub plan: LogicalPlan,
    pub fast: Option<FastInsert>,
}

/// PostgreSQL's answer when a prepared statement's table changed its columns under it.
fn result_type_changed() -> PgWireError {
    pg_error(sqlstate::FEATURE_NOT_SUPPORTED, "cached plan must not change result type")
}

pub type Statement = Arc<Prepared>;

/// Which protocol a statement came by: a BINARY cursor's FETCH answers in binary over the
/// simple one; over the extended one, Bind's result formats decide (as in PostgreSQL).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Protocol {
    Simple,
    Extended,
}

/// Whether a statement's plan may be kept and looked up by its text (`plan_reuse.rs`):
/// the simple protocol's statements and prepared ones without parameters.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Reuse {
    ByText,
    No,
}

/// What a query runs: a logical plan to plan now (kept afterwards under the text and
/// catalog generation given, if it is a constant row), or a plan kept before.
pub(crate) enum ToRun<'a> {
    Plan { plan: LogicalPlan, keep_as: Option<(&'a str, u64)> },
    Kept(KeptPlan),
}

impl ToRun<'_> {
    fn plan(plan: LogicalPlan) -> ToRun<'static> {
        ToRun::Plan { plan, keep_as: None }
    }
}

pub struct QueryHandler {
    pub shared: Arc<Shared>,
    parser: Arc<Parser>,
}

pub struct Parser {
    shared: Arc<Shared>,
}

impl QueryHandler {
    pub fn new(shared: Arc<Shared>) -> QueryHandler {
        QueryHandler { parser: Arc::new(Parser { shared: shared.clone() }), shared }
    }
}

fn backend_of<C: ClientInfo>(client: &C) -> PgWireResult<Arc<Backend>> {
    client.session_extensions().get::<Backend>().ok_or_else(|| pg_error(sqlstate::INTERNAL_ERROR, "connection has no backend state"))
}

fn single_text_column(name: &str, value: &str) -> RecordBatch {
    let schema = Arc::new(Schema::new(vec![Field::new(name, DataType::Utf8, true)]));
    // One column of one row always matches its schema.
    RecordBatch::try_new(schema.clone(), vec![Arc::new(StringArray::from(vec![value]))]).unwrap_or_else(|_| RecordBatch::new_empty(schema))
}

fn schema_of_show(name: &str) -> SchemaRef {
    Arc::new(Schema::new(vec![Field::new(name, DataType::Utf8, true)]))
}

/// Plans a SQL statement against the shared tables: queries, and INSERT when the
/// database takes writes (no other DDL/DML, no `SET datafusion.*`: one process owns the
/// files, and CREATE/DROP TABLE and TRUNCATE go through the write path, see `Command::Ddl`).
pub async fn plan_sql(shared: &Shared, backend: &Backend, sql: &str) -> PgWireResult<LogicalPlan> {
    let _no_ddl_meanwhile = shared.database.ddl.read().await;
    let settings = backend.settings().clone();
    let to_pg = |e: datafusion::error::DataFusionError| sql_error_to_pg(&flashscan_sql::SqlError::from(e));
    // A statement of a shape planned before takes that plan with its own literals
    // (`plan_shapes.rs`): no parsing, no planning, no checks (they passed for the shape).
    let generation = shared.catalog_generation();
    let shape = if settings.plan_shapes { crate::plan_shapes::shape_of(sql) } else { None };
    // `Err`: no room to keep another shape; the statement is only planned.
    let known = match &shape {
        Some(s) => backend.planning.shape(&settings, generation, &s.key),
        None => Ok(None),
    };
    if let (Some(shape), Ok(Some(ShapeEntry::Learned(kept)))) = (&shape, &known) {
        if let Some(bound) = kept.bind(&shape.literals) {
            shared.shapes.reused.fetch_add(1, Relaxed);
            return bound.map_err(to_pg);
        }
    }
    let own = backend.own_changes(shared.database.write.as_deref())?;
    let state = backend.planning.lease(shared, &settings, backend.pid, own.as_deref());
    let plan = plan_text(shared, &state, sql).await?;
    if let (Some(shape), Ok(None)) = (&shape, &known) {
        let learned = crate::plan_shapes::ShapePlan::learn(shape, &plan, |text| async move { plan_text(shared, &state, &text).await.ok() }).await;
        let entry = match learned {
            Ok(p) => {
                shared.shapes.learned.fetch_add(1, Relaxed);
                Some(ShapeEntry::Learned(p))
            }
            Err(crate::plan_shapes::NotLearned::Shape) => {
                shared.shapes.refused.fetch_add(1, Relaxed);
                Some(ShapeEntry::Refused)
            }
            Err(crate::plan_shapes::NotLearned::Statement) => None,
        };
        if let Some(entry) = entry {
            backend.planning.keep_shape(&settings, generation, &shape.key, entry);
        }
    }
    Ok(plan)
}

/// `sql` parsed, planned and checked (what `plan_sql` does for a shape it has not seen).
async fn plan_text(shared: &Shared, state: &datafusion::execution::session_state::SessionState, sql: &str) -> PgWireResult<LogicalPlan> {
    let to_pg = |e: datafusion::error::DataFusionError| sql_error_to_pg(&flashscan_sql::SqlError::from(e));
    let dialect = state.config().options().sql_parser.dialect;
    let mut statement = state.sql_to_statement(sql, &dialect).map_err(to_pg)?;
    // INSERT: `DEFAULT` written for a value, identity columns (`flashscan_sql::column_defaults`).
    if let (datafusion::sql::parser::Statement::Statement(s), Some(write)) = (&mut statement, shared.database.write.as_ref()) {
        if matches!(s.as_ref(), datafusion::sql::sqlparser::ast::Statement::Insert(_)) {
            flashscan_sql::column_defaults::prepare_insert(write, s).map_err(|e| sql_error_to_pg(&e))?;
        }
    }
    // RETURNING and ON CONFLICT, which DataFusion refuses: planned after the change.
    let returning = flashscan_sql::returning::take_returning(&mut statement);
    let mut on_conflict = flashscan_sql::returning::take_on_conflict(&mut statement).map_err(|e| sql_error_to_pg(&e))?;
    // DO UPDATE's UPDATE planned now, with the INSERT: bound per colliding row at Execute.
    if let Some(update) = on_conflict.as_mut().and_then(|c| c.update.as_mut()) {
        update.planned = Some(Box::pin(plan_text(shared, state, &update.sql)).await?);
    }
    // The forms of UPDATE / DELETE / MERGE flashscan refuses, as `flashscan sql` refuses
    // them (one place: change.rs), before DataFusion's plan folds them away (it keeps
    // only the last of `SET x = 1, x = 2`).
    flashscan_sql::change::change_target(&statement).map_err(|e| sql_error_to_pg(&e))?;
    let plan = crate::pg_catalog::statement_to_plan(state, statement).await.map_err(to_pg)?;
    if let LogicalPlan::Dml(dml) = &plan {
        let target = dml.table_name.table().to_string();
        if shared.database.session.is_view(&target) {
            let what = match dml.op {
                WriteOp::Insert(_) => "INSERT into",
                WriteOp::Update => "UPDATE",
                WriteOp::Delete => "DELETE from",
                _ => "write into",
            };
            return Err(sql_error_to_pg(&flashscan_sql::views::refuse_write_into_view(what, &target)));
        }
    }
    let insert = is_insert(&plan);
    let change = flashscan_sql::change::change_kind(&plan).is_some();
    if (insert || change) && shared.database.write.is_none() {
        return Err(read_only_database(shared));
    }
    SQLOptions::new()
        .with_allow_ddl(false)
        .with_allow_dml(insert || change)
        .with_allow_statements(false)
        .verify_plan(&plan)
        .map_err(|e| pg_error(sqlstate::READ_ONLY, format!("flashscan serve runs queries, INSERT, COPY FROM STDIN, CREATE TABLE and DROP TABLE only: {}", flashscan_sql::error::one_line(&e.message()))))?;
    match (returning, on_conflict) {
        (None, None) => Ok(plan),
        (items, on_conflict) => flashscan_sql::returning::wrap(state, plan, items.as_deref().unwrap_or_default(), on_conflict).map_err(|e| sql_error_to_pg(&e)),
    }
}

/// The connection's open block's transaction and its statement count, taken out of the
/// connection while a statement runs (its lock is not held across an await; the caller
/// puts it back); outside a block, a new transaction (None: the statement commits it).
fn take_transaction(backend: &Backend) -> (flashscan_write::Transaction, Option<u64>) {
    match std::mem::take(&mut *backend.transaction()) {
        Transaction::Open { txn, statements } => (txn, Some(statements)),
        _ => (new_transaction(backend), None),
    }
}

/// A statement's own transaction, at the connection's isolation level (a new one takes any).
fn new_transaction(backend: &Backend) -> flashscan_write::Transaction {
    let mut txn = flashscan_write::Transaction::new();
    let _ = txn.set_isolation(backend.default_isolation());
    txn
}

/// ON CONFLICT DO UPDATE: a key proposed twice by one statement would change its row twice
/// (PostgreSQL's 21000).
fn refuse_repeated_keys(batches: &[RecordBatch], arbiter: &[String]) -> PgWireResult<()> {
    use arrow::row::{RowConverter, SortField};
    let Some(first) = batches.first() else { return Ok(()) };
    let fields: Vec<SortField> = arbiter.iter().filter_map(|c| first.schema().field_with_name(c).ok().map(|f| SortField::new(f.data_type().clone()))).collect();
    if fields.len() != arbiter.len() {
        return Ok(());
    }
    let converter = RowConverter::new(fields).map_err(|e| pg_error(sqlstate::INTERNAL_ERROR, e.to_string()))?;
    let mut seen = std::collections::HashSet::new();
    for b in batches {
        let columns: Vec<arrow::array::ArrayRef> = arbiter.iter().filter_map(|c| b.column_by_name(c).cloned()).collect();
        let rows = converter.convert_columns(&columns).map_err(|e| pg_error(sqlstate::INTERNAL_ERROR, e.to_string()))?;
        for (i, r) in rows.iter().enumerate() {
            // A NULL in the key collides with nothing (PostgreSQL's rule).
            if columns.iter().any(|c| c.is_null(i)) {
                continue;
            }
            if !seen.insert(r.as_ref().to_vec()) {
                return Err(pg_error(
                    sqlstate::CARDINALITY_VIOLATION,
                    "ON CONFLICT DO UPDATE command cannot affect row a second time: the statement proposes one key twice; give each key once",
                ));
            }
        }
    }
    Ok(())
}

/// A RETURNING node's answer schema (Arrow).
fn node_schema(node: &flashscan_sql::returning::ReturningNode) -> arrow::datatypes::SchemaRef {
    use datafusion::logical_expr::UserDefinedLogicalNodeCore;
    node.schema().inner().clone()
}

fn is_insert(plan: &LogicalPlan) -> bool {
    matches!(plan, LogicalPlan::Dml(d) if matches!(d.op, WriteOp::Insert(_)))
}

/// The refusal of a write on a database without a log.
pub fn read_only_database(shared: &Shared) -> PgWireError {
    pg_error(
        sqlstate::READ_ONLY,
        format!(
            "{} takes no writes: it was made by `flashscan load` and has no write-ahead log; make a database with `flashscan init` for CREATE TABLE, INSERT and COPY FROM",
            shared.database.session.db_dir().display()
        ),
    )
}

/// For an INSERT's input: which table column each VALUES column (`column1`, …) fills,
/// read from the projection DataFusion puts over the VALUES.
fn value_column_names(input: &LogicalPlan) -> Vec<(String, String)> {
    let LogicalPlan::Projection(p) = input else { return Vec::new() };
    let mut out = Vec::new();
    for (i, e) in p.expr.iter().enumerate() {
        for c in e.column_refs() {
            if c.name.starts_with("column") {
                out.push((c.name.clone(), p.schema.field(i).name().clone()));
            }
        }
    }
    out
}

static NOT_NULLABLE_RE: std::sync::LazyLock<regex::Regex> =
    std::sync::LazyLock::new(|| regex::Regex::new(r"Column '([^']+)' is declared as non-nullable but contains null values").expect("static regex"));

/// DataFusion's "Column 'column1' is declared as non-nullable" as PostgreSQL says it:
/// SQLSTATE 23502 naming the table's column.
fn not_null_error(e: PgWireError, table: &str, names: &[(String, String)]) -> PgWireError {
    let PgWireError::UserError(info) = &e else { return e };
    let Some(c) = NOT_NULLABLE_RE.captures(&info.message) else { return e };
    let column = names.iter().find(|(v, _)| *v == c[1]).map(|(_, n)| n.clone()).unwrap_or_else(|| c[1].to_string());
    pg_error(sqlstate::NOT_NULL_VIOLATION, format!("null value in column \"{column}\" of relation \"{table}\" violates not-null constraint"))
}

fn insert_tag(rows: u64) -> Response {
    Response::Execution(Tag::new("INSERT").with_oid(0).with_rows(rows as usize))
}

fn param_types_of(plan: &LogicalPlan) -> PgWireResult<Vec<Option<DataType>>> {
    let by_name = plan.get_parameter_types().map_err(|e| sql_error_to_pg(&flashscan_sql::SqlError::from(e)))?;
    let mut indexed: Vec<(usize, Option<DataType>)> =
        by_name.into_iter().filter_map(|(name, t)| name.trim_start_matches('$').parse::<usize>().ok().map(|i| (i, t))).collect();
    indexed.sort_by_key(|(i, _)| *i);
    let n = indexed.last().map(|(i, _)| *i).unwrap_or(0);
    let mut out = vec![None; n];
    for (i, t) in indexed {
        if i >= 1 {
            out[i - 1] = t;
        }
    }
    crate::params::type_by_casts(plan, &mut out);
    Ok(out)
}

fn fields_of(schema: &Schema, format: &Format) -> PgWireResult<Arc<Vec<FieldInfo>>> {
    // A column whose plan name was made unique goes out under the name the client wrote
    // (`SELECT a AS c, b AS c`: flashscan_sql::output_names).
    let renamed = schema.fields().iter().any(|f| f.metadata().contains_key(flashscan_sql::output_names::OUTPUT_NAME_METADATA_KEY));
    let mut fields = if renamed {
        let fields: Vec<Field> = schema.fields().iter().map(|f| f.as_ref().clone().with_name(flashscan_sql::output_names::wire_name(f))).collect();
        arrow_pg::datatypes::arrow_schema_to_pg_fields(&Schema::new(fields), format, None)?
    } else {
        arrow_pg::datatypes::arrow_schema_to_pg_fields(schema, format, None)?
    };
    // json text (`json_build_object`, pg_json.rs) is described as json, so drivers decode it.
    for (info, field) in fields.iter_mut().zip(schema.fields()) {
        if crate::pg_json::is_json(field) {
            *info = FieldInfo::new(info.name().to_string(), info.table_id(), info.column_id(), pgwire::api::Type::JSON, info.format());
        }
    }
    Ok(Arc::new(fields))
}

/// Encodes one batch's rows with any pgwire encoder (data rows or COPY lines).
fn encode_rows<E: Encoder>(encoder: &mut E, batch: &RecordBatch, fields: &[FieldInfo]) -> PgWireResult<Vec<E::Item>> {
    let schema = batch.schema();
    // Integer columns sent as text are written with itoa (`IntText`), the rest by arrow-pg.
    let integers: Vec<Option<Int64Array>> = fields
        .iter()
        .enumerate()
        .map(|(col, pg_field)| {
            let column = batch.column(col);
            let text = pg_field.format() == pgwire::api::results::FieldFormat::Text;
            // Only plain integer types: an oid alias (regclass …) prints otherwise.
            let integer = matches!(column.data_type(), DataType::Int64 | DataType::Int32 | DataType::Int16)
                && matches!(*pg_field.datatype(), pgwire::api::Type::INT2 | pgwire::api::Type::INT4 | pgwire::api::Type::INT8);
            (text && integer).then(|| arrow::compute::cast(column, &DataType::Int64).ok()).flatten().and_then(|a| a.as_any().downcast_ref::<Int64Array>().cloned())
        })
        .collect();
    let mut out = Vec::with_capacity(batch.num_rows());
    for row in 0..batch.num_rows() {
        for (col, pg_field) in fields.iter().enumerate() {
            match &integers[col] {
                Some(values) => encoder.encode_field(&IntText((!values.is_null(row)).then(|| values.value(row))), pg_field)?,
                None => encode_value(encoder, batch.column(col), row, schema.field(col), pg_field)?,
            }
        }
        out.push(encoder.take_row());
    }
    Ok(out)
}

/// Bytes reserved at once for the rows an encoder writes (each row is split off them).
const ROWS_BUFFER_BYTES: usize = 64 * 1024;

/// DataRows written into one large buffer and split off it. pgwire's `DataRowEncoder`
/// starts from 128 bytes and, once rows split off share that allocation, allocates anew
/// whenever a row outgrows what is left — about one allocation per row or two of a
/// narrow result (mimalloc's alloc and free ~6 % of the server's CPU streaming 1 M rows,
/// perf, session 25). Here one allocation serves a few hundred rows. The cell encoding is
/// pgwire's (`encode_field_with_type_and_format`): a length, -1 for NULL.
#[derive(Default)]
pub(crate) struct RowEncoder {
    buffer: bytes::BytesMut,
    fields: i16,
}

impl Encoder for RowEncoder {
    type Item = DataRow;

    fn encode_field<T>(&mut self, value: &T, pg_field: &FieldInfo) -> PgWireResult<()>
    where
        T: postgres_types::ToSql + pgwire::types::ToSqlText + Sized,
    {
        use bytes::BufMut;
        if self.buffer.capacity() - self.buffer.len() < 1024 {
            self.buffer.reserve(ROWS_BUFFER_BYTES);
        }
        let at = self.buffer.len();
        self.buffer.put_i32(-1);
        let is_null = if pg_field.format() == pgwire::api::results::FieldFormat::Text {
            value.to_sql_text(pg_field.datatype(), &mut self.buffer, pg_field.format_options())?
        } else {
            value.to_sql(pg_field.datatype(), &mut self.buffer)?
        };
        if let postgres_types::IsNull::No = is_null {
            let length = (self.buffer.len() - at - 4) as i32;
            self.buffer[at..at + 4].copy_from_slice(&length.to_be_bytes());
        }
        self.fields += 1;
        Ok(())
    }

    fn take_row(&mut self) -> DataRow {
        let row = DataRow::new(self.buffer.split(), self.fields);
        self.fields = 0;
        row
    }
}

/// An integer cell sent as text, written by itoa: pgwire's text form of an integer goes
/// through `core::fmt` (`write!`), which was ~6 % of the server's CPU streaming a result
/// of two bigint columns and a text (perf of `bench/cursors/run.py`, session 25). The same
/// digits; NULL as NULL; in binary format it is the integer's own encoding.
#[derive(Debug)]
struct IntText(Option<i64>);

impl pgwire::types::ToSqlText for IntText {
    fn to_sql_text(&self, _ty: &pgwire::api::Type, out: &mut bytes::BytesMut, _options: &pgwire::types::format::FormatOptions) -> Result<postgres_types::IsNull, Box<dyn std::error::Error + Sync + Send>> {
        match self.0 {
            None => Ok(postgres_types::IsNull::Yes),
            Some(v) => {
                out.extend_from_slice(itoa::Buffer::new().format(v).as_bytes());
                Ok(postgres_types::IsNull::No)
            }
        }
    }
}

impl postgres_types::ToSql for IntText {
    fn to_sql(&self, ty: &pgwire::api::Type, out: &mut bytes::BytesMut) -> Result<postgres_types::IsNull, Box<dyn std::error::Error + Sync + Send>> {
        match self.0 {
            None => Ok(postgres_types::IsNull::Yes),
            // Binary: the width the column's type has on the wire.
            Some(v) => match *ty {
                pgwire::api::Type::INT2 => i16::try_from(v)?.to_sql(ty, out),
                pgwire::api::Type::INT4 => i32::try_from(v)?.to_sql(ty, out),
                _ => v.to_sql(ty, out),
            },
        }
    }

    fn accepts(ty: &pgwire::api::Type) -> bool {
        matches!(*ty, pgwire::api::Type::INT2 | pgwire::api::Type::INT4 | pgwire::api::Type::INT8)
    }

    postgres_types::to_sql_checked!();
}

/// A running query: its batches, the slot it holds, and what may stop it.
pub(crate) struct Running {
    /// `None` until planned.
    batches: Option<QueryStream>,
    slot: Option<QuerySlot>,
    pub(crate) cancel: QueryCancel,
    deadline: Option<tokio::time::Instant>,
    timeout: Duration,
    shared: Arc<Shared>,
    started: Instant,
    /// Resolves when the client hangs up (`hangup.rs`); fused: pending once it resolved.
    hung_up: Fuse<BoxFuture<'static, ()>>,
}

impl Running {
    /// A later statement reads this query (FETCH from a cursor): cancel requests and
    /// `statement_timeout` are that statement's from now on.
    pub(crate) fn restart_for_statement(&mut self, backend: &Backend) {
        self.cancel = backend.cancel.start_query();
        self.timeout = backend.statement_timeout();
        self.deadline = (!self.timeout.is_zero()).then(|| tokio::time::Instant::now() + self.timeout);
    }

    pub(crate) async fn next_batch(&mut self) -> Option<PgWireResult<RecordBatch>> {
        let deadline = self.deadline;
        let timer = async move {
            match deadline {
                Some(d) => tokio::time::sleep_until(d).await,
                None => futures::future::pending::<()>().await,
            }
        };
        tokio::select! {
            r = next_of(&mut self.batches) => r.map(|r| r.map_err(|e| sql_error_to_pg(&flashscan_sql::SqlError::from(e)))),
            _ = self.cancel.canceled() => Some(Err(canceled_error())),
            _ = timer => Some(Err(timeout_error(self.timeout))),
            _ = &mut self.hung_up => {
                // Counted as canceled, like PostgreSQL's "connection to client lost".
                self.cancel.cancel();
                Some(Err(client_gone_error()))
            }
        }
    }

    /// The query ended (all rows, an error, or the client went away): free the slot, count.
    pub(crate) fn finish(&mut self, outcome: Outcome) {
        if let Some(slot) = self.slot.take() {
            drop(slot);
            let c = &self.shared.admission.counters;
            match outcome {
                Outcome::Done => c.queries_completed.fetch_add(1, Relaxed),
                Outcome::Failed => c.queries_failed.fetch_add(1, Relaxed),
                Outcome::Canceled => c.queries_canceled.fetch_add(1, Relaxed),
            };
            self.shared.sampler.record_query(self.started.elapsed());
        }
    }
}

async fn next_of(batches: &mut Option<QueryStream>) -> Option<Result<RecordBatch, DataFusionError>> {
    match batches {
        Some(b) => b.next().await,
        None => None,
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        // Dropped before its end: the client disconnected or stopped reading.
        self.finish(Outcome::Canceled);
    }
}

#[derive(Clone, Copy)]
pub(crate) enum Outcome {
    Done,
    Failed,
    Canceled,
}

fn canceled_error() -> PgWireError {
    pg_error(sqlstate::QUERY_CANCELED, "canceling statement due to user request")
}

/// Nobody reads it (the client is gone); it ends the query the way a cancel does.
fn client_gone_error() -> PgWireError {
    pg_fatal(sqlstate::CONNECTION_FAILURE, "terminating query: the client closed its connection")
}

fn timeout_error(t: Duration) -> PgWireError {
    pg_error(sqlstate::QUERY_CANCELED, format!("canceling statement due to statement timeout ({} ms)", t.as_millis()))
}

/// Where an encoded stream is: the query, whether it ended, and the encoder.
struct StreamState<E> {
    running: Running,
    ended: bool,
    encode: E,
}

/// Batches of encoded rows as a stream of rows, counted as sent. The state that makes a
/// batch moves once per batch: `stream::unfold` moves its whole state (and its future)
/// through every item it yields, and yielding rows one by one from it was ~10 % of the
/// server's CPU under a large result (perf of `bench/cursors/run.py`'s FETCH loop: memcpy
/// of the state in `Pin::set`, session 25).
fn rows_of<T: Send + 'static>(batches: impl Stream<Item = PgWireResult<Vec<T>>> + Send + 'static, shared: Arc<Shared>) -> impl Stream<Item = PgWireResult<T>> + Send + 'static {
    batches.flat_map(move |batch| {
        let rows: Vec<PgWireResult<T>> = match batch {
            Ok(rows) => {
                shared.admission.counters.rows_sent.fetch_add(rows.len() as u64, Relaxed);
                rows.into_iter().map(Ok).collect()
            }
            Err(e) => vec![Err(e)],
        };
        stream::iter(rows)
    })
}

/// Rows (or COPY lines) of a running query, encoded batch by batch as the client reads.
fn encoded_stream<T, E>(running: Running, encode: E) -> impl Stream<Item = PgWireResult<T>> + Send + 'static
where
    T: Send + 'static,
    E: FnMut(&RecordBatch) -> PgWireResult<Vec<T>> + Send + 'static,
{
    let shared = running.shared.clone();
    let state = StreamState { running, ended: false, encode };
    let batches = stream::unfold(state, |mut st| async move {
        if st.ended {
            return None;
        }
        loop {
            match st.running.next_batch().await {
                None => {
                    st.running.finish(Outcome::Done);
                    return None;
                }
                Some(Ok(batch)) => match (st.encode)(&batch) {
                    Ok(rows) if rows.is_empty() => continue,
                    Ok(rows) => return Some((Ok(rows), st)),
                    Err(e) => {
                        st.running.finish(Outcome::Failed);
                        st.ended = true;
                        return Some((Err(e), st));
                    }
                },
                Some(Err(e)) => {
                    let outcome = if st.running.cancel.is_canceled() || is_cancel_error(&e) { Outcome::Canceled } else { Outcome::Failed };
                    st.running.finish(outcome);
                    st.ended = true;
                    return Some((Err(e), st));
                }
            }
        }
    });
    rows_of(batches, shared)
}

pub(crate) fn is_cancel_error(e: &PgWireError) -> bool {
    matches!(e, PgWireError::UserError(info) if info.code == sqlstate::QUERY_CANCELED)
}

impl QueryHandler {
    /// A prepared statement's plan made again for this execution, if the catalog changed
    /// since Parse (once per catalog generation; `None`: the Parse's plan holds). A plan
    /// whose parameters or result columns changed is refused, as PostgreSQL refuses it; a
    /// table gone is its planning error.
    async fn replanned_if_stale(&self, backend: &Backend, prepared: &Prepared) -> PgWireResult<Option<Replanned>> {
        let generation = self.shared.catalog_generation();
        if prepared.plan.is_none() || generation == prepared.generation {
            return Ok(None);
        }
        if let Some(r) = prepared.replanned.lock().unwrap_or_else(|p| p.into_inner()).as_ref().filter(|r| r.generation == generation) {
            return Ok(Some(r.clone()));
        }
        let text = match &prepared.command {
            Command::Sql(text) => text.as_str(),
            Command::Declare(declare) => declare.query.as_str(),
            _ => return Ok(None),
        };
        let again = plan_sql(&self.shared, backend, text).await?;
        if param_types_of(&again)? != prepared.param_types {
            return Err(result_type_changed());
        }
        if let (Some(described), false) = (&prepared.schema, is_insert(&again)) {
            let now = again.schema();
            let same = described.fields().len() == now.fields().len()
                && described.fields().iter().zip(now.fields()).all(|(a, b)| a.name() == b.name() && a.data_type() == b.data_type());
            if !same {
                return Err(result_type_changed());
            }
        }
        let fast = if is_insert(&again) && self.shared.fast_insert { FastInsert::from_plan(&again) } else { None };
        let replanned = Replanned { generation, plan: again, fast };
        *prepared.replanned.lock().unwrap_or_else(|p| p.into_inner()) = Some(replanned.clone());
        Ok(Some(replanned))
    }

    /// Admits, plans physically (or takes a kept plan) and starts a query; rows come later
    /// from the stream.
    async fn start(&self, backend: &Backend, to_run: ToRun<'_>) -> PgWireResult<Running> {
        let cancel = backend.cancel.start_query();
        let timeout = backend.statement_timeout();
        let client_check_interval = backend.duration(DurationSetting::ClientConnectionCheckInterval);
        let deadline = (!timeout.is_zero()).then(|| tokio::time::Instant::now() + timeout);
        let started = Instant::now();
        // One check of the client from the queue to the last row: a client gone while its
        // query waits for a slot does not take the slot.
        let mut hung_up = hangup::hung_up(hangup::current_peer(), client_check_interval).boxed().fuse();
        let admit = async {
            tokio::select! {
                r = self.shared.admission.admit(&cancel) => r,
                _ = &mut hung_up => {
                    cancel.cancel();
                    Err(AdmissionRefusal::Canceled)
                }
            }
        };
        let slot = match deadline {
            Some(d) => match tokio::time::timeout_at(d, admit).await {
                Ok(r) => r,
                Err(_) => return Err(timeout_error(timeout)),
            },
            None => admit.await,
        };
        let slot = match slot {
            Ok(s) => s,
            Err(AdmissionRefusal::Canceled) => return Err(canceled_error()),
            Err(AdmissionRefusal::QueueTimeout { waited }) => {
                return Err(pg_error(
                    sqlstate::INSUFFICIENT_RESOURCES,
                    format!(
                        "server busy: waited {:.1} s for one of {} query slots (--max-active-queries); try again",
                        waited.as_secs_f64(),
                        self.shared.admission.max_active_queries
                    ),
                ))
            }
        };
        let shared = self.shared.clone();
        let settings = backend.settings().clone();
        let backend_pid = backend.pid;
        let mut running = Running {
            batches: None,
            slot: Some(slot),
            cancel: cancel.clone(),
            deadline,
            timeout,
            shared: shared.clone(),
            started,
            hung_up,
        };
        let planned = match to_run {
            // Planned before, for the same settings and generation (`plan_reuse.rs`).
            ToRun::Kept(kept) => kept.for_execution().map(|p| (p, kept.task_ctx, true)).map_err(|e| sql_error_to_pg(&flashscan_sql::SqlError::from(e))),
            ToRun::Plan { plan, keep_as } => {
                // Planning here (short; its errors come before any row), execution on the
                // query runtime (query_runtime.rs).
                let keep_as = keep_as.filter(|_| crate::plan_reuse::is_constant(&plan));
                let own = backend.own_changes(shared.database.write.as_deref())?;
                let plan = async {
                    let planning = backend.planning.lease(&shared, &settings, backend_pid, own.as_deref());
                    // A point statement an index answers is planned without the optimizers
                    // (flashscan_sql::point_plan); everything else by DataFusion.
                    let physical = match flashscan_sql::point_plan::plan(&planning, &plan).await {
                        Some(point) => point,
                        None => planning.create_physical_plan(&plan).await?,
                    };
                    if let Some((text, generation)) = keep_as {
                        if crate::query_runtime::runs_inline(&physical) {
                            let kept = KeptPlan { physical: physical.clone(), schema: plan.schema().inner().clone(), task_ctx: planning.kept_task_context(shared.query_memory_bytes)? };
                            backend.planning.keep_plan(&settings, generation, text, kept);
                        }
                    }
                    // A point statement's answer is in its plan already (point_plan.rs): it
                    // runs here, with a context that has nothing to give it (making the
                    // statement's own — function registries copied, a memory pool — was 7 %
                    // of the server's CPU under prepared key lookups).
                    if physical.downcast_ref::<flashscan_sql::index_scan::IndexLookupExec>().is_some_and(|l| l.answer().is_some()) {
                        return Ok((physical, crate::planning::answered_task_context(), true));
                    }
                    // A constant row, or a lookup over a small table: on this task.
                    let (physical, inline, read_inline) = if crate::query_runtime::runs_inline(&physical) {
                        (physical, true, false)
                    } else if let Some(small) = crate::query_runtime::small_scan_plan(&physical) {
                        (small, true, true)
                    } else {
                        (physical, false, false)
                    };
                    Ok::<_, DataFusionError>((physical, planning.task_context(shared.query_memory_bytes, read_inline)?, inline))
                };
                let timer = async move {
                    match deadline {
                        Some(d) => tokio::time::sleep_until(d).await,
                        None => futures::future::pending::<()>().await,
                    }
                };
                tokio::select! {
                    r = plan => r.map_err(|e| sql_error_to_pg(&flashscan_sql::SqlError::from(e))),
                    _ = cancel.canceled() => Err(canceled_error()),
                    _ = timer => Err(timeout_error(timeout)),
                }
            }
        };
        match planned {
            Ok((physical, task_ctx, inline)) => {
                // A constant row or a small lookup is computed here: no hop to the query
                // runtime and back.
                running.batches = Some(if inline {
                    QueryStream::inline(physical, task_ctx)
                } else {
                    shared.queries.start(move || datafusion::physical_plan::execute_stream(physical, task_ctx))
                });
                Ok(running)
            }
            Err(e) => {
                running.finish(Outcome::Failed);
                Err(e)
            }
        }
    }

    async fn query_response(&self, backend: &Backend, to_run: ToRun<'_>, format: &Format) -> PgWireResult<Response> {
        let schema = match &to_run {
            ToRun::Plan { plan, .. } => plan.schema().inner().clone(),
            ToRun::Kept(kept) => kept.schema.clone(),
        };
        let fields = fields_of(&schema, format)?;
        let running = self.start(backend, to_run).await?;
        let encode_fields = fields.clone();
        let mut encoder = RowEncoder::default();
        let rows = encoded_stream(running, move |batch| encode_rows(&mut encoder, batch, &encode_fields));
        Ok(Response::Query(QueryResponse::new(fields, rows)))
    }

    fn batch_response(batch: RecordBatch, format: &Format) -> PgWireResult<Response> {
        let fields = fields_of(&batch.schema(), format)?;
        let mut encoder = RowEncoder::default();
        let rows: Vec<PgWireResult<DataRow>> = encode_rows(&mut encoder, &batch, &fields)?.into_iter().map(Ok).collect();
        Ok(Response::Query(QueryResponse::new(fields, stream::iter(rows))))
    }

    fn show(&self, backend: &Backend, name: &str) -> PgWireResult<RecordBatch> {
        match name {
            "transaction_isolation" => return Ok(single_text_column(name, backend.transaction().isolation().unwrap_or_else(|| backend.default_isolation()).name())),
            "default_transaction_isolation" => return Ok(single_text_column(name, backend.default_isolation().name())),
            _ => {}
        }
        if let Some(setting) = DurationSetting::named(name) {
            let t = backend.duration(setting);
            return Ok(single_text_column(name, &if t.is_zero() { "0".to_string() } else { format!("{}ms", t.as_millis()) }));
        }
        if let Some(value) = crate::pg_catalog::fixed_setting(name) {
            return Ok(single_text_column(name, &value));
        }
        if name == crate::synchronous_commit::NAME {
            return Ok(single_text_column(name, backend.synchronous_commit().show()));
        }
        let value = match name {
            "max_connections" => self.shared.admission.max_connections.to_string(),
            "max_active_queries" => self.shared.admission.max_active_queries.to_string(),
            "query_memory" => format!("{}MB", self.shared.query_memory_bytes >> 20),
            other if other.starts_with("flashscan.") => flashscan_setting(&backend.settings(), other).ok_or_else(|| unknown_setting(other))?,
            other => return Err(unknown_setting(other)),
        };
        Ok(single_text_column(name, &value))
    }

    async fn copy_response(&self, backend: &Backend, query: &str, csv: bool, header: bool, delimiter: Option<String>) -> PgWireResult<Response> {
        let plan = plan_sql(&self.shared, backend, query).await?;
        let schema = plan.schema().inner().clone();
        let fields = fields_of(&schema, &Format::UnifiedText)?;
        let columns = fields.len();
        let running = self.start(backend, ToRun::plan(plan)).await?;
        let mut encoder = if csv {
            let mut o = CopyCsvOptions::default();
            if let Some(d) = &delimiter {
                o.delimiter = d.as_str().into();
            }
            CopyEncoder::new_csv(fields.clone(), o)
        } else {
            let mut o = CopyTextOptions::default();
            if let Some(d) = &delimiter {
                o.delimiter = d.as_str().into();
            }
            CopyEncoder::new_text(fields.clone(), o)
        };
        let header_line = header.then(|| {
            let sep = delimiter.clone().unwrap_or_else(|| if csv { ",".into() } else { "\t".into() });
            let names: Vec<String> = schema.fields().iter().map(|f| if csv && f.name().contains([',', '"', '\n']) { format!("\"{}\"", f.name().replace('"', "\"\"")) } else { f.name().clone() }).collect();
            CopyData::new(format!("{}\n", names.join(&sep)).into())
        });
        let encode_fields = fields.clone();
        let lines = encoded_stream(running, move |batch| encode_rows(&mut encoder, batch, &encode_fields));
        let data = stream::iter(header_line.map(Ok)).chain(lines);
        Ok(Response::CopyOut(CopyResponse::new(0, columns, data)))
    }

    /// INSERT: the statement's rows (VALUES or SELECT, cast to the table's types) computed
    /// like a query, under a query slot; then, without the slot, committed through the
    /// group committer (or kept for COMMIT inside BEGIN … COMMIT).
    async fn run_insert(&self, backend: &Backend, plan: LogicalPlan) -> PgWireResult<Response> {
        let (table, batches) = self.insert_rows(backend, plan).await?;
        self.commit_rows(backend, &table, batches).await
    }

    /// An INSERT's table and rows (VALUES or SELECT, cast to the table's types, defaults
    /// filled in), computed like a query under a query slot.
    async fn insert_rows(&self, backend: &Backend, plan: LogicalPlan) -> PgWireResult<(String, Vec<RecordBatch>)> {
        let LogicalPlan::Dml(dml) = plan else { return Err(pg_error(sqlstate::INTERNAL_ERROR, "not an INSERT")) };
        if !matches!(dml.op, WriteOp::Insert(InsertOp::Append)) {
            return Err(pg_error(sqlstate::FEATURE_NOT_SUPPORTED, format!("{}: flashscan appends rows only (INSERT INTO)", dml.op)));
        }
        self.shared.database.committer.as_ref().ok_or_else(|| read_only_database(&self.shared))?;
        let table = dml.table_name.table().to_string();
        let names = value_column_names(&dml.input);
        let input = std::sync::Arc::unwrap_or_clone(dml.input);
        let not_null = |e: PgWireError| not_null_error(e, &table, &names);
        let mut running = self.start(backend, ToRun::plan(input)).await.map_err(not_null)?;
        let mut batches = Vec::new();
        loop {
            match running.next_batch().await {
                None => break,
                Some(Ok(b)) => {
                    if b.num_rows() > 0 {
                        batches.push(b)
                    }
                }
                Some(Err(e)) => {
                    let outcome = if running.cancel.is_canceled() || is_cancel_error(&e) { Outcome::Canceled } else { Outcome::Failed };
                    running.finish(outcome);
                    return Err(not_null(e));
                }
            }
        }
        running.finish(Outcome::Done);
        drop(running);
        Ok((table, batches))
    }

    /// INSERT / UPDATE / DELETE … RETURNING (`flashscan_sql::returning`): the change runs
    /// as without RETURNING, keeping the rows it wrote (for DELETE, removed), then the
    /// RETURNING list is computed over them. Answers the rows, tagged `INSERT 0 n` /
    /// `UPDATE n` / `DELETE n`.
    async fn run_returning(&self, backend: &Backend, node: flashscan_sql::returning::ReturningNode, format: &Format) -> PgWireResult<Response> {
        let (tag, rows) = match node.op() {
            Some(WriteOp::Insert(_)) => {
                // A plain VALUES insert (the parameters are bound into the plan by now) takes
                // the fast path's rows, as without RETURNING.
                let fast = self.fast_rows(backend, FastInsert::from_plan(&node.change).as_ref(), &[]);
                let (table, batches) = match fast {
                    Some((table, batch)) => (table, vec![batch]),
                    None => self.insert_rows(backend, node.change.clone()).await?,
                };
                let inserted = match &node.on_conflict {
                    None => {
                        self.commit_rows(backend, &table, batches.clone()).await?;
                        batches
                    }
                    Some(spec) => match &spec.update {
                        None => self.insert_skipping_conflicts(backend, &table, batches, spec.arbiter.as_deref()).await?.0,
                        Some(update) => self.upsert(backend, &table, batches, spec, update).await?,
                    },
                };
                if !node.returns_rows() {
                    let rows: usize = inserted.iter().map(|b| b.num_rows()).sum();
                    return Ok(insert_tag(rows as u64));
                }
                ("INSERT 0", inserted)
            }
            Some(WriteOp::Update) => ("UPDATE", self.change_rows(backend, node.change.clone(), true).await?.1.new_rows),
            Some(WriteOp::Delete) => ("DELETE", self.change_rows(backend, node.change.clone(), true).await?.1.old_rows),
            _ => return Err(pg_error(sqlstate::INTERNAL_ERROR, "RETURNING of a statement that is not INSERT, UPDATE or DELETE")),
        };
        let returned = {
            let settings = backend.settings().clone();
            let lease = backend.planning.lease(&self.shared, &settings, backend.pid, None);
            flashscan_sql::returning::returned_rows(&lease, &node, rows).await.map_err(|e| sql_error_to_pg(&e))?
        };
        let schema = returned.first().map(|b| b.schema()).unwrap_or_else(|| node_schema(&node));
        let batch = arrow::compute::concat_batches(&schema, &returned).map_err(|e| pg_error(sqlstate::INTERNAL_ERROR, e.to_string()))?;
        match Self::batch_response(batch, format)? {
            Response::Query(mut q) => {
                q.set_command_tag(tag);
                Ok(Response::Query(q))
            }
            other => Ok(other),
        }
    }

    /// UPDATE or DELETE (`flashscan_sql::change`): the table's change lock (waiting, off the
    /// async workers, for another transaction that changes it), a snapshot of now, the rows
    /// read and staged into the connection's open block, or committed at once (durable
    /// before the answer). Answers `UPDATE n` / `DELETE n`.
    async fn run_change(&self, backend: &Backend, plan: LogicalPlan, kind: flashscan_sql::change::ChangeKind) -> PgWireResult<Response> {
        let (rows, _) = self.change_rows(backend, plan, false).await?;
        Ok(Response::Execution(Tag::new(kind.tag()).with_rows(rows as usize)))
    }

    /// INSERT … ON CONFLICT (key) DO UPDATE: the rows whose key is free inserted, and each
    /// row whose key is taken runs the clause's UPDATE of the row holding it
    /// (`flashscan_sql::returning::ConflictUpdate`, planned once, bound per row), all in one
    /// transaction (the open block, or one committed at the end). Returns the rows inserted
    /// and the new versions of the rows updated. A key the statement proposes twice is
    /// refused (21000), as PostgreSQL refuses to change a row twice.
    async fn upsert(&self, backend: &Backend, table: &str, batches: Vec<RecordBatch>, spec: &flashscan_sql::returning::ConflictSpec, update: &flashscan_sql::returning::ConflictUpdate) -> PgWireResult<Vec<RecordBatch>> {
        let arbiter = spec.arbiter.clone().unwrap_or_default();
        refuse_repeated_keys(&batches, &arbiter)?;
        let template = match &update.planned {
            Some(plan) => plan.clone(),
            None => plan_sql(&self.shared, backend, &update.sql).await?,
        };
        let autocommit = !matches!(&*backend.transaction(), Transaction::Open { .. });
        if autocommit {
            // The statement's own transaction, as an open block while its parts run.
            *backend.transaction() = Transaction::Open { txn: new_transaction(backend), statements: 0 };
        }
        let result = async {
            let (mut rows, skipped) = self.insert_skipping_conflicts(backend, table, batches, Some(&arbiter)).await?;
            for batch in &skipped {
                for row in 0..batch.num_rows() {
                    let values = update
                        .params
                        .iter()
                        .map(|c| {
                            let column = batch.column_by_name(c).ok_or_else(|| pg_error(sqlstate::UNDEFINED_COLUMN, format!("column excluded.{c} does not exist")))?;
                            datafusion::common::ScalarValue::try_from_array(column, row).map_err(|e| pg_error(sqlstate::INTERNAL_ERROR, e.to_string()))
                        })
                        .collect::<PgWireResult<Vec<_>>>()?;
                    let bound = flashscan_sql::parameters::bind(&template, datafusion::common::ParamValues::List(values.into_iter().map(Into::into).collect())).map_err(|e| sql_error_to_pg(&flashscan_sql::SqlError::from(e)))?;
                    let (_, changes) = self.change_rows(backend, bound, false).await?;
                    rows.extend(changes.new_rows);
                }
            }
            Ok::<_, PgWireError>(rows)
        }
        .await;
        if !autocommit {
            return result;
        }
        let txn = match std::mem::take(&mut *backend.transaction()) {
            Transaction::Open { txn, .. } => txn,
            _ => return Err(pg_error(sqlstate::INTERNAL_ERROR, "the upsert's transaction went missing")),
        };
        let rows = result?;
        let committer = self.shared.database.committer.as_ref().ok_or_else(|| read_only_database(&self.shared))?;
        let mut txn = txn;
        txn.set_durability(backend.durability());
        committer.commit_transaction(txn).await.map_err(|f| f.to_pg())?;
        Ok(rows)
    }

    /// INSERT … ON CONFLICT DO NOTHING: the rows that collide with no key of the arbiter
    /// indexes staged into the connection's open block, or committed at once; returns them
    /// and the rows skipped.
    async fn insert_skipping_conflicts(&self, backend: &Backend, table: &str, batches: Vec<RecordBatch>, arbiter: Option<&[String]>) -> PgWireResult<(Vec<RecordBatch>, Vec<RecordBatch>)> {
        let committer = self.shared.database.committer.as_ref().ok_or_else(|| read_only_database(&self.shared))?;
        let write = committer.write_path();
        let (mut txn, statements) = take_transaction(backend);
        // Checking keys may wait for another transaction's key lock: off the async workers then.
        let staged = crate::writes::without_waiting_first(&mut txn, |txn| write.stage_insert_skipping_conflicts(txn, table, &batches, arbiter)).map_err(|e| crate::writes::WriteFailure::of(&e).to_pg());
        match statements {
            Some(statements) => {
                *backend.transaction() = Transaction::Open { txn, statements: statements + 1 };
                staged
            }
            None => {
                let (inserted, skipped) = staged?;
                if inserted.iter().any(|b| b.num_rows() > 0) {
                    txn.set_durability(backend.durability());
                    committer.commit_transaction(txn).await.map_err(|f| f.to_pg())?;
                }
                Ok((inserted, skipped))
            }
        }
    }

    /// [`Self::run_change`]'s work: the rows changed and what the statement read (with
    /// `keep_old_rows`, a DELETE's removed rows too).
    async fn change_rows(&self, backend: &Backend, plan: LogicalPlan, keep_old_rows: bool) -> PgWireResult<(u64, flashscan_sql::change::RowChanges)> {
        let committer = self.shared.database.committer.as_ref().ok_or_else(|| read_only_database(&self.shared))?;
        let write = committer.write_path();
        let LogicalPlan::Dml(dml) = &plan else { return Err(pg_error(sqlstate::INTERNAL_ERROR, "not an UPDATE or DELETE")) };
        let table = dml.table_name.table().to_string();
        let (mut txn, statements) = take_transaction(backend);
        let staged = async {
            crate::writes::without_waiting_first(&mut txn, |txn| write.lock_for_change(txn, &table)).map_err(|e| crate::writes::WriteFailure::of(&e).to_pg())?;
            // Each read leases the connection's planning state (lent, not copied); a plan's
            // clone shares its nodes (Arcs). The block's own changes are read too (the same
            // for every read of the statement: a read again stages nothing before it).
            txn.pin_snapshot(write).map_err(|e| crate::writes::WriteFailure::of(&e).to_pg())?;
            let own = txn.own_changes();
            let own = own.as_deref();
            let again = plan.clone();
            let mut first = Some(plan);
            let read = || {
                let plan = first.take().unwrap_or_else(|| again.clone());
                async move {
                    let settings = backend.settings().clone();
                    let mut lease = backend.planning.lease(&self.shared, &settings, backend.pid, own);
                    flashscan_sql::change::read_plan_changes_keeping(write, own, &mut lease, plan, keep_old_rows).await
                }
            };
            // Staging locks the rows and may wait for another transaction holding one.
            let stage = |snapshot: &flashscan_write::ReadSnapshot, changes: &flashscan_sql::change::RowChanges| {
                crate::writes::without_waiting_first(&mut txn, |txn| flashscan_sql::change::stage_changes(write, txn, &table, snapshot, changes))
            };
            flashscan_sql::change::read_and_stage(read, stage).await.map_err(|e| sql_error_to_pg(&e))
        }
        .await;
        match statements {
            Some(statements) => {
                *backend.transaction() = Transaction::Open { txn, statements: statements + 1 };
                staged
            }
            None => {
                let (rows, changes) = staged?;
                if rows > 0 {
                    txn.set_durability(backend.durability());
                    committer.commit_transaction(txn).await.map_err(|f| f.to_pg())?;
                }
                Ok((rows, changes))
            }
        }
    }

    /// An INSERT's rows: kept for COMMIT inside BEGIN … COMMIT, otherwise committed through
    /// the group committer (acknowledged once durable).
    async fn commit_rows(&self, backend: &Backend, table: &str, batches: Vec<RecordBatch>) -> PgWireResult<Response> {
        let committer = self.shared.database.committer.as_ref().ok_or_else(|| read_only_database(&self.shared))?;
        let rows: u64 = batches.iter().map(|b| b.num_rows() as u64).sum();
        {
            let mut t = backend.transaction();
            if let Transaction::Open { .. } = &*t {
                let staged = t.add(committer.write_path(), table, &batches)?;
                return Ok(insert_tag(staged));
            }
        }
        if rows == 0 {
            return Ok(insert_tag(0));
        }
        let committed = committer.insert_as(table, batches, backend.durability()).await.map_err(|f| f.to_pg())?;
        Ok(insert_tag(committed))
    }

    /// The fast path's rows for this execution, when it applies (see `fast_insert.rs`).
    fn fast_rows(&self, backend: &Backend, fast: Option<&FastInsert>, params: &[datafusion::common::ScalarValue]) -> Option<(String, RecordBatch)> {
        if !self.shared.fast_insert || self.shared.database.committer.is_none() {
            return None;
        }
        let fast = fast?;
        let draw = self.shared.database.write.as_deref().map(|write| crate::fast_insert::Draw { write, session: &backend.planning.sequences });
        let batch = fast.batch_drawing(params, draw)?;
        if let Some(c) = self.shared.database.committer.as_ref() {
            c.counters.statements_fast_path.fetch_add(1, Relaxed);
        }
        Some((fast.table.clone(), batch))
    }

    /// CHECKPOINT: the write path's checkpoint (`flashscan checkpoint`'s), off the async
    /// workers; it waits for commits in flight and holds new ones until its catalog commit.
    async fn run_checkpoint(&self) -> PgWireResult<Response> {
        let Some(write) = self.shared.database.write.clone() else { return Err(read_only_database(&self.shared)) };
        let done = tokio::task::spawn_blocking(move || write.checkpoint(&flashscan_write::CheckpointOptions::default()))
            .await
            .map_err(|e| pg_error(sqlstate::INTERNAL_ERROR, format!("CHECKPOINT: {e}")))?;
        done.map_err(|e| crate::writes::WriteFailure::of(&e).to_pg())?;
        Ok(Response::Execution(Tag::new("CHECKPOINT")))
    }

    /// CREATE TABLE / DROP TABLE through the SQL session's write path (one catalog commit),
    /// with no statement being planned meanwhile; then psql's table list is refreshed.
    async fn run_ddl(&self, tag: &'static str, sql: &str) -> PgWireResult<Response> {
        let database = &self.shared.database;
        if database.write.is_none() {
            return Err(read_only_database(&self.shared));
        }
        {
            let _ddl = database.ddl.write().await;
            database.session.run_one(&crate::pg_syntax::normalize_ddl(sql)).await.map_err(|e| sql_error_to_pg(&e))?;
            // Before any statement plans again: plans kept by shape (`plan_shapes.rs`) hold
            // the tables they were planned with, so every DDL retires them, even should the
            // table list below fail to refresh.
            self.shared.catalog_changed();
        }
        // The statement is committed: a table list that fails to refresh is said on the
        // server's stderr, never reported to the client as the statement's failure.
        match crate::catalog_relations(&self.shared.base, database.session.db_dir()).await {
            Ok(crate::psql_catalog::CatalogRelations { tables, sequences }) => {
                if let Err(e) = crate::pg_catalog::register(&self.shared.base, &tables, &sequences) {
                    eprintln!("flashscan serve: after {tag}: pg_catalog not refreshed: {e}");
                }
                // A view over pg_catalog reads the tables just registered, not the last ones.
                if let Err(e) = database.session.refresh_views() {
                    eprintln!("flashscan serve: after {tag}: views not planned again: {e}");
                }
                self.shared.set_tables(tables);
                // The `regclass` functions were registered again with the new table list.
                self.shared.catalog_changed();
            }
            Err(e) => eprintln!("flashscan serve: after {tag}: the table list not refreshed: {e}"),
        }
        Ok(Response::Execution(Tag::new(tag)))
    }

    /// COPY … FROM STDIN: checks the table and columns, then asks the client for the data
    /// (CopyInResponse); the rows are committed when the client says CopyDone.
    async fn start_copy_in(&self, backend: &Backend, options: &CopyFromOptions) -> PgWireResult<Response> {
        if self.shared.database.write.is_none() {
            return Err(read_only_database(&self.shared));
        }
        if self.shared.database.session.is_view(&options.table.to_lowercase()) {
            return Err(sql_error_to_pg(&flashscan_sql::views::refuse_write_into_view("COPY into", &options.table.to_lowercase())));
        }
        let provider = {
            let _ddl = self.shared.database.ddl.read().await;
            self.shared.base.table_provider(options.table.to_lowercase().as_str()).await
        };
        let provider = provider.map_err(|_| {
            let known: Vec<String> = self.shared.tables().into_iter().map(|t| t.name).collect();
            pg_error(sqlstate::UNDEFINED_TABLE, format!("relation \"{}\" does not exist (tables: {})", options.table, known.join(", ")))
        })?;
        let schema = provider.schema();
        let targets = crate::copy_from::target_columns(&schema, options).map_err(|e| pg_error(e.code, e.message))?;
        let columns = targets.len();
        *backend.copy_in() = Some(CopyIn { options: options.clone(), schema, targets, data: Vec::new(), too_large: false });
        Ok(Response::CopyIn(CopyResponse::new(0, columns, stream::empty())))
    }

    /// The end of COPY FROM STDIN: all lines parsed and converted (the first bad one is
    /// the error), then one statement through the committer. Returns the rows.
    pub async fn finish_copy_in(&self, backend: &Backend) -> PgWireResult<u64> {
        let Some(copy) = backend.copy_in().take() else {
            return Err(pg_error(sqlstate::PROTOCOL_VIOLATION, "CopyDone without COPY FROM STDIN"));
        };
        let table = copy.options.table.to_lowercase();
        if copy.too_large {
            return Err(pg_error(
                sqlstate::INSUFFICIENT_RESOURCES,
                format!("COPY {table}: more than {} MiB of data in one COPY; nothing was inserted: split it into several COPYs", crate::copy_from::COPY_BYTES_MAX >> 20),
            ));
        }
        let converted = tokio::task::spawn_blocking(move || {
            let lines = crate::copy_from::parse_lines(&copy.data, &copy.options)?;
            crate::copy_from::to_batches(&lines, &copy.schema, &copy.targets, &copy.options.table)
        })
        .await
        .map_err(|e| pg_error(sqlstate::INTERNAL_ERROR, format!("COPY parser failed: {e}")))?;
        let batches = converted.map_err(|e| pg_error(e.code, e.message))?;
        let rows: u64 = batches.iter().map(|b| b.num_rows() as u64).sum();
        let committer = self.shared.database.committer.as_ref().ok_or_else(|| read_only_database(&self.shared))?;
        {
            let mut t = backend.transaction();
            if let Transaction::Open { .. } = &*t {
                return t.add(committer.write_path(), &table, &batches);
            }
        }
        if rows == 0 {
            return Ok(0);
        }
        committer.insert_as(&table, batches, backend.durability()).await.map_err(|f| f.to_pg())
    }

    /// DECLARE: the query admitted and started like any query (a slot, its memory pool, the
    /// plan running), its stream kept by the cursor (`cursors.rs`). Outside a transaction
    /// block only WITH HOLD is taken, and materialised at once (the statement commits).
    async fn declare(&self, backend: &Backend, declare: &DeclareCursor, plan: Option<LogicalPlan>) -> PgWireResult<Response> {
        let in_block = backend.transaction().in_block();
        if !in_block && !declare.hold {
            return Err(pg_error(cursor_sqlstate::NO_ACTIVE_SQL_TRANSACTION, "DECLARE CURSOR can only be used in transaction blocks"));
        }
        backend.cursors().check_new(&declare.name)?;
        let plan = match plan {
            Some(p) => p,
            None => plan_sql(&self.shared, backend, &declare.query).await?,
        };
        if matches!(plan, LogicalPlan::Dml(_)) {
            return Err(pg_error(sqlstate::FEATURE_NOT_SUPPORTED, "DECLARE CURSOR FOR INSERT is not supported: a cursor takes a query (SELECT, VALUES, …)"));
        }
        let schema = plan.schema().inner().clone();
        let running = self.start(backend, ToRun::plan(plan)).await?;
        let mut cursor = Box::new(Cursor::streaming(schema, declare.statement.clone(), running, declare.binary, declare.hold, in_block));
        if !in_block {
            let free = HELD_CURSOR_BYTES_MAX.saturating_sub(backend.cursors().held_bytes());
            cursor.materialise(&declare.name, free).await?;
        }
        backend.cursors().insert(declare.name.clone(), cursor)?;
        Ok(Response::Execution(Tag::new("DECLARE CURSOR")))
    }

    /// At COMMIT of a block: its cursors without HOLD close, its WITH HOLD ones are
    /// materialised (bounded by `HELD_CURSOR_BYTES_MAX` per connection). Returns the names
    /// kept; on failure none of them is.
    async fn hold_cursors_at_commit(&self, backend: &Backend) -> PgWireResult<Vec<String>> {
        let held = backend.cursors().take_for_commit();
        let mut kept: Vec<(String, Box<Cursor>)> = Vec::with_capacity(held.len());
        for (name, mut cursor) in held {
            // COMMIT reads the rest: its own timeout and cancel, not the DECLARE's or a FETCH's.
            cursor.start_statement(backend);
            let used = backend.cursors().held_bytes() + kept.iter().map(|(_, c)| c.held_bytes()).sum::<usize>();
            cursor.materialise(&name, HELD_CURSOR_BYTES_MAX.saturating_sub(used)).await?;
            kept.push((name, cursor));
        }
        let mut cursors = backend.cursors();
        let mut names = Vec::with_capacity(kept.len());
        for (name, cursor) in kept {
            cursors.insert(name.clone(), cursor)?;
            names.push(name);
        }
        Ok(names)
    }

    /// MOVE: rows skipped without being encoded or sent; `MOVE n` says how many.
    async fn move_cursor(&self, backend: &Backend, name: &str, count: FetchCount) -> PgWireResult<Response> {
        let mut cursor = backend.cursors().take(name)?;
        cursor.start_statement(backend);
        let limit = match count {
            FetchCount::Rows(n) => n,
            FetchCount::All => u64::MAX,
        };
        let mut moved = 0u64;
        let result = loop {
            if moved >= limit {
                break Ok(());
            }
            match cursor.next_rows(limit - moved).await {
                None => break Ok(()),
                Some(Ok(rows)) => moved += rows.num_rows() as u64,
                Some(Err(e)) => break Err(e),
            }
        };
        backend.cursors().put_back(name, cursor);
        result?;
        Ok(Response::Execution(Tag::new("MOVE").with_rows(moved as usize)))
    }

    /// FETCH: the next rows streamed to the client as they are pulled from the cursor's
    /// query (no more than the count asked is taken from it); the tag says `FETCH n`.
    fn fetch(&self, backend: &Arc<Backend>, name: &str, count: FetchCount, format: &Format, protocol: Protocol) -> PgWireResult<Response> {
        let mut cursor = backend.cursors().take(name)?;
        cursor.start_statement(backend);
        let format = if cursor.binary && protocol == Protocol::Simple { Format::UnifiedBinary } else { format.clone() };
        let fields = match fields_of(&cursor.schema, &format) {
            Ok(f) => f,
            Err(e) => {
                backend.cursors().put_back(name, cursor);
                return Err(e);
            }
        };
        let left = match count {
            FetchCount::Rows(n) => n,
            FetchCount::All => u64::MAX,
        };
        let state = FetchState {
            cursor: Some(cursor),
            backend: backend.clone(),
            name: name.to_string(),
            left,
            encoder: RowEncoder::default(),
            fields: fields.clone(),
        };
        let shared = self.shared.clone();
        let batches = stream::unfold(state, |mut st| async move {
            loop {
                if st.left == 0 {
                    return None;
                }
                let cursor = st.cursor.as_mut()?;
                match cursor.next_rows(st.left).await {
                    None => st.left = 0,
                    Some(Ok(batch)) => {
                        st.left = st.left.saturating_sub(batch.num_rows() as u64);
                        match encode_rows(&mut st.encoder, &batch, &st.fields) {
                            Ok(rows) if rows.is_empty() => continue,
                            Ok(rows) => return Some((Ok(rows), st)),
                            Err(e) => {
                                st.left = 0;
                                return Some((Err(e), st));
                            }
                        }
                    }
                    Some(Err(e)) => {
                        st.left = 0;
                        return Some((Err(e), st));
                    }
                }
            }
        });
        let rows = rows_of(batches, shared);
        let mut response = QueryResponse::new(fields, rows);
        response.set_command_tag("FETCH");
        Ok(Response::Query(response))
    }

    /// Runs a statement inside the connection's transaction rules: after a failure in
    /// BEGIN … COMMIT, everything but COMMIT/ROLLBACK is refused (as PostgreSQL does).
    async fn run_in_transaction(&self, backend: &Arc<Backend>, command: &Command, plan: Option<LogicalPlan>, reuse: Reuse, format: &Format, protocol: Protocol) -> PgWireResult<Response> {
        self.guarded(backend, command, self.run_command(backend, command, plan, reuse, format, protocol)).await
    }

    /// The transaction rules around any way of running `command` (`run`).
    async fn guarded(&self, backend: &Backend, command: &Command, run: impl std::future::Future<Output = PgWireResult<Response>>) -> PgWireResult<Response> {
        if backend.transaction().is_failed() && !matches!(command, Command::Commit | Command::Rollback | Command::RollbackTo(_)) {
            return Err(pg_error(sqlstate::IN_FAILED_TRANSACTION, "current transaction is aborted, commands ignored until end of transaction block"));
        }
        let result = run.await;
        if result.is_err() {
            let mut t = backend.transaction();
            if matches!(*t, Transaction::Open { .. }) {
                t.fail();
                // The block's cursors can no longer be read: their slots are freed now.
                backend.cursors().close_declared_in_block();
            }
        }
        result
    }

    /// Runs one classified statement. `plan` and `params` come from the extended protocol.
    async fn run_command(&self, backend: &Arc<Backend>, command: &Command, plan: Option<LogicalPlan>, reuse: Reuse, format: &Format, protocol: Protocol) -> PgWireResult<Response> {
        match command {
            Command::Empty => Ok(Response::EmptyQuery),
            Command::Set { name, value, local } => {
                let in_block = backend.transaction().in_block();
                apply_set(backend, name, value, *local, in_block)?;
                Ok(Response::Execution(Tag::new("SET")))
            }
            Command::Reset { name } => {
                if name == crate::synchronous_commit::NAME || name == "all" {
                    backend.synchronous_commit().reset();
                }
                for setting in DurationSetting::ALL {
                    if name == setting.name() || name == "all" {
                        backend.set_duration(setting, setting.default());
                    }
                }
                if name == "all" || name.starts_with("flashscan.") {
                    // Back to the server's (its environment at start), not the built-in defaults.
                    let server = self.shared.settings();
                    let mut settings = backend.settings();
                    match name.strip_prefix("flashscan.") {
                        Some(key) => {
                            let value = flashscan_setting(&server, name).ok_or_else(|| unknown_setting(name))?;
                            datafusion::config::ConfigField::set(&mut *settings, key, &value).map_err(|_| unknown_setting(name))?;
                        }
                        None => *settings = server,
                    }
                }
                Ok(Response::Execution(Tag::new("RESET")))
            }
            Command::Show { name } => Self::batch_response(self.show(backend, name)?, format),
            Command::Begin | Command::BeginIsolation(_) => {
                let mut t = backend.transaction();
                if !t.in_block() {
                    let isolation = match command {
                        Command::BeginIsolation(level) => *level,
                        _ => backend.default_isolation(),
                    };
                    *t = Transaction::begin(isolation);
                }
                Ok(Response::TransactionStart(Tag::new("BEGIN")))
            }
            Command::SetIsolation { level, session: true } => {
                *backend.default_isolation.lock().unwrap_or_else(|p| p.into_inner()) = *level;
                Ok(Response::Execution(Tag::new("SET")))
            }
            Command::SetIsolation { level, session: false } => {
                match &mut *backend.transaction() {
                    Transaction::Open { txn, .. } => txn.set_isolation(*level).map_err(|e| crate::writes::WriteFailure::of(&e).to_pg())?,
                    // PostgreSQL warns and does nothing; flashscan never takes and drops a request.
                    _ => return Err(pg_error(sqlstate::NO_ACTIVE_SQL_TRANSACTION, "SET TRANSACTION can only be used in transaction blocks: BEGIN first, or SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL … for every transaction")),
                }
                Ok(Response::Execution(Tag::new("SET")))
            }
            Command::Commit => {
                // WITH HOLD cursors first, as PostgreSQL does before its commit: one that
                // cannot be kept fails the COMMIT, and the block is rolled back.
                let open = matches!(*backend.transaction(), Transaction::Open { .. });
                let held = if open {
                    match self.hold_cursors_at_commit(backend).await {
                        Ok(names) => names,
                        Err(e) => {
                            *backend.transaction() = Transaction::Idle;
                            backend.cursors().close_declared_in_block();
                            return Err(e);
                        }
                    }
                } else {
                    backend.cursors().close_declared_in_block();
                    Vec::new()
                };
                let t = std::mem::take(&mut *backend.transaction());
                // The block's SET LOCAL applies to its COMMIT, then ends.
                let durability = backend.durability();
                backend.synchronous_commit().end_block();
                match t {
                    Transaction::Open { mut txn, .. } if txn.row_count() > 0 => {
                        txn.set_durability(durability);
                        let committer = self.shared.database.committer.as_ref().ok_or_else(|| read_only_database(&self.shared))?;
                        if let Err(f) = committer.commit_transaction(txn).await {
                            // Rolled back: the cursors it held go with it.
                            let mut cursors = backend.cursors();
                            for name in &held {
                                let _ = cursors.close(name);
                            }
                            return Err(f.to_pg());
                        }
                        Ok(Response::TransactionEnd(Tag::new("COMMIT")))
                    }
                    // PostgreSQL answers COMMIT of a failed block with ROLLBACK.
                    Transaction::Failed { .. } => Ok(Response::TransactionEnd(Tag::new("ROLLBACK"))),
                    _ => Ok(Response::TransactionEnd(Tag::new("COMMIT"))),
                }
            }
            Command::Savepoint(name) => {
                backend.transaction().savepoints("SAVEPOINT", |txn| {
                    txn.savepoint(name);
                    Ok(())
                })?;
                Ok(Response::Execution(Tag::new("SAVEPOINT")))
            }
            Command::Release(name) => {
                backend.transaction().savepoints("RELEASE SAVEPOINT", |txn| txn.release_savepoint(name))?;
                Ok(Response::Execution(Tag::new("RELEASE")))
            }
            Command::RollbackTo(name) => {
                backend.transaction().savepoints("ROLLBACK TO SAVEPOINT", |txn| txn.rollback_to_savepoint(name))?;
                Ok(Response::Execution(Tag::new("ROLLBACK")))
            }
            Command::Rollback => {
                *backend.transaction() = Transaction::Idle;
                backend.synchronous_commit().end_block();
                backend.cursors().close_declared_in_block();
                Ok(Response::TransactionEnd(Tag::new("ROLLBACK")))
            }
            Command::Declare(declare) => self.declare(backend, declare, plan).await,
            Command::Fetch { name, count, move_only: true } => self.move_cursor(backend, name, *count).await,
            Command::Fetch { name, count, move_only: false } => self.fetch(backend, name, *count, format, protocol),
            Command::Close(Some(name)) => {
                backend.cursors().close(name)?;
                Ok(Response::Execution(Tag::new("CLOSE CURSOR")))
            }
            Command::Close(None) => {
                backend.cursors().close_all();
                Ok(Response::Execution(Tag::new("CLOSE CURSOR ALL")))
            }
            Command::SyntaxError(why) => Err(pg_error(sqlstate::SYNTAX_ERROR, why.clone())),
            Command::Ddl { tag, sql } => self.run_ddl(tag, sql).await,
            Command::Checkpoint => self.run_checkpoint().await,
            Command::CopyFrom(options) => self.start_copy_in(backend, options).await,
            // DISCARD ALL closes every cursor, as in PostgreSQL (poolers send it between clients).
            Command::DiscardAll => {
                backend.cursors().close_all();
                backend.synchronous_commit().reset();
                Ok(Response::Execution(Tag::new("DISCARD ALL")))
            }
            Command::NoOp(tag) => Ok(Response::Execution(Tag::new(tag))),
            Command::CopyTo { query, csv, header, delimiter } => self.copy_response(backend, query, *csv, *header, delimiter.clone()).await,
            Command::Unsupported(why) => Err(pg_error(sqlstate::FEATURE_NOT_SUPPORTED, why.clone())),
            Command::Sql(sql) => {
                let keep_as = (reuse == Reuse::ByText).then_some(sql.as_str());
                if let Some(text) = keep_as {
                    let kept = backend.planning.kept_plan(&self.shared, &backend.settings(), text);
                    if let Some(kept) = kept {
                        return self.query_response(backend, ToRun::Kept(kept), format).await;
                    }
                }
                // Read before planning: a DDL meanwhile leaves a kept plan unused.
                let generation = self.shared.catalog_generation();
                let plan = match plan {
                    Some(p) => p,
                    None => {
                        let plan = plan_sql(&self.shared, backend, sql).await?;
                        // A literal INSERT … VALUES: its rows without a physical plan.
                        if is_insert(&plan) {
                            if let Some((table, batch)) = self.fast_rows(backend, FastInsert::from_plan(&plan).as_ref(), &[]) {
                                return self.commit_rows(backend, &table, vec![batch]).await;
                            }
                        }
                        plan
                    }
                };
                if let Some(node) = flashscan_sql::returning::node(&plan) {
                    return self.run_returning(backend, node.clone(), format).await;
                }
                if is_insert(&plan) {
                    return self.run_insert(backend, plan).await;
                }
                if let Some(kind) = flashscan_sql::change::change_kind(&plan) {
                    return self.run_change(backend, plan, kind).await;
                }
                self.query_response(backend, ToRun::Plan { plan, keep_as: keep_as.map(|text| (text, generation)) }, format).await
            }
        }
    }
}

/// `SET flashscan.<key> = value` on this connection: its later queries plan and scan with it.
/// `slices` and `views` are refused: they shape the tables every connection shares (their
/// schema, which filters the scan takes over), so they are the server's, set by its
/// environment at start (`FLASHSCAN_SQL_SLICES`, `FLASHSCAN_SQL_VIEWS`).
/// `SET [LOCAL] name = value` on `backend` — from a statement, or from the startup packet's
/// options (`-c name=value`, libpq's PGOPTIONS), which PostgreSQL applies the same way.
pub(crate) fn apply_set(backend: &Backend, name: &str, value: &str, local: bool, in_block: bool) -> PgWireResult<()> {
    let name = name.to_ascii_lowercase();
    let name = name.as_str();
    if name == crate::synchronous_commit::NAME {
        return backend.synchronous_commit().set(value, local, in_block);
    }
    if let Some(setting) = DurationSetting::named(name) {
        let v = if value.eq_ignore_ascii_case("default") { Some(setting.default()) } else { parse_duration_setting(value) };
        let Some(d) = v else {
            return Err(pg_error(sqlstate::INVALID_PARAMETER_VALUE, format!("invalid value for parameter \"{name}\": {value} (use milliseconds, or a number with ms, s, min)")));
        };
        backend.set_duration(setting, d);
    } else if let Some(key) = name.strip_prefix("flashscan.") {
        set_flashscan(backend, key, value)?;
    } else if name.starts_with("datafusion.") {
        return Err(pg_error(sqlstate::FEATURE_NOT_SUPPORTED, format!("SET {name}: DataFusion settings are the server's, not a session's")));
    } else if let Some(current) = crate::pg_catalog::fixed_setting(name) {
        // A setting the server keeps at one value: asking for that value is honoured (clients
        // send `client_encoding = 'UTF8'`, `DateStyle = 'ISO'`); any other is refused, never
        // taken and ignored.
        if !crate::pg_settings::same_as_fixed(name, &current, value) {
            return Err(pg_error(sqlstate::CANT_CHANGE_RUNTIME_PARAM, format!("SET {name} = {value}: flashscan keeps {name} at '{current}' and cannot change it: leave it out")));
        }
    } else if name == "extra_float_digits" && value.trim().trim_matches('\'').parse::<i32>().map_or(true, |d| d < 1) {
        // Fewer digits than the shortest exact form is a rounding flashscan does not do.
        return Err(pg_error(sqlstate::INVALID_PARAMETER_VALUE, format!("SET extra_float_digits = {value}: flashscan always sends the shortest exact form (PostgreSQL's for 1 to 3): use 1, 2 or 3, or leave it out")));
    } else if !ANSWER_NEUTRAL_SETTINGS.contains(&name) {
        return Err(pg_error(
            sqlstate::FEATURE_NOT_SUPPORTED,
            format!("SET {name}: flashscan has no such setting to honour: leave it out (SHOW {name} and pg_settings list what there is)"),
        ));
    }
    Ok(())
}

/// PostgreSQL settings a client may set that change nothing a flashscan client sees: labels
/// and the verbosity of notices (flashscan sends none below WARNING), and float output,
/// which is always the shortest exact form (PostgreSQL's for `extra_float_digits` ≥ 1).
const ANSWER_NEUTRAL_SETTINGS: [&str; 3] = ["application_name", "client_min_messages", "extra_float_digits"];

fn set_flashscan(backend: &Backend, key: &str, value: &str) -> PgWireResult<()> {
    if flashscan_sql::FlashscanSettings::TABLE_KEYS.contains(&key) {
        return Err(pg_error(
            sqlstate::CANT_CHANGE_RUNTIME_PARAM,
            format!("parameter \"flashscan.{key}\" cannot be changed per connection: it shapes the tables all connections share; start the server with {}=0 or 1", flashscan_sql::settings::env_var_of(key)),
        ));
    }
    let mut settings = backend.settings();
    if flashscan_setting(&settings, &format!("flashscan.{key}")).is_none() {
        return Err(unknown_setting(&format!("flashscan.{key}")));
    }
    datafusion::config::ConfigField::set(&mut *settings, key, value)
        .map_err(|_| pg_error(sqlstate::INVALID_PARAMETER_VALUE, format!("invalid value for parameter \"flashscan.{key}\": {value} (use true or false, on or off, 1 or 0)")))
}

/// The value of `name` (`flashscan.runtime_filters`) in `settings`, as SHOW prints it.
fn flashscan_setting(settings: &flashscan_sql::FlashscanSettings, name: &str) -> Option<String> {
    datafusion::config::ExtensionOptions::entries(settings).into_iter().find(|e| e.key == name).and_then(|e| e.value)
}

fn unknown_setting(name: &str) -> PgWireError {
    pg_error(sqlstate::UNDEFINED_OBJECT, format!("unrecognized configuration parameter \"{name}\""))
}

/// Where a FETCH's rows stream from: the cursor, taken out of the connection's list while
/// the rows are sent, and put back when the stream ends or is dropped.
struct FetchState {
    cursor: Option<Box<Cursor>>,
    backend: Arc<Backend>,
    name: String,
    /// Rows still to fetch.
    left: u64,
    encoder: RowEncoder,
    fields: Arc<Vec<FieldInfo>>,
}

impl Drop for FetchState {
    fn drop(&mut self) {
        if let Some(cursor) = self.cursor.take() {
            self.backend.cursors().put_back(&self.name, cursor);
        }
    }
}

/// Collects a streamed answer, so the next statement of a multi-statement text can start
/// without holding two query slots. The command tag (`SELECT`, `FETCH`) is kept.
async fn materialize(response: Response) -> PgWireResult<Response> {
    match response {
        Response::Query(mut q) => {
            let fields = q.row_schema();
            let tag = q.command_tag().to_string();
            let mut rows = Vec::new();
            while let Some(r) = q.data_rows().next().await {
                rows.push(Ok(r?));
            }
            let mut collected = QueryResponse::new(fields, stream::iter(rows));
            collected.set_command_tag(&tag);
            Ok(Response::Query(collected))
        }
        other => Ok(other),
    }
}

#[async_trait]
impl SimpleQueryHandler for QueryHandler {
    async fn do_query<C>(&self, client: &mut C, query: &str) -> PgWireResult<Vec<Response>>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let backend = backend_of(client)?;
        let statements = split_statements(query);
        let many = statements.len() > 1;
        let mut responses = Vec::with_capacity(statements.len());
        for text in statements {
            let command = classify(&text);
            let ddl_in_block = ddl_in_block(&backend, &command);
            let result = match self.run_in_transaction(&backend, &command, None, Reuse::ByText, &Format::UnifiedText, Protocol::Simple).await {
                Ok(r) if many => materialize(r).await,
                other => other,
            };
            if let (Some(tag), Ok(_)) = (ddl_in_block, &result) {
                warn_ddl_in_block(client, tag).await?;
            }
            match result {
                Ok(r) => responses.push(r),
                Err(e) if responses.is_empty() => return Err(e),
                Err(e) => {
                    responses.push(Response::Error(Box::new(ErrorInfo::from(e))));
                    break;
                }
            }
        }
        if responses.is_empty() {
            responses.push(Response::EmptyQuery);
        }
        Ok(responses)
    }
}

#[async_trait]
impl QueryParser for Parser {
    type Statement = Statement;

    async fn parse_sql<C>(&self, client: &C, sql: &str, _types: &[Option<Type>]) -> PgWireResult<Option<Statement>>
    where
        C: ClientInfo + Unpin + Send + Sync,
    {
        let command = classify(sql);
        let mut fast = None;
        let generation = self.shared.catalog_generation();
        let (plan, param_types, schema) = match &command {
            Command::Sql(text) => {
                let backend = backend_of(client)?;
                let plan = plan_sql(&self.shared, &backend, text).await?;
                let params = param_types_of(&plan)?;
                // INSERT, UPDATE and DELETE return no rows (NoData), as in PostgreSQL (their
                // plans' `count` column is DataFusion's, not a result: psycopg, which prepares
                // a text run five times, showed it as a description).
                let returns_rows = flashscan_sql::returning::node(&plan).is_none_or(|n| n.returns_rows());
                let schema = (!matches!(plan, LogicalPlan::Dml(_)) && returns_rows).then(|| plan.schema().inner().clone());
                if is_insert(&plan) && self.shared.fast_insert {
                    fast = FastInsert::from_plan(&plan);
                }
                (Some(plan), params, schema)
            }
            Command::Show { name } => (None, vec![], Some(schema_of_show(name))),
            // psycopg 3 sends DECLARE by the extended protocol, its parameters bound to the
            // query; DECLARE itself returns no rows.
            Command::Declare(declare) => {
                let backend = backend_of(client)?;
                let plan = plan_sql(&self.shared, &backend, &declare.query).await?;
                let params = param_types_of(&plan)?;
                (Some(plan), params, None)
            }
            // FETCH's rows have the cursor's columns (described before Execute).
            Command::Fetch { name, move_only: false, .. } => {
                let backend = backend_of(client)?;
                let schema = backend.cursors().schema_of(name);
                (None, vec![], schema)
            }
            _ => (None, vec![], None),
        };
        Ok(Some(Arc::new(Prepared { command, plan, param_types, schema, fast, generation, replanned: Default::default() })))
    }

    fn get_parameter_types(&self, stmt: &Statement) -> PgWireResult<Vec<Type>> {
        Ok(stmt.param_types.iter().map(|t| pg_type_for_param(t.as_ref())).collect())
    }

    fn get_result_schema(&self, stmt: &Statement, column_format: Option<&Format>) -> PgWireResult<Vec<FieldInfo>> {
        match &stmt.schema {
            Some(s) => Ok(fields_of(s, column_format.unwrap_or(&Format::UnifiedText))?.as_ref().clone()),
            None => Ok(vec![]),
        }
    }
}

/// pgwire's `send_describe_response` with `feed` instead of `send`: the messages wait in
/// the connection's buffer for the Sync (or Flush) that ends the client's batch.
async fn feed_describe_response<C, R>(client: &mut C, response: &R) -> PgWireResult<()>
where
    C: Sink<PgWireBackendMessage> + Unpin,
    C::Error: Debug,
    PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    R: pgwire::api::results::DescribeResponse,
{
    use futures::SinkExt;
    use pgwire::messages::data::{NoData, ParameterDescription, RowDescription};
    if let Some(types) = response.parameters() {
        client.feed(PgWireBackendMessage::ParameterDescription(ParameterDescription::new(types.iter().map(|t| t.oid()).collect()))).await?;
    }
    if response.is_no_data() {
        client.feed(PgWireBackendMessage::NoData(NoData::new())).await?;
    } else {
        client.feed(PgWireBackendMessage::RowDescription(RowDescription::new(response.fields().iter().map(Into::into).collect()))).await?;
    }
    Ok(())
}

#[async_trait]
impl ExtendedQueryHandler for QueryHandler {
    type Statement = Statement;
    type QueryParser = Parser;

    fn query_parser(&self) -> Arc<Parser> {
        self.parser.clone()
    }

    /// Describe as pgwire's default does, except that the answer is queued (`feed`), not
    /// flushed on its own (see `on_bind`): libpq's prepared execution (pgbench `-M
    /// prepared`, psycopg) sends Bind, Describe portal, Execute, Sync each time, and
    /// pgwire's flush of the RowDescription/NoData was a socket write per execution — the
    /// largest single cost of a single-row INSERT in the profile (docs/server.md).
    async fn on_describe<C>(&self, client: &mut C, message: pgwire::messages::extendedquery::Describe) -> PgWireResult<()>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = Statement>,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        use pgwire::api::results::DescribeResponse;
        use pgwire::api::store::Entry;
        use pgwire::messages::extendedquery::{TARGET_TYPE_BYTE_PORTAL, TARGET_TYPE_BYTE_STATEMENT};
        let name = message.name.as_deref().unwrap_or(pgwire::api::DEFAULT_NAME);
        match message.target_type {
            TARGET_TYPE_BYTE_STATEMENT => match client.portal_store().get_statement(name) {
                Some(Entry::Value(stmt)) => {
                    let response = self.do_describe_statement(client, &stmt).await?;
                    feed_describe_response(client, &response).await
                }
                Some(Entry::Empty) => feed_describe_response(client, &DescribeStatementResponse::no_data()).await,
                None => Err(PgWireError::StatementNotFound(name.to_owned())),
            },
            TARGET_TYPE_BYTE_PORTAL => match client.portal_store().get_portal(name) {
                Some(Entry::Value(portal)) => {
                    let response = self.do_describe_portal(client, &portal).await?;
                    feed_describe_response(client, &response).await
                }
                Some(Entry::Empty) => feed_describe_response(client, &DescribePortalResponse::no_data()).await,
                // A cursor is a portal in PostgreSQL's protocol: psycopg 3 describes its
                // named cursor this way after DECLARE.
                None => {
                    let schema = backend_of(client)?.cursors().schema_of(name);
                    match schema {
                        Some(schema) => feed_describe_response(client, &DescribePortalResponse::new(fields_of(&schema, &Format::UnifiedText)?.as_ref().clone())).await,
                        None => Err(crate::cursors::no_such_cursor(name)),
                    }
                }
            },
            other => Err(PgWireError::InvalidTargetType(other)),
        }
    }

    /// Bind as pgwire's default does, except that BindComplete is queued (`feed`), not
    /// flushed on its own: it leaves with the Execute's CommandComplete and ReadyForQuery
    /// at Sync, in one socket write, as PostgreSQL sends them (the protocol flushes only
    /// at Sync or Flush). pgwire's `send` cost a write of its own per prepared statement
    /// execution, and the client a wakeup to read it — per single-row INSERT, a syscall
    /// and a context switch on each side (measured: docs/server.md, "Writes over the wire").
    async fn on_bind<C>(&self, client: &mut C, message: pgwire::messages::extendedquery::Bind) -> PgWireResult<()>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = Statement>,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        use futures::SinkExt;
        use pgwire::api::store::Entry;
        let statement_name = message.statement_name.as_deref().unwrap_or(pgwire::api::DEFAULT_NAME);
        let portal_name = message.portal_name.as_deref().unwrap_or(pgwire::api::DEFAULT_NAME);
        match client.portal_store().get_statement(statement_name) {
            Some(Entry::Value(statement)) => {
                let portal = Portal::try_new(&message, statement)?;
                client.portal_store().put_portal(Arc::new(portal));
            }
            Some(Entry::Empty) => {
                if !message.parameters.is_empty() {
                    return Err(pg_error(
                        sqlstate::PROTOCOL_VIOLATION,
                        format!("bind message supplies {} parameters, but prepared statement {statement_name:?} requires 0", message.parameters.len()),
                    ));
                }
                client.portal_store().put_empty_portal(portal_name);
            }
            None => return Err(PgWireError::StatementNotFound(statement_name.to_owned())),
        }
        client.feed(PgWireBackendMessage::BindComplete(pgwire::messages::extendedquery::BindComplete::new())).await?;
        Ok(())
    }

    /// Execute as pgwire's default (`_on_execute`) does, except that a query's last message
    /// (CommandComplete or PortalSuspended) is queued (`feed`), not flushed on its own: it
    /// leaves with Sync's ReadyForQuery in one socket write, as PostgreSQL sends them (the
    /// protocol flushes at Sync or Flush). pgwire's `send` made every prepared query two
    /// writes — strace of a prepared `SELECT 1`: 65 bytes (BindComplete to CommandComplete),
    /// then ReadyForQuery's 6 — and so two wakeups of the client.
    async fn on_execute<C>(&self, client: &mut C, message: pgwire::messages::extendedquery::Execute) -> PgWireResult<()>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = Statement>,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        use futures::SinkExt;
        use pgwire::api::portal::PortalExecutionState;
        use pgwire::api::store::Entry;
        use pgwire::api::PgWireConnectionState;
        use pgwire::messages::extendedquery::PortalSuspended;
        use pgwire::messages::response::EmptyQueryResponse;
        if !matches!(client.state(), PgWireConnectionState::ReadyForQuery) {
            return Err(PgWireError::NotReadyForQuery);
        }
        let mut transaction_status = client.transaction_status();
        client.set_state(PgWireConnectionState::QueryInProgress);
        let portal_name = message.name.as_deref().unwrap_or(pgwire::api::DEFAULT_NAME);
        let max_rows = message.max_rows as usize;
        let portal = match client.portal_store().get_portal(portal_name) {
            Some(Entry::Value(portal)) => portal,
            Some(Entry::Empty) => {
                client.feed(PgWireBackendMessage::EmptyQueryResponse(EmptyQueryResponse::new())).await?;
                client.set_state(PgWireConnectionState::ReadyForQuery);
                return Ok(());
            }
            None => return Err(PgWireError::PortalNotFound(portal_name.to_owned())),
        };
        let initial = matches!(*portal.state().lock().await, PortalExecutionState::Initial);
        let needs_fetch = if initial {
            let cancel = match client.session_extensions().get::<Arc<pgwire::api::ConnectionHandle>>() {
                Some(handle) => Some(handle.start_query().await),
                None => None,
            };
            let response = match cancel {
                Some(cancel) => match futures::future::select(ExtendedQueryHandler::do_query(self, client, portal.as_ref(), max_rows), cancel).await {
                    futures::future::Either::Left((result, _)) => result,
                    futures::future::Either::Right(_) => Err(PgWireError::QueryCanceled),
                },
                None => ExtendedQueryHandler::do_query(self, client, portal.as_ref(), max_rows).await,
            }?;
            match response {
                Response::Query(results) => {
                    portal.start(results).await;
                    true
                }
                Response::EmptyQuery => {
                    client.feed(PgWireBackendMessage::EmptyQueryResponse(EmptyQueryResponse::new())).await?;
                    false
                }
                Response::Execution(tag) => {
                    pgwire::api::query::send_execution_response(client, tag).await?;
                    false
                }
                Response::TransactionStart(tag) => {
                    pgwire::api::query::send_execution_response(client, tag).await?;
                    transaction_status = transaction_status.to_in_transaction_state();
                    false
                }
                Response::TransactionEnd(tag) => {
                    pgwire::api::query::send_execution_response(client, tag).await?;
                    transaction_status = transaction_status.to_idle_state();
                    client.portal_store().rm_portal(pgwire::api::DEFAULT_NAME);
                    false
                }
                Response::Error(err) => {
                    client.send(PgWireBackendMessage::ErrorResponse((*err).into())).await?;
                    transaction_status = transaction_status.to_error_state();
                    false
                }
                Response::CopyIn(result) => {
                    client.set_state(PgWireConnectionState::CopyInProgress(true));
                    pgwire::api::copy::send_copy_in_response(client, result).await?;
                    false
                }
                Response::CopyOut(result) => {
                    pgwire::api::copy::send_copy_out_response(client, result).await?;
                    false
                }
                Response::CopyBoth(result) => {
                    client.set_state(PgWireConnectionState::CopyInProgress(true));
                    pgwire::api::copy::send_copy_both_response(client, result).await?;
                    false
                }
            }
        } else {
            // Suspended or finished: the rows left.
            true
        };
        if needs_fetch {
            let fetched = portal.fetch(max_rows).await?;
            let mut response = fetched.response;
            let command_tag = response.command_tag().to_owned();
            let mut rows = 0;
            while let Some(row) = response.data_rows().next().await {
                client.feed(PgWireBackendMessage::DataRow(row?)).await?;
                rows += 1;
            }
            if fetched.suspended {
                client.feed(PgWireBackendMessage::PortalSuspended(PortalSuspended::new())).await?;
            } else {
                client.feed(PgWireBackendMessage::CommandComplete(Tag::new(&command_tag).with_rows(rows).into())).await?;
            }
        }
        if !matches!(client.state(), PgWireConnectionState::CopyInProgress(_)) {
            client.set_state(PgWireConnectionState::ReadyForQuery);
            client.set_transaction_status(transaction_status);
        }
        Ok(())
    }

    async fn do_describe_statement<C>(&self, _client: &mut C, target: &StoredStatement<Statement>) -> PgWireResult<DescribeStatementResponse>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = Statement>,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let stmt = &target.statement;
        let server = self.parser.get_parameter_types(stmt)?;
        let n = server.len().max(target.parameter_types.len());
        let params = (0..n).map(|i| target.parameter_types.get(i).cloned().flatten().or_else(|| server.get(i).cloned()).unwrap_or(Type::TEXT)).collect();
        let fields = self.parser.get_result_schema(stmt, None)?;
        Ok(DescribeStatementResponse::new(params, fields))
    }

    async fn do_describe_portal<C>(&self, _client: &mut C, target: &Portal<Statement>) -> PgWireResult<DescribePortalResponse>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = Statement>,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let fields = self.parser.get_result_schema(&target.statement.statement, Some(&target.result_column_format))?;
        Ok(DescribePortalResponse::new(fields))
    }

    async fn do_query<C>(&self, client: &mut C, portal: &Portal<Statement>, _max_rows: usize) -> PgWireResult<Response>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = Statement>,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let backend = backend_of(client)?;
        let stored = &portal.statement;
        let prepared = &stored.statement;
        let replanned = self.replanned_if_stale(&backend, prepared).await?;
        let (plan, fast) = match &replanned {
            Some(r) => (Some(&r.plan), r.fast.as_ref()),
            None => (prepared.plan.as_ref(), prepared.fast.as_ref()),
        };
        // Kept by its text only without parameters (the text does not say their values).
        let mut reuse = if prepared.param_types.is_empty() && portal.parameter_len() == 0 { Reuse::ByText } else { Reuse::No };
        let plan = match plan {
            Some(plan) => {
                let server = self.parser.get_parameter_types(prepared)?;
                let required = server.len().max(stored.parameter_types.len());
                if portal.parameter_len() > required {
                    return Err(pg_error(
                        sqlstate::PROTOCOL_VIOLATION,
                        format!("bind message supplies {} parameters, but prepared statement \"{}\" requires {required}", portal.parameter_len(), stored.id),
                    ));
                }
                let n = required.max(portal.parameter_len());
                let types: Vec<Type> =
                    (0..n).map(|i| stored.parameter_types.get(i).cloned().flatten().or_else(|| server.get(i).cloned()).unwrap_or(Type::TEXT)).collect();
                let values = decode_params(portal, &types, &prepared.param_types)?;
                if let Some((table, batch)) = self.fast_rows(&backend, fast, &values) {
                    return self.guarded(&backend, &prepared.command, self.commit_rows(&backend, &table, vec![batch])).await;
                }
                let plan = if values.is_empty() {
                    plan.clone()
                } else {
                    reuse = Reuse::No;
                    flashscan_sql::parameters::bind(plan, ParamValues::from(values)).map_err(|e| sql_error_to_pg(&flashscan_sql::SqlError::from(e)))?
                };
                Some(plan)
            }
            None => None,
        };
        // Boxed on its own: async_trait boxes this function's whole future per Execute, and
        // its size is its largest state's — a query's (planning, streaming) would otherwise
        // be allocated and copied for every prepared INSERT on the fast path above too
        // (4.5 % of the server's CPU at 64 clients in memcpy alone: docs/benchmarks.md, server7).
        let ddl_in_block = ddl_in_block(&backend, &prepared.command);
        let result = Box::pin(self.run_in_transaction(&backend, &prepared.command, plan, reuse, &portal.result_column_format, Protocol::Extended)).await;
        if let (Some(tag), Ok(_)) = (ddl_in_block, &result) {
            warn_ddl_in_block(client, tag).await?;
        }
        result
    }
}

/// The tag of `command` when it is DDL run inside a transaction block.
fn ddl_in_block(backend: &Backend, command: &Command) -> Option<&'static str> {
    match command {
        Command::Ddl { tag, .. } if backend.transaction().in_block() => Some(tag),
        _ => None,
    }
}

/// DDL inside BEGIN … COMMIT commits as it runs, said to the client as a WARNING notice
/// (`flashscan_sql::session::ddl_in_block_warning` has why).
async fn warn_ddl_in_block<C>(client: &mut C, tag: &str) -> PgWireResult<()>
where
    C: Sink<PgWireBackendMessage> + Unpin + Send,
    PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
{
    use futures::SinkExt;
    let message = flashscan_sql::session::ddl_in_block_warning(tag);
    let info = ErrorInfo::new("WARNING".to_owned(), "01000".to_owned(), message);
    client.feed(PgWireBackendMessage::NoticeResponse(info.into())).await?;
    Ok(())
}

#[async_trait]
impl CopyHandler for QueryHandler {
    async fn on_copy_data<C>(&self, client: &mut C, copy_data: CopyData) -> PgWireResult<()>
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let backend = backend_of(client)?;
        let mut copy = backend.copy_in();
        let Some(copy) = copy.as_mut() else {
            return Err(pg_error(sqlstate::PROTOCOL_VIOLATION, "CopyData without COPY FROM STDIN"));
        };
        if copy.data.len() + copy_data.data.len() > crate::copy_from::COPY_BYTES_MAX {
            copy.too_large = true;
            copy.data = Vec::new();
        }
        if !copy.too_large {
            copy.data.extend_from_slice(&copy_data.data);
        }
        Ok(())
    }

    async fn on_copy_done<C>(&self, client: &mut C, _done: CopyDone) -> PgWireResult<()>
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let backend = backend_of(client)?;
        let result = self.finish_copy_in(&backend).await;
        let rows = match result {
            Ok(rows) => rows,
            Err(e) => {
                backend.transaction().fail();
                return Err(e);
            }
        };
        use futures::SinkExt;
        client.send(PgWireBackendMessage::CommandComplete(Tag::new("COPY").with_rows(rows as usize).into())).await?;
        Ok(())
    }

    async fn on_copy_fail<C>(&self, client: &mut C, fail: CopyFail) -> PgWireError
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        if let Ok(backend) = backend_of(client) {
            backend.copy_in().take();
            backend.transaction().fail();
        }
        pg_error(sqlstate::QUERY_CANCELED, format!("COPY from stdin failed: {}; nothing was inserted", fail.message))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pgwire::types::ToSqlText;
    use postgres_types::ToSql;
    use proptest::prelude::*;

    proptest! {
        /// `RowEncoder` writes the rows pgwire's `DataRowEncoder` writes, text and binary,
        /// NULLs included, over enough rows to cross its buffer's refills.
        #[test]
        fn row_encoder_writes_pgwires_rows(values in proptest::collection::vec((any::<Option<i64>>(), proptest::option::of("[a-zé ]{0,300}"), any::<Option<f64>>()), 1..600), binary in any::<bool>()) {
            use arrow::array::{Float64Array, StringArray};
            let schema = Arc::new(Schema::new(vec![Field::new("i", DataType::Int64, true), Field::new("s", DataType::Utf8, true), Field::new("f", DataType::Float64, true)]));
            let batch = RecordBatch::try_new(
                schema.clone(),
                vec![
                    Arc::new(Int64Array::from(values.iter().map(|v| v.0).collect::<Vec<_>>())),
                    Arc::new(StringArray::from(values.iter().map(|v| v.1.clone()).collect::<Vec<_>>())),
                    Arc::new(Float64Array::from(values.iter().map(|v| v.2).collect::<Vec<_>>())),
                ],
            ).expect("batch");
            let format = if binary { Format::UnifiedBinary } else { Format::UnifiedText };
            let fields = fields_of(&schema, &format).expect("fields");
            let ours = encode_rows(&mut RowEncoder::default(), &batch, &fields).expect("ours");
            let theirs = encode_rows(&mut pgwire::api::results::DataRowEncoder::new(fields.clone()), &batch, &fields).expect("pgwire's");
            prop_assert_eq!(ours, theirs);
        }

        /// `IntText` writes what pgwire's own integer encoding writes, as text and binary,
        /// for every width the column may have.
        #[test]
        fn int_text_encodes_as_pgwire_does(v in any::<i64>(), null in any::<bool>()) {
            let options = pgwire::types::format::FormatOptions::default();
            let value = (!null).then_some(v);
            for ty in [pgwire::api::Type::INT8, pgwire::api::Type::INT4, pgwire::api::Type::INT2] {
                let (mut ours, mut theirs) = (bytes::BytesMut::new(), bytes::BytesMut::new());
                let a = IntText(value).to_sql_text(&ty, &mut ours, &options).expect("ours");
                let b = value.to_sql_text(&ty, &mut theirs, &options).expect("pgwire's");
                prop_assert_eq!(matches!(a, postgres_types::IsNull::Yes), matches!(b, postgres_types::IsNull::Yes));
                prop_assert_eq!(&ours, &theirs);
            }
            let (mut ours, mut theirs) = (bytes::BytesMut::new(), bytes::BytesMut::new());
            IntText(value).to_sql(&pgwire::api::Type::INT8, &mut ours).expect("ours");
            value.to_sql(&pgwire::api::Type::INT8, &mut theirs).expect("postgres-types'");
            prop_assert_eq!(&ours, &theirs);
            let narrow = value.map(|v| v as i32);
            let (mut ours, mut theirs) = (bytes::BytesMut::new(), bytes::BytesMut::new());
            IntText(narrow.map(i64::from)).to_sql(&pgwire::api::Type::INT4, &mut ours).expect("ours");
            narrow.to_sql(&pgwire::api::Type::INT4, &mut theirs).expect("postgres-types'");
            prop_assert_eq!(&ours, &theirs);
        }
    }
}
