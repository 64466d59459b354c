//! Column DEFAULTs, `SERIAL` and identity columns, for every front end (docs/sql.md,
//! "Defaults and sequences").
//!
//! CREATE TABLE: [`take_column_defaults`] takes them out of the statement before DataFusion
//! plans it (DataFusion's CREATE keeps defaults only for its memory tables): a `DEFAULT e`
//! keeps `e` as SQL text; `SERIAL`/`BIGSERIAL`/`SMALLSERIAL` become `INTEGER`/`BIGINT`/
//! `SMALLINT NOT NULL DEFAULT nextval('t_c_seq')` with a sequence the table owns (as
//! PostgreSQL does); `GENERATED { ALWAYS | BY DEFAULT } AS IDENTITY [(options)]` the same,
//! ALWAYS refusing values an INSERT gives. [`check_defaults`] plans each against the
//! table's columns (a default that does not plan or convert fails the CREATE, not a later
//! INSERT). The catalog keeps them (`TableMeta::column_defaults`); the table provider
//! hands them to DataFusion's INSERT planner (`get_column_default`), which fills every
//! column an INSERT leaves out.
//!
//! INSERT: [`rewrite_insert_defaults`] turns `DEFAULT` in a VALUES list and `DEFAULT
//! VALUES` into the column's default (or NULL), which DataFusion does not, and refuses a
//! value for an ALWAYS identity column.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::datatypes::{DataType, Schema};
use datafusion::common::DFSchema;
use datafusion::execution::session_state::SessionState;
use datafusion::logical_expr::{Expr, ExprSchemable, LogicalPlanBuilder};
use datafusion::prelude::DataFrame;
use datafusion::sql::sqlparser::ast::{
    ColumnOption, CreateTable, DataType as SqlType, Expr as SqlExpr, GeneratedAs, Ident, ObjectName, Query, SequenceOptions, SetExpr, Statement, Values,
};
use flashscan_storage::{ColumnDefaultMeta, SequenceMeta, TableMeta};

use crate::error::SqlError;

/// What [`take_column_defaults`] took out of a CREATE TABLE.
#[derive(Debug, Clone, Default)]
pub struct TakenDefaults {
    pub defaults: Vec<ColumnDefaultMeta>,
    /// The sequences SERIAL and identity columns draw from, by name.
    pub sequences: Vec<(String, SequenceMeta)>,
    /// Identity columns, to check their types once planned.
    identity_columns: Vec<String>,
}

impl TakenDefaults {
    /// Defaults to check (`check_defaults`) that come with no sequence or identity column
    /// (ALTER COLUMN … SET DEFAULT).
    pub fn of(defaults: Vec<ColumnDefaultMeta>) -> TakenDefaults {
        TakenDefaults { defaults, ..TakenDefaults::default() }
    }
}

fn plan_error(message: String) -> SqlError {
    SqlError::Plan(message)
}

/// An integer literal of a sequence option (`START WITH -5`).
fn option_i64(what: &str, e: &SqlExpr) -> Result<i64, SqlError> {
    e.to_string().replace(' ', "").parse::<i64>().map_err(|_| plan_error(format!("{what} {e}: give a whole number")))
}

/// The column's name as PostgreSQL folds it.
fn folded(ident: &Ident) -> String {
    if ident.quote_style.is_some() {
        ident.value.clone()
    } else {
        ident.value.to_ascii_lowercase()
    }
}

/// The width of SERIAL's type named `name`, if it is one.
/// Whether `data_type` is SERIAL / BIGSERIAL / SMALLSERIAL (a column with a sequence, not a type).
pub fn serial_type(data_type: &SqlType) -> bool {
    serial_bits(data_type).is_some()
}

fn serial_bits(data_type: &SqlType) -> Option<(u32, SqlType)> {
    let SqlType::Custom(name, modifiers) = data_type else { return None };
    if !modifiers.is_empty() || name.0.len() != 1 {
        return None;
    }
    match name.to_string().to_ascii_lowercase().as_str() {
        "smallserial" | "serial2" => Some((16, SqlType::SmallInt(None))),
        "serial" | "serial4" => Some((32, SqlType::Integer(None))),
        "bigserial" | "serial8" => Some((64, SqlType::BigInt(None))),
        _ => None,
    }
}

