//! Buffer pool correctness: hits and misses, eviction within the budget, pinned pages
//! never evicted, verification failures surfacing, scan rings, and many threads reading
//! random pages with every byte checked (no torn reads).

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use flashscan_buffer::{BufferError, BufferPool, Fetch, PageKey, FRAME_SIZE_BYTES};
use flashscan_buffer::PageReader;
use flashscan_io::{open_engine, EngineConfig, EngineKind, FileSet, OpenMode};
use rand::{Rng, SeedableRng};

#[derive(Debug)]
enum TestError {
    Buffer(BufferError),
    Torn { page: u64, at: usize },
}

impl From<BufferError> for TestError {
    fn from(e: BufferError) -> Self {
        TestError::Buffer(e)
    }
}

/// Every byte of page `p` is a function of `p`, so any mix of two pages is caught.
fn page_byte(page: u64, at: usize) -> u8 {
    (page.wrapping_mul(31).wrapping_add(at as u64 * 7) % 251) as u8
}

fn page_bytes(page: u64) -> Vec<u8> {
    (0..FRAME_SIZE_BYTES).map(|at| page_byte(page, at)).collect()
}

fn verify(page: u64) -> impl Fn(&[u8]) -> Result<(), TestError> {
    move |bytes: &[u8]| {
        for (at, &b) in bytes.iter().enumerate() {
            if b != page_byte(page, at) {
                return Err(TestError::Torn { page, at });
            }
        }
        Ok(())
    }
}

fn check(bytes: &[u8], page: u64) {
    if let Err(e) = verify(page)(bytes) {
        panic!("page {page} content wrong: {e:?}");
    }
}

struct Fixture {
    _dir: tempfile::TempDir,
    files: Arc<FileSet>,
}

fn fixture(page_count: u64, corrupt_page: Option<u64>) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("pages.dat");
    let mut f = std::fs::File::create(&path).unwrap();
    for p in 0..page_count {
        let mut bytes = page_bytes(p);
        if corrupt_page == Some(p) {
            bytes[100] ^= 0xFF;
        }
        f.write_all(&bytes).unwrap();
    }
    f.sync_all().unwrap();
    let files = FileSet::open(&[path], OpenMode { direct: false, write: false }).unwrap();
    Fixture { _dir: dir, files: Arc::new(files) }
}

/// The random path's reader over the fixture's file (pool file id 0 in a fresh pool).
fn engine(pool: &BufferPool, files: &Arc<FileSet>) -> PageReader {
    let engine = open_engine(EngineKind::Psync, files.clone(), EngineConfig::for_depth(1, FRAME_SIZE_BYTES), &mut |_| {}).unwrap();
    let reader = PageReader::new(pool, engine).unwrap();
    assert_eq!(reader.file_id(0), 0);
    reader
}

/// A fixture of `page_count` pages, a fresh pool of `frames` frames and the random path's
/// reader over the fixture's file.
fn pool_on_fixture(page_count: u64, corrupt_page: Option<u64>, frames: u32) -> (Fixture, BufferPool, PageReader) {
    let fx = fixture(page_count, corrupt_page);
    let pool = BufferPool::with_frames(frames).unwrap();
    let engine = engine(&pool, &fx.files);
    (fx, pool, engine)
}

#[test]
fn hits_misses_and_reads_are_counted() {
    let (_fx, pool, mut engine) = pool_on_fixture(8, None, 16);
    for round in 0..3 {
        for p in 0..8 {
            let g = pool.read_page(&mut engine, PageKey::new(0, p), verify(p)).unwrap();
            check(g.data(), p);
            assert_eq!(g.key(), PageKey::new(0, p), "round {round}");
        }
    }
    let s = pool.snapshot();
    assert_eq!(s.misses_count, 8);
    assert_eq!(s.reads_count, 8);
    assert_eq!(s.hits_count, 16);
    assert_eq!(s.evictions_count, 0);
    assert_eq!(pool.resident_count(), 8);
    assert_eq!(pool.pinned_count(), 0);
}

#[test]
fn budget_is_never_exceeded_and_the_clock_evicts() {
    let (_fx, pool, mut engine) = pool_on_fixture(200, None, 16);
    assert_eq!(pool.budget_bytes(), 16 * FRAME_SIZE_BYTES as u64);
    for p in 0..200 {
        let g = pool.read_page(&mut engine, PageKey::new(0, p), verify(p)).unwrap();
        check(g.data(), p);
        assert!(pool.resident_count() <= 16);
    }
    let s = pool.snapshot();
    assert_eq!(s.misses_count, 200);
    assert_eq!(s.evictions_count, 200 - 16);
}

