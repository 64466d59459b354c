//! Inserting rows: one commit protocol for a SQL statement, a prepared insert (the
//! embedded API, like a DuckDB appender or a prepared statement) and a transaction of
//! several statements (`BEGIN … COMMIT`).
//!
//! 1. Stage: rows are encoded with the loader's page encoder (type, NOT NULL, decimal
//!    range, row size: every check a load makes), per partition, in the page's own row
//!    encoding, straight from its row buffer (`BatchEncoder::encode_rows`: no page is
//!    built). Nothing is logged yet; an error here leaves the transaction as it was.
//! 2. Commit: with the commit gate held shared, the table ids and deltas are looked up
//!    under the state mutex, which is then released; every row is logged, then one commit
//!    record, and the commit waits until that is durable (many commits share one log
//!    flush: group commit); then the rows join the deltas, where scans see them. Any error
//!    before the commit record is durable appends an abort record and leaves nothing
//!    visible (redo skips rows without a commit record anyway).
//!
//! Why the gate: a checkpoint takes its redo point R and writes the deltas; a commit whose
//! records are before R must have its rows in the delta by then, or they would be neither
//! in the pages nor replayed. The checkpoint (and DDL) take the gate exclusively.
//!
//! **Waiting on a thread or awaiting in a task.** `commit_transaction` (and INSERT, and a
//! prepared insert) wait for the flush on the calling thread, leading it when no flush in
//! flight covers the commit (crates/wal). An async caller — the server's connection tasks
//! — instead calls [`WritePath::try_begin_commit`], which logs the rows and the commit
//! record without blocking (or hands the transaction back when it would block: a stopped
//! log, a full delta, a checkpoint holding the gate), and awaits
//! [`PendingCommit::durable`]: the log's writer threads flush and wake the task, so no
//! thread waits per commit and no hand-off to a commit thread and back is needed. The
//! gate is held across that await (its guard is `Send`, gate.rs).

use std::sync::Arc;

use arrow::record_batch::RecordBatch;
use flashscan_storage::load::batch_encoder::BatchEncoder;
use flashscan_storage::{StorageError, TableMeta};
use flashscan_wal::{DeleteRow, Durability, InsertRow, Lsn, Record, TxnId, Wal, WalError};

use std::sync::atomic::{AtomicU64, Ordering};

use crate::delta::TableDelta;
use crate::error::WriteError;
use crate::gate::SharedGate;
use crate::row_id::RowId;
use crate::table_lock::{LockMode, RowsLocked, TableLocks};
use crate::snapshot::Visibility;
use crate::write_path::{key_of, meta_of, State, WritePath};

/// Rows per partition, each in the page's row encoding.
type PartitionRows = Vec<Vec<Vec<u8>>>;

pub(crate) struct Staged {
    pub(crate) key: String,
    /// The id the table had when the rows were staged (`None`: a loaded table that never
    /// took an INSERT; it gets one at commit).
    table_id: Option<u32>,
    pub(crate) table: TableMeta,
    pub(crate) rows: PartitionRows,
    /// Per partition, per row: the LSN of its insert record (filled when it is logged).
    pub(crate) lsns: Vec<Vec<u64>>,
    /// Rows this statement deletes (DELETE, and the old versions of UPDATE), named as the
    /// snapshot it read them from names them, and that snapshot's delta.
    pub(crate) deletes: Vec<RowId>,
    pub(crate) deletes_against: Option<Arc<TableDelta>>,
    /// Per unique index the rows were checked against (index_write.rs): its name and the
    /// rows' keys (NULL keys left out). A commit refuses rows not checked against every
    /// unique index of their table (one created since they were staged).
    pub(crate) unique_keys: Vec<(String, Vec<crate::key_index::Key>)>,
    /// Rows of earlier steps of this transaction that this step deletes again (a row the
    /// transaction inserted, or a new version it wrote), as (step, place among that
    /// step's rows): they are never logged (own_writes.rs).
    pub(crate) kills: Vec<(usize, u64)>,
    /// `rows` as shared bytes, per partition, made once when a statement of the
    /// transaction first reads its own writes (own_writes.rs); a step's rows never change
    /// after it is staged (a prepared insert's one step grows, but never reads them).
    pub(crate) shared_rows: std::sync::OnceLock<Vec<Vec<crate::own_writes::SharedRow>>>,
}

impl Staged {
    /// A step of rows to insert into table `key`.
    fn of_rows(key: String, table_id: Option<u32>, table: TableMeta, rows: PartitionRows, unique_keys: Vec<(String, Vec<crate::key_index::Key>)>) -> Staged {
        Staged { key, table_id, table, rows, lsns: Vec::new(), deletes: Vec::new(), deletes_against: None, unique_keys, kills: Vec::new(), shared_rows: std::sync::OnceLock::new() }
    }

    fn inserted_count(&self) -> u64 {
        self.rows.iter().map(|p| p.len() as u64).sum::<u64>()
    }
}

