//! The cost bench's results and their text and CSV printers.

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

impl CostReport {
    pub fn to_text(&self) -> String {
        let mut s = String::new();
        s.push_str("Scans: CPU µs per page (needle-in-haystack in memory / from disk; aggregate in memory)\n");
        s.push_str(&format!("{:>10} {:>8} {:>10} {:>10} {:>10} {:>12}\n", "rows/page", "pages", "memory", "disk", "aggregate", "memory/row"));
        for r in &self.scans {
            s.push_str(&format!(
                "{:>10} {:>8} {:>10.2} {:>10.2} {:>10.2} {:>12.3}\n",
                r.rows_per_page,
                r.pages_count,
                r.memory_cpu_us_per_page,
                r.disk_cpu_us_per_page,
                r.aggregate_cpu_us_per_page,
                r.memory_cpu_us_per_row()
            ));
        }
        s.push_str(&format!("Evicting a clean page: {:.2} CPU µs\n\n", self.eviction_cpu_us_per_page));
        s.push_str(&format!("Key lookups (engine {}): CPU µs per row and per read, rows/s and reads/s\n", self.engine));
        s.push_str(&format!("{:>9} {:<18} {:>8} {:>8} {:>12} {:>11} {:>9} {:>9}\n", "rows/qry", "mode", "rows", "reads", "rows/s", "reads/s", "µs/row", "µs/read"));
        for r in &self.lookups {
            s.push_str(&format!(
                "{:>9} {:<18} {:>8} {:>8} {:>12.0} {:>11.0} {:>9.2} {:>9.2}\n",
                r.rows_per_query, r.mode, r.rows_count, r.reads_count, r.rows_per_s, r.reads_per_s, r.cpu_us_per_row, r.cpu_us_per_read
            ));
        }
        s
    }

    /// One CSV with a `section` column (scan, eviction, lookup).
    pub fn to_csv(&self) -> String {
        let mut s = String::from("section,rows_per_page,pages,memory_cpu_us_per_page,disk_cpu_us_per_page,aggregate_cpu_us_per_page,rows_per_query,mode,queries,rows,reads,rows_per_s,reads_per_s,cpu_us_per_row,cpu_us_per_read\n");
        for r in &self.scans {
            s.push_str(&format!("scan,{},{},{:.4},{:.4},{:.4},,,,,,,,,\n", r.rows_per_page, r.pages_count, r.memory_cpu_us_per_page, r.disk_cpu_us_per_page, r.aggregate_cpu_us_per_page));
        }
        s.push_str(&format!("eviction,,,,{:.4},,,,,,,,,,\n", self.eviction_cpu_us_per_page));
        for r in &self.lookups {
            s.push_str(&format!(
                "lookup,,,,,,{},{},{},{},{},{:.1},{:.1},{:.4},{:.4}\n",
                r.rows_per_query, r.mode, r.queries_count, r.rows_count, r.reads_count, r.rows_per_s, r.reads_per_s, r.cpu_us_per_row, r.cpu_us_per_read
            ));
        }
        s
    }
}
