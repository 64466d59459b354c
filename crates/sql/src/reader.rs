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
use arrow::datatypes::{DataType, SchemaRef};
use arrow::record_batch::{RecordBatch, RecordBatchOptions};
use datafusion::physical_expr::PhysicalExpr;
use flashscan_exec::scan::ReadConfig;
use flashscan_exec::segment_slices::{IntegerRange, SliceConjunct, SliceDecoder, SliceFilter};
use flashscan_exec::segments::{RowGroupSegments, SegmentSink};
use flashscan_exec::{scan_batches, BatchSink, ColumnStoreTable, ExecError, PageDecoder, RunSpec, ScanFilter, TableSource};
use flashscan_storage::columnstore::VecPool;
use flashscan_io::EngineKind;
use flashscan_storage::{HeapDecoder, LiveRows, TableMeta, PAGE_SIZE_BYTES};

use crate::scan_units::ScanUnit;
use crate::settings::FlashscanSettings;

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

/// The schema SQL sees for `table`: its own, with strings as views for column stores when
/// `settings` has views on (`FlashscanSettings::string_views`). The table provider declares
/// it and the scan hands on exactly it.
pub fn sql_schema(table: &TableMeta, settings: &FlashscanSettings) -> SchemaRef {
    let schema = table.arrow_schema();
    if table.is_column_store() && settings.string_views() {
        Arc::new(flashscan_exec::segment_slices::with_string_views(&schema))
    } else {
        schema
    }
}

/// Filters a column store scan evaluates itself (DataFusion was told they are exact and
/// runs no filter of its own above the scan): a conjunction, each conjunct over its own
/// columns, so one that reads a single dictionary-coded string column is evaluated once
/// per row group on the dictionary's entries and applied to the codes.
#[derive(Debug, Clone)]
pub struct RowFilter {
    /// The table columns the conjuncts read, each once.
    pub columns: Vec<usize>,
    pub conjuncts: Vec<RowConjunct>,
    /// `flashscan.piecewise_like` of the session that planned the scan.
    pub piecewise_like: bool,
}

/// One conjunct of a `RowFilter`.
#[derive(Debug, Clone)]
pub struct RowConjunct {
    /// Positions in `RowFilter::columns` of the columns it reads, in the order of its
    /// input batch.
    pub inputs: Vec<usize>,
    /// Built against a batch of those columns (a null result does not pass).
    pub predicate: Arc<dyn PhysicalExpr>,
}

impl RowConjunct {
    pub(crate) fn evaluate(&self, batch: &RecordBatch, piecewise_like: bool) -> Result<BooleanArray, ExecError> {
        // A LIKE with several `%` pieces: one substring search per piece instead of Arrow's
        // regular expression (crate::like), unless `flashscan.piecewise_like` is off.
        if piecewise_like {
            if let Some(result) = crate::like::PiecewiseLike::of(&self.predicate).and_then(|like| like.evaluate(batch)) {
                return Ok(result);
            }
        }
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

impl RowConjunct {
    /// The conjunct as an integer range on its one column (`IntegerRange`), when it is
    /// exactly that: comparisons (`<`, `<=`, `=`, `>=`, `>`) of the column with a constant of
    /// the column's own type (so no rounding: the compare is the integers'), ANDed.
    /// `column_type` is the type of the conjunct's one input. None for anything else.
    pub fn integer_range(&self, column_type: &DataType) -> Option<IntegerRange> {
        if self.inputs.len() != 1 {
            return None;
        }
        integer_range_of(&self.predicate, column_type)
    }
}

/// See `RowConjunct::integer_range`: `predicate` over a batch whose column 0 has `column_type`.
fn integer_range_of(predicate: &Arc<dyn PhysicalExpr>, column_type: &DataType) -> Option<IntegerRange> {
    use datafusion::logical_expr::Operator;
    use datafusion::physical_expr::expressions::{BinaryExpr, Column, Literal};
    let binary = predicate.downcast_ref::<BinaryExpr>()?;
    if *binary.op() == Operator::And {
        let left = integer_range_of(binary.left(), column_type)?;
        return Some(left.intersect(&integer_range_of(binary.right(), column_type)?));
    }
    let is_column = |e: &Arc<dyn PhysicalExpr>| e.downcast_ref::<Column>().is_some_and(|c| c.index() == 0);
    let literal = |e: &Arc<dyn PhysicalExpr>| e.downcast_ref::<Literal>().map(|l| l.value().clone());
    let (op, value) = if is_column(binary.left()) {
        (*binary.op(), literal(binary.right())?)
    } else if is_column(binary.right()) {
        (binary.op().swap()?, literal(binary.left())?)
    } else {
        return None;
    };
    if &value.data_type() != column_type {
        return None;
    }
    use datafusion::common::ScalarValue;
    let v: i64 = match value {
        ScalarValue::Int32(Some(v)) | ScalarValue::Date32(Some(v)) => v as i64,
        ScalarValue::Int64(Some(v)) => v,
        ScalarValue::Decimal128(Some(v), _, _) => i64::try_from(v).ok()?,
        // NULL compares to nothing true; other types are not integers the store keeps.
        _ => return None,
    };
    let empty = IntegerRange { low: 1, high: 0 };
    Some(match op {
        Operator::Eq => IntegerRange { low: v, high: v },
        Operator::Lt => v.checked_sub(1).map_or(empty, |high| IntegerRange { low: i64::MIN, high }),
        Operator::LtEq => IntegerRange { low: i64::MIN, high: v },
        Operator::Gt => v.checked_add(1).map_or(empty, |low| IntegerRange { low, high: i64::MAX }),
        Operator::GtEq => IntegerRange { low: v, high: i64::MAX },
        _ => return None,
    })
}

impl std::fmt::Display for RowFilter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let parts: Vec<String> = self.conjuncts.iter().map(|c| c.predicate.to_string()).collect();
        write!(f, "{}", parts.join(" AND "))
    }
}

