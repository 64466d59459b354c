//! The delta: committed rows not yet in a table's pages, per partition, kept as heap pages
//! in memory (SQL Server's delta store). Rows arrive in the page's own row encoding (the
//! bytes the log carries), so a scan decodes the delta with the same decoder as the table's
//! pages, and the checkpoint writes these very pages (sealed with their real id and LSN).
//!
//! It lives only in memory: after a restart, redo of the log from the redo point rebuilds
//! it (`write_path`).

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use arrow::record_batch::RecordBatch;
use flashscan_storage::heap::header::{read_header, seal};
use flashscan_storage::heap::heap_page::{slot_offset, HeapPageBuilder};
use flashscan_storage::{HeapDecoder, Lsn, PageId, StorageError, TableMeta, PAGE_SIZE_BYTES};

use crate::deleted::DeletedRows;
use crate::key_index::TableIndexes;
use crate::error::WriteError;
use crate::row_id::RowId;

/// The page id delta pages are sealed with while in memory (a scan expects it); the
/// checkpoint seals them again with the id of the place it writes them to.
pub const DELTA_PAGE_ID: PageId = PageId(0);

struct PartitionDelta {
    /// Full pages, sealed with `DELTA_PAGE_ID`.
    closed: Vec<Vec<u8>>,
    /// The rows of the page being filled (also in `open`).
    open_rows: Vec<Vec<u8>>,
    /// Their bytes, summed as they come (`memory_bytes` is asked twice per commit).
    open_rows_bytes: usize,
    open: HeapPageBuilder,
    row_count: u64,
    /// Per row, in delta order: the LSN of its insert record (its id, `RowId::in_delta`).
    lsns: Vec<u64>,
    /// Rows on each closed page, in order (the open page holds `open_rows.len()`).
    closed_rows: Vec<u32>,
    /// Insert LSN → the row's position in `lsns` (what an index lookup finds rows by).
    /// aHash, not SipHash: one insert per committed row (SipHash was ~1 % of a keyed
    /// table's singleton insert).
    by_lsn: HashMap<u64, u32, ahash::RandomState>,
}

impl PartitionDelta {
    fn new(column_count: u16) -> PartitionDelta {
        PartitionDelta { closed: Vec::new(), open_rows: Vec::new(), open_rows_bytes: 0, open: HeapPageBuilder::new(column_count), row_count: 0, lsns: Vec::new(), closed_rows: Vec::new(), by_lsn: HashMap::default() }
    }

    fn append(&mut self, row: &[u8], lsn: u64) -> bool {
        if !self.open.try_append(row) {
            if self.open.is_empty() {
                return false;
            }
            let mut page = Vec::with_capacity(PAGE_SIZE_BYTES);
            self.open.take_page(&mut page);
            seal(&mut page, DELTA_PAGE_ID, Lsn(0));
            self.closed.push(page);
            self.closed_rows.push(self.open_rows.len() as u32);
            self.open_rows.clear();
            self.open_rows_bytes = 0;
            if !self.open.try_append(row) {
                return false;
            }
        }
        self.open_rows.push(row.to_vec());
        self.open_rows_bytes += row.len();
        self.row_count += 1;
        self.by_lsn.insert(lsn, self.lsns.len() as u32);
        self.lsns.push(lsn);
        true
    }

    /// The row at `ordinal` (delta order), in the page row encoding.
    fn row(&self, ordinal: usize) -> Option<&[u8]> {
        let mut first = 0usize;
        for (page, rows) in self.closed.iter().zip(&self.closed_rows) {
            let n = *rows as usize;
            if ordinal < first + n {
                return rows_of_page(page).get(ordinal - first).copied();
            }
            first += n;
        }
        self.open_rows.get(ordinal - first).map(|r| r.as_slice())
    }

    /// Every row in delta order, in the page row encoding.
    fn rows(&self) -> Vec<Vec<u8>> {
        let mut out = Vec::with_capacity(self.lsns.len());
        for page in &self.closed {
            out.extend(rows_of_page(page).into_iter().map(|r| r.to_vec()));
        }
        out.extend(self.open_rows.iter().cloned());
        out
    }

    /// Memory the partition holds: its closed pages, the open page and its rows' copies.
    fn memory_bytes(&self) -> u64 {
        debug_assert_eq!(self.open_rows_bytes, self.open_rows.iter().map(|r| r.len()).sum::<usize>());
        let open_page = if self.open_rows.is_empty() { 0 } else { PAGE_SIZE_BYTES };
        (self.closed.len() * PAGE_SIZE_BYTES + open_page + self.open_rows_bytes + self.lsns.len() * 8 + self.by_lsn.len() * 16) as u64
    }

