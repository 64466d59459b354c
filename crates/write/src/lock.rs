//! One writer per database: the writer holds the database lock (the same `flashscan.lock`
//! that loads, rebuilds and drops take, so none of them runs beside it) and records who it
//! is in the file, so a second writer's error names the holder.

use std::fs::{File, OpenOptions};
use std::io::Read;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;

use flashscan_storage::load::LOCK_FILE_NAME;

use crate::error::{file_err, WriteError};

/// Bytes of the holder's description read back for an error message.
const HOLDER_TEXT_BYTES_MAX: u64 = 200;

/// Held while this process writes the database; released on drop or when the process
/// ends (flock), so a crash never leaves it held.
pub struct WriterLock {
    file: File,
}

impl WriterLock {
    /// Takes the database lock or says who has it. `holder` says what this process is
    /// (`flashscan sql`, `flashscan checkpoint`).
    pub fn acquire(db_dir: &Path, holder: &str) -> Result<WriterLock, WriteError> {
        let path = db_dir.join(LOCK_FILE_NAME);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&path)
            .map_err(file_err(&path))?;
        if !flashscan_io::file_lock::try_lock_exclusive(&file).map_err(file_err(&path))? {
            let mut text = String::new();
            let _ = (&file).take(HOLDER_TEXT_BYTES_MAX).read_to_string(&mut text);
            let text = text.trim();
            // Loads, rebuilds and drops take the lock without writing a description.
            let holder = if text.is_empty() { "a flashscan load, rebuild or drop".to_string() } else { text.to_string() };
            return Err(WriteError::Locked { db: db_dir.to_path_buf(), holder, lock: path });
        }
        let description = format!("pid {} ({holder})", std::process::id());
        file.set_len(0).map_err(file_err(&path))?;
        file.write_all_at(description.as_bytes(), 0).map_err(file_err(&path))?;
        Ok(WriterLock { file })
    }
}

impl Drop for WriterLock {
    fn drop(&mut self) {
        // Best effort: a stale description only names a process that has gone.
        let _ = self.file.set_len(0);
    }
}
