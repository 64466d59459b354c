//! Rows waiting to be written in compressed form: every value already turned into its
//! compressed bytes (`value_bytes`), kept in one arena so that page compression can analyse
//! and re-analyse a page's worth of rows without allocating per value.

use arrow::array::{Array, AsArray, RecordBatch};

use arrow::datatypes::{
    ArrowPrimitiveType, Date32Type, Decimal128Type, Float64Type, Int32Type, Int64Type, Time32MillisecondType, Time32SecondType, Time64MicrosecondType,
    Time64NanosecondType, TimestampMicrosecondType, TimestampMillisecondType, TimestampNanosecondType, TimestampSecondType, UInt64Type,
};

use super::row_codec::Value;
use super::value_bytes::{cell_cost_bytes, put_float, put_integer, put_integer128, ValueEncoding};
use crate::column::{ColumnType, TemporalUnit};
use crate::error::StorageError;

/// Marks a NULL cell in `cells`.
const CELL_NULL: u32 = u32::MAX;

pub struct CellRows {
    types: Vec<ColumnType>,
    encodings: Vec<ValueEncoding>,
    arena: Vec<u8>,
    /// Row-major: (start in arena, length) per column; length `CELL_NULL` for NULL.
    cells: Vec<(u32, u32)>,
}

impl CellRows {
    pub fn new(types: &[ColumnType]) -> CellRows {
        debug_assert!(!types.is_empty());
        CellRows { types: types.to_vec(), encodings: types.iter().map(|&t| ValueEncoding::of(t)).collect(), arena: Vec::new(), cells: Vec::new() }
    }

    pub fn column_count(&self) -> usize {
        self.types.len()
    }

    pub fn types(&self) -> &[ColumnType] {
        &self.types
    }

    pub fn row_count(&self) -> usize {
        self.cells.len() / self.types.len()
    }

    pub fn is_empty(&self) -> bool {
        self.cells.is_empty()
    }

    /// The value bytes of one cell, `None` for NULL.
    #[inline]
    pub fn cell(&self, row: usize, column: usize) -> Option<&[u8]> {
        let (start, len) = self.cells[row * self.types.len() + column];
        (len != CELL_NULL).then(|| &self.arena[start as usize..start as usize + len as usize])
    }

    /// Bytes of the row in row-compressed form (bitmap, nibbles, cells).
    pub fn row_compressed_bytes(&self, row: usize) -> usize {
        let n = self.types.len();
        let cells: usize = (0..n).map(|c| self.cell(row, c).map_or(0, |v| cell_cost_bytes(v.len()))).sum();
        row_prefix_bytes(n) + cells
    }

    /// Drops the first `rows` rows (they went into a page).
    pub fn drain_front(&mut self, rows: usize) {
        debug_assert!(rows <= self.row_count());
        let n = self.types.len();
        if rows == self.row_count() {
            self.cells.clear();
            self.arena.clear();
            return;
        }
        let first_kept = self.cells[rows * n..].iter().find(|c| c.1 != CELL_NULL).map_or(self.arena.len(), |c| c.0 as usize);
        self.arena.drain(..first_kept);
        self.cells.drain(..rows * n);
        for c in &mut self.cells {
            if c.1 != CELL_NULL {
                c.0 -= first_kept as u32;
            }
        }
    }

    #[inline]
    fn push_cell(&mut self, start: usize) {
        let len = self.arena.len() - start;
        self.cells.push((start as u32, len as u32));
    }

    #[inline]
    fn push_null(&mut self) {
        self.cells.push((self.arena.len() as u32, CELL_NULL));
    }

    /// Appends one row of `Value`s (tests and small writers).
    pub fn push_values(&mut self, values: &[Value]) {
        debug_assert_eq!(values.len(), self.types.len());
        for v in values {
            let start = self.arena.len();
            match v {
                Value::Null => {
                    self.push_null();
                    continue;
                }
                Value::Int32(x) | Value::Date32(x) => {
                    put_integer(*x as i64, &mut self.arena);
                }
                Value::Int64(x) | Value::Decimal(x) => {
                    put_integer(*x, &mut self.arena);
                }
                Value::Boolean(b) => {
                    put_integer(*b as i64, &mut self.arena);
                }
                Value::Float64(x) => {
                    put_float(*x, &mut self.arena);
                }
                Value::Utf8(s) => self.arena.extend_from_slice(s.as_bytes()),
                Value::UInt64(x) => {
                    put_integer(*x as i64, &mut self.arena);
                }
                Value::Int128(x) => {
                    put_integer128(*x, &mut self.arena);
                }
                Value::Binary(b) => self.arena.extend_from_slice(b),
            }
            self.push_cell(start);
        }
    }

