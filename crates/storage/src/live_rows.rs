//! Which rows of a heap table's pages are live: the one place every reader of pages asks
//! (`rebuild` through `heap::reader::read_partition_live`, `flashscan scan`, `lookup`,
//! `index create`, and SQL's scan with its snapshot's deletes).
//!
//! - [`DeletedRowSet`]: the table's deleted rows file, read once and shared (`Arc`), asked
//!   page by page. Row ids sort by (file, page, slot), so a page's deleted rows are one
//!   range of the sorted ids, found by binary search: a scan learns that a page has none
//!   (and may read it in place) for two searches, and a COUNT(*) subtracts their number
//!   without decoding a row.
//! - [`LiveRows`]: the keep flags of the rows decoded since the last batch, page by page,
//!   and the filter that takes the deleted ones out of the batch. No flag is kept while no
//!   row is deleted, so a table without deletes pays a counter per page.
//! - [`LiveHeapDecoder`]: `HeapDecoder` and the two together: batches of live rows.

use std::path::Path;
use std::sync::Arc;

use arrow::array::{BooleanArray, RecordBatch};
use arrow::error::ArrowError;

use crate::deleted_rows::read_deleted_rows;
use crate::error::StorageError;
use crate::heap::decoder::HeapDecoder;
use crate::heap::PageId;
use crate::row_id::RowId;
use crate::table_meta::TableMeta;

/// A table's deleted page rows: sorted row ids, shared by every worker of a scan.
#[derive(Debug, Clone, Default)]
pub struct DeletedRowSet {
    /// Strictly ascending (asserted when built; the file's reader checks it on disk).
    ids: Arc<[u64]>,
}

impl DeletedRowSet {
    /// The set of `ids`, which must be strictly ascending.
    pub fn from_sorted(ids: Vec<u64>) -> DeletedRowSet {
        assert!(ids.windows(2).all(|w| w[0] < w[1]), "deleted row ids strictly ascending");
        DeletedRowSet { ids: ids.into() }
    }

    /// The deleted rows of `table` (empty when it has no deleted rows file), its file
    /// relative to the database directory `db_dir`. A file of more rows than the table
    /// holds is refused.
    pub fn of_table(db_dir: &Path, table: &TableMeta) -> Result<DeletedRowSet, StorageError> {
        let Some(meta) = &table.deleted_rows else {
            return Ok(DeletedRowSet::default());
        };
        // Checked by the reader: strictly ascending, as many as the catalog says.
        let ids = read_deleted_rows(db_dir, meta)?;
        if ids.len() as u64 > table.row_count {
            return Err(StorageError::CatalogCorrupt {
                path: db_dir.join(&meta.path),
                reason: format!("table {} lists {} deleted rows but holds {}", table.name, ids.len(), table.row_count),
            });
        }
        Ok(DeletedRowSet::from_sorted(ids))
    }

    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// How many rows are deleted.
    pub fn len(&self) -> u64 {
        self.ids.len() as u64
    }

    /// The deleted rows of page `page`: two binary searches.
    pub fn on_page(&self, page: PageId) -> DeletedOnPage<'_> {
        let Some(range) = RowId::range_of_page(page) else {
            // A page whose id no row id holds has no row in the file.
            return DeletedOnPage { ids: &[] };
        };
        let start = self.ids.partition_point(|&id| id < range.start);
        let end = start + self.ids[start..].partition_point(|&id| id < range.end);
        DeletedOnPage { ids: &self.ids[start..end] }
    }

    /// Whether the row in `slot` of page `page` is deleted.
    pub fn contains(&self, page: PageId, slot: u16) -> bool {
        RowId::in_page(page, slot as u32).is_some_and(|id| self.ids.binary_search(&id.0).is_ok())
    }
}

/// One page's deleted rows (ascending slots).
#[derive(Debug, Clone, Copy)]
pub struct DeletedOnPage<'a> {
    ids: &'a [u64],
}

impl DeletedOnPage<'_> {
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// How many of the page's rows are deleted.
    pub fn count(&self) -> u32 {
        self.ids.len() as u32
    }

    /// The deleted slots, ascending.
    pub fn slots(&self) -> impl Iterator<Item = u16> + '_ {
        // Every id of the range is a page row's: the slot is there.
        self.ids.iter().map(|&id| RowId(id).slot().unwrap_or(u16::MAX))
    }

    /// The live rows of the page when it holds `rows` rows; an error when the deleted rows
    /// name a slot the page does not hold (the file or the page is damaged).
    pub fn live_rows(&self, rows: u32) -> Result<u32, DeletedSlotBeyondPage> {
        // Ascending: the last slot is the largest.
        match self.slots().last() {
            Some(slot) if slot as u32 >= rows => Err(DeletedSlotBeyondPage { slot, rows }),
            _ => Ok(rows - self.count()),
        }
    }
}

