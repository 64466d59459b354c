//! The row format inside a heap page, little-endian:
//!
//! | part | size |
//! | null bitmap | ceil(columns / 8) bytes, bit i set = column i is NULL |
//! | fixed area | each fixed-width column in schema order (Int32/Date32/Time32 4, Int64/UInt64/Float64/Decimal/Timestamp/Time64 8, WideDecimal 16, Boolean 1), NULLs zeroed |
//! | var offsets | u16 per Utf8 or Binary column: the end of its bytes, relative to the row start |
//! | var data | the Utf8 and Binary bytes, back to back |
//!
//! Every row of a table has the same fixed layout, so a scan finds a fixed column at
//! `row start + constant`, without parsing the row.

use super::header::PAGE_HEADER_BYTES;
use super::PAGE_SIZE_BYTES;
use crate::column::{ColumnDef, ColumnType};

/// The biggest row a page can hold: the page minus the header and one slot.
pub const ROW_BYTES_MAX: usize = PAGE_SIZE_BYTES - PAGE_HEADER_BYTES - 2;

/// Where one column lives inside a row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColumnSlot {
    Fixed { offset_bytes: usize, width_bytes: usize },
    /// The column's index among the variable-length columns.
    Var { var_index: usize },
}

/// The row layout of a table, computed once from its columns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RowLayout {
    pub types: Vec<ColumnType>,
    pub slots: Vec<ColumnSlot>,
    pub null_bitmap_bytes: usize,
    pub fixed_end_bytes: usize,
    pub var_count: usize,
    /// Where the var offsets start; equals `fixed_end_bytes`.
    pub var_offsets_start: usize,
    /// Where the var data starts; also the size of the smallest row.
    pub var_data_start: usize,
}

impl RowLayout {
    pub fn new(columns: &[ColumnDef]) -> RowLayout {
        let types: Vec<ColumnType> = columns.iter().map(|c| c.column_type).collect();
        Self::from_types(&types)
    }

    pub fn from_types(types: &[ColumnType]) -> RowLayout {
        let null_bitmap_bytes = types.len().div_ceil(8);
        let mut offset = null_bitmap_bytes;
        let mut var_count = 0;
        let mut slots = Vec::with_capacity(types.len());
        for t in types {
            match t.fixed_width_bytes() {
                Some(width) => {
                    slots.push(ColumnSlot::Fixed { offset_bytes: offset, width_bytes: width });
                    offset += width;
                }
                None => {
                    slots.push(ColumnSlot::Var { var_index: var_count });
                    var_count += 1;
                }
            }
        }
        let layout = RowLayout {
            types: types.to_vec(),
            slots,
            null_bitmap_bytes,
            fixed_end_bytes: offset,
            var_count,
            var_offsets_start: offset,
            var_data_start: offset + 2 * var_count,
        };
        debug_assert!(layout.var_data_start >= layout.null_bitmap_bytes);
        layout
    }

    /// The length of a row that starts at `row` (which may run to the end of the page):
    /// the end of its last variable-length column, or the fixed part if there is none.
    /// `None` if the stored offsets do not fit in `row`.
    #[inline]
    pub fn row_len(&self, row: &[u8]) -> Option<usize> {
        if row.len() < self.var_data_start {
            return None;
        }
        if self.var_count == 0 {
            return Some(self.var_data_start);
        }
        let at = self.var_offsets_start + 2 * (self.var_count - 1);
        let end = u16::from_le_bytes([row[at], row[at + 1]]) as usize;
        (end >= self.var_data_start && end <= row.len()).then_some(end)
    }
}

/// One value, the unit of the row codec's property tests and of small writers.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Null,
    Int32(i32),
    Int64(i64),
    Float64(f64),
    /// The unscaled value.
    Decimal(i64),
    Date32(i32),
    Utf8(String),
    Boolean(bool),
    UInt64(u64),
    /// The unscaled value of a wide decimal.
    Int128(i128),
    Binary(Vec<u8>),
}

/// Builds one row into a reusable buffer. Columns may be set in any order, except that
/// variable-length columns must be appended in schema order, each exactly once.
pub struct RowWriter<'a> {
    layout: &'a RowLayout,
    buf: &'a mut Vec<u8>,
    var_written: usize,
}

impl<'a> RowWriter<'a> {
    pub fn begin(layout: &'a RowLayout, buf: &'a mut Vec<u8>) -> RowWriter<'a> {
        buf.clear();
        buf.resize(layout.var_data_start, 0);
        RowWriter { layout, buf, var_written: 0 }
    }

    #[inline]
    pub fn set_null(&mut self, column: usize) {
        self.buf[column / 8] |= 1 << (column % 8);
    }

    #[inline]
    pub fn put_fixed(&mut self, column: usize, bytes: &[u8]) {
        match self.layout.slots[column] {
            ColumnSlot::Fixed { offset_bytes, width_bytes } => {
                debug_assert_eq!(bytes.len(), width_bytes);
                self.buf[offset_bytes..offset_bytes + width_bytes].copy_from_slice(bytes);
            }
            ColumnSlot::Var { .. } => debug_assert!(false, "put_fixed on a variable-length column"),
        }
    }

    #[inline]
    pub fn put_var(&mut self, column: usize, bytes: &[u8]) {
        let ColumnSlot::Var { var_index } = self.layout.slots[column] else {
            debug_assert!(false, "put_var on a fixed column");
            return;
        };
        debug_assert_eq!(var_index, self.var_written, "var columns out of order");
        self.buf.extend_from_slice(bytes);
        // An oversized row saturates here and is rejected by `finish`.
        let end = self.buf.len().min(u16::MAX as usize) as u16;
        let at = self.layout.var_offsets_start + 2 * var_index;
        self.buf[at..at + 2].copy_from_slice(&end.to_le_bytes());
        self.var_written += 1;
    }

    /// The row's length, or `Err(len)` if it is too big for a page.
    pub fn finish(self) -> Result<usize, usize> {
        debug_assert_eq!(self.var_written, self.layout.var_count);
        let len = self.buf.len();
        if len > ROW_BYTES_MAX {
            Err(len)
        } else {
            Ok(len)
        }
    }
}

