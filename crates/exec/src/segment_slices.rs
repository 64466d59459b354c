//! A column store row group handed on as Arrow batches of a few thousand rows, each decoded
//! straight from the verified segments a vector (1,024 values) at a time into the slice's
//! own buffers: no million-row intermediate per column is ever built, written to DRAM and
//! read back. What SQL scans use (DataFusion's operators take batches of `batch_size` rows).
//!
//! - integer-like columns (Int32, Int64, Date32, decimals of ≤ 18 digits): the codec's
//!   vector cursor writes into the slice's buffer (a decimal is widened to the i128 that
//!   Arrow's Decimal128 needs as it is written, the only place it is widened);
//! - dictionary strings: the codes a vector at a time, the slice's strings copied from the
//!   entries (never the whole column's);
//! - anything else (floats, booleans, plain strings, wide decimals, …): decoded whole once
//!   by the whole-column decoder, then handed out in zero-copy slices.
//!
//! Late materialization: `SliceFilter` names the columns a predicate reads; they are
//! decoded first, the predicate picks the rows, and the other columns of a slice where no
//! row survives are skipped without being unpacked (`skip_vector`), the rest decoded and
//! filtered to the surviving rows.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, BooleanArray, Date32Array, Decimal128Array, Int32Array, Int64Array, StringArray};
use arrow::buffer::{Buffer, NullBuffer, OffsetBuffer, ScalarBuffer};
use arrow::datatypes::{ArrowPrimitiveType, Field, Schema, SchemaRef};
use arrow::record_batch::{RecordBatch, RecordBatchOptions};
use flashscan_storage::columnstore::{ColumnType, SegmentView, VecPool};
use flashscan_storage::compression::string_dictionary::StringCodes;
use flashscan_storage::compression::{boolean_bitmap, CodecError, IntegerVectors, Vector, VECTOR_VALUES};

use crate::error::ExecError;
use crate::segments::RowGroupSegments;

/// Rows per slice, at most: bounds a slice's buffers (16 bytes × rows per decimal column).
pub const SLICE_ROWS_MAX: usize = 1 << 20;

/// A predicate evaluated inside the scan on the columns it reads, before the others are
/// decoded. `evaluate` gets a batch of the `columns` (indexes into the decoded columns, in
/// that order) and returns, per row, whether it passes (a null counts as not passing).
pub struct SliceFilter<'f> {
    pub columns: Vec<usize>,
    pub evaluate: &'f mut dyn FnMut(&RecordBatch) -> Result<BooleanArray, ExecError>,
}

/// One column's cursor over its segment.
enum SliceColumn<'a> {
    Integer { vectors: IntegerVectors<'a>, column_type: ColumnType, nulls: Option<NullBuffer>, scratch: Box<Vector> },
    Strings { codes: StringCodes<'a>, nulls: Option<NullBuffer>, scratch: Box<[u32; VECTOR_VALUES]> },
    Whole(ArrayRef),
}

/// Hands out one row group's columns a slice of rows at a time.
pub struct SliceDecoder<'a> {
    columns: Vec<SliceColumn<'a>>,
    schema: SchemaRef,
    row_count: usize,
    position: usize,
    slice_rows: usize,
}

