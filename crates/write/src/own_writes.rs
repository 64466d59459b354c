//! A transaction reads its own writes: the rows it staged and has not committed, and the
//! rows it deleted, as its own statements see them (PostgreSQL's contract:
//! docs/architecture.md, "Transactions and snapshots").
//!
//! A transaction's changes are private until its commit (insert.rs: staged, logged at
//! commit), so no shared page or delta holds them. Each statement of the transaction reads
//! a snapshot of the committed rows ([`ReadSnapshot`]) with the transaction's own changes
//! laid over it ([`WritePath::read_snapshot_own`]):
//! - the rows it staged (INSERT, COPY, UPDATE's new versions) join the table's rows, each
//!   named by a staged row id (`RowId::staged`: its staging step and place), so a later
//!   UPDATE or DELETE of the same transaction can change them again;
//! - the rows it deleted (DELETE, UPDATE's old versions) — committed rows, named as the
//!   snapshot's delta names them — are skipped like rows deleted by a commit.
//!
//! A staged row changed again is not staged twice: the later step *kills* it (`Staged::kills`),
//! and the commit logs only the staged rows still alive ([`settle`]). Kills are kept per
//! step, so dropping the steps of a statement (`Transaction::unstage_to`: a statement made
//! again, or ROLLBACK TO SAVEPOINT) brings back the rows they killed.
//!
//! What it costs: a statement of an open transaction copies the transaction's live staged
//! rows of each table it changed (nothing for an autocommit statement or a transaction
//! that staged nothing). The commit is unchanged when nothing was killed.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use flashscan_storage::TableMeta;

use crate::delta::TableDelta;
use crate::error::WriteError;
use crate::insert::{deletes_now, Staged, Transaction};
use crate::key_index::{KeyIndex, KeyLookup};
use crate::row_id::RowId;
use crate::snapshot::ReadSnapshot;
use crate::write_path::WritePath;

/// A staged row's bytes, shared by the step that staged it and the views of it.
pub(crate) type SharedRow = Arc<[u8]>;

/// A transaction's changes as its next statement reads them (see the module comment).
/// Made by [`Transaction::own_changes`]; laid over a snapshot by [`WritePath::read_snapshot_own`].
#[derive(Debug, Default)]
pub struct OwnChanges {
    /// Per table (catalog key) the transaction changed.
    tables: BTreeMap<String, OwnTable>,
    /// REPEATABLE READ: the transaction's snapshot, which its changes are laid over (READ
    /// COMMITTED: none, each statement takes one of now).
    base: Option<Arc<ReadSnapshot>>,
}

#[derive(Debug)]
struct OwnTable {
    /// The table as the transaction staged into it (its first step's meta).
    table: TableMeta,
    /// Per partition: the staged rows still alive, each with its staged id (shared with
    /// every snapshot the statement lays them over, not copied per table view).
    rows: Arc<Vec<Vec<(u64, SharedRow)>>>,
    /// Committed rows the transaction deletes, each group named as `against` names them.
    deletes: Vec<(Arc<TableDelta>, Vec<RowId>)>,
}

/// One table's own changes as one snapshot sees them: what `SnapshotTable` lays over the
/// committed rows.
#[derive(Debug, Default)]
pub struct OwnRows {
    /// Per partition: the staged rows still alive, each with its staged id.
    pub(crate) rows: Arc<Vec<Vec<(u64, SharedRow)>>>,
    /// Committed rows the transaction deletes, as the snapshot's delta names them, sorted.
    pub(crate) deleted: Vec<u64>,
}

impl OwnRows {
    pub(crate) fn row_count(&self) -> u64 {
        self.rows.iter().map(|p| p.len() as u64).sum()
    }

    /// Whether the transaction deletes the committed row `id`.
    pub(crate) fn deletes(&self, id: u64) -> bool {
        self.deleted.binary_search(&id).is_ok()
    }

    /// Whether `id` names a staged row still alive.
    pub(crate) fn has_staged(&self, id: u64) -> bool {
        self.rows.iter().flatten().any(|(r, _)| *r == id)
    }

    /// The slots of page `page` the transaction deletes, added to `slots`; whether any.
    pub(crate) fn page_slots(&self, page: u64, slots: &mut Vec<u16>) -> bool {
        let Some(range) = RowId::range_of_page(flashscan_storage::PageId(page)) else { return false };
        let from = self.deleted.partition_point(|id| *id < range.start);
        let before = slots.len();
        slots.extend(self.deleted[from..].iter().take_while(|id| range.contains(*id)).filter_map(|id| RowId(*id).slot()));
        slots.len() > before
    }

    /// Whether the transaction deletes rows of pages (not only delta rows).
    pub(crate) fn deletes_page_rows(&self) -> bool {
        self.deleted.iter().any(|id| !RowId(*id).is_delta())
    }

