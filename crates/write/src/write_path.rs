//! [`WritePath`]: the catalog, the deltas and (for the writer) the log of one database.
//!
//! A statement is a transaction: INSERT encodes every row first (type, NULL and size errors
//! stop it before anything is logged), logs each row (table id, partition, the row in the
//! page's own encoding), then one commit record, and returns only once that commit is
//! durable; then the rows join the delta, where scans see them. A failure anywhere before
//! the commit returns leaves nothing visible, and redo skips rows without a commit record.
//!
//! DDL (CREATE/DROP TABLE) is not logged: it is one atomic catalog commit, under the same
//! lock. Table ids in log records are never reused, so rows of a dropped table never come
//! back in a new table of the same name.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use arrow::record_batch::RecordBatch;
use flashscan_storage::column::ColumnDef;
use flashscan_storage::load::valid_table_name;
use flashscan_storage::partitioning::PARTITION_COUNT_MAX;
use flashscan_storage::placement::INTERLEAVE_BYTES_DEFAULT;
use flashscan_storage::{Catalog, ColumnDefaultMeta, FilegroupMeta, PartitionMeta, SequenceMeta, StorageError, TableMeta, WriteMeta};
use flashscan_wal::files::read_control;
use flashscan_wal::{scan_dir, DatabaseIdentity, LogEnd, RedoChange, Scan, Wal, WalConfig, WalError};

use crate::checkpoint::{CheckpointOptions, CheckpointReport};
use crate::delta::TableDelta;
use crate::error::WriteError;
use crate::gate::{CommitGate, ExclusiveGate, SharedGate};
use crate::limits::{CHECKPOINT_DELTA_BYTES_DEFAULT, CHECKPOINT_INTERVAL_S_DEFAULT, CHECKPOINT_LOG_BYTES_DEFAULT, DELTA_BYTES_MAX_DEFAULT};
use crate::lock::WriterLock;
use crate::snapshot::{ReadSnapshot, Visibility};
use crate::table_lock::TableLocks;

/// A table to create (from CREATE TABLE).
#[derive(Debug, Clone, Default)]
pub struct NewTable {
    pub name: String,
    pub columns: Vec<ColumnDef>,
    /// Hash partitions; the machine's cores when `None` (as `flashscan load`).
    pub partition_count: Option<u32>,
    /// The column rows are hashed on; the first column when `None`.
    pub partition_by: Option<String>,
    pub if_not_exists: bool,
    /// Its PRIMARY KEY and UNIQUE constraints, as indexes (checked here against the
    /// columns; a primary key's columns must be NOT NULL).
    pub indexes: Vec<flashscan_storage::KeyIndexDef>,
    /// Column DEFAULTs, SERIAL and identity columns (each column named must exist).
    pub column_defaults: Vec<flashscan_storage::ColumnDefaultMeta>,
    /// The sequences its SERIAL and identity columns draw from, created with it and owned
    /// by it (each name must be free).
    pub sequences: Vec<(String, flashscan_storage::SequenceMeta)>,
    /// A plain heap when `None`; a column store takes no PRIMARY KEY or UNIQUE.
    pub format: Option<flashscan_storage::TableFormat>,
}

/// What replaying the log did (on open and for `flashscan recover`).
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct RecoveryReport {
    pub redo_lsn: u64,
    pub end_lsn: u64,
    pub log_records_scanned: u64,
    pub committed_rows_replayed: u64,
    /// Committed rows before the catalog's redo point: already in pages (a checkpoint
    /// committed its catalog but did not end in the log before a crash).
    pub rows_already_in_pages: u64,
    pub rows_of_dropped_tables: u64,
    /// Committed deletions replayed (each a row of a page or of the delta).
    pub committed_deletes_replayed: u64,
    /// "clean", or where a torn tail (an unacknowledged flush cut by a crash) ended the log.
    pub log_end: String,
    /// Rows in each table's delta after replay.
    pub delta_rows: BTreeMap<String, u64>,
    /// `--verify`: rows decoded from every delta page (each page's checksum and rows checked).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verified_rows: Option<u64>,
    pub elapsed_s: f64,
}

/// The delta's memory bound and when checkpoints run by themselves (`limits` has the
/// defaults and their reasons).
#[derive(Debug, Clone)]
pub struct WriteLimits {
    /// Committed rows held in memory at most (all tables' deltas), bytes.
    pub delta_bytes_max: u64,
    /// After an INSERT: checkpoint once the deltas hold this much.
    pub checkpoint_delta_bytes: u64,
    /// After an INSERT: checkpoint once this much log was written since the redo point.
    pub checkpoint_log_bytes: u64,
    /// After an INSERT: checkpoint when the last one is older than this and rows wait.
    pub checkpoint_interval: Duration,
    /// Run the checkpoints above (off: only on demand; the bound still holds).
    pub auto_checkpoint: bool,
    /// How automatic checkpoints write.
    pub checkpoint: CheckpointOptions,
}

impl Default for WriteLimits {
    fn default() -> Self {
        WriteLimits {
            delta_bytes_max: DELTA_BYTES_MAX_DEFAULT,
            checkpoint_delta_bytes: CHECKPOINT_DELTA_BYTES_DEFAULT,
            checkpoint_log_bytes: CHECKPOINT_LOG_BYTES_DEFAULT,
            checkpoint_interval: Duration::from_secs(CHECKPOINT_INTERVAL_S_DEFAULT),
            auto_checkpoint: true,
            checkpoint: CheckpointOptions::default(),
        }
    }
}

/// What the automatic checkpoints did (for counters and `--json` printers).
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct AutoCheckpointStats {
    pub checkpoints_count: u64,
    /// "delta_bytes", "log_bytes", "interval" or "delta_bound" (to make room for an INSERT).
    pub last_reason: Option<String>,
    pub last_report: Option<CheckpointReport>,
    /// The last automatic checkpoint's failure (the INSERT it followed still committed).
    pub last_error: Option<String>,
    pub failures_count: u64,
}

struct Writer {
    /// Shared so a commit can wait for its flush without holding the state mutex (see
    /// `commit_gate`).
    wal: Arc<Wal>,
    _lock: WriterLock,
}

pub(crate) struct State {
    pub(crate) catalog: Catalog,
    pub(crate) deltas: BTreeMap<String, Arc<TableDelta>>,
    writer: Option<Writer>,
    pub(crate) recovery: RecoveryReport,
    pub(crate) limits: WriteLimits,
    pub(crate) last_checkpoint_at: Instant,
    pub(crate) auto: AutoCheckpointStats,
    /// The database lock, kept while a stopped log could not be reopened yet.
    stopped_log: Option<WriterLock>,
}

