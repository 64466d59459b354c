//! How the write path keeps a table's SQL indexes (key_index.rs): built when first needed,
//! created and dropped by DDL, entered by every commit, and checked for uniqueness when
//! rows are staged.
//!
//! Uniqueness is checked at key grain (table_lock.rs): a writer of new keys holds the
//! table in `Rows` mode and locks each new key value first, so no other open transaction
//! is adding that key. What a key can then collide with: the transaction's earlier rows,
//! the statement's own rows, and the committed live rows (the delta and the pages, less
//! deleted ones). A committed row held by another open transaction (being deleted, or
//! replaced by an UPDATE) may yet go: the check waits for that transaction and checks
//! again, as PostgreSQL waits for a conflicting tuple's deleter. So a second inserter of
//! the same key waits for the first to commit (then fails) or roll back (then goes on),
//! an inserter of a key another transaction is deleting waits for it, and inserters of
//! different keys run side by side.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use flashscan_storage::load::valid_table_name;
use arrow::record_batch::RecordBatch;
use flashscan_storage::{KeyIndexDef, StorageError, TableFormat, TableMeta};

use crate::delta::TableDelta;
use crate::error::WriteError;
use crate::insert::{deletes_now, Staged, Transaction};
use crate::key_index::{first_repeat, key_text, Key, KeyIndex};
use crate::row_id::RowId;
use crate::table_lock::{key_lock_id, key_lock_space, LockMode, RowsLocked};
use crate::write_path::{key_of, State, WritePath};

/// What the keys of one unique index collide with for a transaction now (see
/// `check_unique`): the transaction's earlier keys of the index (less those of its rows it
/// changed again: killed), and the committed live rows (less those it deletes).
struct KeyCollisions<'a> {
    index: &'a KeyIndex,
    delta: &'a TableDelta,
    deleting: &'a HashSet<u64>,
    earlier: Vec<&'a [u8]>,
    /// Counted into a map for a large statement; compared one by one for a small one (a
    /// prepared one-row INSERT executed 1,000 times in one transaction hashed every earlier
    /// key into a new set per statement: 41 µs per row).
    earlier_counts: Option<HashMap<&'a [u8], usize>>,
    killed_counts: HashMap<Vec<u8>, usize>,
}

impl<'a> KeyCollisions<'a> {
    #[allow(clippy::too_many_arguments)]
    fn of(index: &'a KeyIndex, txn: &'a Transaction, key: &str, table: &TableMeta, delta: &'a TableDelta, deleting: &'a HashSet<u64>, killed_rows: &[&[u8]], statement_keys: usize) -> Result<KeyCollisions<'a>, WriteError> {
        let earlier: Vec<&[u8]> = txn.staged.iter().filter(|s| s.key == key).flat_map(|s| s.unique_keys.iter()).filter(|(name, _)| name == index.name()).flat_map(|(_, ks)| ks.iter().map(|k| &k[..])).collect();
        let killed: Vec<Key> = if killed_rows.is_empty() { Vec::new() } else { index.keys_of_rows(table, killed_rows.iter().copied())?.0 };
        let mut killed_counts: HashMap<Vec<u8>, usize> = HashMap::new();
        killed.into_iter().for_each(|k| *killed_counts.entry(k.to_vec()).or_default() += 1);
        let earlier_counts = (statement_keys > SMALL_STATEMENT_KEYS_MAX).then(|| count_of(earlier.iter().copied()));
        Ok(KeyCollisions { index, delta, deleting, earlier, earlier_counts, killed_counts })
    }

    /// What `k` collides with, if anything.
    fn collision(&self, k: &[u8]) -> Option<Collision> {
        let taken_away = self.killed_counts.get(k).copied().unwrap_or(0);
        let repeated = match &self.earlier_counts {
            Some(counts) => counts.get(k).copied().unwrap_or(0) > taken_away,
            None if taken_away == 0 => self.earlier.iter().any(|e| *e == k),
            None => self.earlier.iter().filter(|e| **e == k).count() > taken_away,
        };
        if repeated {
            return Some(Collision::Earlier);
        }
        // At most one committed row under a key is live (the index is unique): the newest
        // entries are tried first and the first live one decides. A key updated by every
        // transaction (pgbench's one branch) holds an id per update since the last
        // checkpoint; checking them all made each commit slower than the one before
        // (server CPU per transaction 3.5 → 9.4 ms over 5 runs).
        let live = self.index.ids_of(k).into_iter().rev().find(|id| self.delta.is_live(RowId(*id)));
        live.filter(|id| !self.deleting.contains(id)).map(Collision::Committed)
    }
}