/// The width of an integer column type an identity may have.
fn integer_bits(data_type: &SqlType) -> Option<u32> {
    match data_type {
        SqlType::SmallInt(_) | SqlType::Int2(_) => Some(16),
        SqlType::Int(_) | SqlType::Integer(_) | SqlType::Int4(_) => Some(32),
        SqlType::BigInt(_) | SqlType::Int8(_) => Some(64),
        _ => None,
    }
}

/// A sequence from CREATE SEQUENCE's or an identity's options, counting over an integer
/// of `bits` (its MAXVALUE by default).
fn sequence_of(options: &[SequenceOptions], bits: u32) -> Result<SequenceMeta, String> {
    let (mut start, mut increment, mut min, mut max) = (None, 1i64, 1i64, SequenceMeta::max_of_bits(bits));
    let number = |what: &str, e: &SqlExpr| option_i64(what, e).map_err(|e| e.to_string());
    for o in options {
        match o {
            SequenceOptions::StartWith(e, _) => start = Some(number("START WITH", e)?),
            SequenceOptions::IncrementBy(e, _) => increment = number("INCREMENT BY", e)?,
            SequenceOptions::MinValue(Some(e)) => min = number("MINVALUE", e)?,
            SequenceOptions::MaxValue(Some(e)) => max = number("MAXVALUE", e)?.min(max),
            // sqlparser's flag is "NO": `Cycle(true)` is NO CYCLE.
            SequenceOptions::MinValue(None) | SequenceOptions::MaxValue(None) | SequenceOptions::Cycle(true) => {}
            SequenceOptions::Cache(e) if number("CACHE", e)? == 1 => {}
            SequenceOptions::Cache(_) => return Err("CACHE n is not supported: flashscan reserves values itself; drop CACHE".into()),
            SequenceOptions::Cycle(false) => return Err("CYCLE is not supported yet: drop it (the sequence ends at its MAXVALUE)".into()),
        }
    }
    SequenceMeta::new(start.unwrap_or(min), increment, min, max)
}

/// `CREATE SEQUENCE [IF NOT EXISTS] name [AS type] [options]`: the name, the sequence and
/// IF NOT EXISTS; None for any other statement. OWNED BY and TEMPORARY are refused.
pub fn create_sequence_request(statement: &Statement) -> Result<Option<(String, SequenceMeta, bool)>, SqlError> {
    let Statement::CreateSequence { temporary, if_not_exists, name, data_type, sequence_options, owned_by } = statement else { return Ok(None) };
    if *temporary {
        return Err(plan_error("CREATE TEMPORARY SEQUENCE is not supported: create a sequence, and DROP SEQUENCE it when done".into()));
    }
    if owned_by.is_some() {
        return Err(plan_error("CREATE SEQUENCE … OWNED BY is not supported yet: use a SERIAL or identity column, which owns its sequence".into()));
    }
    let bits = match data_type {
        None => 64,
        Some(t) => integer_bits(t).ok_or_else(|| plan_error(format!("sequence type must be smallint, integer, or bigint (not {t})")))?,
    };
    let meta = sequence_of(sequence_options, bits).map_err(plan_error)?;
    Ok(Some((table_name_of(name), meta, *if_not_exists)))
}

/// INSERT: [`rewrite_insert_defaults`] with the insert's table as `write`'s catalog has it
/// now (no copy of the catalog), and [`values_inside_as_selects`].
pub fn prepare_insert(write: &flashscan_write::WritePath, statement: &mut Statement) -> Result<(), SqlError> {
    values_inside_as_selects(statement);
    let Statement::Insert(insert) = &*statement else { return Ok(()) };
    let datafusion::sql::sqlparser::ast::TableObject::TableName(name) = &insert.table else { return Ok(()) };
    let name = table_name_of(name);
    write.with_table(&name, |t| rewrite_insert_defaults(statement, Some(t)))?.unwrap_or(Ok(()))
}

