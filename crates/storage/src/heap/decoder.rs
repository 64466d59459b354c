//! The scan's decode path: verified heap pages in, Arrow record batches out.
//!
//! `push_page` verifies the page checksum, checks every projected row's bounds once, then
//! decodes column by column into plain vectors (no per-value Arrow builder); `finish` hands
//! the vectors to Arrow without copying them.

use std::path::Path;
use std::sync::Arc;

use arrow::array::{
    ArrayRef, BinaryArray, BooleanArray, BooleanBufferBuilder, Date32Array, Decimal128Array, Float64Array, Int32Array, Int64Array, RecordBatch,
    RecordBatchOptions, StringArray, Time32MillisecondArray, Time32SecondArray, Time64MicrosecondArray, Time64NanosecondArray,
    TimestampMicrosecondArray, TimestampMillisecondArray, TimestampNanosecondArray, TimestampSecondArray, UInt64Array,
};
use arrow::buffer::{Buffer, NullBuffer, OffsetBuffer, ScalarBuffer};
use arrow::datatypes::{Schema, SchemaRef};

use crate::column::{ColumnType, TemporalUnit, TIMESTAMP_TIME_ZONE};
use crate::error::StorageError;
use crate::heap::compressed_page::{parse_page, value_pieces, CompressedScratch};
use crate::heap::header::{read_header, read_u16, PageHeader, PAGE_HEADER_BYTES, PAGE_KIND_HEAP, PAGE_MAGIC};
use crate::heap::value_bytes::{get_float, get_integer, get_integer128, ValueEncoding};
use crate::heap::heap_page::{slot_offset, verify_page};
use crate::heap::row_codec::{ColumnSlot, RowLayout};
use crate::heap::PageId;
use crate::PAGE_SIZE_BYTES;
use crate::table_meta::TableMeta;

/// Rows a decoder is sized for before its first `finish`; later batches reuse the size of
/// the previous one.
const ROWS_CAPACITY_INITIAL: usize = 8192;

enum ColumnValues {
    I32(Vec<i32>),
    I64(Vec<i64>),
    F64(Vec<f64>),
    Decimal(Vec<i128>),
    Bool(BooleanBufferBuilder),
    Utf8 { offsets: Vec<i32>, bytes: Vec<u8> },
}

struct ProjectedColumn {
    column_index: usize,
    column_type: ColumnType,
    slot: ColumnSlot,
    /// Present for nullable columns only: non-nullable columns never read the null bitmap.
    validity: Option<BooleanBufferBuilder>,
    null_count: usize,
    values: ColumnValues,
}

impl ProjectedColumn {
    fn new(column_index: usize, column_type: ColumnType, slot: ColumnSlot, nullable: bool, capacity: usize) -> ProjectedColumn {
        let values = match column_type {
            ColumnType::Int32 | ColumnType::Date32 => ColumnValues::I32(Vec::with_capacity(capacity)),
            ColumnType::Time { .. } if column_type.fixed_width_bytes() == Some(4) => ColumnValues::I32(Vec::with_capacity(capacity)),
            ColumnType::Int64 | ColumnType::UInt64 | ColumnType::Timestamp { .. } | ColumnType::Time { .. } => ColumnValues::I64(Vec::with_capacity(capacity)),
            ColumnType::Float64 => ColumnValues::F64(Vec::with_capacity(capacity)),
            ColumnType::Decimal { .. } | ColumnType::WideDecimal { .. } => ColumnValues::Decimal(Vec::with_capacity(capacity)),
            ColumnType::Boolean => ColumnValues::Bool(BooleanBufferBuilder::new(capacity)),
            ColumnType::Utf8 | ColumnType::Binary => {
                let mut offsets = Vec::with_capacity(capacity + 1);
                offsets.push(0);
                ColumnValues::Utf8 { offsets, bytes: Vec::with_capacity(capacity * 16) }
            }
        };
        ProjectedColumn {
            column_index,
            column_type,
            slot,
            validity: nullable.then(|| BooleanBufferBuilder::new(capacity)),
            null_count: 0,
            values,
        }
    }
}

