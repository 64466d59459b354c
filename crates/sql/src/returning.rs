//! `INSERT / UPDATE / DELETE … RETURNING`: the rows a statement wrote (for DELETE, the rows
//! it removed), projected by the RETURNING list — what ORMs use to learn the keys a
//! SERIAL or identity column gave their new rows.
//!
//! DataFusion 55 refuses RETURNING, so it is taken out of the statement before planning
//! ([`take_returning`]), and the planned change is wrapped in a [`ReturningNode`]: the
//! change's plan, and the RETURNING expressions planned over the table's columns. The
//! node's schema is the RETURNING list's, so a client that describes the statement sees its
//! columns (PostgreSQL's RowDescription, not NoData). The front end runs the change as
//! always, keeping the rows it wrote, then [`returned_rows`] projects them. The node is
//! never planned physically: a front end that does not know it refuses the statement.

use std::fmt;
use std::sync::Arc;

use arrow::record_batch::RecordBatch;
use datafusion::common::tree_node::TreeNode;
use datafusion::common::{Column, DFSchema, DFSchemaRef, TableReference};
use datafusion::datasource::{provider_as_source, source_as_provider, MemTable};
use datafusion::execution::session_state::SessionState;
use datafusion::logical_expr::{Expr, Extension, LogicalPlan, LogicalPlanBuilder, UserDefinedLogicalNodeCore, WriteOp};
use datafusion::prelude::DataFrame;
use datafusion::sql::parser::Statement as DFStatement;
use datafusion::sql::sqlparser::ast::{Expr as SqlExpr, SelectItem, Statement};

use crate::error::SqlError;

/// The RETURNING list of an INSERT, UPDATE or DELETE, taken out of it (None: it has none).
pub fn take_returning(statement: &mut DFStatement) -> Option<Vec<SelectItem>> {
    let DFStatement::Statement(s) = statement else { return None };
    match s.as_mut() {
        Statement::Insert(i) => i.returning.take(),
        Statement::Update(u) => u.returning.take(),
        Statement::Delete(d) => d.returning.take(),
        _ => None,
    }
}

/// Whether `statement` has a RETURNING list.
pub fn has_returning(statement: &DFStatement) -> bool {
    let DFStatement::Statement(s) = statement else { return false };
    match s.as_ref() {
        Statement::Insert(i) => i.returning.is_some(),
        Statement::Update(u) => u.returning.is_some(),
        Statement::Delete(d) => d.returning.is_some(),
        _ => false,
    }
}

/// A change and what it returns (see the module comment).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ReturningNode {
    /// The change: `LogicalPlan::Dml`.
    pub change: LogicalPlan,
    /// The changed table, as the RETURNING expressions qualify its columns.
    pub table: TableReference,
    /// Over the table's columns.
    pub exprs: Vec<Expr>,
    schema: DFSchemaRef,
}

impl PartialOrd for ReturningNode {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        self.exprs.partial_cmp(&other.exprs)
    }
}

impl UserDefinedLogicalNodeCore for ReturningNode {
    fn name(&self) -> &str {
        "Returning"
    }

    fn inputs(&self) -> Vec<&LogicalPlan> {
        vec![&self.change]
    }

    fn schema(&self) -> &DFSchemaRef {
        &self.schema
    }

    fn expressions(&self) -> Vec<Expr> {
        self.exprs.clone()
    }

    fn fmt_for_explain(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "Returning: {}", self.exprs.iter().map(|e| e.to_string()).collect::<Vec<_>>().join(", "))
    }

    fn with_exprs_and_inputs(&self, exprs: Vec<Expr>, mut inputs: Vec<LogicalPlan>) -> datafusion::error::Result<Self> {
        let change = inputs.pop().ok_or_else(|| datafusion::error::DataFusionError::Internal("Returning without its change".into()))?;
        Ok(ReturningNode { change, table: self.table.clone(), exprs, schema: self.schema.clone() })
    }
}

impl ReturningNode {
    /// Which change it is: the PostgreSQL command tag's verb.
    pub fn op(&self) -> Option<&WriteOp> {
        match &self.change {
            LogicalPlan::Dml(d) => Some(&d.op),
            _ => None,
        }
    }
}

/// The ReturningNode `plan` is, if it is one.
pub fn node(plan: &LogicalPlan) -> Option<&ReturningNode> {
    match plan {
        LogicalPlan::Extension(Extension { node }) => node.as_any().downcast_ref::<ReturningNode>(),
        _ => None,
    }
}

