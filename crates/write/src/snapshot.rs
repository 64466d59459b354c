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
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

use arrow::record_batch::RecordBatch;
use flashscan_storage::{StorageError, TableMeta};

use crate::delta::TableDelta;

/// Orders commits' visibility against snapshots (see the module comment). Held for the
/// time it takes to append one commit's rows to its deltas, or to count a snapshot's rows:
/// never across a log flush or an await.
#[derive(Debug, Default)]
pub(crate) struct Visibility {
    lock: RwLock<()>,
    /// The sequence number of the last commit that deleted rows, published under the
    /// write side: a snapshot sees the deletions of commits up to the number it read.
    seq: AtomicU64,
}

impl Visibility {
    /// A commit's rows join their deltas under this.
    pub(crate) fn publish(&self) -> RwLockWriteGuard<'_, ()> {
        // No data behind the lock: a panic while holding it leaves nothing half-changed.
        self.lock.write().unwrap_or_else(PoisonError::into_inner)
    }

    /// A snapshot is taken under this.
    pub(crate) fn read(&self) -> RwLockReadGuard<'_, ()> {
        self.lock.read().unwrap_or_else(PoisonError::into_inner)
    }

    /// The next sequence number, for a commit's deletions; the caller holds `publish`.
    pub(crate) fn next_seq(&self, _published: &RwLockWriteGuard<'_, ()>) -> u64 {
        self.seq.fetch_add(1, Ordering::AcqRel) + 1
    }

    /// The sequence number a snapshot taken now sees up to; the caller holds `read`.
    pub(crate) fn seq(&self, _reading: &RwLockReadGuard<'_, ()>) -> u64 {
        self.seq.load(Ordering::Acquire)
    }
}

/// Every heap table's committed rows as of one moment. Keys are the catalog's table names.
#[derive(Debug, Default)]
pub struct ReadSnapshot {
    tables: BTreeMap<String, SnapshotTable>,
    /// The visibility sequence number: deletions of commits published up to it are seen.
    seq: u64,
}

/// One heap table in a [`ReadSnapshot`].
#[derive(Debug, Clone)]
pub struct SnapshotTable {
    delta: Arc<TableDelta>,
    /// Rows of each partition's delta the snapshot sees; commits after it append beyond.
    delta_rows: Vec<u64>,
    /// Deletions of commits published up to this sequence number are seen.
    seq: u64,
}

impl ReadSnapshot {
    /// Taken under `Visibility::read`, with `seq` the sequence number published last.
    pub(crate) fn new(deltas: &BTreeMap<String, Arc<TableDelta>>, seq: u64) -> ReadSnapshot {
        let tables = deltas.iter().map(|(name, delta)| (name.clone(), SnapshotTable { delta: delta.clone(), delta_rows: delta.partition_row_counts(), seq })).collect();
        ReadSnapshot { tables, seq }
    }

    pub fn seq(&self) -> u64 {
        self.seq
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

    /// Committed rows still only in the delta that the snapshot sees (deleted ones too).
    pub fn delta_row_count(&self) -> u64 {
        self.delta_rows.iter().sum()
    }

    /// Rows deleted (from pages and the delta) as the snapshot sees them.
    pub fn deleted_row_count(&self) -> u64 {
        self.delta.deleted().count_at(self.seq)
    }

    /// The table's rows as the snapshot sees them: pages, plus delta, less deleted.
    pub fn row_count(&self) -> u64 {
        (self.table().row_count + self.delta_row_count()).saturating_sub(self.deleted_row_count())
    }

    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// The table's deleted rows (`seq` says which a snapshot sees).
    pub fn deleted(&self) -> &crate::deleted::DeletedRows {
        self.delta.deleted()
    }

    /// Which delta this snapshot read: a transaction's staged deletes name it
    /// (`Transaction::stage_delete`).
    pub(crate) fn delta(&self) -> &Arc<TableDelta> {
        &self.delta
    }

    /// The delta rows of one partition the snapshot sees, less those it sees deleted,
    /// decoded (projected); with `with_row_ids`, each row's id too (`RowId`).
    pub fn decode_delta(&self, partition: usize, projection: &[usize], with_row_ids: bool) -> Result<Option<(RecordBatch, Vec<u64>)>, StorageError> {
        let rows = self.delta_rows.get(partition).copied().unwrap_or(0);
        let Some(batch) = self.delta.decode_prefix(self.delta.table_meta(), partition, projection, rows)? else { return Ok(None) };
        let lsns = self.delta.lsns(partition, batch.num_rows() as u64);
        debug_assert_eq!(lsns.len(), batch.num_rows(), "one insert LSN per delta row");
        let deleted = self.delta.deleted().delta_deleted_at(&lsns, self.seq);
        let ids = |keep: &dyn Fn(usize) -> bool| -> Vec<u64> {
            if !with_row_ids {
                return Vec::new();
            }
            lsns.iter().enumerate().filter(|(i, _)| keep(*i)).map(|(_, l)| crate::row_id::RowId::in_delta(*l).0).collect()
        };
        if !deleted.iter().any(|d| *d) {
            return Ok(Some((batch, ids(&|_| true))));
        }
        let mask = arrow::array::BooleanArray::from(deleted.iter().map(|d| !d).collect::<Vec<bool>>());
        let kept = arrow::compute::filter_record_batch(&batch, &mask).map_err(|e| StorageError::InvalidArgument(format!("filtering deleted delta rows: {e}")))?;
        Ok(Some((kept, ids(&|i| !deleted[i]))))
    }
}
