//! `ANALYZE`'s one write: a table's measured statistics (`TableStatisticsMeta`) put into
//! the catalog in one atomic commit, as index definitions are, so they survive a crash
//! whole or not at all and every session that opens the catalog after sees them.

use flashscan_storage::{StorageError, TableStatisticsMeta};

use crate::error::WriteError;
use crate::write_path::{key_of, WritePath};

impl WritePath {
    /// Replaces `table_name`'s statistics with `statistics` (one entry per column).
    pub fn set_table_statistics(&self, table_name: &str, statistics: TableStatisticsMeta) -> Result<(), WriteError> {
        let mut st = self.lock_state()?;
        Self::require_writer(&st)?;
        let Some(key) = key_of(&st.catalog, table_name) else {
            return Err(StorageError::UnknownTable { name: table_name.to_string(), known: st.catalog.tables.keys().cloned().collect::<Vec<_>>().join(", ") }.into());
        };
        let mut next = st.catalog.clone();
        let Some(table) = next.tables.get_mut(&key) else { return Err(WriteError::InvalidArgument(format!("table {key} was dropped meanwhile"))) };
        if statistics.distinct_counts.len() != table.columns.len() {
            return Err(WriteError::InvalidArgument(format!("statistics of table {key} name {} columns; it has {}", statistics.distinct_counts.len(), table.columns.len())));
        }
        table.statistics = Some(statistics);
        next.generation += 1;
        next.write_atomic(self.db_dir())?;
        st.catalog = next;
        Ok(())
    }
}