impl<'a> SliceDecoder<'a> {
    /// Opens every column of `group` for slices of `slice_rows` rows (rounded up to whole
    /// vectors, since a vector cursor hands out whole vectors).
    pub fn open(group: &'a RowGroupSegments<'a>, slice_rows: usize, pool: &mut VecPool) -> Result<SliceDecoder<'a>, ExecError> {
        let slice_rows = slice_rows.clamp(1, SLICE_ROWS_MAX).div_ceil(VECTOR_VALUES) * VECTOR_VALUES;
        let mut columns = Vec::with_capacity(group.columns.len());
        for (slot, view) in group.columns.iter().enumerate() {
            columns.push(open_column(group, slot, view, pool)?);
        }
        Ok(SliceDecoder { columns, schema: group.schema.clone(), row_count: group.row_count, position: 0, slice_rows })
    }

    /// The next slice of every column, or None after the last row. With a filter, the
    /// slice holds only the rows that pass (possibly none: then it has 0 rows).
    pub fn next_slice(&mut self, group: &RowGroupSegments<'_>, filter: Option<&mut SliceFilter<'_>>) -> Result<Option<RecordBatch>, ExecError> {
        let rows = self.slice_rows.min(self.row_count - self.position);
        if rows == 0 {
            return Ok(None);
        }
        let start = self.position;
        self.position += rows;
        let options = RecordBatchOptions::new().with_row_count(Some(rows));
        let Some(filter) = filter else {
            let mut arrays = Vec::with_capacity(self.columns.len());
            for (slot, column) in self.columns.iter_mut().enumerate() {
                arrays.push(next_array(column, start, rows, group, slot)?);
            }
            return Ok(Some(RecordBatch::try_new_with_options(self.schema.clone(), arrays, &options)?));
        };
        // The predicate's columns first.
        let mut decoded: Vec<Option<ArrayRef>> = vec![None; self.columns.len()];
        let mut fields = Vec::with_capacity(filter.columns.len());
        let mut filter_arrays = Vec::with_capacity(filter.columns.len());
        for &slot in &filter.columns {
            let array = match &decoded[slot] {
                Some(a) => a.clone(),
                None => {
                    let column = self.columns.get_mut(slot).ok_or_else(|| ExecError::Internal(format!("filter column {slot} out of range")))?;
                    let a = next_array(column, start, rows, group, slot)?;
                    decoded[slot] = Some(a.clone());
                    a
                }
            };
            fields.push(Field::new(format!("c{slot}"), array.data_type().clone(), true));
            filter_arrays.push(array);
        }
        let filter_batch = RecordBatch::try_new_with_options(Arc::new(Schema::new(fields)), filter_arrays, &options)?;
        let selection = (filter.evaluate)(&filter_batch)?;
        if selection.len() != rows {
            return Err(ExecError::Internal(format!("filter returned {} values for {rows} rows", selection.len())));
        }
        // A null result does not pass (SQL's WHERE).
        let selection = match selection.nulls() {
            Some(nulls) if nulls.null_count() > 0 => BooleanArray::new(selection.values() & nulls.inner(), None),
            _ => selection,
        };
        let passing = selection.true_count();
        let mut arrays = Vec::with_capacity(self.columns.len());
        for (slot, column) in self.columns.iter_mut().enumerate() {
            let array = match decoded[slot].take() {
                Some(a) => a,
                None if passing == 0 => {
                    skip_rows(column, rows, group, slot)?;
                    arrays.push(arrow::array::new_empty_array(self.schema.field(slot).data_type()));
                    continue;
                }
                None => next_array(column, start, rows, group, slot)?,
            };
            arrays.push(if passing == rows { array } else { arrow::compute::filter(&array, &selection)? });
        }
        let options = RecordBatchOptions::new().with_row_count(Some(passing));
        Ok(Some(RecordBatch::try_new_with_options(self.schema.clone(), arrays, &options)?))
    }
}

fn open_column<'a>(group: &RowGroupSegments<'_>, slot: usize, view: &'a SegmentView<'a>, pool: &mut VecPool) -> Result<SliceColumn<'a>, ExecError> {
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
        return Ok(SliceColumn::Integer { vectors, column_type: header.column_type, nulls: nulls()?, scratch: Box::new([0i64; VECTOR_VALUES]) });
    }
    if let Some(codes) = view.string_codes().map_err(|e| group.codec_error(slot, e))? {
        return Ok(SliceColumn::Strings { codes, nulls: nulls()?, scratch: Box::new([0u32; VECTOR_VALUES]) });
    }
    let location = group.locations.get(slot).cloned().unwrap_or_else(flashscan_storage::columnstore::Location::in_memory);
    let array = view.decode_array(&location, pool).map_err(flashscan_storage::StorageError::from)?;
    if array.len() != group.row_count {
        return Err(group.corrupt(slot, format!("decoded {} values for {} rows", array.len(), group.row_count)));
    }
    Ok(SliceColumn::Whole(array))
}

