//! The request queue: every request comes back once with its own tag and its own bytes,
//! errors arrive as typed results, dropping a queue with requests in flight drains them,
//! and an engine dropped with I/O in flight is caught (debug builds).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use flashscan_io::sim::{FaultPlan, SimEngine};
use flashscan_io::*;

const BLOCK: usize = 4096;
const BLOCKS: u64 = 64;

fn block_byte(block: u64) -> u8 {
    (block as u8).wrapping_mul(31).wrapping_add(7)
}

fn make_file(dir: &std::path::Path) -> PathBuf {
    let p = dir.join("data");
    let mut bytes = Vec::with_capacity(BLOCK * BLOCKS as usize);
    for b in 0..BLOCKS {
        bytes.extend(std::iter::repeat_n(block_byte(b), BLOCK));
    }
    std::fs::write(&p, bytes).unwrap();
    p
}

fn files(path: &PathBuf, write: bool) -> Arc<FileSet> {
    Arc::new(FileSet::open(std::slice::from_ref(path), OpenMode { direct: false, write }).unwrap())
}

fn engines(path: &PathBuf, depth: u32) -> Vec<Box<dyn IoEngine>> {
    let config = EngineConfig::for_depth(depth, BLOCK);
    vec![
        open_engine(EngineKind::Psync, files(path, false), config, &mut |_| {}).unwrap(),
        open_engine(EngineKind::Auto, files(path, false), config, &mut |_| {}).unwrap(),
        Box::new(SimEngine::new(files(path, false), config, FaultPlan::default()).unwrap()),
    ]
}

#[test]
fn every_request_comes_back_once_with_its_tag_and_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let path = make_file(dir.path());
    for depth in [1, 3, 8] {
        for engine in engines(&path, depth) {
            let name = engine.name();
            let mut queue: RequestQueue<u64> = RequestQueue::new(engine);
            let mut seen = vec![0u32; BLOCKS as usize];
            let mut next = 0u64;
            loop {
                while next < BLOCKS && queue.has_free_slot() {
                    queue.queue_read(0, next * BLOCK as u64, BLOCK as u32, next).unwrap();
                    next += 1;
                }
                let done = queue
                    .complete_next(|c| {
                        let bytes = c.result.unwrap();
                        assert!(bytes.iter().all(|&b| b == block_byte(c.tag)), "{name}: block {} has the wrong bytes", c.tag);
                        assert_eq!(c.completion.offset_bytes, c.tag * BLOCK as u64);
                        c.tag
                    })
                    .unwrap();
                match done {
                    Some(block) => seen[block as usize] += 1,
                    None => break,
                }
            }
            assert!(seen.iter().all(|&n| n == 1), "{name} depth {depth}: {seen:?}");
            assert!(queue.is_idle());
            assert_eq!(queue.stats().reads_count, BLOCKS);
        }
    }
}

#[test]
fn failed_requests_arrive_as_typed_errors_with_their_tags() {
    let dir = tempfile::tempdir().unwrap();
    let path = make_file(dir.path());
    let plan = FaultPlan { fail_every: Some(5), short_read_every: Some(7), latency: Duration::ZERO, ..FaultPlan::default() };
    let engine = SimEngine::new(files(&path, false), EngineConfig::for_depth(4, BLOCK), plan).unwrap();
    let mut queue: RequestQueue<u64> = RequestQueue::new(Box::new(engine));
    let (mut ok, mut failed) = (0, 0);
    let mut next = 0u64;
    loop {
        while next < BLOCKS && queue.has_free_slot() {
            queue.queue_read(0, next * BLOCK as u64, BLOCK as u32, next).unwrap();
            next += 1;
        }
        let Some(r) = queue.complete_next(|c| c.result.map(|b| b.len()).map_err(|e| (c.tag, e.to_string()))).unwrap() else { break };
        match r {
            Ok(n) => {
                assert_eq!(n, BLOCK);
                ok += 1
            }
            Err((tag, what)) => {
                assert!(tag < BLOCKS);
                assert!(what.contains("data"), "the error names the file: {what}");
                failed += 1
            }
        }
    }
    assert_eq!(ok + failed, BLOCKS);
    assert!(failed > 0 && ok > 0);
}

#[test]
fn dropping_a_busy_queue_drains_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = make_file(dir.path());
    for engine in engines(&path, 8) {
        let mut queue: RequestQueue<Vec<u8>> = RequestQueue::new(engine);
        for b in 0..8u64 {
            queue.queue_read(0, b * BLOCK as u64, BLOCK as u32, vec![b as u8]).unwrap();
        }
        assert!(!queue.has_free_slot());
        assert!(queue.queue_read(0, 0, BLOCK as u32, vec![]).is_err(), "a full queue refuses");
        queue.submit().unwrap();
        // Dropped with eight reads in flight: the queue drains before the engine goes (a
        // debug build would panic in the engine's drop otherwise).
        drop(queue);
    }
}

#[test]
fn writes_then_read_one_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let path = make_file(dir.path());
    let engine = open_engine(EngineKind::Auto, files(&path, true), EngineConfig::for_depth(4, BLOCK), &mut |_| {}).unwrap();
    let mut queue: RequestQueue<u64> = RequestQueue::new(engine);
    for b in [3u64, 9, 10, 40] {
        queue
            .queue_write(0, b * BLOCK as u64, BLOCK as u32, |slot| {
                slot.fill(0xA5);
                b
            })
            .unwrap();
    }
    let mut written = Vec::new();
    while let Some(tag) = queue.complete_next(|c| c.result.map(|_| c.tag)).unwrap() {
        written.push(tag.unwrap());
    }
    written.sort();
    assert_eq!(written, vec![3, 9, 10, 40]);
    for b in 0..BLOCKS {
        let want = if [3, 9, 10, 40].contains(&b) { 0xA5 } else { block_byte(b) };
        let ok = queue.read_one(0, b * BLOCK as u64, BLOCK as u32, |bytes| bytes.iter().all(|&x| x == want)).unwrap();
        assert!(ok, "block {b}");
    }
    assert!(queue.read_one(0, BLOCKS * BLOCK as u64, BLOCK as u32, |_| ()).is_err(), "a read past the end is a short read, an error");
    assert!(queue.is_idle());
}

/// The engines' own guard: dropping one with I/O in flight is a bug the debug build names.
#[cfg(debug_assertions)]
#[test]
#[should_panic(expected = "dropped with 1 I/Os in flight")]
fn an_engine_dropped_with_io_in_flight_panics_in_debug_builds() {
    let dir = tempfile::tempdir().unwrap();
    let path = make_file(dir.path());
    let mut engine = SimEngine::new(files(&path, false), EngineConfig::for_depth(2, BLOCK), FaultPlan::default()).unwrap();
    engine.queue(IoRequest { op: IoOp::Read, file_index: 0, offset_bytes: 0, length_bytes: BLOCK as u32, slot: 0, user_data: 0 }).unwrap();
    drop(engine);
}