/// A conjunct as the slice decoder calls it (`SliceConjunct::evaluate`).
pub(crate) type ConjunctEvaluator<'e> = Box<dyn Fn(&RecordBatch) -> Result<BooleanArray, ExecError> + Sync + 'e>;

/// What a column store unit decodes for a row filter, shared by every reader of slices
/// (`read_unit` for `FlashscanExec`, the aggregate kernel's reader): the `outputs` columns
/// first, then the filter's columns not among them (decoded for the filter only); where
/// each of the filter's columns sits in that list; and, per conjunct, the integer range it
/// is, if it is one (compared by the slice decoder itself, without Arrow).
pub(crate) struct FilterDecodePlan {
    pub decode_columns: Vec<usize>,
    pub filter_slots: Vec<usize>,
    pub ranges: Vec<Option<IntegerRange>>,
}

impl FilterDecodePlan {
    pub(crate) fn new(outputs: &[usize], row_filter: Option<&RowFilter>, schema: &arrow::datatypes::Schema) -> FilterDecodePlan {
        let mut decode_columns: Vec<usize> = outputs.to_vec();
        let mut filter_slots = Vec::new();
        let mut ranges = Vec::new();
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
            ranges = f
                .conjuncts
                .iter()
                .map(|c| {
                    let column = f.columns.get(*c.inputs.first()?)?;
                    c.integer_range(schema.fields().get(*column)?.data_type())
                })
                .collect();
        }
        FilterDecodePlan { decode_columns, filter_slots, ranges }
    }
}

impl RowFilter {
    /// One evaluator per conjunct, for `slice_filter` (kept by the caller: the filter
    /// borrows them).
    pub(crate) fn evaluators(&self) -> Vec<ConjunctEvaluator<'_>> {
        self.conjuncts.iter().map(|c| Box::new(move |b: &RecordBatch| c.evaluate(b, self.piecewise_like)) as ConjunctEvaluator<'_>).collect()
    }

