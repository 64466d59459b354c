//! The one function SQL scans go through: read a scan unit's pages with flashscan's I/O
//! layer and hand decoded batches to a callback.
//!
//! Underneath is `flashscan_exec::scan_batches` (read-ahead of large reads through the I/O
//! engines, page verification, decode of the projected columns), run with one worker:
//! DataFusion already runs one unit per core, so the unit's scan stays on its thread.
//! Swapping the reader (another format, another exec API) touches only this file.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;
use flashscan_exec::scan::ReadConfig;
use flashscan_exec::{scan_batches, BatchSink, ColumnStoreTable, ExecError, PageDecoder, RunSpec, ScanFilter, TableSource};
use flashscan_io::EngineKind;
use flashscan_storage::{HeapDecoder, TableMeta, PAGE_SIZE_BYTES};

use crate::scan_units::ScanUnit;

/// Default read size: exec's default, large enough to reach a flash device's sequential rate.
pub const READ_IO_SIZE_BYTES_DEFAULT: usize = flashscan_exec::limits::SCAN_IO_SIZE_BYTES_DEFAULT;
/// Default reads in flight per unit.
pub const READ_QUEUE_DEPTH_DEFAULT: u32 = flashscan_exec::limits::SCAN_QUEUE_DEPTH_DEFAULT;

/// How SQL scans read. Buffered by default: SQL users rerun and refine queries, and the
/// page cache is what makes the second run fast; `direct` reads from the device each time.
#[derive(Debug, Clone, Copy)]
pub struct ReadOptions {
    pub io_size_bytes: usize,
    pub queue_depth: u32,
    pub direct: bool,
    pub engine_kind: EngineKind,
}

impl Default for ReadOptions {
    fn default() -> ReadOptions {
        ReadOptions {
            io_size_bytes: READ_IO_SIZE_BYTES_DEFAULT,
            queue_depth: READ_QUEUE_DEPTH_DEFAULT,
            direct: false,
            engine_kind: EngineKind::Auto,
        }
    }
}

/// What one unit's scan did: where its time went.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct UnitFigures {
    pub bytes_read: u64,
    pub reads_count: u64,
    pub pages_read: u64,
    pub rows_scanned: u64,
    /// Blocked on the device with nothing decoded to hand on.
    pub io_wait_ns: u64,
    /// Verifying and decoding pages into Arrow.
    pub decode_ns: u64,
    /// Handing batches to DataFusion (time the operators above kept the scan waiting).
    pub deliver_ns: u64,
    /// Wall time of the unit's scan, start to last batch. (No CPU time: exec measures the
    /// whole process's, which counts the other units running beside this one.)
    pub elapsed_ns: u64,
}

impl UnitFigures {
    pub fn add(&mut self, o: &UnitFigures) {
        self.bytes_read += o.bytes_read;
        self.reads_count += o.reads_count;
        self.pages_read += o.pages_read;
        self.rows_scanned += o.rows_scanned;
        self.io_wait_ns += o.io_wait_ns;
        self.decode_ns += o.decode_ns;
        self.deliver_ns += o.deliver_ns;
        self.elapsed_ns += o.elapsed_ns;
    }
}

/// What the callback tells the reader after each batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    Continue,
    /// The query needs no more rows (a LIMIT was reached, or the query was cancelled).
    Stop,
}

/// Reads every page (or row group) of `unit` and calls `deliver` with each decoded batch
/// of the `projection` columns (indexes into the table's columns); `filter` lets a column
/// store skip row groups by min/max (rows are still filtered above). Returns the unit's figures;
/// a scan stopped early by `Flow::Stop` returns what it had read by then, as far as known.
pub fn read_unit(
    table: &TableMeta,
    db_dir: &Path,
    unit: &ScanUnit,
    projection: &[usize],
    filter: &ScanFilter,
    options: &ReadOptions,
    deliver: &(dyn Fn(RecordBatch) -> Flow + Sync),
) -> Result<UnitFigures, ExecError> {
    let decoded = Arc::new(DecodedCounts::default());
    let heap_source;
    let column_store_source;
    let source: &dyn TableSource = if table.is_column_store() {
        // The unit's row groups only; their metadata is read (and verified) here.
        let keep = |partition: u32, row_group: usize| partition == unit.partition_index && unit.row_groups.contains(&row_group);
        column_store_source = ColumnStoreTable::with_selection(db_dir, table, &keep)?;
        &column_store_source
    } else {
        heap_source = HeapUnitSource { table, db_dir, unit, decoded: decoded.clone() };
        &heap_source
    };
    let config = ReadConfig {
        io_size_bytes: options.io_size_bytes,
        queue_depth: options.queue_depth,
        thread_count: 1,
        direct: options.direct,
        engine_kind: options.engine_kind,
    };
    let stopped = AtomicBool::new(false);
    let make_sink = |_worker: u32| -> Result<DeliverSink, ExecError> { Ok(DeliverSink { deliver, stopped: &stopped }) };
    match scan_batches(source, projection, filter, &config, &make_sink) {
        Ok((_, stats)) => {
            let t = stats.total();
            Ok(UnitFigures {
                bytes_read: t.read.bytes_read,
                reads_count: t.read.reads_count,
                pages_read: t.pages_read,
                rows_scanned: t.rows_scanned,
                io_wait_ns: t.read.io_wait_ns,
                decode_ns: t.decode_ns,
                deliver_ns: t.query_ns,
                elapsed_ns: stats.elapsed_ns,
            })
        }
        // The scan was told to stop: not a failure. Exec's counters went with the error, so
        // count what was decoded: a lower bound (reads still in flight are not counted).
        Err(_) if stopped.load(Ordering::Relaxed) => {
            let pages = decoded.pages.load(Ordering::Relaxed);
            Ok(UnitFigures {
                bytes_read: pages * PAGE_SIZE_BYTES as u64,
                pages_read: pages,
                rows_scanned: decoded.rows.load(Ordering::Relaxed),
                ..UnitFigures::default()
            })
        }
        Err(e) => Err(e),
    }
}