    /// The closed pages and a sealed copy of the open one.
    fn pages(&self, column_count: u16) -> Vec<Vec<u8>> {
        let mut pages = self.closed.clone();
        if !self.open_rows.is_empty() {
            let mut b = HeapPageBuilder::new(column_count);
            for r in &self.open_rows {
                let fitted = b.try_append(r);
                debug_assert!(fitted, "the open page's rows fit one page");
            }
            let mut page = Vec::with_capacity(PAGE_SIZE_BYTES);
            b.take_page(&mut page);
            seal(&mut page, DELTA_PAGE_ID, Lsn(0));
            pages.push(page);
        }
        pages
    }
}

/// One table's delta. Shared by the SQL provider (which scans it) and the writer (which
/// appends to it after each commit).
pub struct TableDelta {
    table: String,
    /// The table as committed when this delta began: the pages its rows sit on top of. A
    /// table's pages change only by a checkpoint, which starts a fresh delta in the same
    /// step, so this pair is always consistent (what a statement's snapshot reads).
    table_meta: Arc<TableMeta>,
    column_count: u16,
    partitions: Mutex<Vec<PartitionDelta>>,
    row_count: AtomicU64,
    /// Rows of the table's pages and of this delta that commits deleted.
    deleted: DeletedRows,
    /// The delta rows the checkpoint that began this delta moved into pages: delta row id
    /// → page row id. A transaction that staged deletes against the previous delta names
    /// its rows through this at commit (`WritePath::commit`).
    moved: Arc<HashMap<u64, u64>>,
    /// This delta's id among every delta of this process: which one a transaction's
    /// staged deletes were made against.
    id: u64,
    /// The table's SQL indexes, handed on from delta to delta (key_index.rs).
    indexes: Arc<TableIndexes>,
    /// The delta the next checkpoint began after this one, once it has: how a transaction
    /// that read rows from this delta names them after any number of checkpoints
    /// (`insert::deletes_now`). Holds only the ids and `moved` maps of the chain, not the
    /// later deltas' rows.
    successor: Arc<OnceLock<Successor>>,
}

/// A link of the chain of deltas one checkpoint after another (`TableDelta::successor`).
#[derive(Debug)]
pub(crate) struct Successor {
    pub(crate) id: u64,
    pub(crate) moved: Arc<HashMap<u64, u64>>,
    pub(crate) successor: Arc<OnceLock<Successor>>,
}

/// Hands out `TableDelta::id`s.
static NEXT_DELTA_ID: AtomicU64 = AtomicU64::new(1);

impl std::fmt::Debug for TableDelta {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "TableDelta({}, {} rows)", self.table, self.row_count())
    }
}

impl TableDelta {
    /// The delta of a table that has no deleted rows (a new or emptied table).
    pub fn new(table: &TableMeta) -> TableDelta {
        TableDelta::with_deleted(table, DeletedRows::default(), HashMap::new(), Arc::new(TableIndexes::of(table)))
    }

    /// The delta of `table` as committed in `db_dir`: its deleted rows file read (and
    /// verified) when it has one.
    pub fn open(table: &TableMeta, db_dir: &Path) -> Result<TableDelta, WriteError> {
        let deleted = match &table.deleted_rows {
            Some(meta) => DeletedRows::from_durable(&flashscan_storage::deleted_rows::read_deleted_rows(db_dir, meta)?),
            None => DeletedRows::default(),
        };
        Ok(TableDelta::with_deleted(table, deleted, HashMap::new(), Arc::new(TableIndexes::of(table))))
    }

    /// The delta that follows `previous` after a checkpoint wrote it into `table`'s pages.
    pub(crate) fn after_checkpoint(table: &TableMeta, previous: &TableDelta, moved: HashMap<u64, u64>) -> TableDelta {
        let deleted = previous.deleted.translated(&moved);
        let next = TableDelta::with_deleted(table, deleted, moved, previous.indexes.clone());
        let linked = previous.successor.set(Successor { id: next.id, moved: next.moved.clone(), successor: next.successor.clone() });
        debug_assert!(linked.is_ok(), "one checkpoint follows a delta");
        let dead = previous.deleted.dead_for_all();
        for index in next.indexes.all() {
            index.after_checkpoint(&next.moved, previous.id, next.id, &dead);
        }
        drop(dead);
        next
    }

