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

use std::time::Instant;

use arrow::array::{Array, BooleanArray};
use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;
use datafusion::physical_expr::PhysicalExpr;
use flashscan_exec::scan::ReadConfig;
use flashscan_exec::segment_slices::{SliceDecoder, SliceFilter};
use flashscan_exec::segments::{RowGroupSegments, SegmentSink};
use flashscan_exec::{scan_batches, BatchSink, ColumnStoreTable, ExecError, PageDecoder, RunSpec, ScanFilter, TableSource};
use flashscan_storage::columnstore::VecPool;
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

/// Column store scans decode batches straight from the segments and evaluate the query's
/// filters themselves (issue 13) unless `FLASHSCAN_SQL_SLICES=0` (then whole row groups
/// are decoded and DataFusion runs the filters above the scan: same answers, for timing
/// the two side by side). `cargo test -p flashscan-sql` passes either way.
const SLICES_DEFAULT: bool = true;

/// See `SLICES_DEFAULT`.
pub fn slices_enabled() -> bool {
    std::env::var("FLASHSCAN_SQL_SLICES").map_or(SLICES_DEFAULT, |value| value != "0")
}

/// A predicate a column store scan evaluates itself (DataFusion was told the filter is
/// exact and runs no filter of its own above the scan).
#[derive(Debug, Clone)]
pub struct RowFilter {
    /// The table columns the predicate reads, in the order of its input batch.
    pub columns: Vec<usize>,
    /// Built against a batch of `columns` (a null result does not pass).
    pub predicate: Arc<dyn PhysicalExpr>,
}

impl RowFilter {
    fn evaluate(&self, batch: &RecordBatch) -> Result<BooleanArray, ExecError> {
        let result = self
            .predicate
            .evaluate(batch)
            .and_then(|v| v.into_array(batch.num_rows()))
            .map_err(|e| ExecError::Filter { predicate: self.predicate.to_string(), what: e.to_string() })?;
        result
            .as_any()
            .downcast_ref::<BooleanArray>()
            .cloned()
            .ok_or_else(|| ExecError::Filter { predicate: self.predicate.to_string(), what: format!("gave {}, not booleans", result.data_type()) })
    }
}

/// What a column store scan hands on besides the projection: the rows per batch and the
/// filter it evaluates itself.
#[derive(Debug, Clone, Default)]
pub struct SliceOptions {
    /// Rows per batch decoded from the segments (DataFusion's batch size).
    pub batch_rows: usize,
    pub row_filter: Option<RowFilter>,
}

