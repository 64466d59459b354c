//! 1,000 seeded power losses: committer threads append and commit through the log writer
//! on the simulated engine (two of them leading their own flushes, two awaiting
//! durability as async callers do); the power is cut at a random I/O; writes not covered by a flush
//! are kept, lost or torn at sector size; then recovery. Asserted every time: recovery
//! succeeds (zero checksum failures, no corruption reported), zero acknowledged commits
//! lost, every record seen is whole and exactly what was written (nothing half-visible),
//! and every committed transaction has all its rows. Every tenth crash also writes after
//! recovery and recovers again (epochs keep old torn blocks out of the new log). One thread
//! in three crashes also takes checkpoints (segments recycled under the committers); only
//! commits at or after the recovered redo point are looked for in the log. Up to four
//! flushes are in flight; every other crash slows the simulated writes so
//! they overlap more, and the coverage asserts that overlapping flushes happened and that
//! recoveries met a later flush on disk after a lost earlier one (accepted as a torn tail,
//! not refused as corruption).

mod common;

use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Mutex};

use common::*;
use flashscan_io::sim::{FaultPlan, SimDisk, SimDiskPlan, SimEngine};
use flashscan_io::IoEngine;
use flashscan_wal::config::writer_engine_config;
use flashscan_wal::*;
use rand::{Rng, SeedableRng};

const CRASH_COUNT: u64 = 1000;
const THREADS: u64 = 4;
const TXNS_PER_THREAD: u64 = 6;

/// What the crashes covered, summed over seeds: the test asserts it is not trivial.
#[derive(Default, Debug)]
struct Coverage {
    acked_commits: u64,
    /// Commits found after recovery that were never acknowledged (durable, ack not sent).
    unacked_durable_commits: u64,
    torn_tails: u64,
    writes_lost: u64,
    writes_torn: u64,
    segment_switches: u64,
    /// Crashes recovered from a checkpoint's redo point.
    checkpointed: u64,
    /// fdatasyncs the simulated disk saw.
    flushes: u64,
    /// Log flushes submitted while another was in flight.
    overlapped_flushes: u64,
    /// Recoveries that found blocks of a later flush on disk past a lost or torn earlier
    /// one (dropped with the torn tail).
    overtaking_tails: u64,
}

#[derive(Default)]
struct Acked {
    /// txn -> (number of rows it inserted, LSN of its first record).
    txns: BTreeMap<TxnId, (u32, Lsn)>,
}

