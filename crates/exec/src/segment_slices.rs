//! A column store row group handed on as Arrow batches of a few thousand rows, each decoded
//! straight from the verified segments a vector (1,024 values) at a time into the slice's
//! own buffers: no million-row intermediate per column is ever built, written to DRAM and
//! read back. What SQL scans use (DataFusion's operators take batches of `batch_size` rows).
//!
//! - integer-like columns (Int32, Int64, Date32, decimals of ≤ 18 digits): the codec's
//!   vector cursor writes into the slice's buffer (a decimal is widened to the i128 that
//!   Arrow's Decimal128 needs as it is written, the only place it is widened);
//! - dictionary strings: the codes a slice at a time. As `Utf8View` (`SliceDecoder::open`
//!   with `strings_as_views`), each row is one 16-byte view copied from its entry's view,
//!   built once per row group over one buffer of the entries: no string byte is copied per
//!   row. As `Utf8`, the slice's strings are copied from the entries;
//! - plain strings: each slice's bytes copied once from the segment into the slice's own
//!   buffer (checked as UTF-8 there), with a view (or offset) per row over it: no
//!   whole-column string array is built, copied into fresh memory and cast to views;
//! - anything else (floats, booleans, wide decimals, …): decoded whole once by the
//!   whole-column decoder, then handed out in zero-copy slices.
//!
//! Late materialization: `SliceFilter` is a conjunction; a conjunct that reads one
//! dictionary-coded string column is evaluated once per row group on the dictionary's
//! entries (plus one null), then applied to each slice's codes by lookup; a conjunct that
//! is an integer range on one column (`IntegerRange`: `l_shipdate >= d1 AND l_shipdate < d2`)
//! is one compare per value, straight from the codec's vectors when nothing else reads the
//! column (no Arrow array, no i128 widening); the other conjuncts run on their columns,
//! decoded first. Columns read only by the filter (`SliceDecoder::with_output_columns`)
//! are never built for the passing rows. The other columns of a slice where no row
//! survives are skipped without being unpacked (`skip_vector`), the rest decoded and
//! filtered to the surviving rows.

use std::sync::Arc;

use arrow::array::builder::make_view;
use arrow::array::{Array, ArrayRef, BooleanArray, Date32Array, Decimal128Array, Int32Array, Int64Array, StringArray, StringViewArray};
use arrow::buffer::{BooleanBuffer, Buffer, NullBuffer, OffsetBuffer, ScalarBuffer};
use arrow::array::DictionaryArray;
use arrow::datatypes::{ArrowPrimitiveType, DataType, Field, Schema, SchemaRef, UInt32Type};
use arrow::record_batch::{RecordBatch, RecordBatchOptions};
use flashscan_storage::columnstore::{ColumnType, SegmentView, VecPool};
use flashscan_storage::compression::string_dictionary::StringCodes;
use flashscan_storage::compression::string_plain::PlainStrings;
use flashscan_storage::compression::{boolean_bitmap, CodecError, IntegerVectors, Vector, VECTOR_VALUES};

use crate::error::ExecError;
use crate::segments::RowGroupSegments;

/// Rows per slice, at most: bounds a slice's buffers (16 bytes × rows per decimal column).
pub const SLICE_ROWS_MAX: usize = 1 << 20;

/// One part of a conjunction evaluated inside the scan: `evaluate` gets a batch of the
/// `columns` (indexes into the decoded columns, in that order) and returns, per row,
/// whether it passes (a null counts as not passing). It must be deterministic and depend
/// on each row's values only: a conjunct on one dictionary-coded string column is
/// evaluated on the dictionary's entries, not on the rows.
pub struct SliceConjunct<'f> {
    pub columns: Vec<usize>,
    pub evaluate: &'f (dyn Fn(&RecordBatch) -> Result<BooleanArray, ExecError> + Sync),
    /// Set when the conjunct is exactly `range` on its one column (a null does not pass):
    /// the decoder then compares the integers itself instead of calling `evaluate` (which
    /// must give the same answer: the caller derives the range from the same predicate).
    pub range: Option<IntegerRange>,
}

/// `low <= value <= high` (both inclusive; `low > high` holds for no value) over a column's
/// values in the column store's integer domain: what its vector cursor yields and Arrow
/// holds (integers, dates as days, decimals unscaled at the column's scale).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IntegerRange {
    pub low: i64,
    pub high: i64,
}

impl IntegerRange {
    pub const ALL: IntegerRange = IntegerRange { low: i64::MIN, high: i64::MAX };

    pub fn contains(&self, value: i64) -> bool {
        // One compare: `value - low` as unsigned is at most `high - low` exactly inside.
        // `&`, not `&&`: no branch in the loops that call this per value.
        (self.low <= self.high) & ((value.wrapping_sub(self.low) as u64) <= (self.high.wrapping_sub(self.low) as u64))
    }

    /// Values in both ranges.
    pub fn intersect(&self, other: &IntegerRange) -> IntegerRange {
        IntegerRange { low: self.low.max(other.low), high: self.high.min(other.high) }
    }
}

/// A predicate evaluated inside the scan before the columns it does not read are decoded:
/// a row passes when every conjunct passes. The same filter for every slice of a decoder
/// (it caches per-entry results by conjunct position).
pub struct SliceFilter<'f> {
    pub conjuncts: Vec<SliceConjunct<'f>>,
}

/// A string dictionary's entries in the forms slices are built from, made once per row
/// group: one buffer of all entry bytes, a view per entry into it, and the entries as an
/// array of the output type with one null after them (what a null row is, for filters).
struct Entries {
    views: Vec<u128>,
    buffer: Buffer,
    offsets: Vec<i32>,
    array: ArrayRef,
}

impl Entries {
    fn of(codes: &StringCodes<'_>, as_views: bool) -> Result<Entries, CodecError> {
        let count = codes.entry_count();
        let mut bytes = Vec::new();
        let mut offsets = Vec::with_capacity(count + 1);
        offsets.push(0i32);
        for code in 0..count {
            bytes.extend_from_slice(codes.entry(code));
            let end = i32::try_from(bytes.len()).map_err(|_| CodecError::LimitExceeded { what: "dictionary entry bytes", value: bytes.len() as u64, limit: i32::MAX as u64 })?;
            offsets.push(end);
        }
        let buffer = Buffer::from(bytes);
        let views: Vec<u128> = offsets.windows(2).map(|w| make_view(&buffer[w[0] as usize..w[1] as usize], 0, w[0] as u32)).collect();
        // The entries, then one null.
        let nulls = NullBuffer::new(BooleanBuffer::collect_bool(count + 1, |i| i < count));
        let array: ArrayRef = if as_views {
            let mut with_null = views.clone();
            with_null.push(0);
            // SAFETY: every view was made by `make_view` over a whole entry of `buffer`
            // (block 0) at its offset, and each entry was validated as UTF-8 when the
            // dictionary was opened; the last slot is null (a zero view is an empty string).
            Arc::new(unsafe { StringViewArray::new_unchecked(ScalarBuffer::from(with_null), vec![buffer.clone()], Some(nulls)) })
        } else {
            let mut with_null = offsets.clone();
            with_null.push(*offsets.last().unwrap_or(&0));
            // SAFETY: offsets start at 0, never decrease, end at the buffer's length; every
            // entry is valid UTF-8 (checked when the dictionary was opened).
            Arc::new(unsafe { StringArray::new_unchecked(OffsetBuffer::new(ScalarBuffer::from(with_null)), buffer.clone(), Some(nulls)) })
        };
        Ok(Entries { views, buffer, offsets, array })
    }
}

