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
use std::time::Instant;

use arrow::record_batch::RecordBatch;
use flashscan_storage::column::ColumnDef;
use flashscan_storage::load::batch_encoder::{BatchEncoder, PagesMessage};
use flashscan_storage::load::valid_table_name;
use flashscan_storage::partitioning::PARTITION_COUNT_MAX;
use flashscan_storage::placement::INTERLEAVE_BYTES_DEFAULT;
use flashscan_storage::{Catalog, FilegroupMeta, PartitionMeta, StorageError, TableMeta, WriteMeta, PAGE_SIZE_BYTES};
use flashscan_wal::files::read_control;
use flashscan_wal::{scan_dir, DatabaseIdentity, InsertRow, LogEnd, Record, Scan, Wal, WalConfig, WalError};

use crate::delta::{rows_of_page, TableDelta};
use crate::error::WriteError;
use crate::lock::WriterLock;

/// A table to create (from CREATE TABLE).
#[derive(Debug, Clone)]
pub struct NewTable {
    pub name: String,
    pub columns: Vec<ColumnDef>,
    /// Hash partitions; the machine's cores when `None` (as `flashscan load`).
    pub partition_count: Option<u32>,
    /// The column rows are hashed on; the first column when `None`.
    pub partition_by: Option<String>,
    pub if_not_exists: bool,
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
    /// "clean", or where a torn tail (an unacknowledged flush cut by a crash) ended the log.
    pub log_end: String,
    /// Rows in each table's delta after replay.
    pub delta_rows: BTreeMap<String, u64>,
    /// `--verify`: rows decoded from every delta page (each page's checksum and rows checked).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verified_rows: Option<u64>,
    pub elapsed_s: f64,
}

struct Writer {
    wal: Wal,
    _lock: WriterLock,
}

pub(crate) struct State {
    pub(crate) catalog: Catalog,
    pub(crate) deltas: BTreeMap<String, Arc<TableDelta>>,
    writer: Option<Writer>,
    pub(crate) recovery: RecoveryReport,
}

pub struct WritePath {
    db_dir: PathBuf,
    state: Mutex<State>,
}

impl std::fmt::Debug for WritePath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "WritePath({})", self.db_dir.display())
    }
}