impl State {
    fn new(catalog: Catalog, deltas: BTreeMap<String, Arc<TableDelta>>, writer: Option<Writer>, recovery: RecoveryReport) -> State {
        State { catalog, deltas, writer, recovery, limits: WriteLimits::default(), last_checkpoint_at: Instant::now(), auto: AutoCheckpointStats::default(), stopped_log: None }
    }

    /// Memory the deltas hold now.
    pub(crate) fn delta_bytes(&self) -> u64 {
        self.deltas.values().map(|d| d.memory_bytes()).sum()
    }

    /// Log written since the catalog's redo point (LSNs are byte positions).
    fn log_bytes_since_redo(&self) -> u64 {
        let redo = self.catalog.write.as_ref().map(|m| m.redo_lsn).unwrap_or(0);
        match &self.writer {
            Some(w) => w.wal.durable_lsn().0.saturating_sub(redo),
            None => 0,
        }
    }

    /// Whether a table has deletions its deleted rows file does not hold yet.
    fn has_unwritten_deletes(&self) -> bool {
        self.deltas.iter().any(|(name, d)| self.catalog.tables.get(name).is_some_and(|t| d.deleted().total() != t.deleted_rows.as_ref().map(|m| m.row_count).unwrap_or(0)))
    }

    /// Why a checkpoint should run now, if one should.
    fn checkpoint_due(&self) -> Option<&'static str> {
        let l = &self.limits;
        let delta_bytes = self.delta_bytes();
        // Deletions not yet in a deleted rows file keep the log from recycling just as rows do.
        if delta_bytes == 0 && !self.has_unwritten_deletes() {
            return None;
        }
        if delta_bytes >= l.checkpoint_delta_bytes {
            return Some("delta_bytes");
        }
        if self.log_bytes_since_redo() >= l.checkpoint_log_bytes {
            return Some("log_bytes");
        }
        if self.last_checkpoint_at.elapsed() >= l.checkpoint_interval {
            return Some("interval");
        }
        None
    }
}

pub struct WritePath {
    db_dir: PathBuf,
    state: Mutex<State>,
    /// Commits hold it shared from their first log record until their rows are in the
    /// delta (the durable wait included, without the state mutex: many commits share one
    /// flush); `lock_state` (DDL, checkpoint, becoming the writer) holds it exclusive, so a
    /// checkpoint's redo point never falls between a commit's records and its delta rows.
    commit_gate: CommitGate,
    /// A commit's rows join all their tables' deltas at once with respect to snapshots
    /// (snapshot.rs).
    pub(crate) visibility: Visibility,
    /// Change locks of UPDATE and DELETE (table_lock.rs).
    pub(crate) table_locks: Arc<TableLocks>,
    /// Sequence values handed out since open (sequences.rs).
    pub(crate) sequences: crate::sequences::SequenceCounters,
}

/// The state with no commit in flight: what DDL and the checkpoint hold.
pub(crate) struct StateGuard<'a> {
    // Fields drop in order: the mutex before the gate (the gate is always taken first).
    st: MutexGuard<'a, State>,
    _gate: ExclusiveGate<'a>,
}

impl std::ops::Deref for StateGuard<'_> {
    type Target = State;
    fn deref(&self) -> &State {
        &self.st
    }
}

impl std::ops::DerefMut for StateGuard<'_> {
    fn deref_mut(&mut self) -> &mut State {
        &mut self.st
    }
}

impl std::fmt::Debug for WritePath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "WritePath({})", self.db_dir.display())
    }
}

pub(crate) fn poisoned() -> WriteError {
    WriteError::InvalidArgument("write path lock poisoned by a failed statement; restart".into())
}

pub(crate) fn meta_of(catalog: &Catalog, db_dir: &Path) -> Result<WriteMeta, WriteError> {
    catalog.write.clone().ok_or_else(|| {
        WriteError::NotSupported(format!(
            "{} has no write-ahead log yet (it was made by `flashscan load`), so there is nothing to checkpoint or recover: its first write (INSERT or CREATE TABLE in `flashscan sql` or `flashscan serve`) gives it one",
            db_dir.display()
        ))
    })
}

/// Gives a database made by `flashscan load` its write-ahead log, so that it takes writes
/// like one made by `flashscan init` (every database has a log). The caller holds the
/// database lock. Two steps: the log is created in `wal/` inside the database, then one
/// atomic catalog commit names it. A crash between them leaves a log that names this
/// database and holds no record (nothing can be logged before the catalog names the log);
/// the next call adopts it. Anything else already at `wal/` is refused and left untouched.
/// Returns the catalog as committed.
fn add_log(db_dir: &Path, catalog: &Catalog) -> Result<Catalog, WriteError> {
    debug_assert!(catalog.write.is_none(), "add_log on a database that has a log");
    let wal_path = db_dir.join(crate::init::DEFAULT_WAL_DIR_NAME);
    let label = std::path::absolute(db_dir).map_err(crate::error::file_err(db_dir))?.to_string_lossy().into_owned();
    let refuse = |why: String| WriteError::InvalidArgument(format!("{}: {why}; move it out of the database to let it take writes", wal_path.display()));
    let (id, redo_lsn) = match std::fs::symlink_metadata(&wal_path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let id: u128 = rand::random();
            Wal::create(WalConfig::new(&wal_path), DatabaseIdentity { id, label: label.clone() })?.close()?;
            (id, flashscan_wal::FIRST_RECORD_LSN.0)
        }
        Err(e) => return Err(crate::error::file_err(&wal_path)(e)),
        Ok(m) if !m.is_dir() => return Err(refuse("it is not a directory flashscan made".into())),
        Ok(_) => {
            let control = read_control(&wal_path).map_err(|e| refuse(format!("it is not a log flashscan can adopt ({e})")))?;
            if control.identity.label != label {
                return Err(refuse(format!("it holds the log of another database ({:?})", control.identity.label)));
            }
            let scan = scan_dir(&wal_path, control.segment_size_bytes, control.identity.id, control.checkpoint_redo_lsn)?;
            if !scan.records.is_empty() {
                return Err(refuse(format!("it holds a log of {} records that the catalog does not name", scan.records.len())));
            }
            (control.identity.id, control.checkpoint_redo_lsn.0)
        }
    };
    let mut next = catalog.clone();
    next.write = Some(WriteMeta {
        database_id: format!("{id:032x}"),
        wal_dir: crate::init::DEFAULT_WAL_DIR_NAME.to_string(),
        // New data files go where the load put its own: the volumes it declared.
        volumes: catalog.volumes.clone(),
        redo_lsn,
        next_table_id: 1,
        table_ids: BTreeMap::new(),
    });
    next.generation += 1;
    next.write_atomic(db_dir)?;
    Ok(next)
}

