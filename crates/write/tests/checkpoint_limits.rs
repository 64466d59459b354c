//! The checkpoint's limits and faults: the delta's memory bound (a checkpoint makes room,
//! else the statement is refused whole), automatic checkpoints by delta size, log size and
//! time, the cap on outstanding writes, and a full disk while a checkpoint or a log
//! segment is created (a clear error, still readable, writes again once space is freed).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use arrow::array::{Int64Array, StringArray};
use arrow::datatypes::{DataType, Field, Schema};
use arrow::record_batch::RecordBatch;
use flashscan_storage::{ColumnDef, ColumnType, Database};
use flashscan_write::{checkpoint, unflushed_rows, CheckpointOptions, InitOptions, WriteError, WriteLimits, WritePath};

mod common;

fn columns() -> Vec<ColumnDef> {
    vec![ColumnDef { name: "id".into(), column_type: ColumnType::Int64, nullable: false }, ColumnDef { name: "pad".into(), column_type: ColumnType::Utf8, nullable: true }]
}

/// Rows `from..to`, each about 100 bytes.
fn batch(from: i64, to: i64) -> RecordBatch {
    let schema = Arc::new(Schema::new(vec![Field::new("id", DataType::Int64, false), Field::new("pad", DataType::Utf8, true)]));
    let ids: Vec<i64> = (from..to).collect();
    let pads: Vec<String> = ids.iter().map(|i| format!("{i:0100}")).collect();
    RecordBatch::try_new(schema, vec![Arc::new(Int64Array::from(ids)), Arc::new(StringArray::from(pads))]).unwrap()
}

/// Table `t` in 2 partitions in a new database at `db`, its log in `wal_dir` (else the
/// database's own `wal/`).
fn create_db(db: &Path, wal_dir: Option<PathBuf>, segment_size_bytes: u64) {
    if let Some(w) = &wal_dir {
        std::fs::create_dir_all(w).unwrap();
    }
    common::create_db(db, &init_options(wal_dir, segment_size_bytes), &["t"], &columns(), 2);
}

fn init_options(wal_dir: Option<PathBuf>, segment_size_bytes: u64) -> InitOptions {
    InitOptions { segment_size_bytes: Some(segment_size_bytes), wal_dir, ..Default::default() }
}

/// Table `t` in 2 partitions in a new database in a temporary directory.
fn new_db(segment_size_bytes: u64) -> common::TestDb {
    common::TestDb::new(&init_options(None, segment_size_bytes), &["t"], &columns(), 2)
}

/// `new_db` and its writer with the automatic checkpoints off (`quiet_limits`).
fn quiet_db(segment_size_bytes: u64) -> (common::TestDb, WritePath) {
    let db = new_db(segment_size_bytes);
    let wp = db.writer();
    wp.set_limits(quiet_limits()).unwrap();
    (db, wp)
}

/// Every id of table `t`, pages and delta (as a new reader sees them), sorted.
/// Pacing reacts to any scan of the process (buffer's stream activity, with a grace
/// period after the last read), and the tests of this file run in one process: the ones
/// that scan hold this while they do, and the test that asserts no pacing without a scan
/// holds it across its checkpoints.
static SCANS: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn no_scans() -> std::sync::MutexGuard<'static, ()> {
    SCANS.lock().unwrap_or_else(|p| p.into_inner())
}

fn all_ids(db: &Path) -> Vec<i64> {
    let _scanning = no_scans();
    common::sorted_ids(db, "t")
}

/// Up to `statements_max` INSERTs of `rows` rows each into `t` from `*next` on, `*next`
/// moved past every acknowledged one; the first refusal, if any.
fn insert_until_refused(wp: &WritePath, next: &mut i64, rows: i64, statements_max: usize) -> Option<WriteError> {
    for _ in 0..statements_max {
        match wp.insert("t", &[batch(*next, *next + rows)]) {
            Ok(_) => *next += rows,
            Err(e) => return Some(e),
        }
    }
    None
}

fn quiet_limits() -> WriteLimits {
    WriteLimits {
        checkpoint_delta_bytes: u64::MAX,
        checkpoint_log_bytes: u64::MAX,
        checkpoint_interval: Duration::from_secs(1 << 30),
        ..WriteLimits::default()
    }
}

