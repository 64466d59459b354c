//! Change locks: what a transaction that changes rows holds until it commits or rolls back.
//!
//! PostgreSQL's READ COMMITTED contract, at row and key grain:
//! - **Row locks** (UPDATE and DELETE): the statement takes its table's lock in
//!   [`LockMode::Rows`] (shared by every row changer), reads its snapshot, then locks each
//!   row it changes. A row another open transaction changed makes it wait for that
//!   transaction; once the row is locked, a row deleted or updated by a commit after the
//!   snapshot makes the statement read again from a new snapshot, under the locks it holds
//!   (PostgreSQL re-checks the row's newest version, EvalPlanQual; flashscan re-reads the
//!   statement: the same rows in the end, since every row it changes is locked and newest).
//!   So two UPDATEs of one row both apply, in order, and UPDATEs of different rows of one
//!   table run side by side (pgbench's clients, each on its own account).
//! - **Key locks** (a writer of new keys of a unique index: INSERT into a keyed table, an
//!   UPDATE that changes a key): in `Rows` mode too, plus one lock per new key value of
//!   each unique index (`key_lock_space`, `key_lock_id`), held to the transaction's end.
//!   Every transaction that adds a key holds its key lock, and every one that removes a
//!   committed key holds that row's lock; so a uniqueness check made under the key lock
//!   that meets a committed row another transaction holds waits for it and checks again
//!   (index_write.rs). A second inserter of a key waits for the first, then fails or goes
//!   on, as in PostgreSQL; inserters of different keys do not wait for each other (before,
//!   the whole table was taken, and committers of a keyed table ran one flush each).
//! - **Table locks** ([`LockMode::Table`], exclusive): CREATE INDEX and ALTER TABLE, which
//!   wait for every open changer of the table.
//!
//! A row is named by its row id as the table's current delta names it; a checkpoint that
//! moves delta rows into pages renames the locks on them (`rename_rows`) under the write
//! path's state lock, where lockers translate their ids too. A key is named by its value,
//! which no checkpoint changes. INSERT into a table without a unique index takes no lock,
//! and readers never wait: they read their snapshot.
//!
//! Deadlocks (T1 holds a and waits for b, T2 holds b and waits for a) are found when a
//! wait begins or while it goes on, by following who waits for whom; the transaction that
//! closes the cycle fails with SQLSTATE 40P01 and the other goes on once it rolls back.

use std::collections::{HashMap, HashSet};

type AHashMap<K, V> = HashMap<K, V, ahash::RandomState>;
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use crate::error::WriteError;

/// The lock space of the keys of unique index `index` of table `table`: locked as rows of a
/// table of that name (`try_lock_rows`, `wait_for_row`), which no real table can have (NUL
/// is in no table name) and no checkpoint renames.
pub(crate) fn key_lock_space(table: &str, index: &str) -> String {
    format!("{table}\0{index}")
}

/// A key value's lock in its index's space: a 64-bit hash of its bytes (order-preserving
/// encoding, key_index.rs). Two keys with one hash share a lock: a needless wait, never a
/// missed one.
pub(crate) fn key_lock_id(key: &[u8]) -> u64 {
    static HASHER: std::sync::LazyLock<ahash::RandomState> = std::sync::LazyLock::new(ahash::RandomState::new);
    HASHER.hash_one(key)
}

fn is_key_lock_space(table: &str) -> bool {
    table.contains('\0')
}

/// How often a waiting transaction looks for a deadlock again (a cycle can close after
/// its wait began) and for its wait's end.
const DEADLOCK_CHECK_INTERVAL: Duration = Duration::from_millis(50);
/// A wait longer than this fails with what to do (lock_timeout in PostgreSQL terms).
pub const LOCK_WAIT_MAX: Duration = Duration::from_secs(60);

/// How a transaction holds a table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockMode {
    /// Shared by every transaction that changes rows it locks one by one.
    Rows,
    /// Exclusive: no other transaction changes the table while it is held.
    Table,
}