/// The deleted rows name a slot a page does not hold: the deleted rows file and the page
/// disagree, so one of them is damaged. `at` gives it the page's place.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the deleted rows name slot {slot} of a page of {rows} rows")]
pub struct DeletedSlotBeyondPage {
    pub slot: u16,
    pub rows: u32,
}

impl DeletedSlotBeyondPage {
    pub fn at(self, file: &Path, page_id: u64, offset_bytes: u64) -> StorageError {
        StorageError::PageCorrupt {
            file: file.to_path_buf(),
            page_id,
            offset_bytes,
            reason: format!("the table's deleted rows name slot {} but the page holds {} rows: the deleted rows file or the page is damaged", self.slot, self.rows),
        }
    }
}

/// Per row decoded since the last batch, whether it is live, page by page.
#[derive(Debug, Default)]
pub struct LiveRows {
    /// Rows pushed since the last batch.
    rows: usize,
    /// One flag per row pushed since the last batch, once one of them is deleted (until
    /// then every row is live and no flag is kept).
    keep: Vec<bool>,
    any_deleted: bool,
}

impl LiveRows {
    /// A page of `rows` rows (decoded in slot order: row i is slot i) whose deleted slots
    /// are `deleted_slots` (any order; a slot named twice counts once). Returns its live rows.
    pub fn push_page(&mut self, rows: u32, deleted_slots: impl IntoIterator<Item = u16>) -> Result<u32, DeletedSlotBeyondPage> {
        let mut deleted_slots = deleted_slots.into_iter().peekable();
        if deleted_slots.peek().is_none() {
            if self.any_deleted {
                self.keep.resize(self.keep.len() + rows as usize, true);
            }
            self.rows += rows as usize;
            return Ok(rows);
        }
        if !self.any_deleted {
            // The rows before this page were all live.
            debug_assert!(self.keep.is_empty());
            self.keep.resize(self.rows, true);
            self.any_deleted = true;
        }
        let start = self.keep.len();
        self.keep.resize(start + rows as usize, true);
        let mut deleted_count = 0u32;
        for slot in deleted_slots {
            if slot as u32 >= rows {
                // The flags of this page are taken back, so a caller that goes on after
                // the error still has one flag per row pushed.
                self.keep.truncate(start);
                return Err(DeletedSlotBeyondPage { slot, rows });
            }
            let keep = &mut self.keep[start + slot as usize];
            deleted_count += u32::from(std::mem::replace(keep, false));
        }
        self.rows += rows as usize;
        debug_assert_eq!(self.keep.len(), self.rows);
        Ok(rows - deleted_count)
    }

    /// `batch`, the rows pushed since the last batch, without its deleted rows (as is when
    /// none is); the flags start over.
    pub fn filter(&mut self, batch: RecordBatch) -> Result<RecordBatch, ArrowError> {
        let rows = std::mem::take(&mut self.rows);
        let keep = std::mem::take(&mut self.keep);
        if !std::mem::take(&mut self.any_deleted) {
            debug_assert_eq!(rows, batch.num_rows(), "one row pushed per decoded row");
            return Ok(batch);
        }
        if keep.len() != batch.num_rows() {
            return Err(ArrowError::InvalidArgumentError(format!("{} live flags for a batch of {} rows", keep.len(), batch.num_rows())));
        }
        arrow::compute::filter_record_batch(&batch, &BooleanArray::from(keep))
    }

    /// Forgets the rows pushed since the last batch (a batch dropped halfway).
    pub fn clear(&mut self) {
        self.rows = 0;
        self.keep.clear();
        self.any_deleted = false;
    }
}

/// A heap decoder that hands on live rows only: pages pushed are decoded whole, their
/// deleted rows dropped from each batch.
pub struct LiveHeapDecoder {
    decoder: HeapDecoder,
    deleted: DeletedRowSet,
    live: LiveRows,
    /// Rows decoded and dropped as deleted, since the last `take_deleted_rows_skipped`.
    deleted_rows_skipped: u64,
}

impl LiveHeapDecoder {
    pub fn new(decoder: HeapDecoder, deleted: DeletedRowSet) -> LiveHeapDecoder {
        LiveHeapDecoder { decoder, deleted, live: LiveRows::default(), deleted_rows_skipped: 0 }
    }

    pub fn deleted(&self) -> &DeletedRowSet {
        &self.deleted
    }

