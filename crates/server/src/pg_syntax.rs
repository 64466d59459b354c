//! PostgreSQL spellings DataFusion does not plan, rewritten in the parsed statement (never
//! its text) into ones it does that mean the same, so the catalog queries of psql and the
//! drivers run as SQL on the `pg_catalog` tables (`pg_catalog.rs`):
//!
//! - `a OPERATOR(pg_catalog.~) b` (an operator named with its schema) → `a ~ b`;
//!   `COLLATE pg_catalog.default` dropped (the default collation is the only one flashscan
//!   compares with; any other COLLATE is left for the planner, which refuses it);
//! - casts to types named with their schema or by PostgreSQL's own names
//!   (`::pg_catalog.text`, `::pg_catalog.int2[]`, `::oid`, `::name`) → the standard type;
//!   `FLOAT` and `FLOAT(25..53)` → double precision, `FLOAT(1..24)` → real, as PostgreSQL
//!   reads them (DataFusion: always 32-bit), in casts and in CREATE TABLE (`normalize_ddl`);
//! - the object-identifier types: `x::regtype`, `x::regclass`, `x::regnamespace` → the
//!   object's oid (`pg_catalog.regtype_oid(x::text)`: a name is looked up, a number is an
//!   oid already), and `x::regtype::text` → its name (`regtype_name`), as PostgreSQL
//!   prints it. A bare `oid::regclass` in a result is the oid, not the name;
//! - `ARRAY(SELECT e FROM … ORDER BY …)` → `(SELECT array_agg(e ORDER BY …) FROM …)`
//!   (an empty subquery gives NULL where PostgreSQL gives `{}`);
//! - a scalar subquery that reads (by an inner or cross join) a catalog table flashscan
//!   keeps empty (`pg_attrdef`, `pg_collation`, …; `pg_catalog::empty_table_names`) →
//!   `NULL` (text): it has no rows, so its value is NULL whatever it computes — and psql's
//!   `\d` column step correlates those subqueries in ways DataFusion cannot decorrelate;
//! - any other correlated scalar subquery over catalog tables, `(SELECT e FROM pg_… WHERE
//!   …)`, → `(SELECT max(e) …)`: DataFusion plans correlated scalar subqueries only when
//!   aggregated; a catalog table's rows are unique by their key, so at most one row
//!   matches and the maximum is that row's value (PostgreSQL would fail on a second row);
//! - `LIKE p ESCAPE 'c'` with another escape character than backslash →
//!   `LIKE pg_catalog.like_escape(p, 'c')` (PostgreSQL's own function: the pattern with
//!   backslash escapes, the only ones DataFusion runs);
//! - `polroles = '{0}'` (an array written as a string literal, compared with one of the
//!   catalog's array columns, `ARRAY_COLUMNS`) → `polroles = ARRAY[0]`;
//! - `information_schema.views`, `.table_constraints`, `.key_column_usage` →
//!   the PostgreSQL-shaped tables of `information_schema.rs` (DataFusion answers every
//!   `information_schema.X` itself, with its own columns);
//! - a `CASE WHEN t.typtype = 'd' THEN … END` arm over `pg_type t` whose kind no row of
//!   `pg_type` has (`pg_catalog::TYPE_KINDS`: no domains, composites, ranges …) is dropped:
//!   it never matches (asyncpg's type introspection puts a recursive query over domains
//!   there, which DataFusion cannot decorrelate); a CASE left without arms is its ELSE;
//! - a parameter cast to `oid` or `oid[]` (`$1::oid[]`, asyncpg's introspection) → to
//!   `INT UNSIGNED` (`[]`): the parameter is then described as PostgreSQL's `oid` (`oid[]`),
//!   the type the client encodes it as (`params.rs`); other oids stay bigint here;
//! - `generate_subscripts(a, d)` → `unnest(generate_series(1, array_length(a, d)))`,
//!   which DataFusion zips with an `unnest(a)` beside it as PostgreSQL does (SQLAlchemy's
//!   key and index reflection);
//! - two unnamed result columns of the same spelling (psql's `NULL, NULL`) get distinct
//!   names (`?column?2`, …): DataFusion refuses duplicate names, clients read by position.
//!
//! `fallback_for_empty_relations` is the last resort for a statement DataFusion still
//! cannot plan: when every branch of it reads (by inner or cross join) a catalog table
//! flashscan keeps empty, the answer is no rows whatever its expressions say.

use std::collections::HashMap;
use std::ops::ControlFlow;

use datafusion::sql::parser::Statement as DfStatement;
use datafusion::sql::sqlparser::ast::{
    BinaryOperator, CastKind, DataType as SqlType, Expr, FunctionArguments, GroupByExpr, Ident, JoinOperator, ObjectName, Query, Select, SelectItem,
    SetExpr, SetOperator, Statement, TableFactor, TableWithJoins, Value, VisitMut, VisitorMut,
};
use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
use datafusion::sql::sqlparser::parser::Parser;

/// The schema PostgreSQL's catalog lives in.
const PG_CATALOG: &str = "pg_catalog";

/// The object-identifier types rewritten to lookups (`pg_catalog.rs` defines the functions).
const OID_ALIAS_TYPES: [&str; 3] = ["regtype", "regclass", "regnamespace"];

/// The catalog's array columns (`pg_catalog.rs`): a string literal compared with one of
/// them is an array literal. (Only these: a user's text column may hold `{…}`.)
const ARRAY_COLUMNS: [&str; 4] = ["polroles", "stxkind", "prattrs", "datacl"];

/// Aggregates a correlated subquery's item may already be (then it is left alone).
const AGGREGATES: [&str; 10] = ["max", "min", "count", "sum", "avg", "array_agg", "string_agg", "bool_and", "bool_or", "first_value"];

/// Rewrites `statement` in place (see the module doc); `empty` names the catalog tables
/// that have no rows.
pub fn normalize(statement: &mut DfStatement, empty: &[&str]) {
    let DfStatement::Statement(statement) = statement else { return };
    let _ = statement.as_mut().visit(&mut Rewriter { empty });
}

/// CREATE TABLE as PostgreSQL reads it, as SQL for the session that runs DDL: column
/// types as `standardize` makes them (`FLOAT(53)` is double precision) and every column
/// name quoted, folded to lower case first when it was not quoted (PostgreSQL's folding,
/// and DataFusion's) — a column PostgreSQL takes as a name, like pandas' `index`, is then
/// never read as a keyword (the session's generic dialect reads `index BIGINT` as an
/// index definition). Any other statement, or one that does not parse (the session says
/// why), unchanged.
pub fn normalize_ddl(sql: &str) -> String {
    let sql = &flashscan_sql::column_defaults::reorder_sequence_options(sql);
    let Ok(mut statements) = Parser::parse_sql(&PostgreSqlDialect {}, sql) else { return sql.to_string() };
    let [Statement::CreateTable(ct)] = statements.as_mut_slice() else { return sql.to_string() };
    for column in ct.columns.iter_mut() {
        if let Some(standard) = standardize(&column.data_type) {
            column.data_type = standard;
        }
        if column.name.quote_style.is_none() {
            column.name = Ident::with_quote('"', column.name.value.to_lowercase());
        }
    }
    statements[0].to_string()
}