/// What a new key collides with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Collision {
    /// A row of this transaction or of the statement.
    Earlier,
    /// A committed live row (its id as the current delta names it).
    Committed(u64),
}

/// The committed rows of table `key` that `txn` deletes (UPDATE's old versions), as
/// `delta` names them now: they collide with no new key.
fn deleting_rows(txn: &Transaction, key: &str, delta: &Arc<TableDelta>) -> Result<HashSet<u64>, WriteError> {
    let mut deleting = HashSet::new();
    for s in txn.staged.iter().filter(|s| s.key == key) {
        if let Some(against) = &s.deletes_against {
            deleting.extend(deletes_now(key, against, delta, s.deletes.clone())?.into_iter().map(|r| r.0));
        }
    }
    Ok(deleting)
}

/// 23505 for row `i` of `batch` (the index's key columns of the statement's rows).
fn violation(index: &KeyIndex, table: &str, batch: &RecordBatch, i: usize) -> WriteError {
    WriteError::UniqueViolation { index: index.name().to_string(), table: table.to_string(), key: key_text(index, batch.columns(), i) }
}

/// Rows per partition, each in the page's row encoding.
type PartitionRows = Vec<Vec<Vec<u8>>>;

/// How many times each key occurs.
fn count_of<'k>(keys: impl Iterator<Item = &'k [u8]>) -> HashMap<&'k [u8], usize> {
    let mut counts: HashMap<&[u8], usize> = HashMap::new();
    keys.for_each(|k| *counts.entry(k).or_default() += 1);
    counts
}

/// A statement with at most this many keys compares them with the transaction's earlier keys
/// one by one instead of hashing those into a set.
const SMALL_STATEMENT_KEYS_MAX: usize = 4;

impl TableDelta {
    /// Whether the row `id` is committed and not deleted now (not as of a snapshot): what
    /// a uniqueness check collides with. A page row of this table is live unless deleted;
    /// a delta row must be in this delta (an older delta's id is entered under its page
    /// id too, which answers for it).
    pub(crate) fn is_live(&self, id: RowId) -> bool {
        if self.deleted().contains(id) {
            return false;
        }
        match id.delta_lsn() {
            Some(lsn) => self.position(lsn).is_some(),
            None => true,
        }
    }
}

impl WritePath {
    /// The delta of table `key`, made now on top of its committed pages if it has none yet.
    pub(crate) fn delta_of(st: &mut State, key: &str, table: &TableMeta) -> Arc<TableDelta> {
        match st.deltas.get(key) {
            Some(d) => d.clone(),
            None => {
                let d = Arc::new(TableDelta::new(st.catalog.tables.get(key).unwrap_or(table)));
                st.deltas.insert(key.to_string(), d.clone());
                d
            }
        }
    }

    /// Whether `table_name` has a unique index: its writers lock their keys and may wait
    /// (callers that must not block hand such inserts to a thread).
    pub fn has_unique_index(&self, table_name: &str) -> bool {
        let Ok(st) = self.lock_state_shared() else { return false };
        key_of(&st.catalog, table_name).and_then(|k| st.catalog.tables.get(&k)).is_some_and(|t| t.indexes.iter().any(|i| i.unique))
    }

    /// Whether the unique indexes of table `key` are built and sound: checking keys then
    /// reads no table pages (it may still wait for another transaction's key).
    pub(crate) fn unique_indexes_ready(&self, key: &str) -> bool {
        let Ok(st) = self.lock_state_shared() else { return false };
        st.deltas.get(key).is_some_and(|d| d.indexes().refuse_broken().is_ok() && d.indexes().all().iter().filter(|i| i.is_unique()).all(|i| i.is_built()))
    }

