//! DDL and DML over flashscan's write path (`flashscan-write`).
//!
//! INSERT goes through DataFusion's own insert path: `TableProvider::insert_into` returns a
//! `DataSinkExec` over [`WriteSink`]. DataFusion then does what an INSERT needs before a
//! row reaches us — VALUES and SELECT planned alike, each column cast to the table's type
//! (a value that does not convert is a one-line error), NOT NULL checked on every batch —
//! and the sink sees the statement's rows exactly once, so the statement is one transaction
//! (`WritePath::insert`: all rows logged, one durable commit, then visible).
//!
//! CREATE TABLE and DROP TABLE are intercepted before planning (DataFusion would make an
//! in-memory table): CREATE is still planned by DataFusion to get the column types and
//! nullability exactly as its SQL dialect defines them, then committed to the catalog.
//! Partitioning: `CREATE TABLE t (…) WITH (partitions = 8, partition_by = 'k')` — the
//! `WITH (…)` option list is what DataFusion's parser accepts for CREATE TABLE.

use std::fmt;
use std::sync::Arc;

use arrow::datatypes::SchemaRef;
use async_trait::async_trait;
use datafusion::datasource::sink::DataSink;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_plan::{DisplayAs, DisplayFormatType};
use datafusion::sql::sqlparser::ast::{ColumnOption, CreateTable, CreateTableOptions, SqlOption};
use flashscan_write::{NewTable, WritePath};
use futures::StreamExt;

use crate::error::SqlError;

/// Receives one INSERT's rows and commits them as one transaction.
pub struct WriteSink {
    pub write: Arc<WritePath>,
    pub table: String,
    pub schema: SchemaRef,
}

impl fmt::Debug for WriteSink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "WriteSink({})", self.table)
    }
}

impl DisplayAs for WriteSink {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "FlashscanInsert: table={} (logged, one durable commit)", self.table)
    }
}

#[async_trait]
impl DataSink for WriteSink {
    fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    async fn write_all(&self, mut data: SendableRecordBatchStream, _context: &Arc<TaskContext>) -> Result<u64> {
        // The whole statement first: an error in any batch (a failed cast, NULL into NOT
        // NULL) ends it before anything is logged.
        let mut batches = Vec::new();
        while let Some(batch) = data.next().await {
            batches.push(batch?);
        }
        let write = self.write.clone();
        let table = self.table.clone();
        // The commit waits for the log flush: off the async workers.
        let inserted = tokio::task::spawn_blocking(move || write.insert(&table, &batches))
            .await
            .map_err(|e| DataFusionError::Execution(format!("the insert thread failed: {e}")))?;
        inserted.map_err(|e| DataFusionError::External(Box::new(e)))
    }
}

/// The options CREATE TABLE takes in `WITH (…)`.
#[derive(Debug, Default)]
pub struct TableOptions {
    pub partitions: Option<u32>,
    pub partition_by: Option<String>,
    /// `compression = 'none' | 'columnstore' | 'columnstore_archive'` (`--compression`'s
    /// names); a heap when absent.
    pub format: Option<flashscan_storage::TableFormat>,
}

const OPTIONS_TAKEN: &str = "use WITH (partitions = N, partition_by = 'column', compression = 'none' | 'columnstore' | 'columnstore_archive')";

