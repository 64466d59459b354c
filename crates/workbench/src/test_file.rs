//! Test files: find or create the file each target names, never write to a file flashscan
//! did not create (unless `--force`), and create new ones safely.
//!
//! A directory target gets `flashscan-io.dat` inside. A new file is built under a temporary
//! name, filled with incompressible bytes (a fast PRNG, written with large direct writes so
//! the page cache is not flooded), marked as ours (xattr `user.flashscan.created`, or a
//! sidecar `.NAME.flashscan` where the file system has no user xattrs), and only then
//! renamed into place: a failure midway leaves nothing behind.

use std::ffi::CString;
use std::fs::{File, OpenOptions};
use std::os::unix::ffi::OsStrExt;
use std::io::Write;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};

use flashscan_io::file_set::direct_io_align_bytes;
use flashscan_io::BufferArena;

use crate::error::WorkbenchError;
use crate::rng::FastRng;
use crate::size::format_size_bytes;
use crate::spec::{TargetSpec, TEST_FILE_SIZE_BYTES_DEFAULT, TEST_FILE_SIZE_BYTES_MAX};

pub const TEST_FILE_NAME: &str = "flashscan-io.dat";
const MARK_XATTR: &str = "user.flashscan.created";
/// Size of each fill write: large enough that the device streams, small enough to stay cheap.
const FILL_CHUNK_BYTES: usize = 8 << 20;
/// New files are a whole number of these, so every O_DIRECT fill write is aligned.
const FILE_SIZE_GRAIN_BYTES: u64 = 1 << 20;

/// What a job will do to its targets.
#[derive(Debug, Clone, Copy)]
pub struct TargetNeeds {
    pub writes: bool,
    pub force: bool,
    pub direct: bool,
    pub block_size_bytes: u32,
    pub offset_bytes: u64,
}

/// A target ready to run: its file exists, is large enough, and may be written if needed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PreparedTarget {
    pub path: PathBuf,
    /// Bytes of the file the job uses (from 0; the job's offset is inside this).
    pub size_bytes: u64,
    /// True if flashscan created the file (now or in an earlier run).
    pub ours: bool,
    pub created_now: bool,
    /// Alignment O_DIRECT needs on this file (1 when buffered).
    pub offset_align_bytes: u32,
    /// (device, inode) of the file when its mark was checked: the runner refuses to write
    /// if the path names another file by the time it opens it.
    pub file_id: Option<(u64, u64)>,
}

/// Resolves and, if needed, creates every target. `progress` hears about slow steps.
pub fn prepare_targets(
    targets: &[TargetSpec],
    needs: TargetNeeds,
    seed: u64,
    progress: &mut dyn FnMut(&str),
) -> Result<Vec<PreparedTarget>, WorkbenchError> {
    let mut out: Vec<PreparedTarget> = Vec::new();
    for target in targets {
        let file = resolve_path(&target.path)?;
        // Two lines naming the same file share it; create it once.
        if let Some(seen) = out.iter().find(|p| p.path == file) {
            out.push(seen.clone());
            continue;
        }
        out.push(prepare_one(&file, target.size_bytes, needs, seed, progress)?);
    }
    Ok(out)
}

/// The file a target names: the path itself, or `flashscan-io.dat` inside a directory.
pub fn resolve_path(path: &Path) -> Result<PathBuf, WorkbenchError> {
    if path.is_dir() {
        return Ok(path.join(TEST_FILE_NAME));
    }
    if path.exists() {
        return Ok(path.to_path_buf());
    }
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    if !parent.is_dir() {
        return Err(WorkbenchError::target(
            path,
            format!("directory {} does not exist: create it first, or name an existing directory", parent.display()),
        ));
    }
    Ok(path.to_path_buf())
}

