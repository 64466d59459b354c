//! The one measurement struct. The runner's raw outcome becomes a [`Report`] here; the
//! printers (table, JSON, CSV, chart) only format it and never compute figures of their own.
//!
//! Units: IOPS are I/Os per second; `mb_per_s` is MiB/s (2^20 bytes, as SQLIO counts);
//! latencies are microseconds; CPU percentages are of the whole machine (all CPUs online),
//! so 100 % means every core busy; `cpu_us_per_io` is CPU microseconds (user + system) per I/O.

use serde::Serialize;

use crate::cpu::CpuTimes;
use flashscan_measure::histogram::LatencySummary;
use crate::job_file::JobFile;
use crate::runner::{IntervalOutcome, IoCounts, RunOutcome, ThreadOutcome};
use crate::spec::{JobSpec, SweepAxis};
use crate::test_file::PreparedTarget;

/// The figures reported at every level: run, target, thread.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Figures {
    pub ios_count: u64,
    pub reads_count: u64,
    pub writes_count: u64,
    pub bytes_read: u64,
    pub bytes_written: u64,
    pub iops: f64,
    pub read_iops: f64,
    pub write_iops: f64,
    pub mb_per_s: f64,
    pub latency_us: LatencySummary,
    pub read_latency_us: LatencySummary,
    pub write_latency_us: LatencySummary,
    /// Percent of I/Os that took 0, 1, …, 23 ms; the last entry is 24 ms and more.
    pub latency_ms_buckets: Vec<f64>,
    pub cpu_user_pct: f64,
    pub cpu_sys_pct: f64,
    pub cpu_us_per_io: f64,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ThreadReport {
    pub thread: u32,
    pub elapsed_s: f64,
    #[serde(flatten)]
    pub figures: Figures,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct TargetReport {
    pub path: String,
    pub size_bytes: u64,
    pub created_by_flashscan: bool,
    #[serde(flatten)]
    pub figures: Figures,
    pub threads: Vec<ThreadReport>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Report {
    pub engine: String,
    pub pattern: String,
    pub rw: String,
    pub write_pct: u32,
    pub block_size_bytes: u32,
    /// Outstanding I/Os per thread.
    pub queue_depth: u32,
    pub threads_count: u32,
    pub direct: bool,
    pub duration_s: f64,
    pub warmup_s: f64,
    pub seed: u64,
    pub cpu_count: u32,
    /// Each write durable (O_DSYNC) before it counted.
    pub sync: bool,
    /// Separate processes that ran the job side by side.
    pub processes: u32,
    #[serde(flatten)]
    pub figures: Figures,
    pub targets: Vec<TargetReport>,
    /// Per-interval deltas with `--status-interval` (empty otherwise); they add up to the totals.
    pub intervals: Vec<IntervalReport>,
    /// Every setting of the run: this JSON is also a job file (`--job`).
    pub job: JobFile,
}

/// One interval of the run: its own deltas, not running totals.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct IntervalReport {
    /// Seconds from the start of the measured window to the end of the interval.
    pub t_s: f64,
    pub start_s: f64,
    pub duration_s: f64,
    /// I/Os in flight when the interval closed, over all threads.
    pub outstanding_ios: u64,
    #[serde(flatten)]
    pub figures: Figures,
}

impl IntervalReport {
    pub fn new(interval: &IntervalOutcome, cpu_count: u32) -> IntervalReport {
        let length_s = interval.length.as_secs_f64();
        let per_s = |n: u64| if length_s > 0.0 { n as f64 / length_s } else { 0.0 };
        let io = &interval.io;
        let figures = Figures::from_counts(Counts {
            io,
            read_iops: per_s(io.reads_count),
            write_iops: per_s(io.writes_count),
            bytes_per_s: per_s(io.bytes_read + io.bytes_written),
            cpu: interval.cpu,
            cpu_window_s: length_s,
            cpu_count,
        });
        IntervalReport {
            t_s: (interval.start + interval.length).as_secs_f64(),
            start_s: interval.start.as_secs_f64(),
            duration_s: length_s,
            outstanding_ios: interval.outstanding_ios,
            figures,
        }
    }
}

/// The columns every table of figures shows (text table and HTML alike), in order.
pub const FIGURE_COLUMNS: [&str; 10] = ["IOPS", "MB/s", "p50 µs", "p90 µs", "p99 µs", "p99.9 µs", "max µs", "CPU user %", "CPU sys %", "CPU µs/IO"];

impl Figures {
    /// The figures as the cells of `FIGURE_COLUMNS`, formatted once for every printer.
    pub fn cells(&self) -> [String; 10] {
        let l = &self.latency_us;
        [
            format!("{:.0}", self.iops),
            format!("{:.1}", self.mb_per_s),
            format!("{:.1}", l.p50),
            format!("{:.1}", l.p90),
            format!("{:.1}", l.p99),
            format!("{:.1}", l.p99_9),
            format!("{:.1}", l.max),
            format!("{:.1}", self.cpu_user_pct),
            format!("{:.1}", self.cpu_sys_pct),
            format!("{:.2}", self.cpu_us_per_io),
        ]
    }

    /// Figures of a group of threads. Rates add up over threads (each ran its own window);
    /// `cpu` is the group's CPU time over `cpu_window_s`.
    pub fn from_threads(threads: &[&ThreadOutcome], cpu: CpuTimes, cpu_window_s: f64, cpu_count: u32) -> Figures {
        let mut io = IoCounts::new();
        let (mut read_iops, mut write_iops, mut bytes_per_s) = (0.0, 0.0, 0.0);
        for t in threads {
            io.merge(&t.io);
            let s = t.elapsed.as_secs_f64();
            if s > 0.0 {
                read_iops += t.io.reads_count as f64 / s;
                write_iops += t.io.writes_count as f64 / s;
                bytes_per_s += (t.io.bytes_read + t.io.bytes_written) as f64 / s;
            }
        }
        Figures::from_counts(Counts {
            io: &io,
            read_iops,
            write_iops,
            bytes_per_s,
            cpu,
            cpu_window_s,
            cpu_count,
        })
    }

    fn from_counts(c: Counts<'_>) -> Figures {
        let latency = c.io.latency();
        let ios_count = c.io.reads_count + c.io.writes_count;
        let cpu_capacity_us = c.cpu_window_s * 1e6 * c.cpu_count.max(1) as f64;
        let pct = |us: u64| if cpu_capacity_us > 0.0 { us as f64 * 100.0 / cpu_capacity_us } else { 0.0 };
        Figures {
            ios_count,
            reads_count: c.io.reads_count,
            writes_count: c.io.writes_count,
            bytes_read: c.io.bytes_read,
            bytes_written: c.io.bytes_written,
            iops: c.read_iops + c.write_iops,
            read_iops: c.read_iops,
            write_iops: c.write_iops,
            mb_per_s: c.bytes_per_s / (1u64 << 20) as f64,
            latency_us: latency.summary(),
            read_latency_us: c.io.read_latency.summary(),
            write_latency_us: c.io.write_latency.summary(),
            latency_ms_buckets: latency.ms_bucket_pcts(),
            cpu_user_pct: pct(c.cpu.user_us),
            cpu_sys_pct: pct(c.cpu.sys_us),
            cpu_us_per_io: if ios_count == 0 { 0.0 } else { c.cpu.total_us() as f64 / ios_count as f64 },
        }
    }
}

struct Counts<'a> {
    io: &'a IoCounts,
    read_iops: f64,
    write_iops: f64,
    bytes_per_s: f64,
    cpu: CpuTimes,
    cpu_window_s: f64,
    cpu_count: u32,
}

