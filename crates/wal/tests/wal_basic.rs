//! The log's behaviour through its public API: commit and reopen, group commit, a failed
//! flush stops the log for good, damage in the middle is refused with file and offset, a
//! foreign or locked log directory is refused, checkpoints recycle segments.

mod common;

use std::os::unix::fs::FileExt;
use std::sync::Arc;

use common::*;
use flashscan_io::sim::{FaultPlan, SimDisk, SimDiskPlan, SimEngine};
use flashscan_io::IoEngine;
use flashscan_wal::config::writer_engine_config;
use flashscan_wal::files::segment_path;
use flashscan_wal::limits::BLOCK_SIZE_BYTES;
use flashscan_wal::*;

fn insert(wal: &Wal, txn: TxnId, i: u32) -> Appended {
    wal.append(&Record::Insert(InsertRow { txn, table_id: 1, partition: 0, page_no: i as u64, row: row_for(txn, i) })).unwrap()
}

/// One transaction per row `i` of `rows` (one insert, then commit); their ids in order.
fn commit_one_row_each(wal: &Wal, rows: std::ops::Range<u32>) -> Vec<TxnId> {
    rows.map(|i| {
        let txn = wal.begin();
        insert(wal, txn, i);
        wal.commit(txn).unwrap();
        txn
    })
    .collect()
}

/// The transactions a scan found committed, in log order.
fn committed_txns(scan: &Scan) -> Vec<TxnId> {
    scan.records.iter().filter_map(|r| if let Record::Commit { txn } = r.record { Some(txn) } else { None }).collect()
}

#[test]
fn commits_survive_reopen_on_a_real_file() {
    let dir = temp_dir();
    let mut cfg = config(dir.path(), 64 * 1024, psync_engine_factory());
    cfg.direct_io = true; // tmpfs refuses O_DIRECT: exercises the fallback notice
    let wal = Wal::create(cfg.clone(), identity(1)).unwrap();
    let mut txns = Vec::new();
    for i in 0..200 {
        let txn = wal.begin();
        let a = insert(&wal, txn, i);
        let c = wal.commit(txn).unwrap();
        assert!(c.lsn >= a.end);
        assert!(wal.durable_lsn() >= c.end);
        txns.push(txn);
    }
    let stats = wal.stats();
    assert_eq!(stats.commits_count, 200);
    assert!(stats.flushes_count >= 1 && stats.flushes_count <= 200);
    // Each commit above waited for its own flush (one thread): their write + fdatasync
    // time is counted, in whole microseconds of the nanosecond sum.
    assert!(stats.flushes_count >= 100 && stats.flush_time_us > 0, "flush time not counted: {stats:?}");
    // The longest flush lies between the mean and the sum (+1: both are rounded down to µs).
    assert!(stats.flush_us_max <= stats.flush_time_us && (stats.flush_us_max + 1) * stats.flushes_count >= stats.flush_time_us, "{stats:?}");
    assert!(stats.segments_created_count >= 2, "{stats:?}");
    wal.close().unwrap();
    let (_wal, scan) = Wal::open(cfg, &identity(1)).unwrap();
    assert_eq!(scan.end, LogEnd::Clean);
    let committed = committed_txns(&scan);
    assert_eq!(committed, txns);
    assert_eq!(scan.redo().count(), 200);
}

