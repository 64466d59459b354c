//! Cold, direct or warm: where the scan's bytes come from, and how we made sure.
//! - cold: the table's pages are dropped from the page cache first (posix_fadvise
//!   DONTNEED on each file, after flushing it; plus `sync; echo 3 > drop_caches` when root),
//!   then read with O_DIRECT: every byte comes from the device;
//! - direct (the default): O_DIRECT reads, the cache is left as it is but bypassed;
//! - warm: buffered reads after one warm-up pass, so every byte comes from memory.

use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::io::AsRawFd;
use std::path::PathBuf;

use serde::Serialize;

use crate::error::ExecError;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CacheMode {
    Direct,
    Cold,
    Warm,
}

impl CacheMode {
    /// Whether the scan reads with O_DIRECT.
    pub fn direct(self) -> bool {
        !matches!(self, CacheMode::Warm)
    }

    pub fn name(self) -> &'static str {
        match self {
            CacheMode::Direct => "direct",
            CacheMode::Cold => "cold",
            CacheMode::Warm => "warm",
        }
    }
}

/// Drops the files' pages from the page cache; returns what was done, in words.
pub fn drop_cached_pages(paths: &[PathBuf]) -> Result<Vec<String>, ExecError> {
    let mut actions = Vec::new();
    for path in paths {
        // O_NOFOLLOW: never advise (or sync) a file elsewhere through a planted link.
        let file = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NOFOLLOW).open(path).map_err(|source| flashscan_io::IoError::Open { path: path.clone(), source })?;
        // DONTNEED drops clean pages only: write dirty ones back first.
        let _ = file.sync_data();
        // SAFETY: plain syscall on a descriptor we own.
        let rc = unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
        if rc != 0 {
            actions.push(format!("posix_fadvise(DONTNEED) failed on {}: {}", path.display(), std::io::Error::from_raw_os_error(rc)));
        }
    }
    actions.push(format!("posix_fadvise(DONTNEED) on {} file(s)", paths.len()));
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        // SAFETY: sync has no preconditions.
        unsafe { libc::sync() };
        match std::fs::write("/proc/sys/vm/drop_caches", b"3") {
            Ok(()) => actions.push("sync; echo 3 > /proc/sys/vm/drop_caches".to_string()),
            Err(e) => actions.push(format!("drop_caches refused ({e}); fadvise only")),
        }
    } else {
        actions.push("not root: drop_caches skipped".to_string());
    }
    Ok(actions)
}