fn parse_expr(sql: &str) -> Option<Expr> {
    Parser::new(&PostgreSqlDialect {}).try_with_sql(sql).ok()?.parse_expr().ok()
}

/// The last part of a name, lower-cased, when the name is unqualified or in `pg_catalog`.
fn catalog_name(name: &ObjectName) -> Option<String> {
    let parts: Vec<String> = name.0.iter().map(|p| p.to_string().trim_matches('"').to_ascii_lowercase()).collect();
    match parts.as_slice() {
        [one] => Some(one.clone()),
        [schema, one] if schema == PG_CATALOG => Some(one.clone()),
        _ => None,
    }
}

/// PostgreSQL's names of types DataFusion knows by their standard name.
fn standard_type(name: &str) -> Option<SqlType> {
    Some(match name {
        "text" | "name" | "bpchar" | "char" => SqlType::Text,
        "varchar" => SqlType::Varchar(None),
        "int2" | "smallint" => SqlType::SmallInt(None),
        "int4" | "int" | "integer" => SqlType::Int(None),
        // flashscan's oids are 64-bit (its catalog tables keep them as bigint).
        "int8" | "bigint" | "oid" => SqlType::BigInt(None),
        "bool" | "boolean" => SqlType::Boolean,
        "float4" | "real" => SqlType::Real,
        "float8" => SqlType::DoublePrecision,
        "numeric" => SqlType::Numeric(datafusion::sql::sqlparser::ast::ExactNumberInfo::None),
        "date" => SqlType::Date,
        _ => return None,
    })
}

/// PostgreSQL's `float(p)`: `real` up to 24 binary digits, `double precision` above and
/// without a precision (DataFusion reads every `FLOAT` as 32-bit: SQLAlchemy's `Float` and
/// pandas' float64 columns, `FLOAT(53)` and `::FLOAT`, would lose digits).
fn postgres_float(info: &datafusion::sql::sqlparser::ast::ExactNumberInfo) -> SqlType {
    use datafusion::sql::sqlparser::ast::ExactNumberInfo;
    match info {
        ExactNumberInfo::Precision(p) | ExactNumberInfo::PrecisionAndScale(p, _) if *p <= 24 => SqlType::Real,
        _ => SqlType::DoublePrecision,
    }
}

/// `pg_catalog.X` / PostgreSQL-only type names → standard types, arrays of them too.
fn standardize(t: &SqlType) -> Option<SqlType> {
    use datafusion::sql::sqlparser::ast::ArrayElemTypeDef;
    match t {
        SqlType::Float(info) => Some(postgres_float(info)),
        SqlType::Custom(name, modifiers) if modifiers.is_empty() => standard_type(&catalog_name(name)?),
        SqlType::Array(ArrayElemTypeDef::SquareBracket(inner, size)) => Some(SqlType::Array(ArrayElemTypeDef::SquareBracket(Box::new(standardize(inner)?), *size))),
        _ => None,
    }
}

/// Which object-identifier type a cast names, if any.
fn oid_alias(t: &SqlType) -> Option<&'static str> {
    if matches!(t, SqlType::Regclass) {
        return Some("regclass");
    }
    let SqlType::Custom(name, _) = t else { return None };
    let n = catalog_name(name)?;
    OID_ALIAS_TYPES.into_iter().find(|a| *a == n)
}

fn is_text_type(t: &SqlType) -> bool {
    matches!(t, SqlType::Text | SqlType::Varchar(_)) || matches!(standardize(t), Some(SqlType::Text | SqlType::Varchar(_)))
}

/// `pg_catalog.regtype_oid(...)` → Some(("regtype", args)).
fn oid_lookup_call(e: &Expr) -> Option<(&'static str, String)> {
    let Expr::Function(f) = e else { return None };
    let name = f.name.to_string();
    let alias = OID_ALIAS_TYPES.into_iter().find(|a| name == format!("{PG_CATALOG}.{a}_oid"))?;
    let FunctionArguments::List(list) = &f.args else { return None };
    let args: Vec<String> = list.args.iter().map(|a| a.to_string()).collect();
    Some((alias, args.join(", ")))
}

/// The tables a SELECT reads, with how each is joined (true: inner or cross, so an empty
/// one empties the result).
fn relations(from: &[TableWithJoins]) -> Vec<(&TableFactor, bool)> {
    let mut out = Vec::new();
    for t in from {
        out.push((&t.relation, true));
        for j in &t.joins {
            let inner = matches!(j.join_operator, JoinOperator::Join(_) | JoinOperator::Inner(_) | JoinOperator::CrossJoin(_));
            out.push((&j.relation, inner));
        }
    }
    out
}

/// A catalog table (`pg_catalog.pg_x` or an unqualified `pg_x`), by its name.
fn catalog_table(t: &TableFactor) -> Option<String> {
    let TableFactor::Table { name, args: None, .. } = t else { return None };
    catalog_name(name).filter(|n| n.starts_with("pg_"))
}

fn is_aggregate_call(e: &Expr) -> bool {
    matches!(e, Expr::Function(f) if catalog_name(&f.name).is_some_and(|n| AGGREGATES.contains(&n.as_str())))
}

/// `(SELECT e FROM pg_… WHERE …)` with one item, no grouping and no limit, reading only
/// catalog tables: its item wrapped in `max`.
fn aggregate_catalog_subquery(q: &mut Query) {
    if q.limit_clause.is_some() || q.fetch.is_some() {
        return;
    }
    let SetExpr::Select(s) = q.body.as_mut() else { return };
    let grouped = !matches!(&s.group_by, GroupByExpr::Expressions(g, _) if g.is_empty()) || s.having.is_some();
    let rels = relations(&s.from);
    if grouped || s.projection.len() != 1 || rels.is_empty() || !rels.iter().all(|(t, _)| catalog_table(t).is_some()) {
        return;
    }
    let item = match &mut s.projection[0] {
        SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } => e,
        _ => return,
    };
    if is_aggregate_call(item) {
        return;
    }
    if let Some(wrapped) = parse_expr(&format!("max({item})")) {
        *item = wrapped;
    }
}

