//! Reading row- and page-compressed heap pages: parses the compression info and walks
//! every row's nibbles once, recording where each wanted column's cell is. Everything the
//! decode loops later index is bounds-checked here, so they cannot fail halfway. All
//! buffers live in `CompressedScratch` and are reused from page to page.

use super::cell_rows::row_prefix_bytes;
use super::header::{read_u16, PageHeader, PAGE_HEADER_BYTES, PAGE_KIND_HEAP_PAGE_COMPRESSED};
use super::heap_page::slot_offset;
use super::page_compression::{COLUMN_MODE_DICTIONARY, COLUMN_MODE_PLAIN, COLUMN_MODE_PREFIX};
use super::value_bytes::{get_varint, ValueEncoding, NIBBLE_ESCAPE};

/// How one column is stored on the page being decoded.
#[derive(Debug, Clone, Copy, Default)]
pub struct ColumnInfo {
    pub mode: u8,
    /// Prefix mode: the anchor's bytes in the page.
    pub anchor_at: u32,
    pub anchor_len: u32,
    /// Dictionary mode: this column's entries in `CompressedScratch::dictionary`.
    pub dictionary_first: u32,
    pub dictionary_count: u32,
}

#[derive(Default)]
pub struct CompressedScratch {
    pub columns: Vec<ColumnInfo>,
    /// (offset in page, length) of every dictionary entry of the page.
    pub dictionary: Vec<(u32, u32)>,
    /// Row starts, validated.
    pub row_starts: Vec<u32>,
    /// Row-major (offset in page, length) of each wanted column's cell.
    pub cells: Vec<(u32, u32)>,
}

/// A cell's value as two pieces to concatenate: bytes from the anchor, then the rest.
#[inline]
pub fn value_pieces<'p>(page: &'p [u8], info: &ColumnInfo, dictionary: &[(u32, u32)], cell: (u32, u32)) -> (&'p [u8], &'p [u8]) {
    let (at, len) = (cell.0 as usize, cell.1 as usize);
    match info.mode {
        COLUMN_MODE_PREFIX => {
            let p = page[at] as usize;
            let anchor = info.anchor_at as usize;
            (&page[anchor..anchor + p], &page[at + 1..at + len])
        }
        COLUMN_MODE_DICTIONARY => {
            let mut index = 0usize;
            for (i, &b) in page[at..at + len].iter().enumerate() {
                index |= (b as usize) << (8 * i);
            }
            let (e_at, e_len) = dictionary[info.dictionary_first as usize + index];
            (&[], &page[e_at as usize..e_at as usize + e_len as usize])
        }
        _ => (&[], &page[at..at + len]),
    }
}