/// Decodes `rows` values of an integer cursor into a fresh buffer of `T`.
fn integer_values<T: ArrowPrimitiveType>(
    vectors: &mut IntegerVectors<'_>,
    scratch: &mut Vector,
    rows: usize,
    widen: impl Fn(i64) -> T::Native,
    group: &RowGroupSegments<'_>,
    slot: usize,
) -> Result<ScalarBuffer<T::Native>, ExecError> {
    let mut values: Vec<T::Native> = Vec::with_capacity(rows);
    while values.len() < rows {
        let n = vectors.next_vector(scratch).map_err(|e| group.codec_error(slot, e))?;
        if n == 0 {
            return Err(group.corrupt(slot, format!("{} values where {rows} were expected", values.len())));
        }
        // A slice is whole vectors (the last may be short): never more than asked for.
        let take = n.min(rows - values.len());
        values.extend(scratch[..take].iter().map(|v| widen(*v)));
    }
    Ok(ScalarBuffer::from(values))
}

fn next_array(column: &mut SliceColumn<'_>, start: usize, rows: usize, group: &RowGroupSegments<'_>, slot: usize) -> Result<ArrayRef, ExecError> {
    let error = |e: CodecError| group.codec_error(slot, e);
    match column {
        SliceColumn::Whole(array) => Ok(array.slice(start, rows)),
        SliceColumn::Integer { vectors, column_type, nulls, scratch } => {
            let nulls = nulls.as_ref().map(|n| n.slice(start, rows));
            let array: ArrayRef = match *column_type {
                // Narrowing: values of an i32 column were i32 when encoded; a corrupt payload
                // that passes its checksum must still not panic (truncation, as the codecs do).
                ColumnType::Int32 => Arc::new(Int32Array::new(integer_values::<arrow::datatypes::Int32Type>(vectors, scratch, rows, |v| v as i32, group, slot)?, nulls)),
                ColumnType::Date32 => Arc::new(Date32Array::new(integer_values::<arrow::datatypes::Date32Type>(vectors, scratch, rows, |v| v as i32, group, slot)?, nulls)),
                ColumnType::Int64 => Arc::new(Int64Array::new(integer_values::<arrow::datatypes::Int64Type>(vectors, scratch, rows, |v| v, group, slot)?, nulls)),
                ColumnType::Decimal { precision, scale } => Arc::new(
                    Decimal128Array::new(integer_values::<arrow::datatypes::Decimal128Type>(vectors, scratch, rows, i128::from, group, slot)?, nulls)
                        .with_precision_and_scale(precision, scale)?,
                ),
                other => return Err(ExecError::Internal(format!("column type {other:?} has no vector cursor"))),
            };
            Ok(array)
        }
        SliceColumn::Strings { codes, nulls, scratch } => {
            let nulls = nulls.as_ref().map(|n| n.slice(start, rows));
            let mut offsets: Vec<i32> = Vec::with_capacity(rows + 1);
            offsets.push(0);
            let mut bytes: Vec<u8> = Vec::new();
            let mut done = 0;
            while done < rows {
                let n = codes.next_codes(scratch).map_err(error)?;
                if n == 0 {
                    return Err(group.corrupt(slot, format!("{done} codes where {rows} were expected")));
                }
                let take = n.min(rows - done);
                for code in &scratch[..take] {
                    // Checked below the entry count by next_codes.
                    bytes.extend_from_slice(codes.entry(*code as usize));
                    let end = i32::try_from(bytes.len()).map_err(|_| error(CodecError::LimitExceeded { what: "slice string bytes", value: bytes.len() as u64, limit: i32::MAX as u64 }))?;
                    offsets.push(end);
                }
                done += take;
            }
            // SAFETY: offsets start at 0 and never decrease, the last is bytes.len(); every
            // string is a whole dictionary entry, validated as UTF-8 when the entries were
            // read, so every offset falls on a char boundary; nulls were sliced to `rows`.
            let array = unsafe { StringArray::new_unchecked(OffsetBuffer::new(ScalarBuffer::from(offsets)), Buffer::from(bytes), nulls) };
            Ok(Arc::new(array))
        }
    }
}