/// `ARRAY(SELECT e FROM … ORDER BY k)` → `(SELECT array_agg(e ORDER BY k) FROM …)`.
fn array_subquery(q: &Query) -> Option<Expr> {
    if q.limit_clause.is_some() || q.fetch.is_some() || q.with.is_some() {
        return None;
    }
    let SetExpr::Select(s) = q.body.as_ref() else { return None };
    let item = match s.projection.as_slice() {
        [SelectItem::UnnamedExpr(e)] | [SelectItem::ExprWithAlias { expr: e, .. }] => e,
        _ => return None,
    };
    let order: Vec<String> = match q.order_by.as_ref().map(|o| &o.kind) {
        None => Vec::new(),
        Some(datafusion::sql::sqlparser::ast::OrderByKind::Expressions(list)) => list
            .iter()
            .map(|o| {
                let mut o = o.clone();
                // `ORDER BY 1` names the select item.
                if matches!(&o.expr, Expr::Value(v) if matches!(&v.value, Value::Number(n, _) if n == "1")) {
                    o.expr = item.clone();
                }
                o.to_string()
            })
            .collect(),
        Some(_) => return None,
    };
    let order = if order.is_empty() { String::new() } else { format!(" ORDER BY {}", order.join(", ")) };
    let mut select: Select = (**s).clone();
    select.projection = vec![SelectItem::UnnamedExpr(parse_expr(&format!("array_agg({item}{order})"))?)];
    let query = Query { body: Box::new(SetExpr::Select(Box::new(select))), order_by: None, ..q.clone() };
    Some(Expr::Subquery(Box::new(query)))
}

fn is_array_column(e: &Expr) -> bool {
    let name = match e {
        Expr::Identifier(id) => &id.value,
        Expr::CompoundIdentifier(ids) => match ids.last() {
            Some(id) => &id.value,
            None => return false,
        },
        _ => return false,
    };
    ARRAY_COLUMNS.iter().any(|c| name.eq_ignore_ascii_case(c))
}

/// `'{1,2}'` → `ARRAY[1, 2]` (numbers when every element is one, strings otherwise).
fn string_array_literal(e: &Expr) -> Option<Expr> {
    let Expr::Value(v) = e else { return None };
    let Value::SingleQuotedString(text) = &v.value else { return None };
    array_literal(text)
}

fn array_literal(text: &str) -> Option<Expr> {
    let inner = text.strip_prefix('{')?.strip_suffix('}')?;
    if inner.trim().is_empty() || inner.contains(['{', '"', '\\']) {
        return None;
    }
    let items: Vec<&str> = inner.split(',').map(str::trim).collect();
    let numbers = items.iter().all(|i| i.parse::<i64>().is_ok());
    let list: Vec<String> = items.iter().map(|i| if numbers { (*i).to_string() } else { format!("'{}'", i.replace('\'', "''")) }).collect();
    parse_expr(&format!("ARRAY[{}]", list.join(", ")))
}

struct Rewriter<'a> {
    empty: &'a [&'a str],
}

impl VisitorMut for Rewriter<'_> {
    type Break = ();

    fn pre_visit_query(&mut self, q: &mut Query) -> ControlFlow<()> {
        name_oid_alias_results(q.body.as_mut());
        drop_impossible_type_kind_arms(q.body.as_mut());
        ControlFlow::Continue(())
    }

    fn pre_visit_relation(&mut self, relation: &mut ObjectName) -> ControlFlow<()> {
        let parts: Vec<String> = relation.0.iter().map(|p| p.to_string().trim_matches('"').to_ascii_lowercase()).collect();
        if let [schema, table] = parts.as_slice() {
            if schema == "information_schema" && crate::information_schema::TABLES.contains(&table.as_str()) {
                *relation = ObjectName::from(vec![Ident::new(crate::information_schema::PG_INFORMATION_SCHEMA), Ident::new(table.clone())]);
            }
        }
        ControlFlow::Continue(())
    }

    fn post_visit_query(&mut self, q: &mut Query) -> ControlFlow<()> {
        distinct_unnamed_columns(q.body.as_mut());
        ControlFlow::Continue(())
    }

    fn pre_visit_table_factor(&mut self, t: &mut TableFactor) -> ControlFlow<()> {
        name_series_column(t);
        ControlFlow::Continue(())
    }

    fn post_visit_expr(&mut self, e: &mut Expr) -> ControlFlow<()> {
        match e {
            Expr::BinaryOp { op, left, right } => {
                if let BinaryOperator::PGCustomBinaryOperator(parts) = op {
                    if let Some(standard) = schema_operator(parts) {
                        *op = standard;
                    }
                }
                if matches!(op, BinaryOperator::Eq | BinaryOperator::NotEq) {
                    if is_array_column(left) {
                        if let Some(array) = string_array_literal(right) {
                            **right = array;
                        }
                    } else if is_array_column(right) {
                        if let Some(array) = string_array_literal(left) {
                            **left = array;
                        }
                    }
                }
            }
            Expr::Like { pattern, escape_char, .. } | Expr::ILike { pattern, escape_char, .. } => {
                let escape = match escape_char.as_ref().map(|v| &v.value) {
                    Some(Value::SingleQuotedString(c)) if c != "\\" => Some(c.clone()),
                    _ => None,
                };
                if let Some(escape) = escape {
                    if let Some(call) = parse_expr(&format!("{PG_CATALOG}.like_escape({pattern}, '{}')", escape.replace('\'', "''"))) {
                        **pattern = call;
                        *escape_char = None;
                    }
                }
            }
            Expr::Collate { expr, collation } if collation.to_string().eq_ignore_ascii_case("pg_catalog.default") => {
                let inner = std::mem::replace(expr.as_mut(), Expr::Identifier(Ident::new("")));
                *e = inner;
            }
            Expr::Cast { kind: CastKind::DoubleColon | CastKind::Cast, expr, data_type, .. } => {
                let placeholder_oid = matches!(expr.as_ref(), Expr::Value(v) if matches!(v.value, Value::Placeholder(_))).then(|| oid_parameter_type(data_type)).flatten();
                if let Some(t) = placeholder_oid {
                    *data_type = t;
                } else if let Some(alias) = oid_alias(data_type) {
                    if let Some(call) = parse_expr(&format!("{PG_CATALOG}.{alias}_oid(CAST({expr} AS TEXT))")) {
                        *e = call;
                    }
                } else if let (true, Some((alias, args))) = (is_text_type(data_type), oid_lookup_call(expr)) {
                    if let Some(call) = parse_expr(&format!("{PG_CATALOG}.{alias}_name({args})")) {
                        *e = call;
                    }
                } else if let Some(standard) = standardize(data_type) {
                    *data_type = standard;
                }
            }
            Expr::Function(f) if catalog_name(&f.name).as_deref() == Some("generate_subscripts") => {
                if let Some(rewritten) = subscripts_of_first_dimension(f) {
                    *e = rewritten;
                }
            }
            Expr::Function(f) if f.name.to_string().eq_ignore_ascii_case("array") => {
                if let FunctionArguments::Subquery(q) = &f.args {
                    if let Some(rewritten) = array_subquery(q) {
                        *e = rewritten;
                    }
                }
            }
            Expr::Case { .. } => {
                if let Some(call) = case_of_when_then(e) {
                    *e = call;
                }
            }
            Expr::Subquery(q) => {
                let no_rows = matches!(q.body.as_ref(), SetExpr::Select(_)) && body_is_empty(q.body.as_ref(), self.empty);
                if let Some(lookup) = attrdef_lookup(q).or_else(|| sequence_lookup(q)) {
                    *e = lookup;
                } else if no_rows {
                    if let Some(null) = parse_expr("CAST(NULL AS TEXT)") {
                        *e = null;
                    }
                } else {
                    aggregate_catalog_subquery(q);
                }
            }
            _ => {}
        }
        ControlFlow::Continue(())
    }
}

