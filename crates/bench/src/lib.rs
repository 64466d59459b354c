//! Benchmark drivers: each `flashscan bench NAME` is one module here, built on the engine
//! crates' public API and measured with `flashscan-measure`. Peer comparisons (DuckDB,
//! SQLite, PostgreSQL, fio) live in the repository's `bench/` scripts, which call these.

pub mod inserts;
pub mod checkpoint;