fn meta_of(catalog: &Catalog, db_dir: &Path) -> Result<WriteMeta, WriteError> {
    catalog.write.clone().ok_or_else(|| {
        WriteError::NotSupported(format!(
            "{} takes no writes: it was made by `flashscan load` and has no write-ahead log; make a database with `flashscan init` for CREATE TABLE and INSERT",
            db_dir.display()
        ))
    })
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
fn replay(catalog: &Catalog, meta: &WriteMeta, scan: &Scan) -> Result<(BTreeMap<String, Arc<TableDelta>>, RecoveryReport), WriteError> {
    let started = Instant::now();
    let deltas: BTreeMap<String, Arc<TableDelta>> =
        catalog.tables.values().filter(|t| !t.is_column_store()).map(|t| (t.name.clone(), Arc::new(TableDelta::new(t)))).collect();
    let by_id = tables_by_id(catalog, meta);
    let mut report = RecoveryReport { redo_lsn: meta.redo_lsn, end_lsn: scan.end_lsn.0, log_records_scanned: scan.records.len() as u64, ..Default::default() };
    // Rows are appended per (table, partition) in log order; batching consecutive rows of
    // one partition keeps the delta's lock traffic low.
    for item in scan.redo() {
        let item = item?;
        if item.lsn.0 < meta.redo_lsn {
            report.rows_already_in_pages += 1;
            continue;
        }
        let Some(name) = by_id.get(&item.row.table_id) else {
            report.rows_of_dropped_tables += 1;
            continue;
        };
        let Some(delta) = deltas.get(name) else {
            return Err(WriteError::Corrupt { lsn: item.lsn.0, what: format!("a row for table {name}, which is a column store now") });
        };
        delta
            .append_rows(item.row.partition as usize, std::slice::from_ref(&item.row.row))
            .map_err(|e| WriteError::Corrupt { lsn: item.lsn.0, what: e.to_string() })?;
        report.committed_rows_replayed += 1;
    }
    report.log_end = match &scan.end {
        LogEnd::Clean => "clean".into(),
        LogEnd::TornTail { at, what } => format!("torn tail at LSN {at} ({what}): an unacknowledged flush, dropped"),
    };
    report.delta_rows = deltas.iter().map(|(n, d)| (n.clone(), d.row_count())).collect();
    report.elapsed_s = started.elapsed().as_secs_f64();
    Ok((deltas, report))
}

/// Encodes a statement's rows with the loader's page encoder (every type, NULL and size
/// check a load makes), then takes them back out of the pages: per partition, each row in
/// the page's own encoding, ready for the log and the delta.
fn encode_rows(table: &TableMeta, batches: &[RecordBatch]) -> Result<Vec<Vec<Vec<u8>>>, WriteError> {
    let partition_by = table.column_index(&table.partition_by)?;
    let partition_count = table.partitions.len();
    let mut encoder = BatchEncoder::new(&table.name, &table.columns, partition_by, partition_count as u32);
    let mut out: Vec<Vec<Vec<u8>>> = vec![Vec::new(); partition_count];
    let mut emit = |m: PagesMessage| {
        for page in m.pages.chunks_exact(PAGE_SIZE_BYTES) {
            out[m.partition as usize].extend(rows_of_page(page).into_iter().map(|r| r.to_vec()));
        }
        Ok::<(), StorageError>(())
    };
    for b in batches {
        encoder.encode(b, &mut emit)?;
    }
    encoder.flush(&mut emit)?;
    Ok(out)
}

/// The catalog key of a table named in SQL (names are stored in lower case).
fn key_of(catalog: &Catalog, name: &str) -> Option<String> {
    catalog.tables.keys().find(|k| k.eq_ignore_ascii_case(name)).cloned()
}

impl WritePath {
    /// Opens for reading: the catalog and the deltas replayed from the log without taking
    /// it. `None` for a database without a log (made by `flashscan load`).
    pub fn open(db_dir: &Path) -> Result<Option<WritePath>, WriteError> {
        let catalog = Catalog::read(db_dir)?;
        let Some(meta) = catalog.write.clone() else { return Ok(None) };
        let scan = read_only_scan(db_dir, &meta)?;
        let (deltas, recovery) = replay(&catalog, &meta, &scan)?;
        Ok(Some(WritePath { db_dir: db_dir.to_path_buf(), state: Mutex::new(State { catalog, deltas, writer: None, recovery }) }))
    }

    /// Opens as the one writer: the database lock, the log (recovery: scan from the redo
    /// point, torn tail vs corruption, new epoch), redo into the deltas.
    pub fn open_writer(db_dir: &Path, holder: &str) -> Result<WritePath, WriteError> {
        let catalog = Catalog::read(db_dir)?;
        meta_of(&catalog, db_dir)?;
        let wp = WritePath {
            db_dir: db_dir.to_path_buf(),
            state: Mutex::new(State { catalog, deltas: BTreeMap::new(), writer: None, recovery: RecoveryReport::default() }),
        };
        wp.become_writer(holder)?;
        Ok(wp)
    }

    pub fn db_dir(&self) -> &Path {
        &self.db_dir
    }

    pub(crate) fn lock_state(&self) -> Result<MutexGuard<'_, State>, WriteError> {
        self.state.lock().map_err(|_| WriteError::InvalidArgument("write path lock poisoned by a failed statement; restart".into()))
    }

    pub fn is_writer(&self) -> bool {
        self.lock_state().map(|s| s.writer.is_some()).unwrap_or(false)
    }

    /// Takes the lock and the log (if not held yet), re-reads the catalog and replays the
    /// log again: another writer may have committed since this reader opened. Returns
    /// true when it changed anything (the caller re-registers its tables).
    pub fn become_writer(&self, holder: &str) -> Result<bool, WriteError> {
        let mut st = self.lock_state()?;
        if st.writer.is_some() {
            return Ok(false);
        }
        let lock = WriterLock::acquire(&self.db_dir, holder)?;
        let catalog = Catalog::read(&self.db_dir)?;
        let meta = meta_of(&catalog, &self.db_dir)?;
        let identity = identity_of(&self.db_dir, &meta)?;
        let (wal, scan) = Wal::open(WalConfig::new(wal_dir_of(&self.db_dir, &meta)), &identity)?;
        let (deltas, recovery) = replay(&catalog, &meta, &scan)?;
        *st = State { catalog, deltas, writer: Some(Writer { wal, _lock: lock }), recovery };
        Ok(true)
    }

    pub fn catalog(&self) -> Result<Catalog, WriteError> {
        Ok(self.lock_state()?.catalog.clone())
    }

    pub fn delta(&self, table: &str) -> Option<Arc<TableDelta>> {
        let st = self.lock_state().ok()?;
        let key = key_of(&st.catalog, table)?;
        st.deltas.get(&key).cloned()
    }

    /// The log's counters (commits, flushes, bytes) while this process is the writer;
    /// waits while a statement holds the write path (at most one commit).
    pub fn wal_stats(&self) -> Option<flashscan_wal::WalStats> {
        let st = self.lock_state().ok()?;
        st.writer.as_ref().map(|w| w.wal.stats())
    }

    pub fn recovery_report(&self) -> Result<RecoveryReport, WriteError> {
        Ok(self.lock_state()?.recovery.clone())
    }

    fn require_writer(st: &State) -> Result<&Wal, WriteError> {
        st.writer.as_ref().map(|w| &w.wal).ok_or_else(|| WriteError::InvalidArgument("this session does not hold the database lock: writes need it".into()))
    }

    /// CREATE TABLE: one atomic catalog commit. Returns the table (the existing one with
    /// IF NOT EXISTS).
    pub fn create_table(&self, new: NewTable) -> Result<TableMeta, WriteError> {
        let mut st = self.lock_state()?;
        Self::require_writer(&st)?;
        let name = new.name.to_ascii_lowercase();
        if !valid_table_name(&name) {
            return Err(WriteError::InvalidArgument(format!("table name {:?}: use letters, digits and _", new.name)));
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
        let mut next = st.catalog.clone();
        let mut meta = meta_of(&next, &self.db_dir)?;
        let table = TableMeta {
            name: name.clone(),
            columns: new.columns,
            partitions: (0..partition_count)
                .map(|i| PartitionMeta { index: i, row_count: 0, page_count: 0, filegroup: i, runs: vec![], row_groups: vec![] })
                .collect(),
            row_count: 0,
            format: "heap".into(),
            partition_by,
            filegroups: (0..partition_count).map(|i| FilegroupMeta { index: i, files: vec![] }).collect(),
            files: vec![],
            interleave_bytes: INTERLEAVE_BYTES_DEFAULT,
            size_bytes: 0,
            source: "CREATE TABLE".into(),
            load_lsn: next.next_lsn,
        };
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

    /// DROP TABLE: out of the catalog (atomic commit, its id retired), then its files
    /// removed (only files the catalog listed for it). Its logged rows are skipped by redo.
    pub fn drop_table(&self, name: &str, if_exists: bool) -> Result<bool, WriteError> {
        let mut st = self.lock_state()?;
        Self::require_writer(&st)?;
        let Some(key) = key_of(&st.catalog, name) else {
            if if_exists {
                return Ok(false);
            }
            return Err(StorageError::UnknownTable { name: name.to_string(), known: st.catalog.tables.keys().cloned().collect::<Vec<_>>().join(", ") }.into());
        };
        let mut next = st.catalog.clone();
        let Some(table) = next.tables.remove(&key) else { return Ok(false) };
        if let Some(meta) = next.write.as_mut() {
            meta.table_ids.remove(&key);
        }
        next.generation += 1;
        next.write_atomic(&self.db_dir)?;
        st.catalog = next;
        st.deltas.remove(&key);
        for f in &table.files {
            let _ = std::fs::remove_file(self.db_dir.join(&f.path));
        }
        Ok(true)
    }

    /// INSERT: one transaction. Returns the rows inserted once their commit is durable.
    pub fn insert(&self, table_name: &str, batches: &[RecordBatch]) -> Result<u64, WriteError> {
        let mut st = self.lock_state()?;
        Self::require_writer(&st)?;
        let key = key_of(&st.catalog, table_name).ok_or_else(|| {
            WriteError::Storage(StorageError::UnknownTable { name: table_name.to_string(), known: st.catalog.tables.keys().cloned().collect::<Vec<_>>().join(", ") })
        })?;
        let table = st.catalog.tables[&key].clone();
        if table.is_column_store() {
            return Err(WriteError::NotSupported(format!(
                "table {key} is a column store ({}): INSERT into column store tables is not supported yet; rebuild it as a heap first (`flashscan rebuild {} {key} --compression none`)",
                table.format,
                self.db_dir.display()
            )));
        }
        let rows = encode_rows(&table, batches)?;
        let row_count: u64 = rows.iter().map(|r| r.len() as u64).sum();
        if row_count == 0 {
            return Ok(0);
        }
        let existing_id: Option<u32> = st.catalog.write.as_ref().and_then(|m| m.table_ids.get(&key).copied());
        let table_id = match existing_id {
            Some(id) => id,
            None => {
                // A loaded table's first INSERT: give it an id (one catalog commit).
                let mut next = st.catalog.clone();
                let mut meta = meta_of(&next, &self.db_dir)?;
                let id = meta.next_table_id;
                meta.next_table_id = id.checked_add(1).ok_or_else(|| WriteError::InvalidArgument("the database has used all 2^32 table ids".into()))?;
                meta.table_ids.insert(key.clone(), id);
                next.write = Some(meta);
                next.generation += 1;
                next.write_atomic(&self.db_dir)?;
                st.catalog = next;
                id
            }
        };
        let wal = Self::require_writer(&st)?;
        let txn = wal.begin();
        let logged = (|| {
            for (partition, part_rows) in rows.iter().enumerate() {
                for row in part_rows {
                    wal.append(&Record::Insert(InsertRow { txn, table_id, partition: partition as u32, page_no: 0, row: row.clone() }))?;
                }
            }
            wal.commit(txn)
        })();
        if let Err(e) = logged {
            // Best effort: without a commit record redo skips these rows anyway.
            let _ = wal.abort(txn);
            return Err(e.into());
        }
        let delta = match st.deltas.get(&key) {
            Some(d) => d.clone(),
            None => {
                let d = Arc::new(TableDelta::new(&table));
                st.deltas.insert(key.clone(), d.clone());
                d
            }
        };
        for (partition, part_rows) in rows.iter().enumerate() {
            delta.append_rows(partition, part_rows)?;
        }
        Ok(row_count)
    }

    pub(crate) fn wal(st: &State) -> Result<&Wal, WriteError> {
        Self::require_writer(st)
    }

    /// Stops the log writer (flushing what was appended).
    pub fn close(self) -> Result<(), WriteError> {
        let st = self.state.into_inner().map_err(|_| WriteError::InvalidArgument("write path lock poisoned".into()))?;
        if let Some(w) = st.writer {
            w.wal.close()?;
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