/// The terms of `e`'s top-level AND, parentheses taken off.
fn conjuncts_of(e: &Expr) -> Vec<&Expr> {
    fn split<'a>(e: &'a Expr, out: &mut Vec<&'a Expr>) {
        match e {
            Expr::BinaryOp { left, op: BinaryOperator::And, right } => {
                split(left, out);
                split(right, out);
            }
            Expr::Nested(inner) => split(inner, out),
            other => out.push(other),
        }
    }
    let mut out = Vec::new();
    split(e, &mut out);
    out
}

/// `CASE WHEN c THEN pg_catalog.when_then(…) [ELSE NULL] END` → `pg_catalog.when_then(c,
/// pg_catalog.when_then(…))`: the same answer, keeping the json mark of the value that
/// `sequence_lookup` made (a CASE drops field metadata; `pg_json.rs`).
fn case_of_when_then(e: &Expr) -> Option<Expr> {
    let Expr::Case { operand: None, conditions, else_result, .. } = e else { return None };
    let [arm] = conditions.as_slice() else { return None };
    let else_null = match else_result.as_deref() {
        None => true,
        Some(Expr::Value(v)) => matches!(v.value, Value::Null),
        Some(_) => false,
    };
    let is_when_then = matches!(&arm.result, Expr::Function(f) if f.name.to_string().eq_ignore_ascii_case("pg_catalog.when_then"));
    if !else_null || !is_when_then {
        return None;
    }
    parse_expr(&format!("pg_catalog.when_then({}, {})", arm.condition, arm.result))
}

/// `(SELECT E FROM pg_sequence [s] WHERE s.seqrelid = Z [AND R])` (SQLAlchemy's identity
/// reflection: E a `json_build_object` of the sequence's columns and the outer row's) →
/// `pg_catalog.when_then(Z is a sequence [AND R], E')`, E' reading each `pg_sequence`
/// column of sequence Z through `pg_catalog.sequence_column(Z, 'col')`: `pg_sequence` is
/// keyed by `seqrelid`, so the subquery is a lookup of one row, which DataFusion cannot
/// decorrelate in this form (R refers only to the outer row).
fn sequence_lookup(q: &Query) -> Option<Expr> {
    let SetExpr::Select(s) = q.body.as_ref() else { return None };
    let rels = relations(&s.from);
    if rels.len() != 1 || catalog_table(rels[0].0).as_deref() != Some("pg_sequence") || s.projection.len() != 1 || q.limit_clause.is_some() {
        return None;
    }
    let qualifiers: Vec<String> = match rels[0].0 {
        TableFactor::Table { name, alias, .. } => {
            let mut q = vec!["pg_sequence".to_string(), name.to_string().to_ascii_lowercase()];
            q.extend(alias.as_ref().map(|a| a.name.value.to_ascii_lowercase()));
            q
        }
        _ => return None,
    };
    // A column of pg_sequence: `seqx`, or qualified by the table or its alias.
    let sequence_column = |e: &Expr| -> Option<String> {
        let (qualifier, name) = match e {
            Expr::Identifier(id) => (None, id.value.to_ascii_lowercase()),
            Expr::CompoundIdentifier(ids) => {
                let name = ids.last()?.value.to_ascii_lowercase();
                let qualifier: Vec<String> = ids[..ids.len() - 1].iter().map(|i| i.value.to_ascii_lowercase()).collect();
                (Some(qualifier.join(".")), name)
            }
            _ => return None,
        };
        let ours = qualifier.is_none_or(|q| qualifiers.contains(&q));
        (ours && name.starts_with("seq")).then_some(name)
    };
    let item = match &s.projection[0] {
        SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } => e,
        _ => return None,
    };
    let conjuncts = conjuncts_of(s.selection.as_ref()?);
    let mentions_sequence = |e: &Expr| {
        let mut found = false;
        let _ = datafusion::sql::sqlparser::ast::visit_expressions(e, |x: &Expr| {
            if sequence_column(x).is_some() {
                found = true;
            }
            ControlFlow::<()>::Continue(())
        });
        found
    };
    let (mut key, mut rest) = (None, Vec::new());
    for c in conjuncts {
        if let Expr::BinaryOp { left, op: BinaryOperator::Eq, right } = c {
            let (l, r) = (sequence_column(left), sequence_column(right));
            if l.as_deref() == Some("seqrelid") && !mentions_sequence(right) {
                key = Some(right.to_string());
                continue;
            }
            if r.as_deref() == Some("seqrelid") && !mentions_sequence(left) {
                key = Some(left.to_string());
                continue;
            }
        }
        // Anything else must be about the outer row only.
        if mentions_sequence(c) {
            return None;
        }
        rest.push(format!("({c})"));
    }
    let key = key?;
    let mut value = item.clone();
    let _ = datafusion::sql::sqlparser::ast::visit_expressions_mut(&mut value, |x: &mut Expr| {
        if let Some(column) = sequence_column(x) {
            let lookup = match column.as_str() {
                "seqcycle" => format!("(pg_catalog.sequence_column(CAST({key} AS BIGINT), 'seqcycle') <> 0)"),
                c => format!("pg_catalog.sequence_column(CAST({key} AS BIGINT), '{c}')"),
            };
            if let Some(call) = parse_expr(&lookup) {
                *x = call;
            }
        }
        ControlFlow::<()>::Continue(())
    });
    let mut condition = vec![format!("(pg_catalog.sequence_column(CAST({key} AS BIGINT), 'seqrelid') IS NOT NULL)")];
    condition.extend(rest);
    parse_expr(&format!("pg_catalog.when_then({}, {value})", condition.join(" AND ")))
}

