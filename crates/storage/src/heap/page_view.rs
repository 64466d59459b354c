//! Verified uncompressed heap pages read in place: the scan's kernels take fields straight
//! out of the page bytes instead of decoding every projected value into Arrow columns.
//!
//! `HeapDecoder` copies each projected value of a page into a column vector, then builds
//! Arrow arrays (and validates every string's UTF-8) per chunk; a kernel that counts
//! non-null values (COUNT(col)), searches one string per row or sums a few fixed-width
//! columns reads a fraction of that. `HeapPageView` checks a page exactly as
//! `HeapDecoder::push_page` does — checksum, header, page id, column count, every slot and
//! every projected variable-length column's bounds — once, then hands out values by
//! (projected column, row) without further checks that could fail. A page the view accepts
//! is a page the decoder accepts, with the same values (tested in `tests/page_view.rs` and
//! the `heap_page` fuzz target).
//!
//! Row- and page-compressed pages have no fixed row layout: `HeapPageLayout::view` returns
//! `None` for them and the caller decodes them with `HeapDecoder`.

use std::path::Path;

use crate::column::ColumnType;
use crate::error::StorageError;
use crate::heap::header::{PAGE_HEADER_BYTES, PAGE_KIND_HEAP};
use crate::heap::heap_page::{slot_offset, verify_page};
use crate::heap::decoder::var_bounds;
use crate::heap::row_codec::{ColumnSlot, RowLayout};
use crate::heap::PageId;
use crate::table_meta::TableMeta;

/// One projected column: where it lives in a row, and whether its null bit is read.
#[derive(Debug, Clone, Copy)]
struct ViewColumn {
    column_index: usize,
    column_type: ColumnType,
    slot: ColumnSlot,
    /// The null bitmap's byte and bit for this column; `None` for a NOT NULL column (its
    /// bit is never read, as `HeapDecoder` never reads it).
    null_bit: Option<(usize, u8)>,
}

/// The row layout of one table and a projection of it, built once per scan worker; makes
/// a `HeapPageView` of each page.
#[derive(Debug, Clone)]
pub struct HeapPageLayout {
    table_name: String,
    layout: RowLayout,
    columns: Vec<ViewColumn>,
    /// The projected columns' names, in projection order: kernels check them before they
    /// read columns by position.
    names: Vec<String>,
    /// Var indexes of the projected variable-length columns, each once: the bounds checked
    /// per row.
    var_indexes: Vec<usize>,
}

impl HeapPageLayout {
    /// `projection` indexes `table.columns` (repeats allowed), as `HeapDecoder::try_new`.
    pub fn try_new(table: &TableMeta, projection: &[usize]) -> Result<HeapPageLayout, StorageError> {
        let layout = RowLayout::new(&table.columns);
        let mut columns = Vec::with_capacity(projection.len());
        let mut var_indexes = Vec::new();
        for &i in projection {
            let c = table.columns.get(i).ok_or_else(|| {
                StorageError::InvalidArgument(format!("projection index {i} out of range: table {} has {} columns", table.name, table.columns.len()))
            })?;
            let slot = layout.slots[i];
            if let ColumnSlot::Var { var_index } = slot {
                if !var_indexes.contains(&var_index) {
                    var_indexes.push(var_index);
                }
            }
            columns.push(ViewColumn { column_index: i, column_type: c.column_type, slot, null_bit: c.nullable.then_some((i / 8, 1u8 << (i % 8))) });
        }
        let names = projection.iter().map(|&i| table.columns[i].name.clone()).collect();
        Ok(HeapPageLayout { table_name: table.name.clone(), layout, columns, names, var_indexes })
    }

    /// The projected columns' storage types, in projection order.
    pub fn column_types(&self) -> impl Iterator<Item = ColumnType> + '_ {
        self.columns.iter().map(|c| c.column_type)
    }

    /// Verifies `page` (as `HeapDecoder::push_page` does: checksum, header, page id,
    /// column count, every slot, every projected variable-length column's bounds) and
    /// returns a view of its rows; `Ok(None)` for a row- or page-compressed page, which
    /// only `HeapDecoder` reads. `row_starts` is the caller's buffer, reused across pages.
    pub fn view<'p>(
        &'p self,
        page: &'p [u8],
        expected_page_id: u64,
        file: &Path,
        offset_bytes: u64,
        row_starts: &'p mut Vec<u16>,
    ) -> Result<Option<HeapPageView<'p>>, StorageError> {
        let header = verify_page(page, PageId(expected_page_id), file, offset_bytes)?;
        let corrupt = |reason: String| StorageError::PageCorrupt { file: file.to_path_buf(), page_id: expected_page_id, offset_bytes, reason };
        if header.column_count as usize != self.layout.types.len() {
            return Err(corrupt(format!("page has {} columns, table {} has {}", header.column_count, self.table_name, self.layout.types.len())));
        }
        if header.page_kind != PAGE_KIND_HEAP {
            return Ok(None);
        }
        let row_count = header.row_count as usize;
        let free = header.free_space_offset as usize;
        let var_data_start = self.layout.var_data_start;
        row_starts.clear();
        for slot in 0..row_count {
            let at = slot_offset(page, slot);
            if at < PAGE_HEADER_BYTES || at + var_data_start > free {
                return Err(corrupt(format!("slot {slot} points at {at}, outside the rows (end {free})")));
            }
            row_starts.push(at as u16);
        }
        // The decoder checks column by column; the same conditions, so the same pages pass.
        for &var_index in &self.var_indexes {
            for (slot, &at) in row_starts.iter().enumerate() {
                let (start, end) = var_bounds(&self.layout, page, at as usize, var_index);
                if start < var_data_start || start > end || at as usize + end > free {
                    let column = self.columns.iter().find(|c| c.slot == ColumnSlot::Var { var_index }).map_or(0, |c| c.column_index);
                    return Err(corrupt(format!("row {slot} column {column} spans {start}..{end}, outside the row")));
                }
            }
        }
        debug_assert!(row_starts.iter().all(|&at| at as usize + var_data_start <= free));
        Ok(Some(HeapPageView { page, row_starts, layout: self }))
    }
}

