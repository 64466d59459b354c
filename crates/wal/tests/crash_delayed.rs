//! Delayed durability under seeded power losses (flashscan_wal::durability has the
//! contract). Committer threads mix strict commits (`wait_durable`) with delayed ones
//! (`commit_delayed`: acknowledged before the flush, flushed by the log writer's timer or
//! a strict committer's flush); the power is cut at a random I/O; unflushed writes are
//! kept, lost or torn; then recovery. Asserted every time: recovery succeeds, every
//! acknowledged strict commit survives, every delayed commit acknowledged before a strict
//! commit that was acknowledged survives, what is lost is a suffix of the log (no hole: a
//! lost commit means every later one is lost too), and every committed transaction has
//! all its rows (never half a transaction). Without a crash, delayed commits become durable
//! with nobody waiting (the writer's timer), and a checkpoint's redo point is durable
//! before `checkpoint_begin` returns.

mod common;

use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::*;
use flashscan_io::sim::{FaultPlan, SimDisk, SimDiskPlan, SimEngine};
use flashscan_io::IoEngine;
use flashscan_wal::config::writer_engine_config;
use flashscan_wal::*;
use rand::{Rng, SeedableRng};

const CRASH_COUNT: u64 = 500;
const THREADS: u64 = 4;
const TXNS_PER_THREAD: u64 = 8;

#[derive(Default, Debug)]
struct Coverage {
    acked_strict: u64,
    acked_delayed: u64,
    /// Acknowledged delayed commits the crash lost (allowed: they were not durable yet).
    delayed_lost: u64,
    /// Acknowledged delayed commits before a later acknowledged strict one (must survive).
    delayed_covered_by_strict: u64,
    writes_lost: u64,
    writes_torn: u64,
}

/// An acknowledged commit: its rows, the LSN of its first record, the end of its commit
/// record and whether it was strict.
#[derive(Clone, Copy)]
struct Acked {
    rows: u32,
    first: Lsn,
    commit_end: Lsn,
    strict: bool,
}

