//! Repeated output names: `SELECT a AS c, b AS c`, `SELECT a, a`, two subqueries in one
//! select list (both named `(<subquery>)` by DataFusion). PostgreSQL answers them with the
//! columns named as written; DataFusion refuses ("Projections require unique expression
//! names"), as its schemas key columns by name.
//!
//! On that refusal only, the statement is planned again with the outermost select list's
//! items named uniquely (`__flashscan_col{i}`), and each such column carries the name the
//! client is to see in its field metadata ([`OUTPUT_NAME_METADATA_KEY`]); the server's row
//! description reads it ([`wire_name`]). An item whose name is its own (a column or an
//! alias that is not repeated) keeps it, so ORDER BY that names it still works.

use std::collections::BTreeMap;

use arrow::datatypes::Field;
use datafusion::common::metadata::FieldMetadata;
use datafusion::error::Result;
use datafusion::execution::session_state::SessionState;
use datafusion::logical_expr::{Expr, LogicalPlan, Projection};
use datafusion::sql::parser::Statement as DFStatement;
use datafusion::sql::sqlparser::ast::{DataType as SqlDataType, Expr as SqlExpr, Ident, SelectItem, SetExpr, Statement as SqlStatement};

/// The field metadata key that holds the name a client sees for a column whose plan name
/// had to be made unique.
pub const OUTPUT_NAME_METADATA_KEY: &str = "flashscan.output_name";

const UNIQUE_NAME_PREFIX: &str = "__flashscan_col";

/// Whether `error` is DataFusion's refusal of a repeated output name: two items of one
/// name, or an alias that repeats a column's name (`SELECT -b AS a, a AS a FROM t`: the
/// column `t.a` and the alias `a`).
pub fn is_repeated_name_error(error: &datafusion::error::DataFusionError) -> bool {
    let message = error.to_string();
    message.contains("Projections require unique expression names")
        || (message.contains("Schema contains qualified field name") && message.contains("which would be ambiguous"))
}

/// The name a client sees for `field`: the one kept in its metadata, else its own.
pub fn wire_name(field: &Field) -> &str {
    field.metadata().get(OUTPUT_NAME_METADATA_KEY).map(String::as_str).unwrap_or(field.name())
}

/// `state.statement_to_plan(statement)`, and on a refusal of a repeated output name the
/// plan with unique names ([`plan_with_unique_names`]).
pub async fn statement_to_plan(state: &SessionState, statement: DFStatement) -> Result<LogicalPlan> {
    match state.statement_to_plan(statement.clone()).await {
        Err(e) if is_repeated_name_error(&e) => match plan_with_unique_names(state, &statement).await {
            Some(retried) => retried,
            None => Err(e),
        },
        other => other,
    }
}

/// Plans `statement` with the outermost select list's repeated names made unique (see the
/// module comment). None when the statement is not a plain SELECT with such a list.
pub async fn plan_with_unique_names(state: &SessionState, statement: &DFStatement) -> Option<Result<LogicalPlan>> {
    let mut statement = statement.clone();
    let user_names = unique_select_names(&mut statement)?;
    let plan = match state.statement_to_plan(statement).await {
        Ok(p) => p,
        Err(e) => return Some(Err(e)),
    };
    Some(name_for_clients(plan, &user_names))
}

/// Renames the outermost select list's items: each item without an alias, and each
/// repeated alias, gets `__flashscan_col{i}`. Returns, per item, the alias the user wrote
/// (None: DataFusion's name of the expression). None when there is nothing to rename.
fn unique_select_names(statement: &mut DFStatement) -> Option<Vec<Option<String>>> {
    let DFStatement::Statement(s) = statement else { return None };
    let SqlStatement::Query(query) = s.as_mut() else { return None };
    let SetExpr::Select(select) = query.body.as_mut() else { return None };
    let folded = |i: &Ident| if i.quote_style.is_some() { i.value.clone() } else { i.value.to_lowercase() };
    let aliases: Vec<Option<String>> = select.projection.iter().map(|item| if let SelectItem::ExprWithAlias { alias, .. } = item { Some(folded(alias)) } else { None }).collect();
    let mut user_names = Vec::with_capacity(select.projection.len());
    let mut renamed = false;
    for (i, item) in select.projection.iter_mut().enumerate() {
        let unique = Ident::new(format!("{UNIQUE_NAME_PREFIX}{i}"));
        match item {
            SelectItem::UnnamedExpr(expr) => {
                *item = SelectItem::ExprWithAlias { expr: expr.clone(), alias: unique };
                user_names.push(None);
                renamed = true;
            }
            SelectItem::ExprWithAlias { alias, .. } => {
                let name = folded(alias);
                if aliases.iter().filter(|a| a.as_deref() == Some(name.as_str())).count() > 1 {
                    *alias = unique;
                    renamed = true;
                }
                user_names.push(Some(name));
            }
            _ => user_names.push(None),
        }
    }
    renamed.then_some(user_names)
}

