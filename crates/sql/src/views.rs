//! Views: `CREATE [OR REPLACE] VIEW name [(columns)] AS query` and `DROP VIEW [IF EXISTS]
//! a, b, …` for a [`FlashscanSession`](crate::FlashscanSession).
//!
//! A view is kept in the catalog as its query's SQL text, its column names and the tables
//! and views it reads (`flashscan_storage::ViewEntry`), written by the write path's catalog
//! commit like CREATE TABLE. Whenever the session registers the tables it plans every
//! view's query again and registers the plan as DataFusion's `ViewTable`, which the planner
//! inlines into each query that reads the view — so a view always reads the tables as they
//! are registered now, with the statement's snapshot. A view whose query no longer plans (a
//! table it reads was dropped by an older flashscan, or by `flashscan drop` before views
//! guarded it) is registered as [`UnplannableView`]: reading it fails with an error naming
//! the view and saying what to do. Views are read-only: INSERT, UPDATE, DELETE and COPY
//! into one are refused ([`refuse_write_into_view`]).

use std::borrow::Cow;
use std::sync::Arc;

use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use async_trait::async_trait;
use datafusion::catalog::{Session, TableProvider};
use datafusion::logical_expr::TableType;
use datafusion::error::{DataFusionError, Result as DfResult};
use datafusion::execution::session_state::SessionState;
use datafusion::logical_expr::{Expr, LogicalPlan, LogicalPlanBuilder};
use datafusion::physical_plan::ExecutionPlan;
use datafusion::sql::parser::Statement as DFStatement;
use datafusion::sql::sqlparser::ast::{CreateView, FromTable, Statement as SqlStatement, TableFactor};
use flashscan_storage::{Catalog, ViewEntry};

use crate::error::SqlError;

/// The last part of an object name, unquoted, lower case unless it was quoted (how the
/// session registers names).
pub(crate) fn object_name(name: &datafusion::sql::sqlparser::ast::ObjectName) -> String {
    let last = name.0.last().map(|p| p.to_string()).unwrap_or_default();
    if last.starts_with('"') {
        last.trim_matches('"').replace("\"\"", "\"")
    } else {
        last.to_ascii_lowercase()
    }
}

/// What CREATE VIEW asks for, checked: refused options are refused here, in one line.
pub(crate) struct ViewRequest {
    pub name: String,
    pub or_replace: bool,
    pub if_not_exists: bool,
    pub declared_columns: Vec<String>,
    pub query_sql: String,
}

impl ViewRequest {
    pub(crate) fn of(cv: &CreateView) -> Result<ViewRequest, SqlError> {
        let refuse = |what: &str| Err(SqlError::Plan(format!("CREATE VIEW … {what} is not supported: flashscan keeps plain views (CREATE [OR REPLACE] VIEW name [(columns)] AS query)")));
        if cv.materialized {
            return Err(SqlError::Plan("CREATE MATERIALIZED VIEW is not supported: CREATE TABLE name AS … is not either; create a table and INSERT INTO it … SELECT".into()));
        }
        if cv.temporary {
            return refuse("TEMPORARY");
        }
        if cv.or_alter || cv.secure || cv.copy_grants || cv.with_no_schema_binding || cv.to.is_some() || cv.params.is_some() || cv.comment.is_some() || !cv.cluster_by.is_empty() {
            return refuse("with this option");
        }
        if !matches!(cv.options, datafusion::sql::sqlparser::ast::CreateTableOptions::None) {
            return refuse("WITH (options)");
        }
        if cv.columns.iter().any(|c| c.data_type.is_some() || c.options.is_some()) {
            return refuse("with column types or options");
        }
        if cv.name.0.len() > 1 {
            let schema = cv.name.0[0].to_string().to_ascii_lowercase();
            if schema != "public" {
                return Err(SqlError::Plan(format!("CREATE VIEW {}: flashscan keeps views in schema public only", cv.name)));
            }
        }
        let declared_columns = cv.columns.iter().map(|c| if c.name.quote_style.is_some() { c.name.value.clone() } else { c.name.value.to_ascii_lowercase() }).collect();
        Ok(ViewRequest { name: object_name(&cv.name), or_replace: cv.or_replace, if_not_exists: cv.if_not_exists, declared_columns, query_sql: cv.query.to_string() })
    }
}