    /// The delta that follows `previous` (empty: a checkpoint just wrote it) when only the
    /// table's catalog entry changed (ALTER TABLE … RENAME, SET DEFAULT): the same rows and
    /// row ids, so it keeps the deleted rows and is linked as `previous`'s successor with
    /// nothing moved. Its SQL indexes are built again from `table` when next used.
    pub(crate) fn reopened(table: &TableMeta, previous: &TableDelta) -> TableDelta {
        debug_assert_eq!(previous.row_count(), 0, "a delta is reopened only right after a checkpoint");
        let next = TableDelta::with_deleted(table, previous.deleted.translated(&HashMap::new()), HashMap::new(), Arc::new(TableIndexes::of(table)));
        let linked = previous.successor.set(Successor { id: next.id, moved: next.moved.clone(), successor: next.successor.clone() });
        debug_assert!(linked.is_ok(), "one delta follows another");
        next
    }

    fn with_deleted(table: &TableMeta, deleted: DeletedRows, moved: HashMap<u64, u64>, indexes: Arc<TableIndexes>) -> TableDelta {
        let column_count = table.columns.len() as u16;
        TableDelta {
            table: table.name.clone(),
            table_meta: Arc::new(table.clone()),
            column_count,
            partitions: Mutex::new((0..table.partitions.len()).map(|_| PartitionDelta::new(column_count)).collect()),
            row_count: AtomicU64::new(0),
            deleted,
            moved: Arc::new(moved),
            id: NEXT_DELTA_ID.fetch_add(1, Ordering::Relaxed),
            indexes,
            successor: Arc::new(OnceLock::new()),
        }
    }

    /// The table's SQL indexes.
    pub fn indexes(&self) -> &Arc<TableIndexes> {
        &self.indexes
    }

    /// Where the row inserted at `lsn` is: (partition, position in delta order).
    pub(crate) fn position(&self, lsn: u64) -> Option<(usize, usize)> {
        let parts = self.partitions.lock().ok()?;
        parts.iter().enumerate().find_map(|(p, d)| d.by_lsn.get(&lsn).map(|o| (p, *o as usize)))
    }

    /// The row at `ordinal` of `partition`, in the page row encoding.
    pub(crate) fn row(&self, partition: usize, ordinal: usize) -> Option<Vec<u8>> {
        let parts = self.partitions.lock().ok()?;
        parts.get(partition)?.row(ordinal).map(|r| r.to_vec())
    }

    /// Every row of `partition` and its insert LSN, in delta order.
    pub(crate) fn rows_and_lsns(&self, partition: usize) -> (Vec<Vec<u8>>, Vec<u64>) {
        match self.partitions.lock() {
            Ok(parts) => parts.get(partition).map(|p| (p.rows(), p.lsns.clone())).unwrap_or_default(),
            Err(_) => Default::default(),
        }
    }

    /// Deleted rows of the table's pages and of this delta.
    pub fn deleted(&self) -> &DeletedRows {
        &self.deleted
    }

    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    /// The delta the next checkpoint began, once one has.
    pub(crate) fn successor(&self) -> Option<&Successor> {
        self.successor.get()
    }


    /// Per delta row of `partition`, its page row id once the delta is written as pages
    /// starting at page `first_page` of file `file_id` (the checkpoint's placement): rows
    /// keep their page and slot (`pages` writes these very pages).
    pub(crate) fn placement(&self, partition: usize, file_id: u32, first_page: u64) -> Vec<(u64, u64)> {
        let Ok(parts) = self.partitions.lock() else { return Vec::new() };
        let Some(p) = parts.get(partition) else { return Vec::new() };
        let mut out = Vec::with_capacity(p.lsns.len());
        let mut ordinal = 0usize;
        let page_rows = p.closed_rows.iter().copied().chain(std::iter::once(p.open_rows.len() as u32));
        for (page, rows) in page_rows.enumerate() {
            for slot in 0..rows {
                let page_id = PageId::new(file_id, (first_page + page as u64) as u32);
                if let (Some(lsn), Some(to)) = (p.lsns.get(ordinal), RowId::in_page(page_id, slot)) {
                    out.push((RowId::in_delta(*lsn).0, to.0));
                }
                ordinal += 1;
            }
        }
        out
    }

    /// Insert LSNs of the first `rows` rows of `partition`.
    pub(crate) fn lsns(&self, partition: usize, rows: u64) -> Vec<u64> {
        self.partitions.lock().ok().and_then(|p| p.get(partition).map(|p| p.lsns[..(rows as usize).min(p.lsns.len())].to_vec())).unwrap_or_default()
    }

    pub fn row_count(&self) -> u64 {
        self.row_count.load(Ordering::Acquire)
    }

    /// The table as committed when this delta began (see the field).
    pub fn table_meta(&self) -> &Arc<TableMeta> {
        &self.table_meta
    }

    /// Rows in each partition now: what a snapshot taken now sees
    /// ([`TableDelta::decode_prefix`] reads no further).
    pub fn partition_row_counts(&self) -> Vec<u64> {
        self.partitions.lock().map(|parts| parts.iter().map(|p| p.row_count).collect()).unwrap_or_default()
    }

