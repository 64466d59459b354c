//! flashscan's I/O layer.
//!
//! Everything that touches a file descriptor on the hot path goes through [`IoEngine`]:
//! the workbench, the table scans and the key lookups all use the same engines, so the
//! numbers `flashscan io` reports are the numbers the engine can reach.
//!
//! One concept per file, one file per engine (in the manner of fio's `engines/`):
//! - [`engine`]: the trait, requests, completions, engine selection and fallback;
//! - [`uring`]: io_uring with batched submissions, registered files and buffers, and
//!   cooperative (or, for single-thread engines, deferred) completion work;
//! - [`psync`]: portable pread/pwrite, inline at depth 1 and on a thread pool above it;
//! - [`null`]: completes every request at once, to measure the harness's own overhead;
//! - [`sim`]: injects errors, short reads and latency, for tests of the layers above;
//! - [`request_queue`]: slots, typed completions and drain-on-drop over any engine: the
//!   only way the layers above issue I/O (no caller keeps its own slot loop);
//! - [`buffer_arena`]: the aligned memory every request reads into or writes from;
//! - [`file_lock`]: the database's `flock`s, taken past a release still in flight;
//! - [`file_set`]: files over one or more directories (volumes), O_DIRECT alignment;
//! - [`file_stats`]: per-file counters, the `dm_io_virtual_file_stats` of flashscan.

pub mod buffer_arena;
pub mod engine;
pub mod error;
pub mod file_lock;
pub mod file_set;
pub mod file_stats;
pub mod limits;
pub mod null;
pub mod psync;
pub mod request_queue;
pub mod sim;
pub mod uring;

pub use buffer_arena::BufferArena;
pub use engine::{open_engine, EngineConfig, EngineKind, IoCompletion, IoEngine, IoOp, IoRequest};
pub use error::IoError;
pub use file_set::{FileSet, OpenFile, OpenMode};
pub use file_stats::{process_file_stats, process_file_stats_snapshot, FileStats, FileStatsSnapshot};
pub use request_queue::{Completed, QueueStats, RequestQueue};