/// Table options of CREATE TABLE: `partitions`, `partition_by`, `compression`, and
/// PostgreSQL's `fillfactor` at 100 (what flashscan does).
pub fn table_options(ct: &mut CreateTable) -> Result<TableOptions, SqlError> {
    let options: Vec<SqlOption> = match std::mem::replace(&mut ct.table_options, CreateTableOptions::None) {
        CreateTableOptions::None => Vec::new(),
        CreateTableOptions::With(o) => o,
        other => return Err(SqlError::Plan(format!("CREATE TABLE options {other}: not supported; {OPTIONS_TAKEN}"))),
    };
    let mut taken = TableOptions::default();
    for o in options {
        let text = o.to_string();
        let Some((key, value)) = text.split_once('=') else {
            return Err(SqlError::Plan(format!("CREATE TABLE option {text}: {OPTIONS_TAKEN}")));
        };
        let key = key.trim().to_ascii_lowercase();
        let value = value.trim().trim_matches(|c| c == '\'' || c == '"').to_string();
        match key.as_str() {
            "partitions" => {
                taken.partitions = Some(value.parse::<u32>().map_err(|_| SqlError::Plan(format!("partitions = {value}: give a whole number of partitions")))?)
            }
            "partition_by" => taken.partition_by = Some(value),
            // Row and page compression are what a rebuild makes of full pages: new rows
            // arrive as plain heap pages (the checkpoint's), so a table created so would
            // not be what it says.
            "compression" => {
                taken.format = Some(match flashscan_storage::TableFormat::parse(&value) {
                    Ok(f @ (flashscan_storage::TableFormat::ColumnStore { .. } | flashscan_storage::TableFormat::Heap(flashscan_storage::heap::page_encoder::HeapFormat::Plain))) => f,
                    Ok(_) => {
                        return Err(SqlError::Plan(format!(
                            "CREATE TABLE option compression = {value} is not supported: rows inserted arrive as plain heap pages; create it with compression = 'none', load the rows, then `flashscan rebuild DB TABLE --compression {value}`"
                        )))
                    }
                    Err(_) => return Err(SqlError::Plan(format!("CREATE TABLE option compression = {value:?} is unknown: {OPTIONS_TAKEN}"))),
                })
            }
            // PostgreSQL's storage parameter (pgbench -i sends `fillfactor = 100`): heap
            // pages are filled completely, which is what 100 asks; any other value would be
            // a request flashscan does not honour.
            "fillfactor" if value == "100" => {}
            "fillfactor" => {
                return Err(SqlError::Plan(format!(
                    "CREATE TABLE option fillfactor = {value} is not supported: flashscan fills heap pages completely (fillfactor = 100); leave it out or give 100"
                )))
            }
            _ => return Err(SqlError::Plan(format!("CREATE TABLE option {key:?} is unknown: the options are partitions, partition_by, compression and fillfactor (100)"))),
        }
    }
    Ok(taken)
}

/// What CREATE TABLE refuses before planning, with what to do instead.
pub fn refuse_unsupported_create(ct: &CreateTable) -> Result<(), SqlError> {
    let no = |what: &str, instead: &str| Err(SqlError::Plan(format!("{what} is not supported yet: {instead}")));
    if ct.query.is_some() {
        return no("CREATE TABLE … AS SELECT", "CREATE TABLE, then INSERT INTO … SELECT");
    }
    if ct.or_replace {
        return no("CREATE OR REPLACE TABLE", "DROP TABLE, then CREATE TABLE");
    }
    if ct.external || ct.temporary {
        return no("CREATE EXTERNAL/TEMPORARY TABLE", "CREATE TABLE makes a flashscan table");
    }
    if !ct.constraints.is_empty() {
        return no("table constraints other than PRIMARY KEY and UNIQUE (FOREIGN KEY, CHECK)", "drop them; flashscan would not enforce them");
    }
    if ct.like.is_some() || ct.clone.is_some() {
        return no("CREATE TABLE … LIKE/CLONE", "list the columns");
    }
    for column in &ct.columns {
        for option in &column.options {
            refuse_column_option(&column.name.value, &option.option)?;
        }
    }
    Ok(())
}

/// A column option flashscan does not honour is refused, never accepted and dropped: a
/// PRIMARY KEY or UNIQUE that is not enforced would store the duplicates the user declared
/// impossible. NULL / NOT NULL are honoured; DEFAULT is refused after planning (it arrives
/// as DataFusion's `column_defaults`); everything else is refused here, by name.
fn refuse_column_option(column: &str, option: &ColumnOption) -> Result<(), SqlError> {
    let refuse = |what: &str, instead: &str| Err(SqlError::Plan(format!("column {column}: {what} is not supported yet: {instead}")));
    match option {
        ColumnOption::Null | ColumnOption::NotNull | ColumnOption::Default(_) => Ok(()),
        // Taken out before this check (`index_ddl::take_key_constraints`) and enforced.
        ColumnOption::PrimaryKey(_) | ColumnOption::Unique(_) => Ok(()),
        ColumnOption::ForeignKey(_) => refuse("REFERENCES (foreign keys are not enforced)", "drop REFERENCES from the column"),
        ColumnOption::Check(_) => refuse("CHECK (not enforced)", "drop the CHECK and validate the rows before INSERT"),
        ColumnOption::Identity(_) | ColumnOption::Generated { .. } => {
            refuse("an identity or generated column", "give the column's value in every INSERT")
        }
        other => refuse(&format!("the column option {other}"), "drop it from the column"),
    }
}

