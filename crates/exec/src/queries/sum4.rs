//! SUM of four decimal columns (l_quantity, l_extendedprice, l_discount, l_tax), exact:
//! sums of scaled integers in i128, printed with the column's scale.

use arrow::array::Array;
use arrow::record_batch::RecordBatch;

use crate::error::ExecError;
use crate::heap_pages::HeapPageSink;
use flashscan_storage::HeapPageView;
use crate::queries::columns::{column, decimal_values, same_scale};
use crate::queries::Kernel;
use crate::scan::BatchSink;
use crate::segments::{RowGroupSegments, SegmentSink};
use flashscan_storage::columnstore::{ColumnType, VecPool};
use flashscan_storage::compression::{CodecError, IntegerVectors, VECTOR_VALUES};
use crate::value::{QueryResult, Value};

pub const COLUMNS: &[&str] = &["l_quantity", "l_extendedprice", "l_discount", "l_tax"];
const NAME: &str = "sum4";

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct ExactSum {
    sum: i128,
    non_null_count: u64,
    /// Set by the first batch; every later batch must agree.
    scale: Option<u8>,
}

#[derive(Debug, Default)]
pub struct Sum4Kernel {
    sums: [ExactSum; COLUMNS.len()],
    scratch: Vec<i128>,
    pool: VecPool,
}

/// Sum of a slice: a plain loop the compiler unrolls; i128 never overflows here (a batch
/// of 2^32 values of 10^18 each stays below 2^127).
fn sum_all(values: &[i128]) -> i128 {
    values.iter().sum()
}

fn sum_valid(values: &[i128], array: &dyn Array) -> i128 {
    match array.nulls() {
        None => sum_all(values),
        Some(nulls) => nulls.valid_indices().map(|i| values[i]).sum(),
    }
}

impl BatchSink for Sum4Kernel {
    fn consume(&mut self, batch: &RecordBatch) -> Result<(), ExecError> {
        for (acc, name) in self.sums.iter_mut().zip(COLUMNS) {
            let array = column(batch, NAME, name)?;
            let (values, scale) = decimal_values(array.as_ref(), &mut self.scratch, NAME, name)?;
            merge_scale(&mut acc.scale, scale, name)?;
            acc.sum += sum_valid(values, array.as_ref());
            acc.non_null_count += (array.len() - array.null_count()) as u64;
        }
        Ok(())
    }
}

/// The scale of a column the vector path sums: decimals (≤ 18 digits, i64 in the store) and
/// integers, as `decimal_values` takes them.
fn integer_scale(column_type: ColumnType) -> Option<u8> {
    match column_type {
        ColumnType::Decimal { scale, .. } if scale >= 0 => Some(scale as u8),
        ColumnType::Int64 | ColumnType::Int32 => Some(0),
        _ => None,
    }
}

impl SegmentSink for Sum4Kernel {
    /// Each column summed a vector at a time straight from its segment (fused unpack,
    /// frame of reference and sum; counts per code for dictionaries), never materialized.
    fn consume_segments(&mut self, group: &RowGroupSegments<'_>) -> Result<(), ExecError> {
        let Some(scales) = group.columns.iter().map(|view| integer_scale(view.header.column_type)).collect::<Option<Vec<u8>>>() else {
            let batch = group.to_batch(&mut self.pool)?;
            return self.consume(&batch);
        };
        for (slot, ((acc, name), view)) in self.sums.iter_mut().zip(COLUMNS).zip(&group.columns).enumerate() {
            merge_scale(&mut acc.scale, scales[slot], name)?;
            let mut vectors = view.integer_vectors().map_err(|error| group.codec_error(slot, error))?;
            let sum = match view.validity() {
                None => vectors.sum_rest().map_err(|error| group.codec_error(slot, error))?,
                Some(validity) => sum_valid_vectors(&mut vectors, validity).map_err(|error| group.codec_error(slot, error))?,
            };
            acc.sum += sum;
            acc.non_null_count += (view.header.value_count - view.header.null_count) as u64;
        }
        Ok(())
    }
}

impl HeapPageSink for Sum4Kernel {
    /// Each column's fixed-width fields summed where they lie in the verified page (8-byte
    /// decimals and integers, 4-byte integers), NULLs skipped by their bit.
    fn consume_page(&mut self, page: &HeapPageView<'_>) -> Result<bool, ExecError> {
        if !page.has_columns(COLUMNS) {
            return Ok(false);
        }
        let mut scales = [0u8; COLUMNS.len()];
        for (k, scale) in scales.iter_mut().enumerate() {
            match integer_scale(page.column_type(k)) {
                Some(s) => *scale = s,
                None => return Ok(false),
            }
        }
        for (k, (acc, name)) in self.sums.iter_mut().zip(COLUMNS).enumerate() {
            merge_scale(&mut acc.scale, scales[k], name)?;
            let mut sum = 0i128;
            let read = if page.non_null_count(k) == page.row_count() {
                page.for_each_integer(k, |_, value| sum += i128::from(value))
            } else {
                page.for_each_integer(k, |row, value| {
                    if !page.is_null(k, row) {
                        sum += i128::from(value);
                    }
                })
            };
            debug_assert!(read, "integer_scale admits only 4- and 8-byte columns");
            acc.sum += sum;
            acc.non_null_count += page.non_null_count(k) as u64;
        }
        Ok(true)
    }