/// Rows of one or more statements, validated and waiting for one durable commit
/// (`WritePath::commit_transaction`). Dropping it is a rollback: nothing was logged, and
/// the change locks it holds are released.
#[derive(Default)]
pub struct Transaction {
    pub(crate) staged: Vec<Staged>,
    pub(crate) locks: LockHolder,
    /// When its commit is acknowledged: after its flush, or before (flashscan_wal::durability).
    pub(crate) durability: Durability,
    /// Lock waits fail with `WriteError::WouldWait` instead of waiting (`set_no_wait`).
    pub(crate) no_wait: bool,
    /// Open savepoints, oldest first: each name and how many staging steps the transaction
    /// held when it was taken (`savepoint`, `rollback_to_savepoint`).
    savepoints: Vec<(String, usize)>,
    pub(crate) isolation: crate::snapshot::Isolation,
    /// REPEATABLE READ: the snapshot its first statement took, which every statement reads
    /// (`pin_snapshot`).
    pub(crate) base: Option<Arc<crate::snapshot::ReadSnapshot>>,
}

/// The change locks a transaction holds (table_lock.rs), released when it drops.
#[derive(Default)]
pub(crate) struct LockHolder {
    pub(crate) txn: u64,
    locks: Option<Arc<TableLocks>>,
}

/// Hands out transaction ids for change locks.
static NEXT_TXN: AtomicU64 = AtomicU64::new(1);

impl Drop for LockHolder {
    fn drop(&mut self) {
        if let Some(locks) = self.locks.take() {
            locks.release_all(self.txn);
        }
    }
}

impl std::fmt::Debug for Transaction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Transaction({} rows staged, {} deleted)", self.inserted_count(), self.deleted_count())
    }
}

impl Transaction {
    pub fn new() -> Transaction {
        Transaction::default()
    }

    /// Rows staged so far: inserted plus deleted (an UPDATE counts both).
    pub fn row_count(&self) -> u64 {
        self.inserted_count() + self.deleted_count()
    }

    /// Rows staged for insertion and still alive (less those a later statement of the
    /// transaction changed again).
    pub fn inserted_count(&self) -> u64 {
        let staged: u64 = self.staged.iter().map(Staged::inserted_count).sum();
        let killed = self.staged.iter().map(|s| s.kills.len() as u64).sum::<u64>();
        debug_assert!(killed <= staged, "a step kills only rows earlier steps staged");
        staged.saturating_sub(killed)
    }

    /// Committed rows the transaction deletes.
    pub fn deleted_count(&self) -> u64 {
        self.staged.iter().map(|s| s.deletes.len() as u64).sum()
    }

    /// While set, a lock this transaction would wait for fails the call with
    /// `WriteError::WouldWait`, having staged nothing (`lock_for_change`, `stage_delete`,
    /// `stage_new_versions`). A server tries a statement's steps on its async worker this
    /// way and moves to a thread that may block only when one would wait: most statements
    /// never wait, and handing a worker's other tasks to another thread for each (tokio's
    /// `block_in_place`) was 3.5 % of the server's CPU under pgbench, and most of its
    /// context switches.
    pub fn set_no_wait(&mut self, no_wait: bool) {
        self.no_wait = no_wait;
    }

    /// How many staging steps the transaction holds (see `unstage_to`).
    pub fn staged_steps(&self) -> usize {
        self.staged.len()
    }

    /// Drops the staging steps after the first `steps` (a statement that staged part of its
    /// changes, then met `WouldWait`, is made again from the start). The row locks taken
    /// stay held until the transaction ends, as for any statement of it.
    pub fn unstage_to(&mut self, steps: usize) {
        self.staged.truncate(steps);
    }

    /// The isolation level (`SET TRANSACTION ISOLATION LEVEL …`, `BEGIN ISOLATION LEVEL …`):
    /// refused once a statement has taken the transaction's snapshot (PostgreSQL's rule).
    pub fn set_isolation(&mut self, isolation: crate::snapshot::Isolation) -> Result<(), WriteError> {
        if self.base.is_some() && isolation != self.isolation {
            return Err(WriteError::IsolationAfterQuery);
        }
        self.isolation = isolation;
        Ok(())
    }

    pub fn isolation(&self) -> crate::snapshot::Isolation {
        self.isolation
    }

    /// Takes the transaction's snapshot when it is REPEATABLE READ and has none yet: called
    /// before each statement reads (its first statement takes it). Every heap table gets a
    /// delta first, so the snapshot names each one (a table without one would otherwise be
    /// read as it is at each statement).
    pub fn pin_snapshot(&mut self, write: &WritePath) -> Result<(), WriteError> {
        if self.isolation == crate::snapshot::Isolation::RepeatableRead && self.base.is_none() {
            self.base = Some(Arc::new(write.read_snapshot_of_every_table()?));
        }
        Ok(())
    }

    /// SAVEPOINT `name`: what is staged from now on can be undone alone
    /// (`rollback_to_savepoint`). A name taken again hides the older savepoint until the
    /// newer one is released (PostgreSQL's rule).
    pub fn savepoint(&mut self, name: &str) {
        self.savepoints.push((name.to_string(), self.staged.len()));
    }

    /// The newest savepoint named `name`, or the error PostgreSQL gives (3B001).
    fn savepoint_position(&self, name: &str) -> Result<usize, WriteError> {
        self.savepoints.iter().rposition(|(n, _)| n == name).ok_or_else(|| WriteError::NoSuchSavepoint { name: name.to_string() })
    }

    /// RELEASE SAVEPOINT `name`: it and every savepoint taken after it are forgotten; what
    /// was staged since stays.
    pub fn release_savepoint(&mut self, name: &str) -> Result<(), WriteError> {
        let at = self.savepoint_position(name)?;
        self.savepoints.truncate(at);
        Ok(())
    }