/// Decodes heap pages of one table into record batches of the projected columns.
pub struct HeapDecoder {
    table_name: String,
    schema: SchemaRef,
    layout: RowLayout,
    columns: Vec<ProjectedColumn>,
    nullable: Vec<bool>,
    rows_buffered: usize,
    rows_capacity: usize,
    /// Row starts of the current page, validated; reused across pages.
    row_starts: Vec<u32>,
    /// Bytes of a Utf8 column before the next offset would overflow i32.
    utf8_bytes_max: usize,
    /// For row- and page-compressed pages: each table column's value encoding, its
    /// position among the projected columns, and the parse buffers.
    encodings: Vec<ValueEncoding>,
    wanted: Vec<Option<usize>>,
    wanted_count: usize,
    scratch: CompressedScratch,
}

impl HeapDecoder {
    /// `projection` indexes `table.columns`. Indexes out of range are rejected by
    /// `try_new`; `new` keeps the brief's signature and panics on them (a caller bug, not
    /// disk data).
    pub fn new(table: &TableMeta, projection: &[usize]) -> HeapDecoder {
        match Self::try_new(table, projection) {
            Ok(d) => d,
            Err(e) => panic!("HeapDecoder::new: {e}"),
        }
    }

    pub fn try_new(table: &TableMeta, projection: &[usize]) -> Result<HeapDecoder, StorageError> {
        Self::try_with_capacity(table, projection, ROWS_CAPACITY_INITIAL)
    }

    /// `try_new` with room for `rows_capacity` rows per batch before a column grows (at
    /// least 1): a decoder of a statement's few new rows (their key columns, on every
    /// INSERT into a keyed table) reserved 8,192 rows per column twice per call otherwise.
    pub fn try_with_capacity(table: &TableMeta, projection: &[usize], rows_capacity: usize) -> Result<HeapDecoder, StorageError> {
        let rows_capacity = rows_capacity.max(1);
        let layout = RowLayout::new(&table.columns);
        let full = table.arrow_schema();
        let mut fields = Vec::with_capacity(projection.len());
        let mut columns = Vec::with_capacity(projection.len());
        for &i in projection {
            let c = table.columns.get(i).ok_or_else(|| {
                StorageError::InvalidArgument(format!("projection index {i} out of range: table {} has {} columns", table.name, table.columns.len()))
            })?;
            fields.push(full.field(i).clone());
            columns.push(ProjectedColumn::new(i, c.column_type, layout.slots[i], c.nullable, rows_capacity));
        }
        let mut wanted = vec![None; table.columns.len()];
        let mut wanted_count = 0;
        for &i in projection {
            if wanted[i].is_none() {
                wanted[i] = Some(wanted_count);
                wanted_count += 1;
            }
        }
        Ok(HeapDecoder {
            encodings: table.columns.iter().map(|c| ValueEncoding::of(c.column_type)).collect(),
            wanted,
            wanted_count,
            scratch: CompressedScratch::default(),
            table_name: table.name.clone(),
            schema: Arc::new(Schema::new(fields)),
            nullable: table.columns.iter().map(|c| c.nullable).collect(),
            layout,
            columns,
            rows_buffered: 0,
            rows_capacity,
            row_starts: Vec::with_capacity(1024),
            utf8_bytes_max: i32::MAX as usize,
        })
    }

    /// The projected schema of the batches `finish` returns.
    pub fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    pub fn rows_buffered(&self) -> usize {
        self.rows_buffered
    }

    /// Verifies one page and appends its rows; returns the page's row count.
    pub fn push_page(&mut self, page: &[u8], expected_page_id: u64, file: &Path, offset_bytes: u64) -> Result<u32, StorageError> {
        let header = verify_page(page, PageId(expected_page_id), file, offset_bytes)?;
        self.push_page_with_header(page, &header, expected_page_id, file, offset_bytes)
    }

    /// Appends the rows of a page this process built in memory and never wrote (a
    /// `HeapPageBuilder`'s page, unsealed): nothing to verify a checksum against, so none
    /// is computed (two CRCs of 8 KB were most of the cost of decoding one new row's key
    /// columns); its layout is checked as any page's. `what` names it in errors.
    pub fn push_built_page(&mut self, page: &[u8], what: &Path) -> Result<u32, StorageError> {
        if page.len() != PAGE_SIZE_BYTES || page[..4] != PAGE_MAGIC {
            return Err(StorageError::PageCorrupt { file: what.to_path_buf(), page_id: 0, offset_bytes: 0, reason: "not a page built in memory".into() });
        }
        let header = read_header(page);
        self.push_page_with_header(page, &header, 0, what, 0)
    }

