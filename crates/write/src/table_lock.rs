//! Change locks: a transaction that UPDATEs or DELETEs rows of a table holds the table's
//! change lock from that statement until it commits or rolls back. A second transaction
//! that wants to change the same table waits for it, then reads a fresh snapshot — so it
//! sees the first one's changes and never deletes a row twice (READ COMMITTED's "wait,
//! then re-check", at table grain). INSERT takes no lock, and readers never wait: they read
//! their snapshot.
//!
//! Why a table's lock and not a row's (PostgreSQL locks the row): rows change through a
//! statement that first reads its snapshot, and a row lock would need that read to wait
//! row by row and re-evaluate its predicate (EvalPlanQual). The table grain gives the same
//! answers — statements that change one table run one transaction after another — at the
//! cost of concurrency between writers of the same table. Row locks are the next step
//! (docs/architecture.md, "Transactions and snapshots").
//!
//! Deadlocks (T1 holds a and waits for b, T2 holds b and waits for a) are found when a
//! wait begins or while it goes on, by following who waits for whom; the transaction that
//! closes the cycle fails with SQLSTATE 40P01 and the other goes on once it rolls back.

use std::collections::HashMap;
use std::sync::{Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::error::WriteError;

/// How often a waiting transaction looks for a deadlock again (a cycle can close after
/// its wait began) and for its wait's end.
const DEADLOCK_CHECK_INTERVAL: Duration = Duration::from_millis(50);
/// A wait longer than this fails with what to do (lock_timeout in PostgreSQL terms).
pub const LOCK_WAIT_MAX: Duration = Duration::from_secs(60);

#[derive(Debug, Default)]
struct Locks {
    /// Table key → the transaction holding its change lock.
    holders: HashMap<String, u64>,
    /// Waiting transaction → the transaction it waits for.
    waits_for: HashMap<u64, u64>,
}

impl Locks {
    /// Whether `txn` waiting for `holder` closes a cycle.
    fn closes_cycle(&self, txn: u64, holder: u64) -> bool {
        let mut at = holder;
        for _ in 0..=self.waits_for.len() {
            if at == txn {
                return true;
            }
            match self.waits_for.get(&at) {
                Some(next) => at = *next,
                None => return false,
            }
        }
        false
    }
}

#[derive(Debug, Default)]
pub(crate) struct TableLocks {
    locks: Mutex<Locks>,
    released: Condvar,
}

impl TableLocks {
    /// Takes `table`'s change lock for `txn`, waiting while another transaction holds it.
    /// Returns false if `txn` held it already.
    pub(crate) fn acquire(&self, txn: u64, table: &str) -> Result<bool, WriteError> {
        let started = Instant::now();
        let mut locks = self.locks.lock().unwrap_or_else(PoisonError::into_inner);
        loop {
            match locks.holders.get(table).copied() {
                None => {
                    locks.holders.insert(table.to_string(), txn);
                    locks.waits_for.remove(&txn);
                    return Ok(true);
                }
                Some(holder) if holder == txn => return Ok(false),
                Some(holder) => {
                    if locks.closes_cycle(txn, holder) {
                        locks.waits_for.remove(&txn);
                        return Err(WriteError::Deadlock { table: table.to_string() });
                    }
                    if started.elapsed() >= LOCK_WAIT_MAX {
                        locks.waits_for.remove(&txn);
                        return Err(WriteError::LockTimeout { table: table.to_string(), waited_s: started.elapsed().as_secs() });
                    }
                    locks.waits_for.insert(txn, holder);
                    locks = self.released.wait_timeout(locks, DEADLOCK_CHECK_INTERVAL).unwrap_or_else(PoisonError::into_inner).0;
                }
            }
        }
    }

    /// Releases every lock `txn` holds (commit, rollback, or a dropped transaction).
    pub(crate) fn release_all(&self, txn: u64) {
        let mut locks = self.locks.lock().unwrap_or_else(PoisonError::into_inner);
        locks.holders.retain(|_, holder| *holder != txn);
        locks.waits_for.remove(&txn);
        drop(locks);
        self.released.notify_all();
    }

    /// Whether `txn` holds `table`'s change lock.
    pub(crate) fn holds(&self, txn: u64, table: &str) -> bool {
        self.locks.lock().unwrap_or_else(PoisonError::into_inner).holders.get(table) == Some(&txn)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    #[test]
    fn a_second_transaction_waits_for_the_first() {
        let locks = Arc::new(TableLocks::default());
        assert!(locks.acquire(1, "t").unwrap());
        assert!(!locks.acquire(1, "t").unwrap(), "held already");
        let l = locks.clone();
        let waiter = std::thread::spawn(move || {
            let started = Instant::now();
            l.acquire(2, "t").unwrap();
            started.elapsed()
        });
        std::thread::sleep(Duration::from_millis(100));
        locks.release_all(1);
        assert!(waiter.join().unwrap() >= Duration::from_millis(90));
        assert!(locks.holds(2, "t"));
    }

    #[test]
    fn the_transaction_that_closes_a_cycle_fails() {
        let locks = Arc::new(TableLocks::default());
        locks.acquire(1, "a").unwrap();
        locks.acquire(2, "b").unwrap();
        let l = locks.clone();
        let first = std::thread::spawn(move || l.acquire(1, "b"));
        std::thread::sleep(Duration::from_millis(100));
        let second = locks.acquire(2, "a");
        assert!(matches!(second, Err(WriteError::Deadlock { .. })), "{second:?}");
        locks.release_all(2);
        assert!(first.join().unwrap().unwrap());
    }
}