/// `INSERT INTO t (a) SELECT … FROM (VALUES (…, …), …) AS v(x, y)` — SQLAlchemy's ORM
/// writes many rows so — is planned by DataFusion 55 with the insert's columns as the
/// schema of every VALUES list inside it ("Inconsistent data length across values list").
/// A VALUES list below an INSERT's SELECT becomes `SELECT … AS column1, … UNION ALL
/// SELECT …`: the same rows, names and types. An INSERT … VALUES is left as it is.
pub fn values_inside_as_selects(statement: &mut Statement) {
    use datafusion::sql::sqlparser::ast::{VisitMut, VisitorMut};
    struct Rewrite;
    impl VisitorMut for Rewrite {
        type Break = ();
        fn pre_visit_query(&mut self, query: &mut Query) -> std::ops::ControlFlow<()> {
            let SetExpr::Values(values) = query.body.as_ref() else { return std::ops::ControlFlow::Continue(()) };
            let selects: Vec<String> = values
                .rows
                .iter()
                .enumerate()
                .map(|(r, row)| {
                    let items: Vec<String> = row.content.iter().enumerate().map(|(i, e)| if r == 0 { format!("{e} AS column{}", i + 1) } else { e.to_string() }).collect();
                    format!("SELECT {}", items.join(", "))
                })
                .collect();
            let dialect = datafusion::sql::sqlparser::dialect::PostgreSqlDialect {};
            let parsed = datafusion::sql::sqlparser::parser::Parser::new(&dialect).try_with_sql(&selects.join(" UNION ALL ")).and_then(|mut p| p.parse_query());
            if let Ok(parsed) = parsed {
                query.body = parsed.body;
            }
            std::ops::ControlFlow::Continue(())
        }
    }
    let Statement::Insert(insert) = statement else { return };
    let Some(source) = insert.source.as_mut() else { return };
    if matches!(source.body.as_ref(), SetExpr::Values(_)) {
        return;
    }
    let _ = source.visit(&mut Rewrite);
}

/// Takes DEFAULT, SERIAL and identity out of `ct` (see the module comment). The sequence
/// of column c of table t is named `t_c_seq`, as PostgreSQL names it.
pub fn take_column_defaults(ct: &mut CreateTable) -> Result<TakenDefaults, SqlError> {
    let table = ct.name.0.last().map(|p| p.to_string()).unwrap_or_default();
    let table = match table.strip_prefix('"').and_then(|q| q.strip_suffix('"')) {
        Some(q) => q.to_string(),
        None => table.to_ascii_lowercase(),
    };
    let mut taken = TakenDefaults::default();
    for column in &mut ct.columns {
        let name = folded(&column.name);
        let sequence_name = format!("{table}_{name}_seq");
        let mut default_sql: Option<String> = None;
        let mut sequence: Option<SequenceMeta> = None;
        let mut always = false;
        let mut identity = false;
        let mut not_null = false;
        if let Some((bits, int_type)) = serial_bits(&column.data_type) {
            column.data_type = int_type;
            sequence = Some(SequenceMeta::new(1, 1, 1, SequenceMeta::max_of_bits(bits)).map_err(plan_error)?);
            not_null = true;
        }
        let mut kept = Vec::with_capacity(column.options.len());
        for option in std::mem::take(&mut column.options) {
            match &option.option {
                ColumnOption::Default(e) => {
                    if default_sql.is_some() {
                        return Err(plan_error(format!("multiple default values specified for column \"{name}\" of table \"{table}\"")));
                    }
                    default_sql = Some(e.to_string());
                }
                ColumnOption::Generated { generated_as, sequence_options, generation_expr: None, .. } if matches!(generated_as, GeneratedAs::Always | GeneratedAs::ByDefault) => {
                    let Some(bits) = integer_bits(&column.data_type) else {
                        return Err(plan_error(format!("identity column type must be smallint, integer, or bigint (column \"{name}\" is {})", column.data_type)));
                    };
                    if sequence.is_some() {
                        return Err(plan_error(format!("column \"{name}\" of table \"{table}\": an identity column cannot also be SERIAL")));
                    }
                    sequence = Some(sequence_of(sequence_options.as_deref().unwrap_or_default(), bits).map_err(|e| plan_error(format!("column \"{name}\": {e}")))?);
                    always = matches!(generated_as, GeneratedAs::Always);
                    identity = true;
                    not_null = true;
                    taken.identity_columns.push(name.clone());
                }
                _ => kept.push(option),
            }
        }
        column.options = kept;
        if let Some(meta) = sequence {
            if default_sql.is_some() {
                return Err(plan_error(format!("both default and identity specified for column \"{name}\" of table \"{table}\"")));
            }
            default_sql = Some(format!("nextval('{sequence_name}')"));
            taken.sequences.push((sequence_name.clone(), meta));
        }
        if not_null && !column.options.iter().any(|o| matches!(o.option, ColumnOption::NotNull)) {
            column.options.retain(|o| !matches!(o.option, ColumnOption::Null));
            column.options.push(datafusion::sql::sqlparser::ast::ColumnOptionDef { name: None, option: ColumnOption::NotNull });
        }
        if let Some(sql) = default_sql {
            let owns_sequence = taken.sequences.last().is_some_and(|(n, _)| *n == sequence_name);
            taken.defaults.push(ColumnDefaultMeta { column: name, sql, sequence: owns_sequence.then_some(sequence_name), always, identity });
        }
    }
    Ok(taken)
}

