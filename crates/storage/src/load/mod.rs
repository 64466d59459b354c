//! Loading a table: sources (tpchgen, Parquet, CSV) -> encoders (hash to partitions,
//! build pages) -> one writer (place, seal, write) -> an atomic catalog commit.
//!
//! Memory is bounded whatever the table size: batches and page messages travel over
//! bounded channels, and each encoder holds one open page per partition.
//! Atomicity: data files get new names (with the catalog generation) that the catalog does
//! not reference until the commit; on any error the files this load created are removed
//! and the previous catalog stays as it was.

pub mod batch_encoder;
pub mod csv;
pub mod parquet;
pub mod partition_writer;
pub mod source;
pub mod tpch;

use std::collections::VecDeque;
use std::fs::File;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use crossbeam_channel::bounded;

use crate::catalog::Catalog;
use crate::column::{ColumnDef, ColumnType};
use crate::error::StorageError;
use crate::heap::Lsn;
use crate::partitioning::PARTITION_COUNT_MAX;
use crate::placement::{INTERLEAVE_BYTES_DEFAULT, INTERLEAVE_BYTES_MAX, INTERLEAVE_BYTES_MIN};
use crate::table_meta::TableMeta;
use crate::EXTENT_SIZE_BYTES;

use batch_encoder::{BatchEncoder, PagesMessage};
use partition_writer::{PartitionWriter, WritePlan};
pub use source::TableSource;

/// Batches in flight between sources and encoders, per encoder.
const BATCHES_IN_FLIGHT_PER_ENCODER: usize = 2;
/// Page messages in flight to the writer (x 128 KB each).
const PAGE_MESSAGES_IN_FLIGHT: usize = 64;
pub const VOLUME_COUNT_MAX: usize = 64;
/// Load threads: each encoder holds an open 8 KB page per partition (up to 1024 = 8 MB)
/// and its own batches in flight, so 256 threads is already GBs; more than the cores of any
/// machine this runs on gains nothing.
pub const LOAD_THREADS_MAX: usize = 256;
/// The database lock (flock, exclusive): loads, rebuilds, drops and the SQL writer (flashscan-write) and `flashscan serve` take it.
pub const LOCK_FILE_NAME: &str = "flashscan.lock";
/// Written by `flashscan serve` beside the lock while it owns the database (its pid and
/// address): a writer that finds the lock held and this file present is told to connect.
pub const SERVE_INFO_FILE_NAME: &str = "flashscan.serve";

/// Counters a progress bar can poll while a load runs.
#[derive(Debug, Default)]
pub struct LoadCounters {
    pub rows_encoded: AtomicU64,
    pub bytes_written: AtomicU64,
}

#[derive(Clone)]
pub struct LoadOptions {
    pub partition_count: u32,
    /// Column rows are hashed on; the first column when `None`.
    pub partition_by: Option<String>,
    /// Directories the data files are spread over; the database directory when empty.
    pub volumes: Vec<PathBuf>,
    pub interleave_bytes: u64,
    pub replace: bool,
    pub threads: usize,
    /// Test hook: fail as if the disk were full after this many pages.
    pub fault_after_pages: Option<u64>,
    /// At most this many rows per page (None: as many as fit). Synthetic benchmark tables
    /// (crates/bench `synth`) use it to get an exact number of rows on every page.
    pub rows_per_page_max: Option<usize>,
    pub counters: Arc<LoadCounters>,
    /// A cluster host's load (`--host I/N`, issue 17): only the partitions this host owns
    /// get rows; the catalog records the host's place.
    pub host: Option<crate::host_place::HostSlot>,
}

impl Default for LoadOptions {
    fn default() -> Self {
        let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
        LoadOptions {
            partition_count: cores as u32,
            partition_by: None,
            volumes: Vec::new(),
            interleave_bytes: INTERLEAVE_BYTES_DEFAULT,
            replace: false,
            threads: cores,
            fault_after_pages: None,
            rows_per_page_max: None,
            counters: Arc::new(LoadCounters::default()),
            host: None,
        }
    }
}

#[derive(Debug, Clone)]
pub struct LoadReport {
    pub table: String,
    pub row_count: u64,
    pub page_count: u64,
    pub size_bytes: u64,
    pub file_count: usize,
    pub seconds: f64,
}

