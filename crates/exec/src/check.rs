//! The top-speed check: read exactly the scan's chunks (its plan), with the same I/O size, depth,
//! threads and cache mode, but decode nothing, right before and right after the scan.
//! The machines are shared and the device's rate drifts within minutes, so a ratio measured
//! side by side is the only figure that means something: efficiency = scan MB/s / raw MB/s.

use crate::error::ExecError;
use crate::report::{CheckReport, PassFigures};
use crate::depth::{DepthFigures, DepthPolicy};
use crate::scan::{read_raw_with_depth, ReadConfig, ScanStats};
use crate::source::ReadPlan;
use crate::verdict::{column_store_verdict, verdict, ColumnStoreInputs, VerdictInputs};

/// Bytes each thread reads per pass when measuring the memory read rate: far past the
/// last-level cache (a few MB on the machines this runs on), so the rate is DRAM's.
pub const MEMORY_PASS_BYTES_PER_THREAD: usize = 64 << 20;
/// Passes per measurement; the fastest counts (the first also faults the pages in).
pub const MEMORY_PASSES: usize = 3;

/// The sequential memory read rate of `thread_count` threads at once, in GB/s: each sums
/// its own buffer of `MEMORY_PASS_BYTES_PER_THREAD`, the fastest of `MEMORY_PASSES`. What a
/// column store scan's decode rate is compared with (`column_store_verdict`).
pub fn memory_read_gb_per_s(thread_count: u32) -> f64 {
    let threads = thread_count.max(1) as usize;
    let words = MEMORY_PASS_BYTES_PER_THREAD / 8;
    let buffers: Vec<Vec<u64>> = (0..threads).map(|t| (0..words as u64).map(|i| i ^ t as u64).collect()).collect();
    let mut best_s = f64::INFINITY;
    for _ in 0..MEMORY_PASSES {
        let barrier = std::sync::Barrier::new(threads);
        let start = std::time::Instant::now();
        std::thread::scope(|scope| {
            for buffer in &buffers {
                let barrier = &barrier;
                scope.spawn(move || {
                    barrier.wait();
                    // Four independent sums: the loop is bound by loads, not by one add chain.
                    let mut sums = [0u64; 4];
                    for chunk in buffer.chunks_exact(4) {
                        for (s, v) in sums.iter_mut().zip(chunk) {
                            *s = s.wrapping_add(*v);
                        }
                    }
                    std::hint::black_box(sums);
                });
            }
        });
        best_s = best_s.min(start.elapsed().as_secs_f64());
    }
    let bytes = (threads * words * 8) as f64;
    if best_s > 0.0 { bytes / best_s / 1e9 } else { 0.0 }
}

/// One raw pass over the plan's reads, `depth` reads in flight per worker.
pub fn raw_pass(plan: &ReadPlan, config: &ReadConfig, depth: DepthPolicy) -> Result<ScanStats, ExecError> {
    read_raw_with_depth(plan, config, depth)
}

/// The check's figures and verdict from the scan and the two raw passes around it.
/// `column_store`: the scan read a column store and decoded this many values; its verdict
/// then compares decode with the memory read rate measured here, right after the scan.
pub fn check_report(
    scan: &PassFigures,
    before: &ScanStats,
    after: &ScanStats,
    config: &ReadConfig,
    depth: &DepthFigures,
    column_store_values: Option<u64>,
) -> CheckReport {
    let (raw_before, raw_after) = (before.mb_per_s(), after.mb_per_s());
    let raw_mb_per_s = (raw_before + raw_after) / 2.0;
    let efficiency = if raw_mb_per_s > 0.0 { scan.mb_per_s / raw_mb_per_s } else { 0.0 };
    let inputs = VerdictInputs {
        efficiency,
        waits: scan.waits,
        decode_us_per_page: scan.decode_us_per_page,
        cpu_us_per_page: scan.cpu_us_per_page,
        cpu_s: scan.cpu_s,
        elapsed_s: scan.elapsed_s,
        thread_count: config.thread_count,
        queue_depth: depth.depth_final,
        depth_auto: depth.mode == "auto",
        io_size_bytes: config.io_size_bytes,
        raw_mb_per_s_before: raw_before,
        raw_mb_per_s_after: raw_after,
    };
    let (verdict, memory_gb_per_s) = match column_store_values {
        Some(values_decoded) => {
            let memory_gb_per_s = memory_read_gb_per_s(config.thread_count);
            (column_store_verdict(&inputs, &ColumnStoreInputs { values_decoded, memory_gb_per_s }), Some(memory_gb_per_s))
        }
        None => (verdict(&inputs), None),
    };
    let raw_queue_depth = before.depth.depth_final;
    CheckReport { raw_mb_per_s, raw_mb_per_s_before: raw_before, raw_mb_per_s_after: raw_after, raw_queue_depth, efficiency, verdict, memory_gb_per_s }
}
