//! A lookup session: one table, one index, one I/O engine (its queue depth and read size
//! fixed when it opens), reading through a shared buffer pool. Sessions are per thread.

use std::path::Path;
use std::time::Instant;

use flashscan_buffer::{BufferPool, LoadTicket, PageReader};
use flashscan_io::{open_engine, EngineConfig, EngineKind};
use flashscan_storage::{Database, DeletedRowSet, PageId, TableMeta};

use super::plan::{PageGroup, ReadPlan};
use super::stats::LookupStats;
use crate::btree::BTree;
use crate::catalog::{IndexCatalog, IndexMeta};
use flashscan_measure::cpu::process_cpu_ns;
use crate::error::IndexError;
use crate::key::KeySchema;
use crate::locator::RowLocator;
use crate::table_files::TableFiles;

/// Deepest prefetch window a session accepts (each slot holds one read of io_size).
pub const LOOKUP_DEPTH_MAX: u32 = 512;
pub const PREFETCH_FROM_ROWS_DEFAULT: u32 = 25;
pub const LOOKUP_DEPTH_DEFAULT: u32 = 64;
const _: () = assert!(LOOKUP_DEPTH_MAX <= flashscan_io::limits::QUEUE_DEPTH_MAX);

#[derive(Debug, Clone, Copy)]
pub struct LookupOptions {
    /// Lookups finding fewer rows than this read one page at a time; at or above it they
    /// prefetch (SQL Server switches near 25 rows).
    pub prefetch_from_rows: u32,
    pub depth: u32,
    /// 8192 (the page) or 65536 (the extent around it).
    pub io_size_bytes: u32,
    /// O_DIRECT: cold reads come from the device, not the page cache.
    pub direct: bool,
    pub engine: EngineKind,
    /// The session never leaves the thread that opened it (lets io_uring defer its
    /// completion work to our own calls).
    pub single_thread_engine: bool,
}

impl Default for LookupOptions {
    fn default() -> Self {
        LookupOptions { prefetch_from_rows: PREFETCH_FROM_ROWS_DEFAULT, depth: LOOKUP_DEPTH_DEFAULT, io_size_bytes: 8192, direct: false, engine: EngineKind::Auto, single_thread_engine: true }
    }
}

impl LookupOptions {
    pub fn validate(&self) -> Result<(), IndexError> {
        if self.io_size_bytes != 8192 && self.io_size_bytes != 65536 {
            return Err(IndexError::InvalidArgument(format!("--io-size {} bytes: use 8K or 64K", self.io_size_bytes)));
        }
        if self.depth == 0 || self.depth > LOOKUP_DEPTH_MAX {
            return Err(IndexError::InvalidArgument(format!("--depth {}: use 1..={LOOKUP_DEPTH_MAX}", self.depth)));
        }
        Ok(())
    }
}

/// What to look up: a list of keys (each may be a prefix of a composite key), or a range.
#[derive(Debug, Clone)]
pub enum KeyQuery {
    Keys(Vec<Vec<u8>>),
    Range { lo: Vec<u8>, hi: Vec<u8> },
}

/// What a heap read in flight carries: its unit, and the wanted pages with the load
/// tickets the read fills.
pub(super) type FetchTag<'p> = (usize, Vec<(PageGroup, LoadTicket<'p>)>);

pub struct LookupSession<'p> {
    pub(super) pool: &'p BufferPool,
    pub(super) files: TableFiles,
    /// The random path: index nodes one at a time, heap pages in windows of tagged reads.
    pub(super) reader: PageReader<FetchTag<'p>>,
    pub tree: BTree,
    pub table: TableMeta,
    pub schema: KeySchema,
    pub index: IndexMeta,
    pub(super) options: LookupOptions,
    pub(super) locators: Vec<RowLocator>,
    pub(super) plan: ReadPlan,
    /// The table's deleted rows as of the session's opening: never returned.
    deleted: DeletedRowSet,
}

