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
use datafusion::sql::sqlparser::ast::{CreateTable, CreateTableOptions, SqlOption};
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

/// Table options of CREATE TABLE: `partitions`, `partition_by`.
pub fn table_options(ct: &mut CreateTable) -> Result<(Option<u32>, Option<String>), SqlError> {
    let options: Vec<SqlOption> = match std::mem::replace(&mut ct.table_options, CreateTableOptions::None) {
        CreateTableOptions::None => Vec::new(),
        CreateTableOptions::With(o) => o,
        other => {
            return Err(SqlError::Plan(format!(
                "CREATE TABLE options {other}: not supported; use WITH (partitions = N, partition_by = 'column')"
            )))
        }
    };
    let mut partitions = None;
    let mut partition_by = None;
    for o in options {
        let text = o.to_string();
        let Some((key, value)) = text.split_once('=') else {
            return Err(SqlError::Plan(format!("CREATE TABLE option {text}: use WITH (partitions = N, partition_by = 'column')")));
        };
        let key = key.trim().to_ascii_lowercase();
        let value = value.trim().trim_matches(|c| c == '\'' || c == '"').to_string();
        match key.as_str() {
            "partitions" => {
                partitions = Some(value.parse::<u32>().map_err(|_| SqlError::Plan(format!("partitions = {value}: give a whole number of partitions")))?)
            }
            "partition_by" => partition_by = Some(value),
            _ => return Err(SqlError::Plan(format!("CREATE TABLE option {key:?} is unknown: the options are partitions and partition_by"))),
        }
    }
    Ok((partitions, partition_by))
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
        return no("table constraints (PRIMARY KEY, UNIQUE, FOREIGN KEY, CHECK)", "declare columns NOT NULL; indexes come from `flashscan index create`");
    }
    if ct.like.is_some() || ct.clone.is_some() {
        return no("CREATE TABLE … LIKE/CLONE", "list the columns");
    }
    Ok(())
}

pub fn new_table(name: String, columns: Vec<flashscan_storage::ColumnDef>, partitions: Option<u32>, partition_by: Option<String>, if_not_exists: bool) -> NewTable {
    NewTable { name, columns, partition_count: partitions, partition_by, if_not_exists }
}
