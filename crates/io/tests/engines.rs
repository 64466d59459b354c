//! Every engine moves the right bytes to the right offsets: write a pattern that encodes
//! (file, offset) in every 8-byte word, read it back in shuffled order, compare.

use std::path::PathBuf;
use std::sync::Arc;

use flashscan_io::sim::{FaultPlan, SimEngine};
use flashscan_io::*;
use rand::seq::SliceRandom;
use rand::SeedableRng;

const BLOCK: usize = 8192;
const BLOCKS_PER_FILE: u64 = 64;

fn pattern_word(file: u32, offset: u64) -> u64 {
    (file as u64) << 48 ^ offset ^ 0x9E37_79B9_7F4A_7C15
}

fn fill(buf: &mut [u8], file: u32, offset: u64) {
    for (i, w) in buf.chunks_exact_mut(8).enumerate() {
        w.copy_from_slice(&pattern_word(file, offset + i as u64 * 8).to_le_bytes());
    }
}

fn check(buf: &[u8], file: u32, offset: u64) -> bool {
    buf.chunks_exact(8).enumerate().all(|(i, w)| u64::from_le_bytes(w.try_into().unwrap()) == pattern_word(file, offset + i as u64 * 8))
}

/// `n` zeroed files of `BLOCKS_PER_FILE` blocks in a new temporary directory (the first part
/// keeps it), opened with `mode`.
fn open_files(n: usize, mode: OpenMode) -> (tempfile::TempDir, Arc<FileSet>) {
    let dir = tempfile::tempdir().unwrap();
    let paths: Vec<PathBuf> = (0..n)
        .map(|i| {
            let p = dir.path().join(format!("f{i}"));
            std::fs::write(&p, vec![0u8; (BLOCK as u64 * BLOCKS_PER_FILE) as usize]).unwrap();
            p
        })
        .collect();
    let files = Arc::new(FileSet::open(&paths, mode).unwrap());
    (dir, files)
}

fn write_then_verify(mut engine: Box<dyn IoEngine>, file_count: u32, depth: u32) {
    let mut jobs: Vec<(u32, u64)> = (0..file_count).flat_map(|f| (0..BLOCKS_PER_FILE).map(move |b| (f, b * BLOCK as u64))).collect();
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    for op in [IoOp::Write, IoOp::Read] {
        jobs.shuffle(&mut rng);
        let mut free: Vec<u32> = (0..depth).collect();
        let mut done = Vec::new();
        let mut next = 0;
        let mut completed = 0;
        while completed < jobs.len() {
            while next < jobs.len() && !free.is_empty() {
                let slot = free.pop().unwrap();
                let (f, off) = jobs[next];
                if op == IoOp::Write {
                    fill(&mut engine.slot_mut(slot)[..BLOCK], f, off);
                }
                engine
                    .queue(IoRequest { op, file_index: f, offset_bytes: off, length_bytes: BLOCK as u32, slot, user_data: next as u64 })
                    .unwrap();
                next += 1;
            }
            engine.submit().unwrap();
            done.clear();
            engine.reap(1, &mut done).unwrap();
            assert!(!done.is_empty());
            for c in &done {
                assert_eq!(c.result, Ok(BLOCK as u32));
                let (f, off) = jobs[c.user_data as usize];
                assert_eq!((c.file_index, c.offset_bytes), (f, off));
                if op == IoOp::Read {
                    assert!(check(&engine.slot(c.slot)[..BLOCK], f, off), "{} read wrong bytes at {f}:{off}", engine.name());
                }
                free.push(c.slot);
                completed += 1;
            }
        }
        assert_eq!(engine.in_flight(), 0);
    }
    let total: u64 = engine.files().iter().map(|f| f.stats.snapshot().bytes_read).sum();
    assert_eq!(total, file_count as u64 * BLOCKS_PER_FILE * BLOCK as u64);
}

fn run(kind: EngineKind, direct: bool, depth: u32) -> &'static str {
    let (_dir, files) = open_files(3, OpenMode { direct, write: true });
    let mut notes = Vec::new();
    let engine = open_engine(kind, files, EngineConfig::for_depth(depth, BLOCK), &mut |n| notes.push(n.to_string())).unwrap();
    let name = engine.name();
    write_then_verify(engine, 3, depth);
    name
}

#[test]
fn uring_buffered_and_direct() {
    for depth in [1, 8, 32] {
        for direct in [false, true] {
            let name = run(EngineKind::Uring, direct, depth);
            // Where the kernel refuses io_uring the fallback must have run instead.
            assert!(name == "uring" || name == "psync");
        }
    }
}

#[test]
fn psync_inline_and_pool() {
    for depth in [1, 4, 16] {
        for direct in [false, true] {
            assert_eq!(run(EngineKind::Psync, direct, depth), "psync");
        }
    }
}