/// Makes `dir` a database if it is missing or empty; accepts an existing database;
/// refuses any other directory (flashscan never writes among files it did not create).
/// Returns the lock (held from before the emptiness check, so two first loads into one new
/// directory do not race) and whether this call created the directory.
pub fn create_or_open_database_dir(dir: &Path) -> Result<(DatabaseLock, bool), StorageError> {
    let mut created = false;
    match std::fs::symlink_metadata(dir) {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
                std::fs::create_dir_all(parent).map_err(|e| StorageError::io("creating database directory", parent, e))?;
            }
            match std::fs::create_dir(dir) {
                Ok(()) => created = true,
                // Another first load made it a moment ago: the lock below orders the two.
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(StorageError::io("creating database directory", dir, e)),
            }
        }
        Err(e) => return Err(StorageError::io("checking", dir, e)),
    }
    if !dir.is_dir() {
        return Err(StorageError::ForeignDirectory { dir: dir.to_path_buf() });
    }
    // Checked before the lock file is created (a foreign directory gets nothing written
    // into it), and again under the lock (another first load may have begun meanwhile).
    let is_ours_or_empty = || -> Result<bool, StorageError> {
        if Catalog::exists(dir) {
            return Ok(true);
        }
        let entries = std::fs::read_dir(dir).map_err(|e| StorageError::io("listing", dir, e))?;
        for entry in entries {
            let entry = entry.map_err(|e| StorageError::io("listing", dir, e))?;
            // The lock, and the temporary of a first catalog another load is writing.
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if name != LOCK_FILE_NAME && !name.starts_with(&format!(".{}.tmp-", crate::catalog::CATALOG_FILE_NAME)) {
                // Another first load may have written its catalog after the check above
                // and its first data file before this listing: a catalog is always
                // written before any other file, so one now makes the directory ours.
                return Ok(Catalog::exists(dir));
            }
        }
        Ok(true)
    };
    if !is_ours_or_empty()? {
        return Err(StorageError::ForeignDirectory { dir: dir.to_path_buf() });
    }
    let lock = lock_database(dir)?;
    if Catalog::exists(dir) {
        return Ok((lock, created));
    }
    if !is_ours_or_empty()? {
        return Err(StorageError::ForeignDirectory { dir: dir.to_path_buf() });
    }
    let catalog = Catalog { generation: 0, next_file_id: 1, next_lsn: 1, ..Catalog::default() };
    catalog.write_atomic(dir)?;
    Ok((lock, created))
}

/// Undoes `create_or_open_database_dir` for a directory this load created and left without
/// a table: removes the files flashscan put there (catalog, lock) and the directory.
fn remove_new_database_dir(dir: &Path) {
    let catalog_is_empty = Catalog::read(dir).is_ok_and(|c| c.tables.is_empty() && c.indexes.is_empty());
    if catalog_is_empty {
        let _ = std::fs::remove_file(Catalog::path(dir));
        let _ = std::fs::remove_file(dir.join(LOCK_FILE_NAME));
        // remove_dir fails unless empty: anything else put there stays.
        let _ = std::fs::remove_dir(dir);
    }
}

/// An exclusive lock on the database for the duration of a write (flock, released when
/// the process exits, so a crash never leaves it held). Writers wait for each other.
pub struct DatabaseLock {
    _file: File,
}

/// Takes the database's write lock, waiting for another writer to finish. The lock file is
/// opened without following links (`fs_safe::open_lock_file`), in a directory that must be
/// a directory and not a link.
pub fn lock_database(dir: &Path) -> Result<DatabaseLock, StorageError> {
    crate::fs_safe::check_real_dir(dir)?;
    let path = dir.join(LOCK_FILE_NAME);
    let file = crate::fs_safe::open_lock_file(&path)?;
    // First without waiting: a database owned by `flashscan serve` is held for the server's
    // whole life, so waiting would hang; any other writer finishes, so we wait for it.
    if flashscan_io::file_lock::try_lock_exclusive(&file).map_err(|e| StorageError::io("locking", &path, e))? {
        return Ok(DatabaseLock { _file: file });
    }
    let serve_info = dir.join(SERVE_INFO_FILE_NAME);
    if std::fs::symlink_metadata(&serve_info).is_ok_and(|m| m.is_file()) {
        return Err(StorageError::Served { dir: dir.to_path_buf(), serve_info });
    }
    eprintln!("flashscan: waiting for another flashscan command to release {}", path.display());
    loop {
        // SAFETY: flock on a descriptor we own.
        let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) };
        if rc == 0 {
            return Ok(DatabaseLock { _file: file });
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(StorageError::io("locking", &path, e));
        }
    }
}