/// One column's cursor over its segment.
enum SliceColumn<'a> {
    /// `raw`: a decimal goes out as its unscaled i64 values (`SliceDecoder::with_kernel_columns`).
    Integer { vectors: IntegerVectors<'a>, column_type: ColumnType, nulls: Option<NullBuffer>, scratch: Box<Vector>, raw: bool },
    Strings {
        codes: StringCodes<'a>,
        nulls: Option<NullBuffer>,
        scratch: Box<[u32; VECTOR_VALUES]>,
        /// The current slice's codes (after `read_codes`).
        slice_codes: Vec<u32>,
        entries: Option<Entries>,
        as_views: bool,
        /// The slice goes out as its codes over the entries (a `DictionaryArray`).
        raw: bool,
    },
    /// Plain (not dictionary-coded) strings: each slice's strings built from the
    /// segment's bytes, copied once into the slice's own buffer (views or offsets over it).
    PlainStrings { strings: PlainStrings<'a>, nulls: Option<NullBuffer>, as_views: bool },
    Whole(ArrayRef),
}

/// Hands out one row group's columns a slice of rows at a time.
pub struct SliceDecoder<'a> {
    columns: Vec<SliceColumn<'a>>,
    schema: SchemaRef,
    row_count: usize,
    position: usize,
    slice_rows: usize,
    /// Per conjunct of the filter: whether each entry (then the null) of its dictionary
    /// column passes, once computed for this row group.
    entry_passes: Vec<Option<Vec<bool>>>,
    /// The first `output_columns` columns are handed out; the rest are read by the filter
    /// only (`with_output_columns`).
    output_columns: usize,
}

/// `schema` with its Utf8 fields as Utf8View: what a decoder with `strings_as_views` hands
/// on, and what SQL scans of column stores declare.
pub fn with_string_views(schema: &Schema) -> Schema {
    let fields: Vec<Field> = schema
        .fields()
        .iter()
        .map(|f| if f.data_type() == &DataType::Utf8 { f.as_ref().clone().with_data_type(DataType::Utf8View) } else { f.as_ref().clone() })
        .collect();
    Schema::new_with_metadata(fields, schema.metadata().clone())
}

/// Where a column stands in the current slice.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Advanced {
    No,
    /// A string column's codes for the slice were read (its cursor moved).
    Codes,
    /// The cursor moved past the slice and nothing was kept (a range conjunct compared the
    /// values as they were unpacked).
    Consumed,
}

