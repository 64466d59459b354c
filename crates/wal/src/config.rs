//! How a log is set up: its directory, segment size, and the I/O engine its writer uses.

use std::path::PathBuf;
use std::sync::Arc;

use flashscan_io::{EngineConfig, FileSet, IoEngine, IoError};

use crate::error::WalError;
use crate::limits::{
    BLOCK_SIZE_BYTES, FLUSHES_IN_FLIGHT_DEFAULT, FLUSHES_IN_FLIGHT_MAX, LOG_BUFFER_BYTES_MAX, SEGMENT_SIZE_BYTES_DEFAULT, SEGMENT_SIZE_BYTES_MAX, SEGMENT_SIZE_BYTES_MIN,
    WRITE_CHUNK_BYTES,
};

/// Opens the I/O engine the log writer uses for one segment file (a set of one file).
/// Tests pass one that builds a simulated engine on a shared `SimDisk`.
pub type EngineFactory = Arc<dyn Fn(Arc<FileSet>) -> Result<Box<dyn IoEngine>, IoError> + Send + Sync>;

/// The engine configuration the log writer needs: one request at a time (a flush is one
/// sequential write, then one durable flush), one slot of `WRITE_CHUNK_BYTES`.
pub fn writer_engine_config() -> EngineConfig {
    EngineConfig::for_depth(1, WRITE_CHUNK_BYTES)
}

/// The real engine: psync, which at depth 1 runs the write inline on the log writer thread
/// (no hand-off to a worker or a ring: the writer waits for the write anyway, then for the
/// fdatasync).
pub fn psync_engine_factory() -> EngineFactory {
    Arc::new(|files| Ok(Box::new(flashscan_io::psync::PsyncEngine::new(files, writer_engine_config())?) as Box<dyn IoEngine>))
}

/// How a log flush is made durable (PostgreSQL's `wal_sync_method` offers the same two on
/// Linux, and defaults to `fdatasync`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyncMethod {
    /// Write, then fdatasync: two system calls per flush. The default: measured as fast as
    /// `OpenDatasync` on the VM's disk (no FUA: the kernel follows an O_DSYNC write with
    /// the same cache flush an fdatasync sends), docs/benchmarks.md, server6.
    Fdatasync,
    /// Segments opened O_DSYNC: each write returns once durable, no fdatasync (one system
    /// call; a device with FUA can make it one command).
    OpenDatasync,
}

impl SyncMethod {
    /// The environment variable that picks the method (`fdatasync` or `open_datasync`,
    /// PostgreSQL's spellings), to compare the two on a device without rebuilding.
    pub const ENV: &'static str = "FLASHSCAN_WAL_SYNC";

    /// The method `FLASHSCAN_WAL_SYNC` names (unset: `Fdatasync`), or why its value is refused.
    pub fn from_env() -> Result<SyncMethod, String> {
        match std::env::var(Self::ENV) {
            Err(std::env::VarError::NotPresent) => Ok(SyncMethod::Fdatasync),
            Ok(v) if v == "fdatasync" => Ok(SyncMethod::Fdatasync),
            Ok(v) if v == "open_datasync" => Ok(SyncMethod::OpenDatasync),
            Ok(v) => Err(format!("{}={v:?}: expected fdatasync or open_datasync", Self::ENV)),
            Err(e) => Err(format!("{}: {e}", Self::ENV)),
        }
    }
}

/// The environment variable that sets how many log flushes may be in flight at once
/// (1..=[`FLUSHES_IN_FLIGHT_MAX`]; unset: [`FLUSHES_IN_FLIGHT_DEFAULT`]): 1 is the log of
/// one flush at a time, for comparing on a device without rebuilding.
pub const FLUSHES_IN_FLIGHT_ENV: &str = "FLASHSCAN_WAL_FLUSHES_IN_FLIGHT";