    fn push_page_with_header(&mut self, page: &[u8], header: &PageHeader, expected_page_id: u64, file: &Path, offset_bytes: u64) -> Result<u32, StorageError> {
        let corrupt = |reason: String| StorageError::PageCorrupt { file: file.to_path_buf(), page_id: expected_page_id, offset_bytes, reason };
        if header.column_count as usize != self.layout.types.len() {
            return Err(corrupt(format!("page has {} columns, table {} has {}", header.column_count, self.table_name, self.layout.types.len())));
        }
        if header.page_kind != PAGE_KIND_HEAP {
            return self.push_compressed_page(page, header, file, expected_page_id, offset_bytes);
        }
        let row_count = header.row_count as usize;
        let free = header.free_space_offset as usize;

        // Validate everything the decode loops below index, so they cannot fail halfway
        // and leave the columns with different lengths.
        self.row_starts.clear();
        for slot in 0..row_count {
            let at = slot_offset(page, slot);
            if at < PAGE_HEADER_BYTES || at + self.layout.var_data_start > free {
                return Err(corrupt(format!("slot {slot} points at {at}, outside the rows (end {free})")));
            }
            self.row_starts.push(at as u32);
        }
        let mut utf8_bytes_added = 0usize;
        for c in &self.columns {
            if let ColumnSlot::Var { var_index } = c.slot {
                for (slot, &at) in self.row_starts.iter().enumerate() {
                    let (start, end) = self.var_bounds(page, at as usize, var_index);
                    if start < self.layout.var_data_start || start > end || at as usize + end > free {
                        return Err(corrupt(format!("row {slot} column {} spans {start}..{end}, outside the row", c.column_index)));
                    }
                    utf8_bytes_added += end - start;
                }
                if let ColumnValues::Utf8 { bytes, .. } = &c.values {
                    if bytes.len() + utf8_bytes_added > self.utf8_bytes_max {
                        return Err(StorageError::InvalidArgument("string column over 2 GB in one batch: call finish() more often".into()));
                    }
                }
                utf8_bytes_added = 0;
            }
        }

        let layout = &self.layout;
        let starts = &self.row_starts;
        for c in &mut self.columns {
            if let Some(validity) = &mut c.validity {
                let (byte, bit) = (c.column_index / 8, 1u8 << (c.column_index % 8));
                for &at in starts {
                    let is_null = page[at as usize + byte] & bit != 0;
                    validity.append(!is_null);
                    c.null_count += is_null as usize;
                }
            }
            match (&mut c.values, c.slot) {
                (ColumnValues::I32(v), ColumnSlot::Fixed { offset_bytes: o, .. }) => {
                    v.extend(starts.iter().map(|&at| read_i32(page, at as usize + o)));
                }
                (ColumnValues::I64(v), ColumnSlot::Fixed { offset_bytes: o, .. }) => {
                    v.extend(starts.iter().map(|&at| read_i64(page, at as usize + o)));
                }
                (ColumnValues::Decimal(v), ColumnSlot::Fixed { offset_bytes: o, width_bytes: 16 }) => {
                    v.extend(starts.iter().map(|&at| read_i128(page, at as usize + o)));
                }
                (ColumnValues::Decimal(v), ColumnSlot::Fixed { offset_bytes: o, .. }) => {
                    v.extend(starts.iter().map(|&at| read_i64(page, at as usize + o) as i128));
                }
                (ColumnValues::F64(v), ColumnSlot::Fixed { offset_bytes: o, .. }) => {
                    v.extend(starts.iter().map(|&at| f64::from_bits(read_i64(page, at as usize + o) as u64)));
                }
                (ColumnValues::Bool(v), ColumnSlot::Fixed { offset_bytes: o, .. }) => {
                    for &at in starts {
                        v.append(page[at as usize + o] != 0);
                    }
                }
                (ColumnValues::Utf8 { offsets, bytes }, ColumnSlot::Var { var_index }) => {
                    for &at in starts {
                        let at = at as usize;
                        let (start, end) = var_bounds(layout, page, at, var_index);
                        bytes.extend_from_slice(&page[at + start..at + end]);
                        offsets.push(bytes.len() as i32);
                    }
                }
                _ => return Err(corrupt(format!("column {} type {:?} does not match its slot", c.column_index, c.column_type))),
            }
        }
        self.rows_buffered += row_count;
        Ok(row_count as u32)
    }

