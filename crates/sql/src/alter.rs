//! ALTER TABLE's column and name changes, for every front end: `ADD [COLUMN] [IF NOT
//! EXISTS] c type [DEFAULT e] [NOT NULL]`, `DROP [COLUMN] [IF EXISTS] c`, `RENAME [COLUMN] a
//! TO b`, `ALTER [COLUMN] c SET DEFAULT e | DROP DEFAULT`, `ALTER [COLUMN] c [SET DATA] TYPE
//! t | SET NOT NULL | DROP NOT NULL`, `RENAME TO t2`. The write path does them (crates/write
//! `alter.rs`: ADD / DROP COLUMN and the column's type or nullability rewrite the table,
//! the others change the catalog); this module turns the statement into its request, with the new
//! column planned as CREATE TABLE plans columns and its default computed once.
//!
//! ADD COLUMN gives the existing rows what PostgreSQL gives them: a constant default once
//! computed, a volatile one (`random()`) computed per row, a SERIAL or identity column's
//! new sequence numbering them. Refused, with what to do: several changes in one statement
//! (each is its own commit here, so a failure halfway would leave some applied), a default
//! drawing from a sequence that exists, PRIMARY KEY / UNIQUE in ADD COLUMN, TYPE … USING
//! (the value is converted as CAST converts it). Key changes (ADD PRIMARY KEY, ADD UNIQUE,
//! DROP CONSTRAINT) are `index_ddl`'s.

use datafusion::common::{DFSchema, ScalarValue};
use datafusion::execution::session_state::SessionState;
use datafusion::logical_expr::{DdlStatement, ExprSchemable, LogicalPlan, LogicalPlanBuilder};
use datafusion::prelude::DataFrame;
use datafusion::sql::parser::Statement as DFStatement;
use datafusion::sql::sqlparser::ast::{AlterColumnOperation, AlterTable, AlterTableOperation, ColumnDef as SqlColumnDef, DataType as SqlDataType, Expr as SqlExpr, Ident, RenameTableNameKind, Statement};
use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
use datafusion::sql::sqlparser::parser::Parser;
use flashscan_storage::{ColumnDef, ColumnDefaultMeta, ColumnType, TableMeta};

use crate::error::SqlError;

/// The change an ALTER TABLE asks for, when it is one of this module's.
#[derive(Debug, Clone)]
pub enum ColumnChange {
    Add { column: SqlColumnDef, if_not_exists: bool },
    Drop { column: String, if_exists: bool },
    Rename { from: String, to: String },
    /// SET DEFAULT (`Some`) or DROP DEFAULT (`None`).
    SetDefault { column: String, default: Option<SqlExpr> },
    /// TYPE (`data_type`), SET NOT NULL (`nullable: Some(false)`), DROP NOT NULL.
    Change { column: String, data_type: Option<SqlDataType>, nullable: Option<bool> },
    RenameTable { to: String },
}

fn refuse(table: &str, what: &str, instead: &str) -> SqlError {
    SqlError::Plan(format!("ALTER TABLE {table} … {what} is not supported yet: {instead}"))
}

/// A name as PostgreSQL folds it: quoted as written, else lower case.
fn folded(ident: &Ident) -> String {
    if ident.quote_style.is_some() {
        ident.value.clone()
    } else {
        ident.value.to_ascii_lowercase()
    }
}