    /// The staged rows `index` would find under `keys` (full keys, or prefixes with
    /// `prefix`), each with its id.
    pub(crate) fn rows_by_index(&self, table: &TableMeta, index: &KeyIndex, lookup: &KeyLookup) -> Result<Vec<(u64, &[u8])>, WriteError> {
        let all: Vec<(u64, &[u8])> = self.rows.iter().flatten().map(|(id, r)| (*id, &r[..])).collect();
        if all.is_empty() {
            return Ok(all);
        }
        let (row_keys, _) = index.keys_of_rows(table, all.iter().map(|(_, r)| *r))?;
        Ok(all.into_iter().zip(row_keys).filter(|(_, k)| lookup.matches(&k[..])).map(|(row, _)| row).collect())
    }
}

impl Transaction {
    /// The staged rows killed by later steps, as (step, place).
    pub(crate) fn killed(&self) -> HashSet<(usize, u64)> {
        self.staged.iter().flat_map(|s| s.kills.iter().copied()).collect()
    }

    /// What the transaction's next statement reads of its own changes, and its snapshot
    /// when it is REPEATABLE READ (`pin_snapshot` first); `None` when there is neither
    /// (the statement reads committed rows as of now).
    pub fn own_changes(&self) -> Option<Arc<OwnChanges>> {
        if self.staged.is_empty() && self.base.is_none() {
            return None;
        }
        let killed = self.killed();
        let mut own = OwnChanges { base: self.base.clone(), ..OwnChanges::default() };
        for (step, s) in self.staged.iter().enumerate() {
            // Looked up before it is made: a key is cloned once per table, not per step.
            if !own.tables.contains_key(&s.key) {
                own.tables.insert(s.key.clone(), OwnTable { table: s.table.clone(), rows: Arc::new(vec![Vec::new(); s.table.partitions.len()]), deletes: Vec::new() });
            }
            let Some(t) = own.tables.get_mut(&s.key) else { continue };
            // Built here, not shared yet: no copy.
            let rows_of_table = Arc::make_mut(&mut t.rows);
            let mut place = 0u64;
            // The step's rows as shared bytes, made once per step (a statement of a long
            // transaction copied every earlier row again: 45 % of the server's CPU at 4,000
            // UPDATEs in one block, perf).
            let shared = s.shared_rows.get_or_init(|| s.rows.iter().map(|p| p.iter().map(|r| SharedRow::from(r.as_slice())).collect()).collect());
            for (partition, rows) in shared.iter().enumerate() {
                for row in rows {
                    if killed.is_empty() || !killed.contains(&(step, place)) {
                        // An id that does not fit is left out of reads that ask for ids
                        // only by `stage_delete` refusing it; `staged` fits any transaction
                        // of fewer than 2^24 statements of fewer than 2^38 rows each.
                        let id = RowId::staged(step, place).map_or(u64::MAX, |r| r.0);
                        if let Some(p) = rows_of_table.get_mut(partition) {
                            p.push((id, row.clone()));
                        }
                    }
                    place += 1;
                }
            }
            if let Some(against) = &s.deletes_against {
                // One group per delta named against (steps between two checkpoints share it).
                match t.deletes.last_mut() {
                    Some((last, ids)) if Arc::ptr_eq(last, against) => ids.extend_from_slice(&s.deletes),
                    _ => t.deletes.push((against.clone(), s.deletes.clone())),
                }
            }
        }
        Some(Arc::new(own))
    }
}

impl OwnChanges {
    /// Table `key`'s own changes as a snapshot whose delta is `now` sees them; `None` when
    /// the transaction did not change the table.
    pub(crate) fn view_for(&self, key: &str, now: &Arc<TableDelta>) -> Result<Option<OwnRows>, WriteError> {
        let Some(t) = self.tables.get(key) else { return Ok(None) };
        let committed = now.table_meta();
        if t.table.columns != committed.columns || t.table.partitions.len() != committed.partitions.len() {
            return Err(WriteError::SerializationFailure {
                table: key.to_string(),
                why: "the table was dropped and created again since this transaction changed it".into(),
            });
        }
        let mut deleted = Vec::new();
        for (against, ids) in &t.deletes {
            deleted.extend(ids_as_named_by(key, against, now, ids.clone())?.into_iter().map(|r| r.0));
        }
        deleted.sort_unstable();
        deleted.dedup();
        Ok(Some(OwnRows { rows: t.rows.clone(), deleted }))
    }

    fn keys(&self) -> impl Iterator<Item = (&String, &TableMeta)> {
        self.tables.iter().map(|(k, t)| (k, &t.table))
    }
}

impl WritePath {
    /// The snapshot of now with `own` laid over it: what a statement of an open
    /// transaction reads (see the module comment). Without `own`, [`WritePath::read_snapshot`].
    pub fn read_snapshot_own(&self, own: Option<&OwnChanges>) -> Result<ReadSnapshot, WriteError> {
        let Some(own) = own else { return self.read_snapshot() };
        let mut snapshot = match &own.base {
            Some(base) => (**base).clone(),
            None => {
                // A table the transaction staged rows into may have no delta yet (a loaded
                // table before its first commit): it gets one now, so the snapshot has it.
                {
                    let mut st = self.lock_state_shared()?;
                    for (key, table) in own.keys() {
                        if !st.deltas.contains_key(key) && st.catalog.tables.contains_key(key) {
                            Self::delta_of(&mut st, key, table);
                        }
                    }
                }
                self.read_snapshot()?
            }
        };
        snapshot.lay_over(own)?;
        Ok(snapshot)
    }

