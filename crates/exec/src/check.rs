//! The top-speed check: read exactly the scan's chunks (its plan), with the same I/O size, depth,
//! threads and cache mode, but decode nothing, right before and right after the scan.
//! The machines are shared and the device's rate drifts within minutes, so a ratio measured
//! side by side is the only figure that means something: efficiency = scan MB/s / raw MB/s.

use crate::error::ExecError;
use crate::report::{CheckReport, PassFigures};
use crate::scan::{read_raw, ReadConfig, ScanStats};
use crate::source::ReadPlan;
use crate::verdict::{verdict, VerdictInputs};

/// One raw pass over the plan's reads.
pub fn raw_pass(plan: &ReadPlan, config: &ReadConfig) -> Result<ScanStats, ExecError> {
    read_raw(plan, config)
}

/// The check's figures and verdict from the scan and the two raw passes around it.
pub fn check_report(scan: &PassFigures, before: &ScanStats, after: &ScanStats, config: &ReadConfig) -> CheckReport {
    let (raw_before, raw_after) = (before.mb_per_s(), after.mb_per_s());
    let raw_mb_per_s = (raw_before + raw_after) / 2.0;
    let efficiency = if raw_mb_per_s > 0.0 { scan.mb_per_s / raw_mb_per_s } else { 0.0 };
    let verdict = verdict(&VerdictInputs {
        efficiency,
        waits: scan.waits,
        decode_us_per_page: scan.decode_us_per_page,
        cpu_us_per_page: scan.cpu_us_per_page,
        cpu_s: scan.cpu_s,
        elapsed_s: scan.elapsed_s,
        thread_count: config.thread_count,
        queue_depth: config.queue_depth,
        io_size_bytes: config.io_size_bytes,
        raw_mb_per_s_before: raw_before,
        raw_mb_per_s_after: raw_after,
    });
    CheckReport { raw_mb_per_s, raw_mb_per_s_before: raw_before, raw_mb_per_s_after: raw_after, efficiency, verdict }
}