    /// ROLLBACK TO SAVEPOINT `name`: everything staged since it was taken is dropped (rows
    /// inserted, rows deleted, and the kills of rows staged before it, which come back);
    /// it stays, the savepoints after it are forgotten. The change locks and row locks
    /// taken since stay held until the transaction ends (PostgreSQL releases a rolled-back
    /// subtransaction's row locks; holding them longer can make another writer wait, never
    /// read or write wrongly).
    pub fn rollback_to_savepoint(&mut self, name: &str) -> Result<(), WriteError> {
        let at = self.savepoint_position(name)?;
        let steps = self.savepoints[at].1;
        self.savepoints.truncate(at + 1);
        self.unstage_to(steps);
        Ok(())
    }

    /// Discards what was staged (nothing was logged, so nothing else to undo).
    pub fn rollback(self) -> u64 {
        self.row_count()
    }

    /// Whether the commit is acknowledged after its log flush (`Strict`, the default) or
    /// before it (`Delayed`: SQL's `synchronous_commit = off`).
    pub fn set_durability(&mut self, durability: Durability) {
        self.durability = durability;
    }

    pub fn durability(&self) -> Durability {
        self.durability
    }
}

/// Encodes `batches` with `encoder` into `out` (cleared first): per partition, each row in
/// the page's own encoding, straight from the encoder's row buffer (no page built).
fn encode_into(encoder: &mut BatchEncoder, batches: &[RecordBatch], out: &mut PartitionRows) -> Result<u64, WriteError> {
    for p in out.iter_mut() {
        p.clear();
    }
    let mut row_count = 0u64;
    for b in batches {
        row_count += encoder.encode_rows(b, &mut |partition: u32, row: &[u8]| out[partition as usize].push(row.to_vec()))?;
    }
    Ok(row_count)
}

fn new_encoder(table: &TableMeta) -> Result<BatchEncoder, WriteError> {
    let partition_by = table.column_index(&table.partition_by)?;
    Ok(BatchEncoder::new(&table.name, &table.columns, partition_by, table.partitions.len() as u32))
}

/// Where a commit's rows go, found under the state mutex.
struct Target {
    table_id: u32,
    delta: Arc<TableDelta>,
}

impl WritePath {
    /// The table `name` as it is now, refusing databases without a log.
    pub(crate) fn table_for_insert(&self, st: &State, name: &str) -> Result<(String, Option<u32>, TableMeta), WriteError> {
        WritePath::require_writer(st)?;
        if st.catalog.host.is_some() {
            // Only where it refuses: the message is built per statement otherwise (seen in
            // the server's profile of single-row INSERTs).
            self.refuse_cluster_host(st, &format!("INSERT into {name}"))?;
        }
        let key = key_of(&st.catalog, name).ok_or_else(|| {
            WriteError::Storage(StorageError::UnknownTable { name: name.to_string(), known: st.catalog.tables.keys().cloned().collect::<Vec<_>>().join(", ") })
        })?;
        let table = st.catalog.tables[&key].clone();
        let id = st.catalog.write.as_ref().and_then(|m| m.table_ids.get(&key).copied());
        Ok((key, id, table))
    }

    /// Adds one statement's rows to `txn` (validated and encoded now, logged at commit).
    /// On error `txn` is unchanged. Returns the rows staged.
    pub fn stage_insert(&self, txn: &mut Transaction, table_name: &str, batches: &[RecordBatch]) -> Result<u64, WriteError> {
        self.stage_rows(txn, table_name, batches, false)
    }

    /// UPDATE's new versions of the rows it deleted (`stage_delete`), in the same order.
    /// `assigned`: per table column, whether the UPDATE assigns it; when it assigns no
    /// column of a unique index, the new versions keep their old versions' keys and are
    /// not checked for uniqueness again (`check_unique`'s `keys_kept`).
    pub fn stage_new_versions(&self, txn: &mut Transaction, table_name: &str, batches: &[RecordBatch], assigned: &[bool]) -> Result<u64, WriteError> {
        let keys_kept = {
            let st = self.lock_state_shared()?;
            let (_, _, table) = self.table_for_insert(&st, table_name)?;
            let assigns = |c: &str| table.column_index(c).map_or(true, |i| assigned.get(i).copied().unwrap_or(true));
            table.indexes.iter().filter(|i| i.unique).all(|i| !i.columns.iter().any(|c| assigns(c)))
        };
        self.stage_rows(txn, table_name, batches, keys_kept)
    }

    fn stage_rows(&self, txn: &mut Transaction, table_name: &str, batches: &[RecordBatch], keys_kept: bool) -> Result<u64, WriteError> {
        // A log stopped by an I/O error (a full disk) is reopened first, if it can be: the
        // lookup below needs the writer.
        self.prepare_commit(table_name, 0)?;
        let (key, table_id, table) = {
            let st = self.lock_state_shared()?;
            self.table_for_insert(&st, table_name)?
        };
        // A first build of the table's indexes reads the table: a caller that asked not to
        // wait makes this call again where it may. (A key held by another transaction makes
        // `check_unique` answer `WouldWait` to it too.)
        if txn.no_wait && !keys_kept && table.indexes.iter().any(|i| i.unique) && !self.unique_indexes_ready(&key) {
            return Err(WriteError::WouldWait { table: key });
        }
        let mut rows: PartitionRows = vec![Vec::new(); table.partitions.len()];
        let n = encode_into(&mut new_encoder(&table)?, batches, &mut rows)?;
        if n > 0 {
            let unique_keys = self.check_unique(txn, &key, &table, &rows, keys_kept)?;
            txn.staged.push(Staged::of_rows(key, table_id, table, rows, unique_keys));
        }
        Ok(n)
    }