#[derive(Debug, Default)]
struct TableHold {
    /// Transactions holding the table in `Rows` mode (a `Table` holder may be one too).
    rows_mode: HashSet<u64>,
    table_mode: Option<u64>,
}

#[derive(Debug, Default)]
struct Locks {
    // aHash throughout: every INSERT into a keyed table takes and releases its table and
    // key locks here (SipHash of the names showed in its profile).
    tables: AHashMap<String, TableHold>,
    /// Table key (or key lock space) → row id → the transaction holding the row.
    rows: AHashMap<String, AHashMap<u64, u64>>,
    /// Per transaction, per table, the rows it holds (released together).
    rows_of: AHashMap<u64, AHashMap<String, Vec<u64>>>,
    /// Waiting transaction → the transactions it waits for.
    waits_for: AHashMap<u64, Vec<u64>>,
}

impl Locks {
    /// Whether `txn` waiting for `holders` closes a cycle.
    fn closes_cycle(&self, txn: u64, holders: &[u64]) -> bool {
        let mut seen = HashSet::new();
        let mut stack: Vec<u64> = holders.to_vec();
        while let Some(at) = stack.pop() {
            if at == txn {
                return true;
            }
            if seen.insert(at) {
                if let Some(next) = self.waits_for.get(&at) {
                    stack.extend(next.iter().copied());
                }
            }
        }
        false
    }

    /// The transactions `txn` must wait for to hold `table` in `mode` (none: it may now).
    fn table_blockers(&self, txn: u64, table: &str, mode: LockMode) -> Vec<u64> {
        let Some(hold) = self.tables.get(table) else { return Vec::new() };
        let mut out: Vec<u64> = hold.table_mode.filter(|h| *h != txn).into_iter().collect();
        if mode == LockMode::Table {
            out.extend(hold.rows_mode.iter().copied().filter(|h| *h != txn));
        }
        out
    }
}

#[derive(Debug, Default)]
pub(crate) struct TableLocks {
    locks: Mutex<Locks>,
    released: Condvar,
}

/// What a try to lock rows found.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum RowsLocked {
    /// Every row is held by the transaction now.
    All,
    /// This row is held by another transaction: wait for it (`wait_for_row`), then try again.
    HeldBy { row: u64, holder: u64 },
}

impl TableLocks {
    fn lock(&self) -> MutexGuard<'_, Locks> {
        self.locks.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Waits while `blockers(locks)` names other transactions, failing on a deadlock or
    /// after `LOCK_WAIT_MAX`; returns the guard once none is left.
    fn wait_until_free<'a>(&'a self, mut locks: MutexGuard<'a, Locks>, txn: u64, table: &str, blockers: impl Fn(&Locks) -> Vec<u64>) -> Result<MutexGuard<'a, Locks>, WriteError> {
        let started = Instant::now();
        loop {
            let holders = blockers(&locks);
            if holders.is_empty() {
                locks.waits_for.remove(&txn);
                return Ok(locks);
            }
            if locks.closes_cycle(txn, &holders) {
                locks.waits_for.remove(&txn);
                return Err(WriteError::Deadlock { table: table.to_string() });
            }
            if started.elapsed() >= LOCK_WAIT_MAX {
                locks.waits_for.remove(&txn);
                return Err(WriteError::LockTimeout { table: table.to_string(), waited_s: started.elapsed().as_secs() });
            }
            locks.waits_for.insert(txn, holders);
            locks = self.released.wait_timeout(locks, DEADLOCK_CHECK_INTERVAL).unwrap_or_else(PoisonError::into_inner).0;
        }
    }

    /// Takes `table` in `mode` for `txn`, waiting while other transactions hold it in a
    /// mode that conflicts (`Table` conflicts with everything, `Rows` with `Table`).
    /// Holding `Table` covers `Rows`; asking `Table` while holding `Rows` upgrades (two
    /// upgraders of one table deadlock, and one of them fails).
    pub(crate) fn acquire(&self, txn: u64, table: &str, mode: LockMode) -> Result<(), WriteError> {
        let locks = self.lock();
        let mut locks = self.wait_until_free(locks, txn, table, |l| l.table_blockers(txn, table, mode))?;
        let hold = locks.tables.entry(table.to_string()).or_default();
        match mode {
            LockMode::Rows => {
                hold.rows_mode.insert(txn);
            }
            LockMode::Table => hold.table_mode = Some(txn),
        }
        Ok(())
    }