/// Parses a verified row- or page-compressed page. `wanted[c]` is the position of column
/// `c` among the wanted columns (or `None`); `encodings` are the table's columns'.
/// Returns a reason on any inconsistency.
pub fn parse_page(page: &[u8], header: &PageHeader, encodings: &[ValueEncoding], wanted: &[Option<usize>], wanted_count: usize, s: &mut CompressedScratch) -> Result<(), String> {
    let column_count = encodings.len();
    debug_assert_eq!(wanted.len(), column_count);
    let free = header.free_space_offset as usize;
    s.columns.clear();
    s.dictionary.clear();
    s.row_starts.clear();
    s.cells.clear();
    let mut rows_start = PAGE_HEADER_BYTES;
    if header.page_kind == PAGE_KIND_HEAP_PAGE_COMPRESSED {
        if PAGE_HEADER_BYTES + 2 > free {
            return Err("no room for the compression info".into());
        }
        let ci_bytes = read_u16(page, PAGE_HEADER_BYTES) as usize;
        let ci_end = PAGE_HEADER_BYTES + ci_bytes;
        if ci_bytes < 2 + column_count || ci_end > free {
            return Err(format!("compression info of {ci_bytes} bytes does not fit"));
        }
        let mut at = PAGE_HEADER_BYTES + 2;
        for (c, enc) in encodings.iter().enumerate() {
            if at >= ci_end {
                return Err(format!("compression info ends before column {c}"));
            }
            let mut info = ColumnInfo { mode: page[at], ..ColumnInfo::default() };
            at += 1;
            let fits = |len: usize| enc.value_bytes_max().is_none_or(|m| len <= m);
            match info.mode {
                COLUMN_MODE_PLAIN => {}
                COLUMN_MODE_PREFIX => {
                    let (len, n) = get_varint(page, at, ci_end).ok_or_else(|| format!("column {c} anchor length runs out"))?;
                    at += n;
                    if at + len > ci_end || len > u16::MAX as usize {
                        return Err(format!("column {c} anchor of {len} bytes runs out"));
                    }
                    info.anchor_at = at as u32;
                    info.anchor_len = len as u32;
                    at += len;
                }
                COLUMN_MODE_DICTIONARY => {
                    if at + 2 > ci_end {
                        return Err(format!("column {c} dictionary count runs out"));
                    }
                    let count = read_u16(page, at) as usize;
                    at += 2;
                    info.dictionary_first = s.dictionary.len() as u32;
                    info.dictionary_count = count as u32;
                    for e in 0..count {
                        let (len, n) = get_varint(page, at, ci_end).ok_or_else(|| format!("column {c} entry {e} length runs out"))?;
                        at += n;
                        if at + len > ci_end || !fits(len) {
                            return Err(format!("column {c} dictionary entry {e} of {len} bytes is out of bounds"));
                        }
                        s.dictionary.push((at as u32, len as u32));
                        at += len;
                    }
                }
                m => return Err(format!("column {c} has unknown compression mode {m}")),
            }
            s.columns.push(info);
        }
        if at != ci_end {
            return Err(format!("compression info is {ci_bytes} bytes but its columns end at {}", at - PAGE_HEADER_BYTES));
        }
        rows_start = ci_end;
    } else {
        s.columns.resize(column_count, ColumnInfo::default());
    }

    let bitmap_bytes = column_count.div_ceil(8);
    let prefix_bytes = row_prefix_bytes(column_count);
    let row_count = header.row_count as usize;
    s.cells.resize(row_count * wanted_count, (0, 0));
    for slot in 0..row_count {
        let start = slot_offset(page, slot);
        if start < rows_start || start + prefix_bytes > free {
            return Err(format!("slot {slot} points at {start}, outside the rows ({rows_start}..{free})"));
        }
        s.row_starts.push(start as u32);
        let mut at = start + prefix_bytes;
        for c in 0..column_count {
            let nibble = (page[start + bitmap_bytes + c / 2] >> (4 * (c % 2))) & 0x0f;
            let len = if nibble == NIBBLE_ESCAPE {
                let (len, n) = get_varint(page, at, free).ok_or_else(|| format!("row {slot} column {c} length runs out"))?;
                at += n;
                len
            } else {
                nibble as usize
            };
            if at + len > free {
                return Err(format!("row {slot} column {c} cell {at}..{} runs past the rows (end {free})", at + len));
            }
            if let Some(k) = wanted[c] {
                let is_null = page[start + c / 8] & (1 << (c % 8)) != 0;
                if !is_null {
                    check_cell(page, &s.columns[c], encodings[c], at, len).map_err(|e| format!("row {slot} column {c}: {e}"))?;
                }
                s.cells[slot * wanted_count + k] = (at as u32, len as u32);
            }
            at += len;
        }
    }
    Ok(())
}

/// Checks what `value_pieces` and the typed decoders will index.
#[inline]
fn check_cell(page: &[u8], info: &ColumnInfo, encoding: ValueEncoding, at: usize, len: usize) -> Result<(), String> {
    let value_len = match info.mode {
        COLUMN_MODE_PREFIX => {
            if len == 0 {
                return Err("prefix cell without its prefix length".into());
            }
            let p = page[at] as usize;
            if p > info.anchor_len as usize {
                return Err(format!("prefix {p} longer than the anchor ({})", info.anchor_len));
            }
            p + len - 1
        }
        COLUMN_MODE_DICTIONARY => {
            if len > 2 {
                return Err(format!("dictionary index of {len} bytes"));
            }
            let mut index = 0usize;
            for (i, &b) in page[at..at + len].iter().enumerate() {
                index |= (b as usize) << (8 * i);
            }
            if index >= info.dictionary_count as usize {
                return Err(format!("dictionary index {index} of {}", info.dictionary_count));
            }
            return Ok(());
        }
        _ => len,
    };
    match encoding.value_bytes_max() {
        Some(m) if value_len > m => Err(format!("value of {value_len} bytes, at most {m}")),
        _ => Ok(()),
    }
}