    /// Takes `table`'s change lock for `txn` (table_lock.rs): waits while another open
    /// transaction has changed the table; a deadlock fails with `WriteError::Deadlock`.
    /// UPDATE and DELETE call it before they read their snapshot, so the snapshot sees
    /// every change committed before theirs. Refuses a table UPDATE and DELETE cannot
    /// change yet (a table with `flashscan index create` indexes). Returns the table's
    /// catalog key.
    pub fn lock_for_change(&self, txn: &mut Transaction, table_name: &str) -> Result<String, WriteError> {
        let key = {
            let st = self.lock_state_shared()?;
            if key_of(&st.catalog, table_name).is_none() && st.catalog.view(table_name).is_some() {
                return Err(WriteError::NotSupported(format!("cannot UPDATE or DELETE view {table_name}: views are read-only (not supported): write into the table it reads")));
            }
            let (key, _, _) = self.table_for_insert(&st, table_name)?;
            let indexes: Vec<&str> = st.catalog.indexes_on(&key).map(|i| i.name.as_str()).collect();
            if !indexes.is_empty() {
                return Err(WriteError::NotSupported(format!(
                    "UPDATE and DELETE of table {key}: its indexes ({}) are not maintained by UPDATE and DELETE yet: drop them first (`flashscan index drop DB {key} INDEX`)",
                    indexes.join(", ")
                )));
            }
            key
        };
        self.take_change_lock(txn, &key, LockMode::Rows)?;
        Ok(key)
    }

    /// Takes the change lock of the table `key` for `txn` in `mode` (waiting for holders
    /// whose mode conflicts: table_lock.rs).
    pub(crate) fn take_change_lock(&self, txn: &mut Transaction, key: &str, mode: LockMode) -> Result<(), WriteError> {
        if txn.locks.locks.is_none() {
            txn.locks = LockHolder { txn: NEXT_TXN.fetch_add(1, Ordering::Relaxed), locks: Some(self.table_locks.clone()) };
        }
        if txn.no_wait {
            return match self.table_locks.try_acquire(txn.locks.txn, key, mode) {
                true => Ok(()),
                false => Err(WriteError::WouldWait { table: key.to_string() }),
            };
        }
        self.table_locks.acquire(txn.locks.txn, key, mode)
    }

    /// Locks the rows `ids` of table `key` (named as the delta `against` names them) for
    /// `txn`, waiting for transactions that hold them; then `RowsChanged` if a commit since
    /// `against`'s snapshot deleted or updated one of them: the statement reads again from
    /// a new snapshot, keeping the locks it has (table_lock.rs). Returns the ids as the
    /// current delta names them.
    fn lock_rows(&self, txn: &Transaction, key: &str, against: &Arc<TableDelta>, ids: Vec<RowId>) -> Result<(Vec<RowId>, Arc<TableDelta>), WriteError> {
        loop {
            let st = self.lock_state_shared()?;
            // The delta now: a checkpoint since the snapshot renamed its delta rows.
            let Some(now) = st.deltas.get(key).cloned() else {
                return Err(WriteError::SerializationFailure { table: key.to_string(), why: "the table was dropped, truncated or rewritten by ALTER TABLE since this statement read its rows".into() });
            };
            let now_ids = deletes_now(key, against, &now, ids.clone())?;
            let raw: Vec<u64> = now_ids.iter().map(|id| id.0).collect();
            match self.table_locks.try_lock_rows(txn.locks.txn, key, &raw) {
                RowsLocked::All => {
                    drop(st);
                    if let Some(id) = now.deleted().first_deleted(&now_ids) {
                        // READ COMMITTED reads the statement again; REPEATABLE READ cannot
                        // (its snapshot is the transaction's): PostgreSQL's 40001.
                        return Err(match txn.isolation {
                            crate::snapshot::Isolation::ReadCommitted => WriteError::RowsChanged { table: key.to_string() },
                            crate::snapshot::Isolation::RepeatableRead => WriteError::SerializationFailure {
                                table: key.to_string(),
                                why: format!("could not serialize access due to concurrent update (row {:#x} was changed by a transaction that committed after this REPEATABLE READ transaction's snapshot)", id.0),
                            },
                        });
                    }
                    return Ok((now_ids, now));
                }
                // The rows taken so far stay held (the transaction takes them again).
                RowsLocked::HeldBy { .. } if txn.no_wait => return Err(WriteError::WouldWait { table: key.to_string() }),
                RowsLocked::HeldBy { row, holder: _ } => {
                    drop(st);
                    self.table_locks.wait_for_row(txn.locks.txn, key, row)?;
                }
            }
        }
    }

