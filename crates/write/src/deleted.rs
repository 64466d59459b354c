//! A heap table's deleted rows in memory: the rows of its pages and of its delta that
//! committed DELETEs and UPDATEs removed, each with the visibility sequence number of the
//! commit that removed it, so a snapshot taken before that commit still sees the row
//! (READ COMMITTED and REPEATABLE READ read old versions this way: the old row stays where
//! it is, only its deletion is newer than the snapshot).
//!
//! Entries are never taken out while the table lives: a deleted row stays deleted. The
//! checkpoint writes the page rows' ids to the table's deleted rows file
//! (`flashscan_storage::deleted_rows`) and starts the next delta with a copy in which the
//! delta rows it moved into pages are named by their page ids (`translated`). Memory: about
//! 16 bytes per deleted row until the table is rebuilt.
//!
//! Why not copy-on-write sets per snapshot: a statement's snapshot would pin a copy, and
//! every commit would copy the whole set. Sequence numbers let one shared set serve every
//! snapshot; a reader takes the read lock once per page (or per delta partition).

use std::collections::HashMap;
use std::sync::{PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

use crate::row_id::RowId;

/// The sequence number of rows loaded from the deleted rows file: visible to every snapshot.
pub const SEQ_DURABLE: u64 = 0;

#[derive(Debug, Default)]
struct Inner {
    /// Page id → (slot, sequence number) of its deleted rows.
    pages: HashMap<u64, Vec<(u16, u64)>, ahash::RandomState>,
    /// Insert LSN of a delta row → sequence number.
    delta: HashMap<u64, u64, ahash::RandomState>,
    /// (sequence number, rows deleted up to and including it), ascending.
    counts: Vec<(u64, u64)>,
}

impl Inner {
    fn count_at(&self, seq: u64) -> u64 {
        let i = self.counts.partition_point(|(s, _)| *s <= seq);
        if i == 0 {
            0
        } else {
            self.counts[i - 1].1
        }
    }

    fn total(&self) -> u64 {
        self.counts.last().map(|c| c.1).unwrap_or(0)
    }

    fn contains(&self, id: RowId) -> bool {
        match (id.delta_lsn(), id.page(), id.slot()) {
            (Some(lsn), _, _) => self.delta.contains_key(&lsn),
            (None, Some(page), Some(slot)) => self.pages.get(&page.0).is_some_and(|v| v.iter().any(|(s, _)| *s == slot)),
            _ => false,
        }
    }

    fn insert(&mut self, id: RowId, seq: u64) {
        match (id.delta_lsn(), id.page(), id.slot()) {
            (Some(lsn), _, _) => {
                self.delta.insert(lsn, seq);
            }
            (None, Some(page), Some(slot)) => self.pages.entry(page.0).or_default().push((slot, seq)),
            _ => unreachable!("a row id is a page row or a delta row"),
        }
    }
}

/// A read view of the rows deleted for every snapshot (`DeletedRows::dead_for_all`),
/// held while an index is pruned.
pub struct DeadForAll<'a>(RwLockReadGuard<'a, Inner>);

impl DeadForAll<'_> {
    pub fn contains(&self, id: u64) -> bool {
        let id = RowId(id);
        match (id.delta_lsn(), id.page(), id.slot()) {
            (Some(lsn), _, _) => self.0.delta.get(&lsn) == Some(&SEQ_DURABLE),
            (None, Some(page), Some(slot)) => self.0.pages.get(&page.0).is_some_and(|v| v.iter().any(|(s, seq)| *s == slot && *seq == SEQ_DURABLE)),
            _ => false,
        }
    }

}

#[derive(Debug, Default)]
pub struct DeletedRows {
    inner: RwLock<Inner>,
}

