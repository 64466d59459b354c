//! How a log is set up: its directory, segment size, and the I/O engine its writer uses.

use std::path::PathBuf;
use std::sync::Arc;

use flashscan_io::{EngineConfig, FileSet, IoEngine, IoError};

use crate::error::WalError;
use crate::limits::{
    BLOCK_SIZE_BYTES, LOG_BUFFER_BYTES_MAX, SEGMENT_SIZE_BYTES_DEFAULT, SEGMENT_SIZE_BYTES_MAX, SEGMENT_SIZE_BYTES_MIN,
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

/// The environment variable of an experiment: `FLASHSCAN_WAL_COMMIT_DELAY_US=N` makes a
/// committer about to lead a flush wait N µs first when other transactions are open, so
/// commits arriving meanwhile share the flush (PostgreSQL's `commit_delay`, with
/// [`COMMIT_SIBLINGS`]). Unset or 0: no wait (the default).
pub const COMMIT_DELAY_ENV: &str = "FLASHSCAN_WAL_COMMIT_DELAY_US";
/// Open transactions (the leader's own included: begun, not yet durable) a leader needs to
/// see before it waits: alone, waiting only adds latency. PostgreSQL's `commit_siblings`
/// defaults to 5 other backends; 3 here, so that 8 clients — where a transaction is open
/// only from its log append to its flush — reach it at all.
pub const COMMIT_SIBLINGS: u64 = 3;
/// A bound on the commit delay: PostgreSQL's own maximum, 100 ms.
pub const COMMIT_DELAY_US_MAX: u64 = 100_000;

fn commit_delay_from_env() -> Result<u64, String> {
    match std::env::var(COMMIT_DELAY_ENV) {
        Err(std::env::VarError::NotPresent) => Ok(0),
        Ok(v) => match v.parse::<u64>() {
            Ok(us) if us <= COMMIT_DELAY_US_MAX => Ok(us),
            _ => Err(format!("{COMMIT_DELAY_ENV}={v:?}: expected microseconds, 0..={COMMIT_DELAY_US_MAX}")),
        },
        Err(e) => Err(format!("{COMMIT_DELAY_ENV}: {e}")),
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
    /// See [`COMMIT_DELAY_ENV`]; `WalConfig::new` takes it from there (refused like
    /// `sync_method` when unreadable).
    pub commit_delay_us: Result<u64, String>,
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
            commit_delay_us: commit_delay_from_env(),
        }
    }

    pub fn validate(&self) -> Result<(), WalError> {
        check_segment_size(self.segment_size_bytes)?;
        if let Err(problem) = &self.sync_method {
            return Err(WalError::Config(problem.clone()));
        }
        if let Err(problem) = &self.commit_delay_us {
            return Err(WalError::Config(problem.clone()));
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
