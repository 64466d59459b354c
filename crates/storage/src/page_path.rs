//! Storage's reads of its own files for tools, rebuilds, tests and checks, through the
//! buffer pool's streaming path (the one page path: a page dirty in the pool is seen here
//! instead of the file's bytes). One extent at a time, in file order, so callers decode in
//! order as they did with pread.

use std::path::{Path, PathBuf};

use flashscan_buffer::{BufferPool, Extent, ScanStream, StreamConfig};
use flashscan_io::EngineKind;

use crate::error::StorageError;

/// Largest read issued: 1 MB, as the plain readers always read.
pub const READ_BYTES_MAX: usize = 1 << 20;

pub struct FileReader {
    stream: ScanStream<'static, ()>,
    paths: Vec<PathBuf>,
}

impl FileReader {
    /// Opens `paths` (buffered, one read at a time: the plain pread these tools used).
    pub fn open(paths: &[PathBuf]) -> Result<FileReader, StorageError> {
        Self::open_sized(paths, READ_BYTES_MAX)
    }

    /// Like `open`, with reads of at most `io_size_bytes` (a small metadata read need not
    /// set up a 1 MB buffer).
    pub fn open_sized(paths: &[PathBuf], io_size_bytes: usize) -> Result<FileReader, StorageError> {
        let io_size_bytes = io_size_bytes.clamp(4096, READ_BYTES_MAX);
        for p in paths {
            // The error users have always seen for a missing data file.
            std::fs::metadata(p).map_err(|e| StorageError::io("opening data file", p, e))?;
        }
        let config = StreamConfig { depth: 1, io_size_bytes, direct: false, engine_kind: EngineKind::Psync, single_thread: true };
        let stream = ScanStream::open(BufferPool::global(), paths, None, config, &mut |_| {})?;
        Ok(FileReader { stream, paths: paths.to_vec() })
    }

    /// Opens each distinct path of `paths` once, in the order first seen (the files of a
    /// partition's runs or row groups); `None` when there are none.
    pub fn open_distinct(paths: impl IntoIterator<Item = PathBuf>) -> Result<Option<FileReader>, StorageError> {
        let mut distinct: Vec<PathBuf> = Vec::new();
        for path in paths {
            if !distinct.contains(&path) {
                distinct.push(path);
            }
        }
        if distinct.is_empty() {
            return Ok(None);
        }
        Self::open(&distinct).map(Some)
    }

    /// Index of `path` among the opened files; a path not opened is a bug of the caller,
    /// never a silent read of another file.
    pub fn file_index(&self, path: &Path) -> Result<u32, StorageError> {
        match self.paths.iter().position(|p| p == path) {
            Some(i) => Ok(i as u32),
            None => Err(StorageError::FileNotOpened { path: path.to_path_buf() }),
        }
    }

    /// Hands `consume` the bytes of `[offset, offset + length)` of file `file_index` in
    /// order, an extent (at most `READ_BYTES_MAX`, cut at `align_bytes` multiples) at a time.
    pub fn for_each_extent(
        &mut self,
        file_index: u32,
        offset_bytes: u64,
        length_bytes: u64,
        align_bytes: u64,
        consume: &mut dyn FnMut(u64, &[u8]) -> Result<(), StorageError>,
    ) -> Result<(), StorageError> {
        let file = self.stream.files().get(file_index);
        // Offsets and lengths come from the catalog: a sum past u64 is a file too short.
        let end = offset_bytes.checked_add(length_bytes).unwrap_or(u64::MAX);
        if end > file.size_bytes {
            let actual = std::fs::metadata(&file.path).map(|m| m.len()).unwrap_or(file.size_bytes);
            return Err(StorageError::FileTruncated { file: file.path.clone(), expected_bytes: end, actual_bytes: actual });
        }
        let io = self.stream.slot_size_bytes() as u64;
        let step = ((io / align_bytes.max(1)) * align_bytes.max(1)).max(1);
        let mut at = offset_bytes;
        let mut next = || {
            if at >= end {
                return None;
            }
            let len = (end - at).min(step);
            let extent = Extent { file_index, offset_bytes: at, length_bytes: len as u32 };
            at += len;
            Some((extent, ()))
        };
        let mut expected = offset_bytes;
        self.stream.run(&mut || next(), &mut |(), bytes: &[u8]| {
            // Depth 1: extents come back in the order asked.
            let offset = expected;
            expected += bytes.len() as u64;
            consume(offset, bytes)
        })
    }

    /// `length` bytes at `offset` of file `file_index`, or says the file is too short.
    pub fn read(&mut self, file_index: u32, offset_bytes: u64, length_bytes: u64) -> Result<Vec<u8>, StorageError> {
        // The length comes from the catalog: never allocate more than the file can hold
        // (for_each_extent refuses a range past the end before anything is read).
        let file_bytes = self.stream.files().get(file_index).size_bytes;
        let mut out = Vec::with_capacity(length_bytes.min(file_bytes) as usize);
        self.for_each_extent(file_index, offset_bytes, length_bytes, 1, &mut |_, bytes| {
            out.extend_from_slice(bytes);
            Ok(())
        })?;
        Ok(out)
    }
}