/// An empty delta for each table, with the table's deleted rows as of the last checkpoint.
fn empty_deltas(catalog: &Catalog, db_dir: &Path) -> Result<BTreeMap<String, Arc<TableDelta>>, WriteError> {
    catalog.tables.values().map(|t| Ok((t.name.clone(), Arc::new(TableDelta::open(t, db_dir)?)))).collect()
}

pub(crate) fn wal_dir_of(db_dir: &Path, meta: &WriteMeta) -> PathBuf {
    db_dir.join(&meta.wal_dir)
}

pub(crate) fn identity_of(db_dir: &Path, meta: &WriteMeta) -> Result<DatabaseIdentity, WriteError> {
    let id = u128::from_str_radix(&meta.database_id, 16)
        .map_err(|_| WriteError::Storage(StorageError::CatalogCorrupt { path: Catalog::path(db_dir), reason: format!("database id {:?}", meta.database_id) }))?;
    Ok(DatabaseIdentity { id, label: std::path::absolute(db_dir).unwrap_or_else(|_| db_dir.to_path_buf()).to_string_lossy().into_owned() })
}

/// Scans the log from its redo point without taking it (readers: a writer may be appending;
/// a block it is writing ends the scan as a torn tail, which only hides rows not yet
/// acknowledged when the scan read).
pub(crate) fn read_only_scan(db_dir: &Path, meta: &WriteMeta) -> Result<Scan, WriteError> {
    let dir = wal_dir_of(db_dir, meta);
    let identity = identity_of(db_dir, meta)?;
    let control = read_control(&dir)?;
    if control.identity.id != identity.id {
        return Err(WalError::Foreign {
            dir,
            found_label: control.identity.label,
            found_id: control.identity.id,
            expected_label: identity.label,
            expected_id: identity.id,
        }
        .into());
    }
    Ok(scan_dir(&dir, control.segment_size_bytes, identity.id, control.checkpoint_redo_lsn)?)
}

/// Table id -> name for the heap tables the catalog has (ids of dropped tables are absent).
fn tables_by_id(catalog: &Catalog, meta: &WriteMeta) -> BTreeMap<u32, String> {
    meta.table_ids.iter().filter(|(name, _)| catalog.tables.contains_key(*name)).map(|(name, id)| (*id, name.clone())).collect()
}

/// Redo: committed inserts from the catalog's redo point on, into fresh deltas.
fn replay(catalog: &Catalog, db_dir: &Path, meta: &WriteMeta, scan: &Scan) -> Result<(BTreeMap<String, Arc<TableDelta>>, RecoveryReport), WriteError> {
    let started = Instant::now();
    let deltas = empty_deltas(catalog, db_dir)?;
    let by_id = tables_by_id(catalog, meta);
    let mut report = RecoveryReport { redo_lsn: meta.redo_lsn, end_lsn: scan.end_lsn.0, log_records_scanned: scan.records.len() as u64, ..Default::default() };
    // Rows are appended per (table, partition) in log order; batching consecutive rows of
    // one partition keeps the delta's lock traffic low.
    for item in scan.redo() {
        let item = item?;
        let lsn = item.lsn().0;
        if lsn < meta.redo_lsn {
            report.rows_already_in_pages += 1;
            continue;
        }
        let Some(name) = by_id.get(&item.table_id()) else {
            report.rows_of_dropped_tables += 1;
            continue;
        };
        let Some(delta) = deltas.get(name) else {
            return Err(WriteError::Corrupt { lsn, what: format!("a row for table {name}, which has no delta") });
        };
        match item {
            RedoChange::Insert(insert) => {
                delta
                    .append_rows(insert.row.partition as usize, std::slice::from_ref(&insert.row.row), &[lsn])
                    .map_err(|e| WriteError::Corrupt { lsn, what: e.to_string() })?;
                report.committed_rows_replayed += 1;
            }
            RedoChange::Delete(delete) => {
                let id = crate::row_id::RowId(delete.row.row_id);
                // A staged row's id lives inside its transaction only (own_writes.rs).
                if id.is_staged() {
                    return Err(WriteError::Corrupt { lsn, what: format!("table {name}: a delete names row {:#x}, an id no commit logs", id.0) });
                }
                // A replayed deletion is as old as the snapshots there are: none yet.
                if delta.deleted().contains(id) {
                    return Err(WriteError::Corrupt { lsn, what: format!("table {name}: row {:#x} deleted twice", id.0) });
                }
                delta.deleted().add(&[id], crate::deleted::SEQ_DURABLE);
                report.committed_deletes_replayed += 1;
            }
        }
    }
    report.log_end = match &scan.end {
        LogEnd::Clean => "clean".into(),
        LogEnd::TornTail { at, what } => format!("torn tail at LSN {at} ({what}): an unacknowledged flush, dropped"),
    };
    report.delta_rows = deltas.iter().map(|(n, d)| (n.clone(), d.row_count())).collect();
    report.elapsed_s = started.elapsed().as_secs_f64();
    Ok((deltas, report))
}

/// The catalog key of a table named in SQL (names are stored in lower case).
pub(crate) fn key_of(catalog: &Catalog, name: &str) -> Option<String> {
    catalog.tables.keys().find(|k| k.eq_ignore_ascii_case(name)).cloned()
}

impl WritePath {
    /// Opens for reading: the catalog and the deltas replayed from the log without taking
    /// it. A database made by `flashscan load` has no log until its first write: nothing to
    /// replay, and [`WritePath::become_writer`] gives it one.
    pub fn open(db_dir: &Path) -> Result<WritePath, WriteError> {
        let catalog = Catalog::read(db_dir)?;
        let (deltas, recovery) = match catalog.write.clone() {
            Some(meta) => replay(&catalog, db_dir, &meta, &read_only_scan(db_dir, &meta)?)?,
            None => (empty_deltas(&catalog, db_dir)?, RecoveryReport::default()),
        };
        Ok(WritePath {
            db_dir: db_dir.to_path_buf(),
            state: Mutex::new(State::new(catalog, deltas, None, recovery)),
            commit_gate: CommitGate::default(),
            visibility: Visibility::default(),
            table_locks: Arc::default(),
            sequences: Default::default(),
        })
    }

