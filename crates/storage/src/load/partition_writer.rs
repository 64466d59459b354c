//! The writer: takes full pages per partition, places them (see `placement`), seals them
//! (page id, LSN, checksum) and writes each file sequentially in large buffered writes,
//! growing files in large preallocated steps. It remembers every file it created so a
//! failed load can remove exactly those, and nothing else.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};

use crate::error::StorageError;
use crate::heap::header::seal;
use crate::heap::{Lsn, PageId, PAGE_SIZE_BYTES};
use crate::placement::{round_up_to_extent, Stripe};
use crate::table_meta::{DataFileMeta, FilegroupMeta, PageRun, PartitionMeta, RowGroupMeta};

use super::batch_encoder::PagesMessage;

/// Memory for write buffers over all files of a load.
pub const WRITE_BUFFERS_BYTES_MAX: usize = 64 << 20;
/// Bounds of one file's write buffer: at least an extent, at most 4 MB.
pub const WRITE_BUFFER_BYTES_MIN: usize = 64 << 10;
pub const WRITE_BUFFER_BYTES_MAX: usize = 4 << 20;
/// Files grow by preallocation in steps that double from 1 MB up to 256 MB, so small
/// tables stay small and large ones are extended rarely and contiguously.
pub const PREALLOCATE_STEP_BYTES_MIN: u64 = 1 << 20;
pub const PREALLOCATE_STEP_BYTES_MAX: u64 = 256 << 20;

/// Where a table's files go.
pub struct WritePlan {
    pub db_dir: PathBuf,
    pub table_name: String,
    pub partition_count: u32,
    pub volumes: Vec<PathBuf>,
    pub interleave_bytes: u64,
    pub first_file_id: u32,
    pub generation: u64,
    pub lsn: Lsn,
    /// Prefix for files on volumes outside the database directory (the database id), so
    /// two databases sharing a volume never collide.
    pub external_prefix: String,
    /// Test hook: fail as if the disk were full once this many pages are written.
    pub fault_after_pages: Option<u64>,
}

struct DataFile {
    path: PathBuf,
    catalog_path: String,
    volume: String,
    file_id: u32,
    file: File,
    buffer: Vec<u8>,
    buffer_capacity_bytes: usize,
    /// Page index (in the file) of the first page in `buffer`.
    buffer_first_page: u64,
    pages_written: u64,
    allocated_bytes: u64,
    preallocate_step_bytes: u64,
}

