//! The cost bench's results: one struct filled by the measurement, read by the printers
//! (`crate::table` for text and CSV, `crate::chart` for the SVG).

use serde::Serialize;

#[derive(Debug, Clone, Serialize)]
pub struct ScanCostRow {
    pub rows_per_page: usize,
    pub pages_count: u64,
    /// Needle-in-haystack scan (a predicate few rows meet), every page in the pool.
    pub memory_cpu_us_per_page: f64,
    /// The same scan with every page read from the device (O_DIRECT, large reads), no evictions.
    pub disk_cpu_us_per_page: f64,
    /// COUNT(*) and SUM(val) of every row, in memory.
    pub aggregate_cpu_us_per_page: f64,
}

impl ScanCostRow {
    pub fn memory_cpu_us_per_row(&self) -> f64 {
        self.memory_cpu_us_per_page / self.rows_per_page as f64
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct LookupCostRow {
    pub rows_per_query: usize,
    /// memory, cold-8k-sync, cold-8k-prefetch, cold-64k-sync, cold-64k-prefetch.
    pub mode: String,
    pub queries_count: u64,
    pub rows_count: u64,
    pub reads_count: u64,
    pub rows_per_s: f64,
    pub reads_per_s: f64,
    pub cpu_us_per_row: f64,
    pub cpu_us_per_read: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct CostReport {
    pub scans: Vec<ScanCostRow>,
    /// Extra CPU per page of a disk scan that must evict a page for every page it reads.
    pub eviction_cpu_us_per_page: f64,
    pub lookups: Vec<LookupCostRow>,
    pub engine: String,
    pub options: String,
}