    /// The filter as the slice decoder takes it: its columns at `slots` among the decoded
    /// ones, conjunct k evaluated by `evaluators[k]` or compared as `ranges[k]`.
    pub(crate) fn slice_filter<'f>(&self, slots: &[usize], evaluators: &'f [ConjunctEvaluator<'_>], ranges: &[Option<IntegerRange>]) -> SliceFilter<'f> {
        SliceFilter {
            conjuncts: self
                .conjuncts
                .iter()
                .zip(evaluators)
                .enumerate()
                .map(|(k, (c, evaluate))| SliceConjunct {
                    columns: c.inputs.iter().map(|&i| slots[i]).collect(),
                    evaluate: evaluate.as_ref(),
                    range: ranges.get(k).copied().flatten(),
                })
                .collect(),
        }
    }

    /// The filter made of the conjuncts at `keep` only (reading only their columns).
    pub fn subset(&self, keep: &[usize]) -> RowFilter {
        let mut columns: Vec<usize> = Vec::new();
        let conjuncts = keep
            .iter()
            .filter_map(|&k| self.conjuncts.get(k))
            .map(|c| {
                let inputs = c
                    .inputs
                    .iter()
                    .filter_map(|&i| self.columns.get(i).copied())
                    .map(|column| match columns.iter().position(|&d| d == column) {
                        Some(p) => p,
                        None => {
                            columns.push(column);
                            columns.len() - 1
                        }
                    })
                    .collect();
                RowConjunct { inputs, predicate: c.predicate.clone() }
            })
            .collect();
        RowFilter { columns, conjuncts, piecewise_like: self.piecewise_like }
    }

    /// Rows of `batch`, which holds every column of the table in order, that pass every
    /// conjunct (a null does not pass).
    pub(crate) fn keep(&self, batch: &RecordBatch) -> Result<BooleanArray, ExecError> {
        self.selection(batch, &self.columns)
    }

    /// Rows of `batch` (the filter's `columns` at `slots`) that pass every conjunct; a null
    /// does not pass.
    fn selection(&self, batch: &RecordBatch, slots: &[usize]) -> Result<BooleanArray, ExecError> {
        let mut selection: Option<arrow::buffer::BooleanBuffer> = None;
        for conjunct in &self.conjuncts {
            let columns: Vec<usize> = conjunct.inputs.iter().map(|&i| slots[i]).collect();
            let result = conjunct.evaluate(&batch.project(&columns)?, self.piecewise_like)?;
            let passing = match result.nulls() {
                Some(nulls) => result.values() & nulls.inner(),
                None => result.values().clone(),
            };
            selection = Some(match selection {
                Some(s) => &s & &passing,
                None => passing,
            });
        }
        Ok(BooleanArray::new(selection.unwrap_or_else(|| arrow::buffer::BooleanBuffer::new_set(batch.num_rows())), None))
    }
}

/// What a column store scan hands on besides the projection: the rows per batch and the
/// filter it evaluates itself.
#[derive(Debug, Clone, Default)]
pub struct SliceOptions {
    /// Rows per batch decoded from the segments (DataFusion's batch size).
    pub batch_rows: usize,
    pub row_filter: Option<RowFilter>,
    /// The scan's settings (`ScanSpec::settings`): slices and string views.
    pub settings: FlashscanSettings,
    /// Deleted rows to skip (`ScanSpec::deleted`).
    pub deleted: Option<flashscan_write::SnapshotTable>,
    /// Each row's id as a last column (`ScanSpec::row_ids`).
    pub row_ids: bool,
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
        let source = ColumnStoreTable::with_selection(db_dir, table, &keep)?.with_row_ids(slices.row_ids);
        // The snapshot's deletes (committed before it, and the reading transaction's own;
        // the deleted rows file's among them). Without a snapshot (no write path), the file.
        column_store_source = match slices.deleted.clone() {
            Some(d) => source.with_deleted(Some(Arc::new(move |page: flashscan_storage::PageId, out: &mut Vec<u16>| d.page_deleted_slots(page.0, out)))),
            None if table.deleted_rows.is_some() => source.with_deleted_rows_file(db_dir)?,
            None => source,
        };
        &column_store_source
    } else {
        heap_source = HeapUnitSource { table, db_dir, unit, decoded: decoded.clone(), deleted: slices.deleted.clone().filter(|d| d.has_deleted_page_rows()), row_ids: slices.row_ids };
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
    let FilterDecodePlan { decode_columns, filter_slots, ranges } = FilterDecodePlan::new(projection, row_filter, &sql_schema(table, &slices.settings));
    let deliver_ns = AtomicU64::new(0);
    let make_sink = |_worker: u32| -> Result<DeliverSink, ExecError> {
        Ok(DeliverSink {
            deliver,
            stopped: &stopped,
            // Row ids come after the projected columns (HeapPageDecoder, RowGroupDecoder).
            projected: projection.len() + usize::from(slices.row_ids),
            row_id_last: slices.row_ids && table.is_column_store(),
            batch_rows: slices.batch_rows,
            row_filter: row_filter.map(|f| (f, filter_slots.clone())),
            ranges: ranges.clone(),
            pool: VecPool::default(),
            deliver_ns: &deliver_ns,
            views: table.is_column_store() && slices.settings.string_views(),
            segments: slices.settings.slices,
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
    /// The last column is the row id (a column store's decoder adds it after every
    /// decoded column, the filter's too), counted in `projected`.
    row_id_last: bool,
    batch_rows: usize,
    /// The filter and where its columns are among the decoded ones.
    row_filter: Option<(&'a RowFilter, Vec<usize>)>,
    /// Per conjunct of the filter: the integer range it is, if it is one.
    ranges: Vec<Option<IntegerRange>>,
    pool: VecPool,
    deliver_ns: &'a AtomicU64,
    /// Strings go on as Utf8View (the schema `sql_schema` declares).
    views: bool,
    /// Slices decoded from the segments (`flashscan.slices`).
    segments: bool,
}

impl DeliverSink<'_> {
    fn hand_on(&mut self, batch: RecordBatch) -> Result<(), ExecError> {
        if batch.num_rows() == 0 {
            return Ok(());
        }
        let batch = if batch.num_columns() > self.projected {
            // The filter's own columns go; a column store's row ids come last, after them.
            let last = batch.num_columns() - 1;
            let columns: Vec<usize> = if self.row_id_last { (0..self.projected - 1).chain(std::iter::once(last)).collect() } else { (0..self.projected).collect() };
            batch.project(&columns)?
        } else {
            batch
        };
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
        // Whole batches (COUNT(*) of a column store, or a decoder without segments): as
        // the declared schema has them (strings as views), then the same filter.
        let batch = if self.views { strings_as_views(batch)? } else { batch.clone() };
        let batch = match &self.row_filter {
            Some((filter, slots)) => {
                let selection = filter.selection(&batch, slots)?;
                arrow::compute::filter_record_batch(&batch, &selection)?
            }
            None => batch,
        };
        self.hand_on(batch)
    }

    fn segment_sink(&mut self) -> Option<&mut dyn SegmentSink> {
        // `FLASHSCAN_VECTOR_KERNELS=0`: whole row groups decoded, then sliced (for timing
        // the two side by side; same answers).
        (self.segments && flashscan_exec::segments::vector_kernels_enabled()).then_some(self as &mut dyn SegmentSink)
    }
}

/// `batch` with its Utf8 columns cast to Utf8View.
fn strings_as_views(batch: &RecordBatch) -> Result<RecordBatch, ExecError> {
    if !batch.schema().fields().iter().any(|f| f.data_type() == &DataType::Utf8) {
        return Ok(batch.clone());
    }
    let schema = Arc::new(flashscan_exec::segment_slices::with_string_views(&batch.schema()));
    let columns = batch
        .columns()
        .iter()
        .map(|c| if c.data_type() == &DataType::Utf8 { arrow::compute::cast(c, &DataType::Utf8View) } else { Ok(c.clone()) })
        .collect::<Result<Vec<_>, _>>()?;
    let options = RecordBatchOptions::new().with_row_count(Some(batch.num_rows()));
    Ok(RecordBatch::try_new_with_options(schema, columns, &options)?)
}

/// `schema` with its Utf8View fields as Utf8, or None when it has none.
fn views_as_utf8_schema(schema: &SchemaRef) -> Option<SchemaRef> {
    if !schema.fields().iter().any(|f| f.data_type() == &DataType::Utf8View) {
        return None;
    }
    let fields: Vec<arrow::datatypes::Field> = schema
        .fields()
        .iter()
        .map(|f| if f.data_type() == &DataType::Utf8View { f.as_ref().clone().with_data_type(DataType::Utf8) } else { f.as_ref().clone() })
        .collect();
    Some(Arc::new(arrow::datatypes::Schema::new_with_metadata(fields, schema.metadata().clone())))
}

/// An answer's schema and batches with string views as Utf8: column stores hand strings
/// to DataFusion as views (`sql_schema`), but answers (printed, sent, exported) keep the
/// type the tables declare. Costs a copy of the answer's strings only.
pub fn answer_strings_as_utf8(schema: SchemaRef, batches: Vec<RecordBatch>) -> Result<(SchemaRef, Vec<RecordBatch>), arrow::error::ArrowError> {
    let Some(plain) = views_as_utf8_schema(&schema) else { return Ok((schema, batches)) };
    let batches = batches.iter().map(|b| batch_as(&plain, b)).collect::<Result<Vec<_>, _>>()?;
    Ok((plain, batches))
}

/// The schema an answer streamed out of `schema` is written with (see
/// `answer_strings_as_utf8`), and each batch converted to it.
pub fn answer_schema(schema: &SchemaRef) -> SchemaRef {
    views_as_utf8_schema(schema).unwrap_or_else(|| schema.clone())
}

/// `batch` cast column by column to `schema` (same fields, string types may differ).
pub fn batch_as(schema: &SchemaRef, batch: &RecordBatch) -> Result<RecordBatch, arrow::error::ArrowError> {
    if batch.schema().fields() == schema.fields() {
        return Ok(batch.clone());
    }
    let columns = batch
        .columns()
        .iter()
        .zip(schema.fields())
        .map(|(c, f)| if c.data_type() == f.data_type() { Ok(c.clone()) } else { arrow::compute::cast(c, f.data_type()) })
        .collect::<Result<Vec<_>, _>>()?;
    RecordBatch::try_new_with_options(schema.clone(), columns, &RecordBatchOptions::new().with_row_count(Some(batch.num_rows())))
}

impl SegmentSink for DeliverSink<'_> {
    fn consume_segments(&mut self, group: &RowGroupSegments<'_>) -> Result<(), ExecError> {
        // The columns past the projection are read by the filter only: never built.
        let mut slices = SliceDecoder::open(group, self.batch_rows, self.views, &mut self.pool)?.with_output_columns(self.projected);
        // The filter outlives this borrow of the sink (hand_on needs the sink mutably).
        let row_filter: Option<(&RowFilter, Vec<usize>)> = self.row_filter.as_ref().map(|(f, s)| (*f, s.clone()));
        let evaluators = row_filter.as_ref().map(|(f, _)| f.evaluators()).unwrap_or_default();
        let slice_filter = row_filter.as_ref().map(|(f, slots)| f.slice_filter(slots, &evaluators, &self.ranges));
        loop {
            match slices.next_slice(group, slice_filter.as_ref())? {
                Some(batch) => self.hand_on(batch)?,
                None => return Ok(()),
            }
        }
    }
}

/// Rows of a table a plan-time sample evaluates a scan filter's conjuncts on
/// (`sample_filter_selectivity`): two slices of DataFusion's default batch size. A share
/// near 5 % (TPC-H Q9's `p_name LIKE '%green%'`) is then known to about ±0.2 %, which is
/// all the join planner needs (it compares sizes that differ by integer factors).
pub const FILTER_SAMPLE_ROWS: u64 = 16 * 1024;

/// Reads in flight for a filter's sample (`sample_filter_selectivity`).
const SAMPLE_QUEUE_DEPTH: u32 = 2;

/// The share of rows of a sample of `units` that pass `filter`: the first
/// `FILTER_SAMPLE_ROWS` rows of one row group (`sample_row_group`); None when there is no
/// row to sample. Read at planning time for the conjuncts interval analysis cannot bound
/// (string matches, IN lists): DataFusion takes 20 % for those, and TPC-H Q9's `p_name
/// LIKE '%green%'` keeps 5.4 %, so the planner saw part ⋈ lineitem as 12 M rows instead of
/// 3.2 M. Only the filter's columns of that row group are read (a row group is the unit of
/// I/O and checksums); rows are hashed to partitions as they are loaded, so a row group's
/// first rows are no sorted run.
pub fn sample_filter_selectivity(table: &TableMeta, db_dir: &Path, units: &[ScanUnit], filter: &RowFilter, options: &ReadOptions, settings: &FlashscanSettings) -> Result<Option<f64>, ExecError> {
    if !table.is_column_store() {
        return Ok(None);
    }
    let Some((partition_index, row_group)) = sample_row_group(table, units) else { return Ok(None) };
    let keep = |partition: u32, g: usize| partition == partition_index && g == row_group;
    let source = ColumnStoreTable::with_selection(db_dir, table, &keep)?;
    // One row group's few columns, read once: plain reads, two in flight (no io_uring ring
    // and its buffers to set up for a read of a few megabytes at planning time).
    let config = ReadConfig {
        io_size_bytes: options.io_size_bytes,
        queue_depth: SAMPLE_QUEUE_DEPTH,
        thread_count: 1,
        direct: options.direct,
        engine_kind: EngineKind::Psync,
    };
    let counts = SampleCounts::default();
    let slots: Vec<usize> = (0..filter.columns.len()).collect();
    let make_sink = |_worker: u32| -> Result<SampleSink, ExecError> {
        Ok(SampleSink { filter, slots: slots.clone(), counts: &counts, pool: VecPool::default(), views: settings.string_views(), segments: settings.slices })
    };
    match scan_batches(&source, &filter.columns, &ScanFilter::none(), &config, &make_sink) {
        Ok(_) | Err(ExecError::Stopped) => {}
        Err(e) => return Err(e),
    }
    let rows = counts.rows.load(Ordering::Relaxed);
    let kept = counts.kept.load(Ordering::Relaxed);
    // A filter no sampled row passes still keeps some rows elsewhere, as far as we know:
    // one, so no estimate is zero (a zero would make the joins above look empty).
    Ok((rows > 0).then(|| kept.max(1) as f64 / rows as f64))
}

/// The row group a filter is sampled from: the smallest of `units`' row groups that holds a
/// whole sample (the sample's cost is reading its filter columns whole: 33 MB of `p_name` in
/// a row group of a million parts), else the largest. (partition index, row group index).
fn sample_row_group(table: &TableMeta, units: &[ScanUnit]) -> Option<(u32, usize)> {
    let candidates = units.iter().flat_map(|u| {
        let partition = table.partitions.iter().find(|p| p.index == u.partition_index);
        u.row_groups.iter().filter_map(move |&g| Some((u.partition_index, g, partition?.row_groups.get(g)?.row_count)))
    });
    let (whole, short): (Vec<_>, Vec<_>) = candidates.filter(|c| c.2 > 0).partition(|c| c.2 >= FILTER_SAMPLE_ROWS);
    let pick = match whole.iter().min_by_key(|c| c.2) {
        Some(c) => *c,
        None => *short.iter().max_by_key(|c| c.2)?,
    };
    Some((pick.0, pick.1))
}

#[derive(Default)]
struct SampleCounts {
    rows: AtomicU64,
    kept: AtomicU64,
}

/// Evaluates a filter on the first slices of a row group and counts what passes.
struct SampleSink<'a> {
    filter: &'a RowFilter,
    /// Where the filter's columns are in the decoded batches (all of them, in order).
    slots: Vec<usize>,
    counts: &'a SampleCounts,
    pool: VecPool,
    views: bool,
    /// Slices decoded from the segments (`flashscan.slices`).
    segments: bool,
}

impl SampleSink<'_> {
    fn count(&mut self, batch: &RecordBatch) -> Result<(), ExecError> {
        let rows = (batch.num_rows() as u64).min(FILTER_SAMPLE_ROWS.saturating_sub(self.counts.rows.load(Ordering::Relaxed)));
        let batch = batch.slice(0, rows as usize);
        let kept = self.filter.selection(&batch, &self.slots)?.true_count() as u64;
        self.counts.rows.fetch_add(rows, Ordering::Relaxed);
        self.counts.kept.fetch_add(kept, Ordering::Relaxed);
        if self.counts.rows.load(Ordering::Relaxed) >= FILTER_SAMPLE_ROWS {
            // Enough: the scan ends here, successfully.
            return Err(ExecError::Stopped);
        }
        Ok(())
    }
}

impl BatchSink for SampleSink<'_> {
    fn consume(&mut self, batch: &RecordBatch) -> Result<(), ExecError> {
        let batch = if self.views { strings_as_views(batch)? } else { batch.clone() };
        self.count(&batch)
    }