    /// `acquire` without waiting: false (nothing taken) when another transaction holds
    /// `table` in a mode that conflicts.
    pub(crate) fn try_acquire(&self, txn: u64, table: &str, mode: LockMode) -> bool {
        let mut locks = self.lock();
        if !locks.table_blockers(txn, table, mode).is_empty() {
            return false;
        }
        let hold = locks.tables.entry(table.to_string()).or_default();
        match mode {
            LockMode::Rows => {
                hold.rows_mode.insert(txn);
            }
            LockMode::Table => hold.table_mode = Some(txn),
        }
        true
    }

    /// Tries to lock `rows` of `table` for `txn` (which holds the table), without waiting:
    /// the rows up to the first held by another transaction are taken.
    pub(crate) fn try_lock_rows(&self, txn: u64, table: &str, rows: &[u64]) -> RowsLocked {
        let mut locks = self.lock();
        debug_assert!(
            is_key_lock_space(table) || locks.tables.get(table).is_some_and(|h| h.rows_mode.contains(&txn) || h.table_mode == Some(txn)),
            "rows are locked under the table's lock"
        );
        // The table's maps are found once, not once per row.
        let Locks { rows: held, rows_of, .. } = &mut *locks;
        let held = held.entry(table.to_string()).or_default();
        let mut taken = Vec::new();
        let mut result = RowsLocked::All;
        for &row in rows {
            match held.get(&row).copied() {
                Some(holder) if holder == txn => {}
                Some(holder) => {
                    result = RowsLocked::HeldBy { row, holder };
                    break;
                }
                None => {
                    held.insert(row, txn);
                    taken.push(row);
                }
            }
        }
        if !taken.is_empty() {
            rows_of.entry(txn).or_default().entry(table.to_string()).or_default().extend(taken);
        }
        result
    }

    /// Waits until `row` of `table` is no longer held by another transaction (its holder
    /// ended, or a checkpoint renamed it: the caller tries again either way).
    pub(crate) fn wait_for_row(&self, txn: u64, table: &str, row: u64) -> Result<(), WriteError> {
        let locks = self.lock();
        self.wait_until_free(locks, txn, table, |l| l.rows.get(table).and_then(|r| r.get(&row)).copied().filter(|h| *h != txn).into_iter().collect()).map(drop)
    }

    /// Waits until key `id` of unique index `index` of `table` is no longer held by
    /// another transaction; errors name the table.
    pub(crate) fn wait_for_key(&self, txn: u64, table: &str, index: &str, id: u64) -> Result<(), WriteError> {
        let space = key_lock_space(table, index);
        let locks = self.lock();
        self.wait_until_free(locks, txn, table, |l| l.rows.get(&space).and_then(|r| r.get(&id)).copied().filter(|h| *h != txn).into_iter().collect()).map(drop)
    }

    /// The transaction holding `row` of `table`, if one does.
    pub(crate) fn row_holder(&self, table: &str, row: u64) -> Option<u64> {
        self.lock().rows.get(table).and_then(|r| r.get(&row)).copied()
    }

    /// A checkpoint moved delta rows into pages: locks on them follow their new ids
    /// (`moved`: delta row id → page row id).
    pub(crate) fn rename_rows(&self, table: &str, moved: &HashMap<u64, u64>) {
        let mut locks = self.lock();
        let Locks { rows, rows_of, .. } = &mut *locks;
        let Some(held) = rows.get_mut(table) else { return };
        let renamed: Vec<(u64, u64)> = held.iter().filter(|(row, _)| moved.contains_key(row)).map(|(row, h)| (*row, *h)).collect();
        if renamed.is_empty() {
            return;
        }
        for (row, holder) in renamed {
            held.remove(&row);
            let to = moved[&row];
            held.insert(to, holder);
            if let Some(k) = rows_of.get_mut(&holder).and_then(|t| t.get_mut(table)).and_then(|rows| rows.iter_mut().find(|r| **r == row)) {
                *k = to;
            }
        }
        drop(locks);
        self.released.notify_all();
    }

