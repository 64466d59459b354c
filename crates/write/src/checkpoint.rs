//! `flashscan checkpoint DB [--max-async-io N]`: the deltas become heap pages on disk.
//!
//! 1. `checkpoint_begin` logs the redo point R; every delta row was logged before it.
//! 2. Each partition's delta pages are sealed (page id, LSN = R, checksum) into a new data
//!    file of that partition (`TABLE.pNNN.fID.gGEN.dat`, O_EXCL|O_NOFOLLOW, named with the
//!    catalog generation about to commit, so a crash before the commit leaves an orphan
//!    the next writer removes).
//! 3. The writes, sorted by (file, offset) and coalesced up to `CHECKPOINT_WRITE_BYTES_MAX`,
//!    go out with at most `max_async_io` outstanding (SQL Server's "Max Async IO"); then
//!    every file and directory is fsynced.
//! 4. One atomic catalog commit: the new runs, page and row counts, and `redo_lsn = R`.
//!    From here recovery skips every row logged before R: no row is in both a page and
//!    the delta, whatever crashes when.
//! 5. `checkpoint_end(R)` records R in the log's control file; older segments recycle.
//!
//! A crash before 4 leaves the old catalog (old counts, old redo point): the log replays
//! the rows again and the orphans go. A crash between 4 and 5 leaves the log's redo point
//! behind the catalog's: recovery scans a little more and skips rows before the catalog's.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use flashscan_storage::catalog::sync_dir;
use flashscan_storage::orphans::sweep_unreferenced;
use flashscan_storage::page::header::seal;
use flashscan_storage::{DataFileMeta, Lsn, PageId, PageRun, EXTENT_SIZE_BYTES, PAGE_SIZE_BYTES};

use crate::error::{file_err, WriteError};
use crate::write_path::{WritePath, RecoveryReport};

/// SQL Server's default "Max Async IO" was 32 (later raised to 255): enough to keep a flash
/// device busy, few enough that concurrent reads are not starved.
pub const MAX_ASYNC_IO_DEFAULT: usize = 32;
pub const MAX_ASYNC_IO_MAX: usize = 1024;
/// Neighbouring pages of one file coalesce into writes of at most this size: large enough
/// to amortize a request, small enough that `max_async_io` of them stay a bounded amount
/// of memory in flight (32 MiB at the default).
pub const CHECKPOINT_WRITE_BYTES_MAX: usize = 1 << 20;

#[derive(Debug, Clone)]
pub struct CheckpointOptions {
    pub max_async_io: usize,
    /// Test hook: stop after the pages are written and synced, before the catalog commit,
    /// leaving everything as a crash there would.
    pub stop_before_catalog_commit: bool,
}

impl Default for CheckpointOptions {
    fn default() -> Self {
        CheckpointOptions { max_async_io: MAX_ASYNC_IO_DEFAULT, stop_before_catalog_commit: false }
    }
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct CheckpointReport {
    pub tables: usize,
    pub rows_written: u64,
    pub pages_written: u64,
    pub files_created: usize,
    pub writes: u64,
    pub avg_write_bytes: f64,
    pub max_async_io: usize,
    pub max_outstanding_writes: u64,
    pub redo_lsn: u64,
    pub orphans_removed: usize,
    /// What opening the log replayed before the checkpoint.
    pub recovery: RecoveryReport,
    pub elapsed_s: f64,
}

struct NewFile {
    path: PathBuf,
    catalog_path: String,
    volume: String,
    file: File,
    file_id: u32,
    table: String,
    partition: usize,
    pages: Vec<u8>,
    rows: u64,
}

struct PendingWrite {
    file: usize,
    offset_bytes: u64,
    len_bytes: usize,
}

/// Opens the database as the writer and checkpoints it.
pub fn checkpoint(db_dir: &Path, options: &CheckpointOptions) -> Result<CheckpointReport, WriteError> {
    let wp = WritePath::open_writer(db_dir, "flashscan checkpoint")?;
    let report = wp.checkpoint(options)?;
    wp.close()?;
    Ok(report)
}

fn issue_writes(files: &[NewFile], writes: &[PendingWrite], max_async_io: usize) -> Result<u64, WriteError> {
    let next = AtomicUsize::new(0);
    let in_flight = AtomicU64::new(0);
    let max_in_flight = AtomicU64::new(0);
    let first_error: Mutex<Option<WriteError>> = Mutex::new(None);
    // One thread per outstanding write: each does one pwrite at a time, so at most
    // `max_async_io` are in the kernel at once.
    std::thread::scope(|s| {
        for _ in 0..max_async_io.min(writes.len()).max(1) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(w) = writes.get(i) else { break };
                if first_error.lock().map(|e| e.is_some()).unwrap_or(true) {
                    break;
                }
                let f = &files[w.file];
                let start = w.offset_bytes as usize;
                let now = in_flight.fetch_add(1, Ordering::AcqRel) + 1;
                max_in_flight.fetch_max(now, Ordering::AcqRel);
                let r = f.file.write_all_at(&f.pages[start..start + w.len_bytes], w.offset_bytes);
                in_flight.fetch_sub(1, Ordering::AcqRel);
                if let Err(e) = r {
                    if let Ok(mut slot) = first_error.lock() {
                        slot.get_or_insert(WriteError::File { path: f.path.clone(), source: e });
                    }
                    break;
                }
            });
        }
    });
    match first_error.into_inner() {
        Ok(Some(e)) => Err(e),
        Ok(None) => Ok(max_in_flight.load(Ordering::Acquire)),
        Err(_) => Err(WriteError::InvalidArgument("a checkpoint write thread panicked".into())),
    }
}

