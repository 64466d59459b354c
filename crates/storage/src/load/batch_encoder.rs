//! Arrow batches to heap pages, per partition: each row is hashed to its partition,
//! encoded into a row, and appended to that partition's open page. Full pages are
//! gathered into messages for the writer.

use arrow::array::{
    Array, ArrayRef, AsArray, BinaryArray, BinaryViewArray, BooleanArray, LargeBinaryArray, LargeStringArray, RecordBatch, StringArray,
    StringViewArray,
};
use arrow::buffer::NullBuffer;
use arrow::compute::cast;
use arrow::datatypes::{
    DataType, Date32Type, Decimal128Type, Float64Type, Int32Type, Int64Type, Time32MillisecondType, Time32SecondType, Time64MicrosecondType,
    Time64NanosecondType, TimeUnit, TimestampMicrosecondType, TimestampMillisecondType, TimestampNanosecondType, TimestampSecondType,
    UInt64Type,
};

use crate::column::{ColumnDef, ColumnType};
use crate::error::StorageError;
use crate::heap::heap_page::HeapPageBuilder;
use crate::heap::row_codec::{ColumnSlot, RowLayout, RowWriter, ROW_BYTES_MAX};
use crate::heap::PAGE_SIZE_BYTES;
use crate::partitioning::partition_rows;

/// Pages per writer message: 16 pages = 128 KB, large enough that channel overhead is
/// noise, small enough that partitions x encoders x message stays bounded.
pub const PAGES_PER_MESSAGE: usize = 16;

/// Full pages of one partition on their way to the writer (not yet sealed: the writer
/// stamps page id, LSN and checksum once it knows where each page goes).
pub struct PagesMessage {
    pub partition: u32,
    pub pages: Vec<u8>,
    pub row_count: u64,
}

struct PartitionPages {
    builder: HeapPageBuilder,
    pages: Vec<u8>,
    row_count: u64,
}