/// Hands batches to the callback; turns `Flow::Stop` into `ExecError::Stopped`, which exec's
/// scan takes as control flow (it ends early and successfully), and remembers that it did so.
struct DeliverSink<'a> {
    deliver: &'a (dyn Fn(RecordBatch) -> Flow + Sync),
    stopped: &'a AtomicBool,
}

impl BatchSink for DeliverSink<'_> {
    fn consume(&mut self, batch: &RecordBatch) -> Result<(), ExecError> {
        match (self.deliver)(batch.clone()) {
            Flow::Continue => Ok(()),
            Flow::Stop => {
                self.stopped.store(true, Ordering::Relaxed);
                Err(ExecError::Stopped)
            }
        }
    }
}

/// A heap table restricted to one scan unit, as exec's scan sees tables.
struct HeapUnitSource<'a> {
    table: &'a TableMeta,
    db_dir: &'a Path,
    unit: &'a ScanUnit,
    decoded: Arc<DecodedCounts>,
}

/// Pages and rows decoded so far, counted beside exec's own figures: the only ones left
/// when a scan is stopped early.
#[derive(Default)]
struct DecodedCounts {
    pages: AtomicU64,
    rows: AtomicU64,
}

impl TableSource for HeapUnitSource<'_> {
    fn table_name(&self) -> &str {
        &self.table.name
    }

    fn format_name(&self) -> String {
        self.table.format.clone()
    }

    fn schema(&self) -> SchemaRef {
        self.table.arrow_schema()
    }

    fn page_size_bytes(&self) -> usize {
        PAGE_SIZE_BYTES
    }

    fn row_count(&self) -> u64 {
        self.unit.row_count
    }

    fn partition_count(&self) -> u32 {
        1
    }

    fn runs(&self) -> Vec<RunSpec> {
        self.unit
            .runs
            .iter()
            .map(|r| RunSpec {
                // join keeps an absolute path as is (files on other volumes).
                path: PathBuf::from(self.db_dir).join(&r.file),
                offset_bytes: r.offset_bytes,
                page_count: r.page_count,
                first_page_id: r.first_page_id,
                partition_index: self.unit.partition_index,
            })
            .collect()
    }

    fn new_decoder(&self, projection: &[usize]) -> Result<Box<dyn PageDecoder>, ExecError> {
        let decoder = HeapDecoder::try_new(self.table, projection)?;
        Ok(Box::new(HeapPageDecoder { decoder, decoded: self.decoded.clone() }))
    }
}

struct HeapPageDecoder {
    decoder: HeapDecoder,
    decoded: Arc<DecodedCounts>,
}

impl PageDecoder for HeapPageDecoder {
    fn push_page(&mut self, page: &[u8], expected_page_id: u64, path: &Path, offset_bytes: u64) -> Result<u32, ExecError> {
        let rows = self.decoder.push_page(page, expected_page_id, path, offset_bytes).map_err(|e| ExecError::Corrupt {
            path: path.to_path_buf(),
            offset_bytes,
            what: e.to_string(),
        })?;
        self.decoded.pages.fetch_add(1, Ordering::Relaxed);
        self.decoded.rows.fetch_add(rows as u64, Ordering::Relaxed);
        Ok(rows)
    }

    fn finish_batch(&mut self) -> Result<RecordBatch, ExecError> {
        Ok(self.decoder.finish())
    }
}
