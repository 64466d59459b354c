//! `flashscan checkpoint DB [--max-async-io N]`: the deltas become heap pages on disk (a
//! column store's delta rows become row groups of its format: `delta_pages`).
//!
//! 1. `checkpoint_begin` logs the redo point R; every delta row was logged before it.
//! 2. Each partition's delta pages are sealed (page id, LSN = R, checksum) and appended
//!    past the last page of the partition's own file (`append_target`), or written into a
//!    new data file of that partition (`TABLE.pNNN.fID.gGEN.dat`, O_EXCL|O_NOFOLLOW, named
//!    with the catalog generation about to commit, so a crash before the commit leaves an
//!    orphan the next writer removes). Space is reserved before the first write.
//! 3. The writes, sorted by (file, offset) and coalesced up to `CHECKPOINT_WRITE_BYTES_MAX`,
//!    go out O_DIRECT through the request queue with at most `max_async_io` outstanding
//!    (SQL Server's "Max Async IO"), paced while a scan reads; then every file and
//!    directory is fsynced.
//! 4. One atomic catalog commit: the new runs, page and row counts, and `redo_lsn = R`.
//!    From here recovery skips every row logged before R: no row is in both a page and
//!    the delta, whatever crashes when.
//! 5. `checkpoint_end(R)` records R in the log's control file; older segments recycle.
//!
//! A crash before 4 leaves the old catalog (old counts, old redo point): the log replays
//! the rows again, the orphans go, and appended pages past the catalog's count are
//! overwritten by the next checkpoint. A crash between 4 and 5 leaves the log's redo point
//! behind the catalog's: recovery scans a little more and skips rows before the catalog's.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use flashscan_buffer::stream_activity;
use flashscan_io::{open_engine, EngineConfig, EngineKind, FileSet, FileStats, IoError, OpenMode, RequestQueue};
use flashscan_storage::catalog::sync_dir;
use flashscan_storage::orphans::sweep_unreferenced;
use flashscan_storage::heap::header::seal;
use flashscan_storage::deleted_rows::{deleted_rows_file_name, write_deleted_rows, DeletedRowsMeta};
use flashscan_storage::columnstore::{encode_row_group, ColumnStoreOptions, RowGroupReader, ROW_GROUP_ROWS_DEFAULT};
use flashscan_storage::{DataFileMeta, Lsn, PageId, PageRun, RowGroupMeta, StorageError, TableFormat, TableMeta, EXTENT_SIZE_BYTES, PAGE_SIZE_BYTES};

use crate::error::{file_err, WriteError};
use crate::limits::{CHECKPOINT_FILE_BYTES_MAX, CHECKPOINT_WRITE_BYTES_MAX, MAX_ASYNC_IO_DEFAULT, MAX_ASYNC_IO_MAX, PACED_GRACE, PACED_READS_PER_WRITE};
use crate::row_id::RowId;
use crate::write_path::{RecoveryReport, State, WritePath};

#[derive(Debug, Clone)]
pub struct CheckpointOptions {
    pub max_async_io: usize,
    /// Pace the writes while a scan of this process is reading (see `issue_writes`).
    pub pace: bool,
    /// io_uring where the kernel allows it, else the psync engine (tests pick one).
    pub engine_kind: EngineKind,
    /// Test hook: stop after the pages are written and synced, before the catalog commit,
    /// leaving everything as a crash there would.
    pub stop_before_catalog_commit: bool,
}