/// Declares `volumes` (canonical directories outside the database) in `catalog`: each must
/// be a real directory; the `.flashscan-volume` marker is created in it if missing.
pub fn declare_volumes(catalog: &mut Catalog, db_dir: &Path, volumes: &[PathBuf]) -> Result<(), StorageError> {
    for v in volumes {
        if partition_writer::same_dir(v, db_dir) {
            continue;
        }
        crate::fs_safe::check_real_dir(v)?;
        let marker = v.join(crate::fs_safe::VOLUME_MARKER_FILE_NAME);
        match crate::fs_safe::create_new(&marker) {
            Ok(f) => {
                f.sync_all().map_err(|e| StorageError::io("syncing", &marker, e))?;
                crate::fs_safe::sync_dir(v)?;
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                let m = std::fs::symlink_metadata(&marker).map_err(|e| StorageError::io("checking", &marker, e))?;
                if !m.file_type().is_file() {
                    return Err(StorageError::UnsafeFile { path: marker, reason: "is not a regular file: remove it".into() });
                }
            }
            Err(e) => return Err(StorageError::io("creating volume marker", &marker, e)),
        }
        let declared = v.to_string_lossy().into_owned();
        if !catalog.volumes.contains(&declared) {
            catalog.volumes.push(declared);
        }
    }
    Ok(())
}

/// The write ahead of creating files: the planned files, which must not exist, are listed
/// as unreferenced in the catalog (committed), so a crash while writing leaves them named
/// for the next sweep. Returns the catalog as committed.
pub(crate) fn commit_intent(db_dir: &Path, catalog: &Catalog, planned: &[(PathBuf, String)]) -> Result<Catalog, StorageError> {
    for (path, _) in planned {
        if std::fs::symlink_metadata(path).is_ok() {
            return Err(StorageError::InvalidArgument(format!("{} already exists; flashscan never overwrites a file it did not create: move it away", path.display())));
        }
    }
    let mut next = catalog.clone();
    next.unreferenced_files.extend(planned.iter().map(|(_, c)| c.clone()));
    next.write_atomic(db_dir)?;
    Ok(next)
}

/// After a failed write: the created files are removed (only those), and the catalog is
/// committed again without the intent. Best effort: a failure leaves the intent for the sweep.
pub(crate) fn abandon_intent(db_dir: &Path, intent: &Catalog, writer: &mut PartitionWriter) {
    writer.remove_created();
    let planned: std::collections::HashSet<String> = writer.planned_paths().map(|p| p.into_iter().map(|(_, c)| c).collect()).unwrap_or_default();
    let mut back = intent.clone();
    back.unreferenced_files.retain(|f| !planned.contains(f));
    let _ = back.write_atomic(db_dir);
}

fn validate_options(options: &LoadOptions) -> Result<(), StorageError> {
    if options.threads == 0 || options.threads > LOAD_THREADS_MAX {
        return Err(StorageError::InvalidArgument(format!("--threads {} out of range: use 1 to {LOAD_THREADS_MAX}", options.threads)));
    }
    if options.partition_count == 0 || options.partition_count > PARTITION_COUNT_MAX {
        return Err(StorageError::InvalidArgument(format!("--partitions {} out of range: use 1 to {PARTITION_COUNT_MAX}", options.partition_count)));
    }
    let i = options.interleave_bytes;
    if !(INTERLEAVE_BYTES_MIN..=INTERLEAVE_BYTES_MAX).contains(&i) || i % EXTENT_SIZE_BYTES as u64 != 0 {
        return Err(StorageError::InvalidArgument(format!("--interleave {i} bytes: use a multiple of 64K between 64K and 1G")));
    }
    if options.rows_per_page_max == Some(0) {
        return Err(StorageError::InvalidArgument("rows per page must be at least 1".into()));
    }
    if options.volumes.len() > VOLUME_COUNT_MAX {
        return Err(StorageError::InvalidArgument(format!("{} volumes: at most {VOLUME_COUNT_MAX}", options.volumes.len())));
    }
    for v in &options.volumes {
        if !v.is_dir() {
            return Err(StorageError::InvalidArgument(format!("volume {} is not a directory: create it first", v.display())));
        }
    }
    Ok(())
}

