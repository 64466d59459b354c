//! When a commit is acknowledged: after its log flush (strict, the default) or before it
//! (delayed: SQL Server's `DELAYED_DURABILITY`, PostgreSQL's `synchronous_commit = off`).
//!
//! **Delayed durability's contract.** A delayed commit is acknowledged once its records and
//! its commit record are appended; a flush covering it starts at most
//! [`DELAYED_FLUSH_INTERVAL_MS_MAX`] after its acknowledgement, or as soon as
//! [`DELAYED_FLUSH_BYTES_MAX`] are waiting, whichever comes first — started by the log
//! writer's timer or by the first delayed commit that finds it due — unless every flush
//! slot is busy, in which case right after the flush in flight (a strict commit's own flush,
//! which covers every earlier byte, may come sooner). So a crash (kill -9, power loss) or a
//! log I/O error may lose the delayed commits acknowledged in the last interval (10 ms, plus
//! the flush in flight and its own write and fdatasync, plus the time the CPU takes to run
//! the flusher on a loaded machine: `WalStats::delayed_unflushed_us_max` measures the whole
//! window), and only those:
//! - never a torn or half-applied transaction: recovery replays a transaction only when
//!   its commit record is durable, with every record before it (durability is published
//!   in LSN order, writer.rs);
//! - never anything before an acknowledged durable (strict) commit: its flush covers every
//!   byte before it, delayed commits included;
//! - never a row a checkpoint wrote: `Wal::checkpoint_begin` makes the log durable up to
//!   the redo point before any page holding those rows is written.
//!
//! Rows of a delayed commit are visible to readers at once (as PostgreSQL shows an
//! asynchronously committed row): visibility follows log order, so whatever a reader sees
//! was appended before anything it then commits, and a strict commit made after reading a
//! delayed row is durable only once that row is.

use std::fmt;

/// How a commit becomes acknowledged (see the module comment).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Durability {
    /// Acknowledged once its commit record is durable (write + fdatasync).
    #[default]
    Strict,
    /// Acknowledged once appended; durable within the bounded delay.
    Delayed,
}

/// A delayed commit's flush starts at most this long after it is acknowledged: SQL Server's
/// delayed durability has no time bound of its own, PostgreSQL's `wal_writer_delay` is
/// 200 ms by default; 10 ms keeps the loss window well under what a person notices and
/// still lets hundreds of one-row commits share one flush.
pub const DELAYED_FLUSH_INTERVAL_MS_MAX: u64 = 10;
/// A delayed flush starts as soon as this many log bytes wait for it: SQL Server's log
/// block of 60 KB, the size its delayed durability flushes at.
pub const DELAYED_FLUSH_BYTES_MAX: u64 = 60 * 1024;

impl Durability {
    /// `strict` or `delayed` (the bench's `--durability` spellings).
    pub fn from_name(name: &str) -> Option<Durability> {
        match name {
            "strict" => Some(Durability::Strict),
            "delayed" => Some(Durability::Delayed),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Durability::Strict => "strict",
            Durability::Delayed => "delayed",
        }
    }
}

impl fmt::Display for Durability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