/// `(SELECT pg_get_expr(d.adbin, d.adrelid …) FROM pg_attrdef d WHERE d.adrelid = X AND
/// d.adnum = Y [AND R])` (psql's `\d` and SQLAlchemy's column reflection) →
/// `CASE WHEN R THEN pg_catalog.attribute_default(X, Y) END`: `pg_attrdef` is keyed by
/// (adrelid, adnum), so the subquery is a lookup of one row's text, which DataFusion cannot
/// decorrelate in this form (R refers only to the outer row).
fn attrdef_lookup(q: &Query) -> Option<Expr> {
    let SetExpr::Select(s) = q.body.as_ref() else { return None };
    let rels = relations(&s.from);
    if rels.len() != 1 || catalog_table(rels[0].0).as_deref() != Some("pg_attrdef") || s.projection.len() != 1 {
        return None;
    }
    let item = match &s.projection[0] {
        SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } => e,
        _ => return None,
    };
    let Expr::Function(f) = item else { return None };
    if catalog_name(&f.name).as_deref() != Some("pg_get_expr") {
        return None;
    }
    let column_of = |e: &Expr| match e {
        Expr::Identifier(id) => Some(id.value.to_lowercase()),
        Expr::CompoundIdentifier(ids) => ids.last().map(|id| id.value.to_lowercase()),
        _ => None,
    };
    let conjuncts = conjuncts_of(s.selection.as_ref()?);
    let (mut relid, mut num, mut rest) = (None, None, Vec::new());
    for c in conjuncts {
        if let Expr::BinaryOp { left, op: BinaryOperator::Eq, right } = c {
            let (l, r) = (column_of(left), column_of(right));
            let key = |name: &str| if l.as_deref() == Some(name) { Some(right) } else if r.as_deref() == Some(name) { Some(left) } else { None };
            if let Some(other) = key("adrelid") {
                relid = Some(other.to_string());
                continue;
            }
            if let Some(other) = key("adnum") {
                num = Some(other.to_string());
                continue;
            }
        }
        // Anything else must be about the outer row only (psql's `a.atthasdef`).
        let mut inner = false;
        let _ = datafusion::sql::sqlparser::ast::visit_expressions(c, |x: &Expr| {
            if column_of(x).is_some_and(|n| n.starts_with("ad")) {
                inner = true;
            }
            ControlFlow::<()>::Continue(())
        });
        if inner {
            return None;
        }
        rest.push(format!("({c})"));
    }
    let lookup = format!("pg_catalog.attribute_default(CAST({} AS BIGINT), CAST({} AS BIGINT))", relid?, num?);
    let sql = if rest.is_empty() { lookup } else { format!("CASE WHEN {} THEN {lookup} END", rest.join(" AND ")) };
    parse_expr(&sql)
}

/// `generate_subscripts(a, d)` → `unnest(generate_series(1, array_length(a, d)))`: the
/// subscripts of dimension `d`, one row each, as PostgreSQL's set-returning function gives
/// them in a select list — where DataFusion zips it with an `unnest(a)` beside it, row for
/// row, as PostgreSQL does (SQLAlchemy's key and index reflection pairs `unnest(indkey)`
/// with `generate_subscripts(indkey, $n)` to keep the key columns' order). Subscripts start
/// at 1 (flashscan's arrays have no other lower bound); `d` may be a parameter. The
/// reversed form (a third argument) is left for the planner to refuse.
fn subscripts_of_first_dimension(f: &datafusion::sql::sqlparser::ast::Function) -> Option<Expr> {
    let FunctionArguments::List(list) = &f.args else { return None };
    let [array, dimension] = list.args.as_slice() else { return None };
    parse_expr(&format!("unnest(generate_series(1, array_length({array}, {dimension})))"))
}

/// `oid` → `INT UNSIGNED`, `oid[]` → `INT UNSIGNED[]` (a parameter's cast), else None.
fn oid_parameter_type(t: &SqlType) -> Option<SqlType> {
    use datafusion::sql::sqlparser::ast::ArrayElemTypeDef;
    match t {
        SqlType::Custom(name, modifiers) if modifiers.is_empty() && catalog_name(name).as_deref() == Some("oid") => Some(SqlType::IntUnsigned(None)),
        SqlType::Array(ArrayElemTypeDef::SquareBracket(inner, size)) => Some(SqlType::Array(ArrayElemTypeDef::SquareBracket(Box::new(oid_parameter_type(inner)?), *size))),
        _ => None,
    }
}

/// `CASE WHEN t.typtype = 'd' THEN … END` in a select item, `t` being `pg_type` in the
/// select's FROM: the arms testing for a kind `pg_type` has no row of
/// (`pg_catalog::TYPE_KINDS`) are dropped, a CASE left without arms becomes its ELSE (or
/// NULL). Only the select's own items, not its subqueries (an alias there may name another
/// table).
fn drop_impossible_type_kind_arms(body: &mut SetExpr) {
    match body {
        SetExpr::Select(s) => {
            let aliases: Vec<String> = relations(&s.from)
                .iter()
                .filter_map(|(t, _)| {
                    let TableFactor::Table { name, alias, args: None, .. } = t else { return None };
                    (catalog_name(name)?.as_str() == "pg_type").then(|| alias.as_ref().map_or_else(|| "pg_type".to_string(), |a| a.name.value.to_ascii_lowercase()))
                })
                .collect();
            if aliases.is_empty() {
                return;
            }
            for item in s.projection.iter_mut() {
                if let SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } = item {
                    drop_arms(e, &aliases);
                }
            }
        }
        SetExpr::SetOperation { left, right, .. } => {
            drop_impossible_type_kind_arms(left);
            drop_impossible_type_kind_arms(right);
        }
        _ => {}
    }
}

fn drop_arms(e: &mut Expr, pg_type_aliases: &[String]) {
    if let Expr::Nested(inner) = e {
        return drop_arms(inner, pg_type_aliases);
    }
    let replacement = match e {
        Expr::Case { operand: None, conditions, else_result, .. } => {
            let before = conditions.len();
            conditions.retain(|arm| !tests_for_a_missing_type_kind(&arm.condition, pg_type_aliases));
            if !conditions.is_empty() || before == 0 {
                return;
            }
            else_result.take().map(|b| *b)
        }
        _ => return,
    };
    if let Some(r) = replacement.or_else(|| parse_expr("NULL")) {
        *e = r;
    }
}

