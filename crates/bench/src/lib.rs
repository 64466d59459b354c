//! Benchmark drivers: each `flashscan bench NAME` is one module here, built on the engine
//! crates' public API and measured with `flashscan-measure`. Peer comparisons (DuckDB,
//! SQLite, PostgreSQL, fio) live in the repository's `bench/` scripts, which call these.
//!
//! - [`compression`]: `bench compression`, seed 001's formats table;
//! - [`costs`]: `bench costs`, seed 002's CPU cost of I/O (scans, evictions, lookups);
//! - [`inserts`]: `bench inserts`, singleton commits from N threads (issue 11);
//! - [`checkpoint`]: `bench checkpoint`, seed 003's scan beside a checkpoint;
//! - [`synth`]: synthetic tables of N rows per page, written through the real loader;
//! - [`chart`]: the SVG charts of these reports; [`table`]: their text tables and CSV.

pub mod chart;
pub mod checkpoint;
pub mod compression;
pub mod costs;
pub mod error;
pub mod inserts;
pub mod synth;
pub mod table;

pub use error::BenchError;