impl DeletedRows {
    fn read(&self) -> RwLockReadGuard<'_, Inner> {
        // Every change is one insert into maps under the lock: a panic cannot leave half of one.
        self.inner.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write(&self) -> RwLockWriteGuard<'_, Inner> {
        self.inner.write().unwrap_or_else(PoisonError::into_inner)
    }

    /// The rows of a deleted rows file (page row ids), visible to every snapshot.
    pub fn from_durable(ids: &[u64]) -> DeletedRows {
        let mut inner = Inner::default();
        for &id in ids {
            inner.insert(RowId(id), SEQ_DURABLE);
        }
        if !ids.is_empty() {
            inner.counts.push((SEQ_DURABLE, ids.len() as u64));
        }
        DeletedRows { inner: RwLock::new(inner) }
    }

    /// Rows deleted as a snapshot at `seq` sees them.
    pub fn count_at(&self, seq: u64) -> u64 {
        self.read().count_at(seq)
    }

    /// Rows deleted by any commit so far.
    pub fn total(&self) -> u64 {
        self.read().total()
    }

    pub fn contains(&self, id: RowId) -> bool {
        self.read().contains(id)
    }

    /// The first of `ids` already deleted, if any (a commit checks before it adds).
    pub fn first_deleted(&self, ids: &[RowId]) -> Option<RowId> {
        let inner = self.read();
        ids.iter().copied().find(|id| inner.contains(*id))
    }

    /// Adds one commit's deleted rows at `seq` (the caller checked none is deleted yet,
    /// under the same publish lock; asserted in debug builds).
    pub fn add(&self, ids: &[RowId], seq: u64) {
        if ids.is_empty() {
            return;
        }
        let mut inner = self.write();
        debug_assert!(inner.counts.last().is_none_or(|(s, _)| *s <= seq), "sequence numbers only grow");
        for &id in ids {
            debug_assert!(!inner.contains(id), "row {id:?} deleted twice");
            inner.insert(id, seq);
        }
        let total = inner.total() + ids.len() as u64;
        match inner.counts.last_mut() {
            Some(last) if last.0 == seq => last.1 = total,
            _ => inner.counts.push((seq, total)),
        }
    }

    /// Slots of page `page_id` deleted as of `seq`, into `out` (cleared first). Returns
    /// whether any was.
    pub fn page_slots_at(&self, page_id: u64, seq: u64, out: &mut Vec<u16>) -> bool {
        out.clear();
        let inner = self.read();
        if let Some(v) = inner.pages.get(&page_id) {
            out.extend(v.iter().filter(|(_, s)| *s <= seq).map(|(slot, _)| *slot));
        }
        !out.is_empty()
    }

    /// The rows deleted for every snapshot of this delta: loaded from the deleted rows
    /// file, carried over a checkpoint, or replayed at recovery (`SEQ_DURABLE`). An index
    /// need not hold them: no reader it serves can see them.
    pub fn dead_for_all(&self) -> DeadForAll<'_> {
        DeadForAll(self.read())
    }

    /// Whether slot `slot` of page `page_id` is deleted as of `seq`.
    pub fn page_slot_deleted_at(&self, page_id: u64, slot: u16, seq: u64) -> bool {
        self.read().pages.get(&page_id).is_some_and(|v| v.iter().any(|(s, at)| *s == slot && *at <= seq))
    }

    /// Whether any page row is deleted at all (a scan with none skips every lookup).
    pub fn has_page_rows(&self) -> bool {
        !self.read().pages.is_empty()
    }

    /// For each insert LSN, whether that delta row is deleted as of `seq`.
    pub fn delta_deleted_at(&self, lsns: &[u64], seq: u64) -> Vec<bool> {
        let inner = self.read();
        if inner.delta.is_empty() {
            return vec![false; lsns.len()];
        }
        lsns.iter().map(|lsn| inner.delta.get(lsn).is_some_and(|s| *s <= seq)).collect()
    }

    /// Every deleted page row's id, ascending: what the deleted rows file holds.
    pub fn page_row_ids(&self) -> Vec<u64> {
        let inner = self.read();
        let mut ids: Vec<u64> = inner
            .pages
            .iter()
            .flat_map(|(page, slots)| slots.iter().filter_map(move |(slot, _)| RowId::in_page(flashscan_storage::PageId(*page), *slot as u32)).map(|r| r.0))
            .collect();
        ids.sort_unstable();
        ids
    }

    /// A copy for the next delta after a checkpoint: page rows as they are, delta rows the
    /// checkpoint moved into pages under their page ids (`moved`: delta row id → page row
    /// id), all visible to every snapshot taken from then on (the checkpoint runs with no
    /// commit in flight, so every deletion so far is committed and published).
    pub fn translated(&self, moved: &HashMap<u64, u64>) -> DeletedRows {
        let inner = self.read();
        let mut next = Inner::default();
        for (page, slots) in &inner.pages {
            next.pages.insert(*page, slots.iter().map(|(slot, _)| (*slot, SEQ_DURABLE)).collect());
        }
        for lsn in inner.delta.keys() {
            let from = RowId::in_delta(*lsn);
            match moved.get(&from.0) {
                Some(&to) => next.insert(RowId(to), SEQ_DURABLE),
                // Not moved: the row was in no page the checkpoint wrote (it cannot be, every
                // delta row is written); keep it by its LSN rather than lose the deletion.
                None => next.insert(from, SEQ_DURABLE),
            }
        }
        let total = inner.total();
        if total > 0 {
            next.counts.push((SEQ_DURABLE, total));
        }
        DeletedRows { inner: RwLock::new(next) }
    }
}

#[cfg(test)]
mod tests {
    use flashscan_storage::PageId;

    use super::*;

    #[test]
    fn a_snapshot_sees_deletions_up_to_its_sequence_number() {
        let d = DeletedRows::from_durable(&[RowId::in_page(PageId::new(1, 0), 3).unwrap().0]);
        let a = RowId::in_page(PageId::new(1, 0), 5).unwrap();
        let b = RowId::in_delta(4096);
        d.add(&[a], 7);
        d.add(&[b], 9);
        assert_eq!((d.count_at(0), d.count_at(7), d.count_at(8), d.count_at(9)), (1, 2, 2, 3));
        let mut slots = Vec::new();
        assert!(d.page_slots_at(PageId::new(1, 0).0, 6, &mut slots));
        assert_eq!(slots, vec![3]);
        d.page_slots_at(PageId::new(1, 0).0, 7, &mut slots);
        assert_eq!(slots, vec![3, 5]);
        assert_eq!(d.delta_deleted_at(&[4096, 4097], 8), vec![false, false]);
        assert_eq!(d.delta_deleted_at(&[4096, 4097], 9), vec![true, false]);
        assert_eq!(d.first_deleted(&[RowId::in_delta(1), b]), Some(b));
    }

    #[test]
    fn a_checkpoint_names_moved_rows_by_their_pages() {
        let d = DeletedRows::default();
        d.add(&[RowId::in_delta(100), RowId::in_delta(200)], 1);
        let page_row = RowId::in_page(PageId::new(2, 9), 1).unwrap();
        let moved = HashMap::from([(RowId::in_delta(100).0, page_row.0)]);
        let next = d.translated(&moved);
        assert_eq!(next.count_at(0), 2);
        assert!(next.contains(page_row));
        assert!(next.contains(RowId::in_delta(200)));
        assert_eq!(next.page_row_ids(), vec![page_row.0]);
    }
}