    /// Opens as the one writer: the database lock, the log (recovery: scan from the redo
    /// point, torn tail vs corruption, new epoch), redo into the deltas.
    pub fn open_writer(db_dir: &Path, holder: &str) -> Result<WritePath, WriteError> {
        let catalog = Catalog::read(db_dir)?;
        meta_of(&catalog, db_dir)?;
        let wp = WritePath {
            db_dir: db_dir.to_path_buf(),
            state: Mutex::new(State::new(catalog, BTreeMap::new(), None, RecoveryReport::default())),
            commit_gate: CommitGate::default(),
            visibility: Visibility::default(),
            table_locks: Arc::default(),
            sequences: Default::default(),
        };
        wp.become_writer(holder)?;
        Ok(wp)
    }

    pub fn db_dir(&self) -> &Path {
        &self.db_dir
    }

    /// The state, once no commit is in flight (and none starts until it is dropped).
    pub(crate) fn lock_state(&self) -> Result<StateGuard<'_>, WriteError> {
        let gate = self.commit_gate.exclusive();
        Ok(StateGuard { st: self.lock_state_shared()?, _gate: gate })
    }

    /// The state mutex alone: for reading it, and for commits (which hold `commit_gate`).
    pub(crate) fn lock_state_shared(&self) -> Result<MutexGuard<'_, State>, WriteError> {
        self.state.lock().map_err(|_| poisoned())
    }

    /// Held by a commit from its first log record to its rows in the delta.
    pub(crate) fn commit_gate(&self) -> SharedGate<'_> {
        self.commit_gate.shared()
    }

    /// The commit gate if it can be had without waiting (a checkpoint or DDL holds or
    /// waits for it otherwise).
    pub(crate) fn try_commit_gate(&self) -> Option<SharedGate<'_>> {
        self.commit_gate.try_shared()
    }

    pub fn is_writer(&self) -> bool {
        self.lock_state_shared().map(|s| s.writer.is_some()).unwrap_or(false)
    }

    /// Takes the lock and the log (if not held yet), re-reads the catalog and replays the
    /// log again: another writer may have committed since this reader opened. A database
    /// made by `flashscan load` gets its log here (`add_log`). Returns true when it changed
    /// anything (the caller re-registers its tables).
    pub fn become_writer(&self, holder: &str) -> Result<bool, WriteError> {
        // Every INSERT asks: answer from the mutex alone, without draining commits.
        if self.is_writer() {
            return Ok(false);
        }
        let mut st = self.lock_state()?;
        if st.writer.is_some() {
            return Ok(false);
        }
        let lock = WriterLock::acquire(&self.db_dir, holder)?;
        let catalog = Catalog::read(&self.db_dir)?;
        let catalog = match catalog.write {
            Some(_) => catalog,
            None => add_log(&self.db_dir, &catalog)?,
        };
        let meta = meta_of(&catalog, &self.db_dir)?;
        let identity = identity_of(&self.db_dir, &meta)?;
        let (wal, scan) = Wal::open(WalConfig::new(wal_dir_of(&self.db_dir, &meta)), &identity)?;
        let (deltas, recovery) = replay(&catalog, &self.db_dir, &meta, &scan)?;
        let limits = st.limits.clone();
        *st = State::new(catalog, deltas, Some(Writer { wal: Arc::new(wal), _lock: lock }), recovery);
        st.limits = limits;
        Ok(true)
    }

    pub fn catalog(&self) -> Result<Catalog, WriteError> {
        Ok(self.lock_state_shared()?.catalog.clone())
    }

    /// `f` of the table named `name` (any case) as the catalog has it now, without copying
    /// the catalog; None when there is no such table.
    pub fn with_table<R>(&self, name: &str, f: impl FnOnce(&TableMeta) -> R) -> Result<Option<R>, WriteError> {
        let st = self.lock_state_shared()?;
        Ok(key_of(&st.catalog, name).map(|k| f(&st.catalog.tables[&k])))
    }

    /// Every heap table's committed rows as of now, each transaction whole or not at all:
    /// what one statement reads (snapshot.rs).
    pub fn read_snapshot(&self) -> Result<ReadSnapshot, WriteError> {
        let no_commit_publishes = self.visibility.read();
        let st = self.lock_state_shared()?;
        #[cfg(debug_assertions)]
        for (name, delta) in &st.deltas {
            // The pairing the snapshot relies on: a table's pages change only together
            // with a fresh delta (checkpoint, CREATE TABLE). Its index definitions change
            // alone (CREATE/DROP INDEX keep the delta and its `TableIndexes` up to date), and
            // so do ANALYZE's statistics (read from the catalog, never from the delta).
            let without_indexes = |t: &TableMeta| TableMeta { indexes: Vec::new(), statistics: None, ..t.clone() };
            debug_assert!(st.catalog.tables.get(name).map(without_indexes) == Some(without_indexes(delta.table_meta())), "table {name}: the catalog and its delta's pages differ");
        }
        Ok(ReadSnapshot::new(&st.deltas, self.visibility.seq(&no_commit_publishes)))
    }

    pub fn delta(&self, table: &str) -> Option<Arc<TableDelta>> {
        let st = self.lock_state_shared().ok()?;
        let key = key_of(&st.catalog, table)?;
        st.deltas.get(&key).cloned()
    }

    /// Sets the delta's bound and the automatic checkpoint's triggers.
    pub fn set_limits(&self, limits: WriteLimits) -> Result<(), WriteError> {
        if limits.checkpoint.max_async_io == 0 || limits.checkpoint.max_async_io > crate::limits::MAX_ASYNC_IO_MAX {
            return Err(WriteError::InvalidArgument(format!("max_async_io {}: use 1 to {}", limits.checkpoint.max_async_io, crate::limits::MAX_ASYNC_IO_MAX)));
        }
        self.lock_state()?.limits = limits;
        Ok(())
    }

    pub fn limits(&self) -> Result<WriteLimits, WriteError> {
        Ok(self.lock_state()?.limits.clone())
    }

    /// Memory the deltas hold now (what `delta_bytes_max` bounds).
    pub fn delta_bytes(&self) -> Result<u64, WriteError> {
        Ok(self.lock_state()?.delta_bytes())
    }

    pub fn auto_checkpoint_stats(&self) -> Result<AutoCheckpointStats, WriteError> {
        Ok(self.lock_state()?.auto.clone())
    }

    /// Whether an automatic checkpoint is due now (`WriteLimits`' triggers): the state
    /// mutex alone, no commit drained. For a caller of [`WritePath::insert_without_checkpoint`].
    pub fn checkpoint_is_due(&self) -> bool {
        self.lock_state_shared().is_ok_and(|st| st.writer.is_some() && st.limits.auto_checkpoint && st.checkpoint_due().is_some())
    }

    /// Runs a checkpoint now if one is due (`WriteLimits`' triggers); what `insert` calls
    /// after each commit, and what a server may call on a timer.
    pub fn checkpoint_if_due(&self) -> Result<Option<CheckpointReport>, WriteError> {
        // Asked after every commit: answer from the state mutex alone, and drain the commits
        // in flight (the exclusive gate) only when a checkpoint is due.
        {
            let st = self.lock_state_shared()?;
            if st.writer.is_none() || !st.limits.auto_checkpoint || st.checkpoint_due().is_none() {
                return Ok(None);
            }
        }
        let mut st = self.lock_state()?;
        if st.writer.is_none() || !st.limits.auto_checkpoint {
            return Ok(None);
        }
        let Some(reason) = st.checkpoint_due() else { return Ok(None) };
        self.auto_checkpoint(&mut st, reason)
    }

    /// One automatic checkpoint; its failure is recorded (and returned) but changes nothing
    /// already committed.
    fn auto_checkpoint(&self, st: &mut State, reason: &str) -> Result<Option<CheckpointReport>, WriteError> {
        let options = st.limits.checkpoint.clone();
        match self.checkpoint_locked(st, &options) {
            Ok(report) => {
                st.auto.checkpoints_count += 1;
                st.auto.last_reason = Some(reason.to_string());
                st.auto.last_report = Some(report.clone());
                st.auto.last_error = None;
                Ok(Some(report))
            }
            Err(e) => {
                st.auto.failures_count += 1;
                st.auto.last_error = Some(e.to_string());
                Err(e)
            }
        }
    }

    pub fn recovery_report(&self) -> Result<RecoveryReport, WriteError> {
        Ok(self.lock_state_shared()?.recovery.clone())
    }

    /// The log writer's counters (commits, flushes: commits per flush), for the writer.
    pub fn wal_stats(&self) -> Option<flashscan_wal::WalStats> {
        self.lock_state_shared().ok()?.writer.as_ref().map(|w| w.wal.stats())
    }

    /// One past the last log record appended, durable or not (for the writer): with
    /// `wal_stats().durable_lsn`, how much acknowledged delayed work is not yet durable.
    pub fn wal_end_lsn(&self) -> Option<flashscan_wal::Lsn> {
        self.lock_state_shared().ok()?.writer.as_ref().map(|w| w.wal.end_lsn())
    }

    pub(crate) fn require_writer(st: &State) -> Result<&Wal, WriteError> {
        st.writer.as_ref().map(|w| w.wal.as_ref()).ok_or_else(|| WriteError::InvalidArgument("this session does not hold the database lock: writes need it".into()))
    }

    /// A cluster host's database holds only the hash partitions its host owns; a table
    /// created or a row inserted here would land in partitions other hosts own (and a later
    /// `Catalog::read` would call the database corrupt). Its rows come from `flashscan load
    /// … --host I/N` only. Checked by every statement that changes tables.
    pub(crate) fn refuse_cluster_host(&self, st: &State, what: &str) -> Result<(), WriteError> {
        match &st.catalog.host {
            None => Ok(()),
            Some(host) => Err(WriteError::NotSupported(format!(
                "{what} in {}: this database is host {} of {} of a cluster and holds only the partitions that host owns; SQL writes are not supported on cluster hosts: load rows with `flashscan load {} … --host {}/{}`",
                self.db_dir.display(),
                host.index,
                host.count,
                self.db_dir.display(),
                host.index,
                host.count
            ))),
        }
    }

    /// CREATE TABLE: one atomic catalog commit. Returns the table (the existing one with
    /// IF NOT EXISTS).
    pub fn create_table(&self, new: NewTable) -> Result<TableMeta, WriteError> {
        let mut st = self.lock_state()?;
        Self::require_writer(&st)?;
        self.refuse_cluster_host(&st, "CREATE TABLE")?;
        let name = new.name.to_ascii_lowercase();
        if !valid_table_name(&name) {
            return Err(WriteError::InvalidArgument(format!("table name {:?}: use letters, digits and _", new.name)));
        }
        if st.catalog.view(&name).is_some() {
            return Err(StorageError::RelationExists { name, kind: "view", hint: "" }.into());
        }
        if st.catalog.sequences.contains_key(&name) {
            return Err(StorageError::RelationExists { name, kind: "sequence", hint: "" }.into());
        }
        if let Some(key) = key_of(&st.catalog, &name) {
            if new.if_not_exists {
                return Ok(st.catalog.tables[&key].clone());
            }
            return Err(StorageError::TableExists { name }.into());
        }
        if new.columns.is_empty() || new.columns.len() > u16::MAX as usize {
            return Err(WriteError::InvalidArgument(format!("table {name} has {} columns: need 1 to 65535", new.columns.len())));
        }
        for (i, c) in new.columns.iter().enumerate() {
            if new.columns[..i].iter().any(|o| o.name.eq_ignore_ascii_case(&c.name)) {
                return Err(WriteError::InvalidArgument(format!("table {name}: column {:?} appears twice", c.name)));
            }
        }
        let cores = std::thread::available_parallelism().map(|n| n.get() as u32).unwrap_or(1);
        let partition_count = new.partition_count.unwrap_or(cores);
        if partition_count == 0 || partition_count > PARTITION_COUNT_MAX {
            return Err(WriteError::InvalidArgument(format!("partitions = {partition_count}: use 1 to {PARTITION_COUNT_MAX}")));
        }
        let partition_by = match &new.partition_by {
            None => new.columns[0].name.clone(),
            Some(col) => new.columns.iter().find(|c| c.name.eq_ignore_ascii_case(col)).map(|c| c.name.clone()).ok_or_else(|| {
                WriteError::InvalidArgument(format!(
                    "partition_by = {col:?}: table {name} has no such column (columns: {})",
                    new.columns.iter().map(|c| c.name.as_str()).collect::<Vec<_>>().join(", ")
                ))
            })?,
        };
        let format = new.format.unwrap_or(flashscan_storage::TableFormat::Heap(flashscan_storage::heap::page_encoder::HeapFormat::Plain));
        if matches!(format, flashscan_storage::TableFormat::ColumnStore { .. }) && !new.indexes.is_empty() {
            return Err(WriteError::NotSupported(format!(
                "table {name}: PRIMARY KEY and UNIQUE are enforced on heap tables only (SQL indexes cover uncompressed heap tables): leave out compression = '{}', or the keys",
                format.compression_name()
            )));
        }
        let mut next = st.catalog.clone();
        let mut meta = meta_of(&next, &self.db_dir)?;
        let table = TableMeta {
            name: name.clone(),
            columns: new.columns,
            partitions: (0..partition_count)
                .map(|i| PartitionMeta { index: i, row_count: 0, page_count: 0, filegroup: i, runs: vec![], row_groups: vec![] })
                .collect(),
            row_count: 0,
            format: format.catalog_name().into(),
            partition_by,
            filegroups: (0..partition_count).map(|i| FilegroupMeta { index: i, files: vec![] }).collect(),
            files: vec![],
            interleave_bytes: INTERLEAVE_BYTES_DEFAULT,
            size_bytes: 0,
            source: "CREATE TABLE".into(),
            load_lsn: next.next_lsn,
            deleted_rows: None,
            indexes: Vec::new(),
            statistics: None,
            column_defaults: Vec::new(),
        };
        let mut table = table;
        for d in &new.column_defaults {
            let i = table.column_index(&d.column)?;
            if table.column_defaults.iter().any(|o| o.column.eq_ignore_ascii_case(&d.column)) {
                return Err(WriteError::InvalidArgument(format!("multiple default values specified for column \"{}\" of table \"{name}\"", d.column)));
            }
            table.column_defaults.push(ColumnDefaultMeta { column: table.columns[i].name.clone(), ..d.clone() });
        }
        for (seq, meta) in &new.sequences {
            let seq = seq.to_ascii_lowercase();
            if next.sequences.contains_key(&seq) || next.tables.contains_key(&seq) || next.view(&seq).is_some() || seq == name {
                return Err(StorageError::RelationExists { name: seq, kind: "relation", hint: "" }.into());
            }
            self.sequences.forget(std::slice::from_ref(&seq));
            next.sequences.insert(seq, SequenceMeta { owned_by: Some(name.clone()), ..meta.clone() });
        }
        for def in &new.indexes {
            let def = flashscan_storage::KeyIndexDef { name: def.name.to_ascii_lowercase(), ..def.clone() };
            let taken = next.tables.values().chain(std::iter::once(&table)).any(|t| t.indexes.iter().any(|i| i.name == def.name)) || next.tables.contains_key(&def.name) || def.name == name;
            if taken || next.view(&def.name).is_some() {
                return Err(StorageError::RelationExists { name: def.name, kind: "relation", hint: "" }.into());
            }
            if def.primary && table.indexes.iter().any(|i| i.primary) {
                return Err(WriteError::InvalidArgument(format!("multiple primary keys for table {name} are not allowed")));
            }
            crate::key_index::KeyIndex::new(&table, def.clone())?;
            if def.primary {
                for c in &def.columns {
                    let i = table.column_index(c)?;
                    table.columns[i].nullable = false;
                }
            }
            table.indexes.push(def);
        }
        let id = meta.next_table_id;
        meta.next_table_id = id.checked_add(1).ok_or_else(|| WriteError::InvalidArgument("the database has used all 2^32 table ids".into()))?;
        meta.table_ids.insert(name.clone(), id);
        next.write = Some(meta);
        next.generation += 1;
        next.tables.insert(name.clone(), table.clone());
        next.write_atomic(&self.db_dir)?;
        st.catalog = next;
        st.deltas.insert(name, Arc::new(TableDelta::new(&table)));
        Ok(table)
    }

    /// DROP TABLE: the table and its indexes out of the catalog (one atomic commit, its id
    /// retired, their files listed as unreferenced), then those files removed
    /// (`Catalog::remove_table` and `commit_and_sweep`, as `flashscan drop` does). Its logged
    /// rows are skipped by redo.
    pub fn drop_table(&self, name: &str, if_exists: bool) -> Result<bool, WriteError> {
        let mut st = self.lock_state()?;
        Self::require_writer(&st)?;
        self.refuse_cluster_host(&st, "DROP TABLE")?;
        let Some(key) = key_of(&st.catalog, name) else {
            if st.catalog.view(name).is_some() {
                let name = name.to_ascii_lowercase();
                return Err(StorageError::WrongObjectType { name, wanted: "table", actual: "view", actual_upper: "VIEW" }.into());
            }
            if if_exists {
                return Ok(false);
            }
            return Err(Self::unknown_table(&st, name));
        };
        st.catalog.refuse_drop_read_by_views("table", &key, &[])?;
        let mut next = st.catalog.clone();
        if next.remove_table(&key).is_none() {
            return Ok(false);
        }
        let owned: Vec<String> = next.sequences.iter().filter(|(_, s)| s.owned_by.as_deref() == Some(key.as_str())).map(|(n, _)| n.clone()).collect();
        next.remove_owned_sequences(&key);
        self.sequences.forget(&owned);
        if let Some(meta) = next.write.as_mut() {
            meta.table_ids.remove(&key);
        }
        next.generation += 1;
        next.write_atomic(&self.db_dir)?;
        st.deltas.remove(&key);
        Self::commit_then_sweep(&mut st, next, &self.db_dir);
        Ok(true)
    }

    /// CREATE [OR REPLACE] VIEW: the view into the catalog, one atomic commit
    /// (`Catalog::put_view` says what is refused). The caller planned its query.
    pub fn create_view(&self, view: flashscan_storage::ViewEntry, or_replace: bool) -> Result<(), WriteError> {
        let mut st = self.lock_state()?;
        Self::require_writer(&st)?;
        if !valid_table_name(&view.name.to_ascii_lowercase()) {
            return Err(WriteError::InvalidArgument(format!("view name {:?}: use letters, digits and _", view.name)));
        }
        let mut next = st.catalog.clone();
        next.put_view(view, or_replace)?;
        next.generation += 1;
        next.write_atomic(&self.db_dir)?;
        st.catalog = next;
        Ok(())
    }

    /// DROP VIEW [IF EXISTS] a, b, …: all of them in one atomic commit, or none
    /// (`Catalog::remove_views`). Returns the names dropped.
    pub fn drop_views(&self, names: &[String], if_exists: bool) -> Result<Vec<String>, WriteError> {
        let mut st = self.lock_state()?;
        Self::require_writer(&st)?;
        let mut next = st.catalog.clone();
        let dropped = next.remove_views(names, if_exists)?;
        if dropped.is_empty() {
            return Ok(dropped);
        }
        next.generation += 1;
        next.write_atomic(&self.db_dir)?;
        st.catalog = next;
        Ok(dropped)
    }

    /// `next` is committed (written): it becomes the state's catalog, then the files it
    /// lists as unreferenced are removed and the list rewritten. A sweep that fails leaves
    /// them listed for the next writer; the statement has succeeded either way.
    fn commit_then_sweep(st: &mut State, next: Catalog, db_dir: &Path) {
        st.catalog = next.clone();
        let mut swept = next;
        if swept.commit_and_sweep(db_dir).is_ok() {
            st.catalog = swept;
        }
    }

    /// TRUNCATE: the tables emptied in one atomic catalog commit — each keeps its columns
    /// and partitioning, has no pages, and gets a new table id (so redo skips the rows
    /// logged before) — then their files removed (listed as unreferenced first). Refused,
    /// with nothing changed, if any of them has indexes (they would go stale:
    /// `flashscan index drop` them first).
    pub fn truncate_tables(&self, names: &[&str]) -> Result<(), WriteError> {
        self.truncate_tables_restarting(names, false)
    }

    /// TRUNCATE, and with `restart_identity` (… RESTART IDENTITY) the sequences the tables'
    /// SERIAL and identity columns own start over, in the same commit.
    pub fn truncate_tables_restarting(&self, names: &[&str], restart_identity: bool) -> Result<(), WriteError> {
        let mut st = self.lock_state()?;
        Self::require_writer(&st)?;
        self.refuse_cluster_host(&st, "TRUNCATE")?;
        let mut next = st.catalog.clone();
        let mut meta = meta_of(&next, &self.db_dir)?;
        let mut keys = Vec::with_capacity(names.len());
        for name in names {
            let Some(key) = key_of(&st.catalog, name) else { return Err(Self::unknown_table(&st, name)) };
            let table = st.catalog.tables[&key].clone();
            let indexes: Vec<&str> = st.catalog.indexes_on(&key).map(|i| i.name.as_str()).collect();
            if !indexes.is_empty() {
                return Err(WriteError::NotSupported(format!(
                    "TRUNCATE {key}: the table has indexes ({}) that TRUNCATE does not maintain yet: drop them first (`flashscan index drop DB {key} INDEX`)",
                    indexes.join(", ")
                )));
            }
            next.remove_table(&key);
            let id = meta.next_table_id;
            meta.next_table_id = id.checked_add(1).ok_or_else(|| WriteError::InvalidArgument("the database has used all 2^32 table ids".into()))?;
            meta.table_ids.insert(key.clone(), id);
            let emptied = TableMeta {
                partitions: table.partitions.iter().map(|p| PartitionMeta { index: p.index, row_count: 0, page_count: 0, filegroup: p.filegroup, runs: vec![], row_groups: vec![] }).collect(),
                row_count: 0,
                filegroups: table.filegroups.iter().map(|g| FilegroupMeta { index: g.index, files: vec![] }).collect(),
                files: vec![],
                size_bytes: 0,
                load_lsn: next.next_lsn,
                deleted_rows: None,
                // Measured on rows that are gone.
                statistics: None,
                ..table
            };
            next.tables.insert(key.clone(), emptied);
            keys.push(key);
        }
        next.write = Some(meta);
        next.generation += 1;
        if restart_identity {
            let owned: Vec<String> = next.sequences.iter().filter(|(_, s)| s.owned_by.as_ref().is_some_and(|t| keys.contains(t))).map(|(n, _)| n.clone()).collect();
            self.restart_sequences(&mut next, &owned)?;
        }
        next.write_atomic(&self.db_dir)?;
        for key in keys {
            st.deltas.insert(key.clone(), Arc::new(TableDelta::new(&next.tables[&key])));
        }
        Self::commit_then_sweep(&mut st, next, &self.db_dir);
        Ok(())
    }

    fn unknown_table(st: &State, name: &str) -> WriteError {
        StorageError::UnknownTable { name: name.to_string(), known: st.catalog.tables.keys().cloned().collect::<Vec<_>>().join(", ") }.into()
    }

    /// After the log stopped on an I/O error (a full disk while a segment was created or
    /// written, a failed flush), the next statement restarts it as a new process would:
    /// the log is closed, opened again (recovery reads what is durable on disk — nothing
    /// the failed write or flush claimed is trusted — and starts a new epoch), and the
    /// deltas are rebuilt from it. Fails, and changes nothing, while the cause remains.
    pub(crate) fn restart_log_if_stopped(&self, st: &mut State) -> Result<(), WriteError> {
        let Some(w) = st.writer.as_ref() else { return Ok(()) };
        let Some(cause) = w.wal.failure() else { return Ok(()) };
        let meta = meta_of(&st.catalog, &self.db_dir)?;
        let identity = identity_of(&self.db_dir, &meta)?;
        let Some(old) = st.writer.take() else { return Ok(()) };
        let Writer { wal, _lock: lock } = old;
        // The log stopped: closing reports that stop again; it is known. The caller holds
        // the commit gate exclusively, so no commit holds another handle to the log.
        if let Ok(wal) = Arc::try_unwrap(wal) {
            let _ = wal.close();
        }
        let reopened = Wal::open(WalConfig::new(wal_dir_of(&self.db_dir, &meta)), &identity).map_err(WriteError::from).and_then(|(wal, scan)| {
            let (deltas, recovery) = replay(&st.catalog, &self.db_dir, &meta, &scan)?;
            Ok((wal, deltas, recovery))
        });
        match reopened {
            Ok((wal, deltas, recovery)) => {
                st.deltas = deltas;
                st.recovery = recovery;
                st.writer = Some(Writer { wal: Arc::new(wal), _lock: lock });
                Ok(())
            }
            Err(e) => {
                // Keep the database lock; the log stays closed until a later statement
                // manages to reopen it.
                st.writer = None;
                st.stopped_log = Some(lock);
                Err(WriteError::InvalidArgument(format!("the write-ahead log stopped ({cause}) and cannot be reopened yet: {e}")))
            }
        }
    }

    /// Before a commit: a stopped log restarted, and room under the delta's bound for
    /// `statement_bytes` more (a checkpoint makes it if rows wait; else the statement is
    /// refused whole, nothing logged). Cheap when neither applies: the state mutex alone.
    /// The bound is checked before the commit gate, so commits racing past it at the same
    /// moment can overshoot it by at most their own rows.
    pub(crate) fn prepare_commit(&self, table_key: &str, statement_bytes: u64) -> Result<(), WriteError> {
        if !Self::commit_needs_preparing(&*self.lock_state_shared()?, statement_bytes) {
            return Ok(());
        }
        let mut st = self.lock_state()?;
        self.retry_stopped_log(&mut st)?;
        self.restart_log_if_stopped(&mut st)?;
        if st.delta_bytes() + statement_bytes > st.limits.delta_bytes_max {
            let mut cause = String::new();
            if st.delta_bytes() > 0 && st.limits.auto_checkpoint {
                if let Err(e) = self.auto_checkpoint(&mut st, "delta_bound") {
                    cause = format!(" (the checkpoint that would make room failed: {e})");
                }
            }
            let delta_bytes = st.delta_bytes();
            if delta_bytes + statement_bytes > st.limits.delta_bytes_max {
                return Err(WriteError::DeltaFull { table: table_key.to_string(), statement_bytes, delta_bytes, bound_bytes: st.limits.delta_bytes_max, cause });
            }
        }
        Ok(())
    }

    /// Whether a commit of `statement_bytes` more would first have to restart a stopped log
    /// or make room under the delta's bound (a checkpoint: seconds), i.e. block. The state
    /// mutex alone. An async caller (the server's connection tasks) asks before it commits
    /// on its own task and hands such a commit to a thread instead.
    ///
    /// A checkpoint or DDL holding (or waiting for) the commit gate also answers true: they
    /// take the gate before the state mutex and keep both for their whole run (seconds), so
    /// with the gate free the state mutex is held only briefly and this waits for it at
    /// most that long. Staging right after may still meet a checkpoint that began in
    /// between (it waits for the state mutex then): a window of microseconds.
    pub fn commit_would_block(&self, statement_bytes: u64) -> Result<bool, WriteError> {
        if self.commit_gate.is_contended() {
            return Ok(true);
        }
        Ok(Self::commit_needs_preparing(&*self.lock_state_shared()?, statement_bytes))
    }

    /// A stopped log to restart, or no room under the delta's bound for `statement_bytes`.
    fn commit_needs_preparing(st: &State, statement_bytes: u64) -> bool {
        let log_stopped = st.stopped_log.is_some() || st.writer.as_ref().is_some_and(|w| w.wal.has_failed());
        log_stopped || st.delta_bytes() + statement_bytes > st.limits.delta_bytes_max
    }

    /// A writer whose log could not be reopened tries again (the lock is still held).
    pub(crate) fn retry_stopped_log(&self, st: &mut State) -> Result<(), WriteError> {
        let Some(lock) = st.stopped_log.take() else { return Ok(()) };
        let meta = meta_of(&st.catalog, &self.db_dir)?;
        let identity = identity_of(&self.db_dir, &meta)?;
        match Wal::open(WalConfig::new(wal_dir_of(&self.db_dir, &meta)), &identity) {
            Ok((wal, scan)) => {
                let (deltas, recovery) = replay(&st.catalog, &self.db_dir, &meta, &scan)?;
                st.deltas = deltas;
                st.recovery = recovery;
                st.writer = Some(Writer { wal: Arc::new(wal), _lock: lock });
                Ok(())
            }
            Err(e) => {
                st.stopped_log = Some(lock);
                Err(WriteError::InvalidArgument(format!("the write-ahead log cannot be reopened yet: {e}")))
            }
        }
    }

    /// INSERT: one transaction. Returns the rows inserted once their commit is durable.
    /// (crate::insert has the commit protocol; a prepared insert and a multi-statement
    /// transaction go the same way.)
    pub fn insert(&self, table_name: &str, batches: &[RecordBatch]) -> Result<u64, WriteError> {
        self.insert_as(table_name, batches, flashscan_wal::Durability::Strict)
    }

    /// [`WritePath::insert`] acknowledged as `durability` says (delayed: before its flush,
    /// flashscan_wal::durability has what a crash may lose).
    pub fn insert_as(&self, table_name: &str, batches: &[RecordBatch], durability: flashscan_wal::Durability) -> Result<u64, WriteError> {
        let mut txn = crate::insert::Transaction::new();
        txn.set_durability(durability);
        self.stage_insert(&mut txn, table_name, batches)?;
        self.commit_transaction(txn)
    }

    /// [`WritePath::insert`] without the automatic checkpoint a commit may start after it
    /// (seconds of page writes): for a caller that must not block that long — the server
    /// commits on a connection's own thread when nobody else is committing — and runs
    /// [`WritePath::checkpoint_if_due`] elsewhere when [`WritePath::checkpoint_is_due`]
    /// says so. The commit itself is the same: durable before this returns.
    pub fn insert_without_checkpoint(&self, table_name: &str, batches: &[RecordBatch]) -> Result<u64, WriteError> {
        let mut txn = crate::insert::Transaction::new();
        self.stage_insert(&mut txn, table_name, batches)?;
        self.commit_staged_then(&mut txn.staged, false, txn.durability)
    }

    /// The log, shared (a commit waits for its flush without the state mutex).
    pub(crate) fn wal_shared(st: &State) -> Result<Arc<Wal>, WriteError> {
        Self::require_writer(st)?;
        st.writer.as_ref().map(|w| w.wal.clone()).ok_or_else(|| WriteError::InvalidArgument("no log".into()))
    }

    pub(crate) fn wal(st: &State) -> Result<&Wal, WriteError> {
        Self::require_writer(st)
    }

    /// Stops the log writer (flushing what was appended).
    pub fn close(self) -> Result<(), WriteError> {
        let st = self.state.into_inner().map_err(|_| WriteError::InvalidArgument("write path lock poisoned".into()))?;
        if let Some(w) = st.writer {
            // Commits borrow the log only while they hold `&self`: it is ours alone now.
            if let Ok(wal) = Arc::try_unwrap(w.wal) {
                wal.close()?;
            }
        }
        Ok(())
    }
}

