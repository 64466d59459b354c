//! `flashscan bench costs`: the CPU cost structure of database I/O, after Joe Chang's
//! "IO Cost Structure" (SQL Server 2008, seeds/002): scans of tables with 1…323 rows per
//! page (in memory, from disk, aggregating; the cost of evicting a page), and key lookups
//! of 10…10,000 rows per query (in memory, cold with 8 KB and 64 KB reads, synchronous vs
//! prefetching). One measurement core ([`scan_costs`], [`lookup_costs`]) fills
//! [`report::CostReport`]; the table, CSV (`crate::table`) and SVG (`crate::chart`) printers
//! only read it.

pub mod lookup_costs;
pub mod report;
pub mod scan_costs;

pub use report::CostReport;

use std::path::{Path, PathBuf};

use crate::error::BenchError;

pub const SCAN_ROWS_PER_PAGE: [usize; 9] = [1, 2, 5, 10, 20, 40, 80, 158, 323];
pub const LOOKUP_ROWS_PER_QUERY: [usize; 11] = [10, 20, 25, 26, 30, 50, 100, 300, 1000, 3000, 10000];

#[derive(Debug, Clone)]
pub struct CostsOptions {
    /// Pages of each scan table.
    pub scan_pages: u64,
    /// Rows of the lookup table (20 rows per page).
    pub lookup_rows: u64,
    /// Rows each lookup configuration reads in total (queries are repeated up to this).
    pub lookup_rows_target: u64,
    pub depth: u32,
    pub pool_bytes: u64,
}

impl Default for CostsOptions {
    fn default() -> Self {
        CostsOptions { scan_pages: 4096, lookup_rows: 1_000_000, lookup_rows_target: 20_000, depth: 64, pool_bytes: 1 << 30 }
    }
}

impl CostsOptions {
    /// Small sizes for tests.
    pub fn tiny() -> CostsOptions {
        CostsOptions { scan_pages: 64, lookup_rows: 20_000, lookup_rows_target: 200, depth: 16, pool_bytes: 64 << 20 }
    }
}

/// The bench's own database, inside `db` so it sits on the same volume.
pub fn bench_dir(db: &Path) -> PathBuf {
    db.join("bench_costs")
}

pub fn run(db: &Path, options: &CostsOptions, progress: &mut dyn FnMut(&str)) -> Result<CostReport, BenchError> {
    let dir = bench_dir(db);
    let scans = scan_costs::run(&dir, options, progress)?;
    let (lookups, engine) = lookup_costs::run(&dir, options, progress)?;
    Ok(CostReport { scans: scans.rows, eviction_cpu_us_per_page: scans.eviction_cpu_us_per_page, lookups, engine, options: format!("{options:?}") })
}