#[test]
fn pinned_pages_are_never_evicted() {
    let (_fx, pool, mut engine) = pool_on_fixture(300, None, 16);
    let pinned: Vec<_> = (0..10).map(|p| pool.read_page(&mut engine, PageKey::new(0, p), verify(p)).unwrap()).collect();
    for p in 10..300 {
        let g = pool.read_page(&mut engine, PageKey::new(0, p), verify(p)).unwrap();
        check(g.data(), p);
    }
    for (p, g) in pinned.iter().enumerate() {
        check(g.data(), p as u64);
        assert!(pool.contains(PageKey::new(0, p as u64)), "pinned page {p} evicted");
    }
    assert_eq!(pool.pinned_count(), 10);
    drop(pinned);
    assert_eq!(pool.pinned_count(), 0);
}

#[test]
fn every_frame_pinned_is_an_error_not_a_hang() {
    let (_fx, pool, mut engine) = pool_on_fixture(20, None, 16);
    let pinned: Vec<_> = (0..16).map(|p| pool.read_page(&mut engine, PageKey::new(0, p), verify(p)).unwrap()).collect();
    let r = pool.read_page(&mut engine, PageKey::new(0, 17), verify(17));
    assert!(matches!(r, Err(TestError::Buffer(BufferError::AllPinned { frame_count: 16 }))));
    drop(pinned);
    assert!(pool.read_page(&mut engine, PageKey::new(0, 17), verify(17)).is_ok());
}

#[test]
fn verification_failure_surfaces_and_leaves_no_page_behind() {
    let (_fx, pool, mut engine) = pool_on_fixture(8, Some(5), 16);
    for _ in 0..2 {
        let r = pool.read_page(&mut engine, PageKey::new(0, 5), verify(5));
        assert!(matches!(r, Err(TestError::Torn { page: 5, at: 100 })), "{:?}", r.err());
        assert!(!pool.contains(PageKey::new(0, 5)));
    }
    assert_eq!(pool.snapshot().verify_failures_count, 2);
    assert_eq!(pool.pinned_count(), 0);
    // The frame the failed loads used is reusable.
    for p in 0..8 {
        if p != 5 {
            check(pool.read_page(&mut engine, PageKey::new(0, p), verify(p)).unwrap().data(), p);
        }
    }
}

#[test]
fn read_errors_surface() {
    let (_fx, pool, mut engine) = pool_on_fixture(4, None, 16);
    // Past the end of the file: a short read.
    let r = pool.read_page(&mut engine, PageKey::new(0, 10), verify(10));
    assert!(matches!(r, Err(TestError::Buffer(BufferError::Io { .. }))), "{:?}", r.err());
    assert!(!pool.contains(PageKey::new(0, 10)));
}

#[test]
fn abandoned_load_lets_the_next_reader_retry() {
    let (_fx, pool, mut engine) = pool_on_fixture(4, None, 16);
    match pool.fetch(PageKey::new(0, 2)).unwrap() {
        Fetch::Miss(ticket) => drop(ticket),
        Fetch::Hit(_) => panic!("empty pool hit"),
    }
    assert!(!pool.contains(PageKey::new(0, 2)));
    check(pool.read_page(&mut engine, PageKey::new(0, 2), verify(2)).unwrap().data(), 2);
}

#[test]
fn scan_ring_keeps_the_warm_set() {
    let (_fx, pool, mut engine) = pool_on_fixture(500, None, 64);
    for p in 0..40 {
        pool.read_page(&mut engine, PageKey::new(0, p), verify(p)).unwrap();
    }
    {
        let mut ring = pool.ring(8).unwrap();
        for p in 100..500 {
            let key = PageKey::new(0, p);
            let g = match ring.fetch(key).unwrap() {
                Fetch::Hit(g) => g,
                Fetch::Miss(mut t) => {
                    let bytes = page_bytes(p);
                    t.buffer_mut().copy_from_slice(&bytes);
                    t.complete(verify(p)).unwrap()
                }
            };
            check(g.data(), p);
            assert!(pool.resident_count() <= 64);
        }
    }
    for p in 0..40 {
        assert!(pool.contains(PageKey::new(0, p)), "warm page {p} was flushed by the scan");
    }
    let before = pool.snapshot();
    for p in 0..40 {
        pool.read_page(&mut engine, PageKey::new(0, p), verify(p)).unwrap();
    }
    assert_eq!(pool.snapshot().since(&before).misses_count, 0);
}

#[test]
fn clear_empties_an_unpinned_pool() {
    let (_fx, pool, mut engine) = pool_on_fixture(20, None, 32);
    for p in 0..20 {
        pool.read_page(&mut engine, PageKey::new(0, p), verify(p)).unwrap();
    }
    let g = pool.read_page(&mut engine, PageKey::new(0, 3), verify(3)).unwrap();
    assert!(matches!(pool.clear(), Err(BufferError::PinnedOnClear { pinned_count: 1 })));
    drop(g);
    pool.clear().unwrap();
    assert_eq!(pool.resident_count(), 0);
    for p in 0..20 {
        check(pool.read_page(&mut engine, PageKey::new(0, p), verify(p)).unwrap().data(), p);
    }
}