    /// Stages deletions of `row_ids` (as `snapshot` names the rows of `table_name`, read
    /// after `lock_for_change`) into `txn`; logged at commit. A row the transaction staged
    /// itself (a staged row id, own_writes.rs) is killed instead: never logged. A committed
    /// row it deleted already cannot be named again (its statements do not read it).
    pub fn stage_delete(&self, txn: &mut Transaction, table_name: &str, snapshot: &crate::snapshot::SnapshotTable, row_ids: &[u64]) -> Result<u64, WriteError> {
        let (key, table_id, table) = {
            let st = self.lock_state_shared()?;
            self.table_for_insert(&st, table_name)?
        };
        if txn.locks.locks.is_none() || !self.table_locks.holds(txn.locks.txn, &key, LockMode::Rows) {
            return Err(WriteError::InvalidArgument(format!("DELETE from {key}: the transaction does not hold the table's change lock (lock_for_change first)")));
        }
        if row_ids.is_empty() {
            return Ok(0);
        }
        let mut ids: Vec<RowId> = row_ids.iter().map(|r| RowId(*r)).collect();
        ids.sort_unstable();
        ids.dedup();
        let n = ids.len() as u64;
        let (kills, ids) = crate::own_writes::split_staged(txn, &key, ids)?;
        let (ids, against) = if ids.is_empty() {
            (ids, None)
        } else {
            let (ids, now) = self.lock_rows(txn, &key, snapshot.delta(), ids)?;
            // Its statements read through their own deletes (own_writes.rs), so none names a
            // row it deleted. Checked in debug builds only: the set of every earlier delete
            // per statement was 10 % of the server's CPU at 4,000 UPDATEs in one block.
            #[cfg(debug_assertions)]
            {
                let earlier: std::collections::HashSet<RowId> = txn.staged.iter().filter(|s| s.key == key && s.deletes_against.as_ref().is_some_and(|a| Arc::ptr_eq(a, &now))).flat_map(|s| s.deletes.iter().copied()).collect();
                debug_assert!(!ids.iter().any(|id| earlier.contains(id)), "table {key}: a row this transaction deleted was read again");
            }
            (ids, Some(now))
        };
        txn.staged.push(Staged { kills, deletes: ids, deletes_against: against, ..Staged::of_rows(key, table_id, table, Vec::new(), Vec::new()) });
        Ok(n)
    }

    /// Commits everything `txn` staged as one transaction: every row logged, one commit
    /// record, durable before this returns; then visible. Returns the rows committed.
    pub fn commit_transaction(&self, mut txn: Transaction) -> Result<u64, WriteError> {
        self.commit_staged_then(&mut txn.staged, true, txn.durability)
    }

    /// The table id of `key` now, giving a loaded table its first id (one catalog commit).
    fn table_id_now(&self, st: &mut State, key: &str, staged_id: Option<u32>) -> Result<u32, WriteError> {
        let existing = st.catalog.write.as_ref().and_then(|m| m.table_ids.get(key).copied());
        match (existing, staged_id) {
            (Some(now), Some(then)) if now == then => Ok(now),
            (Some(now), None) if st.catalog.tables.contains_key(key) => Ok(now),
            (None, None) if st.catalog.tables.contains_key(key) => {
                let mut next = st.catalog.clone();
                let mut meta = meta_of(&next, self.db_dir())?;
                let id = meta.next_table_id;
                meta.next_table_id = id.checked_add(1).ok_or_else(|| WriteError::InvalidArgument("the database has used all 2^32 table ids".into()))?;
                meta.table_ids.insert(key.to_string(), id);
                next.write = Some(meta);
                next.generation += 1;
                next.write_atomic(self.db_dir())?;
                st.catalog = next;
                Ok(id)
            }
            _ => Err(WriteError::InvalidArgument(format!(
                "table {key} was dropped or created again (or rewritten by ALTER TABLE, or truncated) since these rows were prepared for it; nothing was written: run the transaction again"
            ))),
        }
    }

    /// The commit, then (when `checkpoint`) an automatic checkpoint if one is due.
    pub(crate) fn commit_staged_then(&self, staged: &mut [Staged], checkpoint: bool, durability: Durability) -> Result<u64, WriteError> {
        crate::own_writes::settle(staged);
        let row_count: u64 = staged.iter().map(|s| s.inserted_count() + s.deletes.len() as u64).sum();
        if row_count == 0 {
            return Ok(0);
        }
        // Each row also costs its slot and a share of its page's header (what the delta's
        // bound counts).
        let statement_bytes: u64 = staged.iter().flat_map(|s| s.rows.iter().flatten()).map(|r| r.len() as u64 + 4).sum();
        self.prepare_commit(&staged[0].key, statement_bytes)?;
        let committed = self.commit_staged_gated(staged, row_count, durability)?;
        // Committed and visible: whatever an automatic checkpoint does now, the rows stay
        // (its failure is kept in `auto_checkpoint_stats` and the rows stay in the log).
        if checkpoint {
            let _ = self.checkpoint_if_due();
        }
        Ok(committed)
    }

    /// The commit itself, under the commit gate (shared): logged, durable (or, delayed,
    /// acknowledged with its flush due within the bound), then visible.
    fn commit_staged_gated(&self, staged: &mut [Staged], row_count: u64, durability: Durability) -> Result<u64, WriteError> {
        let _gate = self.commit_gate();
        let logged = self.log_staged(staged)?;
        if let Err(e) = logged.acknowledge(durability) {
            // Best effort: without a durable commit record redo skips these rows anyway.
            let _ = logged.wal.abort(logged.txn);
            return Err(e.into());
        }
        append_to_deltas(&self.visibility, staged, &logged.targets)?;
        Ok(row_count)
    }