/// The plan with each renamed column of its top projection carrying its client name.
fn name_for_clients(plan: LogicalPlan, user_names: &[Option<String>]) -> Result<LogicalPlan> {
    use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
    // The select list is the first projection from the top (under ORDER BY, LIMIT, DISTINCT).
    plan.transform_down(|node| match node {
        LogicalPlan::Projection(p) if p.expr.iter().any(|e| matches!(e, Expr::Alias(a) if a.name.starts_with(UNIQUE_NAME_PREFIX))) => {
            let exprs = p
                .expr
                .into_iter()
                .map(|e| match e {
                    Expr::Alias(a) if a.name.starts_with(UNIQUE_NAME_PREFIX) => {
                        let index: Option<usize> = a.name[UNIQUE_NAME_PREFIX.len()..].parse().ok();
                        let client_name = match index.and_then(|i| user_names.get(i).cloned().flatten()) {
                            Some(user) => user,
                            None => match a.expr.as_ref() {
                                Expr::Column(c) => c.name.clone(),
                                other => other.schema_name().to_string(),
                            },
                        };
                        let metadata = FieldMetadata::from(BTreeMap::from([(OUTPUT_NAME_METADATA_KEY.to_string(), client_name)]));
                        a.expr.as_ref().clone().alias_with_metadata(a.name, Some(metadata))
                    }
                    other => other,
                })
                .collect();
            let projection = Projection::try_new(exprs, p.input)?;
            Ok(Transformed::new(LogicalPlan::Projection(projection), true, TreeNodeRecursion::Stop))
        }
        other => Ok(Transformed::no(other)),
    })
    .map(|t| t.data)
}

/// Per item of the outermost select list, the name PostgreSQL gives it when it has no
/// alias (its `FigureColname`: a column's name, a function's name — `count`, `sum`,
/// `coalesce` —, a cast's operand's name or else its type's, `case`, `exists`, `array`,
/// `row`, else `?column?`); `None` for an aliased item. `None` for the whole list when the
/// statement is not a plain SELECT, or has a `*` (its items are then not the list's).
pub fn postgres_names(statement: &DFStatement) -> Option<Vec<Option<String>>> {
    let DFStatement::Statement(s) = statement else { return None };
    let SqlStatement::Query(query) = s.as_ref() else { return None };
    let SetExpr::Select(select) = query.body.as_ref() else { return None };
    let mut names = Vec::with_capacity(select.projection.len());
    for item in &select.projection {
        match item {
            SelectItem::UnnamedExpr(e) => names.push(Some(figure_name(e).unwrap_or_else(|| "?column?".to_string()))),
            SelectItem::ExprWithAlias { .. } => names.push(None),
            _ => return None,
        }
    }
    names.iter().any(Option::is_some).then_some(names)
}