impl<'a> SliceDecoder<'a> {
    /// Opens every column of `group` for slices of `slice_rows` rows (rounded up to whole
    /// vectors, since a vector cursor hands out whole vectors). With `strings_as_views`,
    /// Utf8 columns come out as Utf8View (see `with_string_views`).
    pub fn open(group: &'a RowGroupSegments<'a>, slice_rows: usize, strings_as_views: bool, pool: &mut VecPool) -> Result<SliceDecoder<'a>, ExecError> {
        let slice_rows = slice_rows.clamp(1, SLICE_ROWS_MAX).div_ceil(VECTOR_VALUES) * VECTOR_VALUES;
        let mut columns = Vec::with_capacity(group.columns.len());
        for (slot, view) in group.columns.iter().enumerate() {
            columns.push(open_column(group, slot, view, strings_as_views, pool)?);
        }
        let schema = if strings_as_views { Arc::new(with_string_views(&group.schema)) } else { group.schema.clone() };
        let output_columns = columns.len();
        Ok(SliceDecoder { columns, schema, row_count: group.row_count, position: 0, slice_rows, entry_passes: Vec::new(), output_columns })
    }

    /// Hands out only the first `count` columns: the others are read by the filter only,
    /// so they are never built for the passing rows (and a range conjunct on one of them
    /// reads its values straight from the vectors).
    pub fn with_output_columns(mut self, count: usize) -> SliceDecoder<'a> {
        let count = count.min(self.columns.len());
        if count < self.columns.len() {
            let fields: Vec<Field> = self.schema.fields().iter().take(count).map(|f| f.as_ref().clone()).collect();
            self.schema = Arc::new(Schema::new_with_metadata(fields, self.schema.metadata().clone()));
        }
        self.output_columns = count;
        self
    }

    /// Columns handed to a kernel rather than to SQL operators (`kernel[slot]` true): a
    /// decimal goes out as an `Int64Array` of its unscaled values (the column keeps its
    /// scale; 8 bytes a value, never widened to i128), a dictionary-coded string column as
    /// a `DictionaryArray<UInt32>` of its codes over the row group's entries (one null
    /// entry after them; the same values array for every slice of the row group). Other
    /// columns go out as before. A filter must not read a kernel column (its conjuncts
    /// evaluate the declared types): `next_slice` refuses such a filter.
    pub fn with_kernel_columns(mut self, kernel: &[bool]) -> SliceDecoder<'a> {
        let mut fields: Vec<Field> = self.schema.fields().iter().map(|f| f.as_ref().clone()).collect();
        for (slot, column) in self.columns.iter_mut().enumerate() {
            if !kernel.get(slot).copied().unwrap_or(false) {
                continue;
            }
            match column {
                SliceColumn::Integer { column_type: ColumnType::Decimal { .. }, raw, .. } => {
                    *raw = true;
                    if let Some(f) = fields.get_mut(slot) {
                        *f = f.clone().with_data_type(DataType::Int64);
                    }
                }
                SliceColumn::Strings { raw, as_views, .. } => {
                    *raw = true;
                    let values = if *as_views { DataType::Utf8View } else { DataType::Utf8 };
                    if let Some(f) = fields.get_mut(slot) {
                        *f = f.clone().with_data_type(DataType::Dictionary(Box::new(DataType::UInt32), Box::new(values)));
                    }
                }
                _ => {}
            }
        }
        self.schema = Arc::new(Schema::new_with_metadata(fields, self.schema.metadata().clone()));
        self
    }

    fn is_kernel_column(&self, slot: usize) -> bool {
        matches!(self.columns.get(slot), Some(SliceColumn::Integer { raw: true, .. } | SliceColumn::Strings { raw: true, .. }))
    }

    /// The schema of the slices handed out.
    pub fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    /// The next slice of every column, or None after the last row. With a filter, the
    /// slice holds only the rows that pass (possibly none: then it has 0 rows).
    pub fn next_slice(&mut self, group: &RowGroupSegments<'_>, filter: Option<&SliceFilter<'_>>) -> Result<Option<RecordBatch>, ExecError> {
        let rows = self.slice_rows.min(self.row_count - self.position);
        if rows == 0 {
            return Ok(None);
        }
        let start = self.position;
        self.position += rows;
        let options = RecordBatchOptions::new().with_row_count(Some(rows));
        let output_columns = self.output_columns;
        let Some(filter) = filter else {
            let all = Keep::all(rows);
            let mut arrays = Vec::with_capacity(output_columns);
            for (slot, column) in self.columns.iter_mut().enumerate() {
                if slot < output_columns {
                    arrays.push(next_array(column, start, rows, &all, group, slot, Advanced::No)?);
                } else {
                    skip_rows(column, rows, group, slot)?;
                }
            }
            return Ok(Some(RecordBatch::try_new_with_options(self.schema.clone(), arrays, &options)?));
        };
        if let Some(slot) = filter.conjuncts.iter().flat_map(|c| c.columns.iter()).find(|&&slot| self.is_kernel_column(slot)) {
            return Err(ExecError::Internal(format!("the scan filter reads kernel column {slot}")));
        }
        let n = self.columns.len();
        let mut decoded: Vec<Option<ArrayRef>> = vec![None; n];
        let mut advanced = vec![Advanced::No; n];
        if self.entry_passes.len() != filter.conjuncts.len() {
            self.entry_passes = vec![None; filter.conjuncts.len()];
        }
        // None: every row passes so far.
        let mut selection: Option<BooleanBuffer> = None;
        let none_left = |s: &Option<BooleanBuffer>| s.as_ref().is_some_and(|s| s.count_set_bits() == 0);
        // Conjuncts on one dictionary-coded string column: on the entries once, then by code.
        let mut on_codes = vec![false; filter.conjuncts.len()];
        for (k, conjunct) in filter.conjuncts.iter().enumerate() {
            let &[slot] = conjunct.columns.as_slice() else { continue };
            let column = self.columns.get_mut(slot).ok_or_else(|| ExecError::Internal(format!("filter column {slot} out of range")))?;
            if !matches!(column, SliceColumn::Strings { .. }) {
                continue;
            }
            if self.entry_passes[k].is_none() {
                self.entry_passes[k] = Some(entry_passes(column, conjunct, group, slot)?);
            }
            if advanced[slot] == Advanced::No {
                read_codes(column, rows, group, slot)?;
                advanced[slot] = Advanced::Codes;
            }
            let (SliceColumn::Strings { slice_codes, nulls, .. }, Some(table)) = (&*column, self.entry_passes[k].as_ref()) else { continue };
            let null_code = table.len() - 1;
            let nulls = nulls.as_ref().map(|n| n.slice(start, rows));
            let passing = match &nulls {
                Some(n) if n.null_count() > 0 => BooleanBuffer::collect_bool(rows, |i| table[if n.is_null(i) { null_code } else { slice_codes[i] as usize }]),
                _ => pack_bits(&slice_codes[..rows], |code| table[code as usize]),
            };
            selection = Some(match selection {
                Some(s) => &s & &passing,
                None => passing,
            });
            on_codes[k] = true;
            if none_left(&selection) {
                break;
            }
        }
        // Integer ranges on one column: one compare per value. The range conjuncts on the
        // same column are intersected first (`d >= a AND d < b` arrives as two conjuncts):
        // one pass for them all, and straight from the vectors when no other conjunct reads
        // the column and it is not handed out; else on its decoded array (kept for the
        // others).
        let mut on_range = vec![false; filter.conjuncts.len()];
        for (k, conjunct) in filter.conjuncts.iter().enumerate() {
            let (Some(range), &[slot]) = (conjunct.range, conjunct.columns.as_slice()) else { continue };
            if on_codes[k] || on_range[k] || none_left(&selection) {
                continue;
            }
            let same_column: Vec<(usize, IntegerRange)> = filter
                .conjuncts
                .iter()
                .enumerate()
                .filter(|(j, c)| !on_codes[*j] && c.columns.as_slice() == [slot])
                .filter_map(|(j, c)| c.range.map(|r| (j, r)))
                .collect();
            let range = same_column.iter().fold(range, |r, (_, other)| r.intersect(other));
            let column = self.columns.get_mut(slot).ok_or_else(|| ExecError::Internal(format!("filter column {slot} out of range")))?;
            let read_elsewhere = filter.conjuncts.iter().enumerate().any(|(j, c)| !same_column.iter().any(|(i, _)| *i == j) && c.columns.contains(&slot));
            let passing = match &decoded[slot] {
                Some(a) => range_bits_of_array(a, &range),
                None if slot >= output_columns && !read_elsewhere && advanced[slot] == Advanced::No => {
                    let bits = range_bits_of_vectors(column, start, rows, &range, group, slot)?;
                    if bits.is_some() {
                        advanced[slot] = Advanced::Consumed;
                    }
                    bits
                }
                None if matches!(column, SliceColumn::Integer { .. }) => {
                    let a = next_array(column, start, rows, &Keep::all(rows), group, slot, advanced[slot])?;
                    decoded[slot] = Some(a.clone());
                    range_bits_of_array(&a, &range)
                }
                // Other columns: the conjunct's own evaluation, below.
                None => None,
            };
            let Some(passing) = passing else { continue };
            selection = Some(match selection {
                Some(s) => &s & &passing,
                None => passing,
            });
            for (j, _) in &same_column {
                on_range[*j] = true;
            }
        }
        // The other conjuncts, on their decoded columns, while some row is left.
        for (k, conjunct) in filter.conjuncts.iter().enumerate() {
            if on_codes[k] || on_range[k] || none_left(&selection) {
                continue;
            }
            let mut fields = Vec::with_capacity(conjunct.columns.len());
            let mut arrays = Vec::with_capacity(conjunct.columns.len());
            for &slot in &conjunct.columns {
                let array = match &decoded[slot] {
                    Some(a) => a.clone(),
                    None => {
                        let column = self.columns.get_mut(slot).ok_or_else(|| ExecError::Internal(format!("filter column {slot} out of range")))?;
                        let a = next_array(column, start, rows, &Keep::all(rows), group, slot, advanced[slot])?;
                        decoded[slot] = Some(a.clone());
                        a
                    }
                };
                fields.push(Field::new(format!("c{slot}"), array.data_type().clone(), true));
                arrays.push(array);
            }
            let batch = RecordBatch::try_new_with_options(Arc::new(Schema::new(fields)), arrays, &options)?;
            let passing = passes(&(conjunct.evaluate)(&batch)?, rows)?;
            let passing = passing.values().clone();
            selection = Some(match selection {
                Some(s) => &s & &passing,
                None => passing,
            });
        }
        let selection = selection.map(|s| BooleanArray::new(s, None));
        let passing = selection.as_ref().map_or(rows, |s| s.true_count());
        // The columns not read by the filter are decoded for the passing rows only, run by
        // run; when the runs are short (scattered rows) every row is decoded and arrow's
        // filter, which walks indices then, picks them out afterwards.
        // Integer columns pick scattered rows out of each vector while it is in L1 (and skip
        // vectors with none); the others are decoded whole and filtered after.
        let (keep, filter_after, scattered) = match selection {
            Some(s) if passing < rows => {
                let keep = Keep::selected(s);
                if keep.runs.len() * KEEP_RUN_ROWS_MIN > keep.rows {
                    let mask = keep.mask.clone();
                    (Keep::all(rows), mask, Some(keep))
                } else {
                    (keep, None, None)
                }
            }
            _ => (Keep::all(rows), None, None),
        };
        let pick = |a: ArrayRef, mask: Option<&BooleanArray>| -> Result<ArrayRef, ExecError> {
            Ok(match mask {
                Some(mask) => arrow::compute::filter(&a, mask)?,
                None => a,
            })
        };
        let mut arrays = Vec::with_capacity(output_columns);
        for (slot, column) in self.columns.iter_mut().enumerate() {
            if slot >= output_columns {
                // Read by the filter only: its cursor must still move past the slice.
                if decoded[slot].is_none() && advanced[slot] == Advanced::No {
                    skip_rows(column, rows, group, slot)?;
                }
                continue;
            }
            let array = match decoded[slot].take() {
                Some(a) => pick(a, keep.mask.as_ref().or(filter_after.as_ref()))?,
                None if passing == 0 => {
                    if advanced[slot] == Advanced::No {
                        skip_rows(column, rows, group, slot)?;
                    }
                    arrow::array::new_empty_array(self.schema.field(slot).data_type())
                }
                None => match (&scattered, &*column) {
                    (Some(scattered), SliceColumn::Integer { .. }) => next_array(column, start, rows, scattered, group, slot, advanced[slot])?,
                    _ => pick(next_array(column, start, rows, &keep, group, slot, advanced[slot])?, filter_after.as_ref())?,
                },
            };
            arrays.push(array);
        }
        let options = RecordBatchOptions::new().with_row_count(Some(passing));
        Ok(Some(RecordBatch::try_new_with_options(self.schema.clone(), arrays, &options)?))
    }
}

