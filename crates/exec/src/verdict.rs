//! The one-line verdict of `--check`: is the scan I/O-bound, CPU-bound, or held back by
//! something nameable? Derived from the efficiency and the waits, never guessed.

use crate::waits::WaitTimes;

/// Efficiency at or above which a scan counts as running at the device's speed.
pub const EFFICIENCY_IO_BOUND_MIN: f64 = 0.90;
/// Share of worker time waiting for I/O below which a slow scan is CPU-bound.
pub const IO_WAIT_SHARE_CPU_BOUND_MAX: f64 = 0.15;
/// Share of worker time idle at the end above which work was spread unevenly.
pub const WORKER_IDLE_SHARE_UNEVEN_MIN: f64 = 0.20;
/// Relative spread of the two raw runs above which the device itself was unsteady.
pub const RAW_SPREAD_UNSTEADY_MIN: f64 = 0.25;
/// Share of `threads x elapsed` the process got as CPU time below which a scan that looks
/// CPU-bound was really waiting for cores other processes held.
pub const CPU_SHARE_CONTENDED_MAX: f64 = 0.60;

pub struct VerdictInputs {
    pub efficiency: f64,
    pub waits: WaitTimes,
    pub decode_us_per_page: f64,
    pub cpu_us_per_page: f64,
    pub thread_count: u32,
    /// Reads in flight per worker at the end of the scan.
    pub queue_depth: u32,
    /// The scan chose its depth itself (`depth.rs`).
    pub depth_auto: bool,
    pub io_size_bytes: usize,
    pub raw_mb_per_s_before: f64,
    pub raw_mb_per_s_after: f64,
    /// Process CPU time during the scan, and its wall-clock time.
    pub cpu_s: f64,
    pub elapsed_s: f64,
}

/// A column store scan reads compressed segments (1-3 bytes a value for TPC-H), so its
/// I/O efficiency says little: it is normally limited by the CPU turning segments into
/// values. Its limit is named against memory: decoded values per second, as 8-byte values
/// (the width the vector kernels work in), against the memory read rate measured beside the
/// scan with the same threads — the rate a fused scan over values already in memory could
/// reach at best.
pub struct ColumnStoreInputs {
    /// Values the scan decoded (rows × projected columns).
    pub values_decoded: u64,
    /// Sequential memory read rate of the same thread count, measured beside the scan.
    pub memory_gb_per_s: f64,
}

/// Bytes a decoded value is counted as against the memory rate (the vector kernels' i64).
pub const DECODED_VALUE_BYTES: f64 = 8.0;

/// The verdict of a column store scan. When it was CPU-bound, how far decode runs from
/// memory's rate replaces the device efficiency as its measure; when something else held
/// it back (I/O, other processes, uneven work: see `verdict`), that comes first and the
/// same measure follows it.
pub fn column_store_verdict(v: &VerdictInputs, c: &ColumnStoreInputs) -> String {
    let general = verdict(v);
    let values_per_s = if v.elapsed_s > 0.0 { c.values_decoded as f64 / v.elapsed_s } else { 0.0 };
    let decoded_gb_per_s = values_per_s * DECODED_VALUE_BYTES / 1e9;
    let share = if c.memory_gb_per_s > 0.0 { decoded_gb_per_s / c.memory_gb_per_s } else { 0.0 };
    let measure = format!(
        "{:.0} M values/s on {} core{} = {:.2} GB/s as 8-byte values, {} % of the {:.1} GB/s memory read rate measured beside it",
        values_per_s / 1e6,
        v.thread_count,
        if v.thread_count == 1 { "" } else { "s" },
        decoded_gb_per_s,
        (share * 100.0).round() as i64,
        c.memory_gb_per_s,
    );
    if general.starts_with("CPU-bound") {
        format!("decode-bound (column store): {measure}; reads at {} % of the raw device rate", (v.efficiency * 100.0).round() as i64)
    } else {
        format!("{general}; column store decode: {measure}")
    }
}

