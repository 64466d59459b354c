//! Key lookups: index seeks, then the rows fetched from the heap. Seeks first turn every key
//! into locators; the locators are sorted and grouped into read units (one heap page, or the
//! 64 KB extent around it); then the units are fetched — one read at a time below the
//! prefetch threshold, as a window of asynchronous reads at or above it — and each row is
//! handed to the caller's sink as its page arrives ([`fetch`]). [`stats`]: what a lookup
//! reports.

pub mod fetch;
pub mod plan;
pub mod session;
pub mod stats;

pub use session::{KeyQuery, LookupOptions, LookupSession};
pub use stats::LookupStats;