/// `flashscan recover DB [--verify]`: opens the log as the writer (recovery proper: scan
/// from the redo point, a torn tail ends the log, corruption is refused, a new epoch),
/// replays committed rows into the deltas and reports; `verify` decodes every delta page.
pub fn recover(db_dir: &Path, verify: bool) -> Result<RecoveryReport, WriteError> {
    let wp = WritePath::open_writer(db_dir, "flashscan recover")?;
    let mut report = wp.recovery_report()?;
    if verify {
        let st = wp.lock_state()?;
        let mut rows = 0u64;
        for (name, delta) in &st.deltas {
            let table = &st.catalog.tables[name];
            let projection: Vec<usize> = (0..table.columns.len()).collect();
            for p in 0..delta.partition_count() {
                if let Some(b) = delta.decode(table, p, &projection)? {
                    rows += b.num_rows() as u64;
                }
            }
            if rows > 0 && delta.row_count() == 0 {
                return Err(WriteError::Corrupt { lsn: 0, what: format!("table {name}: delta pages decode to rows its count does not have") });
            }
        }
        let expected: u64 = st.deltas.values().map(|d| d.row_count()).sum();
        if rows != expected {
            return Err(WriteError::Corrupt { lsn: 0, what: format!("the replayed deltas decode to {rows} rows, {expected} were replayed") });
        }
        report.verified_rows = Some(rows);
    }
    wp.close()?;
    Ok(report)
}