/// The rows of a decoded array inside `range` (a null is not); None for types that do not
/// hold the column store's integers.
fn range_bits_of_array(array: &ArrayRef, range: &IntegerRange) -> Option<BooleanBuffer> {
    use arrow::array::AsArray;
    use arrow::datatypes::{Date32Type, Decimal128Type, Int32Type, Int64Type};
    // `pack_bits`, not arrow's `collect_bool` (a closure over an index, bounds-checked per
    // value: perf put it at a tenth of SF 1 Q6's time through the server).
    let bits = match array.data_type() {
        DataType::Int32 => pack_bits(array.as_primitive::<Int32Type>().values(), |v| range.contains(v as i64)),
        DataType::Date32 => pack_bits(array.as_primitive::<Date32Type>().values(), |v| range.contains(v as i64)),
        DataType::Int64 => pack_bits(array.as_primitive::<Int64Type>().values(), |v| range.contains(v)),
        DataType::Decimal128(_, _) => {
            // Compared as i128: a wide decimal's values may lie outside i64. `&`, not `&&`:
            // a branch per value (perf of Q6's l_discount: a quarter of the scan's time).
            let (low, high) = (range.low as i128, range.high as i128);
            pack_bits(array.as_primitive::<Decimal128Type>().values(), |v| (low <= v) & (v <= high))
        }
        _ => return None,
    };
    Some(match array.nulls() {
        Some(nulls) if nulls.null_count() > 0 => &bits & nulls.inner(),
        _ => bits,
    })
}

/// The next `rows` values of an integer column compared with `range` as they are unpacked
/// (a null is not inside), moving its cursor past them; None (cursor unmoved) for other
/// columns.
fn range_bits_of_vectors(column: &mut SliceColumn<'_>, start: usize, rows: usize, range: &IntegerRange, group: &RowGroupSegments<'_>, slot: usize) -> Result<Option<BooleanBuffer>, ExecError> {
    let SliceColumn::Integer { vectors, column_type, nulls, scratch, .. } = column else { return Ok(None) };
    // Values as Arrow holds them: an i32 column's are narrowed as `next_array` does.
    let narrow = matches!(column_type, ColumnType::Int32 | ColumnType::Date32);
    let mut words: Vec<u64> = vec![0; rows.div_ceil(64)];
    let mut done = 0;
    while done < rows {
        let n = vectors.next_vector(scratch).map_err(|e| group.codec_error(slot, e))?;
        if n == 0 {
            return Err(group.corrupt(slot, format!("{done} values where {rows} were expected")));
        }
        let take = n.min(rows - done);
        // Slices and vectors start at multiples of VECTOR_VALUES (every vector but the
        // last is full), so a vector's rows start on a word.
        debug_assert_eq!(done % 64, 0);
        let out = &mut words[done / 64..(done + take).div_ceil(64)];
        if narrow {
            pack_inside(&scratch[..take], out, |v| range.contains(v as i32 as i64));
        } else {
            pack_inside(&scratch[..take], out, |v| range.contains(v));
        }
        done += take;
    }
    let bits = BooleanBuffer::new(Buffer::from_vec(words), 0, rows);
    Ok(Some(match nulls.as_ref().map(|n| n.slice(start, rows)) {
        Some(nulls) if nulls.null_count() > 0 => &bits & nulls.inner(),
        _ => bits,
    }))
}

/// `values` as bits (`pack_inside`), `rows` = `values.len()`.
fn pack_bits<T: Copy>(values: &[T], inside: impl Fn(T) -> bool) -> BooleanBuffer {
    let mut words: Vec<u64> = vec![0; values.len().div_ceil(64)];
    pack_inside(values, &mut words, inside);
    BooleanBuffer::new(Buffer::from_vec(words), 0, values.len())
}