/// The typed view of one input column, cast to what its storage type expects.
enum ColumnView<'a> {
    I32(&'a [i32]),
    I64(&'a [i64]),
    F64(&'a [f64]),
    Decimal(&'a [i128]),
    Bool(&'a BooleanArray),
    Utf8(&'a StringArray),
    LargeUtf8(&'a LargeStringArray),
    Utf8View(&'a StringViewArray),
    U64(&'a [u64]),
    WideDecimal(&'a [i128]),
    Binary(&'a BinaryArray),
    LargeBinary(&'a LargeBinaryArray),
    BinaryView(&'a BinaryViewArray),
}

pub struct BatchEncoder {
    table_name: String,
    columns: Vec<ColumnDef>,
    layout: RowLayout,
    partition_by: usize,
    partition_count: u32,
    partitions: Vec<PartitionPages>,
    row_buf: Vec<u8>,
    partition_of_row: Vec<u32>,
    /// A page is closed at this many rows even if more would fit (`usize::MAX`: never).
    rows_per_page_max: usize,
    /// A cluster host's load (`--host I/N`): rows of partitions other hosts own are dropped.
    host: Option<crate::host_place::HostSlot>,
}

impl BatchEncoder {
    pub fn new(table_name: &str, columns: &[ColumnDef], partition_by: usize, partition_count: u32) -> BatchEncoder {
        debug_assert!(partition_by < columns.len());
        let column_count = columns.len() as u16;
        BatchEncoder {
            table_name: table_name.to_string(),
            columns: columns.to_vec(),
            layout: RowLayout::new(columns),
            partition_by,
            partition_count,
            partitions: (0..partition_count)
                .map(|_| PartitionPages { builder: HeapPageBuilder::new(column_count), pages: Vec::new(), row_count: 0 })
                .collect(),
            row_buf: Vec::with_capacity(ROW_BYTES_MAX),
            partition_of_row: Vec::new(),
            rows_per_page_max: usize::MAX,
            host: None,
        }
    }

    /// Closes every page at `rows` rows (at least 1), for tables with an exact number of
    /// rows per page (the cost bench's synthetic tables).
    pub fn with_rows_per_page_max(mut self, rows: usize) -> BatchEncoder {
        debug_assert!(rows >= 1);
        self.rows_per_page_max = rows.max(1);
        self
    }

    /// Keeps only the rows of the partitions `host` owns (a cluster host's load).
    pub fn for_host(mut self, host: Option<crate::host_place::HostSlot>) -> BatchEncoder {
        self.host = host;
        self
    }

    /// Encodes a batch; calls `emit` with every message that fills up.
    pub fn encode(&mut self, batch: &RecordBatch, emit: &mut dyn FnMut(PagesMessage) -> Result<(), StorageError>) -> Result<(), StorageError> {
        let rows_per_page_max = self.rows_per_page_max;
        self.for_each_row(batch, &mut |partitions: &mut [PartitionPages], p: u32, row: &[u8]| -> Result<(), StorageError> {
            let part = &mut partitions[p as usize];
            if part.builder.row_count() >= rows_per_page_max || !part.builder.try_append(row) {
                part.builder.take_page(&mut part.pages);
                let appended = part.builder.try_append(row);
                debug_assert!(appended, "a row of at most ROW_BYTES_MAX fits an empty page");
                if part.pages.len() >= PAGES_PER_MESSAGE * PAGE_SIZE_BYTES {
                    let pages = std::mem::replace(&mut part.pages, Vec::with_capacity(PAGES_PER_MESSAGE * PAGE_SIZE_BYTES));
                    let row_count = std::mem::take(&mut part.row_count);
                    emit(PagesMessage { partition: p, pages, row_count })?;
                }
            }
            part.row_count += 1;
            Ok(())
        })
    }

    /// Encodes a batch without building pages: `row` gets each row's partition and its
    /// bytes in the page's row encoding (exactly what a page made by `encode` holds), with
    /// every check `encode` makes. For the insert path, whose rows go one by one into log
    /// records and the delta: a whole 8 KiB page built, copied and taken apart again per
    /// one-row statement was most of a statement's encoding cost. Returns the rows.
    pub fn encode_rows(&mut self, batch: &RecordBatch, row: &mut dyn FnMut(u32, &[u8])) -> Result<u64, StorageError> {
        let mut n = 0u64;
        self.for_each_row(batch, &mut |_: &mut [PartitionPages], p: u32, bytes: &[u8]| -> Result<(), StorageError> {
            row(p, bytes);
            n += 1;
            Ok(())
        })?;
        Ok(n)
    }

    /// Validates and encodes each row of `batch` (types, NOT NULL, decimal range, row size)
    /// into the row buffer and hands it to `sink` with its partition; rows of partitions
    /// another host owns are skipped.
    fn for_each_row(
        &mut self,
        batch: &RecordBatch,
        sink: &mut dyn FnMut(&mut [PartitionPages], u32, &[u8]) -> Result<(), StorageError>,
    ) -> Result<(), StorageError> {
        if batch.num_columns() != self.columns.len() {
            return Err(StorageError::InvalidArgument(format!(
                "batch has {} columns, table {} has {}",
                batch.num_columns(),
                self.table_name,
                self.columns.len()
            )));
        }
        let arrays: Vec<ArrayRef> = batch.columns().iter().zip(&self.columns).map(|(a, c)| canonical(a, c)).collect::<Result<_, _>>()?;
        let views: Vec<(ColumnView, Option<&NullBuffer>)> = arrays.iter().zip(&self.columns).map(|(a, c)| (view(a, c), a.nulls())).collect();
        partition_rows(&arrays[self.partition_by], self.partition_count, &mut self.partition_of_row)?;

        for row in 0..batch.num_rows() {
            if self.host.is_some_and(|h| !h.owns(self.partition_of_row[row])) {
                continue;
            }
            let mut w = RowWriter::begin(&self.layout, &mut self.row_buf);
            for (ci, (v, nulls)) in views.iter().enumerate() {
                if nulls.is_some_and(|n| n.is_null(row)) {
                    if !self.columns[ci].nullable {
                        return Err(StorageError::ValueOutOfRange { column: self.columns[ci].name.clone(), reason: "NULL in a NOT NULL column".into() });
                    }
                    w.set_null(ci);
                    if let ColumnSlot::Var { .. } = self.layout.slots[ci] {
                        w.put_var(ci, &[]);
                    }
                    continue;
                }
                match v {
                    ColumnView::I32(a) => w.put_fixed(ci, &a[row].to_le_bytes()),
                    ColumnView::I64(a) => w.put_fixed(ci, &a[row].to_le_bytes()),
                    ColumnView::F64(a) => w.put_fixed(ci, &a[row].to_le_bytes()),
                    ColumnView::Decimal(a) => {
                        let x = a[row];
                        let Ok(x) = i64::try_from(x) else {
                            return Err(StorageError::ValueOutOfRange { column: self.columns[ci].name.clone(), reason: format!("decimal {x} does not fit 18 digits") });
                        };
                        w.put_fixed(ci, &x.to_le_bytes())
                    }
                    ColumnView::Bool(a) => w.put_fixed(ci, &[a.value(row) as u8]),
                    ColumnView::Utf8(a) => w.put_var(ci, a.value(row).as_bytes()),
                    ColumnView::LargeUtf8(a) => w.put_var(ci, a.value(row).as_bytes()),
                    ColumnView::Utf8View(a) => w.put_var(ci, a.value(row).as_bytes()),
                    ColumnView::U64(a) => w.put_fixed(ci, &a[row].to_le_bytes()),
                    ColumnView::WideDecimal(a) => w.put_fixed(ci, &a[row].to_le_bytes()),
                    ColumnView::Binary(a) => w.put_var(ci, a.value(row)),
                    ColumnView::LargeBinary(a) => w.put_var(ci, a.value(row)),
                    ColumnView::BinaryView(a) => w.put_var(ci, a.value(row)),
                }
            }
            let row_bytes = w.finish().map_err(|row_bytes| StorageError::RowTooLarge { table: self.table_name.clone(), row_bytes, row_bytes_max: ROW_BYTES_MAX })?;
            debug_assert_eq!(row_bytes, self.row_buf.len());
            sink(&mut self.partitions, self.partition_of_row[row], &self.row_buf)?;
        }
        Ok(())
    }

    /// Closes every open page and emits what is left.
    pub fn flush(&mut self, emit: &mut dyn FnMut(PagesMessage) -> Result<(), StorageError>) -> Result<(), StorageError> {
        for (p, part) in self.partitions.iter_mut().enumerate() {
            if !part.builder.is_empty() {
                part.builder.take_page(&mut part.pages);
            }
            if !part.pages.is_empty() {
                let pages = std::mem::take(&mut part.pages);
                let row_count = std::mem::take(&mut part.row_count);
                emit(PagesMessage { partition: p as u32, pages, row_count })?;
            }
        }
        Ok(())
    }
}

/// The Arrow type each storage type is encoded from; other input types are cast to it.
fn canonical(a: &ArrayRef, c: &ColumnDef) -> Result<ArrayRef, StorageError> {
    let target = match c.column_type {
        ColumnType::Utf8 => match a.data_type() {
            DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => return Ok(a.clone()),
            _ => DataType::Utf8,
        },
        ColumnType::Binary => match a.data_type() {
            DataType::Binary | DataType::LargeBinary | DataType::BinaryView => return Ok(a.clone()),
            _ => DataType::Binary,
        },
        t => t.arrow_type(),
    };
    if a.data_type() == &target {
        return Ok(a.clone());
    }
    cast(a, &target).map_err(|e| StorageError::ValueOutOfRange { column: c.name.clone(), reason: format!("cannot convert {} to {target}: {e}", a.data_type()) })
}

fn view<'a>(a: &'a ArrayRef, c: &ColumnDef) -> ColumnView<'a> {
    match c.column_type {
        ColumnType::Int32 => ColumnView::I32(a.as_primitive::<Int32Type>().values()),
        ColumnType::Date32 => ColumnView::I32(a.as_primitive::<Date32Type>().values()),
        ColumnType::Int64 => ColumnView::I64(a.as_primitive::<Int64Type>().values()),
        ColumnType::Float64 => ColumnView::F64(a.as_primitive::<Float64Type>().values()),
        ColumnType::Decimal { .. } => ColumnView::Decimal(a.as_primitive::<Decimal128Type>().values()),
        ColumnType::Boolean => ColumnView::Bool(a.as_boolean()),
        ColumnType::Utf8 => match a.data_type() {
            DataType::Utf8View => ColumnView::Utf8View(a.as_string_view()),
            DataType::LargeUtf8 => ColumnView::LargeUtf8(a.as_string::<i64>()),
            _ => ColumnView::Utf8(a.as_string::<i32>()),
        },
        ColumnType::UInt64 => ColumnView::U64(a.as_primitive::<UInt64Type>().values()),
        ColumnType::WideDecimal { .. } => ColumnView::WideDecimal(a.as_primitive::<Decimal128Type>().values()),
        ColumnType::Timestamp { .. } | ColumnType::Time { .. } => match a.data_type() {
            DataType::Timestamp(TimeUnit::Second, _) => ColumnView::I64(a.as_primitive::<TimestampSecondType>().values()),
            DataType::Timestamp(TimeUnit::Millisecond, _) => ColumnView::I64(a.as_primitive::<TimestampMillisecondType>().values()),
            DataType::Timestamp(TimeUnit::Microsecond, _) => ColumnView::I64(a.as_primitive::<TimestampMicrosecondType>().values()),
            DataType::Timestamp(TimeUnit::Nanosecond, _) => ColumnView::I64(a.as_primitive::<TimestampNanosecondType>().values()),
            DataType::Time32(TimeUnit::Second) => ColumnView::I32(a.as_primitive::<Time32SecondType>().values()),
            DataType::Time32(_) => ColumnView::I32(a.as_primitive::<Time32MillisecondType>().values()),
            DataType::Time64(TimeUnit::Microsecond) => ColumnView::I64(a.as_primitive::<Time64MicrosecondType>().values()),
            _ => ColumnView::I64(a.as_primitive::<Time64NanosecondType>().values()),
        },
        ColumnType::Binary => match a.data_type() {
            DataType::BinaryView => ColumnView::BinaryView(a.as_binary_view()),
            DataType::LargeBinary => ColumnView::LargeBinary(a.as_binary::<i64>()),
            _ => ColumnView::Binary(a.as_binary::<i32>()),
        },
    }
}
