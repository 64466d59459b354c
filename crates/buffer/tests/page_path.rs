//! The one page path: dirty pages (pinned against eviction and clearing, listed in file
//! order, seen by scans through the streaming path, written only after the WAL rule), the
//! streaming path itself, and file identity across the process.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use flashscan_buffer::*;
use flashscan_io::{open_engine, EngineConfig, EngineKind, FileSet, OpenMode};

const PAGE: usize = FRAME_SIZE_BYTES;

fn page_bytes(file: u8, page: u64) -> Vec<u8> {
    (0..PAGE).map(|i| file ^ (page as u8).wrapping_mul(13) ^ (i as u8)).collect()
}

fn write_file(path: &Path, file: u8, page_count: u64) {
    let mut f = std::fs::File::create(path).unwrap();
    for p in 0..page_count {
        f.write_all(&page_bytes(file, p)).unwrap();
    }
    f.sync_all().unwrap();
}

#[derive(Debug)]
#[allow(dead_code)] // the text is read through Debug in failures
struct TestError(String);

impl From<BufferError> for TestError {
    fn from(e: BufferError) -> Self {
        TestError(e.to_string())
    }
}

impl From<flashscan_io::IoError> for TestError {
    fn from(e: flashscan_io::IoError) -> Self {
        TestError(e.to_string())
    }
}

fn reader(pool: &BufferPool, paths: &[PathBuf]) -> PageReader {
    let files = Arc::new(FileSet::open(paths, OpenMode { direct: false, write: false }).unwrap());
    let engine = open_engine(EngineKind::Psync, files, EngineConfig::for_depth(1, PAGE), &mut |_| {}).unwrap();
    PageReader::new(pool, engine).unwrap()
}

fn stream<'p>(pool: &'p BufferPool, paths: &[PathBuf], depth: u32, io_size_bytes: usize) -> ScanStream<'p, u64> {
    let config = StreamConfig { depth, io_size_bytes, direct: false, engine_kind: EngineKind::Auto, single_thread: true };
    ScanStream::open(pool, paths, None, config, &mut |_| {}).unwrap()
}

/// Streams the whole file in extents of `io_pages` pages; returns its bytes as scanned.
fn scan_file(pool: &BufferPool, path: &Path, page_count: u64, io_pages: u64) -> Vec<u8> {
    let mut out = vec![0u8; page_count as usize * PAGE];
    let mut s = stream(pool, &[path.to_path_buf()], 3, io_pages as usize * PAGE);
    let mut next_page = 0u64;
    let mut next = || {
        if next_page >= page_count {
            return None;
        }
        let n = io_pages.min(page_count - next_page);
        let e = Extent { file_index: 0, offset_bytes: next_page * PAGE as u64, length_bytes: (n as usize * PAGE) as u32 };
        next_page += n;
        Some((e, e.offset_bytes))
    };
    s.run(&mut next, &mut |offset: u64, bytes: &[u8]| -> Result<(), TestError> {
        out[offset as usize..offset as usize + bytes.len()].copy_from_slice(bytes);
        Ok(())
    })
    .unwrap();
    out
}

fn ok(_: &[u8]) -> Result<(), TestError> {
    Ok(())
}

/// Changes page `page` of `file_id` in the pool to all `byte`, with `lsn`.
fn dirty(pool: &BufferPool, r: &mut PageReader, file_id: u32, page: u64, byte: u8, lsn: u64) {
    let guard = pool.read_page(r, PageKey::new(file_id, page), ok).unwrap();
    let mut w = guard.into_mut();
    w.data_mut().fill(byte);
    w.mark_dirty(Lsn(lsn));
}

/// One file `t.dat` of `page_count` pages written by `write_file(_, file, _)` in a temporary
/// directory, a pool of `frames` frames, a reader on the file and its pool file id.
struct OneFile {
    _dir: tempfile::TempDir,
    path: PathBuf,
    pool: BufferPool,
    r: PageReader,
    id: u32,
}

fn one_file(file: u8, page_count: u64, frames: u32) -> OneFile {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.dat");
    write_file(&path, file, page_count);
    let pool = BufferPool::with_frames(frames).unwrap();
    let r = reader(&pool, std::slice::from_ref(&path));
    let id = r.file_id(0);
    OneFile { _dir: dir, path, pool, r, id }
}

