//! The files a lookup reads, as one `FileSet` (the table's data files in catalog order,
//! then the index file), and the mapping from a page id to its buffer pool key. Keys name
//! files by their pool file id (one per file for the whole process, see
//! `flashscan_buffer::file_registry`), so a page read here is the page a scan or a writer
//! sees; `path` and `size_bytes` take pool file ids too.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use flashscan_buffer::{BufferPool, PageKey};
use flashscan_io::{FileSet, FileStats, OpenMode};
use flashscan_storage::{Database, PageId, TableMeta, PAGE_SIZE_BYTES};

use crate::error::IndexError;

pub struct TableFiles {
    pub files: Arc<FileSet>,
    /// Data file id → pool file id.
    file_index_by_id: HashMap<u32, u32>,
    /// Pool file id of each extra file, in the order given.
    pub extra_file_indexes: Vec<u32>,
    /// By index in `files`.
    pub paths: Vec<PathBuf>,
    /// Pool file id → index in `files`.
    local_by_pool_id: HashMap<u32, u32>,
    /// Pool file id → the catalog's data file id (page ids carry it).
    data_file_id_by_pool_id: HashMap<u32, u32>,
}

impl TableFiles {
    /// Opens the table's data files and `extra` files (O_DIRECT when `direct`), checking
    /// that every run sits where its page ids say (offset = page index × 8 KB), which is
    /// what lets a locator find its page without the run list.
    pub fn open(db: &Database, table: &TableMeta, extra: &[PathBuf], direct: bool, pool: &BufferPool) -> Result<TableFiles, IndexError> {
        let mut set = FileSet::new();
        let mut file_index_by_id = HashMap::new();
        let mut local_by_pool_id = HashMap::new();
        let mut data_file_id_by_pool_id = HashMap::new();
        let mut paths = Vec::new();
        let mode = OpenMode { direct, write: false };
        for f in &table.files {
            let path = db.resolve(&f.path);
            // O_NOFOLLOW: a link at a data file's name is an error, not a read of elsewhere.
            let i = set.add_with_flags(&path, mode, libc::O_NOFOLLOW, Arc::new(FileStats::default()))?;
            let id = pool.register_file(&path)?;
            file_index_by_id.insert(f.file_id, id);
            local_by_pool_id.insert(id, i);
            data_file_id_by_pool_id.insert(id, f.file_id);
            paths.push(path);
        }
        for p in &table.partitions {
            for run in &p.runs {
                let id = PageId(run.first_page_id);
                if run.offset_bytes != id.page_index_in_file() as u64 * PAGE_SIZE_BYTES as u64 || !file_index_by_id.contains_key(&id.file_id()) {
                    return Err(IndexError::UnsupportedLayout {
                        table: table.name.clone(),
                        reason: format!("run at offset {} of {} starts with page id {:#x}, which does not name that place", run.offset_bytes, run.file, run.first_page_id),
                    });
                }
            }
        }
        let mut extra_file_indexes = Vec::new();
        for p in extra {
            let i = set.add_with_flags(p, mode, libc::O_NOFOLLOW, Arc::new(FileStats::default()))?;
            let id = pool.register_file(p)?;
            local_by_pool_id.insert(id, i);
            extra_file_indexes.push(id);
            paths.push(p.clone());
        }
        Ok(TableFiles { files: Arc::new(set), file_index_by_id, extra_file_indexes, paths, local_by_pool_id, data_file_id_by_pool_id })
    }

    /// The pool key of a heap page, or an error naming a locator that points nowhere.
    #[inline]
    pub fn page_key(&self, id: PageId, table: &str) -> Result<PageKey, IndexError> {
        match self.file_index_by_id.get(&id.file_id()) {
            Some(&i) => Ok(PageKey::new(i, id.page_index_in_file() as u64)),
            None => Err(IndexError::UnsupportedLayout { table: table.into(), reason: format!("page id {:#x} names data file {} which the table does not have: rebuild the index", id.0, id.file_id()) }),
        }
    }

    fn local(&self, file_id: u32) -> u32 {
        match self.local_by_pool_id.get(&file_id) {
            Some(&i) => i,
            None => panic!("pool file id {file_id} is not one of this table's files"),
        }
    }

    /// The catalog's data file id of pool file `file_id` (`None` for the index file).
    pub fn data_file_id(&self, file_id: u32) -> Option<u32> {
        self.data_file_id_by_pool_id.get(&file_id).copied()
    }

    /// The path of pool file `file_id` (one of these files).
    pub fn path(&self, file_id: u32) -> &Path {
        &self.paths[self.local(file_id) as usize]
    }

    pub fn size_bytes(&self, file_id: u32) -> u64 {
        self.files.get(self.local(file_id)).size_bytes
    }
}
