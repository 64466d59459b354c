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
//!
//! `INSERT … ON CONFLICT [(columns)] DO NOTHING` rides on the same node ([`take_on_conflict`]):
//! the front end stages the rows through `WritePath::stage_insert_skipping_conflicts`,
//! and RETURNING (if any) returns the rows inserted, as PostgreSQL does.

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

/// `ON CONFLICT [(columns)] DO NOTHING` of an INSERT: the arbiter index's columns (None:
/// every unique index).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd)]
pub struct ConflictSpec {
    pub arbiter: Option<Vec<String>>,
    /// DO UPDATE: the UPDATE each colliding row runs (see [`ConflictUpdate`]).
    pub update: Option<ConflictUpdate>,
}

/// `ON CONFLICT (key) DO UPDATE SET … [WHERE …]` as an UPDATE of the row holding the key:
/// `UPDATE t SET <assignments> WHERE t.key = $k … [AND (<where>)]`, with every
/// `EXCLUDED.col` (the row proposed for insertion) and the key's values as parameters,
/// `params[i]` naming the proposed row's column `$i+1` takes.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd)]
pub struct ConflictUpdate {
    pub sql: String,
    pub params: Vec<String>,
    /// `sql` planned with the INSERT (at Parse, for a prepared statement), its parameters
    /// bound per colliding row; None until a front end plans it.
    pub planned: Option<LogicalPlan>,
}

/// The UPDATE of [`ConflictUpdate`] for an INSERT into `table` (`alias`: its AS name).
fn conflict_update(table: &str, alias: Option<&str>, arbiter: &[String], mut update: datafusion::sql::sqlparser::ast::DoUpdate) -> ConflictUpdate {
    use datafusion::sql::sqlparser::ast::{Value, VisitMut, VisitorMut};
    struct Excluded<'p> {
        params: &'p mut Vec<String>,
    }
    impl VisitorMut for Excluded<'_> {
        type Break = ();
        fn pre_visit_expr(&mut self, expr: &mut SqlExpr) -> std::ops::ControlFlow<()> {
            if let SqlExpr::CompoundIdentifier(parts) = expr {
                if parts.len() == 2 && parts[0].quote_style.is_none() && parts[0].value.eq_ignore_ascii_case("excluded") {
                    let column = if parts[1].quote_style.is_some() { parts[1].value.clone() } else { parts[1].value.to_ascii_lowercase() };
                    let n = match self.params.iter().position(|p| *p == column) {
                        Some(i) => i + 1,
                        None => {
                            self.params.push(column);
                            self.params.len()
                        }
                    };
                    *expr = SqlExpr::Value(Value::Placeholder(format!("${n}")).into());
                }
            }
            std::ops::ControlFlow::Continue(())
        }
    }
    let mut params: Vec<String> = arbiter.to_vec();
    for a in &mut update.assignments {
        let _ = a.value.visit(&mut Excluded { params: &mut params });
    }
    if let Some(w) = update.selection.as_mut() {
        let _ = w.visit(&mut Excluded { params: &mut params });
    }
    let name = alias.unwrap_or(table);
    let target = match alias {
        Some(a) => format!("{table} AS {a}"),
        None => table.to_string(),
    };
    let assignments: Vec<String> = update.assignments.iter().map(|a| a.to_string()).collect();
    let mut filter: Vec<String> = arbiter.iter().enumerate().map(|(i, k)| format!("{name}.\"{k}\" = ${}", i + 1)).collect();
    if let Some(w) = &update.selection {
        filter.push(format!("({w})"));
    }
    ConflictUpdate { sql: format!("UPDATE {target} SET {} WHERE {}", assignments.join(", "), filter.join(" AND ")), params, planned: None }
}

/// The ON CONFLICT clause of an INSERT, taken out of it; the forms flashscan does not
/// take are refused with what to write instead.
pub fn take_on_conflict(statement: &mut DFStatement) -> Result<Option<ConflictSpec>, SqlError> {
    use datafusion::sql::sqlparser::ast::{ConflictTarget, OnConflictAction, OnInsert};
    let DFStatement::Statement(s) = statement else { return Ok(None) };
    let Statement::Insert(insert) = s.as_mut() else { return Ok(None) };
    let Some(on) = insert.on.take() else { return Ok(None) };
    let OnInsert::OnConflict(conflict) = on else {
        return Err(SqlError::Plan("ON DUPLICATE KEY UPDATE is MySQL's: write INSERT … ON CONFLICT (key) DO NOTHING, or UPDATE the row".into()));
    };
    let table = match &insert.table {
        datafusion::sql::sqlparser::ast::TableObject::TableName(n) => n.to_string(),
        other => other.to_string(),
    };
    // The alias names the table in the ON CONFLICT clause; DataFusion's INSERT takes none.
    let alias = insert.table_alias.take().map(|a| a.alias.to_string());
    let arbiter = match conflict.conflict_target {
        None => None,
        Some(ConflictTarget::Columns(columns)) => Some(columns.iter().map(|c| if c.quote_style.is_some() { c.value.clone() } else { c.value.to_ascii_lowercase() }).collect()),
        Some(ConflictTarget::OnConstraint(name)) => {
            return Err(SqlError::Plan(format!("ON CONFLICT ON CONSTRAINT {name} is not supported yet: name the constraint's columns, ON CONFLICT (col, …)")))
        }
    };
    match conflict.action {
        OnConflictAction::DoNothing => Ok(Some(ConflictSpec { arbiter, update: None })),
        OnConflictAction::DoUpdate(update) => {
            let Some(columns) = arbiter else {
                return Err(SqlError::Plan("ON CONFLICT DO UPDATE requires inference specification or constraint name: write ON CONFLICT (key columns) DO UPDATE …".into()));
            };
            let update = conflict_update(&table, alias.as_deref(), &columns, update);
            Ok(Some(ConflictSpec { arbiter: Some(columns), update: Some(update) }))
        }
    }
}

