//! Buffer pool counters kept across commands: every command that runs queries through a
//! pool adds its counters to `DB/buffer_stats.json` when it ends, and `flashscan stats DB`
//! shows the sum since the first run or since `--reset`. (Each command is its own
//! process, so "since start" means since the stats file was started.) Written atomically;
//! two commands ending at the same moment may lose one's counts (last writer wins).

use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use flashscan_buffer::BufferCountersSnapshot;
use serde::{Deserialize, Serialize};

use crate::catalog::write_file_atomic;
use crate::error::IndexError;

pub const STATS_FILE_NAME: &str = "buffer_stats.json";

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
        let path = dir.join(STATS_FILE_NAME);
        match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| IndexError::CatalogCorrupt { path, reason: e.to_string() }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(PersistedStats { since_unix_seconds: now_unix_seconds(), ..Default::default() }),
            Err(e) => Err(IndexError::file("reading", &path, e)),
        }
    }

    /// Adds one run's counters.
    pub fn record(dir: &Path, counters: &BufferCountersSnapshot, pool_bytes: u64) -> Result<(), IndexError> {
        let mut stats = Self::read(dir)?;
        stats.runs_count += 1;
        stats.pool_bytes_max = stats.pool_bytes_max.max(pool_bytes);
        stats.counters = stats.counters.plus(counters);
        stats.write(dir)
    }

    pub fn reset(dir: &Path) -> Result<PersistedStats, IndexError> {
        let stats = PersistedStats { since_unix_seconds: now_unix_seconds(), ..Default::default() };
        stats.write(dir)?;
        Ok(stats)
    }

    fn write(&self, dir: &Path) -> Result<(), IndexError> {
        let bytes = serde_json::to_vec_pretty(self).map_err(|e| IndexError::InvalidArgument(format!("serializing stats: {e}")))?;
        write_file_atomic(dir, STATS_FILE_NAME, &bytes)
    }
}
