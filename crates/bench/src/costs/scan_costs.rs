//! Scan costs: CPU µs per page for tables of 1…323 rows per page — in memory (every page a
//! buffer pool hit), from disk (O_DIRECT 256 KB reads, 4 in flight, every page verified and
//! installed in the pool; no evictions), and aggregating every row in memory — and the
//! extra cost of evicting a page (the disk scan again through a pool an eighth the size).

use std::path::Path;

use flashscan_buffer::{BufferPool, Fetch, LoadTicket, PageKey, PageReader};
use flashscan_io::{open_engine, EngineConfig, EngineKind};
use flashscan_storage::heap::heap_page::HeapPageRows;
use flashscan_storage::{verify_page, Database, PageId, TableMeta, PAGE_SIZE_BYTES};

use super::report::ScanCostRow;
use super::{CostsOptions, SCAN_ROWS_PER_PAGE};
use flashscan_index::table_files::TableFiles;
use flashscan_measure::cpu::process_cpu_ns;

use crate::error::BenchError;
use crate::synth::{write_table, SynthSpec};

const SCAN_READ_PAGES: u32 = 32;
const SCAN_DEPTH: u32 = 4;
/// Memory scans are repeated and averaged: one pass of a small table is too short to time.
const MEMORY_PASSES: u32 = 5;
/// Offsets of `id` and `val` in a synthetic row (after the 1-byte null bitmap).
const ID_OFFSET: usize = 1;
const VAL_OFFSET: usize = 9;

pub struct ScanCosts {
    pub rows: Vec<ScanCostRow>,
    pub eviction_cpu_us_per_page: f64,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum ScanOp {
    /// WHERE id < 10: reads one column of every row, keeps almost nothing.
    Needle,
    /// COUNT(*), SUM(val).
    Aggregate,
}

#[derive(Default)]
struct Acc {
    rows: u64,
    matches: u64,
    sum: i64,
}

/// Reuses a synthetic table if one of this shape exists, else writes it.
pub(crate) fn ensure_table(dir: &Path, spec: &SynthSpec) -> Result<TableMeta, BenchError> {
    if let Ok(db) = Database::open(dir) {
        if let Ok(t) = db.table(&spec.name) {
            if t.source == spec.description() && t.row_count == spec.row_count {
                return Ok(t.clone());
            }
        }
    }
    write_table(dir, spec)
}

/// Reads `id` and `val` of every row of one page through storage's row-by-slot reader (the
/// page format's own slot array reader, as key lookups use it).
#[inline]
fn scan_page(rows: &HeapPageRows<'_>, op: ScanOp, acc: &mut Acc) -> Result<(), BenchError> {
    let row_count = rows.row_count();
    for slot in 0..row_count {
        let row = rows.row(slot)?;
        let read = |o: usize| row.get(o..o + 8).and_then(|b| b.try_into().ok()).map_or(0, i64::from_le_bytes);
        match op {
            ScanOp::Needle => {
                if read(ID_OFFSET) < 10 {
                    acc.matches += 1;
                    acc.sum += read(VAL_OFFSET);
                }
            }
            ScanOp::Aggregate => {
                acc.matches += 1;
                acc.sum += read(VAL_OFFSET);
            }
        }
    }
    acc.rows += u64::from(row_count);
    Ok(())
}

struct ScanTarget<'a> {
    table: &'a TableMeta,
    files: TableFiles,
    keys: Vec<(PageKey, PageId)>,
}

impl<'a> ScanTarget<'a> {
    fn open(db: &Database, table: &'a TableMeta, pool: &BufferPool) -> Result<ScanTarget<'a>, BenchError> {
        let files = TableFiles::open(db, table, &[], true, pool)?;
        let mut keys = Vec::new();
        for p in &table.partitions {
            for run in &p.runs {
                for i in 0..run.page_count as u64 {
                    let id = PageId(run.first_page_id + i);
                    keys.push((files.page_key(id, &table.name)?, id));
                }
            }
        }
        Ok(ScanTarget { table, files, keys })
    }

    /// Every page through the pool, from memory (they must be resident).
    fn scan_memory(&self, pool: &BufferPool, op: ScanOp, acc: &mut Acc) -> Result<(), BenchError> {
        for &(key, id) in &self.keys {
            let guard = pool.get_resident(key).ok_or_else(|| BenchError::NotResident(format!("page {key:?} of {} fell out of the pool during an in-memory scan", self.table.name)))?;
            scan_page(&HeapPageRows::new(guard.data(), id, self.files.path(key.file_index), key.offset_bytes())?, op, acc)?;
        }
        Ok(())
    }

    /// The random path's reader over this table's files (O_DIRECT, 4 reads of 32 pages).
    fn reader<'p>(&self, pool: &'p BufferPool) -> Result<PageReader<Vec<(PageKey, PageId, LoadTicket<'p>)>>, BenchError> {
        let config = EngineConfig::for_depth(SCAN_DEPTH, SCAN_READ_PAGES as usize * PAGE_SIZE_BYTES).on_one_thread();
        let engine = open_engine(EngineKind::Auto, self.files.files.clone(), config, &mut |_| {})?;
        Ok(PageReader::new(pool, engine)?)
    }

    /// Every page read from the files in runs of 32 pages, 4 reads in flight, each read
    /// carrying the load tickets of the pages it fills.
    fn scan_disk<'p>(&self, pool: &'p BufferPool, reader: &mut PageReader<Vec<(PageKey, PageId, LoadTicket<'p>)>>, op: ScanOp, acc: &mut Acc) -> Result<(), BenchError> {
        let result = self.scan_disk_inner(pool, reader, op, acc);
        if result.is_err() {
            reader.drain();
        }
        result
    }