/// Whether `statement` is an INSERT with an ON CONFLICT (or ON DUPLICATE KEY) clause.
pub fn has_on_conflict(statement: &DFStatement) -> bool {
    matches!(statement, DFStatement::Statement(s) if matches!(s.as_ref(), Statement::Insert(i) if i.on.is_some()))
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
    /// Over the table's columns; empty without RETURNING (an INSERT … ON CONFLICT).
    pub exprs: Vec<Expr>,
    /// INSERT … ON CONFLICT DO NOTHING.
    pub on_conflict: Option<ConflictSpec>,
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
        Ok(ReturningNode { change, table: self.table.clone(), exprs, on_conflict: self.on_conflict.clone(), schema: self.schema.clone() })
    }
}

impl ReturningNode {
    /// Whether the statement answers rows (it has a RETURNING list).
    pub fn returns_rows(&self) -> bool {
        !self.exprs.is_empty()
    }

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
/// RETURNING list `items` (planned over the table's columns; empty: none) and an
/// INSERT's ON CONFLICT.
pub fn wrap(state: &SessionState, plan: LogicalPlan, items: &[SelectItem], on_conflict: Option<ConflictSpec>) -> Result<LogicalPlan, SqlError> {
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
    if exprs.is_empty() {
        let node = ReturningNode { change: plan, table, exprs, on_conflict, schema: Arc::new(DFSchema::empty()) };
        return Ok(LogicalPlan::Extension(Extension { node: Arc::new(node) }));
    }
    let projection = LogicalPlanBuilder::scan(table.clone(), provider_as_source(empty), None)?.project(exprs)?.build()?;
    let LogicalPlan::Projection(p) = projection else { return Err(SqlError::Internal("RETURNING did not plan as a projection".into())) };
    let node = ReturningNode { change: plan, table, exprs: p.expr, on_conflict, schema: p.schema };
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
    if let Some(picked) = picked_columns(node, &rows) {
        return picked;
    }
    let LogicalPlan::Dml(dml) = &node.change else { return Err(SqlError::Internal("Returning without its change".into())) };
    let table_schema = source_as_provider(&dml.target)?.schema();
    // The rows' own schema (an expression's column may be nullable where the table's is
    // not); the names and types are the table's.
    let schema = rows.first().map(|b| b.schema()).unwrap_or(table_schema);
    let rows = Arc::new(MemTable::try_new(schema, vec![rows])?);
    let plan = LogicalPlanBuilder::scan(node.table.clone(), provider_as_source(rows), None)?.project(node.exprs.clone())?.build()?;
    Ok(DataFrame::new(state.clone(), plan).collect().await?)
}

/// A RETURNING list of bare columns (`RETURNING id`, `RETURNING *`, what ORMs send) is the
/// rows' own columns, taken without planning and running a projection (which cost more than
/// the INSERT's own work for a one-row statement). None when an item is anything else.
fn picked_columns(node: &ReturningNode, rows: &[RecordBatch]) -> Option<Result<Vec<RecordBatch>, SqlError>> {
    let names: Vec<&str> = node
        .exprs
        .iter()
        .map(|e| match e {
            Expr::Column(c) => Some(c.name.as_str()),
            Expr::Alias(a) => match a.expr.as_ref() {
                Expr::Column(c) => Some(c.name.as_str()),
                _ => None,
            },
            _ => None,
        })
        .collect::<Option<_>>()?;
    let schema = node.schema.inner().clone();
    Some(
        rows.iter()
            .map(|b| {
                let columns = names.iter().map(|n| b.column_by_name(n).cloned()).collect::<Option<Vec<_>>>().ok_or_else(|| SqlError::Internal("RETURNING: a column is not in the rows written".into()))?;
                // The answer's names are RETURNING's; nullability the rows' own.
                let fields: Vec<arrow::datatypes::Field> = schema.fields().iter().zip(&columns).map(|(f, c)| f.as_ref().clone().with_data_type(c.data_type().clone()).with_nullable(true)).collect();
                RecordBatch::try_new(Arc::new(arrow::datatypes::Schema::new(fields)), columns).map_err(|e| SqlError::Internal(e.to_string()))
            })
            .collect(),
    )
}
