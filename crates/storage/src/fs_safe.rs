//! Safe file handling: the one place that decides where flashscan may read, create,
//! replace and delete files.
//!
//! - **Confined paths.** Every path read from a catalog (data files, row group files, index
//!   files, files waiting to be removed) is a single file name in the database directory,
//!   or `VOLUME/NAME` where `VOLUME` is one of the catalog's declared volumes: an absolute
//!   directory that is not a symbolic link and holds the marker `.flashscan-volume` flashscan
//!   created when it first wrote there. Anything else (absolute paths elsewhere, `..`,
//!   sub-directories, and so any path through a linked directory) is refused before any
//!   read, write or delete, with an error naming the catalog entry (`confine`).
//! - **Creation never follows links.** New files are opened `O_CREAT|O_EXCL|O_NOFOLLOW`
//!   (`create_new`): a planted file or symbolic link at the name makes the create fail, so
//!   nothing is written through it. Temporary names are unique per process and call.
//! - **One atomic replace** (`replace_file_atomic`) for every file replaced whole (the
//!   catalog, `buffer_stats.json`): unique temporary, write, fsync, rename, fsync of the
//!   directory.
//! - **Deletes only of our names** (`is_generated_file_name`): a file is removed only if its
//!   path is confined and its name follows the grammar of names flashscan generates.
//! - **Reads are capped** (`read_capped`): a whole-file read checks the size first.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::StorageError;

/// The marker in a volume (a directory outside the database holding its data files): a
/// catalog may only point into directories that carry it, so a catalog edited to declare
/// `/etc` a volume is refused.
pub const VOLUME_MARKER_FILE_NAME: &str = ".flashscan-volume";
/// The largest catalog or small state file (stats) read whole: a planted multi-GB file must
/// fail with a message, not exhaust memory. 256 MB holds catalogs of millions of runs.
pub const SMALL_FILE_BYTES_MAX: u64 = 256 << 20;
/// Mode of files flashscan creates (before the umask).
const FILE_MODE: u32 = 0o644;

/// Unique temporary names within this process; the pid separates processes.
static TMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// A temporary name for `name` that no other process or call uses: `.NAME.tmp-PID-N`.
pub fn unique_tmp_name(name: &str) -> String {
    let n = TMP_COUNTER.fetch_add(1, Ordering::Relaxed);
    format!(".{name}.tmp-{}-{n}", std::process::id())
}

/// Creates `path`, which must not exist: `O_CREAT|O_EXCL|O_NOFOLLOW|O_CLOEXEC`. A file or a
/// symbolic link already at the name fails with `AlreadyExists`; nothing is written through it.
pub fn create_new(path: &Path) -> std::io::Result<File> {
    OpenOptions::new().read(true).write(true).create_new(true).mode(FILE_MODE).custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC).open(path)
}

/// Opens `path` for reading without following a symbolic link at the last component.
pub fn open_read_nofollow(path: &Path) -> std::io::Result<File> {
    OpenOptions::new().read(true).custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC).open(path)
}

/// Opens (creating if missing) a lock file: never through a symbolic link (`O_NOFOLLOW`),
/// never blocking on a planted FIFO (`O_NONBLOCK`), and only if it is a regular file.
pub fn open_lock_file(path: &Path) -> Result<File, StorageError> {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(FILE_MODE)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| {
            if e.raw_os_error() == Some(libc::ELOOP) {
                StorageError::UnsafeFile { path: path.to_path_buf(), reason: "is a symbolic link; flashscan never opens its lock through a link: remove it".into() }
            } else {
                StorageError::io("opening lock", path, e)
            }
        })?;
    let meta = file.metadata().map_err(|e| StorageError::io("checking lock", path, e))?;
    if !meta.file_type().is_file() {
        return Err(StorageError::UnsafeFile { path: path.to_path_buf(), reason: "is not a regular file: remove it".into() });
    }
    Ok(file)
}

/// Reads a whole small file (catalog, stats) without following a link at its name, after
/// checking its size against `max_bytes`. `Ok(None)` when it does not exist.
pub fn read_capped(path: &Path, max_bytes: u64) -> Result<Option<Vec<u8>>, StorageError> {
    let mut file = match open_read_nofollow(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
            return Err(StorageError::UnsafeFile { path: path.to_path_buf(), reason: "is a symbolic link; flashscan reads its own files only: remove it".into() })
        }
        Err(e) => return Err(StorageError::io("opening", path, e)),
    };
    let meta = file.metadata().map_err(|e| StorageError::io("checking", path, e))?;
    if !meta.file_type().is_file() {
        return Err(StorageError::UnsafeFile { path: path.to_path_buf(), reason: "is not a regular file".into() });
    }
    if meta.len() > max_bytes {
        return Err(StorageError::UnsafeFile { path: path.to_path_buf(), reason: format!("is {} bytes, more than the {max_bytes} bytes this file can have", meta.len()) });
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    // take: the file may grow between fstat and read; never read past the cap.
    (&mut file).take(max_bytes + 1).read_to_end(&mut bytes).map_err(|e| StorageError::io("reading", path, e))?;
    if bytes.len() as u64 > max_bytes {
        return Err(StorageError::UnsafeFile { path: path.to_path_buf(), reason: format!("grew past {max_bytes} bytes while read") });
    }
    Ok(Some(bytes))
}