pub fn verdict(v: &VerdictInputs) -> String {
    let percent = |x: f64| (x * 100.0).round() as i64;
    if v.efficiency >= EFFICIENCY_IO_BOUND_MIN {
        return format!("I/O-bound (efficiency {} %)", percent(v.efficiency));
    }
    let w = &v.waits;
    let io_share = w.fraction(w.io_s);
    let idle_share = w.fraction(w.worker_s);
    let cpu_share = w.fraction(w.decode_s + w.query_s);
    let (lo, hi) = (v.raw_mb_per_s_before.min(v.raw_mb_per_s_after), v.raw_mb_per_s_before.max(v.raw_mb_per_s_after));
    let spread = if hi > 0.0 { (hi - lo) / hi } else { 0.0 };
    // Decode time is wall-clock: on a machine shared with other work, a worker preempted
    // mid-decode looks CPU-bound while it was waiting for a core. CPU time tells them apart.
    let cores_busy_share = if v.elapsed_s > 0.0 { v.cpu_s / (v.thread_count as f64 * v.elapsed_s) } else { 1.0 };
    if cpu_share >= 0.5 && cores_busy_share < CPU_SHARE_CONTENDED_MAX {
        return format!(
            "held back by other processes: the scan's {} threads got {} % of their cores (CPU {:.2} s in {:.2} s); decode needs {:.1} µs of CPU per page (efficiency {} %)",
            v.thread_count,
            percent(cores_busy_share),
            v.cpu_s,
            v.elapsed_s,
            v.cpu_us_per_page,
            percent(v.efficiency)
        );
    }
    if io_share < IO_WAIT_SHARE_CPU_BOUND_MAX && cpu_share >= idle_share {
        return format!(
            "CPU-bound: decode takes {:.1} µs per page on {} core{} (efficiency {} %)",
            v.decode_us_per_page,
            v.thread_count,
            if v.thread_count == 1 { "" } else { "s" },
            percent(v.efficiency)
        );
    }
    if idle_share >= WORKER_IDLE_SHARE_UNEVEN_MIN {
        return format!(
            "held back by uneven work: workers idle {} % of the time waiting for the last one (efficiency {} %)",
            percent(idle_share),
            percent(v.efficiency)
        );
    }
    if spread >= RAW_SPREAD_UNSTEADY_MIN {
        return format!(
            "held back by an unsteady device: raw reads ran at {lo:.0} and {hi:.0} MB/s around the scan (efficiency {} %)",
            percent(v.efficiency)
        );
    }
    if io_share >= cpu_share {
        let how = if v.depth_auto { "; the depth search ended at" } else { " with" };
        return format!(
            "held back by read-ahead: waiting for I/O {} % of the time{how} {} x {} KiB in flight per worker; try --depth {} (efficiency {} %)",
            percent(io_share),
            v.queue_depth,
            v.io_size_bytes / 1024,
            (v.queue_depth * 2).min(crate::limits::SCAN_QUEUE_DEPTH_MAX),
            percent(v.efficiency)
        );
    }
    format!(
        "held back by decode and I/O taking turns: I/O {} %, decode and query {} % of worker time (efficiency {} %)",
        percent(io_share),
        percent(cpu_share),
        percent(v.efficiency)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inputs(efficiency: f64, waits: WaitTimes) -> VerdictInputs {
        VerdictInputs {
            efficiency,
            waits,
            decode_us_per_page: 3.2,
            thread_count: 2,
            queue_depth: 8,
            depth_auto: false,
            io_size_bytes: 1 << 20,
            raw_mb_per_s_before: 2000.0,
            raw_mb_per_s_after: 2100.0,
            cpu_us_per_page: 3.0,
            cpu_s: 1.9,
            elapsed_s: 1.0,
        }
    }

    #[test]
    fn each_verdict_follows_from_its_inputs() {
        let w = |io_s, decode_s, worker_s| WaitTimes { io_s, decode_s, query_s: 0.0, worker_s, other_s: 0.0 };
        assert_eq!(verdict(&inputs(0.963, w(1.0, 1.0, 0.0))), "I/O-bound (efficiency 96 %)");
        assert!(verdict(&inputs(0.5, w(0.05, 1.9, 0.05))).starts_with("CPU-bound: decode takes 3.2 µs per page on 2 cores"));
        assert!(verdict(&inputs(0.5, w(0.5, 0.5, 1.0))).starts_with("held back by uneven work"));
        assert!(verdict(&inputs(0.5, w(1.5, 0.5, 0.0))).starts_with("held back by read-ahead: waiting for I/O 75 % of the time with 8 x 1024 KiB"));
        let mut searched = inputs(0.5, w(1.5, 0.5, 0.0));
        searched.depth_auto = true;
        searched.queue_depth = 32;
        let read_ahead = verdict(&searched);
        assert!(read_ahead.contains("75 % of the time; the depth search ended at 32 x 1024 KiB in flight per worker; try --depth 64"), "{read_ahead}");
        let mut unsteady = inputs(0.5, w(1.5, 0.5, 0.0));
        unsteady.raw_mb_per_s_after = 1000.0;
        assert!(verdict(&unsteady).starts_with("held back by an unsteady device"));
        let mut contended = inputs(0.5, w(0.05, 1.9, 0.05));
        contended.cpu_s = 0.5;
        assert!(verdict(&contended).starts_with("held back by other processes: the scan's 2 threads got 25 %"), "{}", verdict(&contended));
        // Preempted decode also stretches the I/O waits; CPU time still names the cause.
        let mut contended_io = inputs(0.6, w(0.4, 1.5, 0.0));
        contended_io.cpu_s = 0.3;
        assert!(verdict(&contended_io).starts_with("held back by other processes"), "{}", verdict(&contended_io));
    }

    #[test]
    fn a_column_store_is_measured_against_memory() {
        let w = |io_s, decode_s, worker_s| WaitTimes { io_s, decode_s, query_s: 0.0, worker_s, other_s: 0.0 };
        // 400 M values in 1 s = 3.2 GB/s of 8-byte values against 16 GB/s: 20 %.
        let memory = ColumnStoreInputs { values_decoded: 400_000_000, memory_gb_per_s: 16.0 };
        let decode_bound = column_store_verdict(&inputs(0.04, w(0.05, 1.9, 0.05)), &memory);
        assert_eq!(
            decode_bound,
            "decode-bound (column store): 400 M values/s on 2 cores = 3.20 GB/s as 8-byte values, 20 % of the 16.0 GB/s memory read rate measured beside it; reads at 4 % of the raw device rate"
        );
        // Other causes come first, the same measure after them.
        assert_eq!(
            column_store_verdict(&inputs(0.963, w(1.0, 1.0, 0.0)), &memory),
            "I/O-bound (efficiency 96 %); column store decode: 400 M values/s on 2 cores = 3.20 GB/s as 8-byte values, 20 % of the 16.0 GB/s memory read rate measured beside it"
        );
        let read_ahead = column_store_verdict(&inputs(0.5, w(1.5, 0.5, 0.0)), &memory);
        assert!(read_ahead.starts_with("held back by read-ahead") && read_ahead.ends_with("20 % of the 16.0 GB/s memory read rate measured beside it"), "{read_ahead}");
    }
}