fn one_crash(seed: u64, sync: SyncMethod, cov: &mut Coverage) {
    let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
    let dir = temp_dir();
    let id = 0xC0FFEE_u128 << 64 | seed as u128;
    let sector_size_bytes = if rng.gen_bool(0.5) { 512 } else { 4096 };
    let disk = SimDisk::new(SimDiskPlan {
        sector_size_bytes,
        cut_at_io: Some(rng.gen_range(1..40)),
        fail_flush_at: None,
    });
    // Small segments: crashes land on segment switches too.
    let seg = [16u64, 32, 64][rng.gen_range(0..3)] * 1024;
    let latency = std::time::Duration::from_micros([0, 150][rng.gen_range(0..2)]);
    let d = disk.clone();
    let factory: EngineFactory = Arc::new(move |files| {
        let plan = FaultPlan { latency, ..FaultPlan::default() };
        Ok(Box::new(SimEngine::new(files, writer_engine_config(), plan)?.with_disk(d.clone())) as Box<dyn IoEngine>)
    });
    let mut cfg = config(dir.path(), seg, factory);
    cfg.sync_method = Ok(sync);
    cfg.flushes_in_flight_max = Ok(4);
    let wal = Arc::new(Wal::create(cfg.clone(), identity(id)).unwrap());
    let acked = Arc::new(Mutex::new(Acked::default()));
    let threads: Vec<_> = (0..THREADS)
        .map(|t| {
            let wal = wal.clone();
            let acked = acked.clone();
            let rows_max = 1 + ((seed >> t) % 3) as u32;
            let checkpoints = t == 0 && seed.is_multiple_of(3);
            std::thread::spawn(move || {
                for k in 0..TXNS_PER_THREAD {
                    if checkpoints && k % 2 == 1 {
                        // No pages here: the checkpoint's page writes are the caller's.
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
                    // Threads 1 and 3 await durability as the server's connection tasks
                    // do (flushed by the writer threads); 0 and 2 lead their flushes.
                    let committed = if t % 2 == 1 { commit_async(&wal, txn) } else { wal.commit(txn) };
                    match committed {
                        Ok(_) => {
                            acked.lock().unwrap().txns.insert(txn, (rows_max, first.unwrap()));
                        }
                        Err(e) => {
                            assert!(matches!(e, WalError::Stopped { .. }), "{e}");
                            return;
                        }
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let Ok(wal) = Arc::try_unwrap(wal) else { panic!("wal still shared") };
    cov.overlapped_flushes += wal.stats().overlapped_flushes_count;
    drop(wal);
    if sync == SyncMethod::OpenDatasync {
        // Nothing was fdatasynced: what survives below survives by the O_DSYNC writes.
        assert_eq!(disk.flush_count(), 0, "seed {seed}: an fdatasync on an O_DSYNC log");
    }
    cov.flushes += disk.flush_count();
    let report = disk.power_loss(rng.gen()).unwrap();
    cov.writes_lost += report.writes_lost_count;
    cov.writes_torn += report.writes_torn_count;

    let acked = std::mem::take(&mut acked.lock().unwrap().txns);
    let recover_cfg = config(dir.path(), seg, sim_factory(SimDisk::new(SimDiskPlan::default())));
    let (wal, scan) = Wal::open(recover_cfg.clone(), &identity(id)).unwrap_or_else(|e| panic!("seed {seed}: recovery failed: {e}"));
    let redo = wal.redo_lsn();
    cov.checkpointed += (redo > FIRST_RECORD_LSN) as u64;
    let acked: BTreeMap<TxnId, (u32, Lsn)> = acked.into_iter().filter(|(_, (_, lsn))| *lsn >= redo).collect();
    let committed = check(seed, &scan, &acked, redo > FIRST_RECORD_LSN);
    cov.acked_commits += acked.len() as u64;
    cov.unacked_durable_commits += committed.iter().filter(|t| !acked.contains_key(t)).count() as u64;
    cov.torn_tails += matches!(scan.end, LogEnd::TornTail { .. }) as u64;
    cov.overtaking_tails += (scan.overtaking_blocks_dropped_count > 0) as u64;
    cov.segment_switches += scan.end_lsn.segment_no(seg);

    if seed.is_multiple_of(10) {
        // Life after recovery: more commits, then a clean reopen sees old and new.
        let mut acked2 = acked.clone();
        for _ in 0..3 {
            let txn = wal.begin();
            let a = wal.append(&Record::Insert(InsertRow { txn, table_id: 7, partition: 9, page_no: 0, row: row_for(txn, 0) })).unwrap();
            wal.commit(txn).unwrap();
            acked2.insert(txn, (1, a.lsn));
        }
        wal.close().unwrap();
        let (_wal, scan2) = Wal::open(recover_cfg, &identity(id)).unwrap_or_else(|e| panic!("seed {seed}: second recovery failed: {e}"));
        check(seed, &scan2, &acked2, redo > FIRST_RECORD_LSN);
    }
}

/// Acknowledged transactions must be whole in the log; `from_checkpoint`: the scan began at
/// a checkpoint's redo point, so a committed transaction may show only its later rows (the
/// earlier ones are in pages the checkpoint wrote).
fn check(seed: u64, scan: &Scan, acked: &BTreeMap<TxnId, (u32, Lsn)>, from_checkpoint: bool) -> HashSet<TxnId> {
    let (committed, rows) = logged_transactions(seed, scan);
    for (txn, (n, _)) in acked {
        assert!(committed.contains(txn), "seed {seed}: acknowledged commit of txn {txn} lost");
        assert_eq!(rows.get(txn).map(|v| v.len() as u32), Some(*n), "seed {seed}: rows of acknowledged txn {txn} lost");
    }
    for txn in &committed {
        let got = rows.get(txn).cloned().unwrap_or_default();
        let consecutive = got.windows(2).all(|w| w[1] == w[0] + 1);
        let whole = got.first() == Some(&0) || (from_checkpoint && !acked.contains_key(txn));
        assert!(consecutive && whole, "seed {seed}: committed txn {txn} has rows {got:?}");
    }
    let redo = scan.redo().collect::<Result<Vec<_>, _>>().unwrap().len();
    assert_eq!(redo, committed.iter().map(|t| rows.get(t).map_or(0, |r| r.len())).sum::<usize>());
    committed
}

#[test]
fn a_thousand_power_losses_lose_no_acknowledged_commit() {
    power_losses(SyncMethod::Fdatasync);
}

/// The same with segments opened O_DSYNC (`FLASHSCAN_WAL_SYNC=open_datasync`): no
/// fdatasync at all, every acknowledged commit still there.
#[test]
fn a_thousand_power_losses_with_open_datasync_lose_no_acknowledged_commit() {
    power_losses(SyncMethod::OpenDatasync);
}

fn power_losses(sync: SyncMethod) {
    let seeds: u64 = std::env::var("FLASHSCAN_WAL_CRASHES").ok().and_then(|s| s.parse().ok()).unwrap_or(CRASH_COUNT);
    let mut cov = Coverage::default();
    for seed in 0..seeds {
        one_crash(seed, sync, &mut cov);
    }
    eprintln!("{seeds} crashes, {sync:?}: {cov:?}");
    if sync == SyncMethod::Fdatasync {
        assert!(cov.flushes > 0, "{cov:?}");
    }
    // The crashes must reach the cases that matter, not only clean shutdowns.
    if seeds >= 100 {
        assert!(cov.acked_commits >= seeds, "{cov:?}");
        assert!(cov.torn_tails >= seeds / 50, "{cov:?}");
        assert!(cov.writes_lost >= seeds / 10 && cov.writes_torn >= seeds / 10, "{cov:?}");
        assert!(cov.unacked_durable_commits >= 1, "{cov:?}");
        assert!(cov.segment_switches >= seeds, "{cov:?}");
        assert!(cov.checkpointed >= seeds / 10, "{cov:?}");
        assert!(cov.overlapped_flushes >= seeds / 10, "{cov:?}");
        assert!(cov.overtaking_tails >= 1, "{cov:?}");
    }
}