    /// Logs every staged row and the commit record (not waited for), the caller holding the
    /// commit gate. On an error nothing is committed (an abort record is appended).
    fn log_staged(&self, staged: &mut [Staged]) -> Result<Logged, WriteError> {
        let (wal, targets) = {
            let mut st = self.lock_state_shared()?;
            let wal = WritePath::wal_shared(&st)?;
            let mut targets = Vec::with_capacity(staged.len());
            for s in staged.iter_mut() {
                // A loaded table's first INSERT gives it an id: one catalog commit, once.
                let table_id = self.table_id_now(&mut st, &s.key, s.table_id)?;
                s.table_id = Some(table_id);
                let delta = match st.deltas.get(&s.key) {
                    Some(d) => d.clone(),
                    None => {
                        // On top of the table's pages as committed (what snapshots pair it with).
                        let d = Arc::new(TableDelta::new(st.catalog.tables.get(&s.key).unwrap_or(&s.table)));
                        st.deltas.insert(s.key.clone(), d.clone());
                        d
                    }
                };
                if !s.rows.is_empty() {
                    crate::index_write::refuse_unchecked(s, &delta)?;
                }
                if let Some(against) = &s.deletes_against {
                    s.deletes = deletes_now(&s.key, against, &delta, std::mem::take(&mut s.deletes))?;
                    s.deletes_against = Some(delta.clone());
                    // The change lock keeps every other transaction's deletions of this
                    // table out since the snapshot these rows were read from.
                    if let Some(id) = delta.deleted().first_deleted(&s.deletes) {
                        return Err(WriteError::SerializationFailure { table: s.key.clone(), why: format!("row {:#x} was deleted by another transaction after this one read it", id.0) });
                    }
                }
                targets.push(Target { table_id, delta });
            }
            (wal, targets)
        };
        let txn = wal.begin();
        let logged = (|| {
            for (s, t) in staged.iter_mut().zip(&targets) {
                s.lsns.resize(s.rows.len(), Vec::new());
                for (partition, part_rows) in s.rows.iter_mut().enumerate() {
                    let lsns = &mut s.lsns[partition];
                    lsns.clear();
                    for row in part_rows.iter_mut() {
                        // The row moves into the record and back: no copy per row.
                        let record = Record::Insert(InsertRow { txn, table_id: t.table_id, partition: partition as u32, page_no: 0, row: std::mem::take(row) });
                        let appended = wal.append(&record);
                        if let Record::Insert(r) = record {
                            *row = r.row;
                        }
                        lsns.push(appended?.lsn.0);
                    }
                }
                for id in &s.deletes {
                    assert!(!id.is_staged(), "a staged row is killed, never logged as deleted (own_writes.rs)");
                    wal.append(&Record::Delete(DeleteRow { txn, table_id: t.table_id, row_id: id.0 }))?;
                }
            }
            wal.append(&Record::Commit { txn })
        })();
        match logged {
            Ok(commit) => Ok(Logged { wal, targets, txn, commit_end: commit.end }),
            Err(e) => {
                // Best effort: without a commit record redo skips these rows anyway.
                let _ = wal.abort(txn);
                Err(e.into())
            }
        }
    }

    /// For async callers: logs `txn`'s rows and its commit record without blocking, and
    /// returns the commit to await ([`PendingCommit::durable`]). Hands `txn` back
    /// (`Ok(Err(txn))`, nothing logged) when committing would block: a stopped log to
    /// restart, no room under the delta's bound, a checkpoint or DDL holding the commit
    /// gate, or nothing staged — the caller then commits it on a thread
    /// ([`WritePath::commit_transaction`]). Never blocks beyond the state mutexes, except
    /// for the one catalog commit of a loaded table's first INSERT and an appender waiting
    /// for room in a full log buffer.
    pub fn try_begin_commit(&self, mut txn: Transaction) -> Result<Result<PendingCommit<'_>, Transaction>, WriteError> {
        crate::own_writes::settle(&mut txn.staged);
        let row_count = txn.row_count();
        let statement_bytes: u64 = txn.staged.iter().flat_map(|s| s.rows.iter().flatten()).map(|r| r.len() as u64 + 4).sum();
        if row_count == 0 || self.commit_would_block(statement_bytes)? {
            return Ok(Err(txn));
        }
        let Some(gate) = self.try_commit_gate() else { return Ok(Err(txn)) };
        let Transaction { mut staged, locks, durability, no_wait: _, savepoints: _, isolation: _, base: _ } = txn;
        let logged = self.log_staged(&mut staged)?;
        Ok(Ok(PendingCommit { _gate: gate, visibility: &self.visibility, logged, staged, row_count, finished: false, _locks: locks, durability }))
    }

    /// A prepared insert into `table`: the embedded API for many small statements and
    /// commits (what `flashscan bench inserts` measures). The table is looked up and the
    /// page encoder made once; each `execute` is then one statement of the open
    /// transaction, each `commit` one commit through the same protocol as SQL INSERT.
    pub fn prepare_insert(&self, table_name: &str) -> Result<PreparedInsert<'_>, WriteError> {
        let (key, table_id, table) = {
            let st = self.lock_state_shared()?;
            self.table_for_insert(&st, table_name)?
        };
        let encoder = new_encoder(&table)?;
        let rows: PartitionRows = vec![Vec::new(); table.partitions.len()];
        let statement_rows = rows.clone();
        let staged = Staged::of_rows(key.clone(), table_id, table.clone(), rows, Vec::new());
        Ok(PreparedInsert { write: self, encoder, txn: Transaction { staged: vec![staged], ..Transaction::default() }, statement_rows, key, table })
    }
}

