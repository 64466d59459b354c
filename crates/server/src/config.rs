//! What `flashscan serve` is told on its command line, with the limits' defaults and the
//! reasons for them.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use crate::error::ServerError;

/// PostgreSQL's own default port; taken by a running PostgreSQL, the next free one is used.
pub const LISTEN_PORT_DEFAULT: u16 = 5432;
/// Ports tried after the default one before giving up.
pub const LISTEN_PORT_TRIES: u16 = 20;
/// PostgreSQL's default `max_connections`.
pub const MAX_CONNECTIONS_DEFAULT: usize = 100;
/// Upper bound: each connection is a task and a socket, cheap, but not free.
pub const MAX_CONNECTIONS_MAX: usize = 10_000;
/// Queries that run at once, by default: two per core keeps both cores busy while one
/// query waits on the device, without slicing the CPU so thin that every query is slow.
pub const ACTIVE_QUERIES_PER_CORE_DEFAULT: usize = 2;
/// How long a query may wait for a slot before it fails (SQLSTATE 53000): long enough to
/// ride out a burst, short enough that a client sees "busy" instead of a hang.
pub const QUEUE_TIMEOUT_DEFAULT: Duration = Duration::from_secs(30);
/// DataFusion's memory pool per query (sorts, hash tables, aggregates). 100 clients x 4
/// active queries x 1 GiB stays well inside the 24 GB machine: only active queries hold it.
pub const QUERY_MEMORY_BYTES_DEFAULT: usize = 1 << 30;
/// The global budget for scan read buffers (read size x depth x scan partitions of every
/// running query); a query waits for its share at admission.
pub const SCAN_BUFFER_BUDGET_BYTES_DEFAULT: usize = 512 << 20;
/// SIGTERM lets running queries finish for this long, then closes every connection.
pub const DRAIN_TIMEOUT: Duration = Duration::from_secs(30);
/// Seconds of one-second samples kept for `flashscan_stats_history` and the dashboard.
pub const SAMPLE_RING_SECONDS: usize = 600;

#[derive(Debug, Clone)]
pub struct ServerConfig {
    pub db_dir: PathBuf,
    /// `None`: 127.0.0.1:5432 or the next free port.
    pub listen: Option<SocketAddr>,
    pub http: Option<SocketAddr>,
    pub max_connections: usize,
    pub max_active_queries: usize,
    pub queue_timeout: Duration,
    pub query_memory_bytes: usize,
    pub scan_buffer_budget_bytes: usize,
    pub password_file: Option<PathBuf>,
    /// The exchange `password_file` is checked with (SCRAM-SHA-256 by default).
    pub password_auth: crate::startup::PasswordAuth,
    /// Execution partitions per query; the cores by default.
    pub target_partitions: Option<usize>,
    /// The prepared-INSERT fast path (`fast_insert.rs`); on by default, off to measure or
    /// test the SQL path alone.
    pub fast_insert: bool,
    /// Commit workers of the group committer (`writes.rs`; 1 = one group in flight).
    pub commit_workers: usize,
}

impl ServerConfig {
    pub fn new(db_dir: PathBuf) -> ServerConfig {
        ServerConfig {
            db_dir,
            listen: None,
            http: None,
            max_connections: MAX_CONNECTIONS_DEFAULT,
            max_active_queries: ACTIVE_QUERIES_PER_CORE_DEFAULT * cores(),
            queue_timeout: QUEUE_TIMEOUT_DEFAULT,
            query_memory_bytes: QUERY_MEMORY_BYTES_DEFAULT,
            scan_buffer_budget_bytes: SCAN_BUFFER_BUDGET_BYTES_DEFAULT,
            password_file: None,
            password_auth: crate::startup::PasswordAuth::default(),
            target_partitions: None,
            fast_insert: true,
            commit_workers: crate::writes::COMMIT_WORKERS_DEFAULT,
        }
    }