/// This module's change in `at`, or `None` for a key change (or a form refused by
/// `index_ddl::alter_table`).
pub fn column_change(at: &AlterTable) -> Result<Option<ColumnChange>, SqlError> {
    let table = crate::index_ddl::bare_name(&at.name);
    let ours = |op: &AlterTableOperation| {
        matches!(
            op,
            AlterTableOperation::AddColumn { .. } | AlterTableOperation::DropColumn { .. } | AlterTableOperation::RenameColumn { .. } | AlterTableOperation::AlterColumn { .. } | AlterTableOperation::RenameTable { .. }
        )
    };
    if !at.operations.iter().any(ours) {
        return Ok(None);
    }
    if at.operations.len() != 1 {
        return Err(refuse(&table, "with several changes in one statement", "run one ALTER TABLE per change"));
    }
    if at.on_cluster.is_some() || at.location.is_some() || at.table_type.is_some() {
        return Err(refuse(&table, "ON CLUSTER / SET LOCATION / a table type", "write plain ALTER TABLE"));
    }
    let change = match &at.operations[0] {
        AlterTableOperation::AddColumn { if_not_exists, column_def, column_position, .. } => {
            if column_position.is_some() {
                return Err(refuse(&table, "ADD COLUMN FIRST / AFTER", "a new column goes last; leave the position out"));
            }
            ColumnChange::Add { column: column_def.clone(), if_not_exists: *if_not_exists }
        }
        AlterTableOperation::DropColumn { column_names, if_exists, drop_behavior, .. } => {
            if matches!(drop_behavior, Some(datafusion::sql::sqlparser::ast::DropBehavior::Cascade)) {
                return Err(refuse(&table, "DROP COLUMN … CASCADE", "drop the views that read the table first, then DROP COLUMN"));
            }
            let [column] = column_names.as_slice() else {
                return Err(refuse(&table, "DROP COLUMN of several columns", "drop one column per statement"));
            };
            ColumnChange::Drop { column: folded(column), if_exists: *if_exists }
        }
        AlterTableOperation::RenameColumn { old_column_name, new_column_name } => ColumnChange::Rename { from: folded(old_column_name), to: folded(new_column_name) },
        AlterTableOperation::RenameTable { table_name } => {
            let (RenameTableNameKind::To(name) | RenameTableNameKind::As(name)) = table_name;
            if name.0.len() > 1 {
                return Err(refuse(&table, "RENAME TO a qualified name", "give the new name alone (tables cannot move between schemas)"));
            }
            let to = name.0.last().and_then(|p| p.as_ident()).map(folded).unwrap_or_default();
            ColumnChange::RenameTable { to }
        }
        AlterTableOperation::AlterColumn { column_name, op } => {
            let column = folded(column_name);
            match op {
                AlterColumnOperation::SetDefault { value } => ColumnChange::SetDefault { column, default: Some(value.clone()) },
                AlterColumnOperation::DropDefault => ColumnChange::SetDefault { column, default: None },
                AlterColumnOperation::SetNotNull => ColumnChange::Change { column, data_type: None, nullable: Some(false) },
                AlterColumnOperation::DropNotNull => ColumnChange::Change { column, data_type: None, nullable: Some(true) },
                AlterColumnOperation::SetDataType { data_type, using: None, .. } => ColumnChange::Change { column, data_type: Some(data_type.clone()), nullable: None },
                AlterColumnOperation::SetDataType { using: Some(_), .. } => {
                    return Err(refuse(&table, "ALTER COLUMN TYPE … USING", "leave USING out (the values are converted as CAST converts them), or add a column, UPDATE it with the expression, drop the old one and RENAME the new"))
                }
                _ => return Err(refuse(&table, &format!("ALTER COLUMN {column} {op}"), "only SET DEFAULT and DROP DEFAULT are")),
            }
        }
        _ => return Ok(None),
    };
    Ok(Some(change))
}

/// A column ADD COLUMN adds: its definition, its default, and what the existing rows get.
#[derive(Debug, Clone)]
pub struct AddedColumn {
    pub column: ColumnDef,
    pub default: Option<ColumnDefaultMeta>,
    pub fill: AddedFill,
}

/// The values ADD COLUMN gives the rows a table has, as PostgreSQL gives them.
#[derive(Debug, Clone)]
pub enum AddedFill {
    /// The default computed once (or NULL): every row the same.
    Value(ScalarValue),
    /// A volatile default (`random()`, `clock_timestamp()`): computed for each row.
    PerRow(std::sync::Arc<dyn datafusion::physical_expr::PhysicalExpr>),
    /// SERIAL / identity: the column's new sequence numbers the rows.
    Sequence { name: String, meta: flashscan_storage::SequenceMeta },
}

impl AddedFill {
    /// The values of `n` rows, for every fill but `Sequence` (the write path numbers those).
    pub fn values(&self, n: usize) -> datafusion::error::Result<arrow::array::ArrayRef> {
        match self {
            AddedFill::Value(v) => v.to_array_of_size(n),
            AddedFill::PerRow(e) => {
                let options = arrow::record_batch::RecordBatchOptions::new().with_row_count(Some(n));
                let batch = arrow::record_batch::RecordBatch::try_new_with_options(std::sync::Arc::new(arrow::datatypes::Schema::empty()), vec![], &options)?;
                e.evaluate(&batch)?.into_array(n)
            }
            AddedFill::Sequence { .. } => datafusion::common::internal_err!("a sequence's values come from the write path"),
        }
    }
}