/// Many threads, random pages, a pool much smaller than the file: every page read is
/// checked byte for byte, pages held across other requests must not change, and the
/// budget holds throughout.
#[test]
fn concurrent_readers_see_no_torn_pages() {
    let page_count = 256u64;
    let fx = fixture(page_count, None);
    let pool = Arc::new(BufferPool::with_frames(48).unwrap());
    let stop = Arc::new(AtomicBool::new(false));
    let watcher = {
        let pool = pool.clone();
        let stop = stop.clone();
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                assert!(pool.resident_count() <= pool.frame_count() as usize);
                std::thread::yield_now();
            }
        })
    };
    let threads: Vec<_> = (0..6u64)
        .map(|t| {
            let pool = pool.clone();
            let files = fx.files.clone();
            std::thread::spawn(move || {
                let mut engine = engine(&pool, &files);
                let mut rng = rand::rngs::SmallRng::seed_from_u64(t);
                let mut held = Vec::new();
                for i in 0..3000 {
                    // Hot pages (0..16) are shared by every thread, so loads collide.
                    let p = if i % 3 == 0 { rng.gen_range(0..16) } else { rng.gen_range(0..page_count) };
                    let g = pool.read_page(&mut engine, PageKey::new(0, p), verify(p)).unwrap();
                    check(g.data(), p);
                    held.push((p, g));
                    if held.len() > 3 {
                        let (p, g) = held.remove(0);
                        check(g.data(), p);
                    }
                }
                for (p, g) in &held {
                    check(g.data(), *p);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    watcher.join().unwrap();
    assert_eq!(pool.pinned_count(), 0);
    let s = pool.snapshot();
    assert_eq!(s.hits_count + s.misses_count, 6 * 3000);
    assert_eq!(s.misses_count, s.reads_count);
    assert!(s.evictions_count > 0);
}

/// Threads asking for the same page at once read it once; the others wait for that read.
#[test]
fn one_read_per_page_under_contention() {
    let fx = fixture(4, None);
    let pool = Arc::new(BufferPool::with_frames(16).unwrap());
    let barrier = Arc::new(std::sync::Barrier::new(8));
    let threads: Vec<_> = (0..8)
        .map(|_| {
            let pool = pool.clone();
            let files = fx.files.clone();
            let barrier = barrier.clone();
            std::thread::spawn(move || {
                let mut engine = engine(&pool, &files);
                barrier.wait();
                let g = pool.read_page(&mut engine, PageKey::new(0, 1), verify(1)).unwrap();
                check(g.data(), 1);
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(pool.snapshot().reads_count, 1);
}

#[test]
fn budget_out_of_range_is_refused() {
    assert!(matches!(BufferPool::new(1000), Err(BufferError::BudgetOutOfRange { .. })));
    let pool = BufferPool::new(1 << 20).unwrap();
    assert_eq!(pool.frame_count(), 128);
    assert!(pool.ring(2).is_err());
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(32))]
    /// Any sequence of requests with any pattern of held guards: contents right, budget
    /// kept, held pages resident.
    #[test]
    fn random_request_sequences(pages in proptest::collection::vec((0u64..64, proptest::bool::ANY), 1..300)) {
        let (_fx, pool, mut engine) = pool_on_fixture(64, None, 16);
        let mut held = Vec::new();
        for (p, hold) in pages {
            let g = pool.read_page(&mut engine, PageKey::new(0, p), verify(p)).unwrap();
            check(g.data(), p);
            if hold && held.len() < 8 {
                held.push((p, g));
            }
            proptest::prop_assert!(pool.resident_count() <= 16);
            for (q, h) in &held {
                check(h.data(), *q);
                proptest::prop_assert!(pool.contains(PageKey::new(0, *q)));
            }
        }
    }
}

#[test]
fn install_skips_pages_present_or_loading() {
    let (_fx, pool, mut engine) = pool_on_fixture(8, None, 16);
    let held = pool.read_page(&mut engine, PageKey::new(0, 1), verify(1)).unwrap();
    // Present: skipped without waiting (the wrong bytes are never looked at).
    pool.install(PageKey::new(0, 1), &page_bytes(2), verify(1)).unwrap();
    check(held.data(), 1);
    // Being loaded by a ticket we hold: skipped, no deadlock.
    let ticket = match pool.fetch(PageKey::new(0, 3)).unwrap() {
        Fetch::Miss(t) => t,
        Fetch::Hit(_) => panic!("hit on an empty frame"),
    };
    pool.install(PageKey::new(0, 3), &page_bytes(3), verify(3)).unwrap();
    let g = ticket.complete_from(&page_bytes(3), verify(3)).unwrap();
    check(g.data(), 3);
    // Absent: installed, and a later request hits.
    pool.install(PageKey::new(0, 4), &page_bytes(4), verify(4)).unwrap();
    let before = pool.snapshot();
    check(pool.read_page(&mut engine, PageKey::new(0, 4), verify(4)).unwrap().data(), 4);
    assert_eq!(pool.snapshot().since(&before).hits_count, 1);
}
