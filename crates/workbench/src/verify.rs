//! `--verify`: write a known pattern over each target, read it back in a different random
//! order, and compare every 8-byte word. The pattern encodes the file's number and the
//! word's own offset, so a misplaced block (wrong offset, wrong file, stale data) shows as
//! a mismatch that says where the data came from.

use std::path::Path;
use std::sync::Arc;

use flashscan_io::{open_engine, EngineConfig, FileSet, FileStats, IoCompletion, IoEngine, IoOp, IoRequest, OpenMode};
use serde::Serialize;

use crate::error::WorkbenchError;
use crate::rng::FastRng;
use crate::spec::JobSpec;
use crate::test_file::PreparedTarget;

/// Mismatches listed per target; the count goes on past it.
pub const MISMATCHES_LISTED_MAX: usize = 10;

#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Mismatch {
    pub offset_bytes: u64,
    pub expected: u64,
    pub found: u64,
}

#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct VerifyTarget {
    pub path: String,
    pub blocks_count: u64,
    pub bytes_written: u64,
    pub bytes_read: u64,
    pub mismatched_words_count: u64,
    pub mismatches: Vec<Mismatch>,
}

#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct VerifyReport {
    pub engine: String,
    pub block_size_bytes: u32,
    pub queue_depth: u32,
    pub ok: bool,
    pub targets: Vec<VerifyTarget>,
}

/// The word stored at `offset_bytes` of file number `file_number`.
#[inline]
pub fn pattern_word(file_number: u32, offset_bytes: u64) -> u64 {
    ((file_number as u64) << 48) ^ offset_bytes ^ 0x9E37_79B9_7F4A_7C15
}

fn fill_pattern(buf: &mut [u8], file_number: u32, offset_bytes: u64) {
    for (i, w) in buf.chunks_exact_mut(8).enumerate() {
        w.copy_from_slice(&pattern_word(file_number, offset_bytes + i as u64 * 8).to_le_bytes());
    }
}

/// Writes then checks every target, one thread per target.
pub fn run_verify(job: &JobSpec, targets: &[PreparedTarget], notice: &(dyn Fn(&str) + Sync)) -> Result<VerifyReport, WorkbenchError> {
    if job.engine == flashscan_io::EngineKind::Null {
        return Err(WorkbenchError::Spec("--verify needs an engine that moves data: use --engine uring, psync or auto".into()));
    }
    let results: Vec<Result<(VerifyTarget, &'static str), WorkbenchError>> = std::thread::scope(|scope| {
        let handles: Vec<_> = targets
            .iter()
            .enumerate()
            .map(|(i, t)| scope.spawn(move || verify_target(job, t, i as u32, notice)))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err(WorkbenchError::ThreadPanicked("a verify thread".into()))))
            .collect()
    });
    let mut report = VerifyReport {
        engine: String::new(),
        block_size_bytes: job.block_size_bytes,
        queue_depth: job.queue_depth,
        ok: true,
        targets: Vec::new(),
    };
    for r in results {
        let (target, engine) = r?;
        report.engine = engine.to_string();
        report.ok &= target.mismatched_words_count == 0;
        report.targets.push(target);
    }
    Ok(report)
}

fn verify_target(job: &JobSpec, target: &PreparedTarget, file_number: u32, notice: &(dyn Fn(&str) + Sync)) -> Result<(VerifyTarget, &'static str), WorkbenchError> {
    let mut engine = open_for_verify(job, &target.path, notice)?;
    let offsets = block_offsets(job, target);
    let bytes = offsets.len() as u64 * job.block_size_bytes as u64;
    write_pattern(engine.as_mut(), job, &offsets, file_number)?;
    let mut result = read_and_check(engine.as_mut(), job, &offsets, file_number)?;
    result.path = target.path.display().to_string();
    result.bytes_written = bytes;
    Ok((result, engine.name()))
}

/// An engine on one file, opened for reads and writes.
pub fn open_for_verify(job: &JobSpec, path: &Path, notice: &(dyn Fn(&str) + Sync)) -> Result<Box<dyn IoEngine>, WorkbenchError> {
    let mut files = FileSet::new();
    files
        .add(path, OpenMode { direct: job.direct, write: true }, Arc::new(FileStats::default()))
        .map_err(WorkbenchError::Setup)?;
    let config = EngineConfig::for_depth(job.queue_depth, job.block_size_bytes as usize).on_one_thread();
    open_engine(job.engine, Arc::new(files), config, &mut |m| notice(m)).map_err(WorkbenchError::Setup)
}