impl Report {
    /// The run's settings in one line (pattern, blocks, depth, threads, processes, direct,
    /// durable writes, engine, window): the summary every printer starts with.
    pub fn settings(&self) -> String {
        format!(
            "{} {}{}, {} blocks, {} outstanding per thread, {} thread(s){}, {}{}, engine {}, {:.1} s measured after {:.1} s warm-up",
            self.pattern,
            self.rw,
            if self.rw == "mix" { format!(" ({}% writes)", self.write_pct) } else { String::new() },
            crate::size::format_size_bytes(self.block_size_bytes as u64),
            self.queue_depth,
            self.threads_count,
            if self.processes > 1 { format!(" in {} processes", self.processes) } else { String::new() },
            if self.direct { "O_DIRECT" } else { "buffered" },
            if self.sync { ", every write durable (O_DSYNC)" } else { "" },
            self.engine,
            self.duration_s,
            self.warmup_s,
        )
    }

    pub fn new(job: &JobSpec, targets: &[PreparedTarget], outcome: &RunOutcome) -> Report {
        let window_s = outcome.window.as_secs_f64();
        let all: Vec<&ThreadOutcome> = outcome.threads.iter().collect();
        let figures = Figures::from_threads(&all, outcome.process_cpu, window_s, outcome.cpu_count);
        let target_reports = targets
            .iter()
            .enumerate()
            .map(|(i, prepared)| {
                let mine: Vec<&ThreadOutcome> = outcome.threads.iter().filter(|t| t.target_index == i).collect();
                // A target's CPU is its threads' own time (engine workers are not counted here).
                let cpu = mine.iter().fold(CpuTimes::default(), |a, t| CpuTimes {
                    user_us: a.user_us + t.cpu.user_us,
                    sys_us: a.sys_us + t.cpu.sys_us,
                });
                let threads = mine
                    .iter()
                    .map(|t| ThreadReport {
                        thread: t.thread_index,
                        elapsed_s: t.elapsed.as_secs_f64(),
                        figures: Figures::from_threads(&[t], t.cpu, t.elapsed.as_secs_f64(), outcome.cpu_count),
                    })
                    .collect();
                TargetReport {
                    path: prepared.path.display().to_string(),
                    size_bytes: prepared.size_bytes,
                    created_by_flashscan: prepared.ours,
                    figures: Figures::from_threads(&mine, cpu, window_s, outcome.cpu_count),
                    threads,
                }
            })
            .collect();
        Report {
            engine: outcome.engine_name.to_string(),
            pattern: job.pattern.name().to_string(),
            rw: job.read_write.name().to_string(),
            write_pct: job.read_write.write_pct(),
            block_size_bytes: job.block_size_bytes,
            queue_depth: job.queue_depth,
            threads_count: job.targets.iter().map(|t| t.threads).sum(),
            direct: job.direct,
            duration_s: window_s,
            warmup_s: job.warmup.as_secs_f64(),
            seed: job.seed,
            cpu_count: outcome.cpu_count,
            sync: job.sync,
            processes: job.processes,
            figures,
            targets: target_reports,
            intervals: outcome.intervals.iter().map(|i| IntervalReport::new(i, outcome.cpu_count)).collect(),
            job: JobFile::from_spec(job, Some(targets), None),
        }
    }