    fn consume_batch(&mut self, batch: &RecordBatch) -> Result<(), ExecError> {
        self.consume(batch)
    }
}

/// Sum of the valid values (bit i of `validity` set), a vector at a time: a vector of 1,024
/// rows is exactly 128 bytes of the bitmap. Null slots hold fillers and are masked out.
fn sum_valid_vectors(vectors: &mut IntegerVectors<'_>, validity: &[u8]) -> Result<i128, CodecError> {
    let mut vector = [0i64; VECTOR_VALUES];
    let mut total = 0i128;
    let mut first_row = 0usize;
    loop {
        let length = vectors.next_vector(&mut vector)?;
        if length == 0 {
            return Ok(total);
        }
        let bits = &validity[first_row / 8..];
        for (row, value) in vector[..length].iter().enumerate() {
            let valid = (bits[row / 8] >> (row % 8)) & 1;
            // Branch-free: -1 (all ones) keeps the value, 0 clears it.
            total += i128::from(value & -(i64::from(valid)));
        }
        first_row += length;
    }
}

fn merge_scale(mine: &mut Option<u8>, theirs: u8, name: &str) -> Result<(), ExecError> {
    same_scale(mine, theirs, NAME, name)
}

impl Kernel for Sum4Kernel {
    fn merge(&mut self, other: Self) -> Result<(), ExecError> {
        for ((a, b), name) in self.sums.iter_mut().zip(other.sums).zip(COLUMNS) {
            if let Some(scale) = b.scale {
                merge_scale(&mut a.scale, scale, name)?;
            }
            a.sum += b.sum;
            a.non_null_count += b.non_null_count;
        }
        Ok(())
    }

    fn finish(self) -> QueryResult {
        let row = self
            .sums
            .iter()
            .map(|s| match s.scale {
                // SQL: the sum of no values is NULL.
                _ if s.non_null_count == 0 => Value::Null,
                Some(scale) => Value::Decimal { value: s.sum, scale },
                None => Value::Null,
            })
            .collect();
        QueryResult { columns: COLUMNS.iter().map(|c| format!("sum({c})")).collect(), rows: vec![row], rows_total: 1 }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{ArrayRef, Decimal128Array};
    use arrow::datatypes::{Field, Schema};
    use flashscan_storage::columnstore::{encode_segment, ColumnRef, CodecId, Location, SegmentOptions, SegmentView};
    use proptest::prelude::*;

    use super::*;

    proptest! {
        /// The vector path (nulls, every integer codec, archive or not) sums like the batch path.
        #[test]
        fn segment_sums_equal_batch_sums(
            values in prop::collection::vec(prop::option::weighted(0.8, -10_000_000i64..10_000_000), 0..5000),
            codec in 0usize..7,
            archive in any::<bool>(),
        ) {
            let codecs = [None, Some(CodecId::Constant), Some(CodecId::Plain), Some(CodecId::Bitpack), Some(CodecId::FastLanes), Some(CodecId::Rle), Some(CodecId::Dictionary)];
            let arrays: Vec<ArrayRef> = (0..COLUMNS.len())
                .map(|c| {
                    let column: Decimal128Array = values.iter().map(|v| v.map(|v| i128::from(v / (c as i64 + 1)))).collect();
                    Arc::new(column.with_precision_and_scale(15, 2).unwrap()) as ArrayRef
                })
                .collect();
            let schema = Arc::new(Schema::new(COLUMNS.iter().map(|name| Field::new(*name, arrays[0].data_type().clone(), true)).collect::<Vec<_>>()));
            let mut segments = Vec::new();
            for array in &arrays {
                let options = SegmentOptions { archive, forced_codec: codecs[codec] };
                match encode_segment(array.as_ref(), &ColumnRef { index: 0, name: "c".into() }, options) {
                    Ok(segment) => segments.push(segment.bytes),
                    Err(_) => return Ok(()), // this codec cannot hold these values
                }
            }
            let location = Location::in_memory();
            let columns = segments.iter().map(|bytes| SegmentView::open(bytes, &location).unwrap()).collect();
            let group = RowGroupSegments { row_count: values.len(), schema: schema.clone(), columns, locations: vec![location.clone(); 4] };
            let mut by_segments = Sum4Kernel::default();
            by_segments.consume_segments(&group).unwrap();
            let mut by_batch = Sum4Kernel::default();
            by_batch.consume(&RecordBatch::try_new(schema, arrays).unwrap()).unwrap();
            prop_assert_eq!(by_segments.finish(), by_batch.finish());
        }
    }
}