/// `alias.typtype = 'k'` (either side) with `alias` a `pg_type` and `k` a kind no row has.
fn tests_for_a_missing_type_kind(condition: &Expr, pg_type_aliases: &[String]) -> bool {
    let Expr::BinaryOp { op: BinaryOperator::Eq, left, right } = condition else { return false };
    let kind_column = |e: &Expr| matches!(e, Expr::CompoundIdentifier(ids) if ids.len() == 2 && ids[1].value.eq_ignore_ascii_case("typtype") && pg_type_aliases.contains(&ids[0].value.to_ascii_lowercase()));
    let missing_kind = |e: &Expr| matches!(e, Expr::Value(v) if matches!(&v.value, Value::SingleQuotedString(k) if !crate::pg_catalog::TYPE_KINDS.contains(&k.as_str())));
    (kind_column(left) && missing_kind(right)) || (kind_column(right) && missing_kind(left))
}

/// A result column that is a cast to an object-identifier type (`'t'::regclass`,
/// `c.oid::regclass`, `x::regtype`) prints the object's name in PostgreSQL (the type's
/// output function), while the same cast inside an expression is the oid (compared,
/// joined). So a select item that is such a cast becomes `CAST(item AS TEXT)` before the
/// expressions are rewritten (then `…_name(…)`, the name, as `::regclass::text` is), named
/// as PostgreSQL names it: the cast column's own name, else the type's.
fn name_oid_alias_results(body: &mut SetExpr) {
    match body {
        SetExpr::Select(select) => {
            for item in select.projection.iter_mut() {
                let (expr, alias) = match item {
                    SelectItem::UnnamedExpr(e) => (e, None),
                    SelectItem::ExprWithAlias { expr, alias } => (expr, Some(alias.clone())),
                    _ => continue,
                };
                let Expr::Cast { expr: inner, data_type, .. } = &*expr else { continue };
                let Some(type_name) = oid_alias(data_type) else { continue };
                let column = match inner.as_ref() {
                    Expr::Identifier(i) => i.value.clone(),
                    Expr::CompoundIdentifier(parts) => parts.last().map_or_else(|| type_name.to_string(), |i| i.value.clone()),
                    _ => type_name.to_string(),
                };
                let Some(as_text) = parse_expr(&format!("CAST({expr} AS TEXT)")) else { continue };
                *item = SelectItem::ExprWithAlias { expr: as_text, alias: alias.unwrap_or_else(|| Ident::new(column)) };
            }
        }
        SetExpr::SetOperation { left, right, .. } => {
            name_oid_alias_results(left);
            name_oid_alias_results(right);
        }
        SetExpr::Query(q) => name_oid_alias_results(q.body.as_mut()),
        _ => {}
    }
}

/// `OPERATOR(pg_catalog.~)` and its kin → the plain operator.
fn schema_operator(parts: &[String]) -> Option<BinaryOperator> {
    let [schema, name] = parts else { return None };
    if !schema.eq_ignore_ascii_case(PG_CATALOG) {
        return None;
    }
    Some(match name.as_str() {
        "~" => BinaryOperator::PGRegexMatch,
        "~*" => BinaryOperator::PGRegexIMatch,
        "!~" => BinaryOperator::PGRegexNotMatch,
        "!~*" => BinaryOperator::PGRegexNotIMatch,
        "=" => BinaryOperator::Eq,
        "<>" | "!=" => BinaryOperator::NotEq,
        "<" => BinaryOperator::Lt,
        "<=" => BinaryOperator::LtEq,
        ">" => BinaryOperator::Gt,
        ">=" => BinaryOperator::GtEq,
        _ => return None,
    })
}

/// `generate_series(…) g` (or `AS g`): PostgreSQL names the one column of a function
/// returning one value per row after the alias; DataFusion names it `value`, so
/// `SELECT g FROM generate_series(1, 3) g` failed. The alias then lists the column:
/// `generate_series(…) AS g(g)` (pgbench's server-side data generation writes
/// `FROM generate_series(1, n) AS aid`). Without an alias the column stays `value`
/// (PostgreSQL's is `generate_series`): flashscan's own SQL and docs use `value`.
fn name_series_column(t: &mut TableFactor) {
    let TableFactor::Table { name, args: Some(_), alias: Some(alias), .. } = t else { return };
    if alias.columns.is_empty() && catalog_name(name).as_deref() == Some("generate_series") {
        alias.columns = vec![datafusion::sql::sqlparser::ast::TableAliasColumnDef::from_name(alias.name.value.clone())];
    }
}

/// Unnamed items spelled alike get `?column?2`, `?column?3`, … (every branch of a UNION).
fn distinct_unnamed_columns(body: &mut SetExpr) {
    match body {
        SetExpr::Select(s) => {
            let mut seen: HashMap<String, usize> = HashMap::new();
            for item in s.projection.iter_mut() {
                let SelectItem::UnnamedExpr(expr) = item else { continue };
                // Columns keep their names; only expressions can collide.
                if matches!(expr, Expr::Identifier(_) | Expr::CompoundIdentifier(_)) {
                    continue;
                }
                let n = seen.entry(expr.to_string()).or_insert(0);
                *n += 1;
                if *n > 1 {
                    let alias = Ident::with_quote('"', format!("?column?{n}"));
                    *item = SelectItem::ExprWithAlias { expr: expr.clone(), alias };
                }
            }
        }
        SetExpr::SetOperation { left, right, .. } => {
            distinct_unnamed_columns(left);
            distinct_unnamed_columns(right);
        }
        SetExpr::Query(q) => distinct_unnamed_columns(q.body.as_mut()),
        _ => {}
    }
}

/// The column names of a statement whose result is empty because every branch reads a
/// catalog table in `empty` by an inner or cross join (and does not aggregate, which would
/// give a row even over no input); `None` otherwise.
pub fn empty_result_columns(statement: &DfStatement, empty: &[&str]) -> Option<Vec<String>> {
    let DfStatement::Statement(s) = statement else { return None };
    let Statement::Query(q) = s.as_ref() else { return None };
    if !body_is_empty(q.body.as_ref(), empty) {
        return None;
    }
    let mut first = q.body.as_ref();
    loop {
        match first {
            SetExpr::SetOperation { left, .. } => first = left,
            SetExpr::Query(q) => first = q.body.as_ref(),
            SetExpr::Select(s) => {
                // Unique, as DataFusion needs them: a repeated name gets its position.
                let mut seen = std::collections::HashSet::new();
                let names = s.projection.iter().enumerate().map(|(i, item)| {
                    let name = column_name(item);
                    if seen.insert(name.clone()) { name } else { format!("{name}{}", i + 1) }
                });
                return Some(names.collect());
            }
            _ => return None,
        }
    }
}