impl WritePath {
    /// Writes every delta as heap pages and commits them (see the module comment).
    pub fn checkpoint(&self, options: &CheckpointOptions) -> Result<CheckpointReport, WriteError> {
        let started = Instant::now();
        if !(1..=MAX_ASYNC_IO_MAX).contains(&options.max_async_io) {
            return Err(WriteError::InvalidArgument(format!("--max-async-io {}: use 1 to {MAX_ASYNC_IO_MAX}", options.max_async_io)));
        }
        let db_dir = self.db_dir().to_path_buf();
        let mut st = self.lock_state()?;
        let recovery = st.recovery.clone();
        // Files an interrupted checkpoint (or load) listed before creating them go first.
        let orphans_removed = sweep_unreferenced(&db_dir, &mut st.catalog)?.removed_count as usize;
        let meta = st.catalog.write.clone().unwrap_or_default();
        let generation = st.catalog.generation + 1;
        // The declared volumes (canonical, with their marker): the only places besides the
        // database directory the catalog's confinement accepts.
        let volumes = st.catalog.volumes.clone();
        let place = |name: &str, p: usize, file_id: u32| -> (PathBuf, String, String) {
            let file_name = format!("{name}.p{p:03}.f{file_id}.g{generation}.dat");
            if volumes.is_empty() {
                (db_dir.join(&file_name), file_name, db_dir.to_string_lossy().into_owned())
            } else {
                let v = &volumes[(file_id as usize) % volumes.len()];
                // `flashscan-ID8.` keeps two databases sharing a volume apart; the name
                // follows the one grammar the catalog's confinement accepts.
                let path = Path::new(v).join(format!("flashscan-{}.{file_name}", &meta.database_id[..8.min(meta.database_id.len())]));
                (path.clone(), path.to_string_lossy().into_owned(), v.clone())
            }
        };
        // Intent first: the files about to be created are listed in the catalog as
        // unreferenced, durably, before they exist, so a crash before the commit below leaves
        // them named for the next writer's sweep (and nothing else is ever swept).
        let mut planned: Vec<String> = Vec::new();
        {
            let mut file_id = st.catalog.next_file_id;
            for (name, delta) in &st.deltas {
                if delta.row_count() == 0 || !st.catalog.tables.contains_key(name) {
                    continue;
                }
                for p in 0..delta.partition_count() {
                    if delta.pages(p).is_empty() {
                        continue;
                    }
                    planned.push(place(name, p, file_id).1);
                    file_id = file_id.wrapping_add(1);
                }
            }
        }
        if !planned.is_empty() {
            let mut intent = st.catalog.clone();
            intent.unreferenced_files.extend(planned.iter().cloned());
            intent.write_atomic(&db_dir)?;
            st.catalog = intent;
        }
        let wal = WritePath::wal(&st)?;
        let redo = wal.checkpoint_begin()?;
        let catalog = &st.catalog;
        let mut next_file_id = catalog.next_file_id;

        // Build the files' images: pages sealed with their real ids and the redo LSN.
        let mut files: Vec<NewFile> = Vec::new();
        let created = |files: &[NewFile]| {
            for f in files {
                let _ = std::fs::remove_file(&f.path);
            }
        };
        for (name, delta) in &st.deltas {
            if delta.row_count() == 0 {
                continue;
            }
            if !catalog.tables.contains_key(name) {
                continue;
            }
            for p in 0..delta.partition_count() {
                let pages = delta.pages(p);
                if pages.is_empty() {
                    continue;
                }
                let file_id = next_file_id;
                next_file_id = match next_file_id.checked_add(1) {
                    Some(n) => n,
                    None => {
                        created(&files);
                        return Err(WriteError::InvalidArgument("the database has used all 2^32 data file ids".into()));
                    }
                };
                let (path, catalog_path, volume) = place(name, p, file_id);
                let file = match OpenOptions::new().write(true).create_new(true).custom_flags(libc::O_NOFOLLOW).open(&path) {
                    Ok(f) => f,
                    Err(e) => {
                        created(&files);
                        return Err(WriteError::File { path, source: e });
                    }
                };
                let mut image = Vec::with_capacity(pages.len() * PAGE_SIZE_BYTES);
                for (i, mut page) in pages.into_iter().enumerate() {
                    seal(&mut page, PageId::new(file_id, i as u32), Lsn(redo.0));
                    image.extend_from_slice(&page);
                }
                let rows = delta.partition_row_count(p);
                files.push(NewFile { path, catalog_path, volume, file, file_id, table: name.clone(), partition: p, pages: image, rows });
            }
        }

        // Writes sorted by (file, offset), neighbours coalesced.
        let mut writes = Vec::new();
        for (fi, f) in files.iter().enumerate() {
            let mut offset = 0usize;
            while offset < f.pages.len() {
                let len = CHECKPOINT_WRITE_BYTES_MAX.min(f.pages.len() - offset);
                writes.push(PendingWrite { file: fi, offset_bytes: offset as u64, len_bytes: len });
                offset += len;
            }
        }
        debug_assert!(writes.windows(2).all(|w| (w[0].file, w[0].offset_bytes) < (w[1].file, w[1].offset_bytes)));
        let written = (|| {
            let max_outstanding = issue_writes(&files, &writes, options.max_async_io)?;
            for f in &files {
                // Extents are the unit of file sizes; the tail past the pages stays zero.
                let size = (f.pages.len() as u64).div_ceil(EXTENT_SIZE_BYTES as u64) * EXTENT_SIZE_BYTES as u64;
                f.file.set_len(size).map_err(file_err(&f.path))?;
                f.file.sync_all().map_err(file_err(&f.path))?;
            }
            let mut dirs: Vec<PathBuf> = files.iter().filter_map(|f| f.path.parent().map(Path::to_path_buf)).collect();
            dirs.sort();
            dirs.dedup();
            for d in dirs {
                sync_dir(&d)?;
            }
            Ok::<_, WriteError>(max_outstanding)
        })();
        let max_outstanding_writes = match written {
            Ok(m) => m,
            Err(e) => {
                created(&files);
                return Err(e);
            }
        };
        if options.stop_before_catalog_commit {
            return Err(WriteError::InvalidArgument("checkpoint stopped before the catalog commit (test hook)".into()));
        }

        // One catalog commit: runs, counts and the redo point together.
        let mut next = catalog.clone();
        let mut rows_written = 0u64;
        let mut pages_written = 0u64;
        let mut tables: Vec<String> = Vec::new();
        for f in &files {
            let Some(table) = next.tables.get_mut(&f.table) else { continue };
            let page_count = (f.pages.len() / PAGE_SIZE_BYTES) as u64;
            let size_bytes = (f.pages.len() as u64).div_ceil(EXTENT_SIZE_BYTES as u64) * EXTENT_SIZE_BYTES as u64;
            let file_index = table.files.len() as u32;
            table.files.push(DataFileMeta { file_id: f.file_id, path: f.catalog_path.clone(), volume: f.volume.clone(), size_bytes, page_count });
            let Some(partition) = table.partitions.get_mut(f.partition) else { continue };
            partition.runs.push(PageRun { file: f.catalog_path.clone(), offset_bytes: 0, page_count: page_count as u32, first_page_id: PageId::new(f.file_id, 0).0 });
            partition.page_count += page_count;
            partition.row_count += f.rows;
            let filegroup = partition.filegroup as usize;
            if let Some(fg) = table.filegroups.get_mut(filegroup) {
                fg.files.push(file_index);
            }
            table.row_count += f.rows;
            table.size_bytes += size_bytes;
            rows_written += f.rows;
            pages_written += page_count;
            if !tables.contains(&f.table) {
                tables.push(f.table.clone());
            }
        }
        next.generation = generation;
        next.next_file_id = next_file_id;
        next.unreferenced_files.retain(|f| !planned.contains(f));
        if let Some(m) = next.write.as_mut() {
            m.redo_lsn = redo.0;
        }
        if let Err(e) = next.write_atomic(&db_dir) {
            created(&files);
            return Err(e.into());
        }
        st.catalog = next;
        for name in &tables {
            if let Some(t) = st.catalog.tables.get(name) {
                let fresh = std::sync::Arc::new(crate::delta::TableDelta::new(t));
                st.deltas.insert(name.clone(), fresh);
            }
        }
        let wal = WritePath::wal(&st)?;
        wal.checkpoint_end(redo)?;
        let write_count = writes.len() as u64;
        let bytes: u64 = writes.iter().map(|w| w.len_bytes as u64).sum();
        Ok(CheckpointReport {
            tables: tables.len(),
            rows_written,
            pages_written,
            files_created: files.len(),
            writes: write_count,
            avg_write_bytes: if write_count == 0 { 0.0 } else { bytes as f64 / write_count as f64 },
            max_async_io: options.max_async_io,
            max_outstanding_writes,
            redo_lsn: redo.0,
            orphans_removed,
            recovery,
            elapsed_s: started.elapsed().as_secs_f64(),
        })
    }
}
