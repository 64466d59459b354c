//! flashscan's buffer pool: a fixed budget of 8 KB frames allocated once, a sharded page
//! table, a shared/exclusive latch and a pin count per frame, clock eviction that never
//! touches a pinned frame, scan rings that keep large scans from flushing the warm set,
//! and counters (hits, misses, reads, evictions, latch and I/O waits).
//!
//! The pool knows nothing of page formats: a miss hands the caller a [`LoadTicket`] (the
//! frame, exclusively latched and already in the page table, so concurrent readers of the
//! same page wait for it instead of reading it twice); the caller fills it — one
//! synchronous read ([`BufferPool::read_page`]) or a batch of asynchronous reads — and
//! completes it with its own verification (checksum, page id). A failed verification
//! takes the page out of the table again and surfaces as the caller's error.
//!
//! One concept per file:
//! - [`limits`]: named bounds; [`error`]: what fails;
//! - [`page_key`]: which page (file index in a `FileSet`, page number);
//! - [`frame_memory`]: the one aligned allocation holding every frame;
//! - [`frame`]: per-frame state (latch, pins, reference bit, key);
//! - [`page_table`]: key → frame, sharded;
//! - [`counters`]: the pool's counters and their snapshot;
//! - [`guard`]: `PageGuard` (a pinned, shared-latched page) and `LoadTicket` (a miss);
//! - [`pool`]: lookup, miss handling, clock eviction, clear, the process's pool;
//! - [`ring`]: scan rings of 8 KB frames (page-at-a-time scans through the pool);
//! - [`file_registry`]: one id per table or index file for the whole process;
//! - [`lsn`]: log sequence numbers and the WAL rule's hook;
//! - [`dirty`]: dirty pages (sorted set, overlay on scans, `write_dirty` after the WAL rule);
//! - [`page_reader`]: the random path's request queue (lookups, index seeks);
//! - [`stream`]: the streaming path (scan read-ahead into extent rings);
//! - [`stream_activity`]: what the process's scans read now (the checkpoint paces on it).
//!
//! This crate is the one place table and index pages are read: nothing above it opens a
//! table or index file to read it with its own pread (see docs/architecture.md).

pub mod counters;
pub mod dirty;
pub mod error;
pub mod file_registry;
pub mod lsn;
pub mod page_reader;
pub mod stream;
pub mod stream_activity;
pub mod frame;
pub mod frame_memory;
pub mod guard;
pub mod limits;
pub mod page_key;
pub mod page_table;
pub mod pool;
pub mod ring;

pub use counters::{BufferCounters, BufferCountersSnapshot};
pub use error::BufferError;
pub use dirty::{DirtyWriteFigures, DirtyWriteOptions};
pub use guard::{Fetch, LoadTicket, PageGuard, PageGuardMut};
pub use lsn::{Lsn, WalRule};
pub use page_reader::PageReader;
pub use stream::{Extent, ScanStream, StreamConfig, StreamStats};
pub use stream_activity::{scans_active, stream_activity, StreamActivity};
pub use limits::{FRAME_SIZE_BYTES, POOL_FRAMES_MIN};
pub use page_key::PageKey;
pub use pool::BufferPool;
pub use ring::ScanRing;
