//! A row's id: what DELETE and UPDATE name a row by (in the log, in a transaction's write
//! set, in the deleted rows file) and what a scan reports for it (PostgreSQL's `ctid`).
//!
//! Three kinds, told apart by the top bits:
//! - a row on a table page: `0 · file id (20 bits) · page index in the file (31 bits) ·
//!   slot (12 bits)`. Pages are only ever appended to a file (the checkpoint) or written
//!   into new files (load, rebuild), so this id holds for the row's life;
//! - a row still only in the delta: `10 · LSN of its insert record (62 bits)`. Its place in
//!   the delta depends on the order commits published in, which redo does not repeat, so
//!   the log names it by its own record instead. The checkpoint that moves it into a page
//!   carries every delete of it over to the page id (`TableDelta::moved`). (An LSN is a
//!   byte position of the log: 2^62 bytes is beyond any log, so the bit below the top one
//!   was always 0 in ids logged before the third kind existed.)
//!   A column store row is named the same way, on a *virtual* page: row `r` of the
//!   `k`-th row group of file `f` (row groups of a file counted in the catalog's order) is
//!   slot `r % 4096` of page `k · 2^16 + r / 4096` of file `f` (`in_row_group`): up to
//!   2^15 row groups per file and 2^28 rows per row group. Every structure keyed by page
//!   and slot — a delta's deleted rows, the deleted rows file, a transaction's deletes —
//!   so takes column store rows unchanged; a table is one format, so an id is never read
//!   as the other kind;
//! - a row the reading transaction staged and has not committed: `11 · staging step
//!   (24 bits) · the row's place among the step's rows (38 bits)`. Such an id names a row
//!   for the statements of its own transaction only (a transaction reads its own writes):
//!   it is never logged nor stored, and means nothing to another transaction.

use crate::heap::PageId;

const DELTA_BIT: u64 = 1 << 63;
/// With `DELTA_BIT`: a row staged by the reading transaction (see the module comment).
const STAGED_BIT: u64 = 1 << 62;
const STEP_BITS: u32 = 24;
const PLACE_BITS: u32 = 38;
const _: () = assert!(2 + STEP_BITS + PLACE_BITS == 64);
const SLOT_BITS: u32 = 12;
/// Rows of one (real or virtual) page a row id can name.
pub const SLOTS_PER_PAGE: u64 = 1 << SLOT_BITS;
const PAGE_BITS: u32 = 31;
const FILE_BITS: u32 = 20;
const _: () = assert!(1 + FILE_BITS + PAGE_BITS + SLOT_BITS == 64);
/// A column store row's place in its row group (`in_row_group`): far above
/// `ROW_GROUP_ROWS_MAX`.
pub const GROUP_ROW_BITS: u32 = 28;
/// Row groups of one file a column store row id can name.
pub const GROUP_ORDINAL_BITS: u32 = PAGE_BITS + SLOT_BITS - GROUP_ROW_BITS;
const _: () = assert!((1usize << GROUP_ROW_BITS) >= crate::columnstore::ROW_GROUP_ROWS_MAX);
const _: () = assert!(GROUP_ROW_BITS > SLOT_BITS && GROUP_ORDINAL_BITS >= 12);
/// Slots a page can hold: an 8 KiB page of rows at least 2 bytes each plus their 2-byte slots.
const _: () = assert!(crate::heap::PAGE_SIZE_BYTES / 4 <= 1 << SLOT_BITS);

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RowId(pub u64);

impl RowId {
    /// The row in `slot` of page `page`; None when the page's file id or index do not fit
    /// (a database of more than 2^20 files, or a file of more than 16 TiB: refused, never
    /// wrapped into another row's id).
    pub fn in_page(page: PageId, slot: u32) -> Option<RowId> {
        let file = page.file_id() as u64;
        let index = page.page_index_in_file() as u64;
        if file >= 1 << FILE_BITS || index >= 1 << PAGE_BITS || slot as u64 >= 1 << SLOT_BITS {
            return None;
        }
        Some(RowId((file << (PAGE_BITS + SLOT_BITS)) | (index << SLOT_BITS) | slot as u64))
    }