    /// Memory the delta holds (pages and the open pages' rows): what the write path's
    /// bound (`delta_bytes_max`) counts.
    pub fn memory_bytes(&self) -> u64 {
        self.partitions.lock().map(|parts| parts.iter().map(PartitionDelta::memory_bytes).sum()).unwrap_or(0)
    }

    pub fn partition_count(&self) -> usize {
        self.partitions.lock().map(|p| p.len()).unwrap_or(0)
    }

    /// Adds rows (page row encoding), with their insert records' LSNs, to one partition.
    /// All or nothing: a row that cannot be placed (bigger than a page: only a damaged log
    /// holds one) fails before any is added.
    pub fn append_rows(&self, partition: usize, rows: &[Vec<u8>], lsns: &[u64]) -> Result<(), WriteError> {
        assert_eq!(rows.len(), lsns.len(), "one insert LSN per row");
        let mut parts = self.partitions.lock().map_err(|_| WriteError::InvalidArgument("delta lock poisoned".into()))?;
        let count = parts.len();
        let Some(part) = parts.get_mut(partition) else {
            return Err(WriteError::Corrupt { lsn: 0, what: format!("row for partition {partition} of table {}, which has {count}", self.table) });
        };
        if let Some(r) = rows.iter().find(|r| r.len() + 2 > PAGE_SIZE_BYTES - flashscan_storage::heap::header::PAGE_HEADER_BYTES) {
            return Err(WriteError::Corrupt { lsn: 0, what: format!("a row of {} bytes for table {}: larger than a page", r.len(), self.table) });
        }
        for (r, lsn) in rows.iter().zip(lsns) {
            let placed = part.append(r, *lsn);
            debug_assert!(placed, "rows no larger than a page's free space always place");
        }
        self.row_count.fetch_add(rows.len() as u64, Ordering::AcqRel);
        Ok(())
    }

    /// The partition's rows as sealed heap pages (`DELTA_PAGE_ID`).
    pub fn pages(&self, partition: usize) -> Vec<Vec<u8>> {
        match self.partitions.lock() {
            Ok(parts) => parts.get(partition).map(|p| p.pages(self.column_count)).unwrap_or_default(),
            Err(_) => Vec::new(),
        }
    }

    /// Pages `pages(partition)` returns (closed ones and the open one).
    pub fn page_count(&self, partition: usize) -> usize {
        self.partitions.lock().ok().and_then(|p| p.get(partition).map(|p| p.closed.len() + usize::from(!p.open_rows.is_empty()))).unwrap_or(0)
    }

    pub fn partition_row_count(&self, partition: usize) -> u64 {
        self.partitions.lock().ok().and_then(|p| p.get(partition).map(|p| p.row_count)).unwrap_or(0)
    }

    /// The partition's rows decoded (projected), with the decoder scans use on table pages.
    pub fn decode(&self, table: &TableMeta, partition: usize, projection: &[usize]) -> Result<Option<RecordBatch>, StorageError> {
        let pages = self.pages(partition);
        if pages.is_empty() {
            return Ok(None);
        }
        let mut decoder = HeapDecoder::try_new(table, projection)?;
        for (i, page) in pages.iter().enumerate() {
            decoder.push_page(page, DELTA_PAGE_ID.0, Path::new("(delta in memory)"), (i * PAGE_SIZE_BYTES) as u64)?;
        }
        Ok(Some(decoder.finish()))
    }

    /// The partition's first `rows` rows decoded (projected): a snapshot's view, which
    /// commits appended after it do not change (a partition's rows only ever append).
    pub fn decode_prefix(&self, table: &TableMeta, partition: usize, projection: &[usize], rows: u64) -> Result<Option<RecordBatch>, StorageError> {
        if rows == 0 {
            return Ok(None);
        }
        let Some(batch) = self.decode(table, partition, projection)? else { return Ok(None) };
        let rows = rows as usize;
        debug_assert!(batch.num_rows() >= rows, "a partition's delta only grows: {} rows now, {rows} seen before", batch.num_rows());
        Ok(Some(if batch.num_rows() > rows { batch.slice(0, rows) } else { batch }))
    }
}

/// The rows of a heap page the encoder built (trusted: built in this process), in slot order.
pub(crate) fn rows_of_page(page: &[u8]) -> Vec<&[u8]> {
    let h = read_header(page);
    let n = h.row_count as usize;
    let free = h.free_space_offset as usize;
    (0..n)
        .map(|i| {
            let start = slot_offset(page, i);
            let end = if i + 1 < n { slot_offset(page, i + 1) } else { free };
            &page[start..end]
        })
        .collect()
}