/// One bit per value (Arrow's order: value i is bit i % 64 of word i / 64), set where
/// `inside` holds. No branch per value: the compiler vectorizes the compare and the shift,
/// with AVX2 where the CPU has it (`flashscan_storage::compression::cpu`).
fn pack_inside<T: Copy>(values: &[T], words: &mut [u64], inside: impl Fn(T) -> bool) {
    use flashscan_storage::compression::cpu::{kernel, Kernel};
    match kernel() {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `kernel()` returns Avx2 only when the CPU reports AVX2.
        Kernel::Avx2 => unsafe { pack_inside_avx2(values, words, inside) },
        _ => pack_inside_body(values, words, inside),
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn pack_inside_avx2<T: Copy>(values: &[T], words: &mut [u64], inside: impl Fn(T) -> bool) {
    pack_inside_body(values, words, inside)
}

#[inline(always)]
fn pack_inside_body<T: Copy>(values: &[T], words: &mut [u64], inside: impl Fn(T) -> bool) {
    for (chunk, word) in values.chunks(64).zip(words.iter_mut()) {
        let mut w = 0u64;
        for (i, &v) in chunk.iter().enumerate() {
            w |= (inside(v) as u64) << i;
        }
        *word = w;
    }
}

/// A conjunct's result as passing rows: `len` values, a null does not pass (SQL's WHERE).
fn passes(result: &BooleanArray, len: usize) -> Result<BooleanArray, ExecError> {
    if result.len() != len {
        return Err(ExecError::Internal(format!("filter returned {} values for {len} rows", result.len())));
    }
    Ok(match result.nulls() {
        Some(nulls) if nulls.null_count() > 0 => BooleanArray::new(result.values() & nulls.inner(), None),
        _ => BooleanArray::new(result.values().clone(), None),
    })
}

/// Whether each entry of a string column's dictionary, then a null, passes `conjunct`.
fn entry_passes(column: &mut SliceColumn<'_>, conjunct: &SliceConjunct<'_>, group: &RowGroupSegments<'_>, slot: usize) -> Result<Vec<bool>, ExecError> {
    let SliceColumn::Strings { codes, entries, as_views, .. } = column else {
        return Err(ExecError::Internal(format!("column {slot} has no dictionary")));
    };
    let e = match entries {
        Some(e) => e,
        None => entries.insert(Entries::of(codes, *as_views).map_err(|e| group.codec_error(slot, e))?),
    };
    let field = Field::new(format!("c{slot}"), e.array.data_type().clone(), true);
    let batch = RecordBatch::try_new(Arc::new(Schema::new(vec![field])), vec![e.array.clone()])?;
    let result = passes(&(conjunct.evaluate)(&batch)?, e.array.len())?;
    Ok((0..e.array.len()).map(|i| result.value(i)).collect())
}

/// Reads the next `rows` codes of a string column into its `slice_codes`.
fn read_codes(column: &mut SliceColumn<'_>, rows: usize, group: &RowGroupSegments<'_>, slot: usize) -> Result<(), ExecError> {
    let SliceColumn::Strings { codes, scratch, slice_codes, .. } = column else {
        return Err(ExecError::Internal(format!("column {slot} has no codes")));
    };
    slice_codes.clear();
    while slice_codes.len() < rows {
        let n = codes.next_codes(scratch).map_err(|e| group.codec_error(slot, e))?;
        if n == 0 {
            return Err(group.corrupt(slot, format!("{} codes where {rows} were expected", slice_codes.len())));
        }
        let take = n.min(rows - slice_codes.len());
        slice_codes.extend_from_slice(&scratch[..take]);
    }
    Ok(())
}

fn open_column<'a>(group: &RowGroupSegments<'_>, slot: usize, view: &'a SegmentView<'a>, as_views: bool, pool: &mut VecPool) -> Result<SliceColumn<'a>, ExecError> {
    let header = &view.header;
    let vector_type = matches!(header.column_type, ColumnType::Int32 | ColumnType::Int64 | ColumnType::Date32 | ColumnType::Decimal { .. });
    let nulls = || -> Result<Option<NullBuffer>, ExecError> {
        let Some(validity) = view.validity() else { return Ok(None) };
        let bits = boolean_bitmap::decompress(validity, header.value_count, "segment validity").map_err(|e| group.codec_error(slot, e))?;
        let nulls = NullBuffer::new(bits);
        if nulls.null_count() != header.null_count {
            return Err(group.corrupt(slot, format!("{} nulls, header says {}", nulls.null_count(), header.null_count)));
        }
        Ok(Some(nulls))
    };
    if vector_type {
        let vectors = view.integer_vectors().map_err(|e| group.codec_error(slot, e))?;
        return Ok(SliceColumn::Integer { vectors, column_type: header.column_type, nulls: nulls()?, scratch: Box::new([0i64; VECTOR_VALUES]), raw: false });
    }
    if let Some(codes) = view.string_codes().map_err(|e| group.codec_error(slot, e))? {
        return Ok(SliceColumn::Strings { codes, nulls: nulls()?, scratch: Box::new([0u32; VECTOR_VALUES]), slice_codes: Vec::new(), entries: None, as_views, raw: false });
    }
    if let Some(strings) = view.plain_strings().map_err(|e| group.codec_error(slot, e))? {
        if strings.value_count() != group.row_count {
            return Err(group.corrupt(slot, format!("{} strings for {} rows", strings.value_count(), group.row_count)));
        }
        return Ok(SliceColumn::PlainStrings { strings, nulls: nulls()?, as_views });
    }
    let location = group.locations.get(slot).cloned().unwrap_or_else(flashscan_storage::columnstore::Location::in_memory);
    let array = view.decode_array(&location, pool).map_err(flashscan_storage::StorageError::from)?;
    if array.len() != group.row_count {
        return Err(group.corrupt(slot, format!("decoded {} values for {} rows", array.len(), group.row_count)));
    }
    // A string column with another codec (none today) as views: cast once for the row group.
    let array = if as_views && array.data_type() == &DataType::Utf8 { arrow::compute::cast(&array, &DataType::Utf8View)? } else { array };
    Ok(SliceColumn::Whole(array))
}

/// Kept runs shorter than this on average are not copied run by run (the per-run work
/// outweighs a filter over every row: arrow's filter walks indices for such selections).
const KEEP_RUN_ROWS_MIN: usize = 8;

/// The rows of a slice a column is built for: every row, or the rows a filter kept, as
/// runs of consecutive rows (so values are copied run by run as they are decoded, with no
/// branch per row and no second pass over a built column).
struct Keep {
    /// `[from, to)` positions in the slice, ascending, not touching.
    runs: Vec<(usize, usize)>,
    /// Rows in the runs.
    rows: usize,
    /// The same rows as a mask (for columns decoded whole, filtered by arrow); None: all.
    mask: Option<BooleanArray>,
}

impl Keep {
    fn all(rows: usize) -> Keep {
        Keep { runs: if rows > 0 { vec![(0, rows)] } else { Vec::new() }, rows, mask: None }
    }

    fn selected(mask: BooleanArray) -> Keep {
        let runs: Vec<(usize, usize)> = mask.values().set_slices().collect();
        let rows = runs.iter().map(|(from, to)| to - from).sum();
        Keep { runs, rows, mask: Some(mask) }
    }

    /// The kept positions, in order.
    fn positions(&self) -> impl Iterator<Item = usize> + '_ {
        self.runs.iter().flat_map(|&(from, to)| from..to)
    }

    /// `nulls` (already sliced to the slice) restricted to the kept rows.
    fn nulls(&self, nulls: Option<NullBuffer>) -> Option<NullBuffer> {
        let nulls = nulls?;
        if self.mask.is_none() {
            return Some(nulls);
        }
        let mut bits = arrow::array::builder::BooleanBufferBuilder::new(self.rows);
        for &(from, to) in &self.runs {
            bits.append_buffer(&nulls.inner().slice(from, to - from));
        }
        let nulls = NullBuffer::new(bits.finish());
        (nulls.null_count() > 0).then_some(nulls)
    }
}

/// Decodes `rows` values of an integer cursor, keeping the `keep` rows, into a fresh buffer
/// of `T` (each run copied from the vector while it is in L1).
fn integer_values<T: ArrowPrimitiveType>(
    vectors: &mut IntegerVectors<'_>,
    scratch: &mut Vector,
    rows: usize,
    keep: &Keep,
    widen: impl Fn(i64) -> T::Native,
    group: &RowGroupSegments<'_>,
    slot: usize,
) -> Result<ScalarBuffer<T::Native>, ExecError> {
    if keep.runs.len() * KEEP_RUN_ROWS_MIN > keep.rows {
        return integer_values_at::<T>(vectors, scratch, rows, keep, widen, group, slot);
    }
    let mut values: Vec<T::Native> = Vec::with_capacity(keep.rows);
    let mut done = 0;
    let mut run = 0;
    while done < rows {
        let n = vectors.next_vector(scratch).map_err(|e| group.codec_error(slot, e))?;
        if n == 0 {
            return Err(group.corrupt(slot, format!("{done} values where {rows} were expected")));
        }
        // A slice is whole vectors (the last may be short): never more than asked for.
        let take = n.min(rows - done);
        let (low, high) = (done, done + take);
        // The kept runs that meet this vector's rows [low, high).
        while let Some(&(from, to)) = keep.runs.get(run) {
            if from >= high {
                break;
            }
            let (a, b) = (from.max(low), to.min(high));
            values.extend(scratch[a - low..b - low].iter().map(|v| widen(*v)));
            if to > high {
                break;
            }
            run += 1;
        }
        done = high;
    }
    debug_assert_eq!(values.len(), keep.rows);
    Ok(ScalarBuffer::from(values))
}

