//! A statement's snapshot: every heap table's committed rows as of one moment (READ
//! COMMITTED takes one per statement; docs/architecture.md, "Transactions and snapshots").
//!
//! Why: a transaction may insert into several tables, and its rows join each table's delta
//! one table after another. A statement that read each table's delta when it planned that
//! table's scan could see the transaction in one table and not yet in the other (measured:
//! 196 of 8,764 answers of `(SELECT count(*) FROM a) - (SELECT count(*) FROM b)` were -1
//! while every transaction inserted one row into each). So a commit makes its rows visible
//! in every table it touches at once, under the write side of [`Visibility`], and a
//! snapshot is taken under its read side: it sees each transaction whole or not at all.
//!
//! A snapshot is cheap: per heap table an `Arc` of the table as its delta began (the pages
//! the delta sits on top of, see `TableDelta::table_meta`), the delta, and how many rows of
//! each partition it sees. Column store tables take no writes and are not in it.

use std::collections::BTreeMap;
use std::sync::{Arc, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

use arrow::record_batch::RecordBatch;
use flashscan_storage::{StorageError, TableMeta};

use crate::delta::TableDelta;

/// Orders commits' visibility against snapshots (see the module comment). Held for the
/// time it takes to append one commit's rows to its deltas, or to count a snapshot's rows:
/// never across a log flush or an await.
#[derive(Debug, Default)]
pub(crate) struct Visibility(RwLock<()>);

impl Visibility {
    /// A commit's rows join their deltas under this.
    pub(crate) fn publish(&self) -> RwLockWriteGuard<'_, ()> {
        // No data behind the lock: a panic while holding it leaves nothing half-changed.
        self.0.write().unwrap_or_else(PoisonError::into_inner)
    }

    /// A snapshot is taken under this.
    pub(crate) fn read(&self) -> RwLockReadGuard<'_, ()> {
        self.0.read().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Every heap table's committed rows as of one moment. Keys are the catalog's table names.
#[derive(Debug, Default)]
pub struct ReadSnapshot {
    tables: BTreeMap<String, SnapshotTable>,
}

/// One heap table in a [`ReadSnapshot`].
#[derive(Debug, Clone)]
pub struct SnapshotTable {
    delta: Arc<TableDelta>,
    /// Rows of each partition's delta the snapshot sees; commits after it append beyond.
    delta_rows: Vec<u64>,
}

impl ReadSnapshot {
    pub(crate) fn new(deltas: &BTreeMap<String, Arc<TableDelta>>) -> ReadSnapshot {
        let tables = deltas.iter().map(|(name, delta)| (name.clone(), SnapshotTable { delta: delta.clone(), delta_rows: delta.partition_row_counts() })).collect();
        ReadSnapshot { tables }
    }

    /// The table named in SQL (names compare without case), if it is a heap table of the
    /// snapshot.
    pub fn table(&self, name: &str) -> Option<&SnapshotTable> {
        self.tables.get(name).or_else(|| self.tables.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, t)| t))
    }
}

impl SnapshotTable {
    /// The table's pages as the snapshot sees them.
    pub fn table(&self) -> &Arc<TableMeta> {
        self.delta.table_meta()
    }

    /// Committed rows still only in the delta that the snapshot sees.
    pub fn delta_row_count(&self) -> u64 {
        self.delta_rows.iter().sum()
    }

    /// The delta rows of one partition the snapshot sees, decoded (projected).
    pub fn decode_delta(&self, partition: usize, projection: &[usize]) -> Result<Option<RecordBatch>, StorageError> {
        let rows = self.delta_rows.get(partition).copied().unwrap_or(0);
        self.delta.decode_prefix(self.delta.table_meta(), partition, projection, rows)
    }
}
