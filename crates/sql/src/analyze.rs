//! `ANALYZE [table]`: measures each table's distinct values per column at the statement's
//! snapshot and commits them to the catalog (`WritePath::set_table_statistics`), where the
//! table provider hands them to the planner as inexact distinct counts and the join order
//! rule (`join_order.rs`) estimates join sizes by them.
//!
//! The counts are DataFusion's `approx_distinct` (a HyperLogLog sketch of 2^14 registers,
//! about 1 % standard error) over every column in one scan: a well-kept sketch rather than
//! a hand-written one, merged across the scan's partitions by DataFusion's own aggregate.
//! Not kept per row group: a rebuild or checkpoint keeps the last figures (which writes
//! make older, never exact), and `ANALYZE` measures again.
//!
//! Every form this does not honour is refused with what to run instead.

use std::time::Instant;

use datafusion::sql::sqlparser::ast::Analyze;
use flashscan_storage::{ColumnType, TableStatisticsMeta};

use super::{status_output, FlashscanSession};
use crate::error::SqlError;
use crate::QueryOutput;

impl FlashscanSession {
    pub(crate) async fn analyze(&self, analyze: &Analyze, text: String) -> Result<QueryOutput, SqlError> {
        let started = Instant::now();
        if analyze.partitions.is_some() || analyze.for_columns || analyze.cache_metadata || analyze.noscan || analyze.compute_statistics {
            return Err(SqlError::Plan("ANALYZE with PARTITION, FOR COLUMNS, CACHE METADATA, NOSCAN or COMPUTE STATISTICS is not supported: run ANALYZE table".into()));
        }
        if !analyze.columns.is_empty() {
            return Err(SqlError::Plan("ANALYZE table (columns) is not supported: run ANALYZE table, which measures every column".into()));
        }
        if self.in_transaction() {
            return Err(SqlError::Plan("ANALYZE inside BEGIN … COMMIT is not supported (it commits on its own): run it outside the transaction".into()));
        }
        let w = self.ensure_writer()?;
        let catalog = w.catalog()?;
        let names: Vec<String> = match &analyze.table_name {
            Some(name) => {
                let name = crate::views::object_name(name);
                if self.is_view(&name) {
                    return Err(SqlError::Plan(format!("cannot ANALYZE view {name}: ANALYZE the tables it reads")));
                }
                match catalog.tables.keys().find(|k| k.eq_ignore_ascii_case(&name)) {
                    Some(k) => vec![k.clone()],
                    None => return Err(SqlError::Plan(format!("table '{name}' not found; tables: {}", catalog.tables.keys().cloned().collect::<Vec<_>>().join(", ")))),
                }
            }
            None => catalog.tables.keys().cloned().collect(),
        };
        for name in &names {
            let Some(table) = catalog.tables.get(name) else { continue };
            let statistics = self.measure(&table.name, &table.columns).await?;
            w.set_table_statistics(name, statistics)?;
        }
        self.register_tables(&w.catalog()?)?;
        status_output(text, format!("analyzed {}", if names.is_empty() { "nothing".to_string() } else { names.join(", ") }), started)
    }

    /// One scan of `table` at a snapshot of now: its rows and each column's distinct count.
    async fn measure(&self, table: &str, columns: &[flashscan_storage::ColumnDef]) -> Result<TableStatisticsMeta, SqlError> {
        let quote = |s: &str| format!("\"{}\"", s.replace('"', "\"\""));
        let mut select = vec!["count(*)".to_string()];
        for c in columns {
            // The sketch takes no floating point type: their text is as distinct as they are.
            let column = match c.column_type {
                ColumnType::Float64 => format!("CAST({} AS VARCHAR)", quote(&c.name)),
                _ => quote(&c.name),
            };
            select.push(format!("approx_distinct({column})"));
        }
        let sql = format!("SELECT {} FROM {}", select.join(", "), quote(&table.to_lowercase()));
        // Committed rows only: statistics are shared, a transaction's own rows are not.
        let mut state = self.ctx.state();
        state.config_mut().set_extension(std::sync::Arc::new(self.write.read_snapshot()?));
        let plan = state.create_logical_plan(&sql).await?;
        let batches = datafusion::dataframe::DataFrame::new(state, plan).collect().await?;
        let batch = batches.iter().find(|b| b.num_rows() == 1).ok_or_else(|| SqlError::Internal(format!("ANALYZE {table}: the measuring query returned no row")))?;
        let value = |i: usize| -> Option<u64> {
            let array = batch.column(i);
            if array.is_null(0) {
                return None;
            }
            arrow::compute::cast(array, &arrow::datatypes::DataType::UInt64).ok()?.as_any().downcast_ref::<arrow::array::UInt64Array>().map(|a| a.value(0))
        };
        let row_count = value(0).ok_or_else(|| SqlError::Internal(format!("ANALYZE {table}: no row count")))?;
        let distinct_counts = (1..=columns.len()).map(value).collect();
        Ok(TableStatisticsMeta { row_count, distinct_counts })
    }
}