/// `integer_values` for a scattered selection (short runs): the kept values picked one by
/// one out of each vector as it is unpacked, vectors without a kept row stepped over
/// unpacked — instead of widening every row into a slice-sized buffer and filtering it.
fn integer_values_at<T: ArrowPrimitiveType>(
    vectors: &mut IntegerVectors<'_>,
    scratch: &mut Vector,
    rows: usize,
    keep: &Keep,
    widen: impl Fn(i64) -> T::Native,
    group: &RowGroupSegments<'_>,
    slot: usize,
) -> Result<ScalarBuffer<T::Native>, ExecError> {
    let mut values: Vec<T::Native> = Vec::with_capacity(keep.rows);
    // Rows the cursor has moved past, and where the vector in `scratch` starts.
    let mut done = 0;
    let mut vector_start = 0;
    let ended = |done: usize| group.corrupt(slot, format!("{done} values where {rows} were expected"));
    for i in keep.positions() {
        // Every vector but the last is full: one that ends before `i` cannot hold it.
        while done <= i {
            let n = if i < done + VECTOR_VALUES {
                vector_start = done;
                vectors.next_vector(scratch)
            } else {
                vectors.skip_vector()
            }
            .map_err(|e| group.codec_error(slot, e))?;
            if n == 0 {
                return Err(ended(done));
            }
            done += n.min(rows - done);
        }
        values.push(widen(scratch[i - vector_start]));
    }
    while done < rows {
        let n = vectors.skip_vector().map_err(|e| group.codec_error(slot, e))?;
        if n == 0 {
            return Err(ended(done));
        }
        done += n.min(rows - done);
    }
    debug_assert_eq!(values.len(), keep.rows);
    Ok(ScalarBuffer::from(values))
}

/// The slice's values of one column for the `keep` rows; `advanced` says whether a string
/// column's codes for this slice were read already.
fn next_array(column: &mut SliceColumn<'_>, start: usize, rows: usize, keep: &Keep, group: &RowGroupSegments<'_>, slot: usize, advanced: Advanced) -> Result<ArrayRef, ExecError> {
    let error = |e: CodecError| group.codec_error(slot, e);
    match column {
        SliceColumn::Whole(array) => {
            let array = array.slice(start, rows);
            Ok(match &keep.mask {
                Some(mask) => arrow::compute::filter(&array, mask)?,
                None => array,
            })
        }
        SliceColumn::PlainStrings { strings, nulls, as_views } => {
            let (offsets, bytes) = strings.slice(start, rows).map_err(error)?;
            let nulls = keep.nulls(nulls.as_ref().map(|n| n.slice(start, rows)));
            let base = offsets[0];
            // The slice's bytes, copied once into its own buffer (a few hundred KB: stays
            // in cache while its views are made, and is recycled by the allocator).
            let buffer = Buffer::from(bytes);
            if *as_views {
                let views: Vec<u128> = keep
                    .positions()
                    .map(|i| {
                        let (from, to) = ((offsets[i] - base) as usize, (offsets[i + 1] - base) as usize);
                        make_view(&buffer[from..to], 0, from as u32)
                    })
                    .collect();
                // SAFETY: every view covers one whole string of `buffer` (block 0) at its
                // offset; `slice` checked the bytes are UTF-8 with every string on a char
                // boundary; nulls were cut to the kept rows (a null slot is an empty string).
                return Ok(Arc::new(unsafe { StringViewArray::new_unchecked(ScalarBuffer::from(views), vec![buffer], nulls) }));
            }
            if keep.mask.is_none() {
                let offsets: Vec<i32> = offsets.iter().map(|o| o - base).collect();
                // SAFETY: offsets start at 0, never decrease and end at buffer.len(); UTF-8
                // and char boundaries checked by `slice`; nulls sliced to `rows`.
                return Ok(Arc::new(unsafe { StringArray::new_unchecked(OffsetBuffer::new(ScalarBuffer::from(offsets)), buffer, nulls) }));
            }
            let array: StringArray = keep.positions().map(|i| std::str::from_utf8(&buffer[(offsets[i] - base) as usize..(offsets[i + 1] - base) as usize]).ok()).collect();
            // Every kept string was checked as UTF-8 on char boundaries by `slice`: none
            // became None above; the nulls come from the segment's validity.
            let (offsets, values, _) = array.into_parts();
            Ok(Arc::new(StringArray::try_new(offsets, values, nulls)?))
        }
        SliceColumn::Integer { vectors, column_type, nulls, scratch, raw } => {
            let nulls = keep.nulls(nulls.as_ref().map(|n| n.slice(start, rows)));
            let array: ArrayRef = match *column_type {
                // A kernel's column: the unscaled values as stored, never widened to i128.
                ColumnType::Decimal { .. } if *raw => Arc::new(Int64Array::new(integer_values::<arrow::datatypes::Int64Type>(vectors, scratch, rows, keep, |v| v, group, slot)?, nulls)),
                // Narrowing: values of an i32 column were i32 when encoded; a corrupt payload
                // that passes its checksum must still not panic (truncation, as the codecs do).
                ColumnType::Int32 => Arc::new(Int32Array::new(integer_values::<arrow::datatypes::Int32Type>(vectors, scratch, rows, keep, |v| v as i32, group, slot)?, nulls)),
                ColumnType::Date32 => Arc::new(Date32Array::new(integer_values::<arrow::datatypes::Date32Type>(vectors, scratch, rows, keep, |v| v as i32, group, slot)?, nulls)),
                ColumnType::Int64 => Arc::new(Int64Array::new(integer_values::<arrow::datatypes::Int64Type>(vectors, scratch, rows, keep, |v| v, group, slot)?, nulls)),
                ColumnType::Decimal { precision, scale } => Arc::new(
                    Decimal128Array::new(integer_values::<arrow::datatypes::Decimal128Type>(vectors, scratch, rows, keep, i128::from, group, slot)?, nulls)
                        .with_precision_and_scale(precision, scale)?,
                ),
                other => return Err(ExecError::Internal(format!("column type {other:?} has no vector cursor"))),
            };
            Ok(array)
        }
        SliceColumn::Strings { .. } => {
            if advanced == Advanced::No {
                read_codes(column, rows, group, slot)?;
            }
            let SliceColumn::Strings { codes, nulls, slice_codes, entries, as_views, raw, .. } = column else {
                return Err(ExecError::Internal(format!("column {slot} has no codes")));
            };
            let e = match entries {
                Some(e) => e,
                None => entries.insert(Entries::of(codes, *as_views).map_err(error)?),
            };
            let nulls = keep.nulls(nulls.as_ref().map(|n| n.slice(start, rows)));
            debug_assert_eq!(slice_codes.len(), rows);
            let kept_codes = keep.runs.iter().flat_map(|&(from, to)| slice_codes[from..to].iter().copied());
            if *raw {
                // The codes themselves over the row group's entries (the same array for
                // every slice of it): a kernel groups by code, no string touched per row.
                let keys = arrow::array::UInt32Array::new(kept_codes.collect::<Vec<u32>>().into(), nulls);
                return Ok(Arc::new(DictionaryArray::<UInt32Type>::try_new(keys, e.array.clone())?));
            }
            if *as_views {
                // Checked below the entry count by next_codes.
                let views: Vec<u128> = kept_codes.map(|c| e.views[c as usize]).collect();
                // SAFETY: every view is an entry's view (see `Entries::of`) over `e.buffer`,
                // block 0; nulls were cut to the kept rows.
                let array = unsafe { StringViewArray::new_unchecked(ScalarBuffer::from(views), vec![e.buffer.clone()], nulls) };
                return Ok(Arc::new(array));
            }
            let mut offsets: Vec<i32> = Vec::with_capacity(keep.rows + 1);
            offsets.push(0);
            let mut bytes: Vec<u8> = Vec::new();
            for code in kept_codes {
                let (from, to) = (e.offsets[code as usize] as usize, e.offsets[code as usize + 1] as usize);
                bytes.extend_from_slice(&e.buffer[from..to]);
                let end = i32::try_from(bytes.len()).map_err(|_| error(CodecError::LimitExceeded { what: "slice string bytes", value: bytes.len() as u64, limit: i32::MAX as u64 }))?;
                offsets.push(end);
            }
            // SAFETY: offsets start at 0 and never decrease, the last is bytes.len(); every
            // string is a whole dictionary entry, validated as UTF-8 when the entries were
            // read, so every offset falls on a char boundary; nulls were cut to the kept rows.
            let array = unsafe { StringArray::new_unchecked(OffsetBuffer::new(ScalarBuffer::from(offsets)), Buffer::from(bytes), nulls) };
            Ok(Arc::new(array))
        }
    }
}

