//! Lookup costs: for 10 … 10,000 rows per query, random keys of a 20-rows-per-page table
//! whose ids are shuffled over its pages (so no two wanted rows share a page, as the
//! article arranged), measured in memory and cold — 8 KB reads one at a time, 8 KB reads
//! prefetched, the automatic switch at 25 rows, and the same with 64 KB reads.
//!
//! Cold: every query first runs once (the index nodes on its path come into memory), then
//! the heap pages are dropped from the pool and the query runs again, measured, reading
//! every heap page from the device (O_DIRECT).

use std::path::Path;

use flashscan_buffer::BufferPool;
use flashscan_io::EngineKind;

use super::report::LookupCostRow;
use super::scan_costs::ensure_table;
use super::{CostsOptions, LOOKUP_ROWS_PER_QUERY};
use crate::error::BenchError;
use crate::synth::SynthSpec;
use flashscan_index::{create_index, drop_index, CreateIndex, IndexCatalog, KeyQuery, LookupOptions, LookupSession, LookupStats};

pub const LOOKUP_TABLE: &str = "lookup";
pub const LOOKUP_INDEX: &str = "by_id";
const QUERIES_PER_SIZE_MAX: usize = 200;

/// Writes the lookup table and its index unless they exist in this shape.
pub fn ensure_lookup_table(dir: &Path, row_count: u64) -> Result<(), BenchError> {
    let spec = SynthSpec { name: LOOKUP_TABLE.into(), rows_per_page: 20, row_count, shuffle_seed: Some(7) };
    let table = ensure_table(dir, &spec)?;
    let catalog = IndexCatalog::read(dir)?;
    let found = catalog.find(LOOKUP_TABLE, LOOKUP_INDEX).ok().map(|i| i.table_load_lsn == table.load_lsn);
    if found != Some(true) {
        if found.is_some() {
            drop_index(dir, LOOKUP_TABLE, LOOKUP_INDEX)?;
        }
        create_index(dir, &CreateIndex { table: LOOKUP_TABLE.into(), name: LOOKUP_INDEX.into(), columns: vec!["id".into()], build_options: None })?;
    }
    Ok(())
}

fn row(rows_per_query: usize, mode: &str, queries: usize, s: &LookupStats) -> LookupCostRow {
    LookupCostRow {
        rows_per_query,
        mode: mode.into(),
        queries_count: queries as u64,
        rows_count: s.rows_count,
        reads_count: s.reads_count,
        rows_per_s: s.rows_per_s(),
        reads_per_s: s.reads_per_s(),
        cpu_us_per_row: s.cpu_us_per_row(),
        cpu_us_per_read: s.cpu_us_per_read(),
    }
}

pub fn run(dir: &Path, options: &CostsOptions, progress: &mut dyn FnMut(&str)) -> Result<(Vec<LookupCostRow>, String), BenchError> {
    progress("lookup costs: table and index");
    ensure_lookup_table(dir, options.lookup_rows)?;
    let pool = BufferPool::new(options.pool_bytes)?;
    let base = LookupOptions { prefetch_from_rows: 25, depth: options.depth, io_size_bytes: 8192, direct: true, engine: EngineKind::Auto, single_thread_engine: true };
    let mut notice = |m: &str| progress(m);
    let mut s8 = LookupSession::open(dir, LOOKUP_TABLE, LOOKUP_INDEX, &pool, base, &mut notice)?;
    let mut s64 = LookupSession::open(dir, LOOKUP_TABLE, LOOKUP_INDEX, &pool, LookupOptions { io_size_bytes: 65536, ..base }, &mut notice)?;
    let engine = s8.engine_name().to_string();
    let mut out = Vec::new();
    let mut seed = 100u64;
    for &n in LOOKUP_ROWS_PER_QUERY.iter() {
        let queries_count = ((options.lookup_rows_target as usize) / n).clamp(1, QUERIES_PER_SIZE_MAX);
        progress(&format!("lookup costs: {n} rows per query x {queries_count} queries"));
        let queries: Vec<KeyQuery> = (0..queries_count)
            .map(|_| {
                seed += 1;
                s8.tree.sample_keys(n, seed).map(KeyQuery::Keys)
            })
            .collect::<Result<_, _>>()?;
        // In memory: one pass loads index and heap pages, the second is measured.
        pool.clear()?;
        for q in &queries {
            s8.run(q, &mut |_, _| {})?;
        }
        let mut memory = LookupStats::default();
        for q in &queries {
            let s = s8.run(q, &mut |_, row| {
                std::hint::black_box(row.first());
            })?;
            memory.accumulate(&s);
        }
        out.push(row(n, "memory", queries_count, &memory));
        for (extent_reads, mode, prefetch_from) in [
            (false, "cold-8k-sync", u32::MAX),
            (false, "cold-8k-prefetch", 0),
            (false, "cold-8k-auto", 25),
            (true, "cold-64k-sync", u32::MAX),
            (true, "cold-64k-prefetch", 0),
        ] {
            let session = if extent_reads { &mut s64 } else { &mut s8 };
            session.set_prefetch_from_rows(prefetch_from);
            let mut total = LookupStats::default();
            for q in &queries {
                session.clear_heap_pages()?;
                let s = session.run(q, &mut |_, row| {
                    std::hint::black_box(row.first());
                })?;
                total.accumulate(&s);
            }
            out.push(row(n, mode, queries_count, &total));
        }
    }
    Ok((out, engine))
}
