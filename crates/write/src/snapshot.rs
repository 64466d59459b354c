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
use crate::error::WriteError;
use crate::key_index::{decode_rows, KeyIndex, KeyLookup};
use crate::own_writes::{OwnChanges, OwnRows};
use crate::row_id::RowId;
use flashscan_storage::heap::heap_page::HeapPageRows;
use flashscan_storage::{verify_page, PageId, PAGE_SIZE_BYTES};
use std::path::{Path, PathBuf};

/// The file (catalog path) and offset of page `page` of `table`, if one of its runs holds it.
fn locate(table: &TableMeta, page: PageId) -> Option<(&str, u64)> {
    table.partitions.iter().flat_map(|p| &p.runs).find_map(|run| {
        let first = run.first_page_id;
        (page.0 >= first && page.0 < first + run.page_count as u64).then(|| (run.file.as_str(), run.offset_bytes + (page.0 - first) * PAGE_SIZE_BYTES as u64))
    })
}

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

/// How long a transaction's snapshot lasts (PostgreSQL's levels; docs/architecture.md,
/// "Transactions and snapshots").
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Isolation {
    /// A snapshot per statement; a writer that meets a row changed since reads it again.
    #[default]
    ReadCommitted,
    /// One snapshot for the whole transaction, taken by its first statement; a writer that
    /// meets a row another transaction changed since then fails with 40001.
    RepeatableRead,
}

impl Isolation {
    /// As PostgreSQL's `SHOW transaction_isolation` prints it.
    pub fn name(self) -> &'static str {
        match self {
            Isolation::ReadCommitted => "read committed",
            Isolation::RepeatableRead => "repeatable read",
        }
    }
}

/// Every heap table's committed rows as of one moment. Keys are the catalog's table names.
#[derive(Debug, Default, Clone)]
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
    /// The reading transaction's own changes of the table (own_writes.rs), if any.
    own: Option<Arc<OwnRows>>,
}