    fn segment_sink(&mut self) -> Option<&mut dyn SegmentSink> {
        (self.segments && flashscan_exec::segments::vector_kernels_enabled()).then_some(self as &mut dyn SegmentSink)
    }
}

impl SegmentSink for SampleSink<'_> {
    fn consume_segments(&mut self, group: &RowGroupSegments<'_>) -> Result<(), ExecError> {
        // Slices of the sample's size: only the rows sampled are decoded.
        let mut slices = SliceDecoder::open(group, FILTER_SAMPLE_ROWS as usize, self.views, &mut self.pool)?;
        while let Some(batch) = slices.next_slice(group, None)? {
            self.count(&batch)?;
        }
        Ok(())
    }
}

/// A heap table restricted to one scan unit, as exec's scan sees tables.
struct HeapUnitSource<'a> {
    table: &'a TableMeta,
    db_dir: &'a Path,
    unit: &'a ScanUnit,
    decoded: Arc<DecodedCounts>,
    /// Deleted rows to skip (only when some page row is deleted at all).
    deleted: Option<flashscan_write::SnapshotTable>,
    row_ids: bool,
}

/// Pages and rows decoded so far, counted beside exec's own figures: the only ones left
/// when a scan is stopped early.
#[derive(Default)]
struct DecodedCounts {
    pages: AtomicU64,
    rows: AtomicU64,
}