fn body_is_empty(body: &SetExpr, empty: &[&str]) -> bool {
    match body {
        SetExpr::Select(s) => {
            // Over no rows, GROUP BY keys make no groups, so no rows; without keys an
            // aggregate or HAVING still makes the one group of everything (`count(*)` is 0).
            let one_row_anyway = match &s.group_by {
                GroupByExpr::Expressions(keys, _) if !keys.is_empty() => false,
                GroupByExpr::Expressions(..) => {
                    s.having.is_some() || s.projection.iter().any(|i| matches!(i, SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } if is_aggregate_call(e)))
                }
                // GROUP BY ALL: keys or not depends on the items; not decided here.
                GroupByExpr::All(_) => true,
            };
            !one_row_anyway && relations(&s.from).iter().any(|(t, inner)| *inner && relation_is_empty(t, empty))
        }
        SetExpr::SetOperation { left, right, op, .. } => match op {
            SetOperator::Union => body_is_empty(left, empty) && body_is_empty(right, empty),
            SetOperator::Intersect => body_is_empty(left, empty) || body_is_empty(right, empty),
            // EXCEPT (and its synonym MINUS): the left side's rows, minus some.
            _ => body_is_empty(left, empty),
        },
        SetExpr::Query(q) => body_is_empty(q.body.as_ref(), empty),
        _ => false,
    }
}

/// A catalog table in `empty`, or a subquery in FROM whose every branch reads one
/// (SQLAlchemy's key reflection joins `pg_attribute` with a subquery over `pg_constraint`
/// and `pg_index`).
fn relation_is_empty(t: &TableFactor, empty: &[&str]) -> bool {
    match t {
        TableFactor::Derived { subquery, .. } => body_is_empty(subquery.body.as_ref(), empty),
        _ => catalog_table(t).is_some_and(|n| empty.contains(&n.as_str())),
    }
}