/// PostgreSQL's name of an expression, if it has one (`FigureColnameInternal`).
fn figure_name(e: &SqlExpr) -> Option<String> {
    let folded = |i: &Ident| if i.quote_style.is_some() { i.value.clone() } else { i.value.to_lowercase() };
    match e {
        SqlExpr::Identifier(id) => Some(folded(id)),
        SqlExpr::CompoundIdentifier(ids) => ids.last().map(folded),
        SqlExpr::Function(f) => f.name.0.last().and_then(|p| p.as_ident()).map(folded),
        SqlExpr::Nested(inner) | SqlExpr::Collate { expr: inner, .. } => figure_name(inner),
        SqlExpr::Cast { expr, data_type, .. } => figure_name(expr).or_else(|| postgres_type_name(data_type)),
        SqlExpr::TypedString(t) => postgres_type_name(&t.data_type),
        SqlExpr::Case { .. } => Some("case".into()),
        SqlExpr::Exists { .. } => Some("exists".into()),
        SqlExpr::Array(_) => Some("array".into()),
        SqlExpr::Tuple(_) => Some("row".into()),
        SqlExpr::Subquery(q) => match q.body.as_ref() {
            SetExpr::Select(s) => match s.projection.first() {
                Some(SelectItem::UnnamedExpr(e)) => figure_name(e),
                Some(SelectItem::ExprWithAlias { alias, .. }) => Some(folded(alias)),
                _ => None,
            },
            _ => None,
        },
        SqlExpr::Extract { .. } => Some("extract".into()),
        SqlExpr::Substring { .. } => Some("substring".into()),
        SqlExpr::Position { .. } => Some("position".into()),
        SqlExpr::Ceil { .. } => Some("ceil".into()),
        SqlExpr::Floor { .. } => Some("floor".into()),
        SqlExpr::Overlay { .. } => Some("overlay".into()),
        SqlExpr::Trim { .. } => Some("btrim".into()),
        _ => None,
    }
}

/// PostgreSQL's internal name of a type, as a cast of an unnamed operand is called.
fn postgres_type_name(t: &SqlDataType) -> Option<String> {
    use SqlDataType as T;
    Some(
        match t {
            T::Int(_) | T::Integer(_) | T::Int4(_) => "int4",
            T::BigInt(_) | T::Int8(_) => "int8",
            T::SmallInt(_) | T::Int2(_) => "int2",
            T::Real | T::Float4 => "float4",
            T::Double(_) | T::DoublePrecision | T::Float8 | T::Float(_) => "float8",
            T::Numeric(_) | T::Decimal(_) | T::Dec(_) => "numeric",
            T::Text | T::String(_) => "text",
            T::Varchar(_) | T::CharacterVarying(_) => "varchar",
            T::Char(_) | T::Character(_) => "bpchar",
            T::Boolean | T::Bool => "bool",
            T::Date => "date",
            T::Timestamp(_, datafusion::sql::sqlparser::ast::TimezoneInfo::WithTimeZone | datafusion::sql::sqlparser::ast::TimezoneInfo::Tz) => "timestamptz",
            T::Timestamp(..) => "timestamp",
            T::Time(..) => "time",
            T::Interval { .. } => "interval",
            T::Bytea => "bytea",
            T::Uuid => "uuid",
            T::JSON => "json",
            T::JSONB => "jsonb",
            T::Regclass => "regclass",
            T::Custom(name, _) => return name.0.last().and_then(|p| p.as_ident()).map(|i| i.value.to_lowercase()),
            _ => return None,
        }
        .to_string(),
    )
}