#[test]
fn the_delta_bound_checkpoints_to_make_room_else_refuses_the_statement_whole() {
    let db = new_db(1 << 20);
    let wp = db.writer();
    // Bound 256 KiB, automatic checkpoints only to make room.
    wp.set_limits(WriteLimits { delta_bytes_max: 256 << 10, ..quiet_limits() }).unwrap();
    let mut next = 0i64;
    for _ in 0..40 {
        // ~100 KB per statement: the bound is crossed every few statements.
        wp.insert("t", &[batch(next, next + 800)]).unwrap();
        next += 800;
        assert!(wp.delta_bytes().unwrap() <= 256 << 10, "the delta stays within its bound");
    }
    let stats = wp.auto_checkpoint_stats().unwrap();
    assert!(stats.checkpoints_count >= 5, "{stats:?}");
    assert_eq!(stats.last_reason.as_deref(), Some("delta_bound"));
    assert_eq!(stats.failures_count, 0);

    // A statement larger than the bound by itself: refused whole, nothing logged.
    let e = wp.insert("t", &[batch(next, next + 4000)]).unwrap_err();
    assert!(matches!(e, WriteError::DeltaFull { .. }), "{e}");
    assert!(e.is_user_input());
    let m = e.to_string();
    assert!(m.contains("delta_bytes_max") && m.contains("fewer rows per statement"), "{m}");

    // Without automatic checkpoints the bound refuses as soon as it would be crossed.
    wp.set_limits(WriteLimits { delta_bytes_max: 256 << 10, auto_checkpoint: false, ..quiet_limits() }).unwrap();
    let refused = insert_until_refused(&wp, &mut next, 800, 10);
    assert!(matches!(refused, Some(WriteError::DeltaFull { .. })), "{refused:?}");
    wp.close().unwrap();
    // Exactly the acknowledged rows, once each, after a reopen.
    assert_eq!(all_ids(&db), (0..next).collect::<Vec<_>>());
}

#[test]
fn automatic_checkpoints_run_by_delta_size_log_size_and_time() {
    let dir = tempfile::tempdir().unwrap();
    for (reason, limits) in [
        ("delta_bytes", WriteLimits { checkpoint_delta_bytes: 200 << 10, ..quiet_limits() }),
        ("log_bytes", WriteLimits { checkpoint_log_bytes: 300 << 10, ..quiet_limits() }),
        ("interval", WriteLimits { checkpoint_interval: Duration::ZERO, ..quiet_limits() }),
    ] {
        let db = dir.path().join(reason);
        create_db(&db, None, 1 << 20);
        let wp = common::writer(&db);
        wp.set_limits(limits).unwrap();
        let mut next = 0i64;
        while wp.auto_checkpoint_stats().unwrap().checkpoints_count == 0 {
            assert!(next < 100_000, "{reason}: no automatic checkpoint after {next} rows");
            wp.insert("t", &[batch(next, next + 500)]).unwrap();
            next += 500;
        }
        let stats = wp.auto_checkpoint_stats().unwrap();
        assert_eq!(stats.last_reason.as_deref(), Some(reason), "{stats:?}");
        let report = stats.last_report.unwrap();
        assert_eq!(report.rows_written, next as u64, "{reason}: the checkpoint took every committed row");
        assert_eq!(wp.delta_bytes().unwrap(), 0);
        wp.close().unwrap();
        assert_eq!(unflushed_rows(&db, "t").unwrap(), 0, "{reason}");
        assert_eq!(all_ids(&db), (0..next).collect::<Vec<_>>(), "{reason}");
    }
}

#[test]
fn at_most_max_async_io_writes_are_outstanding_and_nothing_is_paced_without_a_scan() {
    let db = new_db(4 << 20);
    let wp = db.writer();
    let quiet = no_scans();
    // Past the pacing's grace period after another test's last scan read.
    std::thread::sleep(std::time::Duration::from_millis(500));
    // ~3 MB of rows: several 1 MiB writes per partition.
    wp.insert("t", &[batch(0, 30_000)]).unwrap();
    let r = wp.checkpoint(&CheckpointOptions { max_async_io: 1, ..Default::default() }).unwrap();
    assert_eq!(r.max_outstanding_writes, 1, "{r:?}");
    assert!(r.writes >= 4, "{r:?}");
    assert_eq!(r.writes_paced, 0);
    assert!(r.avg_write_bytes > 8192.0);
    wp.insert("t", &[batch(30_000, 60_000)]).unwrap();
    let r = wp.checkpoint(&CheckpointOptions { max_async_io: 3, ..Default::default() }).unwrap();
    assert!((1..=3).contains(&r.max_outstanding_writes), "{r:?}");
    // Out of range: refused before anything happens.
    let e = wp.checkpoint(&CheckpointOptions { max_async_io: 0, ..Default::default() }).unwrap_err();
    assert!(e.is_user_input() && e.to_string().contains("1 to 1024"), "{e}");
    drop(quiet);
    wp.close().unwrap();
    assert_eq!(all_ids(&db), (0..60_000).collect::<Vec<_>>());
}