fn one_crash(seed: u64, cov: &mut Coverage) {
    let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
    let dir = temp_dir();
    let id = 0xDE1A_u128 << 64 | seed as u128;
    let disk = SimDisk::new(SimDiskPlan { sector_size_bytes: if rng.gen_bool(0.5) { 512 } else { 4096 }, cut_at_io: Some(rng.gen_range(1..30)), fail_flush_at: None });
    let seg = [16u64, 64][rng.gen_range(0..2)] * 1024;
    let latency = Duration::from_micros([0, 300][rng.gen_range(0..2)]);
    let d = disk.clone();
    let factory: EngineFactory = Arc::new(move |files| {
        let plan = FaultPlan { latency, ..FaultPlan::default() };
        Ok(Box::new(SimEngine::new(files, writer_engine_config(), plan)?.with_disk(d.clone())) as Box<dyn IoEngine>)
    });
    let mut cfg = config(dir.path(), seg, factory);
    cfg.flushes_in_flight_max = Ok(1 + (seed % 3) as usize);
    let wal = Arc::new(Wal::create(cfg, identity(id)).unwrap());
    let acked: Arc<Mutex<BTreeMap<TxnId, Acked>>> = Arc::default();
    // Thread 0 is strict only, 1 delayed only, 2 and 3 mix (by seed).
    let threads: Vec<_> = (0..THREADS)
        .map(|t| {
            let (wal, acked) = (wal.clone(), acked.clone());
            let rows_max = 1 + ((seed >> t) % 3) as u32;
            std::thread::spawn(move || {
                for k in 0..TXNS_PER_THREAD {
                    let strict = match t {
                        0 => true,
                        1 => false,
                        _ => (seed >> (k + t)) & 1 == 1,
                    };
                    if t == 2 && seed.is_multiple_of(4) && k == TXNS_PER_THREAD / 2 {
                        if let Ok(redo) = wal.checkpoint_begin() {
                            let _ = wal.checkpoint_end(redo);
                        }
                    }
                    let txn = wal.begin();
                    let mut first = None;
                    for i in 0..rows_max {
                        let row = InsertRow { txn, table_id: 7, partition: t as u32, page_no: i as u64, row: row_for(txn, i) };
                        match wal.append(&Record::Insert(row)) {
                            Ok(a) => first = first.or(Some(a.lsn)),
                            Err(_) => return,
                        }
                    }
                    let Ok(commit) = wal.append(&Record::Commit { txn }) else { return };
                    let acknowledged = if strict { wal.wait_durable(commit.end) } else { wal.commit_delayed(commit.end) };
                    match acknowledged {
                        Ok(()) => {
                            acked.lock().unwrap().insert(txn, Acked { rows: rows_max, first: first.unwrap(), commit_end: commit.end, strict });
                        }
                        Err(e) => {
                            assert!(matches!(e, WalError::Stopped { .. }), "{e}");
                            return;
                        }
                    }
                    if !strict && rng_pause(seed, t, k) {
                        // Let the writer's timer flush some delayed commits by itself.
                        std::thread::sleep(Duration::from_millis(3));
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let Ok(wal) = Arc::try_unwrap(wal) else { panic!("wal still shared") };
    // The power goes before the close: a clean close would flush the delayed commits.
    let report = disk.power_loss(rng.gen()).unwrap();
    drop(wal);
    cov.writes_lost += report.writes_lost_count;
    cov.writes_torn += report.writes_torn_count;

    let acked = std::mem::take(&mut *acked.lock().unwrap());
    let recover_cfg = config(dir.path(), seg, sim_factory(SimDisk::new(SimDiskPlan::default())));
    let (wal, scan) = Wal::open(recover_cfg, &identity(id)).unwrap_or_else(|e| panic!("seed {seed}: recovery failed: {e}"));
    let redo = wal.redo_lsn();
    let acked: BTreeMap<TxnId, Acked> = acked.into_iter().filter(|(_, a)| a.first >= redo).collect();
    let committed = committed_whole(seed, &scan, &acked);
    let strict_end_max = acked.values().filter(|a| a.strict).map(|a| a.commit_end).max().unwrap_or(Lsn::ZERO);
    for (txn, a) in &acked {
        if a.strict {
            cov.acked_strict += 1;
            assert!(committed.contains(txn), "seed {seed}: acknowledged strict commit of txn {txn} lost");
            continue;
        }
        cov.acked_delayed += 1;
        if a.commit_end <= strict_end_max {
            cov.delayed_covered_by_strict += 1;
            assert!(committed.contains(txn), "seed {seed}: delayed commit of txn {txn}, before an acknowledged strict commit, lost");
        }
        if !committed.contains(txn) {
            cov.delayed_lost += 1;
            // What is lost is the log's tail: nothing acknowledged after it survived.
            for (later, b) in acked.iter().filter(|(_, b)| b.commit_end > a.commit_end) {
                assert!(!committed.contains(later), "seed {seed}: txn {later} survived after the lost delayed commit of txn {txn} (a hole in the log)");
                assert!(!b.strict, "seed {seed}: strict txn {later} acknowledged after a lost one");
            }
        }
    }
}

/// Whether thread `t` pauses after its `k`th delayed commit (by seed).
fn rng_pause(seed: u64, t: u64, k: u64) -> bool {
    (seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (t * 8 + k)) & 3 == 0
}

/// The transactions committed in `scan`, each asserted whole: every row exactly as written,
/// rows 0.. consecutive (a transaction whose first rows are before the redo point is
/// skipped, as crash.rs does). Acknowledged ones must have all their rows.
fn committed_whole(seed: u64, scan: &Scan, acked: &BTreeMap<TxnId, Acked>) -> HashSet<TxnId> {
    let (committed, rows) = logged_transactions(seed, scan);
    for txn in &committed {
        let got = rows.get(txn).cloned().unwrap_or_default();
        let consecutive = got.windows(2).all(|w| w[1] == w[0] + 1);
        if let Some(a) = acked.get(txn) {
            assert_eq!(got.len() as u32, a.rows, "seed {seed}: committed txn {txn} has rows {got:?}: half a transaction");
        }
        assert!(consecutive, "seed {seed}: committed txn {txn} has rows {got:?}");
    }
    committed
}

#[test]
fn power_losses_lose_only_unflushed_delayed_commits_and_never_half_a_transaction() {
    let seeds: u64 = std::env::var("FLASHSCAN_WAL_CRASHES").ok().and_then(|s| s.parse().ok()).unwrap_or(CRASH_COUNT);
    let mut cov = Coverage::default();
    for seed in 0..seeds {
        one_crash(seed, &mut cov);
    }
    eprintln!("{seeds} crashes with delayed commits: {cov:?}");
    if seeds >= 100 {
        // The crashes reach the cases that matter: delayed commits lost, and delayed
        // commits that a later strict commit's flush had to carry.
        assert!(cov.acked_strict >= seeds && cov.acked_delayed >= seeds, "{cov:?}");
        assert!(cov.delayed_lost >= seeds / 20, "{cov:?}");
        assert!(cov.delayed_covered_by_strict >= seeds / 10, "{cov:?}");
        assert!(cov.writes_lost + cov.writes_torn >= seeds / 10, "{cov:?}");
    }
}

/// Nobody waits: delayed commits become durable by the log writer's timer alone, the wait
/// is counted, and a clean close loses none of them.
#[test]
fn delayed_commits_are_flushed_by_the_writer_without_a_waiter() {
    let dir = temp_dir();
    let disk = SimDisk::new(SimDiskPlan::default());
    let wal = Wal::create(config(dir.path(), 64 * 1024, sim_factory(disk.clone())), identity(0xD1)).unwrap();
    let mut ends = Vec::new();
    for _ in 0..20u32 {
        let txn = wal.begin();
        wal.append(&Record::Insert(InsertRow { txn, table_id: 7, partition: 0, page_no: 0, row: row_for(txn, 0) })).unwrap();
        let commit = wal.append(&Record::Commit { txn }).unwrap();
        wal.commit_delayed(commit.end).unwrap();
        ends.push(commit.end);
    }
    let last = *ends.last().unwrap();
    // Generous against a loaded machine: the bound is 10 ms plus one flush.
    let deadline = Instant::now() + Duration::from_secs(5);
    while wal.durable_lsn() < last {
        assert!(Instant::now() < deadline, "delayed commits never flushed: durable {} < {last}", wal.durable_lsn());
        std::thread::sleep(Duration::from_millis(1));
    }
    let stats = wal.stats();
    assert_eq!(stats.delayed_commits_count, 20);
    assert!(stats.flushes_count >= 1 && stats.delayed_unflushed_us_max > 0, "{stats:?}");
    wal.close().unwrap();
    let (_wal, scan) = Wal::open(config(dir.path(), 64 * 1024, sim_factory(SimDisk::new(SimDiskPlan::default()))), &identity(0xD1)).unwrap();
    let commits = scan.records.iter().filter(|r| matches!(r.record, Record::Commit { .. })).count();
    assert_eq!(commits, 20);
}

/// A checkpoint's redo point is durable when `checkpoint_begin` returns: pages written
/// after it never hold rows of a delayed commit whose log records could still be lost.
#[test]
fn checkpoint_begin_makes_delayed_commits_durable() {
    let dir = temp_dir();
    let wal = Wal::create(config(dir.path(), 64 * 1024, sim_factory(SimDisk::new(SimDiskPlan::default()))), identity(0xD2)).unwrap();
    let txn = wal.begin();
    wal.append(&Record::Insert(InsertRow { txn, table_id: 7, partition: 0, page_no: 0, row: row_for(txn, 0) })).unwrap();
    let commit = wal.append(&Record::Commit { txn }).unwrap();
    wal.commit_delayed(commit.end).unwrap();
    let redo = wal.checkpoint_begin().unwrap();
    assert!(redo >= commit.end);
    assert!(wal.durable_lsn() > redo, "redo point {redo} not durable ({})", wal.durable_lsn());
}
