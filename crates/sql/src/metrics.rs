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
///
/// A scan unit can outlive its statement (a LIMIT satisfied, a join done early: the unit
/// stops at its next batch, then reports), so each report carries the statement it was
/// started for, and reports from earlier statements are dropped instead of counting
/// against the next one.
#[derive(Debug, Default)]
pub struct ScanLog {
    state: Mutex<LogState>,
}

#[derive(Debug, Default)]
struct LogState {
    /// Bumped by every `take`.
    statement: u64,
    tables: BTreeMap<String, TableScanFigures>,
}

impl ScanLog {
    pub fn new() -> Arc<ScanLog> {
        Arc::new(ScanLog::default())
    }

    /// The statement scans started now belong to.
    pub fn statement(&self) -> u64 {
        self.lock().statement
    }

    /// A scan was planned: how many partitions it reads and how many it skipped.
    pub fn record_plan(&self, table: &str, partitions_total: u64, partitions_pruned: u64, table_bytes: u64) {
        let mut state = self.lock();
        let t = state.tables.entry(table.to_string()).or_default();
        t.partitions_total = partitions_total;
        t.partitions_pruned += partitions_pruned;
        t.table_bytes = table_bytes;
    }

    /// A unit of `statement` finished; ignored when that statement's figures were taken.
    pub fn record_unit(&self, statement: u64, table: &str, f: &UnitFigures) {
        let mut state = self.lock();
        if state.statement != statement {
            return;
        }
        let t = state.tables.entry(table.to_string()).or_default();
        t.figures.add(f);
        t.units_read += 1;
    }

    /// The figures so far, and a fresh start for the next statement.
    pub fn take(&self) -> BTreeMap<String, TableScanFigures> {
        let mut state = self.lock();
        state.statement += 1;
        std::mem::take(&mut state.tables)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, LogState> {
        // A panic elsewhere while holding the lock must not lose the figures nor panic here.
        match self.state.lock() {
            Ok(s) => s,
            Err(poisoned) => poisoned.into_inner(),
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_unit_reporting_after_its_statement_was_taken_is_dropped() {
        let log = ScanLog::new();
        let figures = UnitFigures { bytes_read: 8192, pages_read: 1, ..UnitFigures::default() };
        let first = log.statement();
        log.record_unit(first, "t", &figures);
        assert_eq!(log.take().get("t").map(|t| t.figures.bytes_read), Some(8192));
        // A straggler of the first statement reports during the second: not counted.
        let second = log.statement();
        log.record_unit(first, "t", &figures);
        log.record_unit(second, "t", &figures);
        let taken = log.take();
        assert_eq!(taken.get("t").map(|t| (t.figures.bytes_read, t.units_read)), Some((8192, 1)));
    }
}