/// Reads every page (or row group) of `unit` and calls `deliver` with each decoded batch
/// of the `projection` columns (indexes into the table's columns); `filter` lets a column
/// store skip row groups by min/max. A column store decodes `slices.batch_rows` rows at a
/// time straight from its segments and, with `slices.row_filter`, hands on only the rows
/// that pass it (decoding the filter's columns first); a heap hands on every row.
/// Returns the unit's figures; a scan stopped early by `Flow::Stop` returns what it had
/// read by then, as far as known.
#[allow(clippy::too_many_arguments)]
pub fn read_unit(
    table: &TableMeta,
    db_dir: &Path,
    unit: &ScanUnit,
    projection: &[usize],
    filter: &ScanFilter,
    slices: &SliceOptions,
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
    // The filter's columns not projected are decoded after the projected ones, for the
    // filter only.
    let row_filter = slices.row_filter.as_ref().filter(|_| table.is_column_store());
    let mut decode_columns: Vec<usize> = projection.to_vec();
    let mut filter_slots = Vec::new();
    if let Some(f) = row_filter {
        for &c in &f.columns {
            let slot = match decode_columns.iter().position(|&d| d == c) {
                Some(slot) => slot,
                None => {
                    decode_columns.push(c);
                    decode_columns.len() - 1
                }
            };
            filter_slots.push(slot);
        }
    }
    let deliver_ns = AtomicU64::new(0);
    let make_sink = |_worker: u32| -> Result<DeliverSink, ExecError> {
        Ok(DeliverSink {
            deliver,
            stopped: &stopped,
            projected: projection.len(),
            batch_rows: slices.batch_rows,
            row_filter: row_filter.map(|f| (f, filter_slots.clone())),
            pool: VecPool::default(),
            deliver_ns: &deliver_ns,
        })
    };
    match scan_batches(source, &decode_columns, filter, &config, &make_sink) {
        Ok((_, stats)) => {
            let t = stats.total();
            // The sink both decodes slices and delivers them: only the delivering is the
            // operators' time; the rest of the sink's time is decoding.
            let deliver_ns = deliver_ns.load(Ordering::Relaxed).min(t.query_ns);
            Ok(UnitFigures {
                bytes_read: t.read.bytes_read,
                reads_count: t.read.reads_count,
                pages_read: t.pages_read,
                rows_scanned: t.rows_scanned,
                io_wait_ns: t.read.io_wait_ns,
                decode_ns: t.decode_ns + (t.query_ns - deliver_ns),
                deliver_ns,
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
/// Column store row groups arrive as segments and go on in slices of `batch_rows`, filtered
/// by the row filter if any.
struct DeliverSink<'a> {
    deliver: &'a (dyn Fn(RecordBatch) -> Flow + Sync),
    stopped: &'a AtomicBool,
    /// The first `projected` decoded columns are the projection; the rest are read by
    /// the row filter only.
    projected: usize,
    batch_rows: usize,
    /// The filter and where its columns are among the decoded ones.
    row_filter: Option<(&'a RowFilter, Vec<usize>)>,
    pool: VecPool,
    deliver_ns: &'a AtomicU64,
}

impl DeliverSink<'_> {
    fn hand_on(&mut self, batch: RecordBatch) -> Result<(), ExecError> {
        if batch.num_rows() == 0 {
            return Ok(());
        }
        let batch = if batch.num_columns() > self.projected { batch.project(&(0..self.projected).collect::<Vec<_>>())? } else { batch };
        let start = Instant::now();
        let flow = (self.deliver)(batch);
        self.deliver_ns.fetch_add(start.elapsed().as_nanos() as u64, Ordering::Relaxed);
        match flow {
            Flow::Continue => Ok(()),
            Flow::Stop => {
                self.stopped.store(true, Ordering::Relaxed);
                Err(ExecError::Stopped)
            }
        }
    }
}

impl BatchSink for DeliverSink<'_> {
    fn consume(&mut self, batch: &RecordBatch) -> Result<(), ExecError> {
        let batch = match &self.row_filter {
            // Whole batches (COUNT(*) of a column store, or a decoder without segments):
            // the same filter, applied to the batch.
            Some((filter, slots)) => {
                let selection = filter.evaluate(&batch.project(slots)?)?;
                arrow::compute::filter_record_batch(batch, &selection)?
            }
            None => batch.clone(),
        };
        self.hand_on(batch)
    }

    fn segment_sink(&mut self) -> Option<&mut dyn SegmentSink> {
        // `FLASHSCAN_VECTOR_KERNELS=0`: whole row groups decoded, then sliced (for timing
        // the two side by side; same answers).
        (slices_enabled() && flashscan_exec::segments::vector_kernels_enabled()).then_some(self as &mut dyn SegmentSink)
    }
}

impl SegmentSink for DeliverSink<'_> {
    fn consume_segments(&mut self, group: &RowGroupSegments<'_>) -> Result<(), ExecError> {
        let mut slices = SliceDecoder::open(group, self.batch_rows, &mut self.pool)?;
        loop {
            let next = match self.row_filter {
                Some((filter, ref slots)) => {
                    let mut evaluate = |batch: &RecordBatch| filter.evaluate(batch);
                    slices.next_slice(group, Some(&mut SliceFilter { columns: slots.clone(), evaluate: &mut evaluate }))?
                }
                None => slices.next_slice(group, None)?,
            };
            match next {
                Some(batch) => self.hand_on(batch)?,
                None => return Ok(()),
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