    /// The SQL indexes of `table_name`, every one built (a build holds off commits and
    /// checkpoints while it reads the table: one scan of the key columns).
    pub fn built_indexes(&self, table_name: &str) -> Result<Vec<Arc<KeyIndex>>, WriteError> {
        let delta = {
            let mut st = self.lock_state_shared()?;
            let Some(key) = key_of(&st.catalog, table_name) else { return Ok(Vec::new()) };
            let table = st.catalog.tables[&key].clone();
            Self::delta_of(&mut st, &key, &table)
        };
        delta.indexes().refuse_broken()?;
        let indexes = delta.indexes().all();
        if indexes.iter().all(|i| i.is_built()) {
            return Ok(indexes);
        }
        let st = self.lock_state()?;
        // The delta now (a checkpoint may have begun another one meanwhile).
        let Some(delta) = st.deltas.get(&key_of(&st.catalog, table_name).unwrap_or_default()).cloned() else { return Ok(Vec::new()) };
        let indexes = delta.indexes().all();
        for index in &indexes {
            if !index.is_built() {
                index.build(delta.table_meta(), self.db_dir(), &delta)?;
            }
        }
        Ok(indexes)
    }

    /// Checks staged rows of table `key` against its unique indexes (see the module
    /// comment), locking the new keys first. Returns each unique index's keys of
    /// the rows, which the commit re-checks were taken against every unique index.
    ///
    /// `keys_kept`: every row is a new version of a row the transaction deletes, with the
    /// same values in every unique index's columns (an UPDATE that assigns none of them):
    /// such rows cannot collide with anything their old versions did not, so they are not
    /// checked and take no table lock — UPDATEs of other columns run side by side under
    /// row locks (table_lock.rs). Their keys are still returned for the commit's re-check.
    pub(crate) fn check_unique(&self, txn: &mut Transaction, key: &str, table: &TableMeta, rows: &PartitionRows, keys_kept: bool) -> Result<Vec<(String, Vec<Key>)>, WriteError> {
        let delta = {
            let mut st = self.lock_state_shared()?;
            Self::delta_of(&mut st, key, table)
        };
        delta.indexes().refuse_broken()?;
        if !delta.indexes().has_unique() {
            return Ok(Vec::new());
        }
        if keys_kept {
            let all_rows: Vec<&[u8]> = rows.iter().flatten().map(|r| r.as_slice()).collect();
            let mut out = Vec::new();
            for index in self.built_indexes(key)?.iter().filter(|i| i.is_unique()) {
                let (_, batch) = index.keys_of_rows(table, all_rows.iter().copied())?;
                out.push((index.name().to_string(), index.unique_keys_of(batch.columns())?.into_iter().flatten().collect()));
            }
            return Ok(out);
        }
        self.take_change_lock(txn, key, LockMode::Rows)?;
        let indexes = self.built_indexes(key)?;
        let all_rows: Vec<&[u8]> = rows.iter().flatten().map(|r| r.as_slice()).collect();
        // Each unique index's keys of the rows, locked before anything is compared.
        let mut keyed = Vec::new();
        for index in indexes.iter().filter(|i| i.is_unique()) {
            let (_, batch) = index.keys_of_rows(table, all_rows.iter().copied())?;
            let keys = index.unique_keys_of(batch.columns())?;
            if let Some(i) = first_repeat(&keys) {
                return Err(violation(index, key, &batch, i));
            }
            self.lock_keys(txn, key, index, keys.iter().flatten())?;
            keyed.push((index, batch, keys));
        }
        let killed_rows = crate::own_writes::killed_rows(txn, key);
        loop {
            // The delta as it is now, the key locks held (commits before them are in it).
            let delta = {
                let mut st = self.lock_state_shared()?;
                Self::delta_of(&mut st, key, table)
            };
            // Rows this transaction deletes (UPDATE's old versions) do not collide.
            let deleting = deleting_rows(txn, key, &delta)?;
            let mut held = None;
            'indexes: for (index, batch, keys) in &keyed {
                let collisions = KeyCollisions::of(index, txn, key, table, &delta, &deleting, &killed_rows, keys.len())?;
                for (i, k) in keys.iter().enumerate() {
                    match k.as_ref().and_then(|k| collisions.collision(k)) {
                        None => {}
                        Some(Collision::Committed(row)) if self.held_by_other(txn, key, row) => {
                            held = Some(row);
                            break 'indexes;
                        }
                        Some(_) => return Err(violation(index, key, batch, i)),
                    }
                }
            }
            match held {
                None => break,
                Some(_) if txn.no_wait => return Err(WriteError::WouldWait { table: key.to_string() }),
                // Another open transaction is deleting or replacing the row: its end decides.
                Some(row) => self.table_locks.wait_for_row(txn.locks.txn, key, row)?,
            }
        }
        Ok(keyed.into_iter().map(|(index, _, keys)| (index.name().to_string(), keys.into_iter().flatten().collect())).collect())
    }

    /// Locks `keys` of unique index `index` of table `key` for `txn` (table_lock.rs's key
    /// locks), waiting for transactions that hold one (a transaction that asked not to wait
    /// gets `WouldWait`, keeping the locks it took).
    fn lock_keys<'k>(&self, txn: &Transaction, key: &str, index: &KeyIndex, keys: impl Iterator<Item = &'k Key>) -> Result<(), WriteError> {
        let space = key_lock_space(key, index.name());
        let mut ids: Vec<u64> = keys.map(|k| key_lock_id(k)).collect();
        // One order for every locker: two statements locking the same keys cannot deadlock
        // on each other's halves.
        ids.sort_unstable();
        ids.dedup();
        loop {
            match self.table_locks.try_lock_rows(txn.locks.txn, &space, &ids) {
                RowsLocked::All => return Ok(()),
                RowsLocked::HeldBy { .. } if txn.no_wait => return Err(WriteError::WouldWait { table: key.to_string() }),
                RowsLocked::HeldBy { row, .. } => self.table_locks.wait_for_key(txn.locks.txn, key, index.name(), row)?,
            }
        }
    }

    /// Whether committed row `row` of table `key` is held by another open transaction (one
    /// deleting it or replacing it).
    fn held_by_other(&self, txn: &Transaction, key: &str, row: u64) -> bool {
        self.table_locks.row_holder(key, row).is_some_and(|h| h != txn.locks.txn)
    }

    /// `INSERT … ON CONFLICT [(columns)] DO NOTHING`: stages, as `stage_insert` does, the
    /// rows of `batches` whose keys collide with nothing (a committed row, a row this
    /// transaction wrote earlier, an earlier row of the statement) in the arbiter indexes —
    /// the unique index on exactly `arbiter`'s columns, or every unique index when None —
    /// and returns the rows staged. A row colliding only in another unique index fails the
    /// statement (23505), as in PostgreSQL. The keys are locked first (the module comment),
    /// so no other transaction adds one meanwhile; a transaction that asked not to wait gets
    /// `WouldWait` before anything is staged. Returns the rows staged and the rows skipped
    /// (in the statement's order).
    pub fn stage_insert_skipping_conflicts(&self, txn: &mut Transaction, table_name: &str, batches: &[RecordBatch], arbiter: Option<&[String]>) -> Result<(Vec<RecordBatch>, Vec<RecordBatch>), WriteError> {
        self.prepare_commit(table_name, 0)?;
        let (key, table) = {
            let st = self.lock_state_shared()?;
            let (key, _, table) = self.table_for_insert(&st, table_name)?;
            (key, table)
        };
        let arbiters: Vec<&KeyIndexDef> = match arbiter {
            None => table.indexes.iter().filter(|i| i.unique).collect(),
            Some(columns) => {
                let same = |i: &&KeyIndexDef| i.unique && i.columns.len() == columns.len() && i.columns.iter().all(|c| columns.iter().any(|a| a.eq_ignore_ascii_case(c)));
                let found: Vec<&KeyIndexDef> = table.indexes.iter().filter(same).take(1).collect();
                if found.is_empty() {
                    return Err(WriteError::NoConflictTarget { table: key, columns: columns.join(", ") });
                }
                found
            }
        };
        if arbiters.is_empty() {
            self.stage_insert(txn, table_name, batches)?;
            return Ok((batches.to_vec(), Vec::new()));
        }
        if txn.no_wait {
            return Err(WriteError::WouldWait { table: key });
        }
        self.take_change_lock(txn, &key, LockMode::Rows)?;
        let indexes: Vec<Arc<KeyIndex>> = self.built_indexes(&key)?.into_iter().filter(|i| arbiters.iter().any(|a| a.name == i.name())).collect();
        // Per batch, per arbiter index, each row's key; every key locked before any is
        // compared (a row skipped for a key another transaction is adding waits for it).
        let batch_keys: Vec<Vec<Vec<Option<Key>>>> = batches
            .iter()
            .map(|batch| indexes.iter().map(|index| index.unique_keys_of(&index.columns().iter().map(|&c| batch.column(c).clone()).collect::<Vec<_>>())).collect::<Result<_, _>>())
            .collect::<Result<_, _>>()?;
        for (i, index) in indexes.iter().enumerate() {
            self.lock_keys(txn, &key, index, batch_keys.iter().flat_map(|b| b[i].iter().flatten()))?;
        }
        let killed_rows = crate::own_writes::killed_rows(txn, &key);
        let (delta, deleting) = loop {
            let delta = {
                let mut st = self.lock_state_shared()?;
                Self::delta_of(&mut st, &key, &table)
            };
            let deleting = deleting_rows(txn, &key, &delta)?;
            let collisions: Vec<KeyCollisions> = indexes.iter().map(|i| KeyCollisions::of(i, txn, &key, &table, &delta, &deleting, &killed_rows, usize::MAX)).collect::<Result<_, _>>()?;
            let held = batch_keys.iter().flat_map(|b| b.iter().enumerate()).find_map(|(i, ks)| {
                ks.iter().flatten().find_map(|k| match collisions[i].collision(k) {
                    Some(Collision::Committed(row)) if self.held_by_other(txn, &key, row) => Some(row),
                    _ => None,
                })
            });
            drop(collisions);
            match held {
                None => break (delta, deleting),
                Some(row) => self.table_locks.wait_for_row(txn.locks.txn, &key, row)?,
            }
        };
        let mut kept_batches = Vec::with_capacity(batches.len());
        let mut skipped_batches = Vec::new();
        {
            let collisions: Vec<KeyCollisions> = indexes.iter().map(|i| KeyCollisions::of(i, txn, &key, &table, &delta, &deleting, &killed_rows, usize::MAX)).collect::<Result<_, _>>()?;
            // Keys of the statement's rows kept so far, per arbiter index.
            let mut taken: Vec<HashSet<Key>> = vec![HashSet::new(); indexes.len()];
            for (batch, keys) in batches.iter().zip(&batch_keys) {
                let mut keep = Vec::with_capacity(batch.num_rows());
                for row in 0..batch.num_rows() {
                    let collides = keys.iter().enumerate().any(|(i, ks)| ks[row].as_ref().is_some_and(|k| taken[i].contains(k) || collisions[i].collision(k).is_some()));
                    if !collides {
                        for (i, ks) in keys.iter().enumerate() {
                            if let Some(k) = &ks[row] {
                                taken[i].insert(k.clone());
                            }
                        }
                    }
                    keep.push(!collides);
                }
                let keep = arrow::array::BooleanArray::from(keep);
                let kept = arrow::compute::filter_record_batch(batch, &keep).map_err(|e| WriteError::InvalidArgument(e.to_string()))?;
                if kept.num_rows() > 0 {
                    kept_batches.push(kept);
                }
                if keep.true_count() < batch.num_rows() {
                    let skip = arrow::compute::not(&keep).map_err(|e| WriteError::InvalidArgument(e.to_string()))?;
                    skipped_batches.push(arrow::compute::filter_record_batch(batch, &skip).map_err(|e| WriteError::InvalidArgument(e.to_string()))?);
                }
            }
        }
        self.stage_insert(txn, table_name, &kept_batches)?;
        Ok((kept_batches, skipped_batches))
    }

    /// CREATE [UNIQUE] INDEX, and the index of a PRIMARY KEY or UNIQUE constraint added
    /// to a table: checked, built from the table (a unique one refused if the table repeats
    /// a key), then one catalog commit. It waits for transactions that are changing the
    /// table (its change lock) and holds off commits while it builds. Returns false when
    /// `if_not_exists` found the name taken.
    pub fn create_index(&self, table_name: &str, def: KeyIndexDef, if_not_exists: bool) -> Result<bool, WriteError> {
        let name = def.name.to_ascii_lowercase();
        if !valid_table_name(&name) {
            return Err(WriteError::InvalidArgument(format!("index name {:?}: use letters, digits and _", def.name)));
        }
        let def = KeyIndexDef { name: name.clone(), ..def };
        let key = {
            let st = self.lock_state_shared()?;
            Self::require_writer(&st)?;
            match key_of(&st.catalog, table_name) {
                Some(k) => k,
                None if st.catalog.view(table_name).is_some() => return Err(WriteError::NotSupported(format!("cannot index view {table_name}: index the table it reads"))),
                None => return Err(StorageError::UnknownTable { name: table_name.to_string(), known: st.catalog.tables.keys().cloned().collect::<Vec<_>>().join(", ") }.into()),
            }
        };
        // Transactions changing the table end first (their rows were not checked against
        // the new index); new ones wait until the index is in.
        let mut lock = Transaction::new();
        self.take_change_lock(&mut lock, &key, LockMode::Table)?;
        let mut st = self.lock_state()?;
        self.refuse_cluster_host(&st, "CREATE INDEX")?;
        let Some(table) = st.catalog.tables.get(&key).cloned() else { return Err(WriteError::InvalidArgument(format!("table {key} was dropped meanwhile"))) };
        if table.table_format()? != TableFormat::Heap(flashscan_storage::heap::page_encoder::HeapFormat::Plain) {
            return Err(WriteError::NotSupported(format!(
                "table {key} is stored as {}: SQL indexes cover uncompressed heap tables only; rebuild it first (`flashscan rebuild DB {key} --compression none`)",
                table.format
            )));
        }
        if def.primary {
            if let Some(pk) = table.indexes.iter().find(|i| i.primary) {
                return Err(WriteError::InvalidArgument(format!("multiple primary keys for table {key} are not allowed (it has {})", pk.name)));
            }
        }
        let taken = st.catalog.tables.values().any(|t| t.indexes.iter().any(|i| i.name == name)) || st.catalog.tables.contains_key(&name) || st.catalog.view(&name).is_some();
        if taken {
            if if_not_exists {
                return Ok(false);
            }
            return Err(StorageError::RelationExists { name, kind: "relation", hint: "" }.into());
        }
        if def.primary {
            for c in &def.columns {
                let column = &table.columns[table.column_index(c)?];
                if column.nullable {
                    return Err(WriteError::NotSupported(format!(
                        "PRIMARY KEY on column {} of table {key}: the column allows NULL, and changing a column to NOT NULL is not supported yet; declare the key in CREATE TABLE, or create a UNIQUE index instead",
                        column.name
                    )));
                }
            }
        }
        let index = KeyIndex::new(&table, def.clone())?;
        let delta = Self::delta_of(&mut st, &key, &table);
        index.build(delta.table_meta(), self.db_dir(), &delta)?;
        if index.is_unique() {
            refuse_repeated_keys(&index, &key, &delta)?;
        }
        let mut next = st.catalog.clone();
        if let Some(t) = next.tables.get_mut(&key) {
            t.indexes.push(def);
        }
        next.generation += 1;
        next.write_atomic(self.db_dir())?;
        st.catalog = next;
        delta.indexes().add(Arc::new(index));
        Ok(true)
    }

    /// DROP INDEX (`constraint`: false) or ALTER TABLE … DROP CONSTRAINT (true): one
    /// catalog commit. An index that backs a constraint is dropped only as a constraint,
    /// as PostgreSQL does. Returns false when `if_exists` found no such index.
    pub fn drop_index(&self, table_name: Option<&str>, name: &str, constraint: bool, if_exists: bool) -> Result<bool, WriteError> {
        let mut st = self.lock_state()?;
        Self::require_writer(&st)?;
        let name = name.to_ascii_lowercase();
        let found = st.catalog.tables.iter().find(|(k, t)| table_name.is_none_or(|n| k.eq_ignore_ascii_case(n)) && t.indexes.iter().any(|i| i.name == name)).map(|(k, t)| (k.clone(), t.indexes.iter().find(|i| i.name == name).cloned()));
        let Some((key, Some(def))) = found else {
            if if_exists {
                return Ok(false);
            }
            return Err(WriteError::InvalidArgument(match (constraint, table_name) {
                (true, Some(t)) => format!("constraint \"{name}\" of relation \"{t}\" does not exist"),
                _ => format!("index \"{name}\" does not exist"),
            }));
        };
        if def.constraint && !constraint {
            return Err(WriteError::NotSupported(format!("cannot drop index {name} because constraint {name} on table {key} requires it: ALTER TABLE {key} DROP CONSTRAINT {name}")));
        }
        if !def.constraint && constraint {
            return Err(WriteError::InvalidArgument(format!("constraint \"{name}\" of relation \"{key}\" does not exist (it is an index: DROP INDEX {name})")));
        }
        let mut next = st.catalog.clone();
        if let Some(t) = next.tables.get_mut(&key) {
            t.indexes.retain(|i| i.name != name);
        }
        next.generation += 1;
        next.write_atomic(self.db_dir())?;
        st.catalog = next;
        if let Some(d) = st.deltas.get(&key) {
            d.indexes().remove(&name);
        }
        Ok(true)
    }
}