/// Plans a view's query in `state` and names its columns: the declared names first (more
/// names than columns is refused, as in PostgreSQL), the query's own for the rest. A query
/// with parameters (`$1`) is refused: a view has no one to bind them.
pub(crate) async fn plan_view_query(state: &SessionState, view_name: &str, query_sql: &str, declared: &[String]) -> Result<LogicalPlan, SqlError> {
    let plan = state.create_logical_plan(query_sql).await?;
    if !plan.get_parameter_types().map_err(SqlError::from)?.is_empty() {
        return Err(SqlError::Plan(format!("CREATE VIEW {view_name}: the query has parameters ($1 …), which a view cannot bind: write the values in")));
    }
    let fields = plan.schema().columns();
    if declared.len() > fields.len() {
        return Err(SqlError::Plan(format!("CREATE VIEW {view_name} names {} columns, but its query has {}", declared.len(), fields.len())));
    }
    let names: Vec<String> = fields.iter().enumerate().map(|(i, c)| declared.get(i).cloned().unwrap_or_else(|| c.name.clone())).collect();
    if names.iter().zip(&fields).all(|(n, c)| *n == c.name) {
        return Ok(plan);
    }
    let exprs: Vec<Expr> = fields.into_iter().zip(&names).map(|(c, n)| Expr::Column(c).alias(n.clone())).collect();
    Ok(LogicalPlanBuilder::from(plan).project(exprs)?.build()?)
}

/// The tables and views of `catalog` the query reads (by name, lower case, once each).
pub(crate) fn relations_read(state: &SessionState, query_sql: &str, catalog: &Catalog) -> Result<Vec<String>, SqlError> {
    let dialect = state.config().options().sql_parser.dialect;
    let statement = state.sql_to_statement(query_sql, &dialect)?;
    let mut reads: Vec<String> = Vec::new();
    for r in state.resolve_table_references(&statement)? {
        let schema_ok = r.schema().is_none_or(|s| s.eq_ignore_ascii_case("public"));
        let name = r.table().to_string();
        let known = catalog.tables.keys().any(|t| t.eq_ignore_ascii_case(&name)) || catalog.view(&name).is_some();
        if schema_ok && known && !reads.iter().any(|x| x.eq_ignore_ascii_case(&name)) {
            reads.push(name.to_ascii_lowercase());
        }
    }
    Ok(reads)
}

/// The catalog entry for a planned view.
pub(crate) fn entry_of(request: &ViewRequest, plan: &LogicalPlan, reads: Vec<String>) -> ViewEntry {
    ViewEntry { name: request.name.clone(), sql: request.query_sql.clone(), columns: plan.schema().fields().iter().map(|f| f.name().clone()).collect(), reads }
}

/// The relation an INSERT, UPDATE, DELETE or MERGE writes into, by name.
pub(crate) fn write_target(statement: &DFStatement) -> Option<(&'static str, String)> {
    let DFStatement::Statement(s) = statement else { return None };
    let relation = |f: &TableFactor| match f {
        TableFactor::Table { name, .. } => Some(object_name(name)),
        _ => None,
    };
    match s.as_ref() {
        SqlStatement::Insert(i) => match &i.table {
            datafusion::sql::sqlparser::ast::TableObject::TableName(n) => Some(("INSERT into", object_name(n))),
            _ => None,
        },
        SqlStatement::Update(u) => relation(&u.table.relation).map(|n| ("UPDATE", n)),
        SqlStatement::Delete(d) => {
            let from = match &d.from {
                FromTable::WithFromKeyword(t) | FromTable::WithoutKeyword(t) => t,
            };
            from.first().and_then(|t| relation(&t.relation)).map(|n| ("DELETE from", n))
        }
        SqlStatement::Merge(m) => relation(&m.table).map(|n| ("MERGE into", n)),
        _ => None,
    }
}

/// The one-line refusal of a write into view `name`.
pub fn refuse_write_into_view(what: &str, name: &str) -> SqlError {
    SqlError::Plan(format!("cannot {what} view {name}: views are read-only (not supported): write into the table it reads"))
}

/// A view whose query does not plan now: its columns as the catalog lists them, and an
/// error naming the view when a query reads it.
#[derive(Debug)]
pub(crate) struct UnplannableView {
    name: String,
    schema: SchemaRef,
    cause: String,
}

impl UnplannableView {
    pub(crate) fn new(view: &ViewEntry, cause: &SqlError) -> UnplannableView {
        // The types are unknown without a plan; text stands for every column.
        let fields: Vec<Field> = view.columns.iter().map(|c| Field::new(c, DataType::Utf8, true)).collect();
        UnplannableView { name: view.name.clone(), schema: Arc::new(Schema::new(fields)), cause: crate::error::one_line(&cause.to_string()) }
    }

    fn error(&self) -> DataFusionError {
        DataFusionError::Plan(format!(
            "view {} cannot be read: its query no longer plans ({}); DROP VIEW {} or CREATE OR REPLACE VIEW it over tables that exist",
            self.name, self.cause, self.name
        ))
    }
}

#[async_trait]
impl TableProvider for UnplannableView {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn table_type(&self) -> TableType {
        TableType::View
    }

    fn get_logical_plan(&self) -> Option<Cow<'_, LogicalPlan>> {
        None
    }

    async fn scan(&self, _state: &dyn Session, _projection: Option<&Vec<usize>>, _filters: &[Expr], _limit: Option<usize>) -> DfResult<Arc<dyn ExecutionPlan>> {
        Err(self.error())
    }
}