    /// Verifies and decodes one page (`HeapDecoder::push_page`); returns its live rows.
    pub fn push_page(&mut self, page: &[u8], expected_page_id: u64, file: &Path, offset_bytes: u64) -> Result<u32, StorageError> {
        let rows = self.decoder.push_page(page, expected_page_id, file, offset_bytes)?;
        let on_page = self.deleted.on_page(PageId(expected_page_id));
        let live = match self.live.push_page(rows, on_page.slots()) {
            Ok(live) => live,
            Err(e) => {
                // The page's decoded rows have no flags: the batch is dropped with the scan.
                self.discard();
                return Err(e.at(file, expected_page_id, offset_bytes));
            }
        };
        self.deleted_rows_skipped += (rows - live) as u64;
        Ok(live)
    }

    /// Rows decoded since the last batch, deleted ones included (what the batch costs).
    pub fn rows_buffered(&self) -> usize {
        self.decoder.rows_buffered()
    }

    /// The live rows pushed since the last call, as one batch.
    pub fn finish(&mut self) -> Result<RecordBatch, ArrowError> {
        let batch = self.decoder.finish();
        self.live.filter(batch)
    }

    /// Drops the rows pushed since the last batch (left by a chunk that failed halfway).
    pub fn discard(&mut self) {
        drop(self.decoder.finish());
        self.live.clear();
    }

