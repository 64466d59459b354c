//! How flashscan measures, in one place: the process CPU clock every figure uses, the
//! latency histogram behind every percentile, medians over rounds, and the CSV writer. This crate depends on no engine crate, so
//! the engine reports (exec), the workbench, the server's sampler and the benchmark drivers
//! (crates/bench) all count with the same clock and the same histogram.

pub mod chart;
pub mod cpu;
pub mod csv;
pub mod histogram;
pub mod stats;

pub use cpu::CpuTime;
pub use histogram::{LatencyHistogram, LatencySummary};