/// A unique index over rows that repeat a key is refused, naming the key.
fn refuse_repeated_keys(index: &KeyIndex, table: &str, delta: &TableDelta) -> Result<(), WriteError> {
    let repeated = index.first_key_with(|key, ids| ids.iter().filter(|id| delta.is_live(RowId(**id))).count() > 1 && !index.key_has_null(key));
    if let Some(key) = repeated {
        return Err(WriteError::DuplicateKeys { index: index.name().to_string(), table: table.to_string(), key: index.key_text_of(&key) });
    }
    Ok(())
}

/// Refuses to commit rows of `s` that were not checked against a unique index of their
/// table: one created after they were staged, or a path that stages without checking (a
/// prepared insert).
pub(crate) fn refuse_unchecked(s: &Staged, delta: &TableDelta) -> Result<(), WriteError> {
    for index in delta.indexes().all().iter().filter(|i| i.is_unique()) {
        if !s.unique_keys.iter().any(|(name, _)| name == index.name()) {
            return Err(WriteError::SerializationFailure {
                table: s.key.clone(),
                why: format!("its rows were not checked against unique index {} (created since they were staged, or written by a prepared insert, which does not check keys yet: insert through SQL)", index.name()),
            });
        }
    }
    Ok(())
}

/// Enters a commit's rows into every built index of their table (the caller holds the
/// commit gate, so no build or checkpoint runs meanwhile).
pub(crate) fn enter_rows(s: &Staged, delta: &TableDelta) -> Result<(), WriteError> {
    if s.rows.iter().all(|p| p.is_empty()) {
        return Ok(());
    }
    let indexes = delta.indexes().all();
    if indexes.is_empty() {
        return Ok(());
    }
    let ids: Vec<u64> = s.lsns.iter().flatten().map(|l| RowId::in_delta(*l).0).collect();
    let rows: Vec<&[u8]> = s.rows.iter().flatten().map(|r| r.as_slice()).collect();
    debug_assert_eq!(ids.len(), rows.len(), "one insert LSN per row");
    for index in indexes.iter().filter(|i| i.is_built()) {
        let (keys, _) = index.keys_of_rows(&s.table, rows.iter().copied())?;
        index.insert_all(keys.into_iter().zip(ids.iter().copied()));
    }
    Ok(())
}
