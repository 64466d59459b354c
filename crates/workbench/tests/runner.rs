//! The runner and verify on real engines, on small files: every engine moves the bytes it
//! claims to, counts what it ran, and a corrupted block is caught where it is.

use flashscan_io::EngineKind;
use flashscan_workbench::spec::{Pattern, ReadWrite, TargetSpec};
use flashscan_workbench::verify::{block_offsets, open_for_verify, read_and_check, run_verify, write_pattern};
use flashscan_workbench::{runner, Report};

mod common;
use common::{job, prepare};

fn engines() -> [EngineKind; 3] {
    [EngineKind::Uring, EngineKind::Psync, EngineKind::Null]
}

#[test]
fn every_engine_runs_and_counts() {
    let dir = tempfile::tempdir().unwrap();
    for engine in engines() {
        for (rw, pattern) in [
            (ReadWrite::Read, Pattern::Random),
            (ReadWrite::Write, Pattern::Sequential),
            (ReadWrite::Mix { write_pct: 50 }, Pattern::Random),
        ] {
            let j = job(dir.path(), engine, rw, pattern);
            let targets = prepare(&j);
            let outcome = runner::run(&j, &targets, &|_| {}).unwrap();
            assert_eq!(outcome.threads.len(), 2);
            let report = Report::new(&j, &targets, &outcome);
            let f = &report.figures;
            assert!(f.ios_count > 0, "{engine:?} {rw:?}: no I/O counted");
            assert_eq!(f.ios_count, f.reads_count + f.writes_count);
            match rw {
                ReadWrite::Read => assert_eq!(f.writes_count, 0),
                ReadWrite::Write => assert_eq!(f.reads_count, 0),
                ReadWrite::Mix { .. } => assert!(f.reads_count > 0 && f.writes_count > 0, "{f:?}"),
            }
            assert_eq!(f.bytes_read + f.bytes_written, f.ios_count * 4096);
            assert!(f.iops > 0.0 && f.mb_per_s > 0.0);
            assert!(f.latency_us.p50 <= f.latency_us.p99 && f.latency_us.p99 <= f.latency_us.max);
            assert!((f.latency_ms_buckets.iter().sum::<f64>() - 100.0).abs() < 1e-6);
            let per_thread: u64 = report.targets[0].threads.iter().map(|t| t.figures.ios_count).sum();
            assert_eq!(per_thread, f.ios_count);
        }
    }
}

#[test]
fn verify_passes_on_uring_and_psync() {
    let dir = tempfile::tempdir().unwrap();
    for engine in [EngineKind::Uring, EngineKind::Psync] {
        let mut j = job(dir.path(), engine, ReadWrite::Write, Pattern::Random);
        j.targets.push(TargetSpec { path: dir.path().join("second.dat"), threads: 1, cpu_mask: 0, size_bytes: Some(1 << 20) });
        let targets = prepare(&j);
        let report = run_verify(&j, &targets, &|_| {}).unwrap();
        assert!(report.ok, "{report:?}");
        assert_eq!(report.targets.len(), 2);
        assert_eq!(report.targets[0].blocks_count, 1024);
        assert_eq!(report.targets[0].bytes_read, 4 << 20);
        assert_eq!(report.targets[1].blocks_count, 256);
    }
}

#[test]
fn verify_finds_a_corrupted_block_where_it_is() {
    let dir = tempfile::tempdir().unwrap();
    for engine in [EngineKind::Uring, EngineKind::Psync] {
        let j = job(dir.path(), engine, ReadWrite::Write, Pattern::Random);
        let targets = prepare(&j);
        let mut e = open_for_verify(&j, &targets[0].path, &|_| {}).unwrap();
        let offsets = block_offsets(&j, &targets[0]);
        write_pattern(e.as_mut(), &j, &offsets, 0).unwrap();
        // Damage one word behind the engine's back.
        {
            use std::os::unix::fs::FileExt;
            let f = std::fs::OpenOptions::new().write(true).open(&targets[0].path).unwrap();
            f.write_all_at(&[0xAB; 8], 12288 + 16).unwrap();
            f.sync_all().unwrap();
        }
        let checked = read_and_check(e.as_mut(), &j, &offsets, 0).unwrap();
        assert_eq!(checked.mismatched_words_count, 1, "{engine:?}");
        assert_eq!(checked.mismatches[0].offset_bytes, 12288 + 16);
        assert_eq!(checked.mismatches[0].found, u64::from_le_bytes([0xAB; 8]));
        // Reading as if it were another file's data fails everywhere.
        let wrong = read_and_check(e.as_mut(), &j, &offsets, 1).unwrap();
        assert_eq!(wrong.mismatched_words_count, (4 << 20) / 8);
    }
}

#[test]
fn the_null_engine_cannot_verify() {
    let dir = tempfile::tempdir().unwrap();
    let j = job(dir.path(), EngineKind::Null, ReadWrite::Write, Pattern::Random);
    let targets = prepare(&j);
    assert!(run_verify(&j, &targets, &|_| {}).unwrap_err().is_bad_input());
}

#[test]
fn uring_disabled_falls_back_to_psync_with_a_notice() {
    // Only this test sets the variable; the engine reads it when it is opened.
    let dir = tempfile::tempdir().unwrap();
    let j = job(dir.path(), EngineKind::Auto, ReadWrite::Read, Pattern::Random);
    let targets = prepare(&j);
    std::env::set_var("FLASHSCAN_DISABLE_URING", "1");
    let heard = std::sync::Mutex::new(Vec::<String>::new());
    let outcome = runner::run(&j, &targets, &|m| heard.lock().unwrap().push(m.to_string()));
    std::env::remove_var("FLASHSCAN_DISABLE_URING");
    let outcome = outcome.unwrap();
    assert_eq!(outcome.engine_name, "psync");
    let heard = heard.into_inner().unwrap();
    assert_eq!(heard.len(), 1, "one notice for all threads: {heard:?}");
    assert!(heard[0].contains("psync"), "{heard:?}");
}