fn prepare_one(
    file: &Path,
    size_requested: Option<u64>,
    needs: TargetNeeds,
    seed: u64,
    progress: &mut dyn FnMut(&str),
) -> Result<PreparedTarget, WorkbenchError> {
    if let Some(want) = size_requested {
        if want == 0 || want > TEST_FILE_SIZE_BYTES_MAX {
            return Err(WorkbenchError::target(
                file,
                format!("size {want} bytes is not a usable test file size: use 1 byte to {}", format_size_bytes(TEST_FILE_SIZE_BYTES_MAX)),
            ));
        }
    }
    let existing = std::fs::metadata(file).ok();
    let mut created_now = false;
    let size_bytes = match existing {
        Some(meta) if !meta.is_file() => {
            return Err(WorkbenchError::target(file, "is not a regular file or directory; name a file or a directory"));
        }
        Some(meta) => {
            let ours = is_marked(file);
            if needs.writes && !ours && !needs.force {
                return Err(WorkbenchError::target(
                    file,
                    "flashscan did not create this file, so it will not write to it: pass --force to allow writes, name a directory or a new file, or run reads only",
                ));
            }
            match size_requested {
                Some(want) if want > meta.len() && ours => {
                    progress(&format!("growing {} to {}", file.display(), format_size_bytes(want)));
                    create_file(file, want, seed, progress)?;
                    created_now = true;
                    round_size(want)
                }
                Some(want) if want > meta.len() => {
                    return Err(WorkbenchError::target(
                        file,
                        format!(
                            "file is {} but --size asks for {}; lower --size, or name a directory or a new file to get one of that size",
                            format_size_bytes(meta.len()),
                            format_size_bytes(want)
                        ),
                    ));
                }
                Some(want) => want,
                None => meta.len(),
            }
        }
        None => {
            let want = size_requested.unwrap_or(TEST_FILE_SIZE_BYTES_DEFAULT);
            create_file(file, want, seed, progress)?;
            created_now = true;
            round_size(want)
        }
    };
    let file_id = file_mark(file);
    let ours = file_id.is_some();
    if created_now && !ours {
        return Err(WorkbenchError::target(file, "the new test file lost its mark (replaced while it was created?); run again"));
    }
    let offset_align_bytes = if needs.direct { direct_alignment(file)? } else { 1 };
    check_fits(file, size_bytes, needs, offset_align_bytes)?;
    Ok(PreparedTarget { path: file.to_path_buf(), size_bytes, ours, created_now, offset_align_bytes, file_id })
}

/// `bytes` rounded up to the grain; sizes past the largest test file are refused first
/// (spec::check_job, prepare_one), so this never wraps (it saturates if it were asked).
fn round_size(bytes: u64) -> u64 {
    bytes.div_ceil(FILE_SIZE_GRAIN_BYTES).saturating_mul(FILE_SIZE_GRAIN_BYTES)
}

fn direct_alignment(file: &Path) -> Result<u32, WorkbenchError> {
    match OpenOptions::new().read(true).custom_flags(libc::O_DIRECT).open(file) {
        Ok(f) => Ok(direct_io_align_bytes(&f)),
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => Err(WorkbenchError::target(
            file,
            "the file system refuses O_DIRECT (tmpfs?): use --buffered, or a file on a device",
        )),
        Err(e) => Err(WorkbenchError::target(file, format!("cannot open: {e}"))),
    }
}

pub fn check_fits(file: &Path, size_bytes: u64, needs: TargetNeeds, align: u32) -> Result<(), WorkbenchError> {
    let align = align as u64;
    if needs.direct && needs.block_size_bytes as u64 % align != 0 {
        return Err(WorkbenchError::target(
            file,
            format!(
                "block size {} bytes is not a multiple of {align} bytes, the alignment O_DIRECT needs on this file: use a multiple of {align}, or --buffered",
                needs.block_size_bytes
            ),
        ));
    }
    if needs.direct && needs.offset_bytes % align != 0 {
        return Err(WorkbenchError::target(
            file,
            format!(
                "offset {} bytes is not a multiple of {align} bytes, the alignment O_DIRECT needs on this file: use a multiple of {align}, or --buffered",
                needs.offset_bytes
            ),
        ));
    }
    if size_bytes < needs.offset_bytes.saturating_add(needs.block_size_bytes as u64) {
        return Err(WorkbenchError::target(
            file,
            format!(
                "file is {} bytes, too small for one {}-byte block at offset {}: use a larger --size or a smaller -b",
                size_bytes, needs.block_size_bytes, needs.offset_bytes
            ),
        ));
    }
    Ok(())
}

/// True if flashscan created `file`. The mark lives on the file itself: the xattr
/// `user.flashscan.created` of the resolved target, read through an open descriptor. Only
/// where the file system has no user xattrs does a sidecar `.NAME.flashscan` count, and then
/// only if it names this very file (device and inode), the path is not a symbolic link and
/// the file has one link: an empty or copied sidecar planted beside a link to someone else's
/// file forges nothing.
pub fn is_marked(file: &Path) -> bool {
    file_mark(file).is_some()
}