impl TableSource for HeapUnitSource<'_> {
    flashscan_exec::table_meta_methods!(table);

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
        Ok(Box::new(HeapPageDecoder {
            decoder,
            decoded: self.decoded.clone(),
            deleted: self.deleted.clone(),
            row_ids: self.row_ids,
            live: LiveRows::default(),
            ids: Vec::new(),
            slots: Vec::new(),
        }))
    }
}

struct HeapPageDecoder {
    decoder: HeapDecoder,
    decoded: Arc<DecodedCounts>,
    deleted: Option<flashscan_write::SnapshotTable>,
    row_ids: bool,
    /// Which rows pushed since the last batch the snapshot still sees (storage's keep
    /// flags, the ones every reader of pages uses; the deleted slots come from `deleted`).
    live: LiveRows,
    /// Per row pushed since the last batch: its id (with `row_ids` only).
    ids: Vec<u64>,
    /// The current page's deleted slots (reused).
    slots: Vec<u16>,
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
        // The snapshot's deleted rows, not the deleted rows file: it also sees the deletes
        // committed since the last checkpoint, and not those newer than itself.
        self.slots.clear();
        if let Some(snapshot) = &self.deleted {
            snapshot.page_deleted_slots(expected_page_id, &mut self.slots);
        }
        self.live.push_page(rows, self.slots.iter().copied()).map_err(|e| ExecError::Corrupt { path: path.to_path_buf(), offset_bytes, what: e.to_string() })?;
        if self.row_ids {
            let page = flashscan_storage::PageId(expected_page_id);
            for slot in 0..rows {
                let id = flashscan_write::RowId::in_page(page, slot).ok_or_else(|| ExecError::Corrupt {
                    path: path.to_path_buf(),
                    offset_bytes,
                    what: format!("page {expected_page_id:#x} slot {slot} has no row id (file id or page index beyond what a row id holds)"),
                })?;
                self.ids.push(id.0);
            }
        }
        Ok(rows)
    }

    fn finish_batch(&mut self) -> Result<RecordBatch, ExecError> {
        let mut batch = self.decoder.finish();
        let internal = |e: arrow::error::ArrowError| ExecError::Internal(format!("deleted rows and row ids: {e}"));
        if self.row_ids {
            debug_assert_eq!(self.ids.len(), batch.num_rows(), "one id per decoded row");
            let mut fields: Vec<_> = batch.schema().fields().iter().cloned().collect();
            fields.push(Arc::new(crate::table_provider::row_id_field()));
            let mut columns = batch.columns().to_vec();
            columns.push(Arc::new(arrow::array::UInt64Array::from(std::mem::take(&mut self.ids))));
            batch = RecordBatch::try_new(Arc::new(arrow::datatypes::Schema::new(fields)), columns).map_err(internal)?;
        }
        self.live.filter(batch).map_err(internal)
    }
}