impl<'p> LookupSession<'p> {
    pub fn open(dir: &Path, table: &str, index_name: &str, pool: &'p BufferPool, options: LookupOptions, notice: &mut dyn FnMut(&str)) -> Result<LookupSession<'p>, IndexError> {
        options.validate()?;
        let db = Database::open(dir)?;
        let table = db.table(table)?.clone();
        let catalog = IndexCatalog::read(dir)?;
        let index = catalog.find(&table.name, index_name)?.clone();
        if index.table_load_lsn != table.load_lsn {
            return Err(IndexError::InvalidArgument(format!(
                "index {} was built on an earlier load of table {} (LSN {} vs {}): drop and recreate it",
                index.name, table.name, index.table_load_lsn, table.load_lsn
            )));
        }
        let schema = KeySchema::new(&table, &index.columns)?;
        let deleted = DeletedRowSet::of_table(dir, &table)?;
        let index_path = db.resolve(&index.file);
        let files = TableFiles::open(&db, &table, std::slice::from_ref(&index_path), options.direct, pool)?;
        let mut config = EngineConfig::for_depth(options.depth, options.io_size_bytes as usize);
        if options.single_thread_engine {
            // Completions are reaped only inside our own io_uring_enter: less CPU per read.
            config = config.on_one_thread();
        }
        let engine = open_engine(options.engine, files.files.clone(), config, notice)?;
        let mut reader = PageReader::new(pool, engine)?;
        let tree = BTree::open(pool, &mut reader, files.extra_file_indexes[0], &index_path)?;
        if tree.meta != index.tree {
            return Err(IndexError::CatalogCorrupt { path: IndexCatalog::path(dir), reason: format!("index {} does not match its file {}", index.name, index_path.display()) });
        }
        Ok(LookupSession {
            pool,
            files,
            reader,
            tree,
            table,
            schema,
            index,
            options,
            locators: Vec::new(),
            plan: ReadPlan::default(),
            deleted,
        })
    }

    pub fn engine_name(&self) -> &'static str {
        self.reader.engine_name()
    }

    pub fn options(&self) -> LookupOptions {
        self.options
    }

    /// Changes the prefetch switch point (the depth and read size are fixed per session).
    pub fn set_prefetch_from_rows(&mut self, rows: u32) {
        self.options.prefetch_from_rows = rows;
    }

    /// Runs one lookup; every row found goes to `sink` with its locator (rows arrive
    /// grouped by page, in page order of completion, not in key order).
    pub fn run(&mut self, query: &KeyQuery, sink: &mut dyn FnMut(RowLocator, &[u8])) -> Result<LookupStats, IndexError> {
        let started = Instant::now();
        let cpu_started = process_cpu_ns();
        let buffer_before = self.pool.snapshot();
        self.locators.clear();
        let keys_count = match query {
            KeyQuery::Keys(keys) => {
                // Sorted seeks walk the tree's upper levels in order: warmer caches.
                let mut sorted: Vec<&Vec<u8>> = keys.iter().collect();
                sorted.sort_unstable();
                sorted.dedup();
                for key in &sorted {
                    self.tree.seek(self.pool, &mut self.reader, key, &mut self.locators)?;
                }
                keys.len() as u64
            }
            KeyQuery::Range { lo, hi } => {
                self.tree.range(self.pool, &mut self.reader, lo, hi, &mut self.locators)?;
                1
            }
        };
        self.locators.sort_unstable();
        // An index names the rows live when it was built (`index create` skips deleted
        // ones, and DELETE refuses an indexed table), so none should be deleted; checked
        // anyway, before any page is read, so a lookup never returns a row a DELETE removed.
        let found_count = self.locators.len();
        if !self.deleted.is_empty() {
            self.locators.retain(|l| !self.deleted.contains(PageId(l.page_id), l.slot));
        }
        let deleted_rows_skipped = (found_count - self.locators.len()) as u64;
        self.plan.build(&self.locators, &self.files, &self.table.name, self.options.io_size_bytes)?;
        let prefetch = self.locators.len() as u64 >= self.options.prefetch_from_rows as u64;
        let depth = if prefetch { self.options.depth } else { 1 };
        let fetched = self.fetch_units(depth, sink);
        if fetched.is_err() {
            // What is still in flight is waited for; its tickets abandon their loads.
            self.reader.drain();
        }
        let (rows_count, heap_reads_count, io_wait_ns) = fetched?;
        debug_assert_eq!(rows_count, self.locators.len() as u64);
        let buffer = self.pool.snapshot().since(&buffer_before);
        Ok(LookupStats {
            mode: if prefetch { "prefetch" } else { "sync" }.into(),
            engine: self.reader.engine_name().into(),
            keys_count,
            rows_count,
            deleted_rows_skipped,
            heap_pages_count: self.plan.pages.len() as u64,
            heap_reads_count,
            reads_count: buffer.reads_count,
            read_bytes: buffer.read_bytes,
            io_size_bytes: self.options.io_size_bytes,
            depth,
            elapsed_ns: started.elapsed().as_nanos() as u64,
            cpu_ns: process_cpu_ns().saturating_sub(cpu_started),
            io_wait_ns,
            buffer,
        })
    }

    /// Drops the table's heap pages from the pool (the index stays): the next run reads
    /// every heap page from the files — from the device when the session is O_DIRECT.
    pub fn clear_heap_pages(&self) -> Result<u32, IndexError> {
        // Only this table's data files: the pool is shared with the rest of the process.
        let files = &self.files;
        Ok(self.pool.clear_matching(|k| files.data_file_id(k.file_index).is_some())?)
    }
}
