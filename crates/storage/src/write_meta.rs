//! What the catalog records for a database that takes writes (`flashscan init`): which
//! write-ahead log is its own, where recovery starts, and the ids its log records name
//! tables by. The write path itself lives in `flashscan-write`; this is only its part of
//! the one atomic catalog commit, so page counts and the redo point always change together.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WriteMeta {
    /// The database's random id (hex u128), also in the log's control file: a log of
    /// another database is refused.
    pub database_id: String,
    /// The log directory: relative to the database directory, or absolute (`--wal-dir`).
    pub wal_dir: String,
    /// Volumes new data files go to (the database directory when empty).
    pub volumes: Vec<String>,
    /// Recovery replays committed inserts from this log position on; rows logged before it
    /// are in the tables' pages (the last checkpoint wrote them in this same commit).
    pub redo_lsn: u64,
    /// Never reused, so rows logged for a dropped table never land in a new one.
    pub next_table_id: u32,
    /// The id log records carry for each table that has one (assigned at CREATE TABLE or
    /// at the first INSERT into a loaded table).
    pub table_ids: BTreeMap<String, u32>,
}