/// Checks `dir` is a directory and not a symbolic link: flashscan creates files only in
/// such directories, so a link planted in place of one cannot redirect its writes.
pub fn check_real_dir(dir: &Path) -> Result<(), StorageError> {
    let meta = std::fs::symlink_metadata(dir).map_err(|e| StorageError::io("checking directory", dir, e))?;
    if meta.file_type().is_symlink() {
        let target = std::fs::canonicalize(dir).map(|p| p.display().to_string()).unwrap_or_else(|_| "?".into());
        return Err(StorageError::UnsafeFile { path: dir.to_path_buf(), reason: format!("is a symbolic link (to {target}); pass the directory itself") });
    }
    if !meta.is_dir() {
        return Err(StorageError::UnsafeFile { path: dir.to_path_buf(), reason: "is not a directory".into() });
    }
    Ok(())
}

/// The one atomic replace: `dir/NAME` gets `bytes`, or keeps its old content. A unique
/// temporary (`O_EXCL|O_NOFOLLOW`) is written and fsynced, renamed over `NAME`, and the
/// directory fsynced. A link planted at any temporary name is never written through, and a
/// link at `NAME` itself is replaced (rename swaps the name), never followed.
pub fn replace_file_atomic(dir: &Path, name: &str, bytes: &[u8]) -> Result<(), StorageError> {
    debug_assert!(is_plain_name(name));
    let tmp = dir.join(unique_tmp_name(name));
    let path = dir.join(name);
    let result = (|| {
        let mut f = create_new(&tmp).map_err(|e| StorageError::io("creating", &tmp, e))?;
        f.write_all(bytes).map_err(|e| StorageError::io("writing", &tmp, e))?;
        f.sync_all().map_err(|e| StorageError::io("syncing", &tmp, e))?;
        std::fs::rename(&tmp, &path).map_err(|e| StorageError::io("renaming into place", &path, e))?;
        sync_dir(dir)
    })();
    if result.is_err() {
        // Only our own temporary: create_new made it, so it is ours to remove.
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// fsync of a directory, so a rename or a new file in it survives a crash.
pub fn sync_dir(dir: &Path) -> Result<(), StorageError> {
    let d = File::open(dir).map_err(|e| StorageError::io("opening directory", dir, e))?;
    d.sync_all().map_err(|e| StorageError::io("syncing directory", dir, e))
}

/// A single normal path component: no separator, not `.` or `..`, not empty, no NUL.
fn is_plain_name(name: &str) -> bool {
    !name.is_empty() && name != "." && name != ".." && !name.contains('/') && !name.contains('\0')
}

/// Where a catalog's paths may point: the database directory and its declared volumes.
#[derive(Debug, Clone)]
pub struct DatabaseRoots {
    db_dir: PathBuf,
    /// Declared volumes, absolute, as the catalog spells them.
    volumes: Vec<PathBuf>,
}

impl DatabaseRoots {
    /// Checks every declared volume: absolute, no `..`, a directory (not a link) carrying the
    /// volume marker. `catalog` names the catalog file in errors.
    pub fn new(db_dir: &Path, volumes: &[String], catalog: &Path) -> Result<DatabaseRoots, StorageError> {
        let mut checked = Vec::with_capacity(volumes.len());
        for (i, v) in volumes.iter().enumerate() {
            let refuse = |reason: &str| StorageError::PathOutsideDatabase { catalog: catalog.to_path_buf(), entry: format!("volume {i}"), path: v.clone(), reason: reason.to_string() };
            let path = Path::new(v);
            if !path.is_absolute() || path.components().any(|c| matches!(c, Component::ParentDir | Component::CurDir)) || v.contains('\0') {
                return Err(refuse("a volume must be an absolute directory path without . or .."));
            }
            match std::fs::symlink_metadata(path) {
                Ok(m) if m.file_type().is_symlink() => return Err(refuse("the volume is a symbolic link")),
                Ok(m) if !m.is_dir() => return Err(refuse("the volume is not a directory")),
                Ok(_) => {}
                // A volume that is gone (unmounted) fails when its files are read.
                Err(_) => {}
            }
            if path.exists() {
                let marker = path.join(VOLUME_MARKER_FILE_NAME);
                match std::fs::symlink_metadata(&marker) {
                    Ok(m) if m.file_type().is_file() => {}
                    _ => return Err(refuse("the directory has no .flashscan-volume marker: flashscan never wrote there")),
                }
            }
            checked.push(path.to_path_buf());
        }
        Ok(DatabaseRoots { db_dir: db_dir.to_path_buf(), volumes: checked })
    }

    /// Resolves a path read from the catalog, or refuses it: a plain file name (in the
    /// database directory) or `VOLUME/NAME` for a declared volume. `entry` names the
    /// catalog entry in the error ("table lineitem file 3").
    pub fn confine(&self, catalog_path: &str, entry: &dyn Fn() -> String, catalog: &Path) -> Result<PathBuf, StorageError> {
        let refuse = |reason: &str| StorageError::PathOutsideDatabase { catalog: catalog.to_path_buf(), entry: entry(), path: catalog_path.to_string(), reason: reason.to_string() };
        if is_plain_name(catalog_path) {
            return Ok(self.db_dir.join(catalog_path));
        }
        let path = Path::new(catalog_path);
        if !path.is_absolute() {
            return Err(refuse("a relative path must be a file name in the database directory (no / and no ..)"));
        }
        let (Some(parent), Some(name)) = (path.parent(), path.file_name().and_then(|n| n.to_str())) else {
            return Err(refuse("no file name"));
        };
        if !is_plain_name(name) || path.components().any(|c| matches!(c, Component::ParentDir | Component::CurDir)) {
            return Err(refuse("the path has . or .. in it"));
        }
        if !self.volumes.iter().any(|v| v == parent) {
            return Err(refuse("the path is outside the database directory and its declared volumes"));
        }
        Ok(path.to_path_buf())
    }

    /// Removes the file at `catalog_path` if it is confined, its name is one flashscan
    /// generates, and it is not a directory. Returns true if a file was removed, false if
    /// it was already gone; refuses anything else.
    pub fn remove_generated(&self, catalog_path: &str, entry: &dyn Fn() -> String, catalog: &Path) -> Result<bool, StorageError> {
        let path = self.confine(catalog_path, entry, catalog)?;
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if !is_generated_file_name(name) {
            return Err(StorageError::PathOutsideDatabase {
                catalog: catalog.to_path_buf(),
                entry: entry(),
                path: catalog_path.to_string(),
                reason: "the name is not one flashscan generates; flashscan removes only its own files".into(),
            });
        }
        match std::fs::symlink_metadata(&path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
            Err(e) => return Err(StorageError::io("checking", &path, e)),
            // unlink of a link removes the link only; a directory or device is not ours.
            Ok(m) if !(m.file_type().is_file() || m.file_type().is_symlink()) => {
                return Err(StorageError::UnsafeFile { path, reason: "is not a regular file; flashscan removes only its own files".into() })
            }
            Ok(_) => {}
        }
        if let Some(pool) = flashscan_buffer::BufferPool::global_if_made() {
            pool.forget_file(&path);
        }
        match std::fs::remove_file(&path) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(StorageError::io("removing", &path, e)),
        }
    }
}

/// Table and index names: ASCII letters, digits and `_`.
fn is_identifier(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

fn is_digits(s: &str) -> bool {
    !s.is_empty() && s.len() <= 20 && s.bytes().all(|b| b.is_ascii_digit())
}

/// The grammar of every file name flashscan generates (and so may delete):
/// - data files: `[flashscan-XXXXXXXX.]TABLE.pNNN.fN.gGEN.dat` (the prefix, 8 hex digits of
///   the database id, on volumes outside the database directory);
/// - index files: `index_NAME.fsbt` (`NAME`: letters, digits, `_`);
/// - synthetic benchmark tables: `TABLE_gGEN.heap`;
/// - deleted rows files: `TABLE.gGEN.del`.
///
/// Nothing else: not the catalog, the lock, the volume marker, temporaries or user files.
pub fn is_generated_file_name(name: &str) -> bool {
    if let Some(stem) = name.strip_suffix(".dat") {
        let mut parts: Vec<&str> = stem.split('.').collect();
        if parts.len() == 5 {
            let prefix = parts.remove(0);
            let Some(id) = prefix.strip_prefix("flashscan-") else { return false };
            if id.len() != 8 || !id.bytes().all(|b| b.is_ascii_hexdigit()) {
                return false;
            }
        }
        return parts.len() == 4
            && is_identifier(parts[0])
            && parts[1].strip_prefix('p').is_some_and(|d| d.len() >= 3 && is_digits(d))
            && parts[2].strip_prefix('f').is_some_and(is_digits)
            && parts[3].strip_prefix('g').is_some_and(is_digits);
    }
    if let Some(stem) = name.strip_suffix(".fsbt") {
        return stem.strip_prefix("index_").is_some_and(is_identifier);
    }
    if let Some(stem) = name.strip_suffix(".del") {
        return stem.split_once('.').is_some_and(|(table, generation)| is_identifier(table) && generation.strip_prefix('g').is_some_and(is_digits));
    }
    if let Some(stem) = name.strip_suffix(".heap") {
        return stem.rsplit_once("_g").is_some_and(|(table, generation)| is_identifier(table) && is_digits(generation));
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_names() {
        for ok in ["lineitem.p000.f0.g6.dat", "t__cs.p012.f1.g17.dat", "flashscan-0a1b2c3d.t.p001.f2.g3.dat", "index_t_by_id.fsbt", "lookup_g4.heap", "t.g12.del"] {
            assert!(is_generated_file_name(ok), "{ok}");
        }
        for bad in [
            "notes.g6.dat",
            "lineitem.p000.f0.g6.dat.bak",
            "lineitem.p000.f0.gx.dat",
            "t.p0.f0.g1.dat",
            "x-0a1b2c3d.t.p001.f2.g3.dat",
            "flashscan-0a1b2c3.t.p001.f2.g3.dat",
            "catalog.json",
            "flashscan.lock",
            ".flashscan-volume",
            "index_.fsbt",
            "index_a.b.fsbt",
            ".catalog.json.tmp-1-0",
            "mine.dat",
            "../t.p000.f0.g1.dat",
            "t.del",
            "t.gx.del",
            "a.b.g1.del",
        ] {
            assert!(!is_generated_file_name(bad), "{bad}");
        }
    }

    #[test]
    fn confine_refuses_everything_outside() {
        let dir = tempfile::tempdir().unwrap();
        let vol = tempfile::tempdir().unwrap();
        let vol_path = vol.path().to_string_lossy().into_owned();
        let catalog = dir.path().join("catalog.json");
        // Without the marker, the volume is refused.
        assert!(DatabaseRoots::new(dir.path(), std::slice::from_ref(&vol_path), &catalog).is_err());
        std::fs::write(vol.path().join(VOLUME_MARKER_FILE_NAME), b"").unwrap();
        let roots = DatabaseRoots::new(dir.path(), std::slice::from_ref(&vol_path), &catalog).unwrap();
        let entry = || "test".to_string();
        assert_eq!(roots.confine("a.dat", &entry, &catalog).unwrap(), dir.path().join("a.dat"));
        assert!(roots.confine(&format!("{vol_path}/a.dat"), &entry, &catalog).is_ok());
        for bad in ["/etc/passwd", "../a.dat", "sub/a.dat", "..", ".", "", "a/../b", &format!("{vol_path}/../a.dat"), &format!("{vol_path}/sub/a.dat")] {
            let e = roots.confine(bad, &entry, &catalog).unwrap_err();
            assert!(matches!(e, StorageError::PathOutsideDatabase { .. }), "{bad}: {e}");
        }
        for bad in ["relative/dir", "/nonexistent/../x"] {
            assert!(DatabaseRoots::new(dir.path(), &[bad.to_string()], &catalog).is_err(), "{bad}");
        }
    }

    #[test]
    fn create_new_never_writes_through_a_link() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("target");
        std::fs::write(&target, b"keep").unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        assert!(create_new(&link).is_err());
        let dangling = dir.path().join("dangling");
        std::os::unix::fs::symlink(dir.path().join("nowhere"), &dangling).unwrap();
        assert!(create_new(&dangling).is_err());
        assert!(!dir.path().join("nowhere").exists());
        assert!(open_lock_file(&link).is_err());
        assert_eq!(std::fs::read(&target).unwrap(), b"keep");
    }

    #[test]
    fn read_capped_refuses_large_and_linked_files() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, vec![0u8; 100]).unwrap();
        assert_eq!(read_capped(&path, 100).unwrap().unwrap().len(), 100);
        assert!(read_capped(&path, 99).is_err());
        assert!(read_capped(&dir.path().join("missing"), 1).unwrap().is_none());
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&path, &link).unwrap();
        assert!(read_capped(&link, 1000).is_err());
    }

    #[test]
    fn replace_is_atomic_and_unique() {
        let dir = tempfile::tempdir().unwrap();
        replace_file_atomic(dir.path(), "x.json", b"one").unwrap();
        replace_file_atomic(dir.path(), "x.json", b"two").unwrap();
        assert_eq!(std::fs::read(dir.path().join("x.json")).unwrap(), b"two");
        let names: Vec<String> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        assert_eq!(names, vec!["x.json"]);
    }
}