/// The name PostgreSQL gives a result column: its alias, a column's own name, or
/// `?column?` (made unique by the caller).
fn column_name(item: &SelectItem) -> String {
    match item {
        SelectItem::ExprWithAlias { alias, .. } => alias.value.clone(),
        SelectItem::UnnamedExpr(Expr::Identifier(id)) => id.value.clone(),
        SelectItem::UnnamedExpr(Expr::CompoundIdentifier(ids)) => ids.last().map(|id| id.value.clone()).unwrap_or_default(),
        _ => "?column?".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn normalized(sql: &str) -> String {
        let mut s = datafusion::sql::parser::DFParser::parse_sql_with_dialect(sql, &PostgreSqlDialect {}).expect("parse").pop_front().expect("one");
        normalize(&mut s, &["pg_attrdef", "pg_collation"]);
        s.to_string()
    }

    /// PostgreSQL's `float(p)` in casts and in CREATE TABLE: double precision unless p ≤ 24.
    #[test]
    fn float_is_double_precision_as_in_postgresql() {
        let out = normalized("SELECT $1::FLOAT, CAST(x AS FLOAT(53)), y::float(24), z::float8 FROM t");
        assert!(out.contains("$1::DOUBLE PRECISION") && out.contains("CAST(x AS DOUBLE PRECISION)") && out.contains("y::REAL"), "{out}");
        let ddl = normalize_ddl("CREATE TABLE frames (id BIGINT, score FLOAT(53), small FLOAT(10), plain FLOAT, at TIMESTAMP WITHOUT TIME ZONE)");
        assert!(ddl.contains("\"score\" DOUBLE PRECISION") && ddl.contains("\"small\" REAL") && ddl.contains("\"plain\" DOUBLE PRECISION"), "{ddl}");
        assert!(ddl.contains("\"id\" BIGINT") && ddl.contains("\"at\" TIMESTAMP"), "{ddl}");
        // Column names: folded unless quoted, then quoted (pandas' `index` is a name).
        let ddl = normalize_ddl("CREATE TABLE t (index BIGINT NOT NULL, \"Mixed\" TEXT, Upper INT) WITH (partitions = 2)");
        assert!(ddl.contains("\"index\" BIGINT NOT NULL") && ddl.contains("\"Mixed\" TEXT") && ddl.contains("\"upper\" INT"), "{ddl}");
        assert!(ddl.contains("WITH (partitions = 2)"), "{ddl}");
        // Not a CREATE TABLE, or not SQL: the text as it came.
        assert_eq!(normalize_ddl("DROP TABLE t"), "DROP TABLE t");
        assert_eq!(normalize_ddl("CREATE TABLE ("), "CREATE TABLE (");
    }

    /// `LIKE p ESCAPE 'c'` (SQLAlchemy's `startswith(…, autoescape=True)` writes `ESCAPE '/'`)
    /// → the pattern converted to backslash escapes, which is all DataFusion runs.
    #[test]
    fn like_with_another_escape_character_is_converted() {
        let out = normalized("SELECT nspname FROM pg_namespace WHERE nspname NOT LIKE $1 ESCAPE '/' AND x ILIKE 'a!_%' ESCAPE '!' AND y LIKE 'a\\_%' ESCAPE '\\'");
        assert!(out.contains("NOT LIKE pg_catalog.like_escape($1, '/')") && out.contains("ILIKE pg_catalog.like_escape('a!_%', '!')"), "{out}");
        assert!(out.contains("ESCAPE '\\'") && !out.contains("ESCAPE '/'"), "{out}");
    }

    #[test]
    fn casts_to_catalog_types_become_standard_types_and_lookups() {
        let out = normalized("SELECT x::pg_catalog.text, y::pg_catalog.int2[], z::oid FROM t");
        assert!(out.contains("x::TEXT") && out.contains("SMALLINT[]") && out.contains("z::BIGINT"), "{out}");
        let out = normalized("SELECT t.oid::regtype::text FROM pg_type t WHERE t.oid = $1::regtype");
        assert!(out.contains("pg_catalog.regtype_name(CAST(t.oid AS TEXT))"), "{out}");
        assert!(out.contains("pg_catalog.regtype_oid(CAST($1 AS TEXT))"), "{out}");
        let out = normalized("SELECT stxnamespace::pg_catalog.regnamespace::pg_catalog.text FROM x WHERE c.oid::pg_catalog.regclass = 5");
        assert!(out.contains("pg_catalog.regnamespace_name(") && out.contains("pg_catalog.regclass_oid("), "{out}");
    }

    /// A result column that is a cast to regclass/regtype/regnamespace is the object's name,
    /// named as PostgreSQL names it; the same cast inside an expression stays the oid.
    #[test]
    fn oid_alias_casts_in_results_print_names() {
        let out = normalized("SELECT 't'::regclass, c.oid::pg_catalog.regclass, 'int8'::regtype AS ty, c.oid::regclass = 5 FROM pg_class c");
        assert!(out.contains("pg_catalog.regclass_name(CAST('t' AS TEXT)) AS regclass"), "{out}");
        assert!(out.contains("pg_catalog.regclass_name(CAST(c.oid AS TEXT)) AS oid"), "{out}");
        assert!(out.contains("pg_catalog.regtype_name(CAST('int8' AS TEXT)) AS ty"), "{out}");
        assert!(out.contains("pg_catalog.regclass_oid(CAST(c.oid AS TEXT)) = 5"), "{out}");
        let out = normalized("SELECT x::regnamespace FROM a UNION ALL SELECT (SELECT y::regtype) FROM b");
        assert!(out.contains("pg_catalog.regnamespace_name(CAST(x AS TEXT)) AS x"), "{out}");
    }

    #[test]
    fn a_series_column_is_named_as_in_postgresql() {
        assert!(normalized("SELECT g FROM generate_series(1, 3) g").contains("generate_series(1, 3) g (g)"), "{}", normalized("SELECT g FROM generate_series(1, 3) g"));
        assert!(normalized("SELECT aid FROM generate_series(1, 3) AS aid").contains("AS aid (aid)"));
        assert!(normalized("SELECT value FROM generate_series(1, 3)").ends_with("generate_series(1, 3)"));
        assert!(normalized("SELECT x FROM generate_series(1, 3) AS g(x)").contains("AS g (x)"));
        assert!(!normalized("SELECT * FROM t AS g").contains("(g)"));
    }

    #[test]
    fn generate_subscripts_of_the_first_dimension_becomes_an_unnest() {
        let out = normalized("SELECT unnest(i.indkey) AS attnum, pg_catalog.generate_subscripts(i.indkey, 1) AS ord FROM pg_catalog.pg_index i");
        assert!(out.contains("unnest(generate_series(1, array_length(i.indkey, 1))) AS ord"), "{out}");
        // The dimension may be a parameter (SQLAlchemy binds it); the reversed form is
        // left for the planner to refuse.
        assert!(normalized("SELECT generate_subscripts(a, $1) FROM t").contains("array_length(a, $1)"));
        assert!(normalized("SELECT generate_subscripts(a, 1, true) FROM t").contains("generate_subscripts(a, 1, true)"));
    }

    #[test]
    fn subqueries_psql_writes_become_ones_datafusion_plans() {
        let out = normalized("SELECT array(select rolname from pg_catalog.pg_roles where oid = any (pol.polroles) order by 1) FROM pg_catalog.pg_policy pol WHERE pol.polroles = '{0}'");
        assert!(out.contains("array_agg(rolname ORDER BY rolname)") && !out.contains("ORDER BY 1"), "{out}");
        assert!(out.contains("pol.polroles = ARRAY[0]"), "{out}");
        // A user's text compared with `{…}` stays a string.
        assert!(normalized("SELECT * FROM t WHERE doc = '{1}'").contains("doc = '{1}'"));
        let out = normalized("SELECT (SELECT t.typname FROM pg_catalog.pg_type t WHERE t.oid = a.atttypid) AS tn FROM pg_catalog.pg_attribute a");
        assert!(out.contains("max(t.typname)"), "{out}");
        // Over an empty catalog table a scalar subquery is NULL; an aggregate (count) is not.
        let out = normalized("SELECT (SELECT c.collname FROM pg_catalog.pg_collation c, pg_catalog.pg_type t WHERE c.oid = a.attcollation AND a.attcollation <> t.typcollation) AS coll FROM pg_catalog.pg_attribute a");
        assert!(out.contains("CAST(NULL AS TEXT) AS coll") && !out.contains("collname"), "{out}");
        let out = normalized("SELECT (SELECT count(*) FROM pg_catalog.pg_attrdef d WHERE d.adrelid = a.attrelid) FROM pg_catalog.pg_attribute a");
        assert!(out.contains("count(*)"), "{out}");
        // A user's subquery (not over catalog tables) is left alone.
        let out = normalized("SELECT (SELECT v FROM mine WHERE mine.k = t.k) FROM t");
        assert!(!out.contains("max("), "{out}");
        // Two unnamed NULLs get distinct names.
        let out = normalized("SELECT pubname, NULL, NULL FROM pg_catalog.pg_publication");
        assert!(out.contains("NULL AS \"?column?2\""), "{out}");
    }

    #[test]
    fn empty_catalog_tables_empty_every_branch() {
        let parse = |sql: &str| datafusion::sql::parser::DFParser::parse_sql_with_dialect(sql, &PostgreSqlDialect {}).expect("parse").pop_front().expect("one");
        let empty = ["pg_inherits", "pg_publication"];
        let q = parse("SELECT c.oid::pg_catalog.regclass FROM pg_catalog.pg_class c, pg_catalog.pg_inherits i WHERE c.oid = i.inhparent ORDER BY inhseqno");
        assert_eq!(empty_result_columns(&q, &empty), Some(vec!["?column?".to_string()]));
        let q = parse("SELECT pubname, NULL FROM pg_catalog.pg_publication p UNION SELECT pubname, NULL FROM pg_catalog.pg_publication p JOIN pg_catalog.pg_class c ON true");
        assert_eq!(empty_result_columns(&q, &empty), Some(vec!["pubname".to_string(), "?column?".to_string()]));
        let q = parse("SELECT NULL, NULL AS x, NULL FROM pg_catalog.pg_inherits");
        assert_eq!(empty_result_columns(&q, &empty), Some(vec!["?column?".to_string(), "x".to_string(), "?column?3".to_string()]));
        // A left join of an empty table, an aggregate, or a non-empty table: rows may come.
        assert_eq!(empty_result_columns(&parse("SELECT c.relname FROM pg_catalog.pg_class c LEFT JOIN pg_catalog.pg_inherits i ON true"), &empty), None);
        assert_eq!(empty_result_columns(&parse("SELECT count(*) FROM pg_catalog.pg_inherits"), &empty), None);
        assert_eq!(empty_result_columns(&parse("SELECT 1 FROM pg_catalog.pg_inherits HAVING true"), &empty), None);
        // Grouped by a key, over an empty table or an inner join with an empty subquery: none.
        let q = parse("SELECT a.k, min(a.v) AS v FROM pg_catalog.pg_class c JOIN (SELECT i.inhrelid AS k, unnest(i.x) AS v FROM pg_catalog.pg_inherits i) AS a ON a.k = c.oid GROUP BY a.k");
        assert_eq!(empty_result_columns(&q, &empty), Some(vec!["k".to_string(), "v".to_string()]));
        assert_eq!(empty_result_columns(&parse("SELECT c.relname FROM pg_catalog.pg_class c LEFT JOIN (SELECT inhrelid FROM pg_catalog.pg_inherits) i ON true"), &empty), None);
        assert_eq!(empty_result_columns(&parse("SELECT relname FROM pg_catalog.pg_class"), &empty), None);
    }
}