/// Encodes one row of `Value`s; `Err(len)` if the row does not fit a page. Values must
/// match the layout's types (or be `Null`).
pub fn encode_row(layout: &RowLayout, values: &[Value], buf: &mut Vec<u8>) -> Result<usize, usize> {
    debug_assert_eq!(values.len(), layout.types.len());
    let mut w = RowWriter::begin(layout, buf);
    for (i, v) in values.iter().enumerate() {
        match v {
            Value::Null => {
                w.set_null(i);
                if let ColumnSlot::Var { .. } = layout.slots[i] {
                    w.put_var(i, &[]);
                }
            }
            Value::Int32(x) | Value::Date32(x) => w.put_fixed(i, &x.to_le_bytes()),
            Value::Int64(x) | Value::Decimal(x) => w.put_fixed(i, &x.to_le_bytes()),
            Value::Float64(x) => w.put_fixed(i, &x.to_le_bytes()),
            Value::Boolean(b) => w.put_fixed(i, &[*b as u8]),
            Value::Utf8(s) => w.put_var(i, s.as_bytes()),
            Value::UInt64(x) => w.put_fixed(i, &x.to_le_bytes()),
            Value::Int128(x) => w.put_fixed(i, &x.to_le_bytes()),
            Value::Binary(b) => w.put_var(i, b),
        }
    }
    w.finish()
}

/// Decodes one row into `Value`s (the slow, general path; scans use `HeapDecoder`).
pub fn decode_row(layout: &RowLayout, row: &[u8]) -> Result<Vec<Value>, String> {
    let len = layout.row_len(row).ok_or("row offsets out of bounds")?;
    let row = &row[..len];
    let mut out = Vec::with_capacity(layout.types.len());
    let mut var_start = layout.var_data_start;
    for (i, t) in layout.types.iter().enumerate() {
        let is_null = row[i / 8] & (1 << (i % 8)) != 0;
        let v = match layout.slots[i] {
            ColumnSlot::Fixed { offset_bytes: o, width_bytes: w } => {
                let b = &row[o..o + w];
                match t {
                    // Timestamps and times decode as their integer units.
                    ColumnType::Int32 | ColumnType::Time { .. } if w == 4 => Value::Int32(i32::from_le_bytes([b[0], b[1], b[2], b[3]])),
                    ColumnType::Int32 => return Err(format!("Int32 slot of {w} bytes")),
                    ColumnType::Time { .. } | ColumnType::Timestamp { .. } => Value::Int64(i64::from_le_bytes(b.try_into().map_err(|_| "width")?)),
                    ColumnType::UInt64 => Value::UInt64(u64::from_le_bytes(b.try_into().map_err(|_| "width")?)),
                    ColumnType::WideDecimal { .. } => Value::Int128(i128::from_le_bytes(b.try_into().map_err(|_| "width")?)),
                    ColumnType::Binary => return Err("Binary in a fixed slot".into()),
                    ColumnType::Date32 => Value::Date32(i32::from_le_bytes([b[0], b[1], b[2], b[3]])),
                    ColumnType::Int64 => Value::Int64(i64::from_le_bytes(b.try_into().map_err(|_| "width")?)),
                    ColumnType::Decimal { .. } => Value::Decimal(i64::from_le_bytes(b.try_into().map_err(|_| "width")?)),
                    ColumnType::Float64 => Value::Float64(f64::from_le_bytes(b.try_into().map_err(|_| "width")?)),
                    ColumnType::Boolean => Value::Boolean(b[0] != 0),
                    ColumnType::Utf8 => return Err("Utf8 in a fixed slot".into()),
                }
            }
            ColumnSlot::Var { var_index } => {
                let at = layout.var_offsets_start + 2 * var_index;
                let end = u16::from_le_bytes([row[at], row[at + 1]]) as usize;
                if end < var_start || end > len {
                    return Err(format!("var column {i} offsets {var_start}..{end} out of row bounds {len}"));
                }
                let bytes = &row[var_start..end];
                var_start = end;
                if *t == ColumnType::Binary {
                    Value::Binary(bytes.to_vec())
                } else {
                    Value::Utf8(std::str::from_utf8(bytes).map_err(|e| e.to_string())?.to_string())
                }
            }
        };
        out.push(if is_null { Value::Null } else { v });
    }
    Ok(out)
}