/// The plan with the unaliased items of its select list named for clients as PostgreSQL
/// names them (`postgres_names`): `SELECT count(*), sum(v) FROM t` answers columns
/// `count` and `sum`, not DataFusion's `count(*)` and `sum(t.v)`. Only the name a client
/// sees changes (the field metadata [`wire_name`] reads), not the plan's own names, so
/// nothing that refers to them (ORDER BY 1, a view's columns) changes.
pub fn name_like_postgres(plan: LogicalPlan, names: &[Option<String>]) -> Result<LogicalPlan> {
    use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
    plan.transform_down(|node| match node {
        LogicalPlan::Projection(p) => {
            if p.expr.len() != names.len() {
                return Ok(Transformed::new(LogicalPlan::Projection(p), false, TreeNodeRecursion::Stop));
            }
            let mut changed = false;
            let mut exprs = Vec::with_capacity(p.expr.len());
            for (i, (e, name)) in p.expr.into_iter().zip(names).enumerate() {
                let (qualifier, field) = p.schema.qualified_field(i);
                let Some(name) = name.as_ref().filter(|n| *n != wire_name(field)) else {
                    exprs.push(e);
                    continue;
                };
                changed = true;
                let metadata = FieldMetadata::from(BTreeMap::from([(OUTPUT_NAME_METADATA_KEY.to_string(), name.clone())]));
                let inner = match e {
                    Expr::Alias(a) => *a.expr,
                    other => other,
                };
                exprs.push(inner.alias_qualified_with_metadata(qualifier.cloned(), field.name(), Some(metadata)));
            }
            let projection = Projection::try_new(exprs, p.input)?;
            Ok(Transformed::new(LogicalPlan::Projection(projection), changed, TreeNodeRecursion::Stop))
        }
        other => Ok(Transformed::no(other)),
    })
    .map(|t| t.data)
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::prelude::SessionContext;

    async fn client_names(sql: &str) -> Vec<String> {
        let ctx = SessionContext::new();
        ctx.sql("CREATE TABLE t1(a INT, b INT) AS VALUES (1, 2)").await.expect("table");
        let state = ctx.state();
        let statement = state.sql_to_statement(sql, &datafusion::config::Dialect::PostgreSQL).expect("parse");
        let plan = statement_to_plan(&state, statement).await.expect("plan");
        plan.schema().fields().iter().map(|f| wire_name(f).to_string()).collect()
    }

    #[tokio::test]
    async fn repeated_names_reach_the_client_as_written() {
        assert_eq!(client_names("SELECT a AS c, b AS c FROM t1").await, ["c", "c"]);
        assert_eq!(client_names("SELECT a, a, b AS x FROM t1 ORDER BY x").await, ["a", "a", "x"]);
        assert_eq!(client_names("SELECT a, b FROM t1").await, ["a", "b"]);
        assert_eq!(client_names("SELECT -b AS a, a AS a FROM t1").await, ["a", "a"]);
    }

    /// The names a client sees; the plan is also run (bare DataFusion: without flashscan's
    /// rewrites it cannot run an EXISTS in a select list, so such a statement is not).
    async fn postgres_client_names(sql: &str) -> Vec<String> {
        let ctx = SessionContext::new();
        ctx.sql("CREATE TABLE t1(a INT, b INT) AS VALUES (1, 2)").await.expect("table");
        let state = ctx.state();
        let statement = state.sql_to_statement(sql, &datafusion::config::Dialect::PostgreSQL).expect("parse");
        let names = postgres_names(&statement);
        let plan = statement_to_plan(&state, statement).await.expect("plan");
        let plan = match names {
            Some(n) => name_like_postgres(plan, &n).expect("named"),
            None => plan,
        };
        if !sql.contains("EXISTS") {
            datafusion::dataframe::DataFrame::new(state, plan.clone()).collect().await.expect("runs");
        }
        plan.schema().fields().iter().map(|f| wire_name(f).to_string()).collect()
    }

    /// PostgreSQL's names for unaliased items (what psql prints and pandas keys by).
    #[tokio::test]
    async fn unaliased_items_are_named_as_postgresql_names_them() {
        assert_eq!(postgres_client_names("SELECT count(*), sum(b), max(t1.a) FROM t1").await, ["count", "sum", "max"]);
        assert_eq!(postgres_client_names("SELECT a, t1.b, a + 1, 1, 'x'::text, a::bigint, CASE WHEN a > 0 THEN 1 END FROM t1").await, ["a", "b", "?column?", "?column?", "text", "a", "case"]);
        assert_eq!(postgres_client_names("SELECT coalesce(a, 0) AS c, count(*) FROM t1 GROUP BY a ORDER BY 2, 1").await, ["c", "count"]);
        assert_eq!(postgres_client_names("SELECT (SELECT max(b) FROM t1), EXISTS (SELECT 1 FROM t1), DATE '2020-01-01'").await, ["max", "exists", "date"]);
        // Repeated names stay repeated, as in PostgreSQL.
        assert_eq!(postgres_client_names("SELECT count(a), count(b) FROM t1").await, ["count", "count"]);
        assert_eq!(postgres_client_names("SELECT * FROM t1").await, ["a", "b"]);
    }
}