pub fn new_table(name: String, columns: Vec<flashscan_storage::ColumnDef>, options: TableOptions, if_not_exists: bool) -> NewTable {
    NewTable { name, columns, partition_count: options.partitions, partition_by: options.partition_by, format: options.format, if_not_exists, ..NewTable::default() }
}

/// The columns an INSERT fills, in the order of its VALUES (or SELECT) list — the listed
/// columns, or every column of the table — and the table's columns in table order. `None`
/// when the table is unknown (the plan's own error comes first then).
pub fn insert_column_names(write: &WritePath, insert: &datafusion::sql::sqlparser::ast::Insert) -> Option<InsertColumns> {
    let unquote = |s: String| s.rsplit('.').next().unwrap_or_default().trim_matches('"').to_string();
    let table = unquote(insert.table.to_string());
    let catalog = write.catalog().ok()?;
    let meta = catalog.tables.iter().find(|(k, _)| k.eq_ignore_ascii_case(&table)).map(|(_, t)| t)?;
    let table_columns: Vec<String> = meta.columns.iter().map(|c| c.name.clone()).collect();
    let listed = if insert.columns.is_empty() { table_columns.clone() } else { insert.columns.iter().map(|c| unquote(c.to_string())).collect() };
    Some(InsertColumns { listed, table: table_columns })
}

/// See [`insert_column_names`].
#[derive(Debug, Clone)]
pub struct InsertColumns {
    pub listed: Vec<String>,
    pub table: Vec<String>,
}

/// DataFusion reports NULL into a NOT NULL column by position: Arrow's "Column 'column3'
/// is declared as non-nullable …" (the 3rd column of the INSERT's list, 1-based) or
/// "Invalid batch column at '2' has null …" (the table's 3rd column, 0-based). Names the
/// column instead; any other error passes unchanged.
pub fn name_null_column(error: SqlError, columns: Option<&InsertColumns>) -> SqlError {
    let Some(columns) = columns else { return error };
    let message = match &error {
        SqlError::Execution(m) | SqlError::Plan(m) | SqlError::Internal(m) => m.clone(),
        _ => return error,
    };
    let between = |start: &str, end: &str| -> Option<String> {
        let from = message.find(start)? + start.len();
        let len = message[from..].find(end)?;
        Some(message[from..from + len].to_string())
    };
    let name = if let Some(n) = between("Column 'column", "' is declared as non-nullable") {
        n.parse::<usize>().ok().and_then(|n| n.checked_sub(1)).and_then(|i| columns.listed.get(i))
    } else if let Some(n) = between("Invalid batch column at '", "' has null but schema specifies non-nullable") {
        n.parse::<usize>().ok().and_then(|i| columns.table.get(i))
    } else {
        None
    };
    match name {
        Some(name) => SqlError::Execution(format!("NULL in column {name}, which is NOT NULL: give it a value in every row (nothing was inserted)")),
        None => error,
    }
}

#[cfg(test)]
mod null_column_tests {
    use super::*;

    #[test]
    fn null_errors_name_the_column() {
        let cols = InsertColumns { listed: vec!["qty".into(), "id".into()], table: vec!["id".into(), "name".into(), "qty".into()] };
        let e = name_null_column(SqlError::Execution("Invalid argument error: Column 'column1' is declared as non-nullable but contains null values".into()), Some(&cols));
        assert_eq!(e.to_string(), "NULL in column qty, which is NOT NULL: give it a value in every row (nothing was inserted)");
        // The batch form counts the table's columns from 0.
        let e = name_null_column(SqlError::Execution("Invalid batch column at '2' has null but schema specifies non-nullable".into()), Some(&cols));
        assert!(e.to_string().contains("column qty,"), "{e}");
        // Out of range or other errors: unchanged.
        let e = name_null_column(SqlError::Execution("Invalid argument error: Column 'column9' is declared as non-nullable but contains null values".into()), Some(&cols));
        assert!(e.to_string().contains("column9"), "{e}");
        let e = name_null_column(SqlError::Execution("division by zero".into()), Some(&cols));
        assert_eq!(e.to_string(), "division by zero");
    }
}