    /// Deleted rows decoded and dropped since the last call.
    pub fn take_deleted_rows_skipped(&mut self) -> u64 {
        std::mem::take(&mut self.deleted_rows_skipped)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use arrow::array::{Array, UInt32Array};
    use arrow::datatypes::{DataType, Field, Schema};
    use proptest::prelude::*;

    use super::*;

    /// Pages (file, index, rows) and a random subset of their rows deleted.
    fn pages_and_deletes() -> impl Strategy<Value = (Vec<(PageId, u32)>, Vec<u64>)> {
        let page = (0u32..3, 0u32..40, 0u32..60).prop_map(|(file, index, rows)| (PageId::new(file, index), rows));
        prop::collection::vec(page, 0..12).prop_flat_map(|mut pages| {
            pages.sort_unstable_by_key(|(p, _)| *p);
            pages.dedup_by_key(|(p, _)| *p);
            let rows: Vec<u64> = pages.iter().flat_map(|&(p, n)| (0..n).map(move |s| RowId::in_page(p, s).unwrap().0)).collect();
            let n = rows.len();
            (Just(pages), prop::collection::vec(any::<bool>(), n).prop_map(move |pick| rows.iter().zip(pick).filter(|(_, d)| *d).map(|(id, _)| *id).collect::<Vec<u64>>()))
        })
    }

    fn batch_of(values: Vec<u32>) -> RecordBatch {
        let schema = Arc::new(Schema::new(vec![Field::new("v", DataType::UInt32, false)]));
        RecordBatch::try_new(schema, vec![Arc::new(UInt32Array::from(values))]).unwrap()
    }

    proptest! {
        /// Page by page, the set's answers and the filter agree with a naive filter of
        /// every row id against the set, batches cut at random pages.
        #[test]
        fn agrees_with_a_naive_filter((pages, deleted) in pages_and_deletes(), cuts in prop::collection::vec(any::<bool>(), 12)) {
            let naive: BTreeSet<u64> = deleted.iter().copied().collect();
            let set = DeletedRowSet::from_sorted(deleted.clone());
            prop_assert_eq!(set.len(), naive.len() as u64);
            let mut live = LiveRows::default();
            let (mut values, mut kept, mut expected) = (Vec::new(), Vec::new(), Vec::new());
            for (i, &(page, rows)) in pages.iter().enumerate() {
                let ids: Vec<u64> = (0..rows).map(|s| RowId::in_page(page, s).unwrap().0).collect();
                let naive_deleted: Vec<u64> = ids.iter().copied().filter(|id| naive.contains(id)).collect();
                let on_page = set.on_page(page);
                prop_assert_eq!(on_page.count() as usize, naive_deleted.len());
                prop_assert_eq!(on_page.is_empty(), naive_deleted.is_empty());
                prop_assert_eq!(on_page.live_rows(rows), Ok(rows - naive_deleted.len() as u32));
                for (slot, id) in ids.iter().enumerate() {
                    prop_assert_eq!(set.contains(page, slot as u16), naive.contains(id));
                }
                let live_count = live.push_page(rows, on_page.slots()).unwrap();
                prop_assert_eq!(live_count as usize, rows as usize - naive_deleted.len());
                values.extend(ids.iter().map(|id| *id as u32));
                expected.extend(ids.iter().filter(|id| !naive.contains(id)).map(|id| *id as u32));
                if cuts[i] {
                    kept.extend(live.filter(batch_of(std::mem::take(&mut values))).unwrap().column(0).as_any().downcast_ref::<UInt32Array>().unwrap().values().iter().copied());
                }
            }
            kept.extend(live.filter(batch_of(values)).unwrap().column(0).as_any().downcast_ref::<UInt32Array>().unwrap().values().iter().copied());
            prop_assert_eq!(kept, expected);
        }
    }

    #[test]
    fn a_slot_the_page_does_not_hold_is_an_error() {
        let page = PageId::new(1, 7);
        let set = DeletedRowSet::from_sorted(vec![RowId::in_page(page, 2).unwrap().0, RowId::in_page(page, 9).unwrap().0]);
        assert_eq!(set.on_page(page).live_rows(10), Ok(8));
        assert_eq!(set.on_page(page).live_rows(9), Err(DeletedSlotBeyondPage { slot: 9, rows: 9 }));
        let mut live = LiveRows::default();
        assert_eq!(live.push_page(3, []), Ok(3));
        assert_eq!(live.push_page(9, set.on_page(page).slots()), Err(DeletedSlotBeyondPage { slot: 9, rows: 9 }));
        // The failed page left no flags: the three rows before it are still whole.
        assert_eq!(live.filter(batch_of(vec![1, 2, 3])).unwrap().num_rows(), 3);
        // Named twice: counted once.
        assert_eq!(live.push_page(4, [1, 1, 3]), Ok(2));
        assert_eq!(live.filter(batch_of(vec![0, 1, 2, 3])).unwrap().column(0).as_any().downcast_ref::<UInt32Array>().unwrap().values().to_vec(), vec![0, 2]);
    }

    #[test]
    fn neighbouring_pages_and_files_keep_their_own_rows() {
        let (a, b, c) = (PageId::new(0, 5), PageId::new(0, 6), PageId::new(1, 5));
        let id = |p, s| RowId::in_page(p, s).unwrap().0;
        let set = DeletedRowSet::from_sorted(vec![id(a, 4095), id(b, 0), id(c, 0)]);
        assert_eq!(set.on_page(a).slots().collect::<Vec<_>>(), vec![4095]);
        assert_eq!(set.on_page(b).slots().collect::<Vec<_>>(), vec![0]);
        assert_eq!(set.on_page(c).slots().collect::<Vec<_>>(), vec![0]);
        assert!(set.on_page(PageId::new(0, 7)).is_empty());
        assert!(set.on_page(PageId::new(1 << 21, 0)).is_empty(), "a page beyond what row ids hold has none");
    }
}

/// Where each row group of a column store sits among row ids: its first virtual page
/// (`RowId::row_group_first_page`), by partition, then by row group as the catalog lists
/// them. A row group's ordinal counts the row groups of its file before it in the
/// catalog's order (row groups are only ever appended to a file); None for one whose file
/// id or ordinal does not fit a row id (its rows cannot be deleted or updated).
pub fn row_group_first_pages(table: &TableMeta) -> Vec<Vec<Option<PageId>>> {
    let mut per_file: std::collections::HashMap<&str, u32> = std::collections::HashMap::new();
    table
        .partitions
        .iter()
        .map(|p| {
            p.row_groups
                .iter()
                .map(|g| {
                    let ordinal = per_file.entry(g.file.as_str()).or_insert(0);
                    let this = *ordinal;
                    *ordinal += 1;
                    let file_id = table.files.iter().find(|f| f.path == g.file)?.file_id;
                    RowId::row_group_first_page(file_id, this)
                })
                .collect()
        })
        .collect()
}

/// The rows of a row group (`first_page` its first virtual page, `rows` rows) that
/// `deleted_slots(page, out)` — a deleted rows set or a snapshot — says are deleted,
/// ascending. A deleted slot past the row group's last row is corrupt.
pub fn deleted_rows_of_group(first_page: PageId, rows: u64, deleted_slots: &mut dyn FnMut(PageId, &mut Vec<u16>) -> bool) -> Result<Vec<u32>, String> {
    let mut out = Vec::new();
    let mut slots = Vec::new();
    let pages = rows.div_ceil(crate::row_id::SLOTS_PER_PAGE);
    for v in 0..pages {
        let page = PageId::new(first_page.file_id(), first_page.page_index_in_file() + v as u32);
        if !deleted_slots(page, &mut slots) {
            continue;
        }
        slots.sort_unstable();
        for &slot in &slots {
            let row = v * crate::row_id::SLOTS_PER_PAGE + slot as u64;
            if row >= rows {
                return Err(format!("a deleted row {row} of a row group of {rows} rows"));
            }
            out.push(row as u32);
        }
    }
    out.dedup();
    Ok(out)
}

impl DeletedRowSet {
    /// `deleted_rows_of_group`'s question asked of this set.
    pub fn slots_on_page(&self, page: PageId, out: &mut Vec<u16>) -> bool {
        out.clear();
        out.extend(self.on_page(page).slots());
        !out.is_empty()
    }
}