#[test]
fn fallback_is_announced() {
    // Only this test sets the variable, and engines read it at construction.
    std::env::set_var("FLASHSCAN_DISABLE_URING", "1");
    let (_dir, files) = open_files(1, OpenMode { direct: false, write: true });
    let mut notes = Vec::new();
    let engine = open_engine(EngineKind::Auto, files, EngineConfig::for_depth(4, BLOCK), &mut |n| notes.push(n.to_string())).unwrap();
    std::env::remove_var("FLASHSCAN_DISABLE_URING");
    assert_eq!(engine.name(), "psync");
    assert_eq!(notes.len(), 1);
    assert!(notes[0].contains("io_uring unavailable"), "{notes:?}");
    write_then_verify(engine, 1, 4);
}

#[test]
fn direct_io_rejects_misaligned_requests() {
    let (_dir, files) = open_files(1, OpenMode { direct: true, write: false });
    let mut engine = open_engine(EngineKind::Psync, files, EngineConfig::for_depth(1, BLOCK), &mut |_| {}).unwrap();
    let err = engine
        .queue(IoRequest { op: IoOp::Read, file_index: 0, offset_bytes: 100, length_bytes: 4096, slot: 0, user_data: 0 })
        .unwrap_err();
    assert!(err.to_string().contains("not aligned"), "{err}");
    assert_eq!(engine.in_flight(), 0);
}

#[test]
fn sim_engine_injects_errors_and_short_reads() {
    let (_dir, files) = open_files(1, OpenMode { direct: false, write: false });
    let plan = FaultPlan { fail_every: Some(3), short_read_every: Some(4), ..Default::default() };
    let mut engine = SimEngine::new(files.clone(), EngineConfig::for_depth(1, BLOCK), plan).unwrap();
    let mut out = Vec::new();
    for i in 0..12u64 {
        engine
            .queue(IoRequest { op: IoOp::Read, file_index: 0, offset_bytes: i * BLOCK as u64, length_bytes: BLOCK as u32, slot: 0, user_data: i })
            .unwrap();
        engine.reap(1, &mut out).unwrap();
    }
    let errors = out.iter().filter(|c| c.result == Err(libc_eio())).count();
    let short = out.iter().filter(|c| matches!(c.result, Ok(n) if n < BLOCK as u32)).count();
    assert_eq!(errors, 4);
    // Reads 4, 8 and 12 are short, but read 12 is also the 12th I/O, which fails.
    assert_eq!(short, 2);
    let e = out.iter().find(|c| c.result.is_err()).unwrap().expect_full(&files).unwrap_err();
    assert!(e.to_string().contains("f0"), "{e}");
    assert_eq!(files.get(0).stats.snapshot().errors_count, 4);
}

fn libc_eio() -> i32 {
    5
}

#[test]
fn null_engine_completes_without_moving_data() {
    let (_dir, files) = open_files(1, OpenMode { direct: false, write: false });
    let mut engine = open_engine(EngineKind::Null, files, EngineConfig::for_depth(8, BLOCK), &mut |_| {}).unwrap();
    for s in 0..8 {
        engine.queue(IoRequest { op: IoOp::Read, file_index: 0, offset_bytes: 0, length_bytes: 4096, slot: s, user_data: s as u64 }).unwrap();
    }
    let mut out = Vec::new();
    engine.reap(8, &mut out).unwrap();
    assert_eq!(out.len(), 8);
    assert!(out.iter().all(|c| c.result == Ok(4096)));
}

#[test]
fn uring_on_one_thread_moves_the_right_bytes() {
    for depth in [1, 8, 32] {
        let (_dir, files) = open_files(2, OpenMode { direct: true, write: true });
        let config = EngineConfig::for_depth(depth, BLOCK).on_one_thread();
        let engine = open_engine(EngineKind::Uring, files, config, &mut |_| {}).unwrap();
        write_then_verify(engine, 2, depth);
    }
}

/// A caller that polls with `reap(0)` (never waits) must still see every completion, in
/// every ring mode: completion work the kernel defers runs only inside an enter.
#[test]
fn polling_reap_sees_every_completion() {
    for single_thread in [false, true] {
        for kind in [EngineKind::Uring, EngineKind::Psync] {
            let (_dir, files) = open_files(1, OpenMode { direct: true, write: false });
            let mut config = EngineConfig::for_depth(8, BLOCK);
            config.single_thread = single_thread;
            let mut engine = open_engine(kind, files, config, &mut |_| {}).unwrap();
            for s in 0..8u32 {
                engine
                    .queue(IoRequest { op: IoOp::Read, file_index: 0, offset_bytes: s as u64 * BLOCK as u64, length_bytes: BLOCK as u32, slot: s, user_data: 0 })
                    .unwrap();
            }
            engine.submit().unwrap();
            let mut out = Vec::new();
            let start = std::time::Instant::now();
            while out.len() < 8 && start.elapsed() < std::time::Duration::from_secs(10) {
                engine.reap(0, &mut out).unwrap();
                std::thread::yield_now();
            }
            assert_eq!(out.len(), 8, "{} single_thread={single_thread}: polling lost completions", engine.name());
            assert_eq!(engine.in_flight(), 0);
        }
    }
}
