//! flashscan-index: B+tree indexes over heap tables, and key lookups that switch from one
//! read at a time to asynchronous prefetch (the I/O cost bench that measures them is in
//! crates/bench).
//!
//! Data flow of a lookup: keys → [`btree`] seeks (nodes through the buffer pool) → row
//! locators → [`lookup`] plan (pages, read units) → reads (sync or a prefetch window) →
//! rows out of verified heap pages (storage's `heap::heap_page::HeapPageRows`).
//!
//! - [`key`]: order-preserving key encoding; [`locator`]: row locators;
//! - [`btree`]: node format, bulk build, seeks and ranges;
//! - [`create`]: `index create` (scan, sort, build, register); [`catalog`]: the indexes in `catalog.json`;
//! - [`table_files`]: the `FileSet` of a table and its index;
//! - [`lookup`]: sessions, plans, the fetch loop, stats;
//! - [`persisted_stats`]: buffer counters kept across commands.

pub mod btree;
pub mod catalog;
pub mod create;
pub mod error;
pub mod key;
pub mod locator;
pub mod lookup;
pub mod persisted_stats;
pub mod table_files;
pub mod verify;

pub use catalog::{IndexCatalog, IndexMeta};
pub use create::{create_index, drop_index, CreateIndex};
pub use error::IndexError;
pub use key::KeySchema;
pub use locator::RowLocator;
pub use lookup::{KeyQuery, LookupOptions, LookupSession, LookupStats};
pub use persisted_stats::PersistedStats;