    /// `push_page` for row- and page-compressed pages: parse (and bounds-check) once, then
    /// decode column by column like the heap path.
    fn push_compressed_page(&mut self, page: &[u8], header: &PageHeader, file: &Path, expected_page_id: u64, offset_bytes: u64) -> Result<u32, StorageError> {
        let corrupt = |reason: String| StorageError::PageCorrupt { file: file.to_path_buf(), page_id: expected_page_id, offset_bytes, reason };
        parse_page(page, header, &self.encodings, &self.wanted, self.wanted_count, &mut self.scratch).map_err(corrupt)?;
        let row_count = header.row_count as usize;
        let s = &self.scratch;
        let wanted_count = self.wanted_count;
        for c in &self.columns {
            if let ColumnValues::Utf8 { bytes, .. } = &c.values {
                let Some(k) = self.wanted[c.column_index] else { continue };
                let info = &s.columns[c.column_index];
                let (byte, bit) = (c.column_index / 8, 1u8 << (c.column_index % 8));
                // NULL cells have no bytes (and no prefix byte to read).
                let added: usize = (0..row_count)
                    .filter(|&r| page[s.row_starts[r] as usize + byte] & bit == 0)
                    .map(|r| {
                        let (head, tail) = value_pieces(page, info, &s.dictionary, s.cells[r * wanted_count + k]);
                        head.len() + tail.len()
                    })
                    .sum();
                if bytes.len() + added > self.utf8_bytes_max {
                    return Err(StorageError::InvalidArgument("string column over 2 GB in one batch: call finish() more often".into()));
                }
            }
        }
        for c in &mut self.columns {
            let Some(k) = self.wanted[c.column_index] else {
                return Err(corrupt(format!("column {} is projected but not wanted", c.column_index)));
            };
            let info = &s.columns[c.column_index];
            let (byte, bit) = (c.column_index / 8, 1u8 << (c.column_index % 8));
            let is_null = |r: usize| page[s.row_starts[r] as usize + byte] & bit != 0;
            if let Some(validity) = &mut c.validity {
                for r in 0..row_count {
                    let null = is_null(r);
                    validity.append(!null);
                    c.null_count += null as usize;
                }
            }
            // A NULL cell decodes as zero / empty, as in the heap format.
            let pieces = |r: usize| if is_null(r) { (&[][..], &[][..]) } else { value_pieces(page, info, &s.dictionary, s.cells[r * wanted_count + k]) };
            // The integer cells (INT, BIGINT, decimals up to 18 digits, BOOLEAN) share one format.
            let integer = |r: usize| {
                let (h, t) = pieces(r);
                get_integer(h, t)
            };
            match &mut c.values {
                ColumnValues::I32(v) => v.extend((0..row_count).map(|r| integer(r) as i32)),
                ColumnValues::I64(v) => v.extend((0..row_count).map(integer)),
                ColumnValues::Decimal(v) if matches!(c.column_type, ColumnType::WideDecimal { .. }) => v.extend((0..row_count).map(|r| {
                    let (h, t) = pieces(r);
                    get_integer128(h, t)
                })),
                ColumnValues::Decimal(v) => v.extend((0..row_count).map(|r| integer(r) as i128)),
                ColumnValues::F64(v) => v.extend((0..row_count).map(|r| {
                    let (h, t) = pieces(r);
                    get_float(h, t)
                })),
                ColumnValues::Bool(v) => {
                    for r in 0..row_count {
                        v.append(integer(r) != 0);
                    }
                }
                ColumnValues::Utf8 { offsets, bytes } => {
                    for r in 0..row_count {
                        let (h, t) = pieces(r);
                        bytes.extend_from_slice(h);
                        bytes.extend_from_slice(t);
                        offsets.push(bytes.len() as i32);
                    }
                }
            }
        }
        self.rows_buffered += row_count;
        Ok(row_count as u32)
    }

    #[inline]
    fn var_bounds(&self, page: &[u8], at: usize, var_index: usize) -> (usize, usize) {
        var_bounds(&self.layout, page, at, var_index)
    }