/// Moves a cursor past `rows` values without building them.
fn skip_rows(column: &mut SliceColumn<'_>, rows: usize, group: &RowGroupSegments<'_>, slot: usize) -> Result<(), ExecError> {
    // `skip` steps over one vector, returning its values (0 at the end).
    let skip_vectors = |skip: &mut dyn FnMut() -> Result<usize, CodecError>, what: &str| -> Result<(), ExecError> {
        let mut done = 0;
        while done < rows {
            let n = skip().map_err(|e| group.codec_error(slot, e))?;
            if n == 0 {
                return Err(group.corrupt(slot, format!("{done} {what} where {rows} were expected")));
            }
            done += n;
        }
        Ok(())
    };
    match column {
        SliceColumn::Whole(_) | SliceColumn::PlainStrings { .. } => Ok(()),
        SliceColumn::Integer { vectors, .. } => skip_vectors(&mut || vectors.skip_vector(), "values"),
        SliceColumn::Strings { codes, .. } => skip_vectors(&mut || codes.skip_vector(), "codes"),
    }
}

#[cfg(test)]
mod tests {
    use arrow::array::Float64Array;
    use arrow::compute::concat_batches;
    use flashscan_storage::columnstore::{encode_segment, CodecId, ColumnRef, Location, SegmentOptions};
    use proptest::prelude::*;

    use super::*;

    fn columns(values: &[Option<i64>]) -> Vec<ArrayRef> {
        let decimals: Decimal128Array = values.iter().map(|v| v.map(i128::from)).collect();
        let dates: Date32Array = values.iter().map(|v| v.map(|v| (v % 20_000) as i32)).collect();
        let ints: Int64Array = values.iter().copied().collect();
        let flags: StringArray = values.iter().map(|v| v.map(|v| ["A", "N", "R", "longer than twelve"][(v.rem_euclid(4)) as usize])).collect();
        let floats: Float64Array = values.iter().map(|v| v.map(|v| v as f64 / 3.0)).collect();
        // Plain strings (forced below): short (inlined in a view), long, multi-byte.
        let comments: StringArray = values.iter().map(|v| v.map(|v| if v % 3 == 0 { format!("{v}") } else { format!("comment é {v} with more than twelve bytes") })).collect();
        vec![
            Arc::new(decimals.with_precision_and_scale(15, 2).unwrap()),
            Arc::new(dates),
            Arc::new(ints),
            Arc::new(flags),
            Arc::new(floats),
            Arc::new(comments),
        ]
    }

    /// A string column (3, 5) as `&str`s, whichever string type it has.
    fn strings(array: &ArrayRef) -> Vec<Option<String>> {
        let plain = arrow::compute::cast(array, &DataType::Utf8).unwrap();
        plain.as_any().downcast_ref::<StringArray>().unwrap().iter().map(|v| v.map(str::to_string)).collect()
    }