#[test]
fn a_scan_sees_the_pools_version_of_a_dirty_page() {
    let OneFile { _dir, path, pool, mut r, id } = one_file(1, 40, 64);

    let before = scan_file(&pool, &path, 40, 8);
    for p in 0..40 {
        assert_eq!(&before[p * PAGE..(p + 1) * PAGE], &page_bytes(1, p as u64)[..]);
    }
    // Pages 3, 8 (first of an extent) and 39 (the last page) change in the pool only.
    for (page, byte) in [(3u64, 0xA1u8), (8, 0xB2), (39, 0xC3)] {
        dirty(&pool, &mut r, id, page, byte, 0);
    }
    assert_eq!(pool.dirty_count(), 3);
    for io_pages in [1, 5, 8, 40] {
        let scanned = scan_file(&pool, &path, 40, io_pages);
        for p in 0..40u64 {
            let got = &scanned[p as usize * PAGE..(p as usize + 1) * PAGE];
            match p {
                3 => assert!(got.iter().all(|&b| b == 0xA1), "io {io_pages}: page 3 is the file's, not the pool's"),
                8 => assert!(got.iter().all(|&b| b == 0xB2)),
                39 => assert!(got.iter().all(|&b| b == 0xC3)),
                _ => assert_eq!(got, &page_bytes(1, p)[..], "io {io_pages}: page {p}"),
            }
        }
    }
    // The file itself is unchanged until the pages are written.
    let on_disk = std::fs::read(&path).unwrap();
    assert_eq!(&on_disk[3 * PAGE..4 * PAGE], &page_bytes(1, 3)[..]);
}

#[test]
fn an_extent_not_aligned_to_pages_gets_the_overlapping_bytes() {
    let OneFile { _dir, path, pool, mut r, id } = one_file(2, 6, 32);
    dirty(&pool, &mut r, id, 2, 0xEE, 0);
    // A column store segment from the middle of page 1 to the middle of page 3.
    let (start, end) = (PAGE as u64 + 100, 3 * PAGE as u64 + 50);
    let mut s = stream(&pool, std::slice::from_ref(&path), 1, 4 * PAGE);
    let mut given = false;
    let mut next = || {
        if given {
            return None;
        }
        given = true;
        Some((Extent { file_index: 0, offset_bytes: start, length_bytes: (end - start) as u32 }, start))
    };
    let mut seen = Vec::new();
    s.run(&mut next, &mut |_, bytes: &[u8]| -> Result<(), TestError> {
        seen = bytes.to_vec();
        Ok(())
    })
    .unwrap();
    let file = std::fs::read(&path).unwrap();
    for (i, &b) in seen.iter().enumerate() {
        let at = start as usize + i;
        let want = if (2 * PAGE..3 * PAGE).contains(&at) { 0xEE } else { file[at] };
        assert_eq!(b, want, "byte {at}");
    }
    assert_eq!(s.stats().dirty_pages_overlaid, 1);
}

#[test]
fn dirty_pages_are_never_evicted_or_cleared() {
    let OneFile { _dir, pool, mut r, id, .. } = one_file(3, 200, 16);
    dirty(&pool, &mut r, id, 7, 0x77, 0);
    // Far more pages than frames pass through: the clock must skip the dirty one.
    for p in 0..200 {
        drop(pool.read_page(&mut r, PageKey::new(id, p), ok).unwrap());
    }
    pool.clear().unwrap();
    let g = pool.get_resident(PageKey::new(id, 7)).expect("the dirty page stayed");
    assert!(g.data().iter().all(|&b| b == 0x77));
    assert_eq!(pool.dirty_pages(), vec![(PageKey::new(id, 7), Lsn(0))]);
}

struct Log {
    durable: AtomicU64,
    asked: Mutex<Vec<u64>>,
    fail: bool,
}

impl WalRule for Log {
    fn flush_log_to(&self, lsn: Lsn) -> Result<(), String> {
        self.asked.lock().unwrap().push(lsn.0);
        if self.fail {
            return Err("log device full".into());
        }
        self.durable.fetch_max(lsn.0, Ordering::SeqCst);
        Ok(())
    }
}