impl DataFile {
    fn append(&mut self, page_index: u64, page: &[u8]) -> Result<(), StorageError> {
        // Each file receives its pages in order: writes are sequential appends.
        debug_assert_eq!(page_index, self.pages_written);
        debug_assert_eq!(page.len(), PAGE_SIZE_BYTES);
        self.buffer.extend_from_slice(page);
        self.pages_written += 1;
        if self.buffer.len() >= self.buffer_capacity_bytes {
            self.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<(), StorageError> {
        if self.buffer.is_empty() {
            return Ok(());
        }
        let offset = self.buffer_first_page * PAGE_SIZE_BYTES as u64;
        let end = offset + self.buffer.len() as u64;
        while self.allocated_bytes < end {
            let step = self.preallocate_step_bytes;
            preallocate(&self.file, self.allocated_bytes, step).map_err(|e| StorageError::io("preallocating", &self.path, e))?;
            self.allocated_bytes += step;
            self.preallocate_step_bytes = (step * 2).min(PREALLOCATE_STEP_BYTES_MAX);
        }
        self.file.write_all_at(&self.buffer, offset).map_err(|e| StorageError::io("writing", &self.path, e))?;
        self.buffer_first_page = self.pages_written;
        self.buffer.clear();
        Ok(())
    }
}

/// fallocate where the file system has it (extents reserved up front, ENOSPC early);
/// elsewhere the writes extend the file.
fn preallocate(file: &File, offset: u64, len: u64) -> std::io::Result<()> {
    // SAFETY: fallocate on a file descriptor we own, with no pointers involved.
    let rc = unsafe { libc::fallocate(file.as_raw_fd(), 0, offset as libc::off_t, len as libc::off_t) };
    if rc == 0 {
        return Ok(());
    }
    let e = std::io::Error::last_os_error();
    match e.raw_os_error() {
        Some(libc::EOPNOTSUPP) | Some(libc::ENOSYS) => Ok(()),
        _ => Err(e),
    }
}

struct PartitionState {
    stripe: Stripe,
    /// One slot per volume; opened when the first page for it arrives.
    files: Vec<Option<DataFile>>,
    page_count: u64,
    row_count: u64,
    /// Column store partitions: the row groups written, each also one run.
    row_groups: Vec<RowGroupMeta>,
    row_group_runs: Vec<PageRun>,
}

pub struct PartitionWriter {
    plan: WritePlan,
    partitions: Vec<PartitionState>,
    buffer_bytes: usize,
    created: Vec<PathBuf>,
    pages_written_total: u64,
    bytes_written_total: u64,
}

/// What the writer produced, ready for the catalog.
pub struct WrittenTable {
    pub partitions: Vec<PartitionMeta>,
    pub filegroups: Vec<FilegroupMeta>,
    pub files: Vec<DataFileMeta>,
    pub row_count: u64,
    pub size_bytes: u64,
}

impl PartitionWriter {
    pub fn new(plan: WritePlan) -> PartitionWriter {
        debug_assert!(!plan.volumes.is_empty());
        debug_assert!(plan.partition_count > 0);
        let file_slots = plan.volumes.len();
        let files_max = plan.partition_count as usize * file_slots;
        let buffer_bytes = (WRITE_BUFFERS_BYTES_MAX / files_max).clamp(WRITE_BUFFER_BYTES_MIN, WRITE_BUFFER_BYTES_MAX) / PAGE_SIZE_BYTES * PAGE_SIZE_BYTES;
        let partitions = (0..plan.partition_count)
            .map(|_| PartitionState {
                stripe: Stripe::new(file_slots as u32, plan.interleave_bytes),
                files: (0..file_slots).map(|_| None).collect(),
                page_count: 0,
                row_count: 0,
                row_groups: Vec::new(),
                row_group_runs: Vec::new(),
            })
            .collect();
        PartitionWriter { plan, partitions, buffer_bytes, created: Vec::new(), pages_written_total: 0, bytes_written_total: 0 }
    }

    pub fn bytes_written(&self) -> u64 {
        self.bytes_written_total
    }

    /// Places, seals and buffers the message's pages.
    pub fn write(&mut self, mut message: PagesMessage) -> Result<(), StorageError> {
        debug_assert_eq!(message.pages.len() % PAGE_SIZE_BYTES, 0);
        let p = message.partition as usize;
        debug_assert!(p < self.partitions.len());
        for page in message.pages.chunks_exact_mut(PAGE_SIZE_BYTES) {
            let seq = self.partitions[p].page_count;
            let (slot, index) = self.partitions[p].stripe.locate(seq);
            if self.partitions[p].files[slot as usize].is_none() {
                let f = self.create_file(p as u32, slot)?;
                self.partitions[p].files[slot as usize] = Some(f);
            }
            let Some(file) = self.partitions[p].files[slot as usize].as_mut() else {
                return Err(StorageError::Worker("data file missing after create".into()));
            };
            if let Some(limit) = self.plan.fault_after_pages {
                if self.pages_written_total >= limit {
                    return Err(StorageError::DiskFull { path: file.path.clone() });
                }
            }
            let index_u32 = u32::try_from(index).map_err(|_| StorageError::InvalidArgument(format!("data file {} would exceed 2^32 pages (32 TB): use more partitions", file.path.display())))?;
            seal(page, PageId::new(file.file_id, index_u32), self.plan.lsn);
            file.append(index, page)?;
            self.partitions[p].page_count += 1;
            self.pages_written_total += 1;
            self.bytes_written_total += PAGE_SIZE_BYTES as u64;
        }
        self.partitions[p].row_count += message.row_count;
        Ok(())
    }

    /// Appends one encoded column store row group (`bytes`, a multiple of 8192, with its
    /// own checksums: nothing is sealed) to partition `partition`. A row group is never
    /// striped: it lands whole in one file, row groups going round-robin over the volumes,
    /// so each is one contiguous range a scan can read column by column.
    pub fn write_row_group(&mut self, partition: u32, bytes: &[u8], row_count: u64, metadata_bytes: u64) -> Result<(), StorageError> {
        assert_eq!(bytes.len() % PAGE_SIZE_BYTES, 0, "row groups are padded to whole pages");
        let p = partition as usize;
        debug_assert!(p < self.partitions.len());
        let slot = (self.partitions[p].row_groups.len() % self.plan.volumes.len()) as u32;
        if self.partitions[p].files[slot as usize].is_none() {
            let f = self.create_file(partition, slot)?;
            self.partitions[p].files[slot as usize] = Some(f);
        }
        let Some(file) = self.partitions[p].files[slot as usize].as_mut() else {
            return Err(StorageError::Worker("data file missing after create".into()));
        };
        let page_count = (bytes.len() / PAGE_SIZE_BYTES) as u64;
        if let Some(limit) = self.plan.fault_after_pages {
            if self.pages_written_total + page_count > limit {
                return Err(StorageError::DiskFull { path: file.path.clone() });
            }
        }
        let first_index = file.pages_written;
        // Page ids hold a 32-bit page number: the row group's last page must fit.
        if u32::try_from(first_index + page_count).is_err() {
            return Err(StorageError::InvalidArgument(format!("data file {} would exceed 2^32 pages (32 TB): use more partitions", file.path.display())));
        }
        for (i, page) in bytes.chunks_exact(PAGE_SIZE_BYTES).enumerate() {
            file.append(first_index + i as u64, page)?;
        }
        let offset_bytes = first_index * PAGE_SIZE_BYTES as u64;
        let catalog_path = file.catalog_path.clone();
        let first_page_id = PageId::new(file.file_id, first_index as u32).0;
        let state = &mut self.partitions[p];
        state.row_groups.push(RowGroupMeta { file: catalog_path.clone(), offset_bytes, total_bytes: bytes.len() as u64, metadata_bytes, row_count });
        state.row_group_runs.push(PageRun { file: catalog_path, offset_bytes, page_count: page_count as u32, first_page_id });
        state.page_count += page_count;
        state.row_count += row_count;
        self.pages_written_total += page_count;
        self.bytes_written_total += bytes.len() as u64;
        Ok(())
    }

    /// The path and catalog path of the file of `partition` on volume `slot`. The name
    /// follows `fs_safe::is_generated_file_name`.
    fn file_paths(&self, partition: u32, slot: u32) -> Result<(PathBuf, String), StorageError> {
        let volume = &self.plan.volumes[slot as usize];
        let name = format!("{}.p{:03}.f{}.g{}.dat", self.plan.table_name, partition, slot, self.plan.generation);
        if same_dir(volume, &self.plan.db_dir) {
            return Ok((self.plan.db_dir.join(&name), name));
        }
        let name = format!("{}.{}", self.plan.external_prefix, name);
        let abs = std::path::absolute(volume.join(&name)).map_err(|e| StorageError::io("resolving", volume.join(&name), e))?;
        debug_assert!(crate::fs_safe::is_generated_file_name(&name));
        Ok((abs.clone(), abs.to_string_lossy().into_owned()))
    }

    /// Every file this writer may create (path, catalog path), for the intent the catalog
    /// records before any is created.
    pub fn planned_paths(&self) -> Result<Vec<(PathBuf, String)>, StorageError> {
        let mut planned = Vec::with_capacity(self.partitions.len() * self.plan.volumes.len());
        for p in 0..self.plan.partition_count {
            for slot in 0..self.plan.volumes.len() as u32 {
                planned.push(self.file_paths(p, slot)?);
            }
        }
        Ok(planned)
    }

    fn create_file(&mut self, partition: u32, slot: u32) -> Result<DataFile, StorageError> {
        let volume = self.plan.volumes[slot as usize].to_string_lossy().into_owned();
        let (path, catalog_path) = self.file_paths(partition, slot)?;
        // O_EXCL|O_NOFOLLOW: never overwrite a file, ours or anyone's, nor write through a link.
        let file = crate::fs_safe::create_new(&path).map_err(|e| {
            if e.kind() == std::io::ErrorKind::AlreadyExists {
                StorageError::InvalidArgument(format!("{} already exists; flashscan never overwrites a file it did not create (is another load running?)", path.display()))
            } else {
                StorageError::io("creating data file", &path, e)
            }
        })?;
        self.created.push(path.clone());
        Ok(DataFile {
            path,
            catalog_path,
            volume,
            file_id: self.plan.first_file_id + partition * self.plan.volumes.len() as u32 + slot,
            file,
            buffer: Vec::with_capacity(self.buffer_bytes),
            buffer_capacity_bytes: self.buffer_bytes,
            buffer_first_page: 0,
            pages_written: 0,
            allocated_bytes: 0,
            preallocate_step_bytes: PREALLOCATE_STEP_BYTES_MIN,
        })
    }

    /// Flushes, trims each file to whole extents, fsyncs files and directories, and
    /// describes the result for the catalog. On error the caller runs `remove_created`.
    pub fn finish(&mut self) -> Result<WrittenTable, StorageError> {
        let mut files_meta = Vec::new();
        let mut filegroups = Vec::new();
        let mut partitions = Vec::new();
        let mut row_count = 0;
        let mut size_bytes = 0;
        for (p, state) in self.partitions.iter_mut().enumerate() {
            let mut file_ids = Vec::new();
            let mut file_paths = Vec::new();
            let mut fg_files = Vec::new();
            for f in state.files.iter_mut().flatten() {
                f.flush()?;
                let len = round_up_to_extent(f.pages_written * PAGE_SIZE_BYTES as u64);
                f.file.set_len(len).map_err(|e| StorageError::io("sizing", &f.path, e))?;
                f.file.sync_all().map_err(|e| StorageError::io("syncing", &f.path, e))?;
                fg_files.push(files_meta.len() as u32);
                files_meta.push(DataFileMeta {
                    file_id: f.file_id,
                    path: f.catalog_path.clone(),
                    volume: f.volume.clone(),
                    size_bytes: len,
                    page_count: f.pages_written,
                });
                file_ids.push(f.file_id);
                file_paths.push(f.catalog_path.clone());
                size_bytes += len;
            }
            // Runs need a path per stripe slot; slots without a file hold no pages.
            let slot_ids: Vec<u32> = state.files.iter().map(|f| f.as_ref().map_or(0, |f| f.file_id)).collect();
            let slot_paths: Vec<String> = state.files.iter().map(|f| f.as_ref().map_or(String::new(), |f| f.catalog_path.clone())).collect();
            let runs = if state.row_groups.is_empty() {
                state.stripe.runs(state.page_count, &slot_ids, &slot_paths)
            } else {
                state.row_group_runs.clone()
            };
            let row_groups = state.row_groups.clone();
            debug_assert!(runs.iter().all(|r| !r.file.is_empty()));
            filegroups.push(FilegroupMeta { index: p as u32, files: fg_files });
            partitions.push(PartitionMeta { index: p as u32, row_count: state.row_count, page_count: state.page_count, filegroup: p as u32, runs, row_groups });
            row_count += state.row_count;
        }
        for v in &self.plan.volumes {
            crate::catalog::sync_dir(v)?;
        }
        Ok(WrittenTable { partitions, filegroups, files: files_meta, row_count, size_bytes })
    }

    /// Removes every file this writer created (and only those).
    pub fn remove_created(&mut self) {
        for p in &mut self.partitions {
            p.files.iter_mut().for_each(|f| *f = None);
        }
        for path in self.created.drain(..) {
            let _ = std::fs::remove_file(&path);
        }
    }
}

pub(crate) fn same_dir(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(x), Ok(y)) => x == y,
        _ => a == b,
    }
}