/// A tmpfs of `size_bytes` mounted for the test's life (needs root; `None` otherwise).
struct SmallDisk {
    dir: tempfile::TempDir,
}

impl SmallDisk {
    fn mount(size_bytes: u64) -> Option<SmallDisk> {
        let dir = tempfile::tempdir().ok()?;
        let ok = Command::new("mount").args(["-t", "tmpfs", "-o", &format!("size={size_bytes}"), "tmpfs"]).arg(dir.path()).status().map(|s| s.success()).unwrap_or(false);
        if !ok {
            eprintln!("skipped: cannot mount a small tmpfs here (needs root)");
            return None;
        }
        Some(SmallDisk { dir })
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Fills the disk up to `leave_bytes` of free space with one file; returns its path.
    fn fill(&self, leave_bytes: u64) -> PathBuf {
        let stat = nix_statvfs(self.path());
        let free = stat.saturating_sub(leave_bytes);
        let path = self.path().join("filler");
        let f = std::fs::File::create(&path).unwrap();
        let chunk = vec![7u8; 64 << 10];
        let mut written = 0u64;
        use std::io::Write;
        let mut w = std::io::BufWriter::new(f);
        while written + chunk.len() as u64 <= free {
            if w.write_all(&chunk).is_err() {
                break;
            }
            written += chunk.len() as u64;
        }
        let _ = w.flush();
        path
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(self.dir.path()).status();
    }
}

/// The part of a test's database that lives on the small disk.
enum OnSmallDisk {
    DataFiles,
    Log,
}

/// Table `t` in a new database (1 MiB log segments) with its data files or its log on an
/// 8 MiB `SmallDisk`, the other part in a temporary directory; its writer with the automatic
/// checkpoints off. `None` where no tmpfs can be mounted.
fn small_disk_db(on_small_disk: OnSmallDisk) -> Option<(SmallDisk, tempfile::TempDir, PathBuf, WritePath)> {
    let disk = SmallDisk::mount(8 << 20)?;
    let other = tempfile::tempdir().unwrap();
    let (db, wal_dir) = match on_small_disk {
        OnSmallDisk::DataFiles => (disk.path().join("db"), other.path().join("wal")),
        OnSmallDisk::Log => (other.path().join("db"), disk.path().join("wal")),
    };
    create_db(&db, Some(wal_dir), 1 << 20);
    let wp = common::writer(&db);
    wp.set_limits(quiet_limits()).unwrap();
    Some((disk, other, db, wp))
}

fn nix_statvfs(path: &Path) -> u64 {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid C string and a zeroed struct we own.
    unsafe {
        let mut s: libc::statvfs = std::mem::zeroed();
        assert_eq!(libc::statvfs(c.as_ptr(), &mut s), 0);
        s.f_bavail * s.f_frsize
    }
}

fn dat_files(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir).unwrap().filter_map(|e| e.ok()).map(|e| e.file_name().to_string_lossy().into_owned()).filter(|n| n.ends_with(".dat")).collect()
}

#[test]
fn a_full_disk_fails_the_checkpoint_clearly_and_it_succeeds_once_space_is_freed() {
    let Some((disk, _log_dir, db, wp)) = small_disk_db(OnSmallDisk::DataFiles) else { return };
    // ~3 MB of rows in the delta; the data disk keeps 512 KiB free.
    wp.insert("t", &[batch(0, 25_000)]).unwrap();
    let filler = disk.fill(512 << 10);
    let e = wp.checkpoint(&CheckpointOptions::default()).unwrap_err();
    assert!(matches!(e, WriteError::NoSpace { .. }), "{e:?}");
    let m = e.to_string();
    assert!(m.contains("no space left") && m.contains("free space"), "{m}");
    assert!(!m.contains('\n'));
    // Nothing half-written: no data file, the rows still in the delta and readable.
    assert!(dat_files(&db).is_empty(), "{:?}", dat_files(&db));
    assert_eq!(wp.delta("t").unwrap().row_count(), 25_000);
    assert_eq!(all_ids(&db), (0..25_000).collect::<Vec<_>>());
    // Writes still go on (the log is elsewhere).
    wp.insert("t", &[batch(25_000, 26_000)]).unwrap();
    // Space freed: the next checkpoint takes everything.
    std::fs::remove_file(&filler).unwrap();
    let r = wp.checkpoint(&CheckpointOptions::default()).unwrap();
    assert_eq!(r.rows_written, 26_000);
    wp.close().unwrap();
    assert_eq!(unflushed_rows(&db, "t").unwrap(), 0);
    assert_eq!(all_ids(&db), (0..26_000).collect::<Vec<_>>());
}