    /// Releases every lock `txn` holds (commit, rollback, or a dropped transaction).
    pub(crate) fn release_all(&self, txn: u64) {
        let mut locks = self.lock();
        locks.tables.retain(|_, hold| {
            hold.rows_mode.remove(&txn);
            if hold.table_mode == Some(txn) {
                hold.table_mode = None;
            }
            !hold.rows_mode.is_empty() || hold.table_mode.is_some()
        });
        if let Some(tables) = locks.rows_of.remove(&txn) {
            for (table, rows) in tables {
                let Some(held) = locks.rows.get_mut(&table) else { continue };
                for row in rows {
                    if held.get(&row) == Some(&txn) {
                        held.remove(&row);
                    }
                }
                if held.is_empty() {
                    locks.rows.remove(&table);
                }
            }
        }
        locks.waits_for.remove(&txn);
        drop(locks);
        self.released.notify_all();
    }

    /// Whether `txn` holds `table` in `mode` (holding it in `Table` mode covers `Rows`).
    pub(crate) fn holds(&self, txn: u64, table: &str, mode: LockMode) -> bool {
        let locks = self.lock();
        let Some(hold) = locks.tables.get(table) else { return false };
        hold.table_mode == Some(txn) || (mode == LockMode::Rows && hold.rows_mode.contains(&txn))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    #[test]
    fn a_second_transaction_waits_for_the_first() {
        let locks = Arc::new(TableLocks::default());
        locks.acquire(1, "t", LockMode::Table).unwrap();
        locks.acquire(1, "t", LockMode::Table).unwrap();
        let l = locks.clone();
        let waiter = std::thread::spawn(move || {
            let started = Instant::now();
            l.acquire(2, "t", LockMode::Table).unwrap();
            started.elapsed()
        });
        std::thread::sleep(Duration::from_millis(100));
        locks.release_all(1);
        assert!(waiter.join().unwrap() >= Duration::from_millis(90));
        assert!(locks.holds(2, "t", LockMode::Table));
        assert!(locks.holds(2, "t", LockMode::Rows), "the table covers its rows");
    }

    #[test]
    fn the_transaction_that_closes_a_cycle_fails() {
        let locks = Arc::new(TableLocks::default());
        locks.acquire(1, "a", LockMode::Table).unwrap();
        locks.acquire(2, "b", LockMode::Table).unwrap();
        let l = locks.clone();
        let first = std::thread::spawn(move || l.acquire(1, "b", LockMode::Table));
        std::thread::sleep(Duration::from_millis(100));
        let second = locks.acquire(2, "a", LockMode::Table);
        assert!(matches!(second, Err(WriteError::Deadlock { .. })), "{second:?}");
        locks.release_all(2);
        first.join().unwrap().unwrap();
    }

    /// Row changers share the table and wait only for each other's rows; a table holder
    /// waits for all of them, and they for it.
    #[test]
    fn row_changers_share_a_table_and_wait_per_row() {
        let locks = Arc::new(TableLocks::default());
        locks.acquire(1, "t", LockMode::Rows).unwrap();
        locks.acquire(2, "t", LockMode::Rows).unwrap();
        assert_eq!(locks.try_lock_rows(1, "t", &[10, 11]), RowsLocked::All);
        assert_eq!(locks.try_lock_rows(2, "t", &[12]), RowsLocked::All, "another row: no wait");
        assert_eq!(locks.try_lock_rows(2, "t", &[13, 11]), RowsLocked::HeldBy { row: 11, holder: 1 });
        assert_eq!(locks.try_lock_rows(1, "t", &[11]), RowsLocked::All, "its own row again");
        // A table locker waits for both row changers.
        let l = locks.clone();
        let table = std::thread::spawn(move || {
            let started = Instant::now();
            l.acquire(3, "t", LockMode::Table).unwrap();
            started.elapsed()
        });
        let l = locks.clone();
        let row_waiter = std::thread::spawn(move || {
            let started = Instant::now();
            l.wait_for_row(2, "t", 11).unwrap();
            started.elapsed()
        });
        std::thread::sleep(Duration::from_millis(100));
        locks.release_all(1);
        assert!(row_waiter.join().unwrap() >= Duration::from_millis(90));
        assert_eq!(locks.try_lock_rows(2, "t", &[11]), RowsLocked::All, "free once its holder ended");
        std::thread::sleep(Duration::from_millis(50));
        assert!(!locks.holds(3, "t", LockMode::Table), "still waits for transaction 2");
        locks.release_all(2);
        assert!(table.join().unwrap() >= Duration::from_millis(140));
        assert!(locks.holds(3, "t", LockMode::Table));
        locks.release_all(3);
        assert!(locks.lock().rows.is_empty() && locks.lock().tables.is_empty(), "nothing left behind");
    }

    /// `try_acquire` takes what `acquire` would without waiting, and nothing where it would.
    #[test]
    fn try_acquire_takes_nothing_where_acquire_would_wait() {
        let locks = TableLocks::default();
        assert!(locks.try_acquire(1, "t", LockMode::Rows));
        assert!(locks.try_acquire(2, "t", LockMode::Rows), "row changers share the table");
        assert!(!locks.try_acquire(3, "t", LockMode::Table), "a table holder would wait for both");
        assert!(!locks.holds(3, "t", LockMode::Table) && !locks.holds(3, "t", LockMode::Rows));
        assert!(locks.lock().waits_for.is_empty(), "no wait recorded: no deadlock can be found through it");
        locks.release_all(1);
        locks.release_all(2);
        assert!(locks.try_acquire(3, "t", LockMode::Table));
        assert!(!locks.try_acquire(1, "t", LockMode::Rows), "and row changers would wait for it");
        assert!(locks.try_acquire(3, "t", LockMode::Rows), "its own table covers its rows");
        locks.release_all(3);
        assert!(locks.lock().tables.is_empty(), "nothing left behind");
    }

    /// Two row changers that each wait for the other's row: one fails with a deadlock.
    #[test]
    fn crossed_row_waits_are_a_deadlock() {
        let locks = Arc::new(TableLocks::default());
        locks.acquire(1, "t", LockMode::Rows).unwrap();
        locks.acquire(2, "t", LockMode::Rows).unwrap();
        assert_eq!(locks.try_lock_rows(1, "t", &[1]), RowsLocked::All);
        assert_eq!(locks.try_lock_rows(2, "t", &[2]), RowsLocked::All);
        let l = locks.clone();
        let first = std::thread::spawn(move || l.wait_for_row(1, "t", 2));
        std::thread::sleep(Duration::from_millis(100));
        let second = locks.wait_for_row(2, "t", 1);
        assert!(matches!(second, Err(WriteError::Deadlock { .. })), "{second:?}");
        locks.release_all(2);
        first.join().unwrap().unwrap();
    }

    /// A checkpoint's renaming moves a held lock to the row's page id, and release frees it.
    #[test]
    fn renamed_rows_stay_locked_under_their_new_ids() {
        let locks = TableLocks::default();
        locks.acquire(1, "t", LockMode::Rows).unwrap();
        locks.acquire(2, "t", LockMode::Rows).unwrap();
        assert_eq!(locks.try_lock_rows(1, "t", &[7]), RowsLocked::All);
        locks.rename_rows("t", &HashMap::from([(7, 70)]));
        assert_eq!(locks.try_lock_rows(2, "t", &[70]), RowsLocked::HeldBy { row: 70, holder: 1 });
        assert_eq!(locks.try_lock_rows(2, "t", &[7]), RowsLocked::All, "the old name is free");
        locks.release_all(1);
        assert_eq!(locks.try_lock_rows(2, "t", &[70]), RowsLocked::All);
    }
}
