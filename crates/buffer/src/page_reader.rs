//! The random path's I/O handle: one request queue over an engine whose files are known to
//! the pool, so page keys (pool file ids) map to the engine's file indexes. Lookups and
//! index seeks read through it: one page at a time (`BufferPool::read_page`) or a window of
//! tagged reads whose completions fill the load tickets they carry (`queue_read`,
//! `complete_next`) — the slots, the dispatch and the drain belong to the queue.

use std::collections::HashMap;

use flashscan_io::{Completed, IoEngine, IoError, RequestQueue};

use crate::error::BufferError;
use crate::pool::BufferPool;

pub struct PageReader<T = ()> {
    queue: RequestQueue<T>,
    /// Pool file id of each of the engine's files.
    file_ids: Vec<u32>,
    local_by_id: HashMap<u32, u32>,
}

impl<T> PageReader<T> {
    /// Takes an idle engine and registers each of its files with `pool`.
    pub fn new(pool: &BufferPool, engine: Box<dyn IoEngine>) -> Result<PageReader<T>, BufferError> {
        let mut file_ids = Vec::with_capacity(engine.files().len());
        let mut local_by_id = HashMap::new();
        for (local, file) in engine.files().iter().enumerate() {
            let id = pool.register_file(&file.path)?;
            file_ids.push(id);
            local_by_id.insert(id, local as u32);
        }
        Ok(PageReader { queue: RequestQueue::new(engine), file_ids, local_by_id })
    }

    /// The pool file id of the engine's file `local`.
    pub fn file_id(&self, local: u32) -> u32 {
        self.file_ids[local as usize]
    }

    /// The engine's index of pool file `file_id`, if this reader has it open.
    pub fn local_index(&self, file_id: u32) -> Option<u32> {
        self.local_by_id.get(&file_id).copied()
    }

    pub fn engine_name(&self) -> &'static str {
        self.queue.engine_name()
    }

    pub fn queue_mut(&mut self) -> &mut RequestQueue<T> {
        &mut self.queue
    }

    pub fn has_free_slot(&self) -> bool {
        self.queue.has_free_slot()
    }

    pub fn is_idle(&self) -> bool {
        self.queue.is_idle()
    }

    /// Queues a read of pool file `file_id`, tagged (e.g. with the load tickets it fills).
    pub fn queue_read(&mut self, file_id: u32, offset_bytes: u64, length_bytes: u32, tag: T) -> Result<(), BufferError> {
        let local = self.local_index(file_id).ok_or_else(|| BufferError::File { path: Default::default(), what: format!("file id {file_id} is not open in this reader") })?;
        Ok(self.queue.queue_read(local, offset_bytes, length_bytes, tag)?)
    }

    /// The next completed read, to `on_done` (see `RequestQueue::complete_next`).
    pub fn complete_next<R>(&mut self, on_done: impl FnOnce(Completed<'_, T>) -> R) -> Result<Option<R>, IoError> {
        self.queue.complete_next(on_done)
    }

    /// After a failure mid-batch: waits for what is in flight and drops the tags (load
    /// tickets dropped this way abandon their loads, so waiting readers retry).
    pub fn drain(&mut self) {
        self.queue.drain();
    }
}