/// Moves a cursor past `rows` values without building them.
fn skip_rows(column: &mut SliceColumn<'_>, rows: usize, group: &RowGroupSegments<'_>, slot: usize) -> Result<(), ExecError> {
    let error = |e: CodecError| group.codec_error(slot, e);
    let mut done = 0;
    match column {
        SliceColumn::Whole(_) => {}
        SliceColumn::Integer { vectors, .. } => {
            while done < rows {
                let n = vectors.skip_vector().map_err(error)?;
                if n == 0 {
                    return Err(group.corrupt(slot, format!("{done} values where {rows} were expected")));
                }
                done += n;
            }
        }
        SliceColumn::Strings { codes, .. } => {
            while done < rows {
                let n = codes.skip_vector().map_err(error)?;
                if n == 0 {
                    return Err(group.corrupt(slot, format!("{done} codes where {rows} were expected")));
                }
                done += n;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use arrow::array::{Float64Array, StringArray};
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
        vec![
            Arc::new(decimals.with_precision_and_scale(15, 2).unwrap()),
            Arc::new(dates),
            Arc::new(ints),
            Arc::new(flags),
            Arc::new(floats),
        ]
    }

    proptest! {
        /// Slices (every integer codec, dictionary strings, whole-column types, nulls, any
        /// slice size, with and without a filter) equal the whole-column decode, filtered.
        #[test]
        fn slices_equal_the_whole_column_decode(
            values in prop::collection::vec(prop::option::weighted(0.8, -10_000_000i64..10_000_000), 0..5000),
            codec in 0usize..7,
            slice_rows in 1usize..4000,
            threshold in prop::option::of(-10_000_000i64..10_000_000),
        ) {
            let codecs = [None, Some(CodecId::Constant), Some(CodecId::Plain), Some(CodecId::Bitpack), Some(CodecId::FastLanes), Some(CodecId::Rle), Some(CodecId::Dictionary)];
            let arrays = columns(&values);
            let schema = Arc::new(Schema::new(arrays.iter().enumerate().map(|(i, a)| Field::new(format!("c{i}"), a.data_type().clone(), true)).collect::<Vec<_>>()));
            let mut segments = Vec::new();
            for (i, array) in arrays.iter().enumerate() {
                // Integer columns take the codec under test; strings their best (dictionary).
                let forced = if i < 3 { codecs[codec] } else { None };
                match encode_segment(array.as_ref(), &ColumnRef { index: i, name: "c".into() }, SegmentOptions { archive: false, forced_codec: forced }) {
                    Ok(segment) => segments.push(segment.bytes),
                    Err(_) => return Ok(()), // this codec cannot hold these values
                }
            }
            let location = Location::in_memory();
            let views = segments.iter().map(|bytes| SegmentView::open(bytes, &location).unwrap()).collect();
            let group = RowGroupSegments { row_count: values.len(), schema: schema.clone(), columns: views, locations: vec![location.clone(); 5] };
            let whole = RecordBatch::try_new(schema.clone(), arrays).unwrap();
            // The filter reads column 2 (Int64): value >= threshold.
            let passes = |batch: &RecordBatch| -> BooleanArray {
                let ints = batch.column(0).as_any().downcast_ref::<Int64Array>().unwrap();
                ints.iter().map(|v| v.map(|v| v >= threshold.unwrap_or(i64::MIN))).collect()
            };
            let want = match threshold {
                Some(_) => {
                    // A null does not pass.
                    let selection: BooleanArray = passes(&whole.project(&[2]).unwrap()).iter().map(|v| Some(v == Some(true))).collect();
                    arrow::compute::filter_record_batch(&whole, &selection).unwrap()
                }
                None => whole.clone(),
            };
            let mut pool = VecPool::default();
            let mut slices = SliceDecoder::open(&group, slice_rows, &mut pool).unwrap();
            let mut got = Vec::new();
            let mut evaluate = |b: &RecordBatch| Ok(passes(b));
            loop {
                let next = match threshold {
                    Some(_) => slices.next_slice(&group, Some(&mut SliceFilter { columns: vec![2], evaluate: &mut evaluate })).unwrap(),
                    None => slices.next_slice(&group, None).unwrap(),
                };
                let Some(batch) = next else { break };
                if threshold.is_none() {
                    prop_assert!(batch.num_rows() <= slice_rows.div_ceil(VECTOR_VALUES) * VECTOR_VALUES);
                }
                got.push(batch);
            }
            let got = concat_batches(&schema, &got).unwrap();
            prop_assert_eq!(got, want);
        }
    }
}