    /// Appends every row of a batch whose columns have the storage types' Arrow types (as
    /// `HeapDecoder` produces them).
    pub fn push_batch(&mut self, batch: &RecordBatch) -> Result<(), StorageError> {
        let n = self.types.len();
        if batch.num_columns() != n {
            return Err(StorageError::InvalidArgument(format!("batch has {} columns, expected {n}", batch.num_columns())));
        }
        for (i, t) in self.types.iter().enumerate() {
            if batch.column(i).data_type() != &t.arrow_type() {
                return Err(StorageError::InvalidArgument(format!("column {i} is {}, expected {}", batch.column(i).data_type(), t.arrow_type())));
            }
        }
        self.cells.reserve(batch.num_rows() * n);
        for row in 0..batch.num_rows() {
            for c in 0..n {
                let a = batch.column(c);
                if a.is_null(row) {
                    self.push_null();
                    continue;
                }
                let start = self.arena.len();
                match self.types[c] {
                    ColumnType::Int32 => {
                        put_integer(a.as_primitive::<Int32Type>().value(row) as i64, &mut self.arena);
                    }
                    ColumnType::Date32 => {
                        put_integer(a.as_primitive::<Date32Type>().value(row) as i64, &mut self.arena);
                    }
                    ColumnType::Int64 => {
                        put_integer(a.as_primitive::<Int64Type>().value(row), &mut self.arena);
                    }
                    ColumnType::Decimal { .. } => {
                        let x = a.as_primitive::<Decimal128Type>().value(row);
                        let x = i64::try_from(x).map_err(|_| StorageError::ValueOutOfRange { column: format!("column {c}"), reason: format!("decimal {x} does not fit 18 digits") })?;
                        put_integer(x, &mut self.arena);
                    }
                    ColumnType::Boolean => {
                        put_integer(a.as_boolean().value(row) as i64, &mut self.arena);
                    }
                    ColumnType::Float64 => {
                        put_float(a.as_primitive::<Float64Type>().value(row), &mut self.arena);
                    }
                    ColumnType::Utf8 => self.arena.extend_from_slice(a.as_string::<i32>().value(row).as_bytes()),
                    ColumnType::UInt64 => {
                        put_integer(a.as_primitive::<UInt64Type>().value(row) as i64, &mut self.arena);
                    }
                    ColumnType::Timestamp { unit, .. } => {
                        let v = match unit {
                            TemporalUnit::Second => int64_at::<TimestampSecondType>(a, row),
                            TemporalUnit::Millisecond => int64_at::<TimestampMillisecondType>(a, row),
                            TemporalUnit::Microsecond => int64_at::<TimestampMicrosecondType>(a, row),
                            TemporalUnit::Nanosecond => int64_at::<TimestampNanosecondType>(a, row),
                        };
                        put_integer(v, &mut self.arena);
                    }
                    ColumnType::Time { unit } => {
                        let v = match unit {
                            TemporalUnit::Second => i64::from(a.as_primitive::<Time32SecondType>().value(row)),
                            TemporalUnit::Millisecond => i64::from(a.as_primitive::<Time32MillisecondType>().value(row)),
                            TemporalUnit::Microsecond => int64_at::<Time64MicrosecondType>(a, row),
                            TemporalUnit::Nanosecond => int64_at::<Time64NanosecondType>(a, row),
                        };
                        put_integer(v, &mut self.arena);
                    }
                    ColumnType::WideDecimal { .. } => {
                        put_integer128(a.as_primitive::<Decimal128Type>().value(row), &mut self.arena);
                    }
                    ColumnType::Binary => self.arena.extend_from_slice(a.as_binary::<i32>().value(row)),
                }
                self.push_cell(start);
            }
        }
        debug_assert_eq!(self.cells.len() % n, 0);
        Ok(())
    }

    pub fn encoding(&self, column: usize) -> ValueEncoding {
        self.encodings[column]
    }
}

#[inline]
fn int64_at<T: ArrowPrimitiveType<Native = i64>>(a: &dyn Array, row: usize) -> i64 {
    a.as_primitive::<T>().value(row)
}

/// Bytes every compressed row starts with: the null bitmap and the length nibbles.
#[inline]
pub fn row_prefix_bytes(column_count: usize) -> usize {
    column_count.div_ceil(8) + column_count.div_ceil(2)
}