/// The (device, inode) of `file` if it carries flashscan's mark.
pub fn file_mark(file: &Path) -> Option<(u64, u64)> {
    // O_NONBLOCK: a FIFO planted at the path must not hang the open.
    let handle = OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC).open(file).ok()?;
    let meta = handle.metadata().ok()?;
    if !meta.is_file() {
        return None;
    }
    let id = (meta.dev(), meta.ino());
    let name = CString::new(MARK_XATTR).ok()?;
    // SAFETY: the fd is valid while `handle` lives; a null buffer of size 0 asks for the length.
    let rc = unsafe { libc::fgetxattr(handle.as_raw_fd(), name.as_ptr(), std::ptr::null_mut(), 0) };
    if rc >= 0 {
        return Some(id);
    }
    let errno = std::io::Error::last_os_error().raw_os_error();
    if errno != Some(libc::ENOTSUP) {
        // The file system keeps xattrs and this file has none: not ours, whatever lies beside it.
        return None;
    }
    let link_meta = std::fs::symlink_metadata(file).ok()?;
    if link_meta.file_type().is_symlink() || meta.nlink() != 1 {
        return None;
    }
    let sidecar = sidecar_path(file);
    let sidecar_meta = std::fs::symlink_metadata(&sidecar).ok()?;
    if !sidecar_meta.is_file() || sidecar_meta.len() > SIDECAR_BYTES_MAX {
        return None;
    }
    let text = std::fs::read_to_string(&sidecar).ok()?;
    (text == sidecar_text(id)).then_some(id)
}

/// A sidecar longer than this is not one flashscan wrote.
const SIDECAR_BYTES_MAX: u64 = 256;

fn sidecar_text((dev, ino): (u64, u64)) -> String {
    format!("created by flashscan io: device {dev} inode {ino}\n")
}

fn sidecar_path(file: &Path) -> PathBuf {
    let name = file.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    file.with_file_name(format!(".{name}.flashscan"))
}