/// Plans each default against the planned table's columns (`schema`): it must name no
/// column, convert to the column's type and, when it calls nothing volatile, compute (so
/// `DEFAULT 'x'` on an integer column fails here, as in PostgreSQL).
pub async fn check_defaults(state: &SessionState, schema: &Schema, taken: &TakenDefaults) -> Result<(), SqlError> {
    for name in &taken.identity_columns {
        if let Ok(f) = schema.field_with_name(name) {
            if !matches!(f.data_type(), DataType::Int16 | DataType::Int32 | DataType::Int64) {
                return Err(plan_error(format!("identity column type must be smallint, integer, or bigint (column \"{name}\")")));
            }
        }
    }
    for d in &taken.defaults {
        let field = schema.field_with_name(&d.column).map_err(|_| plan_error(format!("DEFAULT for column \"{}\", which the table does not have", d.column)))?;
        let expr = plan_default(state, d).map_err(|e| plan_error(format!("column \"{}\": DEFAULT {}: {}", d.column, d.sql, crate::error::one_line(&e.to_string()))))?;
        let cast = expr.clone().cast_to(field.data_type(), &DFSchema::empty()).map_err(|e| plan_error(format!("column \"{}\": DEFAULT {}: {e}", d.column, d.sql)))?;
        if !expr.is_volatile() {
            let plan = LogicalPlanBuilder::empty(true).project(vec![cast.alias("v")])?.build()?;
            DataFrame::new(state.clone(), plan)
                .collect()
                .await
                .map_err(|e| plan_error(format!("column \"{}\" is of type {}, but DEFAULT {} is not: {}", d.column, field.data_type(), d.sql, crate::error::one_line(&e.to_string()))))?;
        }
    }
    Ok(())
}

/// A default's expression, planned with no columns in scope (a default names none).
pub fn plan_default(state: &SessionState, d: &ColumnDefaultMeta) -> datafusion::error::Result<Expr> {
    let expr = state.create_logical_expr(&d.sql, &DFSchema::empty()).map_err(|e| match e.to_string().contains("No field named") {
        true => datafusion::error::DataFusionError::Plan("cannot use column reference in DEFAULT expression".into()),
        false => e,
    })?;
    if !expr.column_refs().is_empty() {
        return datafusion::common::plan_err!("cannot use column reference in DEFAULT expression");
    }
    Ok(expr)
}