#[cfg(test)]
mod tests {
    use datafusion::common::ScalarValue;
    use datafusion::logical_expr::Operator;
    use datafusion::physical_expr::expressions::{BinaryExpr, Column, Literal};

    use super::*;

    fn compare(left: Arc<dyn PhysicalExpr>, op: Operator, right: Arc<dyn PhysicalExpr>) -> Arc<dyn PhysicalExpr> {
        Arc::new(BinaryExpr::new(left, op, right))
    }

    fn column(index: usize) -> Arc<dyn PhysicalExpr> {
        Arc::new(Column::new("c", index))
    }

    fn day(v: i32) -> Arc<dyn PhysicalExpr> {
        Arc::new(Literal::new(ScalarValue::Date32(Some(v))))
    }

    fn range(predicate: Arc<dyn PhysicalExpr>, column_type: &DataType) -> Option<IntegerRange> {
        RowConjunct { inputs: vec![0], predicate }.integer_range(column_type)
    }

    #[test]
    fn comparisons_with_constants_of_the_column_type_are_ranges() {
        let date = DataType::Date32;
        let r = |low, high| Some(IntegerRange { low, high });
        assert_eq!(range(compare(column(0), Operator::GtEq, day(10)), &date), r(10, i64::MAX));
        assert_eq!(range(compare(column(0), Operator::Gt, day(10)), &date), r(11, i64::MAX));
        assert_eq!(range(compare(column(0), Operator::Lt, day(10)), &date), r(i64::MIN, 9));
        assert_eq!(range(compare(column(0), Operator::LtEq, day(10)), &date), r(i64::MIN, 10));
        assert_eq!(range(compare(column(0), Operator::Eq, day(10)), &date), r(10, 10));
        // The constant on the left: the comparison turned round.
        assert_eq!(range(compare(day(10), Operator::Lt, column(0)), &date), r(11, i64::MAX));
        // ANDed (what merged conjuncts on one column are): the intersection.
        let both = compare(compare(column(0), Operator::GtEq, day(10)), Operator::And, compare(column(0), Operator::Lt, day(20)));
        assert_eq!(range(both, &date), r(10, 19));
        // Decimals compare unscaled, at the column's own precision and scale.
        let price = Arc::new(Literal::new(ScalarValue::Decimal128(Some(2400), 15, 2)));
        assert_eq!(range(compare(column(0), Operator::Lt, price.clone()), &DataType::Decimal128(15, 2)), r(i64::MIN, 2399));
        // At the ends of i64: nothing is below MIN.
        let min = Arc::new(Literal::new(ScalarValue::Int64(Some(i64::MIN))));
        let empty = range(compare(column(0), Operator::Lt, min), &DataType::Int64).unwrap_or(IntegerRange::ALL);
        assert!(!empty.contains(i64::MIN) && !empty.contains(0));
    }