/// Plans `def` as CREATE TABLE plans a column (types, NULL / NOT NULL, DEFAULT), refusing
/// what ADD COLUMN does not do.
pub async fn added_column(state: &SessionState, table: &str, def: &SqlColumnDef) -> Result<AddedColumn, SqlError> {
    let sql = format!("CREATE TABLE {} ({def})", Ident::with_quote('"', table));
    let parsed = Parser::parse_sql(&PostgreSqlDialect {}, &sql).map_err(|e| SqlError::Plan(format!("ADD COLUMN {def}: {e}")))?;
    let Some(Statement::CreateTable(mut ct)) = parsed.into_iter().next() else {
        return Err(SqlError::Internal(format!("ADD COLUMN {def}: did not parse as a column")));
    };
    if !crate::index_ddl::take_key_constraints(&mut ct)?.is_empty() {
        return Err(refuse(table, "ADD COLUMN … PRIMARY KEY / UNIQUE", &format!("add the column, then ALTER TABLE {table} ADD PRIMARY KEY (…) or ADD UNIQUE (…)")));
    }
    let defaults = crate::column_defaults::take_column_defaults(&mut ct)?;
    crate::dml::refuse_unsupported_create(&ct)?;
    let plan = state.statement_to_plan(DFStatement::Statement(Box::new(Statement::CreateTable(ct)))).await?;
    let LogicalPlan::Ddl(DdlStatement::CreateMemoryTable(create)) = plan else {
        return Err(SqlError::Internal(format!("ADD COLUMN {def}: did not plan as a column")));
    };
    let schema = create.input.schema().as_arrow().clone();
    crate::column_defaults::check_defaults(state, &schema, &defaults).await?;
    let field = schema.field(0);
    let column = ColumnDef { name: field.name().clone(), column_type: ColumnType::from_arrow(field.name(), field.data_type())?, nullable: field.is_nullable() };
    let default = defaults.defaults.into_iter().next();
    // DataFusion plans VARCHAR as Utf8View; the table stores the column's own type.
    let stored_type = column.column_type.arrow_type();
    if let Some((name, meta)) = defaults.sequences.into_iter().next() {
        return Ok(AddedColumn { column, default, fill: AddedFill::Sequence { name, meta } });
    }
    let fill = match &default {
        None => AddedFill::Value(ScalarValue::try_from(field.data_type())?.cast_to(&stored_type)?),
        Some(d) => {
            let expr = crate::column_defaults::plan_default(state, d)?;
            let cast = expr.clone().cast_to(&stored_type, &DFSchema::empty())?;
            if expr.is_volatile() {
                // A sequence's values are handed out by the write path, which the rewrite
                // holds: numbering rows from another sequence is not built.
                let draws_sequence = datafusion::common::tree_node::TreeNode::exists(&expr, |e| Ok(matches!(e, datafusion::logical_expr::Expr::ScalarFunction(f) if matches!(f.name(), "nextval" | "setval"))))?;
                if draws_sequence {
                    return Err(refuse(
                        table,
                        &format!("ADD COLUMN with DEFAULT {} (a sequence that exists)", d.sql),
                        &format!("add the column without it, UPDATE {table} SET {} = nextval(…), then ALTER COLUMN {} SET DEFAULT {}; or add it as SERIAL", column.name, column.name, d.sql),
                    ));
                }
                AddedFill::PerRow(state.create_physical_expr(cast, &DFSchema::empty())?)
            } else {
                let plan = LogicalPlanBuilder::empty(true).project(vec![cast.alias("v")])?.build()?;
                let batches = DataFrame::new(state.clone(), plan).collect().await?;
                let batch = batches.iter().find(|b| b.num_rows() > 0).ok_or_else(|| SqlError::Internal(format!("DEFAULT {} computed no value", d.sql)))?;
                AddedFill::Value(ScalarValue::try_from_array(batch.column(0), 0)?)
            }
        }
    };
    Ok(AddedColumn { column, default, fill })
}

/// The column type `data_type` is stored as, planned as CREATE TABLE plans it.
pub async fn planned_type(state: &SessionState, table: &str, data_type: &SqlDataType) -> Result<ColumnType, SqlError> {
    let sql = format!("CREATE TABLE {} (c {data_type})", Ident::with_quote('"', table));
    let parsed = Parser::parse_sql(&PostgreSqlDialect {}, &sql).map_err(|e| SqlError::Plan(format!("TYPE {data_type}: {e}")))?;
    let Some(Statement::CreateTable(ct)) = parsed.into_iter().next() else {
        return Err(SqlError::Internal(format!("TYPE {data_type}: did not parse as a type")));
    };
    if crate::column_defaults::serial_type(data_type) {
        return Err(refuse(table, "ALTER COLUMN TYPE SERIAL", "SERIAL is a column with a sequence, not a type: use an integer type and SET DEFAULT nextval('a_sequence')"));
    }
    let plan = state.statement_to_plan(DFStatement::Statement(Box::new(Statement::CreateTable(ct)))).await?;
    let LogicalPlan::Ddl(DdlStatement::CreateMemoryTable(create)) = plan else {
        return Err(SqlError::Internal(format!("TYPE {data_type}: did not plan as a type")));
    };
    let field = create.input.schema().as_arrow().field(0).clone();
    Ok(ColumnType::from_arrow(field.name(), field.data_type())?)
}

/// SET DEFAULT: `expr` planned for column `column` of `table` (it must name no column and
/// convert to the column's type; computed now unless volatile).
pub async fn checked_default(state: &SessionState, table: &TableMeta, column: &str, expr: &SqlExpr) -> Result<ColumnDefaultMeta, SqlError> {
    let i = table.column_index(column)?;
    let d = ColumnDefaultMeta { column: table.columns[i].name.clone(), sql: expr.to_string(), sequence: None, always: false, identity: false };
    let schema = table.arrow_schema();
    crate::column_defaults::check_defaults(state, &schema, &crate::column_defaults::TakenDefaults::of(vec![d.clone()])).await?;
    Ok(d)
}
