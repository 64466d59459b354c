//! SQL for indexes and keys: PRIMARY KEY and UNIQUE in CREATE TABLE (column and table
//! constraints), `CREATE [UNIQUE] INDEX`, `DROP INDEX`, and `ALTER TABLE … ADD PRIMARY KEY /
//! ADD [CONSTRAINT name] UNIQUE / DROP CONSTRAINT`, turned into the write path's index
//! definitions (`KeyIndexDef`; crates/write `key_index.rs` keeps and enforces them).
//!
//! Names follow PostgreSQL: `t_pkey`, `t_a_key` (UNIQUE), `t_a_idx` (CREATE INDEX without a
//! name). What flashscan would not honour is refused by name: partial and expression
//! indexes, INCLUDE, NULLS NOT DISTINCT, DEFERRABLE, FOREIGN KEY, CHECK. ASC/DESC and
//! NULLS FIRST/LAST are taken: they set the order of an index's entries, which no answer
//! depends on (flashscan's indexes answer `=`, `IN` and key-prefix lookups).

use datafusion::sql::sqlparser::ast::{AlterTable, AlterTableOperation, ColumnOption, CreateIndex, CreateTable, Expr, IndexColumn, ObjectName, TableConstraint};
use flashscan_storage::KeyIndexDef;

use crate::error::SqlError;

fn plan_err(message: String) -> SqlError {
    SqlError::Plan(message)
}

/// The last part of a (possibly qualified, possibly quoted) name, as flashscan keys it.
pub fn bare_name(name: &ObjectName) -> String {
    name.0.last().map(|p| p.to_string()).unwrap_or_default().trim_matches('"').to_string()
}

/// The column names of an index's key; an expression, operator class or a column given
/// twice is refused.
fn key_columns(what: &str, columns: &[IndexColumn]) -> Result<Vec<String>, SqlError> {
    let mut out: Vec<String> = Vec::with_capacity(columns.len());
    for c in columns {
        if c.operator_class.is_some() {
            return Err(plan_err(format!("{what}: operator classes are not supported: list plain columns")));
        }
        let name = match &c.column.expr {
            Expr::Identifier(i) => i.value.clone(),
            Expr::CompoundIdentifier(parts) => parts.last().map(|p| p.value.clone()).unwrap_or_default(),
            other => return Err(plan_err(format!("{what}: an index on the expression {other} is not supported: index plain columns"))),
        };
        if out.iter().any(|o| o.eq_ignore_ascii_case(&name)) {
            return Err(plan_err(format!("{what}: column {name} appears twice in the key")));
        }
        out.push(name);
    }
    if out.is_empty() {
        return Err(plan_err(format!("{what}: name the key's columns")));
    }
    Ok(out)
}

/// A PRIMARY KEY or UNIQUE constraint as an index definition (`columns` given when the
/// constraint is a column option).
fn constraint_def(table: &str, constraint: &TableConstraint, column: Option<&str>) -> Result<KeyIndexDef, SqlError> {
    let on = |c: &str| format!("{} {c}", column.map(|col| format!("column {col}:")).unwrap_or_else(|| format!("table {table}:")));
    match constraint {
        TableConstraint::PrimaryKey(pk) => {
            if pk.characteristics.is_some() {
                return Err(plan_err(format!("{}: DEFERRABLE / INITIALLY keys are not supported: a key is checked by each statement", on("PRIMARY KEY"))));
            }
            let columns = match column {
                Some(c) => vec![c.to_string()],
                None => key_columns(&on("PRIMARY KEY"), &pk.columns)?,
            };
            let name = pk.name.as_ref().map(|n| n.value.to_ascii_lowercase()).unwrap_or_else(|| format!("{table}_pkey"));
            Ok(KeyIndexDef { name, columns, unique: true, primary: true, constraint: true })
        }
        TableConstraint::Unique(u) => {
            if u.characteristics.is_some() {
                return Err(plan_err(format!("{}: DEFERRABLE / INITIALLY constraints are not supported: a key is checked by each statement", on("UNIQUE"))));
            }
            if matches!(u.nulls_distinct, datafusion::sql::sqlparser::ast::NullsDistinctOption::NotDistinct) {
                return Err(plan_err(format!("{}: NULLS NOT DISTINCT is not supported: UNIQUE lets any number of NULLs in (PostgreSQL's default)", on("UNIQUE"))));
            }
            let columns = match column {
                Some(c) => vec![c.to_string()],
                None => key_columns(&on("UNIQUE"), &u.columns)?,
            };
            let name = u.name.as_ref().map(|n| n.value.to_ascii_lowercase()).unwrap_or_else(|| format!("{table}_{}_key", columns.join("_").to_ascii_lowercase()));
            Ok(KeyIndexDef { name, columns, unique: true, primary: false, constraint: true })
        }
        TableConstraint::ForeignKey(_) => Err(plan_err(format!("{}: FOREIGN KEY is not supported yet (it would not be enforced): drop the constraint", on("FOREIGN KEY")))),
        TableConstraint::Check(_) => Err(plan_err(format!("{}: CHECK is not supported yet (it would not be enforced): drop it and validate the rows before INSERT", on("CHECK")))),
        other => Err(plan_err(format!("table {table}: the constraint {other} is not supported"))),
    }
}