#[test]
fn a_full_log_disk_fails_the_insert_clearly_and_writes_resume_once_space_is_freed() {
    // 1 MiB segments on a disk with little room: the log soon needs a segment it cannot make.
    let Some((disk, _dir, db, wp)) = small_disk_db(OnSmallDisk::Log) else { return };
    wp.insert("t", &[batch(0, 1000)]).unwrap();
    let filler = disk.fill(256 << 10);
    let mut next = 1000i64;
    let failure = insert_until_refused(&wp, &mut next, 1000, 200);
    let e = failure.expect("a full log disk fails an insert");
    let m = e.to_string();
    assert!(m.to_lowercase().contains("no space") || m.contains("os error 28"), "{m}");
    assert!(!m.contains('\n'));
    // Still readable: every acknowledged row, nothing of the failed statement.
    assert_eq!(all_ids(&db), (0..next).collect::<Vec<_>>());
    // Still full: the next statement fails clearly too (and changes nothing).
    assert!(wp.insert("t", &[batch(next, next + 10)]).is_err());
    // Space freed: writes resume in the same process (the log is reopened).
    std::fs::remove_file(&filler).unwrap();
    wp.insert("t", &[batch(next, next + 1000)]).unwrap();
    next += 1000;
    wp.checkpoint(&CheckpointOptions::default()).unwrap();
    wp.close().unwrap();
    assert_eq!(all_ids(&db), (0..next).collect::<Vec<_>>());
}

#[test]
fn later_checkpoints_append_to_the_partition_file_and_a_crash_before_the_commit_loses_nothing() {
    let (db, wp) = quiet_db(4 << 20);
    wp.insert("t", &[batch(0, 3000)]).unwrap();
    let first = wp.checkpoint(&CheckpointOptions::default()).unwrap();
    assert_eq!((first.files_created, first.files_appended), (2, 0));
    let files_after_first = dat_files(&db);
    assert_eq!(files_after_first.len(), 2);

    // The second checkpoint appends to both partition files: no new file.
    wp.insert("t", &[batch(3000, 5000)]).unwrap();
    let second = wp.checkpoint(&CheckpointOptions::default()).unwrap();
    assert_eq!((second.files_created, second.files_appended), (0, 2), "{second:?}");
    let mut now = dat_files(&db);
    now.sort();
    let mut before = files_after_first.clone();
    before.sort();
    assert_eq!(now, before);
    let catalog = wp.catalog().unwrap();
    let t = &catalog.tables["t"];
    for p in &t.partitions {
        assert_eq!(p.runs.len(), 1, "the run grew instead of a second run");
        assert_eq!(p.runs[0].page_count as u64, p.page_count);
    }

    // A crash after the appended pages are written, before the catalog commit: the file
    // holds pages no catalog references; the rows come back from the log exactly once.
    wp.insert("t", &[batch(5000, 6000)]).unwrap();
    let e = wp.checkpoint(&CheckpointOptions { stop_before_catalog_commit: true, ..Default::default() }).unwrap_err();
    assert!(e.to_string().contains("test hook"));
    drop(wp);
    assert_eq!(all_ids(&db), (0..6000).collect::<Vec<_>>());
    // The next checkpoint writes them again over the unreferenced tail.
    let r = checkpoint(&db, &CheckpointOptions::default()).unwrap();
    assert_eq!(r.rows_written, 1000);
    assert_eq!(unflushed_rows(&db, "t").unwrap(), 0);
    assert_eq!(all_ids(&db), (0..6000).collect::<Vec<_>>());
    // `flashscan verify` agrees: every page's checksum and id.
    let database = Database::open(&db).unwrap();
    let _scanning = no_scans();
    let mut report = flashscan_storage::verify::VerifyReport::default();
    flashscan_storage::verify::verify_table(&database, &database.catalog().tables["t"], &mut report);
    assert!(report.is_clean(), "{report:?}");
    assert_eq!(report.counts.rows_count, 6000);
}
