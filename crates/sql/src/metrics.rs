//! Where a SQL scan's time went, recorded once and read by two printers: DataFusion's
//! metrics (so `EXPLAIN ANALYZE` shows them on the scan node) and the session's scan log
//! (so `--json` and the tests see bytes read, pages and waits per table).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use datafusion::physical_plan::metrics::{Count, ExecutionPlanMetricsSet, MetricBuilder, Time};

use crate::reader::UnitFigures;

/// The DataFusion metrics of one execution partition of a flashscan scan.
pub struct UnitMetrics {
    bytes_read: Count,
    reads: Count,
    pages_read: Count,
    rows_scanned: Count,
    io_wait: Time,
    decode_time: Time,
    deliver_time: Time,
    scan_time: Time,
}

impl UnitMetrics {
    pub fn new(set: &ExecutionPlanMetricsSet, partition: usize) -> UnitMetrics {
        let count = |name: &'static str| MetricBuilder::new(set).counter(name, partition);
        let time = |name: &'static str| MetricBuilder::new(set).subset_time(name, partition);
        UnitMetrics {
            bytes_read: count("bytes_read"),
            reads: count("reads"),
            pages_read: count("pages_read"),
            rows_scanned: count("rows_scanned"),
            io_wait: time("io_wait"),
            decode_time: time("decode_time"),
            deliver_time: time("deliver_time"),
            scan_time: time("scan_time"),
        }
    }

    pub fn record(&self, f: &UnitFigures) {
        self.bytes_read.add(f.bytes_read as usize);
        self.reads.add(f.reads_count as usize);
        self.pages_read.add(f.pages_read as usize);
        self.rows_scanned.add(f.rows_scanned as usize);
        self.io_wait.add_duration(Duration::from_nanos(f.io_wait_ns));
        self.decode_time.add_duration(Duration::from_nanos(f.decode_ns));
        self.deliver_time.add_duration(Duration::from_nanos(f.deliver_ns));
        self.scan_time.add_duration(Duration::from_nanos(f.elapsed_ns));
    }
}

/// What the scans of one table did during one query.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TableScanFigures {
    pub figures: UnitFigures,
    /// Execution partitions (units) read.
    pub units_read: u64,
    /// Flashscan partitions the filters ruled out without reading.
    pub partitions_pruned: u64,
    pub partitions_total: u64,
    /// Bytes the table holds in the pages a full scan reads.
    pub table_bytes: u64,
}

/// Every scan's figures since the last `take`, by table. One per session, shared by all its
/// table providers; the session takes it after each query.
#[derive(Debug, Default)]
pub struct ScanLog {
    tables: Mutex<BTreeMap<String, TableScanFigures>>,
}

impl ScanLog {
    pub fn new() -> Arc<ScanLog> {
        Arc::new(ScanLog::default())
    }

    /// A scan was planned: how many partitions it reads and how many it skipped.
    pub fn record_plan(&self, table: &str, partitions_total: u64, partitions_pruned: u64, table_bytes: u64) {
        self.with_table(table, |t| {
            t.partitions_total = partitions_total;
            t.partitions_pruned += partitions_pruned;
            t.table_bytes = table_bytes;
        });
    }

    pub fn record_unit(&self, table: &str, f: &UnitFigures) {
        self.with_table(table, |t| {
            t.figures.add(f);
            t.units_read += 1;
        });
    }

    /// The figures so far, and a fresh start for the next query.
    pub fn take(&self) -> BTreeMap<String, TableScanFigures> {
        match self.tables.lock() {
            Ok(mut t) => std::mem::take(&mut *t),
            Err(poisoned) => std::mem::take(&mut *poisoned.into_inner()),
        }
    }

    fn with_table(&self, table: &str, f: impl FnOnce(&mut TableScanFigures)) {
        // A panic elsewhere while holding the lock must not lose the figures nor panic here.
        let mut tables = match self.tables.lock() {
            Ok(t) => t,
            Err(poisoned) => poisoned.into_inner(),
        };
        f(tables.entry(table.to_string()).or_default());
    }
}

/// The scan figures of a whole query, all tables added up.
pub fn total_of(tables: &BTreeMap<String, TableScanFigures>) -> UnitFigures {
    let mut total = UnitFigures::default();
    for t in tables.values() {
        total.add(&t.figures);
    }
    total
}
