//! Files an engine works on, possibly spread over several directories (volumes).
//! Requests name a file by its index in the set; io_uring registers the descriptors.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::error::IoError;
use crate::file_stats::FileStats;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpenMode {
    /// O_DIRECT: bypass the page cache. Offsets, lengths and buffers must be aligned.
    pub direct: bool,
    pub write: bool,
}

#[derive(Debug)]
pub struct OpenFile {
    pub path: PathBuf,
    pub file: File,
    pub size_bytes: u64,
    pub direct: bool,
    /// Alignment O_DIRECT needs for offsets and lengths on this file (1 when buffered).
    pub offset_align_bytes: u32,
    pub stats: Arc<FileStats>,
}

#[derive(Debug, Default)]
pub struct FileSet {
    files: Vec<OpenFile>,
}

impl FileSet {
    pub fn new() -> FileSet {
        FileSet { files: Vec::new() }
    }

    pub fn open(paths: &[PathBuf], mode: OpenMode) -> Result<FileSet, IoError> {
        let mut set = FileSet::new();
        for p in paths {
            set.add(p, mode, Arc::new(FileStats::default()))?;
        }
        Ok(set)
    }

    /// Opens `path` and appends it; returns its index. `stats` may be shared with other
    /// sets that open the same file (several threads, one set each).
    pub fn add(&mut self, path: &Path, mode: OpenMode, stats: Arc<FileStats>) -> Result<u32, IoError> {
        self.add_with_flags(path, mode, 0, stats)
    }

    /// [`FileSet::add`] with extra `open(2)` flags, e.g. `O_DSYNC` so that every write is
    /// durable when it completes (the workbench's `--sync`, as a log flush is).
    pub fn add_with_flags(&mut self, path: &Path, mode: OpenMode, extra_open_flags: i32, stats: Arc<FileStats>) -> Result<u32, IoError> {
        let file = open_file(path, mode, extra_open_flags)?;
        let size_bytes = file
            .metadata()
            .map_err(|source| IoError::Open { path: path.to_path_buf(), source })?
            .len();
        let offset_align_bytes = if mode.direct { direct_io_align_bytes(&file) } else { 1 };
        self.files.push(OpenFile {
            path: path.to_path_buf(),
            file,
            size_bytes,
            direct: mode.direct,
            offset_align_bytes,
            stats,
        });
        Ok(self.files.len() as u32 - 1)
    }

    pub fn len(&self) -> usize {
        self.files.len()
    }

    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }

    pub fn get(&self, index: u32) -> &OpenFile {
        &self.files[index as usize]
    }

    pub fn iter(&self) -> impl Iterator<Item = &OpenFile> {
        self.files.iter()
    }

    pub fn raw_fds(&self) -> Vec<i32> {
        self.files.iter().map(|f| f.file.as_raw_fd()).collect()
    }
}

fn open_file(path: &Path, mode: OpenMode, extra_open_flags: i32) -> Result<File, IoError> {
    let mut options = OpenOptions::new();
    options.read(true).write(mode.write);
    let direct_flag = if mode.direct { libc::O_DIRECT } else { 0 };
    options.custom_flags(direct_flag | extra_open_flags);
    match options.open(path) {
        Ok(f) => Ok(f),
        Err(e) if mode.direct && e.raw_os_error() == Some(libc::EINVAL) => {
            Err(IoError::DirectUnsupported { path: path.to_path_buf() })
        }
        Err(source) => Err(IoError::Open { path: path.to_path_buf(), source }),
    }
}

/// The offset/length alignment O_DIRECT needs: statx(STATX_DIOALIGN) where the kernel
/// reports it (Linux 6.1+), else 4096, which every device we target accepts.
pub fn direct_io_align_bytes(file: &File) -> u32 {
    const STATX_DIOALIGN: u32 = 0x2000;
    // SAFETY: statx writes into the zeroed struct we own; the fd is valid while `file` lives.
    unsafe {
        let mut stx: libc::statx = std::mem::zeroed();
        let empty = c"";
        let rc = libc::statx(file.as_raw_fd(), empty.as_ptr(), libc::AT_EMPTY_PATH, STATX_DIOALIGN, &mut stx);
        if rc == 0 && stx.stx_mask & STATX_DIOALIGN != 0 && stx.stx_dio_offset_align > 0 {
            return stx.stx_dio_offset_align;
        }
    }
    4096
}