/// Takes the PRIMARY KEY and UNIQUE constraints out of a CREATE TABLE (table constraints
/// and column options) as index definitions; what is left is planned as before, and the
/// constraints flashscan does not enforce stay for `refuse_unsupported_create` to refuse.
pub fn take_key_constraints(ct: &mut CreateTable) -> Result<Vec<KeyIndexDef>, SqlError> {
    let table = bare_name(&ct.name).to_ascii_lowercase();
    let mut defs = Vec::new();
    for column in &mut ct.columns {
        let mut kept = Vec::with_capacity(column.options.len());
        for option in std::mem::take(&mut column.options) {
            match &option.option {
                ColumnOption::PrimaryKey(pk) => defs.push(constraint_def(&table, &TableConstraint::PrimaryKey(pk.clone()), Some(&column.name.value))?),
                ColumnOption::Unique(u) => defs.push(constraint_def(&table, &TableConstraint::Unique(u.clone()), Some(&column.name.value))?),
                _ => kept.push(option),
            }
        }
        column.options = kept;
    }
    let mut kept = Vec::new();
    for c in std::mem::take(&mut ct.constraints) {
        match c {
            TableConstraint::PrimaryKey(_) | TableConstraint::Unique(_) => defs.push(constraint_def(&table, &c, None)?),
            other => kept.push(other),
        }
    }
    ct.constraints = kept;
    // A primary key's columns are NOT NULL: declared so here, as PostgreSQL does, so the
    // planned schema (and every INSERT's check) has them.
    for def in defs.iter().filter(|d| d.primary) {
        for c in &def.columns {
            if let Some(column) = ct.columns.iter_mut().find(|col| col.name.value.eq_ignore_ascii_case(c)) {
                if !column.options.iter().any(|o| matches!(o.option, ColumnOption::NotNull)) {
                    column.options.retain(|o| !matches!(o.option, ColumnOption::Null));
                    column.options.push(datafusion::sql::sqlparser::ast::ColumnOptionDef { name: None, option: ColumnOption::NotNull });
                }
            } else {
                return Err(plan_err(format!("PRIMARY KEY of table {table}: column {c} does not exist")));
            }
        }
    }
    if defs.iter().filter(|d| d.primary).count() > 1 {
        return Err(plan_err(format!("multiple primary keys for table {table} are not allowed")));
    }
    Ok(defs)
}

/// `CREATE [UNIQUE] INDEX [CONCURRENTLY] [IF NOT EXISTS] [name] ON t (col [ASC|DESC], …)`:
/// the table and the definition.
pub fn create_index(ci: &CreateIndex) -> Result<(String, KeyIndexDef), SqlError> {
    let table = bare_name(&ci.table_name);
    let what = format!("CREATE INDEX on {table}");
    if ci.predicate.is_some() {
        return Err(plan_err(format!("{what}: a partial index (WHERE) is not supported: index the whole table")));
    }
    if !ci.include.is_empty() {
        return Err(plan_err(format!("{what}: INCLUDE is not supported: leave it out (lookups read the row from the table)")));
    }
    if ci.nulls_distinct == Some(false) {
        return Err(plan_err(format!("{what}: NULLS NOT DISTINCT is not supported: UNIQUE lets any number of NULLs in (PostgreSQL's default)")));
    }
    if !ci.with.is_empty() || !ci.index_options.is_empty() || !ci.alter_options.is_empty() {
        return Err(plan_err(format!("{what}: index options (WITH …) are not supported: leave them out")));
    }
    if let Some(using) = &ci.using {
        if !using.to_string().eq_ignore_ascii_case("btree") {
            return Err(plan_err(format!("{what}: USING {using} is not supported: flashscan's indexes are ordered (USING btree, the default)")));
        }
    }
    let columns = key_columns(&what, &ci.columns)?;
    let name = match &ci.name {
        Some(n) => bare_name(n).to_ascii_lowercase(),
        None => format!("{}_{}_idx", table.to_ascii_lowercase(), columns.join("_").to_ascii_lowercase()),
    };
    Ok((table, KeyIndexDef { name, columns, unique: ci.unique, primary: false, constraint: false }))
}

/// What an ALTER TABLE asks of indexes.
#[derive(Debug, Clone)]
pub enum AlterKey {
    Add { table: String, def: KeyIndexDef },
    DropConstraint { table: String, name: String, if_exists: bool },
}

/// `ALTER TABLE t ADD PRIMARY KEY (…)`, `ADD [CONSTRAINT name] UNIQUE (…)` (pgbench -i sends
/// the first), `DROP CONSTRAINT [IF EXISTS] name`; one operation per statement. Anything
/// else is refused.
pub fn alter_table(at: &AlterTable) -> Result<AlterKey, SqlError> {
    let table = bare_name(&at.name);
    let refuse = || plan_err(format!("ALTER TABLE {table}: this form is not supported yet (only ADD PRIMARY KEY, ADD [CONSTRAINT name] UNIQUE and DROP CONSTRAINT are; added or renamed columns are not): create a new table and INSERT INTO it … SELECT"));
    if at.operations.len() != 1 || at.on_cluster.is_some() || at.location.is_some() {
        return Err(refuse());
    }
    match &at.operations[0] {
        AlterTableOperation::AddConstraint { constraint, not_valid } => {
            if *not_valid {
                return Err(plan_err(format!("ALTER TABLE {table}: NOT VALID is not supported: the key is checked against every row when it is added")));
            }
            Ok(AlterKey::Add { table: table.clone(), def: constraint_def(&table.to_ascii_lowercase(), constraint, None)? })
        }
        AlterTableOperation::DropConstraint { if_exists, name, drop_behavior: _ } => Ok(AlterKey::DropConstraint { table, name: name.value.clone(), if_exists: *if_exists }),
        _ => Err(refuse()),
    }
}