/// The flushes in flight `FLASHSCAN_WAL_FLUSHES_IN_FLIGHT` names, or why its value is refused.
pub fn flushes_in_flight_from_env() -> Result<usize, String> {
    match std::env::var(FLUSHES_IN_FLIGHT_ENV) {
        Err(std::env::VarError::NotPresent) => Ok(FLUSHES_IN_FLIGHT_DEFAULT),
        Ok(v) => match v.parse::<usize>() {
            Ok(n) if (1..=FLUSHES_IN_FLIGHT_MAX).contains(&n) => Ok(n),
            _ => Err(format!("{FLUSHES_IN_FLIGHT_ENV}={v:?}: expected a count of flushes, 1..={FLUSHES_IN_FLIGHT_MAX}")),
        },
        Err(e) => Err(format!("{FLUSHES_IN_FLIGHT_ENV}: {e}")),
    }
}

#[derive(Clone)]
pub struct WalConfig {
    /// The log's directory: DB/wal or a --wal-dir on another volume.
    pub dir: PathBuf,
    /// Used when the log is created; an existing log keeps the size in its control file.
    pub segment_size_bytes: u64,
    /// Open segments with O_DIRECT (falling back to buffered I/O, with a notice in
    /// `Wal::notices`, where the file system refuses it).
    pub direct_io: bool,
    /// Appended bytes waiting for the writer before appenders block.
    pub log_buffer_bytes_max: usize,
    pub engine_factory: EngineFactory,
    /// How a flush is made durable; `WalConfig::new` takes it from `FLASHSCAN_WAL_SYNC`
    /// (a value it cannot read is refused by `validate`, so the log does not open).
    pub sync_method: Result<SyncMethod, String>,
    /// Log flushes in flight at most (writer.rs); `WalConfig::new` takes it from
    /// [`FLUSHES_IN_FLIGHT_ENV`] (refused like `sync_method` when unreadable).
    pub flushes_in_flight_max: Result<usize, String>,
}

impl WalConfig {
    pub fn new(dir: impl Into<PathBuf>) -> WalConfig {
        WalConfig {
            dir: dir.into(),
            segment_size_bytes: SEGMENT_SIZE_BYTES_DEFAULT,
            direct_io: true,
            log_buffer_bytes_max: LOG_BUFFER_BYTES_MAX,
            engine_factory: psync_engine_factory(),
            sync_method: SyncMethod::from_env(),
            flushes_in_flight_max: flushes_in_flight_from_env(),
        }
    }

    pub fn validate(&self) -> Result<(), WalError> {
        check_segment_size(self.segment_size_bytes)?;
        if let Err(problem) = &self.sync_method {
            return Err(WalError::Config(problem.clone()));
        }
        match &self.flushes_in_flight_max {
            Err(problem) => return Err(WalError::Config(problem.clone())),
            Ok(n) if !(1..=FLUSHES_IN_FLIGHT_MAX).contains(n) => {
                return Err(WalError::Config(format!("{n} log flushes in flight: use 1 to {FLUSHES_IN_FLIGHT_MAX}")));
            }
            Ok(_) => {}
        }
        if self.log_buffer_bytes_max < 2 * BLOCK_SIZE_BYTES || self.log_buffer_bytes_max > LOG_BUFFER_BYTES_MAX {
            return Err(WalError::Config(format!(
                "log buffer of {} bytes outside {}..={LOG_BUFFER_BYTES_MAX}",
                self.log_buffer_bytes_max,
                2 * BLOCK_SIZE_BYTES
            )));
        }
        Ok(())
    }
}

/// Why a segment size is refused (`None`: it is a multiple of the block size within the
/// limits): the one check, for the configuration and for a control file read back.
pub fn segment_size_problem(bytes: u64) -> Option<String> {
    if !(SEGMENT_SIZE_BYTES_MIN..=SEGMENT_SIZE_BYTES_MAX).contains(&bytes) || !bytes.is_multiple_of(BLOCK_SIZE_BYTES as u64) {
        return Some(format!("segment size {bytes} bytes: must be a multiple of {BLOCK_SIZE_BYTES} within {SEGMENT_SIZE_BYTES_MIN}..={SEGMENT_SIZE_BYTES_MAX}"));
    }
    None
}

pub fn check_segment_size(bytes: u64) -> Result<(), WalError> {
    match segment_size_problem(bytes) {
        Some(problem) => Err(WalError::Config(problem)),
        None => Ok(()),
    }
}