/// Marks an open file as ours: the xattr on the file, else (no user xattrs on this file
/// system) a sidecar next to `final_path` naming the file's device and inode.
fn mark(file: &File, final_path: &Path) -> Result<(), std::io::Error> {
    let name = CString::new(MARK_XATTR).map_err(std::io::Error::other)?;
    let value = b"1";
    // SAFETY: fd is valid while `file` lives; name is NUL-terminated; value is 1 byte.
    let rc = unsafe { libc::fsetxattr(file.as_raw_fd(), name.as_ptr(), value.as_ptr().cast(), value.len(), 0) };
    if rc == 0 {
        return Ok(());
    }
    let e = std::io::Error::last_os_error();
    if e.raw_os_error() != Some(libc::ENOTSUP) {
        return Err(e);
    }
    let meta = file.metadata()?;
    let sidecar = sidecar_path(final_path);
    // A sidecar of ours for an earlier file (a grown test file gets a new inode) is replaced;
    // anything else at that name is left alone and the creation fails.
    if let Ok(m) = std::fs::symlink_metadata(&sidecar) {
        let ours = m.is_file()
            && m.len() <= SIDECAR_BYTES_MAX
            && std::fs::read_to_string(&sidecar).is_ok_and(|t| t.starts_with("created by flashscan io: device "));
        if !ours {
            return Err(std::io::Error::other(format!("{} exists and is not flashscan's: remove it", sidecar.display())));
        }
        std::fs::remove_file(&sidecar)?;
    }
    let mut out = OpenOptions::new()
        .write(true)
        .create_new(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(&sidecar)?;
    out.write_all(sidecar_text((meta.dev(), meta.ino())).as_bytes())?;
    out.sync_all()
}

/// Removes the temporary file unless the creation completed.
struct TempFileGuard {
    path: PathBuf,
    keep: bool,
}

impl Drop for TempFileGuard {
    fn drop(&mut self) {
        if !self.keep {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

fn free_bytes(dir: &Path) -> Option<u64> {
    let c_path = CString::new(dir.as_os_str().as_bytes()).ok()?;
    // SAFETY: statvfs writes into the zeroed struct we own.
    unsafe {
        let mut st: libc::statvfs = std::mem::zeroed();
        if libc::statvfs(c_path.as_ptr(), &mut st) != 0 {
            return None;
        }
        Some(st.f_bavail as u64 * st.f_frsize as u64)
    }
}

/// Creates `file` of `size_bytes` (rounded up to whole MiB) full of incompressible bytes.
fn create_file(file: &Path, size_bytes: u64, seed: u64, progress: &mut dyn FnMut(&str)) -> Result<(), WorkbenchError> {
    let size_bytes = round_size(size_bytes);
    let dir = match file.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let replacing = std::fs::metadata(file).map(|m| m.len()).unwrap_or(0);
    if let Some(free) = free_bytes(&dir) {
        if free + replacing < size_bytes {
            return Err(WorkbenchError::target(
                file,
                format!(
                    "not enough free space: the test file needs {} and {} has {} free; lower --size or choose another volume",
                    format_size_bytes(size_bytes),
                    dir.display(),
                    format_size_bytes(free + replacing)
                ),
            ));
        }
    }
    let name = file.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| TEST_FILE_NAME.into());
    let temp_path = dir.join(format!(".{name}.tmp-{}", std::process::id()));
    let open = |direct: bool| {
        let mut o = OpenOptions::new();
        // O_EXCL (create_new) and O_NOFOLLOW: a link planted at the temporary name is refused.
        o.write(true).create_new(true);
        o.custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | if direct { libc::O_DIRECT } else { 0 });
        o.open(&temp_path)
    };
    let (handle, direct) = match open(true) {
        Ok(f) => (f, true),
        // The file system refuses O_DIRECT (tmpfs): fill through the page cache instead.
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
            let _ = std::fs::remove_file(&temp_path);
            (open(false).map_err(|e| cannot_create(&dir, e))?, false)
        }
        Err(e) => return Err(cannot_create(&dir, e)),
    };
    let mut guard = TempFileGuard { path: temp_path.clone(), keep: false };
    progress(&format!("creating {} ({}) with incompressible data", file.display(), format_size_bytes(size_bytes)));
    let fail = |what: String| WorkbenchError::target(file, what);
    // Reserve the space first so a full disk fails now, not after minutes of writing.
    // SAFETY: fd valid while `handle` lives.
    let rc = unsafe { libc::fallocate(handle.as_raw_fd(), 0, 0, size_bytes as libc::off_t) };
    if rc != 0 {
        let e = std::io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::ENOSPC) {
            return Err(fail("not enough free space for the test file; lower --size or choose another volume".into()));
        }
    }
    let mut arena = BufferArena::new(1, FILL_CHUNK_BYTES).map_err(WorkbenchError::Setup)?;
    let mut rng = FastRng::new(seed, u64::MAX);
    let mut written = 0u64;
    while written < size_bytes {
        let chunk = (size_bytes - written).min(FILL_CHUNK_BYTES as u64) as usize;
        let buf = &mut arena.slot_mut(0)[..chunk];
        rng.fill(buf);
        let mut done = 0usize;
        while done < chunk {
            // SAFETY: buf is valid for `chunk` bytes and aligned for O_DIRECT (arena slot).
            let n = unsafe {
                libc::pwrite(handle.as_raw_fd(), buf[done..].as_ptr().cast(), chunk - done, (written + done as u64) as libc::off_t)
            };
            if n < 0 {
                let e = std::io::Error::last_os_error();
                if e.raw_os_error() == Some(libc::EINTR) {
                    continue;
                }
                return Err(fail(format!("writing the test file failed at offset {}: {e}", written + done as u64)));
            }
            if n == 0 {
                return Err(fail("writing the test file made no progress (disk full?)".into()));
            }
            done += n as usize;
        }
        written += chunk as u64;
    }
    if !direct {
        handle.sync_all().map_err(|e| fail(format!("fsync of the test file failed: {e}")))?;
    }
    mark(&handle, file).map_err(|e| fail(format!("cannot mark the test file as flashscan's: {e}")))?;
    drop(handle);
    std::fs::rename(&temp_path, file).map_err(|e| fail(format!("cannot rename the finished test file into place: {e}")))?;
    guard.keep = true;
    Ok(())
}