/// The name PostgreSQL gives a RETURNING item written without an alias: a column's name,
/// a function's name, else `?column?`.
fn postgres_name(e: &SqlExpr) -> String {
    match e {
        SqlExpr::Identifier(i) => if i.quote_style.is_some() { i.value.clone() } else { i.value.to_ascii_lowercase() },
        SqlExpr::CompoundIdentifier(parts) => parts.last().map(|i| if i.quote_style.is_some() { i.value.clone() } else { i.value.to_ascii_lowercase() }).unwrap_or_default(),
        SqlExpr::Function(f) => f.name.0.last().map(|p| p.to_string().trim_matches('"').to_ascii_lowercase()).unwrap_or_default(),
        SqlExpr::Cast { expr, .. } | SqlExpr::Nested(expr) => postgres_name(expr),
        _ => "?column?".into(),
    }
}

/// Wraps the planned change `plan` (an INSERT, UPDATE or DELETE of a table) with its
/// RETURNING list `items`, planned over the table's columns.
pub fn wrap(state: &SessionState, plan: LogicalPlan, items: &[SelectItem]) -> Result<LogicalPlan, SqlError> {
    let LogicalPlan::Dml(dml) = &plan else { return Err(SqlError::Plan("RETURNING: only INSERT, UPDATE and DELETE return rows".into())) };
    let table = dml.table_name.clone();
    let provider = source_as_provider(&dml.target)?;
    let table_schema = provider.schema();
    let rows_schema = DFSchema::try_from_qualified_schema(table.clone(), &table_schema)?;
    let columns = || -> Vec<Expr> { table_schema.fields().iter().map(|f| Expr::Column(Column::new(Some(table.clone()), f.name()))).collect() };
    let mut exprs = Vec::new();
    for item in items {
        match item {
            SelectItem::Wildcard(_) | SelectItem::QualifiedWildcard(..) => exprs.extend(columns()),
            SelectItem::UnnamedExpr(e) => exprs.push(plan_item(state, e, &rows_schema)?.alias(postgres_name(e))),
            SelectItem::ExprWithAlias { expr, alias } => {
                let name = if alias.quote_style.is_some() { alias.value.clone() } else { alias.value.to_ascii_lowercase() };
                exprs.push(plan_item(state, expr, &rows_schema)?.alias(name));
            }
            other => return Err(SqlError::Plan(format!("RETURNING {other}: give each item one alias"))),
        }
    }
    // The projection over an empty scan of the table: its schema is the answer's.
    let empty = Arc::new(MemTable::try_new(table_schema.clone(), vec![vec![]])?);
    let projection = LogicalPlanBuilder::scan(table.clone(), provider_as_source(empty), None)?.project(exprs)?.build()?;
    let LogicalPlan::Projection(p) = projection else { return Err(SqlError::Internal("RETURNING did not plan as a projection".into())) };
    let node = ReturningNode { change: plan, table, exprs: p.expr, schema: p.schema };
    Ok(LogicalPlan::Extension(Extension { node: Arc::new(node) }))
}

fn plan_item(state: &SessionState, e: &SqlExpr, rows: &DFSchema) -> Result<Expr, SqlError> {
    let expr = state.create_logical_expr(&e.to_string(), rows).map_err(|err| SqlError::Plan(format!("RETURNING {e}: {}", crate::error::one_line(&err.to_string()))))?;
    if expr.exists(|x| Ok(matches!(x, Expr::ScalarSubquery(_) | Expr::InSubquery(_) | Expr::Exists(_)))).unwrap_or(true) {
        return Err(SqlError::Plan(format!("RETURNING {e}: a subquery in RETURNING is not supported yet: SELECT it after the statement")));
    }
    Ok(expr)
}

/// The RETURNING list of `node` computed over `rows` (the table's columns, in order: the
/// rows written, or for DELETE removed).
pub async fn returned_rows(state: &SessionState, node: &ReturningNode, rows: Vec<RecordBatch>) -> Result<Vec<RecordBatch>, SqlError> {
    let LogicalPlan::Dml(dml) = &node.change else { return Err(SqlError::Internal("Returning without its change".into())) };
    let table_schema = source_as_provider(&dml.target)?.schema();
    // The rows' own schema (an expression's column may be nullable where the table's is
    // not); the names and types are the table's.
    let schema = rows.first().map(|b| b.schema()).unwrap_or(table_schema);
    let rows = Arc::new(MemTable::try_new(schema, vec![rows])?);
    let plan = LogicalPlanBuilder::scan(node.table.clone(), provider_as_source(rows), None)?.project(node.exprs.clone())?.build()?;
    Ok(DataFrame::new(state.clone(), plan).collect().await?)
}