    /// Checks the numbers and the one security rule: a server reachable from other
    /// machines must ask for a password.
    pub fn validate(&self) -> Result<(), ServerError> {
        if self.max_connections == 0 || self.max_connections > MAX_CONNECTIONS_MAX {
            return Err(ServerError::InvalidArgument(format!("--max-connections {}: use 1 to {MAX_CONNECTIONS_MAX}", self.max_connections)));
        }
        if self.max_active_queries == 0 || self.max_active_queries > self.max_connections {
            return Err(ServerError::InvalidArgument(format!(
                "--max-active-queries {}: use 1 to --max-connections ({})",
                self.max_active_queries, self.max_connections
            )));
        }
        if self.commit_workers == 0 || self.commit_workers > crate::writes::COMMIT_WORKERS_MAX {
            return Err(ServerError::InvalidArgument(format!("--commit-workers {}: use 1 to {}", self.commit_workers, crate::writes::COMMIT_WORKERS_MAX)));
        }
        if self.query_memory_bytes < (1 << 20) {
            return Err(ServerError::InvalidArgument("--query-memory below 1M: a query needs at least a few batches".into()));
        }
        for (flag, addr) in [("--listen", self.listen), ("--http", self.http)] {
            if let Some(a) = addr {
                if !a.ip().is_loopback() && self.password_file.is_none() {
                    return Err(ServerError::InvalidArgument(format!(
                        "{flag} {a} is reachable from other machines: give --password-file F (or listen on 127.0.0.1)"
                    )));
                }
            }
        }
        Ok(())
    }

    /// What one running query reserves from the scan buffer budget: each scan partition
    /// keeps `depth` reads of `io_size` in flight.
    pub fn scan_buffer_bytes_per_query(&self) -> usize {
        let partitions = self.target_partitions.unwrap_or_else(cores);
        let read = flashscan_sql::ReadOptions::default();
        partitions * read.io_size_bytes * read.queue_depth as usize
    }
}

pub fn cores() -> usize {
    std::thread::available_parallelism().map(|n| n.get()).unwrap_or(2)
}

/// `512M`, `2G`, `1048576`, `64K` (powers of 1024).
pub fn parse_size_bytes(text: &str) -> Result<usize, ServerError> {
    let t = text.trim();
    let (digits, unit) = match t.char_indices().find(|(_, c)| !c.is_ascii_digit()) {
        Some((i, _)) => (&t[..i], t[i..].trim()),
        None => (t, ""),
    };
    let shift = match unit.to_ascii_uppercase().trim_end_matches('B').trim_end_matches('I') {
        "" => 0,
        "K" => 10,
        "M" => 20,
        "G" => 30,
        "T" => 40,
        _ => return Err(ServerError::InvalidArgument(format!("size {text:?}: use a number with K, M or G (e.g. 512M)"))),
    };
    let n: usize = digits.parse().map_err(|_| ServerError::InvalidArgument(format!("size {text:?}: use a number with K, M or G (e.g. 512M)")))?;
    n.checked_mul(1usize << shift).ok_or_else(|| ServerError::InvalidArgument(format!("size {text:?} is too large")))
}

/// `statement_timeout` values as PostgreSQL takes them: a number of milliseconds, or a
/// number with a unit (`ms`, `s`, `min`, `h`); 0 means no timeout.
pub fn parse_duration_setting(text: &str) -> Option<Duration> {
    let t = text.trim().trim_matches('\'').trim();
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (num, unit) = (&t[..split], t[split..].trim());
    let n: f64 = num.parse().ok()?;
    let ms = match unit.to_ascii_lowercase().as_str() {
        "" | "ms" => n,
        "s" => n * 1e3,
        "min" => n * 60e3,
        "h" => n * 3600e3,
        "d" => n * 86400e3,
        _ => return None,
    };
    (ms.is_finite() && ms >= 0.0).then(|| Duration::from_micros((ms * 1e3) as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_with_and_without_units() {
        assert_eq!(parse_size_bytes("64K").ok(), Some(65536));
        assert_eq!(parse_size_bytes("512M").ok(), Some(512 << 20));
        assert_eq!(parse_size_bytes("2GiB").ok(), Some(2 << 30));
        assert_eq!(parse_size_bytes("1000").ok(), Some(1000));
        assert!(parse_size_bytes("12Q").is_err());
        assert!(parse_size_bytes("").is_err());
    }

    #[test]
    fn statement_timeouts_parse_like_postgresql() {
        assert_eq!(parse_duration_setting("1500"), Some(Duration::from_millis(1500)));
        assert_eq!(parse_duration_setting("'2s'"), Some(Duration::from_secs(2)));
        assert_eq!(parse_duration_setting("1min"), Some(Duration::from_secs(60)));
        assert_eq!(parse_duration_setting("0"), Some(Duration::ZERO));
        assert_eq!(parse_duration_setting("soon"), None);
    }

    #[test]
    fn a_public_address_needs_a_password_file() {
        let mut c = ServerConfig::new(PathBuf::from("/tmp/db"));
        c.listen = "0.0.0.0:5432".parse().ok();
        assert!(c.validate().is_err());
        c.password_file = Some(PathBuf::from("/tmp/pw"));
        assert!(c.validate().is_ok());
        c.listen = "127.0.0.1:5432".parse().ok();
        c.password_file = None;
        assert!(c.validate().is_ok());
    }
}