    /// The ids every row of page `page` can have (slots 0 to the most a page holds), in
    /// order: ids sort by (file, page, slot), so a sorted list of ids holds a page's rows
    /// as one range. None when the page's id does not fit a row id (`in_page`).
    pub fn range_of_page(page: PageId) -> Option<std::ops::Range<u64>> {
        let first = RowId::in_page(page, 0)?.0;
        Some(first..first + (1 << SLOT_BITS))
    }

    /// The first virtual page of the `ordinal`-th row group of file `file_id`: its row `r`
    /// is slot `r % 4096` of the page `r / 4096` after it. None when the ordinal does not
    /// fit (more than 2^15 row groups in one file) or the file id does not.
    pub fn row_group_first_page(file_id: u32, ordinal: u32) -> Option<PageId> {
        if ordinal >= 1 << GROUP_ORDINAL_BITS || file_id >= 1 << FILE_BITS {
            return None;
        }
        Some(PageId::new(file_id, ordinal << (GROUP_ROW_BITS - SLOT_BITS)))
    }

    /// Row `row` of the row group whose first virtual page is `first_page`
    /// (`row_group_first_page`); None past 2^28 rows.
    pub fn in_row_group(first_page: PageId, row: u64) -> Option<RowId> {
        if row >= 1 << GROUP_ROW_BITS {
            return None;
        }
        let page = PageId::new(first_page.file_id(), first_page.page_index_in_file() + (row >> SLOT_BITS) as u32);
        RowId::in_page(page, (row & ((1 << SLOT_BITS) - 1)) as u32)
    }

    /// A row still only in the delta, named by its insert record's LSN.
    pub fn in_delta(insert_lsn: u64) -> RowId {
        assert!(insert_lsn < STAGED_BIT, "an LSN is a byte position below 2^62");
        RowId(DELTA_BIT | insert_lsn)
    }

    pub fn is_delta(self) -> bool {
        self.0 & (DELTA_BIT | STAGED_BIT) == DELTA_BIT
    }

    /// The insert LSN of a delta row.
    pub fn delta_lsn(self) -> Option<u64> {
        self.is_delta().then_some(self.0 & !DELTA_BIT)
    }

    /// A row staged by the reading transaction: the `place`-th row (counted over its
    /// partitions in order) of its staging step `step`. None when either does not fit (a
    /// transaction of more than 2^24 statements, a statement of more than 2^38 rows).
    pub fn staged(step: usize, place: u64) -> Option<RowId> {
        if step as u64 >= 1 << STEP_BITS || place >= 1 << PLACE_BITS {
            return None;
        }
        Some(RowId(DELTA_BIT | STAGED_BIT | ((step as u64) << PLACE_BITS) | place))
    }

    pub fn is_staged(self) -> bool {
        self.0 & (DELTA_BIT | STAGED_BIT) == DELTA_BIT | STAGED_BIT
    }

    /// The staging step and place of a staged row.
    pub fn staged_place(self) -> Option<(usize, u64)> {
        self.is_staged().then(|| (((self.0 >> PLACE_BITS) & ((1 << STEP_BITS) - 1)) as usize, self.0 & ((1 << PLACE_BITS) - 1)))
    }

    /// The page of a page row.
    pub fn page(self) -> Option<PageId> {
        if self.0 & DELTA_BIT != 0 {
            return None;
        }
        let file = (self.0 >> (PAGE_BITS + SLOT_BITS)) as u32;
        let index = ((self.0 >> SLOT_BITS) & ((1 << PAGE_BITS) - 1)) as u32;
        Some(PageId::new(file, index))
    }