    /// The buffered rows as one batch of the projected columns; the decoder is then empty
    /// and ready for more pages.
    pub fn finish(&mut self) -> RecordBatch {
        let rows = self.rows_buffered;
        self.rows_capacity = self.rows_capacity.max(rows);
        let capacity = self.rows_capacity;
        let mut arrays: Vec<ArrayRef> = Vec::with_capacity(self.columns.len());
        for c in &mut self.columns {
            let fresh = ProjectedColumn::new(c.column_index, c.column_type, c.slot, c.validity.is_some(), capacity);
            let old = std::mem::replace(c, fresh);
            arrays.push(column_to_array(old, rows));
        }
        self.rows_buffered = 0;
        let options = RecordBatchOptions::new().with_row_count(Some(rows));
        match RecordBatch::try_new_with_options(self.schema.clone(), arrays, &options) {
            Ok(b) => b,
            // Lengths and types are built to match the schema above; reaching this is a bug.
            Err(e) => panic!("HeapDecoder::finish built an inconsistent batch: {e}"),
        }
    }

    /// Whether the table's column at `index` may hold NULLs.
    pub fn is_nullable(&self, index: usize) -> bool {
        self.nullable.get(index).copied().unwrap_or(false)
    }
}

/// Start and end of variable-length column `var_index` relative to the row at `at` (the
/// decoder's and `page_view`'s one reading of a row's offsets).
#[inline]
pub(super) fn var_bounds(layout: &RowLayout, page: &[u8], at: usize, var_index: usize) -> (usize, usize) {
    let base = at + layout.var_offsets_start;
    let start = if var_index == 0 { layout.var_data_start } else { read_u16(page, base + 2 * (var_index - 1)) as usize };
    let end = read_u16(page, base + 2 * var_index) as usize;
    (start, end)
}

#[inline]
fn read_i32(page: &[u8], at: usize) -> i32 {
    let mut b = [0u8; 4];
    b.copy_from_slice(&page[at..at + 4]);
    i32::from_le_bytes(b)
}

#[inline]
fn read_i128(page: &[u8], at: usize) -> i128 {
    let mut b = [0u8; 16];
    b.copy_from_slice(&page[at..at + 16]);
    i128::from_le_bytes(b)
}

#[inline]
fn read_i64(page: &[u8], at: usize) -> i64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&page[at..at + 8]);
    i64::from_le_bytes(b)
}

fn column_to_array(c: ProjectedColumn, rows: usize) -> ArrayRef {
    let nulls = match c.validity {
        Some(mut v) if c.null_count > 0 => Some(NullBuffer::new(v.finish())),
        _ => None,
    };
    match (c.values, c.column_type) {
        (ColumnValues::I32(v), ColumnType::Date32) => Arc::new(Date32Array::new(ScalarBuffer::from(v), nulls)),
        (ColumnValues::I32(v), ColumnType::Time { unit: TemporalUnit::Second }) => Arc::new(Time32SecondArray::new(ScalarBuffer::from(v), nulls)),
        (ColumnValues::I32(v), ColumnType::Time { .. }) => Arc::new(Time32MillisecondArray::new(ScalarBuffer::from(v), nulls)),
        (ColumnValues::I64(v), ColumnType::Time { unit: TemporalUnit::Microsecond }) => Arc::new(Time64MicrosecondArray::new(ScalarBuffer::from(v), nulls)),
        (ColumnValues::I64(v), ColumnType::Time { .. }) => Arc::new(Time64NanosecondArray::new(ScalarBuffer::from(v), nulls)),
        (ColumnValues::I64(v), ColumnType::Timestamp { unit, with_time_zone }) => {
            let zone = with_time_zone.then_some(TIMESTAMP_TIME_ZONE);
            let values = ScalarBuffer::from(v);
            match unit {
                TemporalUnit::Second => Arc::new(TimestampSecondArray::new(values, nulls).with_timezone_opt(zone)),
                TemporalUnit::Millisecond => Arc::new(TimestampMillisecondArray::new(values, nulls).with_timezone_opt(zone)),
                TemporalUnit::Microsecond => Arc::new(TimestampMicrosecondArray::new(values, nulls).with_timezone_opt(zone)),
                TemporalUnit::Nanosecond => Arc::new(TimestampNanosecondArray::new(values, nulls).with_timezone_opt(zone)),
            }
        }
        // Same width: the i64 vector becomes the u64 buffer without a copy.
        (ColumnValues::I64(v), ColumnType::UInt64) => Arc::new(UInt64Array::new(ScalarBuffer::new(Buffer::from_vec(v), 0, rows), nulls)),
        (ColumnValues::I32(v), _) => Arc::new(Int32Array::new(ScalarBuffer::from(v), nulls)),
        (ColumnValues::I64(v), _) => Arc::new(Int64Array::new(ScalarBuffer::from(v), nulls)),
        (ColumnValues::F64(v), _) => Arc::new(Float64Array::new(ScalarBuffer::from(v), nulls)),
        (ColumnValues::Decimal(v), ColumnType::Decimal { precision, scale } | ColumnType::WideDecimal { precision, scale }) => {
            let a = Decimal128Array::new(ScalarBuffer::from(v), nulls);
            match a.clone().with_precision_and_scale(precision, scale) {
                Ok(a) => Arc::new(a),
                Err(_) => Arc::new(a),
            }
        }
        (ColumnValues::Decimal(v), _) => Arc::new(Decimal128Array::new(ScalarBuffer::from(v), nulls)),
        (ColumnValues::Bool(mut v), _) => Arc::new(BooleanArray::new(v.finish(), nulls)),
        (ColumnValues::Utf8 { offsets, bytes }, ColumnType::Binary) => {
            debug_assert_eq!(offsets.len(), rows + 1);
            let offsets = OffsetBuffer::new(ScalarBuffer::from(offsets));
            Arc::new(BinaryArray::new(offsets, Buffer::from_vec(bytes), nulls))
        }
        (ColumnValues::Utf8 { offsets, bytes }, _) => {
            debug_assert_eq!(offsets.len(), rows + 1);
            let offsets = OffsetBuffer::new(ScalarBuffer::from(offsets));
            // Moves the vector into the Arrow buffer; clones below are reference counts.
            let values = Buffer::from_vec(bytes);
            match StringArray::try_new(offsets.clone(), values.clone(), nulls.clone()) {
                Ok(a) => Arc::new(a),
                // Invalid UTF-8 that still passed the page checksum: keep the lengths and the
                // NULLs right and show the bytes lossily rather than panic on disk data.
                Err(_) => Arc::new(StringArray::from_iter(offsets.windows(2).enumerate().map(|(i, w)| {
                    nulls.as_ref().is_none_or(|n| n.is_valid(i)).then(|| String::from_utf8_lossy(&values.as_slice()[w[0] as usize..w[1] as usize]).into_owned())
                }))),
            }
        }
    }
}