    #[test]
    fn anything_else_is_left_to_the_predicate() {
        let date = DataType::Date32;
        let price = Arc::new(Literal::new(ScalarValue::Decimal128(Some(2400), 15, 2)));
        // Another type (a cast would round): no range.
        assert_eq!(range(compare(column(0), Operator::Lt, price), &DataType::Decimal128(15, 3)), None);
        assert_eq!(range(compare(column(0), Operator::Lt, day(1)), &DataType::Int32), None);
        assert_eq!(range(compare(column(0), Operator::NotEq, day(1)), &date), None);
        assert_eq!(range(compare(column(0), Operator::Lt, Arc::new(Literal::new(ScalarValue::Date32(None)))), &date), None);
        assert_eq!(range(compare(column(0), Operator::Lt, column(0)), &date), None);
        // An OR is no range; an AND with a part that is none is none.
        let or = compare(compare(column(0), Operator::Lt, day(1)), Operator::Or, compare(column(0), Operator::Gt, day(5)));
        assert_eq!(range(or.clone(), &date), None);
        assert_eq!(range(compare(compare(column(0), Operator::Lt, day(9)), Operator::And, or), &date), None);
        // Two inputs: no range.
        let two = RowConjunct { inputs: vec![0, 1], predicate: compare(column(0), Operator::Lt, day(1)) };
        assert_eq!(two.integer_range(&date), None);
    }
}