    /// Marks the report as a point of a sweep over `axis` (its job then replays as one).
    pub fn in_sweep(mut self, axis: SweepAxis) -> Report {
        self.job.sweep = Some(axis);
        self
    }

    /// The value a sweep over `axis` varied at this point.
    pub fn swept_value(&self, axis: SweepAxis) -> u32 {
        match axis {
            SweepAxis::Matrix | SweepAxis::Qd => self.queue_depth,
            SweepAxis::Threads => self.job.targets.first().map(|t| t.threads).unwrap_or(1),
            SweepAxis::Processes => self.processes,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flashscan_measure::histogram::LatencyHistogram;
    use std::time::Duration;

    fn thread(target_index: usize, reads: u64, latency_us: u64) -> ThreadOutcome {
        let mut h = LatencyHistogram::new();
        for _ in 0..reads {
            h.record(latency_us * 1000);
        }
        ThreadOutcome {
            target_index,
            thread_index: 0,
            engine_name: "null".into(),
            io: IoCounts { reads_count: reads, bytes_read: reads * 8192, read_latency: h, ..IoCounts::new() },
            cpu: CpuTimes { user_us: 100_000, sys_us: 300_000 },
            elapsed: Duration::from_secs(2),
        }
    }

    #[test]
    fn figures_add_up_over_threads() {
        let a = thread(0, 2000, 100);
        let b = thread(0, 1000, 2500);
        let f = Figures::from_threads(&[&a, &b], CpuTimes { user_us: 500_000, sys_us: 500_000 }, 2.0, 2);
        assert_eq!(f.ios_count, 3000);
        assert!((f.iops - 1500.0).abs() < 1e-9);
        assert!((f.mb_per_s - 1500.0 * 8192.0 / 1048576.0).abs() < 1e-9);
        // 1 s of CPU over 2 s on 2 CPUs = 25 % of the machine.
        assert!((f.cpu_user_pct - 12.5).abs() < 1e-9);
        assert!((f.cpu_sys_pct - 12.5).abs() < 1e-9);
        assert!((f.cpu_us_per_io - 1_000_000.0 / 3000.0).abs() < 1e-9);
        assert!((f.latency_ms_buckets[0] - 200.0 / 3.0).abs() < 1e-9);
        assert!((f.latency_ms_buckets[2] - 100.0 / 3.0).abs() < 1e-9);
        assert!((f.latency_us.p50 - 100.0).abs() < 0.1);
        assert!((f.latency_us.max - 2500.0).abs() < 1e-9);
    }

    #[test]
    fn interval_figures_are_rates_over_the_interval() {
        let mut i = IntervalOutcome::empty(3, Duration::from_millis(1500), Duration::from_millis(500));
        for _ in 0..100 {
            i.io.read_latency.record(200_000);
        }
        i.io.reads_count = 100;
        i.io.bytes_read = 100 * 4096;
        let r = IntervalReport::new(&i, 2);
        assert!((r.t_s - 2.0).abs() < 1e-9 && (r.start_s - 1.5).abs() < 1e-9);
        assert!((r.figures.iops - 200.0).abs() < 1e-9);
        assert!((r.figures.latency_us.p99 - 200.0).abs() < 0.3);
    }
}