/// Every block of the tested region, in a random order (from `--seed`).
pub fn block_offsets(job: &JobSpec, target: &PreparedTarget) -> Vec<u64> {
    let block = job.block_size_bytes as u64;
    let count = target.size_bytes.saturating_sub(job.offset_bytes) / block;
    let mut offsets: Vec<u64> = (0..count).map(|b| job.offset_bytes + b * block).collect();
    shuffle(&mut offsets, &mut FastRng::new(job.seed, 0xBEEF));
    offsets
}

fn shuffle(v: &mut [u64], rng: &mut FastRng) {
    for i in (1..v.len()).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        v.swap(i, j);
    }
}

/// Writes the pattern to every block in `offsets`.
pub fn write_pattern(engine: &mut dyn IoEngine, job: &JobSpec, offsets: &[u64], file_number: u32) -> Result<(), WorkbenchError> {
    let length = job.block_size_bytes as usize;
    drive(engine, job, offsets, IoOp::Write, |engine, slot, offset| fill_pattern(&mut engine.slot_mut(slot)[..length], file_number, offset), |_, _| {})
}

/// Reads every block (in another random order) and compares it with the pattern.
pub fn read_and_check(engine: &mut dyn IoEngine, job: &JobSpec, offsets: &[u64], file_number: u32) -> Result<VerifyTarget, WorkbenchError> {
    let mut order = offsets.to_vec();
    shuffle(&mut order, &mut FastRng::new(job.seed, 0xF00D));
    let length = job.block_size_bytes as usize;
    let mut result = VerifyTarget {
        path: engine.files().get(0).path.display().to_string(),
        blocks_count: offsets.len() as u64,
        bytes_written: 0,
        bytes_read: 0,
        mismatched_words_count: 0,
        mismatches: Vec::new(),
    };
    drive(engine, job, &order, IoOp::Read, |_, _, _| {}, |engine, c| {
        result.bytes_read += c.length_bytes as u64;
        let data = &engine.slot(c.slot)[..length];
        for (i, w) in data.chunks_exact(8).enumerate() {
            let offset_bytes = c.offset_bytes + i as u64 * 8;
            let expected = pattern_word(file_number, offset_bytes);
            let found = u64::from_le_bytes([w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7]]);
            if found != expected {
                result.mismatched_words_count += 1;
                if result.mismatches.len() < MISMATCHES_LISTED_MAX {
                    result.mismatches.push(Mismatch { offset_bytes, expected, found });
                }
            }
        }
    })?;
    Ok(result)
}

/// Runs one I/O per offset with `queue_depth` in flight; `before` fills a slot before it
/// is queued, `after` sees each completion while its slot is still idle.
fn drive(
    engine: &mut dyn IoEngine,
    job: &JobSpec,
    offsets: &[u64],
    op: IoOp,
    mut before: impl FnMut(&mut dyn IoEngine, u32, u64),
    mut after: impl FnMut(&dyn IoEngine, &IoCompletion),
) -> Result<(), WorkbenchError> {
    let mut free: Vec<u32> = (0..job.queue_depth).rev().collect();
    let mut completions = Vec::with_capacity(job.queue_depth as usize * 2);
    let mut next = 0;
    let mut done = 0;
    while done < offsets.len() {
        while next < offsets.len() {
            let Some(slot) = free.pop() else { break };
            before(engine, slot, offsets[next]);
            let request = IoRequest { op, file_index: 0, offset_bytes: offsets[next], length_bytes: job.block_size_bytes, slot, user_data: next as u64 };
            engine.queue(request).map_err(WorkbenchError::Run)?;
            next += 1;
        }
        completions.clear();
        engine.reap(1, &mut completions).map_err(WorkbenchError::Run)?;
        for c in &completions {
            c.expect_full(engine.files()).map_err(WorkbenchError::Run)?;
            after(engine, c);
            free.push(c.slot);
            done += 1;
        }
    }
    Ok(())
}
