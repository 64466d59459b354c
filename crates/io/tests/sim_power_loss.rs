//! The simulated engine's power loss: flushed writes always survive; unflushed writes are
//! kept, lost or torn at sector granularity (never at a finer grain), as the seed decides;
//! an injected flush error leaves the writes unflushed; after a cut every I/O fails.

use std::sync::Arc;

use flashscan_io::sim::{FaultPlan, SimDisk, SimDiskPlan, SimEngine};
use flashscan_io::*;

const SIZE: usize = 64 * 1024;

fn setup(dir: &std::path::Path, disk: &Arc<SimDisk>) -> (SimEngine, std::path::PathBuf) {
    let path = dir.join("f");
    std::fs::write(&path, vec![0u8; SIZE]).unwrap();
    let files = Arc::new(FileSet::open(std::slice::from_ref(&path), OpenMode { direct: false, write: true }).unwrap());
    let engine = SimEngine::new(files, EngineConfig::for_depth(1, 16384), FaultPlan::default()).unwrap().with_disk(disk.clone());
    (engine, path)
}

fn write(engine: &mut SimEngine, offset: u64, len: u32, byte: u8) -> Result<(), i32> {
    engine.slot_mut(0)[..len as usize].fill(byte);
    engine
        .queue(IoRequest { op: IoOp::Write, file_index: 0, offset_bytes: offset, length_bytes: len, slot: 0, user_data: 0 })
        .unwrap();
    let mut out = Vec::new();
    engine.reap(1, &mut out).unwrap();
    out[0].result.map(|_| ())
}

#[test]
fn flushed_writes_survive_and_unflushed_ones_tear_at_sectors() {
    for sector in [512usize, 4096] {
        let mut torn_seen = false;
        for seed in 0..40 {
            let dir = tempfile::tempdir().unwrap();
            let disk = SimDisk::new(SimDiskPlan { sector_size_bytes: sector, ..SimDiskPlan::default() });
            let (mut engine, path) = setup(dir.path(), &disk);
            write(&mut engine, 0, 16384, 0xAA).unwrap();
            engine.flush(0).unwrap();
            write(&mut engine, 16384, 16384, 0xBB).unwrap();
            write(&mut engine, 0, 8192, 0xCC).unwrap(); // over flushed data: may revert to 0xAA
            assert_eq!(disk.flush_count(), 1);
            assert_eq!(disk.unflushed_write_count(), 2);
            let report = disk.power_loss(seed).unwrap();
            assert_eq!(report.writes_kept_count + report.writes_lost_count + report.writes_torn_count, 2);
            let bytes = std::fs::read(&path).unwrap();
            for (i, s) in bytes.chunks(sector).enumerate() {
                let at = i * sector;
                assert!(s.iter().all(|b| *b == s[0]), "sector {i} mixed: torn finer than a sector");
                let allowed: &[u8] = match at {
                    a if a < 8192 => &[0xAA, 0xCC],
                    a if a < 16384 => &[0xAA],
                    a if a < 32768 => &[0x00, 0xBB],
                    _ => &[0x00],
                };
                assert!(allowed.contains(&s[0]), "sector at {at}: {:#x}", s[0]);
            }
            let new_bb = bytes[16384..32768].chunks(sector).filter(|s| s[0] == 0xBB).count();
            torn_seen |= new_bb > 0 && new_bb < 16384 / sector;
        }
        assert!(torn_seen, "no torn write in 40 seeds at {sector}");
    }
}

#[test]
fn a_failed_flush_leaves_writes_unflushed_and_a_cut_fails_everything() {
    let dir = tempfile::tempdir().unwrap();
    let disk = SimDisk::new(SimDiskPlan { fail_flush_at: Some(1), cut_at_io: Some(5), ..SimDiskPlan::default() });
    let (mut engine, _path) = setup(dir.path(), &disk);
    write(&mut engine, 0, 4096, 1).unwrap(); // io 1
    assert!(engine.flush(0).is_err()); // io 2, injected
    assert_eq!(disk.unflushed_write_count(), 1);
    assert_eq!(disk.flush_error_count(), 1);
    engine.flush(0).unwrap(); // io 3
    assert_eq!(disk.unflushed_write_count(), 0);
    write(&mut engine, 4096, 4096, 2).unwrap(); // io 4
    assert_eq!(write(&mut engine, 8192, 4096, 3), Err(libc::EIO)); // io 5: the power goes
    assert!(disk.is_power_cut());
    assert!(engine.flush(0).is_err());
    assert_eq!(engine.flush_count(), 3);
    disk.power_loss(1).unwrap();
    assert!(!disk.is_power_cut());
}