fn cannot_create(dir: &Path, e: std::io::Error) -> WorkbenchError {
    WorkbenchError::target(dir, format!("cannot create a test file here ({e}): choose a writable directory"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn needs(writes: bool) -> TargetNeeds {
        TargetNeeds { writes, force: false, direct: false, block_size_bytes: 4096, offset_bytes: 0 }
    }

    fn spec(path: &Path, size: Option<u64>) -> TargetSpec {
        TargetSpec { path: path.to_path_buf(), threads: 1, cpu_mask: 0, size_bytes: size }
    }

    #[test]
    fn a_directory_gets_a_marked_incompressible_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = prepare_targets(&[spec(dir.path(), Some(2 << 20))], needs(true), 1, &mut |_| {}).unwrap();
        assert_eq!(p[0].path, dir.path().join(TEST_FILE_NAME));
        assert_eq!(p[0].size_bytes, 2 << 20);
        assert!(p[0].created_now && p[0].ours);
        assert!(is_marked(&p[0].path));
        let bytes = std::fs::read(&p[0].path).unwrap();
        assert_eq!(bytes.len(), 2 << 20);
        assert!(bytes.iter().filter(|b| **b == 0).count() < bytes.len() / 100);
        // No temporary left behind.
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert!(names.iter().all(|n| !n.to_string_lossy().contains(".tmp-")), "{names:?}");
        // A second run reuses it.
        let again = prepare_targets(&[spec(dir.path(), None)], needs(true), 1, &mut |_| {}).unwrap();
        assert!(!again[0].created_now && again[0].ours);
    }

    #[test]
    fn a_foreign_file_is_read_but_never_written_without_force() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("theirs.dat");
        std::fs::write(&f, vec![7u8; 1 << 16]).unwrap();
        let read = prepare_targets(&[spec(&f, None)], needs(false), 1, &mut |_| {}).unwrap();
        assert_eq!(read[0].size_bytes, 1 << 16);
        assert!(!read[0].ours);
        let e = prepare_targets(&[spec(&f, None)], needs(true), 1, &mut |_| {}).unwrap_err();
        assert!(e.to_string().contains("--force"), "{e}");
        assert!(e.is_bad_input());
        let forced = TargetNeeds { force: true, ..needs(true) };
        assert!(prepare_targets(&[spec(&f, None)], forced, 1, &mut |_| {}).is_ok());
        assert_eq!(std::fs::read(&f).unwrap(), vec![7u8; 1 << 16], "preparing must not change the file");
    }

    #[test]
    fn missing_directory_and_no_space_leave_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let e = prepare_targets(&[spec(&dir.path().join("nope/x.dat"), None)], needs(false), 1, &mut |_| {}).unwrap_err();
        assert!(e.to_string().contains("does not exist"), "{e}");
        let e = prepare_targets(&[spec(dir.path(), Some(1 << 50))], needs(false), 1, &mut |_| {}).unwrap_err();
        assert!(e.to_string().contains("not enough free space"), "{e}");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn too_small_for_one_block() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("small.dat");
        std::fs::write(&f, vec![0u8; 1000]).unwrap();
        let e = prepare_targets(&[spec(&f, None)], needs(false), 1, &mut |_| {}).unwrap_err();
        assert!(e.to_string().contains("too small"), "{e}");
    }

    #[test]
    fn a_planted_sidecar_beside_a_link_forges_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim.dat");
        let content = vec![9u8; 1 << 16];
        std::fs::write(&victim, &content).unwrap();
        let link = dir.path().join("looks-ours.dat");
        std::os::unix::fs::symlink(&victim, &link).unwrap();
        // The old forgery: an empty sidecar next to the link, and one next to the victim.
        std::fs::write(dir.path().join(".looks-ours.dat.flashscan"), b"").unwrap();
        std::fs::write(dir.path().join(".victim.dat.flashscan"), b"created by flashscan io\n").unwrap();
        assert!(!is_marked(&link) && !is_marked(&victim));
        for path in [&link, &victim] {
            let e = prepare_targets(&[spec(path, None)], needs(true), 1, &mut |_| {}).unwrap_err();
            assert!(e.to_string().contains("--force"), "{e}");
        }
        assert_eq!(std::fs::read(&victim).unwrap(), content);
        // A link to a file flashscan did create is fine: the mark is on the resolved target.
        let ours = prepare_targets(&[spec(&dir.path().join("ours.dat"), Some(1 << 20))], needs(true), 1, &mut |_| {}).unwrap();
        let link_to_ours = dir.path().join("link-to-ours.dat");
        std::os::unix::fs::symlink(&ours[0].path, &link_to_ours).unwrap();
        assert!(is_marked(&link_to_ours));
        let p = prepare_targets(&[spec(&link_to_ours, None)], needs(true), 1, &mut |_| {}).unwrap();
        assert!(p[0].ours && p[0].file_id == ours[0].file_id && p[0].file_id.is_some());
    }

    #[test]
    fn an_absurd_size_is_refused_and_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        for size in [u64::MAX, u64::MAX - (1 << 20) + 2, (1 << 50) + 1] {
            let e = prepare_targets(&[spec(dir.path(), Some(size))], needs(true), 1, &mut |_| {}).unwrap_err();
            assert!(e.to_string().contains("not a usable test file size"), "{e}");
        }
        assert_eq!(round_size(u64::MAX), u64::MAX, "saturates, never wraps to 0");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}