impl Default for CheckpointOptions {
    fn default() -> Self {
        CheckpointOptions { max_async_io: MAX_ASYNC_IO_DEFAULT, pace: true, engine_kind: EngineKind::Auto, stop_before_catalog_commit: false }
    }
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct CheckpointReport {
    pub tables: usize,
    pub rows_written: u64,
    pub pages_written: u64,
    pub files_created: usize,
    /// Partitions whose pages were appended to their last file instead.
    pub files_appended: usize,
    pub writes: u64,
    pub avg_write_bytes: f64,
    pub max_async_io: usize,
    pub max_outstanding_writes: u64,
    /// Writes issued while a scan of this process was reading (at the paced limit).
    pub writes_paced: u64,
    pub pace: bool,
    /// "direct" (O_DIRECT: `max_async_io` is the device's queue of writes) or "buffered"
    /// (the file system refused O_DIRECT; the page cache takes the writes).
    pub write_mode: String,
    pub engine: String,
    pub redo_lsn: u64,
    pub orphans_removed: usize,
    /// What opening the log replayed before the checkpoint.
    pub recovery: RecoveryReport,
    /// Time spent writing pages (from the first write queued to the last completed).
    pub write_s: f64,
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
    /// Page number in the file of the first new page (0 for a new file).
    first_page: u64,
    /// The file's committed state when the pages are appended to an existing file.
    appended_to: Option<DataFileMeta>,
    /// The delta's pages, sealed with their real id and the redo LSN; for a column store,
    /// its row groups' bytes cut into pages (not sealed: a row group carries its own
    /// checksums).
    pages: Vec<Vec<u8>>,
    /// Column store only: the row groups among `pages`, in order.
    row_groups: Vec<EncodedGroup>,
    rows: u64,
}

/// One row group a checkpoint encoded from a column store's delta rows.
#[derive(Debug, Clone, Copy)]
struct EncodedGroup {
    /// Its first page among the file's new pages.
    first_page: u64,
    page_count: u64,
    /// Header + directory + names (what a scan reads first).
    metadata_bytes: u64,
    row_count: u64,
}

/// A partition's delta as the pages the checkpoint writes: a heap table's delta pages as
/// they are; a column store's delta rows encoded as row groups of the table's format (at
/// most `ROW_GROUP_ROWS_DEFAULT` rows each; a checkpoint of a few rows makes a small row
/// group, which `flashscan rebuild` merges into full ones).
fn delta_pages(table: &TableMeta, delta: &crate::delta::TableDelta, partition: usize) -> Result<(Vec<Vec<u8>>, Vec<EncodedGroup>), WriteError> {
    let TableFormat::ColumnStore { archive } = table.table_format()? else {
        return Ok((delta.pages(partition), Vec::new()));
    };
    let all: Vec<usize> = (0..table.columns.len()).collect();
    let Some(batch) = delta.decode(table, partition, &all)? else { return Ok((Vec::new(), Vec::new())) };
    let options = ColumnStoreOptions { row_group_rows: ROW_GROUP_ROWS_DEFAULT, archive };
    let mut pages = Vec::new();
    let mut groups = Vec::new();
    let mut start = 0;
    while start < batch.num_rows() {
        let rows = options.row_group_rows.min(batch.num_rows() - start);
        let bytes = encode_row_group(&batch.slice(start, rows), &options).map_err(StorageError::from)?;
        assert_eq!(bytes.len() % PAGE_SIZE_BYTES, 0, "row groups are padded to whole pages");
        let sizes = RowGroupReader::peek_sizes(&bytes, Path::new("<checkpoint row group>"), 0).map_err(StorageError::from)?;
        groups.push(EncodedGroup { first_page: pages.len() as u64, page_count: (bytes.len() / PAGE_SIZE_BYTES) as u64, metadata_bytes: sizes.metadata_bytes, row_count: rows as u64 });
        pages.extend(bytes.chunks_exact(PAGE_SIZE_BYTES).map(<[u8]>::to_vec));
        start += rows;
    }
    Ok((pages, groups))
}

impl NewFile {
    fn offset_bytes(&self) -> u64 {
        self.first_page * PAGE_SIZE_BYTES as u64
    }