/// What `log_staged` logged.
struct Logged {
    wal: Arc<Wal>,
    targets: Vec<Target>,
    txn: TxnId,
    /// One past the commit record: the commit is durable once the log is up to here.
    commit_end: Lsn,
}

impl Logged {
    /// Waits on this thread until the commit may be acknowledged: durable (strict), or
    /// handed to the log writer's bounded delay (delayed).
    fn acknowledge(&self, durability: Durability) -> Result<(), WalError> {
        match durability {
            Durability::Strict => self.wal.wait_durable(self.commit_end),
            Durability::Delayed => self.wal.commit_delayed(self.commit_end),
        }
    }
}

/// The rows of a commit whose record is durable join the deltas (visible from now on).
/// A commit's rows into its tables' deltas, all of them before any snapshot can see one
/// (snapshot.rs).
fn append_to_deltas(visibility: &Visibility, staged: &[Staged], targets: &[Target]) -> Result<(), WriteError> {
    // Index entries first: a reader checks every id against its snapshot, so entries of
    // rows not yet visible are harmless, and a row visible without its entry never is.
    for (s, t) in staged.iter().zip(targets) {
        crate::index_write::enter_rows(s, &t.delta)?;
    }
    let publishing = visibility.publish();
    let mut seq = None;
    for (s, t) in staged.iter().zip(targets) {
        for (partition, part_rows) in s.rows.iter().enumerate() {
            if !part_rows.is_empty() {
                t.delta.append_rows(partition, part_rows, &s.lsns[partition])?;
            }
        }
        if !s.deletes.is_empty() {
            let seq = *seq.get_or_insert_with(|| visibility.next_seq(&publishing));
            t.delta.deleted().add(&s.deletes, seq);
        }
    }
    Ok(())
}

/// `ids`, read from the delta `against`, as the table's delta `now` names them: the same
/// when no checkpoint came between; the delta rows that checkpoint moved into pages under
/// their page ids; older than that, the transaction must run again.
pub(crate) fn deletes_now(key: &str, against: &Arc<TableDelta>, now: &Arc<TableDelta>, ids: Vec<RowId>) -> Result<Vec<RowId>, WriteError> {
    if Arc::ptr_eq(against, now) {
        return Ok(ids);
    }
    // Along the checkpoints since `against`: each moved that delta's rows into pages.
    let mut ids = ids;
    let mut link = against.successor();
    while let Some(step) = link {
        ids = ids
            .into_iter()
            .map(|id| match (id.is_delta(), step.moved.get(&id.0)) {
                (false, _) => Ok(id),
                (true, Some(to)) => Ok(RowId(*to)),
                // A delta row of an earlier delta than this step's was moved by an earlier step.
                (true, None) => Err(WriteError::Corrupt { lsn: id.delta_lsn().unwrap_or(0), what: format!("table {key}: a delta row the checkpoint did not move") }),
            })
            .collect::<Result<_, _>>()?;
        if step.id == now.id() {
            return Ok(ids);
        }
        link = step.successor.get();
    }
    Err(WriteError::SerializationFailure { table: key.to_string(), why: "the table was truncated, dropped, rewritten by ALTER TABLE or reopened since this transaction read the rows it changes".into() })
}

/// A commit logged by [`WritePath::try_begin_commit`], waiting for its flush. It holds the
/// commit gate until its rows are in the deltas. Await [`PendingCommit::durable`]; if it is
/// dropped before that finishes (the awaiting task went away: a client disconnected), the
/// drop waits for the flush on its thread and finishes the commit all the same — its
/// commit record is in the log and redo would replay it, so its rows must be visible now
/// too (and in the deltas before any checkpoint's redo point passes them).
pub struct PendingCommit<'a> {
    _gate: SharedGate<'a>,
    visibility: &'a Visibility,
    logged: Logged,
    staged: Vec<Staged>,
    row_count: u64,
    finished: bool,
    /// The transaction's change locks, released once its changes are visible (fields drop
    /// after `drop` has finished the commit).
    _locks: LockHolder,
    durability: Durability,
}

impl std::fmt::Debug for PendingCommit<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PendingCommit({} rows, durable at LSN {})", self.row_count, self.logged.commit_end)
    }
}