/// The rows of one verified uncompressed heap page; columns are named by their position in
/// the projection the layout was made with. Every accessor reads bytes the view checked.
pub struct HeapPageView<'p> {
    page: &'p [u8],
    row_starts: &'p [u16],
    layout: &'p HeapPageLayout,
}

impl<'p> HeapPageView<'p> {
    pub fn row_count(&self) -> usize {
        self.row_starts.len()
    }

    /// The projected columns' count.
    pub fn column_count(&self) -> usize {
        self.layout.columns.len()
    }

    /// The name of projected column `k`.
    pub fn column_name(&self, k: usize) -> &str {
        &self.layout.names[k]
    }

    /// Whether the projection is exactly `names`, in that order: a kernel that reads
    /// columns by position checks this first.
    pub fn has_columns<S: AsRef<str>>(&self, names: &[S]) -> bool {
        names.len() == self.layout.names.len() && names.iter().zip(&self.layout.names).all(|(a, b)| a.as_ref() == b)
    }

    /// The storage type of projected column `k`.
    pub fn column_type(&self, k: usize) -> ColumnType {
        self.layout.columns[k].column_type
    }

    /// Whether projected column `k` is NULL in `row`; always false for a NOT NULL column.
    #[inline]
    pub fn is_null(&self, k: usize, row: usize) -> bool {
        match self.layout.columns[k].null_bit {
            None => false,
            Some((byte, bit)) => self.page[self.row_starts[row] as usize + byte] & bit != 0,
        }
    }

    /// Rows whose column `k` is not NULL: COUNT(col) without reading a value.
    pub fn non_null_count(&self, k: usize) -> usize {
        match self.layout.columns[k].null_bit {
            None => self.row_count(),
            Some((byte, bit)) => self.row_starts.iter().filter(|&&at| self.page[at as usize + byte] & bit == 0).count(),
        }
    }

    /// The 8 little-endian bytes of fixed-width column `k` in `row` as an i64 (Int64,
    /// Decimal, UInt64's bits, Timestamp, Time64, Float64's bits); 4-byte columns (Int32,
    /// Date32, Time32) sign-extended. `None` for other widths (Boolean, WideDecimal) and
    /// variable-length columns. A NULL reads as 0, as stored.
    #[inline]
    pub fn integer(&self, k: usize, row: usize) -> Option<i64> {
        let ColumnSlot::Fixed { offset_bytes, width_bytes } = self.layout.columns[k].slot else { return None };
        let at = self.row_starts[row] as usize + offset_bytes;
        match width_bytes {
            8 => {
                let mut b = [0u8; 8];
                b.copy_from_slice(&self.page[at..at + 8]);
                Some(i64::from_le_bytes(b))
            }
            4 => {
                let mut b = [0u8; 4];
                b.copy_from_slice(&self.page[at..at + 4]);
                Some(i32::from_le_bytes(b) as i64)
            }
            _ => None,
        }
    }

    /// Calls `each(row, value)` for every row of an 8- or 4-byte fixed-width column `k`
    /// (see `integer`); false (and no call) for any other column.
    #[inline]
    pub fn for_each_integer(&self, k: usize, mut each: impl FnMut(usize, i64)) -> bool {
        let ColumnSlot::Fixed { offset_bytes, width_bytes } = self.layout.columns[k].slot else { return false };
        let page = self.page;
        match width_bytes {
            8 => {
                for (row, &at) in self.row_starts.iter().enumerate() {
                    let at = at as usize + offset_bytes;
                    let mut b = [0u8; 8];
                    b.copy_from_slice(&page[at..at + 8]);
                    each(row, i64::from_le_bytes(b));
                }
                true
            }
            4 => {
                for (row, &at) in self.row_starts.iter().enumerate() {
                    let at = at as usize + offset_bytes;
                    let mut b = [0u8; 4];
                    b.copy_from_slice(&page[at..at + 4]);
                    each(row, i32::from_le_bytes(b) as i64);
                }
                true
            }
            _ => false,
        }
    }

    /// The whole page: with `var_span`, for searches that run over many rows at once.
    pub fn page_bytes(&self) -> &'p [u8] {
        self.page
    }

    /// Where variable-length column `k`'s bytes in `row` lie in the page (`start..end`,
    /// checked to be inside the row area); `None` for a fixed-width column.
    #[inline]
    pub fn var_span(&self, k: usize, row: usize) -> Option<(usize, usize)> {
        let ColumnSlot::Var { var_index } = self.layout.columns[k].slot else { return None };
        let at = self.row_starts[row] as usize;
        let (start, end) = var_bounds(&self.layout.layout, self.page, at, var_index);
        Some((at + start, at + end))
    }

    /// The bytes of variable-length column `k` (Utf8 or Binary) in `row`, in place; empty
    /// for a NULL. `None` for a fixed-width column.
    #[inline]
    pub fn var_bytes(&self, k: usize, row: usize) -> Option<&'p [u8]> {
        let ColumnSlot::Var { var_index } = self.layout.columns[k].slot else { return None };
        let at = self.row_starts[row] as usize;
        let (start, end) = var_bounds(&self.layout.layout, self.page, at, var_index);
        Some(&self.page[at + start..at + end])
    }
}