    proptest! {
        /// Slices (every integer codec, dictionary strings as Utf8 or views, whole-column
        /// types, nulls, any slice size, with and without a filter of an integer conjunct
        /// and a dictionary-string conjunct) equal the whole-column decode, filtered.
        #[test]
        fn slices_equal_the_whole_column_decode(
            values in prop::collection::vec(prop::option::weighted(0.8, -10_000_000i64..10_000_000), 0..5000),
            codec in 0usize..7,
            slice_rows in 1usize..4000,
            threshold in prop::option::of(-10_000_000i64..10_000_000),
            string_filter in prop::option::of(any::<bool>()),
            as_views in any::<bool>(),
            int_as_range in any::<bool>(),
            date_max in prop::option::of(-20_000i32..20_000),
            output_columns in 1usize..=6,
            kernel in any::<bool>(),
            date_min in prop::option::of((-20_000i32..20_000, any::<bool>())),
        ) {
            let codecs = [None, Some(CodecId::Constant), Some(CodecId::Plain), Some(CodecId::Bitpack), Some(CodecId::FastLanes), Some(CodecId::Rle), Some(CodecId::Dictionary)];
            let arrays = columns(&values);
            let schema = Arc::new(Schema::new(arrays.iter().enumerate().map(|(i, a)| Field::new(format!("c{i}"), a.data_type().clone(), true)).collect::<Vec<_>>()));
            let mut segments = Vec::new();
            for (i, array) in arrays.iter().enumerate() {
                // Integer columns take the codec under test; column 3 its best (dictionary),
                // column 5 plain.
                let forced = match i {
                    0..=2 => codecs[codec],
                    5 => Some(CodecId::Plain),
                    _ => None,
                };
                match encode_segment(array.as_ref(), &ColumnRef { index: i, name: "c".into() }, SegmentOptions { archive: false, forced_codec: forced }) {
                    Ok(segment) => segments.push(segment.bytes),
                    Err(_) => return Ok(()), // this codec cannot hold these values
                }
            }
            let location = Location::in_memory();
            let views = segments.iter().map(|bytes| SegmentView::open(bytes, &location).unwrap()).collect();
            let group = RowGroupSegments { row_count: values.len(), schema: schema.clone(), columns: views, locations: vec![location.clone(); 6] };
            let whole = RecordBatch::try_new(schema.clone(), arrays).unwrap();
            // Conjunct on column 2 (Int64): value >= threshold.
            let int_passes = |batch: &RecordBatch| -> Result<BooleanArray, ExecError> {
                let ints = batch.column(0).as_any().downcast_ref::<Int64Array>().unwrap();
                Ok(ints.iter().map(|v| v.map(|v| v >= threshold.unwrap_or(i64::MIN))).collect())
            };
            // Conjunct on column 3 (strings): "A" or the long one; a null gives `null_passes`.
            let null_passes = string_filter.unwrap_or(false);
            let string_passes = |batch: &RecordBatch| -> Result<BooleanArray, ExecError> {
                Ok(strings(batch.column(0)).iter().map(|v| match v {
                    Some(s) => Some(s == "A" || s == "longer than twelve"),
                    None => null_passes.then_some(true),
                }).collect())
            };
            // Conjunct on column 1 (Date32): day <= date_max, always with its range (the
            // decoder compares the integers itself where the codec has a vector cursor).
            let date_passes = |batch: &RecordBatch| -> Result<BooleanArray, ExecError> {
                let days = batch.column(0).as_any().downcast_ref::<Date32Array>().unwrap();
                Ok(days.iter().map(|v| v.map(|v| v <= date_max.unwrap_or(i32::MAX))).collect())
            };
            // A second conjunct on column 1: day >= date_min, a range or not (with date_max
            // a range too, the two ranges are intersected into one compare; with one of them
            // evaluated, the column is decoded for both).
            let date_min_passes = |batch: &RecordBatch| -> Result<BooleanArray, ExecError> {
                let days = batch.column(0).as_any().downcast_ref::<Date32Array>().unwrap();
                Ok(days.iter().map(|v| v.map(|v| v >= date_min.map_or(i32::MIN, |(d, _)| d))).collect())
            };
            let mut conjuncts = Vec::new();
            if let Some((d, as_range)) = date_min {
                let range = as_range.then_some(IntegerRange { low: d as i64, high: i64::MAX });
                conjuncts.push(SliceConjunct { columns: vec![1], evaluate: &date_min_passes, range });
            }
            if let Some(t) = threshold {
                // As a range or only through `evaluate`: the same answers either way.
                let range = int_as_range.then_some(IntegerRange { low: t, high: i64::MAX });
                conjuncts.push(SliceConjunct { columns: vec![2], evaluate: &int_passes, range });
            }
            if string_filter.is_some() {
                conjuncts.push(SliceConjunct { columns: vec![3], evaluate: &string_passes, range: None });
            }
            if let Some(d) = date_max {
                conjuncts.push(SliceConjunct { columns: vec![1], evaluate: &date_passes, range: Some(IntegerRange { low: i64::MIN, high: d as i64 }) });
            }
            let mut selection = vec![true; values.len()];
            if threshold.is_some() {
                for (s, v) in selection.iter_mut().zip(int_passes(&whole.project(&[2]).unwrap()).unwrap().iter()) {
                    *s &= v == Some(true);
                }
            }
            if date_max.is_some() {
                for (s, v) in selection.iter_mut().zip(date_passes(&whole.project(&[1]).unwrap()).unwrap().iter()) {
                    *s &= v == Some(true);
                }
            }
            if date_min.is_some() {
                for (s, v) in selection.iter_mut().zip(date_min_passes(&whole.project(&[1]).unwrap()).unwrap().iter()) {
                    *s &= v == Some(true);
                }
            }
            if string_filter.is_some() {
                for (s, v) in selection.iter_mut().zip(string_passes(&whole.project(&[3]).unwrap()).unwrap().iter()) {
                    *s &= v == Some(true);
                }
            }
            let want = arrow::compute::filter_record_batch(&whole, &BooleanArray::from(selection)).unwrap();
            let mut pool = VecPool::default();
            // Kernel columns (decimals as unscaled i64, dictionary strings as codes) where no
            // filter reads them.
            let kernel_mask = [kernel, false, false, kernel && string_filter.is_none(), false, false];
            let mut slices = SliceDecoder::open(&group, slice_rows, as_views, &mut pool).unwrap().with_output_columns(output_columns).with_kernel_columns(&kernel_mask);
            let out_schema = slices.schema().clone();
            prop_assert_eq!(out_schema.fields().len(), output_columns);
            for c in [3, 5].into_iter().filter(|&c| c < output_columns) {
                let string_type = if as_views { DataType::Utf8View } else { DataType::Utf8 };
                // Codes go out only where the segment has them: an empty column 3 is not
                // dictionary-coded, and its kernel consumer takes (or gives up on) plain strings.
                let coded = group.columns[c].header.codec == CodecId::Dictionary;
                let want_type = if kernel_mask[c] && coded { DataType::Dictionary(Box::new(DataType::UInt32), Box::new(string_type)) } else { string_type };
                prop_assert_eq!(out_schema.field(c).data_type(), &want_type);
            }
            let filter = SliceFilter { conjuncts };
            let mut got = Vec::new();
            loop {
                let next = if filter.conjuncts.is_empty() { slices.next_slice(&group, None).unwrap() } else { slices.next_slice(&group, Some(&filter)).unwrap() };
                let Some(batch) = next else { break };
                if filter.conjuncts.is_empty() {
                    prop_assert!(batch.num_rows() <= slice_rows.div_ceil(VECTOR_VALUES) * VECTOR_VALUES);
                }
                got.push(batch);
            }
            let got = concat_batches(&out_schema, &got).unwrap();
            prop_assert_eq!(got.num_rows(), want.num_rows());
            for c in [0usize, 1, 2, 4].into_iter().filter(|&c| c < output_columns) {
                if got.column(c).data_type() == &DataType::Int64 && want.column(c).data_type() != &DataType::Int64 {
                    // A kernel column: the decimal's unscaled values, the same nulls.
                    prop_assert!(kernel_mask[c]);
                    let ints = got.column(c).as_any().downcast_ref::<Int64Array>().unwrap();
                    let decimals = want.column(c).as_any().downcast_ref::<Decimal128Array>().unwrap();
                    prop_assert_eq!(ints.iter().map(|v| v.map(i128::from)).collect::<Vec<_>>(), decimals.iter().collect::<Vec<_>>());
                } else {
                    prop_assert_eq!(got.column(c), want.column(c));
                }
            }
            for c in [3usize, 5].into_iter().filter(|&c| c < output_columns) {
                prop_assert_eq!(strings(got.column(c)), strings(want.column(c)));
            }
        }

        /// A range holds exactly the values between its bounds, at the ends of i64 too.
        #[test]
        fn integer_ranges_are_inclusive_bounds(low in any::<i64>(), high in any::<i64>(), value in any::<i64>(), edge in 0usize..4) {
            let value = [value, low, high, i64::MIN][edge];
            let range = IntegerRange { low, high };
            prop_assert_eq!(range.contains(value), low <= value && value <= high);
            let other = IntegerRange { low: value, high: i64::MAX };
            prop_assert_eq!(range.intersect(&other).contains(value), range.contains(value) && other.contains(value));
        }
    }
}
