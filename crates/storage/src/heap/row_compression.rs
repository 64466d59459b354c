//! Row compression (SQL Server's ROW): every value in the fewest bytes it needs.
//!
//! A compressed row, used by row- and page-compressed pages alike:
//!
//! | part | size |
//! | null bitmap | ceil(columns / 8); bit i set = column i is NULL |
//! | length nibbles | ceil(columns / 2); column i in byte i/2, low nibble for even i: the cell's byte count 0..=14, or 15 = a varint length leads the cell |
//! | cells | for each column in schema order: [varint length if nibble 15] then the cell bytes; a NULL column has nibble 0 and no bytes |
//!
//! In a row-compressed page a cell is the value's bytes (`value_bytes`). Rows of different
//! lengths sit in the ordinary slotted page; only the page kind differs.

use super::cell_rows::{row_prefix_bytes, CellRows};
use super::value_bytes::{nibble_for, put_varint, NIBBLE_ESCAPE};

/// Builds compressed rows: the caller gives each column's cell bytes, this writes the
/// bitmap, the nibbles and the cells. Buffers are reused from row to row.
pub struct RowAssembler {
    column_count: usize,
    cell_bytes: Vec<u8>,
    /// (start in `cell_bytes`, length) per column; `None` for NULL.
    cells: Vec<Option<(usize, usize)>>,
}

impl RowAssembler {
    pub fn new(column_count: usize) -> RowAssembler {
        RowAssembler { column_count, cell_bytes: Vec::with_capacity(1024), cells: Vec::with_capacity(column_count) }
    }

    pub fn begin(&mut self) {
        self.cell_bytes.clear();
        self.cells.clear();
    }

    /// The buffer the next column's cell bytes go into; call `end_cell` after filling it.
    #[inline]
    pub fn cell_buffer(&mut self) -> &mut Vec<u8> {
        &mut self.cell_bytes
    }

    /// Closes the cell that started at `start` (the buffer length before it was filled).
    #[inline]
    pub fn end_cell(&mut self, start: usize) {
        self.cells.push(Some((start, self.cell_bytes.len() - start)));
    }

    #[inline]
    pub fn null_cell(&mut self) {
        self.cells.push(None);
    }

    /// Writes the row to `out` (appending); returns its length.
    pub fn finish(&mut self, out: &mut Vec<u8>) -> usize {
        debug_assert_eq!(self.cells.len(), self.column_count);
        let n = self.column_count;
        let begin = out.len();
        let bitmap_bytes = n.div_ceil(8);
        out.resize(begin + row_prefix_bytes(n), 0);
        for (i, cell) in self.cells.iter().enumerate() {
            let nibble = match cell {
                None => {
                    out[begin + i / 8] |= 1 << (i % 8);
                    0
                }
                Some((_, len)) => nibble_for(*len),
            };
            out[begin + bitmap_bytes + i / 2] |= nibble << (4 * (i % 2));
        }
        for (start, len) in self.cells.iter().flatten() {
            if nibble_for(*len) == NIBBLE_ESCAPE {
                put_varint(*len, out);
            }
            out.extend_from_slice(&self.cell_bytes[*start..*start + *len]);
        }
        out.len() - begin
    }
}

/// Encodes row `row` of `rows` row-compressed into `out` (cleared first); returns its length.
pub fn encode_row_compressed(rows: &CellRows, row: usize, assembler: &mut RowAssembler, out: &mut Vec<u8>) -> usize {
    out.clear();
    assembler.begin();
    for c in 0..rows.column_count() {
        match rows.cell(row, c) {
            None => assembler.null_cell(),
            Some(v) => {
                let start = assembler.cell_buffer().len();
                assembler.cell_buffer().extend_from_slice(v);
                assembler.end_cell(start);
            }
        }
    }
    let len = assembler.finish(out);
    debug_assert_eq!(len, rows.row_compressed_bytes(row));
    len
}
