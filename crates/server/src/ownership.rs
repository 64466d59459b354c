//! One process owns a database while it serves it: `flashscan serve` holds the database
//! lock (the same flock that loads, rebuilds and drops take) for its whole life, and says
//! where it listens in a small file beside it, so a second `serve` (or a load) is told to
//! connect instead of waiting or failing obscurely.

use std::fs::OpenOptions;
use std::io::{Read, Write};
use std::net::SocketAddr;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use flashscan_storage::load::LOCK_FILE_NAME;

use crate::error::ServerError;

/// Where the serving process says who it is and where it listens (pid and address).
pub use flashscan_storage::load::SERVE_INFO_FILE_NAME;
/// The info file is a few lines; anything longer is not ours.
const SERVE_INFO_BYTES_MAX: u64 = 4096;

/// Held while serving; dropping it removes the info file. The database lock itself is the
/// write path's (`FlashscanSession::take_writer` takes it at start: the server is the
/// database's one writer, whichever command made the database).
#[derive(Debug)]
pub struct DatabaseOwnership {
    info_path: PathBuf,
}

impl DatabaseOwnership {
    /// For a database whose write path holds the lock (the server is its writer).
    pub fn held_by_write_path(db_dir: &Path) -> DatabaseOwnership {
        DatabaseOwnership { info_path: db_dir.join(SERVE_INFO_FILE_NAME) }
    }

    /// Records the address clients should use. A file left by a killed server is ours (we
    /// hold the lock now, so its writer is gone) and is replaced.
    pub fn publish(&self, listen: SocketAddr) -> Result<(), ServerError> {
        match std::fs::symlink_metadata(&self.info_path) {
            Ok(m) if m.is_file() => {
                std::fs::remove_file(&self.info_path).map_err(|e| ServerError::Io { what: "removing stale", path: self.info_path.clone(), source: e })?
            }
            Ok(_) => {
                return Err(ServerError::InvalidArgument(format!("{} is not a file flashscan wrote: remove it", self.info_path.display())));
            }
            Err(_) => {}
        }
        let mut f = OpenOptions::new()
            .write(true)
            .create_new(true)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&self.info_path)
            .map_err(|e| ServerError::Io { what: "creating", path: self.info_path.clone(), source: e })?;
        let text = format!("pid {}\nlisten {listen}\n", std::process::id());
        f.write_all(text.as_bytes()).map_err(|e| ServerError::Io { what: "writing", path: self.info_path.clone(), source: e })
    }
}

impl Drop for DatabaseOwnership {
    fn drop(&mut self) {
        // Only a regular file of our name, written by us while holding the lock.
        if std::fs::symlink_metadata(&self.info_path).map(|m| m.is_file()).unwrap_or(false) {
            let _ = std::fs::remove_file(&self.info_path);
        }
    }
}

/// What the second process is told: who serves the database and how to connect.
pub(crate) fn busy_message(db_dir: &Path) -> String {
    let info = read_serve_info(db_dir);
    match info {
        Some((pid, listen)) => {
            let (host, port) = (listen.ip(), listen.port());
            format!(
                "{} is served by flashscan serve (pid {pid}) at {listen}: connect to it instead, e.g. psql -h {host} -p {port} -U flashscan -d flashscan",
                db_dir.display()
            )
        }
        None => format!(
            "{} is in use by another flashscan process (a load, rebuild, drop or serve holds {}): wait for it, or connect to its server",
            db_dir.display(),
            LOCK_FILE_NAME
        ),
    }
}

/// The pid and address a running server published, if there is one.
pub fn read_serve_info(db_dir: &Path) -> Option<(u32, SocketAddr)> {
    let path = db_dir.join(SERVE_INFO_FILE_NAME);
    let f = OpenOptions::new().read(true).custom_flags(libc::O_NOFOLLOW).open(path).ok()?;
    let mut text = String::new();
    f.take(SERVE_INFO_BYTES_MAX).read_to_string(&mut text).ok()?;
    let mut pid = None;
    let mut listen = None;
    for line in text.lines() {
        match line.split_once(' ') {
            Some(("pid", v)) => pid = v.trim().parse().ok(),
            Some(("listen", v)) => listen = v.trim().parse().ok(),
            _ => {}
        }
    }
    Some((pid?, listen?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_owner_is_told_where_to_connect() {
        let dir = tempfile::tempdir().expect("tempdir");
        assert!(busy_message(dir.path()).contains("in use by another flashscan process"));
        let first = DatabaseOwnership::held_by_write_path(dir.path());
        first.publish("127.0.0.1:5999".parse().expect("addr")).expect("publish");
        let message = busy_message(dir.path());
        assert!(message.contains("127.0.0.1:5999") && message.contains("connect"), "{message}");
        drop(first);
        assert!(!dir.path().join(SERVE_INFO_FILE_NAME).exists());
    }
}