    /// The slot of a page row.
    pub fn slot(self) -> Option<u16> {
        (self.0 & DELTA_BIT == 0).then_some((self.0 & ((1 << SLOT_BITS) - 1)) as u16)
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        #[test]
        fn page_rows_round_trip(file in 0u32..(1 << FILE_BITS), index in 0u32..(1 << PAGE_BITS), slot in 0u32..(1 << SLOT_BITS)) {
            let id = RowId::in_page(PageId::new(file, index), slot).unwrap();
            prop_assert!(!id.is_delta());
            prop_assert_eq!(id.page(), Some(PageId::new(file, index)));
            prop_assert_eq!(id.slot(), Some(slot as u16));
            prop_assert_eq!(id.delta_lsn(), None);
            let range = RowId::range_of_page(PageId::new(file, index)).unwrap();
            prop_assert!(range.contains(&id.0));
            // The page's range holds its rows and no other page's.
            prop_assert_eq!(RowId(range.start).page(), Some(PageId::new(file, index)));
            prop_assert_eq!(RowId(range.end - 1).page(), Some(PageId::new(file, index)));
            prop_assert_ne!(RowId(range.end).page(), Some(PageId::new(file, index)));
        }

        #[test]
        fn column_store_rows_round_trip_and_never_meet(file in 0u32..(1 << FILE_BITS), ordinal in 0u32..(1 << GROUP_ORDINAL_BITS), row in 0u64..(1 << GROUP_ROW_BITS), other in 0u32..(1 << GROUP_ORDINAL_BITS), other_row in 0u64..(1 << GROUP_ROW_BITS)) {
            let first = RowId::row_group_first_page(file, ordinal).unwrap();
            let id = RowId::in_row_group(first, row).unwrap();
            // Back: the page's distance from the first page and the slot give the row.
            let page = id.page().unwrap();
            prop_assert_eq!(page.file_id(), file);
            let back = (page.page_index_in_file() - first.page_index_in_file()) as u64 * 4096 + id.slot().unwrap() as u64;
            prop_assert_eq!(back, row);
            // Two rows of the file's row groups share an id only when they are one row.
            let other_id = RowId::in_row_group(RowId::row_group_first_page(file, other).unwrap(), other_row).unwrap();
            prop_assert_eq!(id == other_id, (ordinal, row) == (other, other_row));
        }

        #[test]
        fn delta_rows_round_trip(lsn in 0u64..(1 << 62)) {
            let id = RowId::in_delta(lsn);
            prop_assert!(id.is_delta());
            prop_assert!(!id.is_staged());
            prop_assert_eq!(id.delta_lsn(), Some(lsn));
            prop_assert_eq!(id.staged_place(), None);
            prop_assert_eq!(id.page(), None);
            prop_assert_eq!(id.slot(), None);
        }

        #[test]
        fn staged_rows_round_trip(step in 0usize..(1 << STEP_BITS), place in 0u64..(1 << PLACE_BITS)) {
            let id = RowId::staged(step, place).unwrap();
            prop_assert!(id.is_staged());
            prop_assert!(!id.is_delta());
            prop_assert_eq!(id.staged_place(), Some((step, place)));
            prop_assert_eq!(id.delta_lsn(), None);
            prop_assert_eq!(id.page(), None);
            prop_assert_eq!(id.slot(), None);
        }
    }

    #[test]
    fn ids_that_do_not_fit_are_refused() {
        assert_eq!(RowId::in_page(PageId::new(1 << FILE_BITS, 0), 0), None);
        assert_eq!(RowId::in_page(PageId::new(0, 1 << PAGE_BITS), 0), None);
        assert_eq!(RowId::in_page(PageId::new(0, 0), 1 << SLOT_BITS), None);
        assert_eq!(RowId::staged(1 << STEP_BITS, 0), None);
        assert_eq!(RowId::staged(0, 1 << PLACE_BITS), None);
    }
}
