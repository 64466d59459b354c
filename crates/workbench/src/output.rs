//! Output files (`--csv FILE`, `--chart FILE`, `--html FILE`, `--save-job FILE`): created new
//! with O_EXCL|O_NOFOLLOW, never replacing a file (or following a link) someone else put at
//! that name. A name already taken is refused before the run starts ([`check_free`]) and
//! again, atomically, when the file is created ([`write_new`]); a write that fails midway
//! removes the file it created, so nothing half-written stays.

use std::fs::OpenOptions;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use crate::error::WorkbenchError;

fn exists_error(path: &Path) -> WorkbenchError {
    WorkbenchError::OutputExists { path: path.to_path_buf() }
}

/// Refuses a name that is taken (by a file, a directory, or a link, even a dangling one).
pub fn check_free(path: &Path) -> Result<(), WorkbenchError> {
    match std::fs::symlink_metadata(path) {
        Ok(_) => Err(exists_error(path)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(source) => Err(WorkbenchError::Output { path: path.to_path_buf(), source }),
    }
}

/// Creates `path` (it must not exist) and writes `bytes` to it.
pub fn write_new(path: &Path, bytes: &[u8]) -> Result<(), WorkbenchError> {
    let mut file = match OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o644)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists || e.raw_os_error() == Some(libc::ELOOP) => {
            return Err(exists_error(path));
        }
        Err(source) => return Err(WorkbenchError::Output { path: path.to_path_buf(), source }),
    };
    if let Err(source) = file.write_all(bytes).and_then(|_| file.sync_all()) {
        drop(file);
        // Ours: created above with O_EXCL, so removing it removes nothing of anyone else's.
        let _ = std::fs::remove_file(path);
        return Err(WorkbenchError::Output { path: path.to_path_buf(), source });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn never_replaces_a_file_or_follows_a_link() {
        let dir = tempfile::tempdir().unwrap();
        let theirs = dir.path().join("theirs.txt");
        std::fs::write(&theirs, b"keep me").unwrap();
        let link = dir.path().join("out.csv");
        std::os::unix::fs::symlink(&theirs, &link).unwrap();
        for path in [&theirs, &link] {
            let e = check_free(path).unwrap_err();
            assert!(e.to_string().contains("remove it or pick another name"), "{e}");
            let e = write_new(path, b"new").unwrap_err();
            assert!(e.to_string().contains("remove it or pick another name"), "{e}");
            assert!(e.is_bad_input());
        }
        // A dangling link is refused too (its target is not created).
        let dangling = dir.path().join("dangling.svg");
        std::os::unix::fs::symlink(dir.path().join("nowhere"), &dangling).unwrap();
        assert!(write_new(&dangling, b"x").is_err());
        assert!(!dir.path().join("nowhere").exists());
        assert_eq!(std::fs::read(&theirs).unwrap(), b"keep me");
        let fresh = dir.path().join("fresh.html");
        check_free(&fresh).unwrap();
        write_new(&fresh, b"<html>").unwrap();
        assert_eq!(std::fs::read(&fresh).unwrap(), b"<html>");
    }
}