impl PendingCommit<'_> {
    /// Resolves once the commit is durable and its rows visible, with the rows committed.
    /// A delayed commit resolves at once (acknowledged before its flush, no await).
    pub async fn durable(mut self) -> Result<u64, WriteError> {
        if self.durability == Durability::Delayed {
            // Never leads a flush: this runs on an async worker thread.
            let acknowledged = self.logged.wal.commit_delayed_without_leading(self.logged.commit_end);
            return self.finish(acknowledged);
        }
        let wal = self.logged.wal.clone();
        let result = wal.durable(self.logged.commit_end).await;
        self.finish(result)
    }

    /// Waits on this thread until the commit is durable (leading the log flush when none
    /// in flight covers it, `Wal::wait_durable`; a delayed commit does not wait) and its
    /// rows visible.
    pub fn wait(mut self) -> Result<u64, WriteError> {
        let durable = self.logged.acknowledge(self.durability);
        self.finish(durable)
    }

    /// Whether [`PendingCommit::wait`] now would lead a log flush rather than wait for one
    /// already in flight (`Wal::would_lead_flush`; a hint).
    pub fn would_lead_flush(&self) -> bool {
        self.durability == Durability::Strict && self.logged.wal.would_lead_flush(self.logged.commit_end)
    }

    fn finish(&mut self, durable: Result<(), WalError>) -> Result<u64, WriteError> {
        self.finished = true;
        match durable {
            Ok(()) => {
                append_to_deltas(self.visibility, &self.staged, &self.logged.targets)?;
                Ok(self.row_count)
            }
            Err(e) => {
                // Best effort: without a durable commit record redo skips these rows anyway.
                let _ = self.logged.wal.abort(self.logged.txn);
                Err(e.into())
            }
        }
    }
}

impl Drop for PendingCommit<'_> {
    fn drop(&mut self) {
        if !self.finished {
            let durable = self.logged.acknowledge(self.durability);
            let _ = self.finish(durable);
        }
    }
}

/// See [`WritePath::prepare_insert`]. One per thread: its methods take `&mut self`.
///
/// It holds one open transaction: [`PreparedInsert::execute`] adds one statement's rows
/// to it (a prepared INSERT executed with new parameters: validated, encoded and checked
/// against the table's unique indexes — PRIMARY KEY, UNIQUE — now), [`PreparedInsert::commit`]
/// commits them all with one commit record; [`PreparedInsert::insert`] is one statement
/// and its commit.
pub struct PreparedInsert<'a> {
    write: &'a WritePath,
    encoder: BatchEncoder,
    /// The open transaction; its one staged entry (this table) is reused by every commit
    /// (its row vectors keep their capacity).
    txn: Transaction,
    /// One statement's rows, encoded and checked before they join the transaction.
    statement_rows: PartitionRows,
    /// The table's key and meta as prepared (also in the staged entry, which the key check
    /// borrows mutably with the transaction: kept here once rather than cloned per statement).
    key: String,
    table: TableMeta,
}

impl PreparedInsert<'_> {
    /// The table's columns, in order (what each batch must hold).
    pub fn table(&self) -> &TableMeta {
        &self.txn.staged[0].table
    }

    /// Commits acknowledged after their log flush (the default) or before it
    /// (`Durability::Delayed`, flashscan_wal::durability has what a crash may lose).
    pub fn set_durability(&mut self, durability: Durability) {
        self.txn.durability = durability;
    }

    /// Adds one statement's rows to the open transaction. On an error (a bad value, a
    /// repeated key) the statement adds nothing and the transaction stays open with its
    /// earlier statements. Returns the rows added.
    pub fn execute(&mut self, batch: &RecordBatch) -> Result<u64, WriteError> {
        let n = encode_into(&mut self.encoder, std::slice::from_ref(batch), &mut self.statement_rows)?;
        if n == 0 {
            return Ok(0);
        }
        let keys = self.write.check_unique(&mut self.txn, &self.key, &self.table, &self.statement_rows, false)?;
        let staged = &mut self.txn.staged[0];
        for (into, rows) in staged.rows.iter_mut().zip(self.statement_rows.iter_mut()) {
            into.append(rows);
        }
        for (index, index_keys) in keys {
            match staged.unique_keys.iter_mut().find(|(name, _)| *name == index) {
                Some((_, ks)) => ks.extend(index_keys),
                None => staged.unique_keys.push((index, index_keys)),
            }
        }
        Ok(n)
    }

    /// Commits the open transaction (every statement since the last commit): one commit
    /// record, acknowledged as its durability says; then visible. Whatever the outcome the
    /// transaction is over (its rows gone, its locks released). Returns the rows committed.
    pub fn commit(&mut self) -> Result<u64, WriteError> {
        let durability = self.txn.durability;
        let committed = self.write.commit_staged_then(&mut self.txn.staged, true, durability);
        self.end_transaction();
        committed
    }

    /// Discards the open transaction's statements (nothing was logged). Returns their rows.
    pub fn rollback(&mut self) -> u64 {
        let n = self.txn.inserted_count();
        self.end_transaction();
        n
    }

    /// Inserts the batch's rows as one statement and commits the open transaction (one
    /// transaction when none was open); returns the rows committed.
    pub fn insert(&mut self, batch: &RecordBatch) -> Result<u64, WriteError> {
        if let Err(e) = self.execute(batch) {
            self.rollback();
            return Err(e);
        }
        self.commit()
    }

    fn end_transaction(&mut self) {
        let staged = &mut self.txn.staged[0];
        for p in staged.rows.iter_mut() {
            p.clear();
        }
        staged.lsns.iter_mut().for_each(Vec::clear);
        staged.unique_keys.clear();
        // Dropping the holder releases the change, row and key locks.
        self.txn.locks = LockHolder::default();
    }
}
