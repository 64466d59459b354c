//! The workbench tests' kit: a small job on real files and the files it needs.
#![allow(dead_code)]

use std::path::Path;
use std::time::Duration;

use flashscan_io::EngineKind;
use flashscan_workbench::spec::{JobSpec, Pattern, ReadWrite, TargetSpec};
use flashscan_workbench::test_file::{prepare_targets, PreparedTarget, TargetNeeds};

/// A short job on one 4 MB file in `dir`: two threads, 4 KiB blocks at depth 4, O_DIRECT,
/// 200 ms after 50 ms of warm-up. Tests change what they need with `..job(…)`.
pub fn job(dir: &Path, engine: EngineKind, read_write: ReadWrite, pattern: Pattern) -> JobSpec {
    JobSpec {
        targets: vec![TargetSpec { path: dir.to_path_buf(), threads: 2, cpu_mask: 0, size_bytes: Some(4 << 20) }],
        pattern,
        read_write,
        block_size_bytes: 4096,
        queue_depth: 4,
        duration: Duration::from_millis(200),
        warmup: Duration::from_millis(50),
        seed: 7,
        engine,
        direct: true,
        force: false,
        offset_bytes: 0,
        sync: false,
        status_interval: None,
        processes: 1,
    }
}

pub fn prepare(job: &JobSpec) -> Vec<PreparedTarget> {
    let needs = TargetNeeds { writes: true, force: false, direct: job.direct, block_size_bytes: job.block_size_bytes, offset_bytes: 0 };
    prepare_targets(&job.targets, needs, job.seed, &mut |_| {}).unwrap()
}