/// Table names are letters, digits and `_` (they become file names).
pub fn valid_table_name(name: &str) -> bool {
    !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Loads one table into the database at `db_dir` and commits it to the catalog.
pub fn load_table(db_dir: &Path, source: TableSource, options: &LoadOptions) -> Result<LoadReport, StorageError> {
    let started = Instant::now();
    validate_options(options)?;
    // Everything the source and flags decide is checked before the directory is made.
    let name = source.name.to_ascii_lowercase();
    if !valid_table_name(&name) {
        return Err(StorageError::InvalidArgument(format!("table name {:?}: use letters, digits and _ (pass --table NAME)", source.name)));
    }
    let columns: Vec<ColumnDef> = source
        .schema
        .fields()
        .iter()
        .map(|f| Ok(ColumnDef { name: f.name().clone(), column_type: ColumnType::from_arrow(f.name(), f.data_type())?, nullable: f.is_nullable() }))
        .collect::<Result<_, StorageError>>()?;
    if columns.is_empty() || columns.len() > u16::MAX as usize {
        return Err(StorageError::InvalidArgument(format!("table {name} has {} columns: need 1 to 65535", columns.len())));
    }
    let partition_by = match &options.partition_by {
        None => 0,
        Some(col) => columns.iter().position(|c| c.name.eq_ignore_ascii_case(col)).ok_or_else(|| StorageError::UnknownColumn {
            table: name.clone(),
            column: col.clone(),
            known: columns.iter().map(|c| c.name.as_str()).collect::<Vec<_>>().join(", "),
        })?,
    };
    let (lock, created_dir) = create_or_open_database_dir(db_dir)?;
    let result = load_locked(db_dir, source, options, name, columns, partition_by, started);
    if result.is_err() && created_dir {
        // Still under the lock, so a second first load waiting for it finds no half state.
        remove_new_database_dir(db_dir);
    }
    drop(lock);
    result
}

/// `load_table` once the flags and the source's schema are checked and the lock is held.
fn load_locked(
    db_dir: &Path,
    source: TableSource,
    options: &LoadOptions,
    name: String,
    columns: Vec<ColumnDef>,
    partition_by: usize,
    started: Instant,
) -> Result<LoadReport, StorageError> {
    let mut catalog = Catalog::read(db_dir)?;
    crate::orphans::sweep_unreferenced(db_dir, &mut catalog)?;
    if catalog.tables.contains_key(&name) && !options.replace {
        return Err(StorageError::TableExists { name });
    }
    check_host_slot(db_dir, &catalog, &name, options.host)?;
    let volumes = if options.volumes.is_empty() {
        vec![db_dir.to_path_buf()]
    } else {
        options.volumes.iter().map(|v| v.canonicalize().map_err(|e| StorageError::io("resolving volume", v, e))).collect::<Result<Vec<_>, _>>()?
    };
    declare_volumes(&mut catalog, db_dir, &volumes)?;
    let generation = catalog.generation + 1;
    let lsn = Lsn(catalog.next_lsn);
    let file_ids_needed = options.partition_count as u64 * volumes.len() as u64;
    let first_file_id = catalog.next_file_id;
    let next_file_id = u32::try_from(first_file_id as u64 + file_ids_needed)
        .map_err(|_| StorageError::InvalidArgument("the database has used all 2^32 data file ids".into()))?;
    let database_id = format!("{:08x}", crc32c::crc32c(std::path::absolute(db_dir).unwrap_or_else(|_| db_dir.to_path_buf()).to_string_lossy().as_bytes()));

    let mut writer = PartitionWriter::new(WritePlan {
        db_dir: db_dir.to_path_buf(),
        table_name: name.clone(),
        partition_count: options.partition_count,
        volumes: volumes.clone(),
        interleave_bytes: options.interleave_bytes,
        first_file_id,
        generation,
        lsn,
        external_prefix: format!("flashscan-{database_id}"),
        fault_after_pages: options.fault_after_pages,
    });

    let catalog = commit_intent(db_dir, &catalog, &writer.planned_paths()?)?;
    let result = run_pipeline(source.parts, &name, &columns, partition_by, options, &mut writer).and_then(|()| writer.finish());
    let written = match result {
        Ok(w) => w,
        Err(e) => {
            abandon_intent(db_dir, &catalog, &mut writer);
            return Err(e);
        }
    };

    let table = TableMeta {
        name: name.clone(),
        columns: columns.clone(),
        partitions: written.partitions,
        row_count: written.row_count,
        format: "heap".to_string(),
        partition_by: columns[partition_by].name.clone(),
        filegroups: written.filegroups,
        files: written.files,
        interleave_bytes: options.interleave_bytes,
        size_bytes: written.size_bytes,
        source: source.description,
        load_lsn: lsn.0,
        deleted_rows: None,
        indexes: Vec::new(),
        statistics: None,
        column_defaults: Vec::new(),
    };
    let report = LoadReport {
        table: name.clone(),
        row_count: table.row_count,
        page_count: table.page_count(),
        size_bytes: table.size_bytes,
        file_count: table.files.len(),
        seconds: 0.0,
    };
    let mut catalog = catalog;
    if let Some(slot) = options.host {
        let place = catalog.host.get_or_insert_with(|| crate::host_place::HostPlace { index: slot.index, count: slot.count, partitions: Default::default() });
        place.partitions.insert(name.clone(), slot.owned(options.partition_count));
    }
    commit_table(db_dir, &catalog, table, CatalogStep { generation, next_file_id, lsn }, &mut writer, &|_| Ok(()))?;
    Ok(LoadReport { seconds: started.elapsed().as_secs_f64(), ..report })
}

/// A cluster host takes loads for its own slot only, and a database of one machine takes no
/// host's load (its tables would hold every partition): mixing them would count rows twice.
fn check_host_slot(db_dir: &Path, catalog: &Catalog, table: &str, host: Option<crate::host_place::HostSlot>) -> Result<(), StorageError> {
    let recorded = catalog.host.as_ref().map(|h| h.slot());
    let others = catalog.tables.keys().any(|t| t != table);
    match (recorded, host) {
        (Some(r), Some(h)) if r != h => Err(StorageError::InvalidArgument(format!("{} is cluster host {r}: load it with --host {r}, not {h}", db_dir.display()))),
        (Some(r), None) => Err(StorageError::InvalidArgument(format!("{} is cluster host {r}: load it with --host {r}", db_dir.display()))),
        (None, Some(h)) if others => Err(StorageError::InvalidArgument(format!(
            "{} already holds tables of a single machine: load host {h} into a new database directory",
            db_dir.display()
        ))),
        _ => Ok(()),
    }
}

/// The catalog counters a write advances.
pub(crate) struct CatalogStep {
    pub generation: u64,
    pub next_file_id: u32,
    /// The LSN the new pages carry; the catalog's next LSN becomes the one after.
    pub lsn: Lsn,
}

/// Commits `table` (whose files `writer` wrote) into the catalog atomically; a table of the
/// same name is replaced, and its files and indexes become unreferenced and are removed
/// after the commit. `catalog` is the one `commit_intent` wrote (listing the planned files).
/// If the commit fails, the new files are removed and the old catalog stays. Loads and
/// rebuilds both end here.
/// `change` is applied to the catalog committed (after the table is in it), in the same
/// atomic commit; an error from it commits nothing.
pub(crate) fn commit_table(
    db_dir: &Path,
    catalog: &Catalog,
    table: TableMeta,
    step: CatalogStep,
    writer: &mut PartitionWriter,
    change: &(dyn Fn(&mut Catalog) -> Result<(), StorageError> + Sync),
) -> Result<(), StorageError> {
    let mut next = catalog.clone();
    let planned: std::collections::HashSet<String> = writer.planned_paths()?.into_iter().map(|(_, c)| c).collect();
    next.unreferenced_files.retain(|f| !planned.contains(f));
    next.generation = step.generation;
    next.next_file_id = step.next_file_id;
    next.next_lsn = step.lsn.0 + 1;
    next.remove_table(&table.name);
    next.tables.insert(table.name.clone(), table);
    if let Err(e) = change(&mut next).and_then(|()| next.write_atomic(db_dir)) {
        abandon_intent(db_dir, catalog, writer);
        return Err(e);
    }
    // Committed: a failure to remove the replaced files leaves them listed for the next
    // writer's sweep, and is not the load's failure.
    let _ = crate::orphans::sweep_unreferenced(db_dir, &mut next);
    Ok(())
}

/// Sources -> encoders -> writer (this thread). The first error cancels every stage.
fn run_pipeline(
    parts: Vec<source::PartSource>,
    table_name: &str,
    columns: &[ColumnDef],
    partition_by: usize,
    options: &LoadOptions,
    writer: &mut PartitionWriter,
) -> Result<(), StorageError> {
    let threads = options.threads.max(1);
    let producer_count = parts.len().clamp(1, threads);
    let encoder_count = threads;
    let parts = Mutex::new(parts.into_iter().collect::<VecDeque<_>>());
    let cancel = AtomicBool::new(false);
    let first_error: Mutex<Option<StorageError>> = Mutex::new(None);
    let fail = |e: StorageError| {
        cancel.store(true, Ordering::SeqCst);
        if let Ok(mut slot) = first_error.lock() {
            slot.get_or_insert(e);
        }
    };
    let counters = &options.counters;

    std::thread::scope(|scope| {
        let (batch_tx, batch_rx) = bounded(encoder_count * BATCHES_IN_FLIGHT_PER_ENCODER);
        let (page_tx, page_rx) = bounded::<PagesMessage>(PAGE_MESSAGES_IN_FLIGHT);

        for _ in 0..producer_count {
            let batch_tx = batch_tx.clone();
            let (parts, cancel, fail) = (&parts, &cancel, &fail);
            scope.spawn(move || loop {
                let next = match parts.lock() {
                    Ok(mut q) => q.pop_front(),
                    Err(_) => None,
                };
                let Some(part) = next else { break };
                let iter = match part() {
                    Ok(i) => i,
                    Err(e) => return fail(e),
                };
                for batch in iter {
                    if cancel.load(Ordering::Relaxed) {
                        return;
                    }
                    match batch {
                        Ok(b) => {
                            if batch_tx.send(b).is_err() {
                                return;
                            }
                        }
                        Err(e) => return fail(e),
                    }
                }
            });
        }
        drop(batch_tx);

        for _ in 0..encoder_count {
            let (batch_rx, page_tx) = (batch_rx.clone(), page_tx.clone());
            let (cancel, fail) = (&cancel, &fail);
            scope.spawn(move || {
                let mut encoder = BatchEncoder::new(table_name, columns, partition_by, options.partition_count).for_host(options.host);
                if let Some(rows) = options.rows_per_page_max {
                    encoder = encoder.with_rows_per_page_max(rows);
                }
                let mut emit = |m: PagesMessage| page_tx.send(m).map_err(|_| StorageError::Worker("writer stopped".into()));
                for batch in batch_rx.iter() {
                    if cancel.load(Ordering::Relaxed) {
                        return;
                    }
                    if let Err(e) = encoder.encode(&batch, &mut emit) {
                        return fail(e);
                    }
                    counters.rows_encoded.fetch_add(batch.num_rows() as u64, Ordering::Relaxed);
                }
                if let Err(e) = encoder.flush(&mut emit) {
                    fail(e);
                }
            });
        }
        drop(batch_rx);
        drop(page_tx);

        for message in page_rx.iter() {
            if cancel.load(Ordering::Relaxed) {
                break;
            }
            if let Err(e) = writer.write(message) {
                fail(e);
                break;
            }
            counters.bytes_written.store(writer.bytes_written(), Ordering::Relaxed);
        }
        // Dropping the receiver unblocks encoders waiting to send; they see the error and stop.
        drop(page_rx);
    });

    match first_error.into_inner() {
        Ok(Some(e)) => Err(e),
        Ok(None) => Ok(()),
        Err(_) => Err(StorageError::Worker("a load thread panicked".into())),
    }
}