/// Every default of `table`, planned (see [`plan_default`]) for the table provider. One
/// that does not plan now (a function only the server has, planned in `flashscan sql`)
/// becomes a call that fails the INSERT naming it: never a silent NULL.
pub fn planned_defaults(state: &SessionState, table: &TableMeta) -> Arc<HashMap<String, Expr>> {
    let mut out = HashMap::new();
    for d in &table.column_defaults {
        let expr = match plan_default(state, d) {
            Ok(e) => e,
            Err(e) => unplannable_default(&table.name, d, &e.to_string()),
        };
        out.insert(d.column.clone(), expr);
    }
    Arc::new(out)
}

fn unplannable_default(table: &str, d: &ColumnDefaultMeta, why: &str) -> Expr {
    use datafusion::logical_expr::{create_udf, ColumnarValue, Volatility};
    let message = format!("the DEFAULT of column {} of table {table} ({}) cannot be computed here: {}; give the column a value", d.column, d.sql, crate::error::one_line(why));
    let f = Arc::new(move |_: &[ColumnarValue]| -> datafusion::error::Result<ColumnarValue> { datafusion::common::exec_err!("{message}") });
    let udf = create_udf("flashscan_unplannable_default", vec![], DataType::Null, Volatility::Volatile, f);
    udf.call(vec![])
}

/// INSERT: `DEFAULT` in VALUES and `DEFAULT VALUES` become each column's default (or
/// NULL); a value for a `GENERATED ALWAYS` identity column is refused. `table`: the
/// insert's table, None when unknown (DataFusion's error comes then). Nothing to do for a
/// table with no defaults and a statement with no DEFAULT keyword.
pub fn rewrite_insert_defaults(statement: &mut Statement, table: Option<&TableMeta>) -> Result<(), SqlError> {
    let Statement::Insert(insert) = statement else { return Ok(()) };
    let Some(table) = table else { return Ok(()) };
    let columns: Vec<String> = if insert.columns.is_empty() {
        table.columns.iter().map(|c| c.name.clone()).collect()
    } else {
        insert.columns.iter().map(|c| c.0.last().map(|p| p.as_ident().map(folded).unwrap_or_else(|| p.to_string())).unwrap_or_default()).collect()
    };
    if insert.source.is_none() && insert.assignments.is_empty() {
        // DEFAULT VALUES: every column its default.
        if !insert.columns.is_empty() {
            return Err(plan_error("INSERT … DEFAULT VALUES takes no column list".into()));
        }
        let row: Vec<SqlExpr> = columns.iter().map(|_| SqlExpr::Identifier(Ident::new("DEFAULT"))).collect();
        let body = SetExpr::Values(Values { explicit_row: false, value_keyword: false, rows: vec![datafusion::sql::sqlparser::ast::Parens { opening_token: datafusion::sql::sqlparser::ast::helpers::attached_token::AttachedToken::empty(), content: row, closing_token: datafusion::sql::sqlparser::ast::helpers::attached_token::AttachedToken::empty() }] });
        insert.source = Some(Box::new(Query {
            with: None,
            body: Box::new(body),
            order_by: None,
            limit_clause: None,
            fetch: None,
            locks: vec![],
            for_clause: None,
            settings: None,
            format_clause: None,
            pipe_operators: vec![],
        }));
    }
    let default_of = |column: &str| -> Result<SqlExpr, SqlError> {
        match table.column_default(column) {
            None => Ok(SqlExpr::Value(datafusion::sql::sqlparser::ast::Value::Null.into())),
            Some(d) => {
                let dialect = datafusion::sql::sqlparser::dialect::PostgreSqlDialect {};
                datafusion::sql::sqlparser::parser::Parser::new(&dialect)
                    .try_with_sql(&d.sql)
                    .and_then(|mut p| p.parse_expr())
                    .map_err(|e| SqlError::Internal(format!("the DEFAULT of column {column} ({}) does not parse: {e}", d.sql)))
            }
        }
    };
    let is_default = |e: &SqlExpr| matches!(e, SqlExpr::Identifier(i) if i.quote_style.is_none() && i.value.eq_ignore_ascii_case("default"));
    let always: Vec<&str> = table.column_defaults.iter().filter(|d| d.always).map(|d| d.column.as_str()).collect();
    if let Some(source) = insert.source.as_mut() {
        if let SetExpr::Values(values) = source.body.as_mut() {
            for row in &mut values.rows {
                for (i, value) in row.content.iter_mut().enumerate() {
                    let Some(column) = columns.get(i) else { continue };
                    if is_default(value) {
                        *value = default_of(column)?;
                    } else if always.iter().any(|a| a.eq_ignore_ascii_case(column)) {
                        return Err(always_refusal(column));
                    }
                }
            }
        } else if let Some(a) = always.iter().find(|a| columns.iter().any(|c| c.eq_ignore_ascii_case(a))) {
            return Err(always_refusal(a));
        }
    }
    Ok(())
}

