//! How flashscan measures, in one place: the process CPU clock every figure uses, and the
//! latency histogram behind every percentile. This crate depends on no engine crate, so
//! the engine reports (exec), the workbench, the server's sampler and the benchmark drivers
//! (crates/bench) all count with the same clock and the same histogram.

pub mod cpu;
pub mod histogram;

pub use cpu::CpuTime;
pub use histogram::{LatencyHistogram, LatencySummary};