    fn scan_disk_inner<'p>(&self, pool: &'p BufferPool, reader: &mut PageReader<Vec<(PageKey, PageId, LoadTicket<'p>)>>, op: ScanOp, acc: &mut Acc) -> Result<(), BenchError> {
        let mut next = 0usize;
        loop {
            while next < self.keys.len() && reader.has_free_slot() {
                let (first_key, _) = self.keys[next];
                let mut wanted = Vec::new();
                let mut n = 0u32;
                while n < SCAN_READ_PAGES && next < self.keys.len() {
                    let (key, id) = self.keys[next];
                    if key.file_index != first_key.file_index || key.page_number != first_key.page_number + n as u64 {
                        break;
                    }
                    match pool.fetch(key)? {
                        Fetch::Hit(g) => scan_page(&HeapPageRows::new(g.data(), id, self.files.path(key.file_index), key.offset_bytes())?, op, acc)?,
                        Fetch::Miss(t) => wanted.push((key, id, t)),
                    }
                    next += 1;
                    n += 1;
                }
                if wanted.is_empty() {
                    continue;
                }
                reader.queue_read(first_key.file_index, first_key.offset_bytes(), n * PAGE_SIZE_BYTES as u32, wanted)?;
            }
            let files = &self.files;
            let done = reader.complete_next(|c| -> Result<(), BenchError> {
                let bytes = c.result?;
                pool.counters().read(c.completion.length_bytes as u64);
                for (key, id, ticket) in c.tag {
                    let at = (key.offset_bytes() - c.completion.offset_bytes) as usize;
                    let path = files.path(key.file_index);
                    let guard = ticket.complete_from(&bytes[at..at + PAGE_SIZE_BYTES], |b| verify_page(b, id, path, key.offset_bytes()).map(drop).map_err(BenchError::from))?;
                    scan_page(&HeapPageRows::new(guard.data(), id, path, key.offset_bytes())?, op, acc)?;
                }
                Ok(())
            })?;
            match done {
                Some(r) => r?,
                None => return Ok(()),
            }
        }
    }
}

fn us_per(ns: u64, count: u64) -> f64 {
    if count == 0 {
        0.0
    } else {
        ns as f64 / 1e3 / count as f64
    }
}

pub fn run(dir: &Path, options: &CostsOptions, progress: &mut dyn FnMut(&str)) -> Result<ScanCosts, BenchError> {
    let mut rows = Vec::new();
    let mut eviction_cpu_us_per_page = 0.0;
    for &n in SCAN_ROWS_PER_PAGE.iter() {
        let spec = SynthSpec { name: format!("scan_{n}"), rows_per_page: n, row_count: options.scan_pages * n as u64, shuffle_seed: None };
        progress(&format!("scan costs: table of {n} rows per page"));
        ensure_table(dir, &spec)?;
        let db = Database::open(dir)?;
        let table = db.table(&spec.name)?.clone();
        let pages = table.partitions.iter().flat_map(|p| &p.runs).map(|r| r.page_count as u64).sum::<u64>();
        let pool = BufferPool::with_frames((pages as u32).saturating_add(256))?;
        let target = ScanTarget::open(&db, &table, &pool)?;
        debug_assert_eq!(target.keys.len() as u64, pages);
        let mut reader = target.reader(&pool)?;

        let mut acc = Acc::default();
        let cpu = process_cpu_ns();
        target.scan_disk(&pool, &mut reader, ScanOp::Needle, &mut acc)?;
        let disk_ns = process_cpu_ns() - cpu;
        debug_assert_eq!(acc.rows, spec.row_count);

        let cpu = process_cpu_ns();
        for _ in 0..MEMORY_PASSES {
            target.scan_memory(&pool, ScanOp::Needle, &mut acc)?;
        }
        let memory_ns = (process_cpu_ns() - cpu) / MEMORY_PASSES as u64;

        let cpu = process_cpu_ns();
        for _ in 0..MEMORY_PASSES {
            target.scan_memory(&pool, ScanOp::Aggregate, &mut acc)?;
        }
        let aggregate_ns = (process_cpu_ns() - cpu) / MEMORY_PASSES as u64;
        std::hint::black_box(&acc.sum);

        if n == 1 || n == 20 {
            // Eviction: the same cold disk scan through a pool an eighth the table's size,
            // so nearly every page read evicts one; the difference per eviction is its cost.
            let small = BufferPool::with_frames(((pages / 8) as u32).max(SCAN_DEPTH * SCAN_READ_PAGES * 2))?;
            // Page keys name files by the pool's ids: the small pool gets its own.
            let small_target = ScanTarget::open(&db, &table, &small)?;
            let mut small_reader = small_target.reader(&small)?;
            let cpu = process_cpu_ns();
            small_target.scan_disk(&small, &mut small_reader, ScanOp::Needle, &mut Acc::default())?;
            let small_ns = process_cpu_ns() - cpu;
            let evictions = small.snapshot().evictions_count;
            if n == 1 && evictions > 0 {
                eviction_cpu_us_per_page = (small_ns as f64 - disk_ns as f64) / 1e3 / evictions as f64;
            }
        }
        rows.push(ScanCostRow {
            rows_per_page: n,
            pages_count: pages,
            memory_cpu_us_per_page: us_per(memory_ns, pages),
            disk_cpu_us_per_page: us_per(disk_ns, pages),
            aggregate_cpu_us_per_page: us_per(aggregate_ns, pages),
        });
    }
    Ok(ScanCosts { rows, eviction_cpu_us_per_page })
}
