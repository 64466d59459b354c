//! Buffer pool counters kept across commands: every command that runs queries through a
//! pool adds its counters to `DB/buffer_stats.json` when it ends, and `flashscan stats DB`
//! shows the sum since the first run or since `--reset`. (Each command is its own
//! process, so "since start" means since the stats file was started.) The read, add and
//! atomic replace run under `buffer_stats.lock` (flock, its own lock so lookups never wait
//! for a load), so two commands ending at the same moment both count. Only in a database
//! directory; the file is read with a size cap and never through a link.

use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use flashscan_buffer::BufferCountersSnapshot;
use serde::{Deserialize, Serialize};

use std::os::unix::io::AsRawFd;

use flashscan_storage::fs_safe::{open_lock_file, read_capped, replace_file_atomic};
use flashscan_storage::Catalog;

use crate::error::IndexError;

pub const STATS_FILE_NAME: &str = "buffer_stats.json";
pub const STATS_LOCK_FILE_NAME: &str = "buffer_stats.lock";
/// The stats file is a few hundred bytes; anything past this is not ours.
const STATS_BYTES_MAX: u64 = 1 << 20;

/// Held while the stats are read, added to and replaced.
struct StatsLock {
    _file: std::fs::File,
}

fn lock_stats(dir: &Path) -> Result<StatsLock, IndexError> {
    require_database(dir)?;
    flashscan_storage::fs_safe::check_real_dir(dir)?;
    let path = dir.join(STATS_LOCK_FILE_NAME);
    let file = open_lock_file(&path)?;
    loop {
        // SAFETY: flock on a descriptor we own.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) } == 0 {
            return Ok(StatsLock { _file: file });
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(IndexError::file("locking", &path, e));
        }
    }
}

/// Stats live only in a database: a directory without a catalog is refused, never written.
fn require_database(dir: &Path) -> Result<(), IndexError> {
    if !Catalog::exists(dir) {
        return Err(flashscan_storage::StorageError::NotADatabase { dir: dir.to_path_buf() }.into());
    }
    Ok(())
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PersistedStats {
    pub since_unix_seconds: u64,
    pub runs_count: u64,
    /// Frames of the largest pool a run used.
    pub pool_bytes_max: u64,
    pub counters: BufferCountersSnapshot,
}

fn now_unix_seconds() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}

impl PersistedStats {
    pub fn read(dir: &Path) -> Result<PersistedStats, IndexError> {
        require_database(dir)?;
        let path = dir.join(STATS_FILE_NAME);
        match read_capped(&path, STATS_BYTES_MAX)? {
            Some(bytes) => serde_json::from_slice(&bytes).map_err(|e| IndexError::CatalogCorrupt { path, reason: e.to_string() }),
            None => Ok(PersistedStats { since_unix_seconds: now_unix_seconds(), ..Default::default() }),
        }
    }

    /// Adds one run's counters.
    pub fn record(dir: &Path, counters: &BufferCountersSnapshot, pool_bytes: u64) -> Result<(), IndexError> {
        let _lock = lock_stats(dir)?;
        let mut stats = Self::read(dir)?;
        stats.runs_count += 1;
        stats.pool_bytes_max = stats.pool_bytes_max.max(pool_bytes);
        stats.counters = stats.counters.plus(counters);
        stats.write(dir)
    }

    pub fn reset(dir: &Path) -> Result<PersistedStats, IndexError> {
        let _lock = lock_stats(dir)?;
        let stats = PersistedStats { since_unix_seconds: now_unix_seconds(), ..Default::default() };
        stats.write(dir)?;
        Ok(stats)
    }

    fn write(&self, dir: &Path) -> Result<(), IndexError> {
        let bytes = serde_json::to_vec_pretty(self).map_err(|e| IndexError::InvalidArgument(format!("serializing stats: {e}")))?;
        Ok(replace_file_atomic(dir, STATS_FILE_NAME, &bytes)?)
    }
}