    /// The file's size once the pages are in: extents are the unit of file sizes; the tail
    /// past the pages stays zero.
    fn size_bytes(&self) -> u64 {
        let end = self.offset_bytes() + (self.pages.len() * PAGE_SIZE_BYTES) as u64;
        end.div_ceil(EXTENT_SIZE_BYTES as u64) * EXTENT_SIZE_BYTES as u64
    }
}

enum Target {
    New { file_id: u32, path: PathBuf, catalog_path: String, volume: String },
    Append(DataFileMeta),
}

struct Plan {
    table: String,
    partition: usize,
    target: Target,
    pages: Vec<Vec<u8>>,
    row_groups: Vec<EncodedGroup>,
}

/// The file a partition's new pages can be appended to: the file of the partition's last
/// run, if that run ends at the file's last page (nothing of another run after it), no
/// other partition has a run in it, its name is this partition's (`TABLE.pNNN.f…`), and
/// it stays under `CHECKPOINT_FILE_BYTES_MAX`. The new pages go past every page the
/// catalog references: no committed byte is rewritten, and a crash before the catalog
/// commit leaves only unreferenced bytes at the end (overwritten by the next checkpoint,
/// whose rows are still in the log).
fn append_target(table: &TableMeta, partition: usize, new_page_count: u64) -> Option<DataFileMeta> {
    let run = table.partitions.get(partition)?.runs.last()?;
    let file = table.files.iter().find(|f| f.path == run.file)?;
    if run.first_page_id.checked_add(run.page_count as u64)? != PageId::new(file.file_id, u32::try_from(file.page_count).ok()?).0 {
        return None;
    }
    if run.offset_bytes + run.page_count as u64 * PAGE_SIZE_BYTES as u64 != file.page_count * PAGE_SIZE_BYTES as u64 {
        return None;
    }
    let name = Path::new(&file.path).file_name()?.to_string_lossy().into_owned();
    let own = format!("{}.p{partition:03}.f{}.g", table.name, file.file_id);
    if !(name.starts_with(&own) || name.contains(&format!(".{own}"))) || !name.ends_with(".dat") {
        return None;
    }
    let shared = table.partitions.iter().enumerate().any(|(i, p)| i != partition && p.runs.iter().any(|r| r.file == run.file));
    if shared {
        return None;
    }
    let end_bytes = (file.page_count + new_page_count) * PAGE_SIZE_BYTES as u64;
    if end_bytes > CHECKPOINT_FILE_BYTES_MAX || file.page_count + new_page_count > u32::MAX as u64 {
        return None;
    }
    Some(file.clone())
}

/// Row groups of `table` in the file its catalog names `path` (a file's row groups are
/// counted in catalog order: a row group's ordinal, `RowId::row_group_first_page`).
fn row_groups_in_file(table: &TableMeta, path: &str) -> u32 {
    table.partitions.iter().flat_map(|p| &p.row_groups).filter(|g| g.file == path).count() as u32
}

struct PendingWrite {
    file: usize,
    first_page: usize,
    page_count: usize,
}

/// Opens the database as the writer and checkpoints it.
pub fn checkpoint(db_dir: &Path, options: &CheckpointOptions) -> Result<CheckpointReport, WriteError> {
    let wp = WritePath::open_writer(db_dir, "flashscan checkpoint")?;
    let report = wp.checkpoint(options)?;
    wp.close()?;
    Ok(report)
}

/// ENOSPC / EDQUOT: the one failure the user fixes by freeing space.
fn is_no_space(errno: i32) -> bool {
    errno == libc::ENOSPC || errno == libc::EDQUOT
}

fn no_space(path: &Path, needed_bytes: u64) -> WriteError {
    WriteError::NoSpace { path: path.to_path_buf(), needed_bytes, what: "the checkpoint".into() }
}

/// Reserves the file's whole size before any page is written, so a full disk is found
/// before the first write (and says how much was needed) rather than in the middle.
fn reserve(f: &NewFile) -> Result<(), WriteError> {
    let from = f.offset_bytes() as libc::off_t;
    let len = (f.size_bytes() - f.offset_bytes()) as libc::off_t;
    // SAFETY: a valid fd owned by `f.file`; posix_fallocate only reads its arguments.
    let rc = unsafe { libc::posix_fallocate(f.file.as_raw_fd(), from, len) };
    match rc {
        0 => Ok(()),
        e if is_no_space(e) => Err(no_space(&f.path, f.size_bytes())),
        // File systems without fallocate (EOPNOTSUPP): the writes find a full disk instead.
        libc::EOPNOTSUPP | libc::ENOSYS => f.file.set_len(f.size_bytes()).map_err(file_err(&f.path)),
        e => Err(WriteError::File { path: f.path.clone(), source: std::io::Error::from_raw_os_error(e) }),
    }
}

struct WriteFigures {
    max_outstanding: u64,
    writes_paced: u64,
    direct: bool,
    engine: &'static str,
    write_s: f64,
}

/// Opens the new files for the engine: O_DIRECT where the file system allows it, so
/// `max_async_io` is the number of writes the device really holds (buffered writes would
/// land in the page cache at once and leave the kernel's writeback to pick the queue).
fn open_for_writes(files: &[NewFile]) -> Result<(FileSet, bool), WriteError> {
    for direct in [true, false] {
        let mut set = FileSet::new();
        let mut refused = false;
        for f in files {
            match set.add_with_flags(&f.path, OpenMode { direct, write: true }, libc::O_NOFOLLOW, Arc::new(FileStats::default())) {
                Ok(_) => {}
                Err(IoError::DirectUnsupported { .. }) if direct => {
                    refused = true;
                    break;
                }
                Err(e) => return Err(e.into()),
            }
        }
        if !refused {
            return Ok((set, direct));
        }
    }
    Err(WriteError::InvalidArgument("no way to open the checkpoint's files for writing".into()))
}

/// The writes, in (file, offset) order, through the io crate's request queue: at most
/// `max_async_io` in flight (SQL Server's "Max Async IO"). With `pace`, while a scan of
/// this process is reading (or read within `PACED_GRACE`), at most one write per
/// `PACED_READS_PER_WRITE` reads the scans have in flight (at least one): the device
/// shares itself roughly by requests queued, so the scan keeps about 4/5 of it and the
/// checkpoint still always moves forward.
fn issue_writes(files: &[NewFile], writes: &[PendingWrite], options: &CheckpointOptions) -> Result<WriteFigures, WriteError> {
    let (set, direct) = open_for_writes(files)?;
    let set = Arc::new(set);
    let config = EngineConfig::for_depth(options.max_async_io as u32, CHECKPOINT_WRITE_BYTES_MAX);
    let engine = open_engine(options.engine_kind, set.clone(), config, &mut |_| {})?;
    let engine_name = engine.name();
    let mut queue: RequestQueue<usize> = RequestQueue::new(engine);
    let started = Instant::now();
    let mut figures = WriteFigures { max_outstanding: 0, writes_paced: 0, direct, engine: engine_name, write_s: 0.0 };
    let mut next = 0usize;
    // A scan seen within `PACED_GRACE` still counts: between one pass (or query) and the
    // next the stream counters read zero for a moment, and an unpaced burst in that gap
    // would fill the device's queue just as the next scan starts.
    let mut last_scan_seen: Option<Instant> = None;
    let mut last_read_bytes = stream_activity().read_bytes_total;
    let result = (|| -> Result<(), WriteError> {
        loop {
            loop {
                if next >= writes.len() || !queue.has_free_slot() {
                    break;
                }
                let activity = stream_activity();
                if activity.streams_active > 0 || activity.read_bytes_total != last_read_bytes {
                    last_scan_seen = Some(Instant::now());
                }
                last_read_bytes = activity.read_bytes_total;
                let paced = options.pace && last_scan_seen.is_some_and(|t| t.elapsed() < PACED_GRACE);
                let limit = if paced {
                    (activity.reads_in_flight / PACED_READS_PER_WRITE).clamp(1, options.max_async_io as u64)
                } else {
                    options.max_async_io as u64
                };
                if queue.outstanding() as u64 >= limit {
                    break;
                }
                let w = &writes[next];
                let f = &files[w.file];
                let length = (w.page_count * PAGE_SIZE_BYTES) as u32;
                queue.queue_write(w.file as u32, f.offset_bytes() + (w.first_page * PAGE_SIZE_BYTES) as u64, length, |slot| {
                    for (i, page) in f.pages[w.first_page..w.first_page + w.page_count].iter().enumerate() {
                        slot[i * PAGE_SIZE_BYTES..(i + 1) * PAGE_SIZE_BYTES].copy_from_slice(page);
                    }
                    next
                })?;
                next += 1;
                if paced {
                    figures.writes_paced += 1;
                }
                figures.max_outstanding = figures.max_outstanding.max(queue.outstanding() as u64);
            }
            queue.submit()?;
            let done = queue.complete_next(|c| (c.tag, c.completion.result, c.result.map(drop)))?;
            let Some((index, raw, result)) = done else { return Ok(()) };
            let w = &writes[index];
            let f = &files[w.file];
            if let Err(errno) = raw {
                if is_no_space(errno) {
                    return Err(no_space(&f.path, f.size_bytes()));
                }
            }
            result?;
        }
    })();
    if result.is_err() {
        queue.drain();
    }
    result?;
    debug_assert_eq!(next, writes.len(), "every write issued");
    figures.write_s = started.elapsed().as_secs_f64();
    Ok(figures)
}

impl WritePath {
    /// Writes every delta as heap pages and commits them (see the module comment).
    pub fn checkpoint(&self, options: &CheckpointOptions) -> Result<CheckpointReport, WriteError> {
        let mut st = self.lock_state()?;
        self.retry_stopped_log(&mut st)?;
        self.restart_log_if_stopped(&mut st)?;
        let report = self.checkpoint_locked(&mut st, options)?;
        self.trim_sequence_reservations(&mut st)?;
        Ok(report)
    }

