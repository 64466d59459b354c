//! Batches to pages of one partition in a chosen heap format: plain heap, row-compressed or
//! page-compressed. Used by `rebuild` (and tests); rows keep the order they come in.

use arrow::array::RecordBatch;

use super::cell_rows::CellRows;
use super::header::PAGE_KIND_HEAP_ROW_COMPRESSED;
use super::heap_page::HeapPageBuilder;
use super::page_compression::{encode_page, rows_that_fit, PAGE_ROWS_MAX};
use super::row_codec::{Value, ROW_BYTES_MAX};
use super::row_compression::{encode_row_compressed, RowAssembler};
use super::PAGE_SIZE_BYTES;
use crate::column::ColumnDef;
use crate::error::StorageError;
use crate::load::batch_encoder::BatchEncoder;

/// How a heap table's rows sit in its pages (`TableMeta::format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeapFormat {
    /// "heap": fixed-layout rows.
    Plain,
    /// "heap_row": row compression.
    Row,
    /// "heap_page": page compression.
    Page,
}

impl HeapFormat {
    pub fn catalog_name(self) -> &'static str {
        match self {
            HeapFormat::Plain => "heap",
            HeapFormat::Row => "heap_row",
            HeapFormat::Page => "heap_page",
        }
    }
}

/// Pending rows buffered before page compression cuts a page: enough for several pages so
/// that each page sees as many rows as fit after compression.
const PENDING_ROWS_MAX: usize = 4 * PAGE_ROWS_MAX;
const PENDING_BYTES_MAX: usize = 8 * PAGE_SIZE_BYTES;
/// Batches are taken in slices of this many rows, so the pending rows (and the arena
/// moved when a page is cut) stay small whatever the batch size.
const BATCH_SLICE_ROWS: usize = 256;

enum Inner {
    /// Reuses the loader's encoder with one partition (no hashing effect: all rows go to 0).
    Plain(Box<BatchEncoder>),
    Row { rows: CellRows, builder: HeapPageBuilder, assembler: RowAssembler, row_buf: Vec<u8> },
    Page { rows: CellRows, pending_bytes: usize, column_count: u16, last_page_rows: usize },
}

/// Encodes batches into unsealed pages appended to `pages` (the caller seals and writes).
pub struct PageEncoder {
    table_name: String,
    inner: Inner,
    pub pages: Vec<u8>,
    pub rows_in_pages: u64,
}

impl PageEncoder {
    pub fn new(table_name: &str, columns: &[ColumnDef], format: HeapFormat) -> PageEncoder {
        let types: Vec<_> = columns.iter().map(|c| c.column_type).collect();
        let column_count = columns.len() as u16;
        let inner = match format {
            HeapFormat::Plain => Inner::Plain(Box::new(BatchEncoder::new(table_name, columns, 0, 1))),
            HeapFormat::Row => Inner::Row {
                rows: CellRows::new(&types),
                builder: HeapPageBuilder::with_kind(column_count, PAGE_KIND_HEAP_ROW_COMPRESSED),
                assembler: RowAssembler::new(columns.len()),
                row_buf: Vec::with_capacity(ROW_BYTES_MAX),
            },
            HeapFormat::Page => Inner::Page { rows: CellRows::new(&types), pending_bytes: 0, column_count, last_page_rows: 64 },
        };
        PageEncoder { table_name: table_name.to_string(), inner, pages: Vec::new(), rows_in_pages: 0 }
    }

    pub fn push_batch(&mut self, batch: &RecordBatch) -> Result<(), StorageError> {
        match &mut self.inner {
            Inner::Plain(encoder) => {
                let (pages, rows_in_pages) = (&mut self.pages, &mut self.rows_in_pages);
                encoder.encode(batch, &mut |m| {
                    pages.extend_from_slice(&m.pages);
                    *rows_in_pages += m.row_count;
                    Ok(())
                })
            }
            Inner::Row { .. } | Inner::Page { .. } => {
                let mut offset = 0;
                while offset < batch.num_rows() {
                    let len = BATCH_SLICE_ROWS.min(batch.num_rows() - offset);
                    if let Inner::Row { rows, .. } | Inner::Page { rows, .. } = &mut self.inner {
                        rows.push_batch(&batch.slice(offset, len))?;
                    }
                    self.drain(false)?;
                    offset += len;
                }
                Ok(())
            }
        }
    }

    /// Appends one row of `Value`s (tests); not for the plain format.
    pub fn push_values(&mut self, values: &[Value]) -> Result<(), StorageError> {
        match &mut self.inner {
            Inner::Plain(_) => Err(StorageError::InvalidArgument("push_values is for compressed formats".into())),
            Inner::Row { rows, .. } | Inner::Page { rows, .. } => {
                rows.push_values(values);
                self.drain(false)
            }
        }
    }

    /// Writes every buffered row into pages.
    pub fn finish(&mut self) -> Result<(), StorageError> {
        if let Inner::Plain(encoder) = &mut self.inner {
            let (pages, rows_in_pages) = (&mut self.pages, &mut self.rows_in_pages);
            return encoder.flush(&mut |m| {
                pages.extend_from_slice(&m.pages);
                *rows_in_pages += m.row_count;
                Ok(())
            });
        }
        self.drain(true)
    }

    fn drain(&mut self, final_flush: bool) -> Result<(), StorageError> {
        let too_large = |table: &str, row_bytes: usize| StorageError::RowTooLarge { table: table.to_string(), row_bytes, row_bytes_max: ROW_BYTES_MAX };
        match &mut self.inner {
            Inner::Plain(_) => Ok(()),
            Inner::Row { rows, builder, assembler, row_buf } => {
                for r in 0..rows.row_count() {
                    let len = encode_row_compressed(rows, r, assembler, row_buf);
                    if len > ROW_BYTES_MAX {
                        return Err(too_large(&self.table_name, len));
                    }
                    if !builder.try_append(row_buf) {
                        builder.take_page(&mut self.pages);
                        let appended = builder.try_append(row_buf);
                        debug_assert!(appended, "a row of at most ROW_BYTES_MAX fits an empty page");
                    }
                    self.rows_in_pages += 1;
                }
                rows.drain_front(rows.row_count());
                if final_flush && !builder.is_empty() {
                    builder.take_page(&mut self.pages);
                }
                Ok(())
            }
            Inner::Page { rows, pending_bytes, column_count, last_page_rows } => {
                // Count the bytes of rows added since the last call.
                *pending_bytes = (0..rows.row_count()).map(|r| rows.row_compressed_bytes(r)).sum();
                while !rows.is_empty() && (final_flush || rows.row_count() >= PENDING_ROWS_MAX || *pending_bytes >= PENDING_BYTES_MAX) {
                    let n = rows_that_fit(rows, *last_page_rows);
                    *last_page_rows = n.max(1);
                    if n == 0 {
                        return Err(too_large(&self.table_name, rows.row_compressed_bytes(0)));
                    }
                    let at = self.pages.len();
                    self.pages.resize(at + PAGE_SIZE_BYTES, 0);
                    encode_page(rows, n, *column_count, &mut self.pages[at..]);
                    self.rows_in_pages += n as u64;
                    let drained: usize = (0..n).map(|r| rows.row_compressed_bytes(r)).sum();
                    rows.drain_front(n);
                    *pending_bytes -= drained;
                }
                Ok(())
            }
        }
    }
}