impl ReadSnapshot {
    /// Taken under `Visibility::read`, with `seq` the sequence number published last.
    pub(crate) fn new(deltas: &BTreeMap<String, Arc<TableDelta>>, seq: u64) -> ReadSnapshot {
        let tables = deltas.iter().map(|(name, delta)| (name.clone(), SnapshotTable { delta: delta.clone(), delta_rows: delta.partition_row_counts(), seq, own: None })).collect();
        ReadSnapshot { tables, seq }
    }

    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// Lays a transaction's own changes over the committed rows (own_writes.rs).
    pub(crate) fn lay_over(&mut self, own: &OwnChanges) -> Result<(), WriteError> {
        for (key, table) in self.tables.iter_mut() {
            table.own = own.view_for(key, &table.delta)?.map(Arc::new);
        }
        Ok(())
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

    /// Rows deleted (from pages and the delta) as the snapshot sees them, the reading
    /// transaction's own deletes included.
    pub fn deleted_row_count(&self) -> u64 {
        self.delta.deleted().count_at(self.seq) + self.own.as_ref().map_or(0, |o| o.deleted.len() as u64)
    }

    /// Rows the reading transaction staged and still has (own_writes.rs).
    pub fn own_row_count(&self) -> u64 {
        self.own.as_ref().map_or(0, |o| o.row_count())
    }

    /// Whether a scan has rows beyond the pages to read: committed delta rows, or the
    /// reading transaction's own.
    pub fn has_rows_beyond_pages(&self) -> bool {
        self.delta_row_count() > 0 || self.own_row_count() > 0
    }

    /// The table's rows as the snapshot sees them: pages, plus delta, plus the reading
    /// transaction's own, less deleted.
    pub fn row_count(&self) -> u64 {
        (self.table().row_count + self.delta_row_count() + self.own_row_count()).saturating_sub(self.deleted_row_count())
    }

    /// Whether rows of pages are deleted as the snapshot sees them (by commits, or by the
    /// reading transaction): a scan of the pages must then skip some.
    pub fn has_deleted_page_rows(&self) -> bool {
        self.delta.deleted().has_page_rows() || self.own.as_ref().is_some_and(|o| o.deletes_page_rows())
    }

    /// The slots of page `page` deleted as the snapshot sees them, into `slots` (cleared
    /// first); whether any.
    pub fn page_deleted_slots(&self, page: u64, slots: &mut Vec<u16>) -> bool {
        let committed = self.delta.deleted().page_slots_at(page, self.seq, slots);
        let own = self.own.as_ref().is_some_and(|o| o.page_slots(page, slots));
        committed || own
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

    /// The id of the delta this snapshot read (an index is used only for a delta it
    /// covers: `KeyIndex::covers`).
    pub fn delta_id(&self) -> u64 {
        self.delta.id()
    }

    /// The table's SQL indexes.
    pub fn indexes(&self) -> Vec<Arc<KeyIndex>> {
        self.delta.indexes().all()
    }

    /// The rows the snapshot sees among those `index` enters under `keys` (full keys, or
    /// key prefixes with `prefix`), decoded (projected), each with its row id; `None` when
    /// the index is not built or does not cover this snapshot's delta (scan instead).
    /// Rows come out in no particular order; the caller evaluates its predicate again.
    /// Whether the snapshot sees the row `id` names: a delta row it counts and does not see
    /// deleted, or a row of a page its table has and it does not see deleted.
    fn sees(&self, id: u64) -> bool {
        let row = RowId(id);
        if let Some(own) = &self.own {
            if row.is_staged() {
                return own.has_staged(id);
            }
            if own.deletes(id) {
                return false;
            }
        }
        if let Some(lsn) = row.delta_lsn() {
            let Some((partition, ordinal)) = self.delta.position(lsn) else { return false };
            let counted = self.delta_rows.get(partition).copied().unwrap_or(0);
            (ordinal as u64) < counted && !self.delta.deleted().delta_deleted_at(&[lsn], self.seq)[0]
        } else if let (Some(page), Some(slot)) = (row.page(), row.slot()) {
            locate(self.table(), page).is_some() && !self.delta.deleted().page_slot_deleted_at(page.0, slot, self.seq)
        } else {
            false
        }
    }

    /// Whether the reading transaction has changes of its own in this table (rows it
    /// inserted or deleted, not committed): an index holds committed rows only.
    pub fn has_own_changes(&self) -> bool {
        self.own.is_some()
    }

    pub fn rows_by_index(&self, index: &KeyIndex, lookup: &KeyLookup, ids_max: usize, projection: &[usize], db_dir: &Path) -> Result<Option<(RecordBatch, Vec<u64>)>, WriteError> {
        if !index.covers(self.delta.id()) {
            return Ok(None);
        }
        let mut ids = match lookup {
            // A snapshot sees at most one row under a key of a unique index (without a
            // NULL part, which can match nothing): the newest entries are tried first and
            // the first the snapshot sees ends the key's search. A hot key updated a
            // thousand times since the last checkpoint (pgbench's branches) costs one
            // check, not a thousand.
            KeyLookup::Keys { keys, prefix: false } if index.is_unique() => {
                keys.iter().filter(|k| !index.key_has_null(k)).filter_map(|k| index.ids_of(k).into_iter().rev().find(|id| self.sees(*id))).collect()
            }
            // More rows than `ids_max`: the caller scans instead.
            _ => match index.candidates_of(lookup, ids_max) {
                Some(ids) => ids,
                None => return Ok(None),
            },
        };
        ids.sort_unstable();
        ids.dedup();
        if let Some(own) = &self.own {
            ids.retain(|id| !own.deletes(*id));
        }
        let mut rows: Vec<Vec<u8>> = Vec::new();
        let mut found: Vec<u64> = Vec::new();
        // The reading transaction's own rows under the keys (an index holds committed rows only).
        if let Some(own) = &self.own {
            for (id, row) in own.rows_by_index(self.table(), index, lookup)? {
                rows.push(row.to_vec());
                found.push(id);
            }
        }
        // Page rows grouped by page (ids sort by page, then slot).
        let mut pages: Vec<(PageId, Vec<(u16, u64)>)> = Vec::new();
        for id in ids {
            let row = RowId(id);
            if let Some(lsn) = row.delta_lsn() {
                let Some((partition, ordinal)) = self.delta.position(lsn) else { continue };
                if ordinal as u64 >= self.delta_rows.get(partition).copied().unwrap_or(0) {
                    continue;
                }
                if self.delta.deleted().delta_deleted_at(&[lsn], self.seq)[0] {
                    continue;
                }
                if let Some(bytes) = self.delta.row(partition, ordinal) {
                    rows.push(bytes);
                    found.push(id);
                }
            } else if let (Some(page), Some(slot)) = (row.page(), row.slot()) {
                match pages.last_mut() {
                    Some((p, slots)) if *p == page => slots.push((slot, id)),
                    _ => pages.push((page, vec![(slot, id)])),
                }
            }
        }
        if !pages.is_empty() {
            let table = self.table();
            let located: Vec<(PageId, PathBuf, u64, Vec<(u16, u64)>)> = pages.into_iter().filter_map(|(page, slots)| locate(table, page).map(|(file, offset)| (page, db_dir.join(file), offset, slots))).collect();
            let mut deleted_slots = Vec::new();
            let mut take_rows = |page: PageId, path: &Path, offset: u64, slots: &[(u16, u64)], bytes: &[u8]| -> Result<(), WriteError> {
                verify_page(bytes, page, path, offset)?;
                let page_rows = HeapPageRows::new(bytes, page, path, offset)?;
                let any_deleted = self.delta.deleted().page_slots_at(page.0, self.seq, &mut deleted_slots);
                for (slot, id) in slots {
                    if any_deleted && deleted_slots.contains(slot) {
                        continue;
                    }
                    rows.push(page_rows.row(*slot)?.to_vec());
                    found.push(*id);
                }
                Ok(())
            };
            // Pages are kept in the buffer pool and read there: opening a reader (files, an
            // I/O engine and its buffers) per lookup was a third of the server's CPU under
            // prepared key lookups (docs/benchmarks.md, session 21). Pages not there are read
            // with one reader and installed (verified) for the next lookup.
            let pool = flashscan_buffer::BufferPool::global();
            let mut missing = Vec::new();
            for located in located {
                let (page, path, offset, slots) = &located;
                let key = if offset % PAGE_SIZE_BYTES as u64 == 0 {
                    let file_id = pool.register_file(path).map_err(|e| WriteError::Storage(e.into()))?;
                    Some(flashscan_buffer::PageKey::new(file_id, offset / PAGE_SIZE_BYTES as u64))
                } else {
                    None
                };
                match key.and_then(|k| pool.get_resident(k)) {
                    Some(guard) => take_rows(*page, path, *offset, slots, &guard.data()[..PAGE_SIZE_BYTES])?,
                    None => missing.push((located, key)),
                }
            }
            let paths = missing.iter().map(|((_, path, _, _), _)| path.clone());
            if let Some(mut reader) = flashscan_storage::page_path::FileReader::open_distinct(paths)? {
                for ((page, path, offset, slots), key) in &missing {
                    let file_index = reader.file_index(path)?;
                    let bytes = reader.read(file_index, *offset, PAGE_SIZE_BYTES as u64)?;
                    take_rows(*page, path, *offset, slots, &bytes)?;
                    if let Some(key) = key {
                        pool.install(*key, &bytes, |b| verify_page(b, *page, path, *offset).map(drop))?;
                    }
                }
            }
        }
        let batch = decode_rows(self.table(), projection, rows.iter().map(|r| r.as_slice()))?;
        Ok(Some((batch, found)))
    }

    /// The delta rows of one partition the snapshot sees, less those it sees deleted, then
    /// the reading transaction's own rows of the partition, decoded (projected); with
    /// `with_row_ids`, each row's id too (`RowId`).
    pub fn decode_delta(&self, partition: usize, projection: &[usize], with_row_ids: bool) -> Result<Option<(RecordBatch, Vec<u64>)>, StorageError> {
        let committed = self.decode_committed_delta(partition, projection, with_row_ids)?;
        let own_rows = self.own.as_ref().and_then(|o| o.rows.get(partition)).filter(|r| !r.is_empty());
        let Some(own_rows) = own_rows else { return Ok(committed) };
        let own_batch = crate::key_index::decode_rows(self.table(), projection, own_rows.iter().map(|(_, r)| &r[..])).map_err(|e| match e {
            WriteError::Storage(e) => e,
            other => StorageError::InvalidArgument(format!("decoding the transaction's own rows: {other}")),
        })?;
        let own_ids = if with_row_ids { own_rows.iter().map(|(id, _)| *id).collect() } else { Vec::new() };
        let Some((batch, mut ids)) = committed else { return Ok(Some((own_batch, own_ids))) };
        let both = arrow::compute::concat_batches(&batch.schema(), [&batch, &own_batch]).map_err(|e| StorageError::InvalidArgument(format!("the delta's rows and the transaction's own: {e}")))?;
        ids.extend(own_ids);
        Ok(Some((both, ids)))
    }

    /// The committed delta rows of one partition the snapshot sees, less those it sees
    /// deleted (by commits or by the reading transaction).
    fn decode_committed_delta(&self, partition: usize, projection: &[usize], with_row_ids: bool) -> Result<Option<(RecordBatch, Vec<u64>)>, StorageError> {
        let rows = self.delta_rows.get(partition).copied().unwrap_or(0);
        let Some(batch) = self.delta.decode_prefix(self.delta.table_meta(), partition, projection, rows)? else { return Ok(None) };
        let lsns = self.delta.lsns(partition, batch.num_rows() as u64);
        debug_assert_eq!(lsns.len(), batch.num_rows(), "one insert LSN per delta row");
        let mut deleted = self.delta.deleted().delta_deleted_at(&lsns, self.seq);
        if let Some(own) = self.own.as_ref().filter(|o| !o.deleted.is_empty()) {
            for (d, lsn) in deleted.iter_mut().zip(&lsns) {
                *d = *d || own.deletes(crate::row_id::RowId::in_delta(*lsn).0);
            }
        }
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