/// COUNT(*) without decoding: verifies the page and returns its row count.
pub fn decode_page_count_only(page: &[u8], expected_page_id: u64, file: &Path, offset_bytes: u64) -> Result<u32, StorageError> {
    Ok(verify_page(page, PageId(expected_page_id), file, offset_bytes)?.row_count as u32)
}

#[cfg(test)]
mod tests {
    use arrow::array::{Array, AsArray};

    use super::*;
    use crate::column::ColumnDef;
    use crate::heap::header::seal;
    use crate::heap::heap_page::HeapPageBuilder;
    use crate::heap::row_codec::RowWriter;
    use crate::heap::{Lsn, PageId};

    /// Invalid UTF-8 in one cell (checksum recomputed, as fuzz/heap_page forges it) made the
    /// lossy fallback drop the column's NULLs: NULL cells came back as "".
    #[test]
    fn invalid_utf8_keeps_nulls() {
        let columns = vec![ColumnDef { name: "s".into(), column_type: ColumnType::Utf8, nullable: true }];
        let table = TableMeta::heap_without_rows("t", columns);
        let layout = RowLayout::new(&table.columns);
        let mut builder = HeapPageBuilder::new(1);
        let mut row = Vec::new();
        for cell in [Some(&b"ok"[..]), None, Some(&[0xff, 0xfe][..])] {
            let mut w = RowWriter::begin(&layout, &mut row);
            match cell {
                Some(bytes) => w.put_var(0, bytes),
                None => {
                    w.set_null(0);
                    w.put_var(0, &[]);
                }
            }
            w.finish().unwrap();
            assert!(builder.try_append(&row));
        }
        let mut page = Vec::new();
        builder.take_page(&mut page);
        seal(&mut page, PageId(5), Lsn(1));
        let mut decoder = HeapDecoder::new(&table, &[0]);
        assert_eq!(decoder.push_page(&page, 5, Path::new("f"), 0).unwrap(), 3);
        let batch = decoder.finish();
        let strings = batch.column(0).as_string::<i32>();
        assert_eq!(strings.len(), 3);
        assert_eq!(strings.value(0), "ok");
        assert!(strings.is_null(1));
        assert_eq!(strings.value(2), "\u{fffd}\u{fffd}");
    }
}