#[test]
fn group_commit_batches_concurrent_committers() {
    let dir = temp_dir();
    let disk = SimDisk::new(SimDiskPlan::default());
    let d = disk.clone();
    let slow: EngineFactory = Arc::new(move |files| {
        let plan = FaultPlan { latency: std::time::Duration::from_micros(300), ..FaultPlan::default() };
        Ok(Box::new(SimEngine::new(files, writer_engine_config(), plan)?.with_disk(d.clone())) as Box<dyn IoEngine>)
    });
    let cfg = config(dir.path(), 8 << 20, slow); // one segment: one engine flush per log flush
    let wal = Arc::new(Wal::create(cfg, identity(2)).unwrap());
    // Slow flushes make the batching visible: a committer arriving during a flush waits
    // for the next one with everyone else who arrived.
    let threads: Vec<_> = (0..16)
        .map(|_| {
            let wal = wal.clone();
            std::thread::spawn(move || {
                for i in 0..50 {
                    let txn = wal.begin();
                    insert(&wal, txn, i);
                    wal.commit(txn).unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let s = wal.stats();
    assert_eq!(s.commits_count, 800);
    // One durable flush per log flush, plus one more for each flush whose blocks crossed
    // into the next segment (each segment file is flushed on its own).
    let crossings_max = s.bytes_written / (1 << 20) + 1;
    assert!(disk.flush_count() >= s.flushes_count, "a log flush without a durable flush: {s:?}");
    assert!(disk.flush_count() <= s.flushes_count + crossings_max, "more durable flushes than log flushes and segment crossings: {s:?}");
    assert!(s.flushes_count < 800, "no batching: {s:?}");
}

#[test]
fn a_failed_flush_stops_the_log_for_good() {
    let dir = temp_dir();
    let disk = SimDisk::new(SimDiskPlan { fail_flush_at: Some(3), ..SimDiskPlan::default() });
    let cfg = config(dir.path(), 64 * 1024, sim_factory(disk.clone()));
    let wal = Wal::create(cfg.clone(), identity(3)).unwrap();
    let ok = commit_one_row_each(&wal, 0..2);
    let txn = wal.begin();
    insert(&wal, txn, 2);
    let err = wal.commit(txn).unwrap_err();
    assert!(matches!(err, WalError::Stopped { .. }), "{err}");
    assert!(err.to_string().contains("fdatasync failed"), "{err}");
    assert!(wal.failure().is_some());
    // Never retried: the next flush would succeed on this disk, but the log stays stopped.
    for i in 3..6 {
        let txn = wal.begin();
        assert!(matches!(wal.append(&Record::Commit { txn }), Err(WalError::Stopped { .. })), "append {i}");
    }
    assert_eq!(disk.flush_error_count(), 1);
    assert_eq!(disk.flush_count(), 2);
    assert!(wal.close().is_err());
    disk.power_loss(7).unwrap();
    let (_wal, scan) = Wal::open(config(dir.path(), 64 * 1024, psync_engine_factory()), &identity(3)).unwrap();
    let committed = committed_txns(&scan);
    assert!(committed.starts_with(&ok), "{committed:?}");
}

/// Creates a log in `dir` (1 MiB segments, psync), writes `n` one-commit flushes and closes;
/// returns its config and the LSN of each commit.
fn log_with_flushes(dir: &std::path::Path, id: u128, n: u32) -> (WalConfig, Vec<Appended>) {
    let cfg = config(dir, 1 << 20, psync_engine_factory());
    let wal = Wal::create(cfg.clone(), identity(id)).unwrap();
    let out = (0..n)
        .map(|i| {
            let txn = wal.begin();
            insert(&wal, txn, i);
            wal.commit(txn).unwrap()
        })
        .collect();
    wal.close().unwrap();
    (cfg, out)
}

/// The segment file and the offset there of the log block that holds `lsn`.
fn block_place(cfg: &WalConfig, lsn: Lsn) -> (std::path::PathBuf, u64) {
    let block_start = Lsn(lsn.0 - lsn.0 % BLOCK_SIZE_BYTES as u64);
    let segment_no = block_start.segment_no(cfg.segment_size_bytes);
    (segment_path(&cfg.dir, segment_no), block_start.segment_offset_bytes(cfg.segment_size_bytes))
}

#[test]
fn a_bad_block_followed_by_good_ones_is_refused_with_file_and_offset() {
    let dir = temp_dir();
    let (cfg, commits) = log_with_flushes(dir.path(), 4, 20);
    let (path, block_offset) = block_place(&cfg, commits[5].lsn);
    let f = std::fs::OpenOptions::new().read(true).write(true).open(&path).unwrap();
    let mut b = [0u8; 1];
    f.read_exact_at(&mut b, block_offset + 200).unwrap();
    f.write_all_at(&[b[0] ^ 0x10], block_offset + 200).unwrap();
    let err = Wal::open(cfg.clone(), &identity(4)).map(|_| ()).unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, WalError::Corrupt { .. }), "{msg}");
    assert!(msg.contains(&path.display().to_string()), "{msg}");
    assert!(msg.contains(&format!("offset {block_offset}")), "{msg}");
    assert!(msg.contains("backup"), "{msg}");
}

#[test]
fn a_torn_last_block_is_the_end_of_the_log() {
    let dir = temp_dir();
    let (cfg, commits) = log_with_flushes(dir.path(), 5, 10);
    let (path, block_offset) = block_place(&cfg, commits[9].lsn);
    let f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    f.write_all_at(&[0xAB; 512], block_offset + 512).unwrap();
    let (_wal, scan) = Wal::open(cfg, &identity(5)).unwrap();
    assert!(matches!(scan.end, LogEnd::TornTail { .. }), "{:?}", scan.end);
    let commits_seen = scan.records.iter().filter(|r| matches!(r.record, Record::Commit { .. })).count();
    assert!(commits_seen >= 8, "{commits_seen}");
}

#[test]
fn a_foreign_or_missing_wal_dir_is_refused() {
    let dir = temp_dir();
    let cfg = config(dir.path(), 64 * 1024, psync_engine_factory());
    Wal::create(cfg.clone(), identity(6)).unwrap().close().unwrap();
    let err = Wal::open(cfg.clone(), &identity(7)).map(|_| ()).unwrap_err();
    assert!(matches!(err, WalError::Foreign { .. }), "{err}");
    assert!(err.to_string().contains("/db/test-6"), "{err}");
    let err = Wal::create(cfg.clone(), identity(7)).map(|_| ()).unwrap_err();
    assert!(matches!(err, WalError::AlreadyExists { .. }), "{err}");
    let other = config(&dir.path().join("nowhere"), 64 * 1024, psync_engine_factory());
    let err = Wal::open(other, &identity(6)).map(|_| ()).unwrap_err();
    assert!(matches!(err, WalError::MissingControl { .. }), "{err}");
}

#[test]
fn a_second_writer_is_refused() {
    let dir = temp_dir();
    let cfg = config(dir.path(), 64 * 1024, psync_engine_factory());
    let wal = Wal::create(cfg.clone(), identity(8)).unwrap();
    let err = Wal::open(cfg.clone(), &identity(8)).map(|_| ()).unwrap_err();
    assert!(matches!(err, WalError::Locked { .. }), "{err}");
    drop(wal);
    Wal::open(cfg, &identity(8)).unwrap();
}

#[test]
fn checkpoints_recycle_segments_and_recovery_starts_at_the_redo_point() {
    let dir = temp_dir();
    let seg = 16 * 1024;
    let cfg = config(dir.path(), seg, psync_engine_factory());
    let wal = Wal::create(cfg.clone(), identity(9)).unwrap();
    commit_one_row_each(&wal, 0..40);
    let files_before = std::fs::read_dir(&cfg.dir).unwrap().count();
    let redo = wal.checkpoint_begin().unwrap();
    wal.checkpoint_end(redo).unwrap();
    let after = commit_one_row_each(&wal, 0..40);
    let s = wal.stats();
    assert!(s.segments_recycled_count >= 1, "{s:?}");
    assert!(std::fs::read_dir(&cfg.dir).unwrap().count() <= files_before + 3, "segments were not reused");
    wal.close().unwrap();
    let (_wal, scan) = Wal::open(cfg, &identity(9)).unwrap();
    assert_eq!(scan.records[0].lsn, redo);
    let committed = committed_txns(&scan);
    assert_eq!(committed, after);
}

#[test]
fn the_log_writes_through_io_uring_too() {
    // io_uring where the kernel allows it (psync with a notice otherwise): the default
    // `IoEngine::flush` (fdatasync) serves every engine.
    let dir = temp_dir();
    let factory: EngineFactory = Arc::new(|files| {
        flashscan_io::open_engine(flashscan_io::EngineKind::Auto, files, writer_engine_config(), &mut |_| {})
    });
    let cfg = config(dir.path(), 64 * 1024, factory);
    let wal = Wal::create(cfg.clone(), identity(10)).unwrap();
    let txns = commit_one_row_each(&wal, 0..50);
    wal.close().unwrap();
    let (_wal, scan) = Wal::open(cfg, &identity(10)).unwrap();
    let committed = committed_txns(&scan);
    assert_eq!(committed, txns);
}

/// `FLASHSCAN_WAL_SYNC=open_datasync`: segments opened O_DSYNC (on a real disk, with
/// O_DIRECT where it is accepted), no fdatasync; commits read back after reopening. A
/// value the variable cannot have keeps the log from opening, with the variable named.
#[test]
fn open_datasync_commits_survive_reopen_and_an_unknown_method_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(dir.path(), 64 * 1024, psync_engine_factory());
    cfg.sync_method = Ok(SyncMethod::OpenDatasync);
    let wal = Wal::create(cfg.clone(), identity(21)).unwrap();
    let txns = commit_one_row_each(&wal, 0..50);
    assert_eq!(wal.stats().commits_count, 50);
    wal.close().unwrap();
    let (_wal, scan) = Wal::open(cfg.clone(), &identity(21)).unwrap();
    assert_eq!(scan.end, LogEnd::Clean);
    assert_eq!(committed_txns(&scan), txns);
    drop(_wal);

    cfg.sync_method = Err("FLASHSCAN_WAL_SYNC=\"sometimes\": expected fdatasync or open_datasync".into());
    let err = Wal::open(cfg, &identity(21)).map(|_| ()).unwrap_err();
    assert!(err.to_string().contains("FLASHSCAN_WAL_SYNC"), "{err}");
}

/// A log whose flushes take 300 µs (simulated), committed to by 8 threads.
fn slow_log(dir: &std::path::Path, id: u128, flushes_in_flight_max: usize) -> (WalConfig, Arc<Wal>, Arc<SimDisk>) {
    log_with_latency(dir, id, flushes_in_flight_max, std::time::Duration::from_micros(300))
}

/// A log on a simulated disk whose every I/O takes `latency`.
fn log_with_latency(dir: &std::path::Path, id: u128, flushes_in_flight_max: usize, latency: std::time::Duration) -> (WalConfig, Arc<Wal>, Arc<SimDisk>) {
    let disk = SimDisk::new(SimDiskPlan::default());
    let d = disk.clone();
    let slow: EngineFactory = Arc::new(move |files| {
        let plan = FaultPlan { latency, ..FaultPlan::default() };
        Ok(Box::new(SimEngine::new(files, writer_engine_config(), plan)?.with_disk(d.clone())) as Box<dyn IoEngine>)
    });
    let mut cfg = config(dir, 64 * 1024, slow);
    cfg.flushes_in_flight_max = Ok(flushes_in_flight_max);
    (cfg.clone(), Arc::new(Wal::create(cfg, identity(id)).unwrap()), disk)
}

/// Flushes in flight (`FLASHSCAN_WAL_FLUSHES_IN_FLIGHT`): with slow flushes and 8
/// committing threads (half leading their flushes, half awaiting `Wal::durable`), up to 4 overlap — never more — and every commit is durable when
/// acknowledged (the durable LSN covers it: published in LSN order) and read back after
/// reopening; with 1, none overlap. An unreadable or out-of-range count is refused.
#[test]
fn flushes_overlap_up_to_the_limit_and_lose_nothing() {
    for max in [1usize, 4] {
        let dir = temp_dir();
        let (cfg, wal, _disk) = slow_log(dir.path(), 22, max);
        let threads: Vec<_> = (0..8u32)
            .map(|t| {
                let wal = wal.clone();
                std::thread::spawn(move || {
                    (t * 100..t * 100 + 30)
                        .map(|i| {
                            let txn = wal.begin();
                            insert(&wal, txn, i);
                            // Half the threads await durability as async callers do.
                            let c = if t % 2 == 0 { wal.commit(txn).unwrap() } else { commit_async(&wal, txn).unwrap() };
                            assert!(wal.durable_lsn() >= c.end, "acknowledged before durable");
                            txn
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        let mut txns: Vec<TxnId> = threads.into_iter().flat_map(|t| t.join().unwrap()).collect();
        let stats = wal.stats();
        eprintln!("{max} in flight: {stats:?}");
        assert_eq!(stats.commits_count, 240);
        assert!(stats.flushes_in_flight_peak <= max as u64, "{stats:?}");
        if max == 1 {
            assert_eq!(stats.overlapped_flushes_count, 0, "{stats:?}");
        } else {
            assert!(stats.overlapped_flushes_count > 0 && stats.flushes_in_flight_peak >= 2, "{stats:?}");
        }
        let Ok(wal) = Arc::try_unwrap(wal) else { panic!("wal still shared") };
        wal.close().unwrap();
        let (_wal, scan) = Wal::open(cfg.clone(), &identity(22)).unwrap();
        assert_eq!(scan.end, LogEnd::Clean);
        let mut found = committed_txns(&scan);
        txns.sort();
        found.sort();
        assert_eq!(found, txns);
        drop(_wal);
        for bad in [Err("FLASHSCAN_WAL_FLUSHES_IN_FLIGHT=\"many\": expected a count of flushes".to_string()), Ok(0), Ok(9)] {
            let mut cfg = cfg.clone();
            cfg.flushes_in_flight_max = bad;
            let err = Wal::open(cfg, &identity(22)).map(|_| ()).unwrap_err();
            assert!(err.to_string().contains("flushes"), "{err}");
        }
    }
}

/// A log written before flushes could overlap (control file version 1) opens, and its
/// control file is then version 2: a flashscan that reads only version 1 blocks refuses
/// the log instead of taking its first version 2 block for a torn tail.
#[test]
fn a_version_1_control_file_is_read_and_upgraded() {
    let dir = temp_dir();
    let (cfg, commits) = log_with_flushes(dir.path(), 23, 5);
    let control = cfg.dir.join("wal.control");
    let mut b = std::fs::read(&control).unwrap();
    assert_eq!(u16::from_le_bytes([b[8], b[9]]), 2);
    b[8..10].copy_from_slice(&1u16.to_le_bytes());
    let crc = crc32c::crc32c(&b[..508]);
    b[508..].copy_from_slice(&crc.to_le_bytes());
    std::fs::write(&control, &b).unwrap();
    let (wal, scan) = Wal::open(cfg.clone(), &identity(23)).unwrap();
    assert_eq!(scan.records.iter().filter(|r| matches!(r.record, Record::Commit { .. })).count(), commits.len());
    wal.close().unwrap();
    let b = std::fs::read(&control).unwrap();
    assert_eq!(u16::from_le_bytes([b[8], b[9]]), 2, "rewritten as version 2 at open");
    let mut b3 = b.clone();
    b3[8..10].copy_from_slice(&3u16.to_le_bytes());
    let crc = crc32c::crc32c(&b3[..508]);
    b3[508..].copy_from_slice(&crc.to_le_bytes());
    std::fs::write(&control, &b3).unwrap();
    let err = Wal::open(cfg, &identity(23)).map(|_| ()).unwrap_err();
    assert!(err.to_string().contains("control file version 3"), "{err}");
}

/// `Wal::would_lead_flush` says whether a committer waiting for an LSN now would lead a
/// flush itself: yes on an idle log for an appended LSN, no once it is durable, no while
/// a flush in flight covers it; for an LSN appended during a flush no flush covers, no
/// when the one flush slot is taken, yes when a second slot is free. (Flushes of 50 ms,
/// simulated: the in-flight window is wide; each "in flight" answer is checked only if
/// the flush was still running after it was read.)
#[test]
fn would_lead_flush_answers_from_the_flushes_in_flight() {
    for max in [1usize, 2] {
        let dir = temp_dir();
        let (_cfg, wal, _disk) = log_with_latency(dir.path(), 30, max, std::time::Duration::from_millis(50));
        let t1 = wal.begin();
        insert(&wal, t1, 1);
        let a = wal.append(&Record::Commit { txn: t1 }).unwrap();
        assert!(wal.would_lead_flush(a.end), "an idle log: the committer leads");
        let leader = {
            let wal = wal.clone();
            std::thread::spawn(move || wal.wait_durable(a.end).unwrap())
        };
        // Wait until the leader's flush is in flight (it covers `a`).
        while wal.would_lead_flush(a.end) {
            std::thread::yield_now();
        }
        let t2 = wal.begin();
        insert(&wal, t2, 2);
        let b = wal.append(&Record::Commit { txn: t2 }).unwrap();
        let (covered, leads_b) = (wal.would_lead_flush(a.end), wal.would_lead_flush(b.end));
        if wal.durable_lsn() < a.end {
            assert!(!covered, "a flush in flight covers a");
            assert_eq!(leads_b, max > 1, "{max} flush slot(s): b's committer leads only with a free slot");
        }
        leader.join().unwrap();
        assert!(!wal.would_lead_flush(a.end), "durable: nothing to lead");
        if wal.durable_lsn() < b.end {
            assert!(wal.would_lead_flush(b.end), "{max}: the log idle again, b's committer leads");
        }
        wal.wait_durable(b.end).unwrap();
        assert!(!wal.would_lead_flush(b.end));
    }
}