#[test]
fn dirty_pages_are_listed_in_file_order_and_written_after_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a.dat"), dir.path().join("b.dat"));
    write_file(&a, 4, 30);
    write_file(&b, 5, 30);
    let pool = BufferPool::with_frames(64).unwrap();
    let mut r = reader(&pool, &[a.clone(), b.clone()]);
    let (ia, ib) = (r.file_id(0), r.file_id(1));
    // Dirtied out of order, with LSNs out of order.
    for (file, page, lsn) in [(ib, 4u64, 500u64), (ia, 20, 300), (ia, 2, 900), (ia, 3, 100), (ib, 0, 200), (ia, 4, 50)] {
        dirty(&pool, &mut r, file, page, 0x40 + page as u8, lsn);
    }
    let listed: Vec<(u32, u64)> = pool.dirty_pages().iter().map(|(k, _)| (k.file_index, k.page_number)).collect();
    let mut sorted = listed.clone();
    sorted.sort();
    assert_eq!(listed, sorted, "sorted by (file, offset)");
    assert_eq!(listed.len(), 6);

    // Logged pages and no log: nothing is written.
    let refused = pool.write_dirty(DirtyWriteOptions::default());
    assert!(matches!(refused, Err(BufferError::NoLog { lsn: 900, .. })), "{refused:?}");
    // A log that cannot flush: nothing is written either.
    let failing = Arc::new(Log { durable: AtomicU64::new(0), asked: Mutex::new(Vec::new()), fail: true });
    pool.set_wal_rule(failing.clone());
    assert!(matches!(pool.write_dirty(DirtyWriteOptions::default()), Err(BufferError::LogFlush { lsn: 900, .. })));
    assert_eq!(std::fs::read(&a).unwrap()[2 * PAGE], page_bytes(4, 2)[0], "no page reached the file before the log");
    assert_eq!(pool.dirty_count(), 6);

    let log = Arc::new(Log { durable: AtomicU64::new(0), asked: Mutex::new(Vec::new()), fail: false });
    pool.set_wal_rule(log.clone());
    let figures = pool.write_dirty(DirtyWriteOptions { max_outstanding_writes: 2, engine_kind: EngineKind::Auto }).unwrap();
    assert_eq!(*log.asked.lock().unwrap(), vec![900], "the log is flushed to the highest page LSN first");
    assert_eq!(figures.log_flushed_to, Lsn(900));
    assert_eq!(figures.pages_written, 6);
    // a: pages 2,3,4 coalesce into one write, 20 alone; b: 0 and 4 alone.
    assert_eq!(figures.writes_count, 4);
    assert_eq!(pool.dirty_count(), 0);
    let (fa, fb) = (std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap());
    for (bytes, file, page) in [(&fa, 4u8, 2u64), (&fa, 4, 3), (&fa, 4, 4), (&fa, 4, 20), (&fb, 5, 0), (&fb, 5, 4)] {
        let got = &bytes[page as usize * PAGE..(page as usize + 1) * PAGE];
        assert!(got.iter().all(|&x| x == 0x40 + page as u8), "file {file} page {page} written");
    }
    assert_eq!(&fa[PAGE..2 * PAGE], &page_bytes(4, 1)[..], "clean neighbours untouched");
    // Clean pages are evictable again; the pool's own writes keep the file's id.
    assert_eq!(pool.register_file(&a).unwrap(), ia);
    pool.clear().unwrap();
    assert_eq!(pool.resident_count(), 0, "written pages are clean: clearing drops them");
}

#[test]
fn a_file_replaced_behind_the_pools_back_gets_a_new_id() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.dat");
    write_file(&path, 6, 4);
    let pool = BufferPool::with_frames(16).unwrap();
    let id = pool.register_file(&path).unwrap();
    assert_eq!(pool.register_file(&path).unwrap(), id, "same file, same id");
    assert_eq!(pool.register_file(&dir.path().join(".").join("t.dat")).unwrap(), id, "paths are canonical");
    let mut r = reader(&pool, std::slice::from_ref(&path));
    drop(pool.read_page(&mut r, PageKey::new(id, 1), ok).unwrap());
    assert!(pool.contains(PageKey::new(id, 1)));
    drop(r);
    // Replaced (a rebuild, or a test corrupting it): the cached page must not be served.
    std::fs::remove_file(&path).unwrap();
    write_file(&path, 9, 4);
    let new_id = pool.register_file(&path).unwrap();
    assert_ne!(new_id, id);
    assert!(!pool.contains(PageKey::new(id, 1)), "stale pages of the old file were dropped");
    let mut r = reader(&pool, std::slice::from_ref(&path));
    let g = pool.read_page(&mut r, PageKey::new(new_id, 1), ok).unwrap();
    assert_eq!(g.data(), &page_bytes(9, 1)[..]);
}

/// A file flashscan is about to remove is forgotten: its pages go, and the path gets a new
/// id even when the next file there looks the same (a reused inode within one tick of the
/// coarse change time would otherwise be taken for the old file).
#[test]
fn a_forgotten_file_drops_its_pages_and_its_id() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.dat");
    write_file(&path, 6, 4);
    let pool = BufferPool::with_frames(16).unwrap();
    let id = pool.register_file(&path).unwrap();
    let mut r = reader(&pool, std::slice::from_ref(&path));
    drop(pool.read_page(&mut r, PageKey::new(id, 2), ok).unwrap());
    drop(r);
    assert!(pool.contains(PageKey::new(id, 2)));
    pool.forget_file(&path);
    assert!(!pool.contains(PageKey::new(id, 2)), "the forgotten file's pages were dropped");
    // The very same file, registered again: a new id all the same.
    assert_ne!(pool.register_file(&path).unwrap(), id);
    // A path never registered is nothing to forget.
    pool.forget_file(&dir.path().join("never.dat"));
}