fn always_refusal(column: &str) -> SqlError {
    SqlError::Write(flashscan_write::WriteError::GeneratedAlways { column: column.to_string() })
}

/// The name a CREATE TABLE's `ct.name` gives the table, as PostgreSQL folds it.
pub fn table_name_of(name: &ObjectName) -> String {
    let last = name.0.last().map(|p| p.to_string()).unwrap_or_default();
    match last.strip_prefix('"').and_then(|q| q.strip_suffix('"')) {
        Some(q) => q.to_string(),
        None => last.to_ascii_lowercase(),
    }
}


/// Sequence options in the order sqlparser 0.62 reads them (INCREMENT, MINVALUE, MAXVALUE,
/// START, CACHE, CYCLE), for `CREATE SEQUENCE` and `AS IDENTITY (…)`: PostgreSQL takes them
/// in any order (SQLAlchemy writes INCREMENT BY before START WITH before MINVALUE), sqlparser
/// refuses all but its own. The text is unchanged where there is nothing to reorder, or
/// anything in the options it does not know (then the parser's error stands).
pub fn reorder_sequence_options(sql: &str) -> String {
    use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
    use datafusion::sql::sqlparser::tokenizer::{Token, Tokenizer};
    let lower = sql.to_ascii_lowercase();
    if !lower.contains("identity") && !lower.contains("sequence") {
        return sql.to_string();
    }
    let Ok(tokens) = Tokenizer::new(&PostgreSqlDialect {}, sql).tokenize() else { return sql.to_string() };
    let word = |t: &Token| match t {
        Token::Word(w) => Some(w.value.to_ascii_uppercase()),
        _ => None,
    };
    let solid: Vec<usize> = (0..tokens.len()).filter(|&i| !matches!(tokens[i], Token::Whitespace(_))).collect();
    // Option regions, as ranges of `solid` positions.
    let mut regions = Vec::new();
    for (k, &i) in solid.iter().enumerate() {
        match word(&tokens[i]).as_deref() {
            Some("IDENTITY") if solid.get(k + 1).is_some_and(|&j| tokens[j] == Token::LParen) => {
                let start = k + 2;
                let end = (start..solid.len()).find(|&e| tokens[solid[e]] == Token::RParen);
                if let Some(end) = end {
                    regions.push((start, end));
                }
            }
            Some("SEQUENCE") if k > 0 && solid[..k].iter().any(|&j| word(&tokens[j]).as_deref() == Some("CREATE")) => {
                let mut start = k + 1;
                let words: Vec<Option<String>> = solid[start..].iter().take(3).map(|&j| word(&tokens[j])).collect();
                if words.len() == 3 && words[0].as_deref() == Some("IF") && words[1].as_deref() == Some("NOT") && words[2].as_deref() == Some("EXISTS") {
                    start += 3;
                }
                // The name: words joined by periods.
                start += 1;
                while solid.get(start).is_some_and(|&j| tokens[j] == Token::Period) {
                    start += 2;
                }
                let end = (start..solid.len()).find(|&e| matches!(tokens[solid[e]], Token::SemiColon | Token::EOF)).unwrap_or(solid.len());
                regions.push((start, end));
            }
            _ => {}
        }
    }
    if regions.is_empty() {
        return sql.to_string();
    }
    let rank = |w: &str, next: Option<&str>| -> Option<u8> {
        Some(match (w, next) {
            ("AS", _) => 0,
            ("INCREMENT", _) => 1,
            ("MINVALUE", _) | ("NO", Some("MINVALUE")) => 2,
            ("MAXVALUE", _) | ("NO", Some("MAXVALUE")) => 3,
            ("START", _) => 4,
            ("CACHE", _) => 5,
            ("CYCLE", _) | ("NO", Some("CYCLE")) => 6,
            _ => return None,
        })
    };
    let mut out = String::new();
    let mut at = 0usize;
    for (start, end) in regions {
        // Groups: a keyword starts one; what follows it (numbers, BY, WITH, a type) joins it.
        let mut groups: Vec<(u8, Vec<String>)> = Vec::new();
        let mut k = start;
        while k < end {
            let t = &tokens[solid[k]];
            let w = word(t);
            let next = solid.get(k + 1).and_then(|&j| word(&tokens[j]));
            let starts = w.as_deref().and_then(|w| rank(w, next.as_deref()));
            // MINVALUE, MAXVALUE or CYCLE right after NO belong to NO's group.
            let after_no = groups.last().is_some_and(|(_, g)| g.last().is_some_and(|s| s.eq_ignore_ascii_case("NO")));
            let new_group = starts.filter(|_| !(after_no && matches!(w.as_deref(), Some("MINVALUE" | "MAXVALUE" | "CYCLE"))));
            match (new_group, groups.last_mut()) {
                (Some(r), _) => groups.push((r, vec![t.to_string()])),
                // A sign stays with its number.
                (None, Some((_, g))) if g.last().is_some_and(|l| l == "-" || l == "+") => {
                    if let Some(l) = g.last_mut() {
                        l.push_str(&t.to_string());
                    }
                }
                (None, Some((_, g))) => g.push(t.to_string()),
                (None, None) => return sql.to_string(),
            }
            k += 1;
        }
        let mut sorted = groups.clone();
        sorted.sort_by_key(|(r, _)| *r);
        if sorted == groups {
            continue;
        }
        let first = solid[start];
        let last = solid[end - 1];
        out.extend(tokens[at..first].iter().map(|t| t.to_string()));
        out.push_str(&sorted.iter().map(|(_, g)| g.join(" ")).collect::<Vec<_>>().join(" "));
        at = last + 1;
    }
    if at == 0 {
        return sql.to_string();
    }
    out.extend(tokens[at..].iter().map(|t| t.to_string()));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequence_options_are_put_in_the_order_the_parser_reads() {
        assert_eq!(
            reorder_sequence_options("CREATE TABLE b (id INT GENERATED BY DEFAULT AS IDENTITY (START WITH 10 INCREMENT BY 5), v TEXT)"),
            "CREATE TABLE b (id INT GENERATED BY DEFAULT AS IDENTITY (INCREMENT BY 5 START WITH 10), v TEXT)"
        );
        assert_eq!(reorder_sequence_options("create sequence if not exists public.s start 3 no maxvalue minvalue -7 as bigint"), "create sequence if not exists public.s as bigint minvalue -7 no maxvalue start 3");
        let ordered = "CREATE SEQUENCE s INCREMENT BY 2 START WITH 1";
        assert_eq!(reorder_sequence_options(ordered), ordered);
        assert_eq!(reorder_sequence_options("CREATE SEQUENCE s START 1 OWNED BY t.c"), "CREATE SEQUENCE s START 1 OWNED BY t.c", "unknown options: unchanged");
        assert_eq!(reorder_sequence_options("SELECT 1"), "SELECT 1");
    }
}