    /// The checkpoint, with the state already locked (INSERT's automatic checkpoints).
    pub(crate) fn checkpoint_locked(&self, st: &mut State, options: &CheckpointOptions) -> Result<CheckpointReport, WriteError> {
        let started = Instant::now();
        if !(1..=MAX_ASYNC_IO_MAX).contains(&options.max_async_io) {
            return Err(WriteError::InvalidArgument(format!("--max-async-io {}: use 1 to {MAX_ASYNC_IO_MAX}", options.max_async_io)));
        }
        let db_dir = self.db_dir().to_path_buf();
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
        // Where each partition's pages go: appended to the partition's own last file when
        // it has room (`append_target`), else into a new file.
        let mut plans: Vec<Plan> = Vec::new();
        {
            let mut file_id = st.catalog.next_file_id;
            for (name, delta) in &st.deltas {
                let Some(table) = st.catalog.tables.get(name) else { continue };
                if delta.row_count() == 0 {
                    continue;
                }
                for p in 0..delta.partition_count() {
                    if delta.partition_row_count(p) == 0 {
                        continue;
                    }
                    let (pages, row_groups) = delta_pages(table, delta, p)?;
                    let page_count = pages.len() as u64;
                    // Row ids name at most 2^15 row groups of one file.
                    let fits = |f: &DataFileMeta| row_groups_in_file(table, &f.path) as u64 + row_groups.len() as u64 <= 1 << flashscan_storage::row_id::GROUP_ORDINAL_BITS;
                    if let Some(f) = append_target(table, p, page_count).filter(|f| fits(f)) {
                        plans.push(Plan { table: name.clone(), partition: p, target: Target::Append(f), pages, row_groups });
                        continue;
                    }
                    let Some(next) = file_id.checked_add(1) else {
                        return Err(WriteError::InvalidArgument("the database has used all 2^32 data file ids".into()));
                    };
                    let (path, catalog_path, volume) = place(name, p, file_id);
                    plans.push(Plan { table: name.clone(), partition: p, target: Target::New { file_id, path, catalog_path, volume }, pages, row_groups });
                    file_id = next;
                }
            }
        }
        // Tables whose deleted rows changed since their file was written: each gets a new
        // deleted rows file (the delta rows' deletions named by their new pages).
        let deleted_files: Vec<(String, String)> = st
            .deltas
            .iter()
            .filter(|(name, delta)| st.catalog.tables.get(*name).is_some_and(|t| delta.deleted().total() != t.deleted_rows.as_ref().map(|d| d.row_count).unwrap_or(0)))
            .map(|(name, _)| (name.clone(), deleted_rows_file_name(name, generation)))
            .collect();
        let planned: Vec<String> = plans
            .iter()
            .filter_map(|p| match &p.target {
                Target::New { catalog_path, .. } => Some(catalog_path.clone()),
                Target::Append(_) => None,
            })
            .chain(deleted_files.iter().map(|(_, file)| file.clone()))
            .collect();
        // Intent first: the files about to be created are listed in the catalog as
        // unreferenced, durably, before they exist, so a crash before the commit below leaves
        // them named for the next writer's sweep (and nothing else is ever swept).
        if !planned.is_empty() {
            let mut intent = st.catalog.clone();
            intent.unreferenced_files.extend(planned.iter().cloned());
            intent.write_atomic(&db_dir)?;
            st.catalog = intent;
        }
        let wal = WritePath::wal(st)?;
        let redo = wal.checkpoint_begin()?;
        let catalog = &st.catalog;
        let next_file_id = plans.iter().filter_map(|p| if let Target::New { file_id, .. } = p.target { Some(file_id + 1) } else { None }).max().unwrap_or(catalog.next_file_id).max(catalog.next_file_id);

        // The files: created (O_EXCL) or opened to append, their space reserved, their
        // pages sealed with their real ids and the redo LSN.
        let mut files: Vec<NewFile> = Vec::new();
        // On failure: new files removed; appended files cut back to their committed size
        // (only bytes no catalog ever referenced go).
        let undo = |files: &[NewFile]| {
            for f in files {
                match &f.appended_to {
                    None => {
                        let _ = std::fs::remove_file(&f.path);
                    }
                    Some(meta) => {
                        let _ = f.file.set_len(meta.size_bytes);
                    }
                }
            }
        };
        for plan in plans {
            let Some(delta) = st.deltas.get(&plan.table) else { continue };
            let p = plan.partition;
            let opened = match &plan.target {
                Target::New { file_id, path, catalog_path, volume } => {
                    OpenOptions::new().write(true).create_new(true).custom_flags(libc::O_NOFOLLOW).open(path).map(|file| (file, *file_id, path.clone(), catalog_path.clone(), volume.clone(), 0u64, None))
                }
                Target::Append(meta) => {
                    let path = db_dir.join(&meta.path);
                    OpenOptions::new().write(true).custom_flags(libc::O_NOFOLLOW).open(&path).map(|file| (file, meta.file_id, path.clone(), meta.path.clone(), meta.volume.clone(), meta.page_count, Some(meta.clone())))
                }
            };
            let (file, file_id, path, catalog_path, volume, first_page, appended_to) = match opened {
                Ok(o) => o,
                Err(e) => {
                    undo(&files);
                    let path = match &plan.target {
                        Target::New { path, .. } => path.clone(),
                        Target::Append(meta) => db_dir.join(&meta.path),
                    };
                    if e.raw_os_error().is_some_and(is_no_space) {
                        return Err(no_space(&path, 0));
                    }
                    return Err(WriteError::File { path, source: e });
                }
            };
            let Plan { mut pages, row_groups, table, .. } = plan;
            if row_groups.is_empty() {
                for (i, page) in pages.iter_mut().enumerate() {
                    seal(page, PageId::new(file_id, (first_page + i as u64) as u32), Lsn(redo.0));
                }
            }
            let rows = delta.partition_row_count(p);
            debug_assert!(row_groups.is_empty() || row_groups.iter().map(|g| g.row_count).sum::<u64>() == rows);
            files.push(NewFile { path, catalog_path, volume, file, file_id, table, partition: p, first_page, appended_to, pages, row_groups, rows });
            let last = files.len() - 1;
            if let Err(e) = reserve(&files[last]) {
                undo(&files);
                return Err(e);
            }
        }

        // Writes sorted by (file, offset), neighbours coalesced.
        let pages_per_write = CHECKPOINT_WRITE_BYTES_MAX / PAGE_SIZE_BYTES;
        let mut writes = Vec::new();
        for (fi, f) in files.iter().enumerate() {
            let mut first_page = 0usize;
            while first_page < f.pages.len() {
                let page_count = pages_per_write.min(f.pages.len() - first_page);
                writes.push(PendingWrite { file: fi, first_page, page_count });
                first_page += page_count;
            }
        }
        debug_assert!(writes.windows(2).all(|w| (w[0].file, w[0].first_page) < (w[1].file, w[1].first_page)));
        let written = (|| {
            let figures = if writes.is_empty() {
                WriteFigures { max_outstanding: 0, writes_paced: 0, direct: false, engine: "none", write_s: 0.0 }
            } else {
                issue_writes(&files, &writes, options)?
            };
            for f in &files {
                f.file.sync_all().map_err(|e| if e.raw_os_error().is_some_and(is_no_space) { no_space(&f.path, f.size_bytes()) } else { WriteError::File { path: f.path.clone(), source: e } })?;
            }
            let mut dirs: Vec<PathBuf> = files.iter().filter_map(|f| f.path.parent().map(Path::to_path_buf)).collect();
            dirs.sort();
            dirs.dedup();
            for d in dirs {
                sync_dir(&d)?;
            }
            Ok::<_, WriteError>(figures)
        })();
        let figures = match written {
            Ok(m) => m,
            Err(e) => {
                undo(&files);
                return Err(e);
            }
        };
        // Each delta row's page row id from here on, and the deleted rows files.
        let mut moved: std::collections::BTreeMap<String, std::collections::HashMap<u64, u64>> = std::collections::BTreeMap::new();
        for f in &files {
            let Some(delta) = st.deltas.get(&f.table) else { continue };
            let placed = if f.row_groups.is_empty() {
                delta.placement(f.partition, f.file_id, f.first_page)
            } else {
                // A column store's rows: row r of the k-th new row group is named by the
                // row group's ordinal in its file (the file's row groups before it, then k).
                let before = catalog.tables.get(&f.table).map_or(0, |t| row_groups_in_file(t, &f.catalog_path));
                let lsns = delta.lsns(f.partition, f.rows);
                let mut placed = Vec::with_capacity(lsns.len());
                let mut lsn = lsns.iter();
                for (k, g) in f.row_groups.iter().enumerate() {
                    let Some(first) = RowId::row_group_first_page(f.file_id, before + k as u32) else { break };
                    for r in 0..g.row_count {
                        if let (Some(lsn), Some(to)) = (lsn.next(), RowId::in_row_group(first, r)) {
                            placed.push((RowId::in_delta(*lsn).0, to.0));
                        }
                    }
                }
                placed
            };
            moved.entry(f.table.clone()).or_default().extend(placed);
        }
        let mut next_deleted: std::collections::BTreeMap<String, crate::deleted::DeletedRows> = std::collections::BTreeMap::new();
        let mut deleted_written: Vec<(String, DeletedRowsMeta)> = Vec::new();
        let deleted_result = (|| {
            for (name, file) in &deleted_files {
                let Some(delta) = st.deltas.get(name) else { continue };
                let empty = std::collections::HashMap::new();
                let translated = delta.deleted().translated(moved.get(name).unwrap_or(&empty));
                let ids = translated.page_row_ids();
                if ids.len() as u64 != translated.total() {
                    return Err(WriteError::Corrupt { lsn: redo.0, what: format!("table {name}: {} deleted rows, {} of them in pages after the checkpoint", translated.total(), ids.len()) });
                }
                write_deleted_rows(&db_dir.join(file), &ids)?;
                deleted_written.push((name.clone(), DeletedRowsMeta { path: file.clone(), row_count: ids.len() as u64 }));
                next_deleted.insert(name.clone(), translated);
            }
            if !deleted_files.is_empty() {
                sync_dir(&db_dir)?;
            }
            Ok::<(), WriteError>(())
        })();
        let undo_deleted = |written: &[(String, DeletedRowsMeta)]| {
            for (_, meta) in written {
                let _ = std::fs::remove_file(db_dir.join(&meta.path));
            }
        };
        if let Err(e) = deleted_result {
            undo(&files);
            undo_deleted(&deleted_written);
            return Err(e);
        }
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
            let page_count = f.pages.len() as u64;
            let Some(partition) = table.partitions.get_mut(f.partition) else { continue };
            // A column store's row groups: each also one run, as a load writes them.
            for g in &f.row_groups {
                let first = f.first_page + g.first_page;
                partition.row_groups.push(RowGroupMeta {
                    file: f.catalog_path.clone(),
                    offset_bytes: first * PAGE_SIZE_BYTES as u64,
                    total_bytes: g.page_count * PAGE_SIZE_BYTES as u64,
                    metadata_bytes: g.metadata_bytes,
                    row_count: g.row_count,
                });
                partition.runs.push(PageRun { file: f.catalog_path.clone(), offset_bytes: first * PAGE_SIZE_BYTES as u64, page_count: g.page_count as u32, first_page_id: PageId::new(f.file_id, first as u32).0 });
            }
            match &f.appended_to {
                Some(meta) => {
                    if f.row_groups.is_empty() {
                        // The partition's last run ends where the new pages start: it grows.
                        let Some(run) = partition.runs.last_mut() else { continue };
                        debug_assert_eq!(run.first_page_id + run.page_count as u64, PageId::new(f.file_id, f.first_page as u32).0);
                        run.page_count += page_count as u32;
                    }
                    partition.page_count += page_count;
                    partition.row_count += f.rows;
                    let Some(file) = table.files.iter_mut().find(|m| m.file_id == meta.file_id) else { continue };
                    let grown = f.size_bytes().saturating_sub(file.size_bytes);
                    file.page_count += page_count;
                    file.size_bytes = file.size_bytes.max(f.size_bytes());
                    table.size_bytes += grown;
                }
                None => {
                    let size_bytes = f.size_bytes();
                    let file_index = table.files.len() as u32;
                    if f.row_groups.is_empty() {
                        partition.runs.push(PageRun { file: f.catalog_path.clone(), offset_bytes: 0, page_count: page_count as u32, first_page_id: PageId::new(f.file_id, 0).0 });
                    }
                    partition.page_count += page_count;
                    partition.row_count += f.rows;
                    let filegroup = partition.filegroup as usize;
                    table.files.push(DataFileMeta { file_id: f.file_id, path: f.catalog_path.clone(), volume: f.volume.clone(), size_bytes, page_count });
                    if let Some(fg) = table.filegroups.get_mut(filegroup) {
                        fg.files.push(file_index);
                    }
                    table.size_bytes += size_bytes;
                }
            }
            table.row_count += f.rows;
            rows_written += f.rows;
            pages_written += page_count;
            if !tables.contains(&f.table) {
                tables.push(f.table.clone());
            }
        }
        for (name, meta) in &deleted_written {
            let Some(table) = next.tables.get_mut(name) else { continue };
            if let Some(old) = table.deleted_rows.replace(meta.clone()) {
                next.unreferenced_files.push(old.path);
            }
            if !tables.contains(name) {
                tables.push(name.clone());
            }
        }
        next.generation = generation;
        next.next_file_id = next_file_id;
        next.unreferenced_files.retain(|f| !planned.contains(f));
        if let Some(m) = next.write.as_mut() {
            m.redo_lsn = redo.0;
        }
        if let Err(e) = next.write_atomic(&db_dir) {
            undo(&files);
            undo_deleted(&deleted_written);
            return Err(e.into());
        }
        st.catalog = next;
        for name in &tables {
            let (Some(t), Some(old)) = (st.catalog.tables.get(name), st.deltas.get(name)) else { continue };
            let moved_rows = moved.remove(name).unwrap_or_default();
            // Row locks on moved rows follow them (lockers translate their ids under this
            // same state lock, so none sees the old name with the new delta).
            self.table_locks.rename_rows(name, &moved_rows);
            let fresh = crate::delta::TableDelta::after_checkpoint(t, old, moved_rows);
            debug_assert!(next_deleted.get(name).is_none_or(|d| d.total() == fresh.deleted().total()), "the deleted rows written are the ones the next delta keeps");
            st.deltas.insert(name.clone(), std::sync::Arc::new(fresh));
        }
        let wal = WritePath::wal(st)?;
        wal.checkpoint_end(redo)?;
        st.last_checkpoint_at = Instant::now();
        let write_count = writes.len() as u64;
        let bytes: u64 = writes.iter().map(|w| (w.page_count * PAGE_SIZE_BYTES) as u64).sum();
        Ok(CheckpointReport {
            tables: tables.len(),
            rows_written,
            pages_written,
            files_created: files.iter().filter(|f| f.appended_to.is_none()).count(),
            files_appended: files.iter().filter(|f| f.appended_to.is_some()).count(),
            writes: write_count,
            avg_write_bytes: if write_count == 0 { 0.0 } else { bytes as f64 / write_count as f64 },
            max_async_io: options.max_async_io,
            max_outstanding_writes: figures.max_outstanding,
            writes_paced: figures.writes_paced,
            pace: options.pace,
            write_mode: if figures.direct { "direct".into() } else { "buffered".into() },
            engine: figures.engine.into(),
            redo_lsn: redo.0,
            orphans_removed,
            recovery,
            write_s: figures.write_s,
            elapsed_s: started.elapsed().as_secs_f64(),
        })
    }
}