    /// A snapshot of now that names every table (each gets a delta first): what a
    /// REPEATABLE READ transaction keeps (`Transaction::pin_snapshot`).
    pub(crate) fn read_snapshot_of_every_table(&self) -> Result<ReadSnapshot, WriteError> {
        {
            let mut st = self.lock_state_shared()?;
            let missing: Vec<(String, TableMeta)> = st.catalog.tables.iter().filter(|(k, _)| !st.deltas.contains_key(*k)).map(|(k, t)| (k.clone(), t.clone())).collect();
            for (key, table) in missing {
                Self::delta_of(&mut st, &key, &table);
            }
        }
        self.read_snapshot()
    }
}

/// `ids`, named as the delta `against` names them, as the delta `then` names them: forward
/// through the checkpoints since (`deletes_now`) when `then` is newer, backward when it is
/// older (a REPEATABLE READ snapshot older than the transaction's own deletes: a page row
/// id a checkpoint gave a delta row is named by its delta id again).
fn ids_as_named_by(key: &str, against: &Arc<TableDelta>, then: &Arc<TableDelta>, ids: Vec<RowId>) -> Result<Vec<RowId>, WriteError> {
    if Arc::ptr_eq(against, then) {
        return Ok(ids);
    }
    // The checkpoints from `then` to `against`, if `then` is the older one.
    let mut steps: Vec<Arc<HashMap<u64, u64>>> = Vec::new();
    let mut link = then.successor();
    while let Some(step) = link {
        steps.push(step.moved.clone());
        if step.id == against.id() {
            let mut ids = ids;
            for moved in steps.iter().rev() {
                let back: HashMap<u64, u64> = moved.iter().map(|(delta_id, page_id)| (*page_id, *delta_id)).collect();
                ids = ids.into_iter().map(|id| back.get(&id.0).map_or(id, |d| RowId(*d))).collect();
            }
            return Ok(ids);
        }
        link = step.successor.get();
    }
    deletes_now(key, against, then, ids)
}

/// Removes from `staged` the rows later steps killed (they are never logged), and the
/// kills: what a commit logs is then every staged row still alive. The kept keys of unique
/// indexes (`Staged::unique_keys`) are left as they are: a commit only checks which
/// indexes they were checked against.
pub(crate) fn settle(staged: &mut [Staged]) {
    if staged.iter().all(|s| s.kills.is_empty()) {
        return;
    }
    // The views of the rows are of no more use (the commit follows).
    for s in staged.iter_mut() {
        s.shared_rows.take();
    }
    let mut killed: HashMap<usize, HashSet<u64>> = HashMap::new();
    for s in staged.iter_mut() {
        for (step, place) in s.kills.drain(..) {
            killed.entry(step).or_default().insert(place);
        }
    }
    for (step, places) in killed {
        let Some(s) = staged.get_mut(step) else { continue };
        let mut place = 0u64;
        for rows in s.rows.iter_mut() {
            rows.retain(|_| {
                let keep = !places.contains(&place);
                place += 1;
                keep
            });
        }
    }
}

/// The staged rows of table `key` that later steps killed, in the page's row encoding.
pub(crate) fn killed_rows<'t>(txn: &'t Transaction, key: &str) -> Vec<&'t [u8]> {
    let killed = txn.killed();
    if killed.is_empty() {
        return Vec::new();
    }
    let mut out = Vec::new();
    for (step, s) in txn.staged.iter().enumerate().filter(|(_, s)| s.key == key) {
        for (place, row) in s.rows.iter().flatten().enumerate() {
            if killed.contains(&(step, place as u64)) {
                out.push(row.as_slice());
            }
        }
    }
    out
}

/// Splits `ids` into the transaction's own staged rows, as (step, place), and committed
/// rows. A staged id must name a live row of table `key` staged by an earlier step.
pub(crate) fn split_staged(txn: &Transaction, key: &str, ids: Vec<RowId>) -> Result<(Vec<(usize, u64)>, Vec<RowId>), WriteError> {
    if !ids.iter().any(|id| id.is_staged()) {
        return Ok((Vec::new(), ids));
    }
    let killed = txn.killed();
    let mut staged = Vec::new();
    let mut committed = Vec::new();
    for id in ids {
        let Some((step, place)) = id.staged_place() else {
            committed.push(id);
            continue;
        };
        let names_a_live_row = txn.staged.get(step).is_some_and(|s| s.key == key && place < s.rows.iter().map(|p| p.len() as u64).sum::<u64>()) && !killed.contains(&(step, place));
        if !names_a_live_row {
            return Err(WriteError::InvalidArgument(format!("table {key}: row {:#x} names no row this transaction staged and still has", id.0)));
        }
        staged.push((step, place));
    }
    Ok((staged, committed))
}
