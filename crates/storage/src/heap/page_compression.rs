//! Page compression (SQL Server's PAGE): row compression plus, per page and per column,
//! either a column prefix (an anchor value; each cell is a shared-prefix length and the
//! rest) or a page dictionary (the column's distinct values on the page, most frequent
//! first; each cell is the index). Each column takes whichever of plain / prefix /
//! dictionary is smallest on this page, so a step is kept only where it saves space.
//!
//! Page: header (kind 3) | compression info at byte 40 | compressed rows | free | slots.
//! Compression info: u16 total bytes, then per column in schema order a mode byte and its
//! payload: plain nothing; prefix the anchor as varint length + bytes; dictionary a u16
//! entry count then entries as varint length + bytes.
//! Cells (see `row_compression`): plain = value bytes; prefix = 1 byte prefix length
//! (bytes taken from the anchor) + the value's remaining bytes; dictionary = the index,
//! little-endian in 0, 1 or 2 bytes (the most frequent value, index 0, takes no bytes).

use std::collections::HashMap;

use super::cell_rows::{row_prefix_bytes, CellRows};
use super::header::{write_body_fields_of_kind, PAGE_HEADER_BYTES, PAGE_KIND_HEAP_PAGE_COMPRESSED};
use super::row_compression::RowAssembler;
use super::value_bytes::{cell_cost_bytes, put_varint, varint_len};
use super::PAGE_SIZE_BYTES;

pub const COLUMN_MODE_PLAIN: u8 = 0;
pub const COLUMN_MODE_PREFIX: u8 = 1;
pub const COLUMN_MODE_DICTIONARY: u8 = 2;
/// Bytes of the compression info's own length field.
pub const CI_LENGTH_BYTES: usize = 2;
/// A prefix length is one byte.
pub const PREFIX_BYTES_MAX: usize = 255;
/// Rows a page can hold: every row takes at least its 2-byte slot and 1 prefix byte.
pub const PAGE_ROWS_MAX: usize = (PAGE_SIZE_BYTES - PAGE_HEADER_BYTES) / 3;

/// How one column is stored on one page.
enum ColumnPlan {
    Plain,
    Prefix { anchor_row: usize },
    /// Entries as rows holding them; `index_of_row[r]` for non-NULL rows.
    Dictionary { entry_rows: Vec<usize>, index_of_row: Vec<u16> },
}

#[inline]
fn common_prefix_bytes(a: &[u8], b: &[u8]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count().min(PREFIX_BYTES_MAX)
}

#[inline]
fn dictionary_index_bytes(index: usize) -> usize {
    match index {
        0 => 0,
        1..=0xff => 1,
        _ => 2,
    }
}

/// The cheapest plan for one column over rows `0..n`, and its bytes (mode byte, payload,
/// cells including any varint lengths; not the nibbles, which every mode pays alike).
fn plan_column(rows: &CellRows, n: usize, column: usize) -> (ColumnPlan, usize) {
    let values = || (0..n).filter_map(move |r| rows.cell(r, column).map(|v| (r, v)));
    let plain: usize = 1 + values().map(|(_, v)| cell_cost_bytes(v.len())).sum::<usize>();
    let mut best = (ColumnPlan::Plain, plain);
    let Some((first_row, _)) = values().next() else { return best };

    // Prefix: try a few anchors (first, middle, last value) rather than all, to stay O(n).
    let mut candidates = vec![first_row];
    for r in [n / 2, n - 1] {
        if let Some(r) = (r..n).chain((0..r).rev()).find(|&r| rows.cell(r, column).is_some()) {
            candidates.push(r);
        }
    }
    for anchor_row in candidates {
        let Some(anchor) = rows.cell(anchor_row, column) else { continue };
        let cells: usize = values().map(|(_, v)| cell_cost_bytes(1 + v.len() - common_prefix_bytes(anchor, v))).sum();
        let cost = 1 + varint_len(anchor.len()) + anchor.len() + cells;
        if cost < best.1 {
            best = (ColumnPlan::Prefix { anchor_row }, cost);
        }
    }

    // Dictionary: every distinct value, most frequent first (ties by bytes, so the page is
    // the same on every run).
    let mut counts: HashMap<&[u8], (usize, usize)> = HashMap::new();
    for (r, v) in values() {
        counts.entry(v).or_insert((0, r)).0 += 1;
    }
    if counts.len() <= u16::MAX as usize && counts.len() < values().count() {
        let mut entries: Vec<(&[u8], usize, usize)> = counts.iter().map(|(v, (c, r))| (*v, *c, *r)).collect();
        entries.sort_unstable_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(b.0)));
        let entry_bytes: usize = entries.iter().map(|e| varint_len(e.0.len()) + e.0.len()).sum();
        let cells: usize = entries.iter().enumerate().map(|(i, e)| e.1 * dictionary_index_bytes(i)).sum();
        let cost = 1 + 2 + entry_bytes + cells;
        if cost < best.1 {
            let index: HashMap<&[u8], u16> = entries.iter().enumerate().map(|(i, e)| (e.0, i as u16)).collect();
            let mut index_of_row = vec![0u16; n];
            for (r, v) in values() {
                index_of_row[r] = index[v];
            }
            best = (ColumnPlan::Dictionary { entry_rows: entries.iter().map(|e| e.2).collect(), index_of_row }, cost);
        }
    }
    best
}

/// Bytes the page would take for rows `0..n`, with the plans.
fn plan_page(rows: &CellRows, n: usize) -> (Vec<ColumnPlan>, usize) {
    debug_assert!(n >= 1 && n <= rows.row_count());
    let mut plans = Vec::with_capacity(rows.column_count());
    let mut bytes = PAGE_HEADER_BYTES + CI_LENGTH_BYTES + n * (row_prefix_bytes(rows.column_count()) + 2);
    for c in 0..rows.column_count() {
        let (plan, cost) = plan_column(rows, n, c);
        plans.push(plan);
        bytes += cost;
    }
    (plans, bytes)
}

/// The most leading rows of `rows` that fit one page-compressed page (at least 1 if the
/// first row fits at all, else 0). `hint` (the previous page's count) starts the search:
/// consecutive pages of a table hold similar counts, so a few probes around it replace a
/// full binary search (each probe analyses every column).
pub fn rows_that_fit(rows: &CellRows, hint: usize) -> usize {
    let available = rows.row_count().min(PAGE_ROWS_MAX);
    let fits = |n: usize| plan_page(rows, n).1 <= PAGE_SIZE_BYTES;
    if available == 0 || !fits(1) {
        return 0;
    }
    // Page size grows with the row count (every mode's cost does): gallop from the hint to
    // bracket the answer in [lo, hi], then binary search.
    let guess = hint.clamp(1, available);
    let (mut lo, mut hi);
    if fits(guess) {
        lo = guess;
        hi = available;
        let mut step = 4;
        while lo < hi {
            let probe = (lo + step).min(hi);
            if fits(probe) {
                lo = probe;
            } else {
                hi = probe - 1;
                break;
            }
            step *= 2;
        }
    } else {
        hi = guess - 1;
        lo = 1;
        let mut step = 4;
        while hi > lo {
            let probe = hi.saturating_sub(step).max(lo);
            if fits(probe) {
                lo = probe;
                break;
            }
            hi = probe.saturating_sub(1).max(lo);
            step *= 2;
        }
    }
    while lo < hi {
        let mid = (lo + hi).div_ceil(2);
        if fits(mid) {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    debug_assert!(fits(lo));
    lo
}

/// Writes rows `0..n` as one page-compressed page into `page` (8192 bytes, id, LSN and
/// checksum still to be sealed). `n` must come from `rows_that_fit`.
pub fn encode_page(rows: &CellRows, n: usize, column_count: u16, page: &mut [u8]) {
    debug_assert_eq!(page.len(), PAGE_SIZE_BYTES);
    debug_assert_eq!(column_count as usize, rows.column_count());
    let (plans, bytes_planned) = plan_page(rows, n);
    debug_assert!(bytes_planned <= PAGE_SIZE_BYTES, "encode_page called with {n} rows that do not fit");
    let mut body = Vec::with_capacity(PAGE_SIZE_BYTES);
    // Compression info.
    body.extend_from_slice(&[0, 0]);
    for (c, plan) in plans.iter().enumerate() {
        match plan {
            ColumnPlan::Plain => body.push(COLUMN_MODE_PLAIN),
            ColumnPlan::Prefix { anchor_row } => {
                body.push(COLUMN_MODE_PREFIX);
                let anchor = rows.cell(*anchor_row, c).unwrap_or(&[]);
                put_varint(anchor.len(), &mut body);
                body.extend_from_slice(anchor);
            }
            ColumnPlan::Dictionary { entry_rows, .. } => {
                body.push(COLUMN_MODE_DICTIONARY);
                body.extend_from_slice(&(entry_rows.len() as u16).to_le_bytes());
                for &r in entry_rows {
                    let v = rows.cell(r, c).unwrap_or(&[]);
                    put_varint(v.len(), &mut body);
                    body.extend_from_slice(v);
                }
            }
        }
    }
    let ci_bytes = body.len();
    body[..2].copy_from_slice(&(ci_bytes as u16).to_le_bytes());
    // Rows.
    let mut assembler = RowAssembler::new(rows.column_count());
    let mut row_offsets = Vec::with_capacity(n);
    for r in 0..n {
        row_offsets.push(PAGE_HEADER_BYTES + body.len());
        assembler.begin();
        for (c, plan) in plans.iter().enumerate() {
            let Some(v) = rows.cell(r, c) else {
                assembler.null_cell();
                continue;
            };
            let start = assembler.cell_buffer().len();
            let buf = assembler.cell_buffer();
            match plan {
                ColumnPlan::Plain => buf.extend_from_slice(v),
                ColumnPlan::Prefix { anchor_row } => {
                    let anchor = rows.cell(*anchor_row, c).unwrap_or(&[]);
                    let p = common_prefix_bytes(anchor, v);
                    buf.push(p as u8);
                    buf.extend_from_slice(&v[p..]);
                }
                ColumnPlan::Dictionary { index_of_row, .. } => {
                    let i = index_of_row[r] as usize;
                    buf.extend_from_slice(&(i as u16).to_le_bytes()[..dictionary_index_bytes(i)]);
                }
            }
            assembler.end_cell(start);
        }
        assembler.finish(&mut body);
    }
    let free_space_offset = PAGE_HEADER_BYTES + body.len();
    debug_assert_eq!(free_space_offset + 2 * n, bytes_planned, "plan and page disagree");
    page.fill(0);
    page[PAGE_HEADER_BYTES..free_space_offset].copy_from_slice(&body);
    for (slot, &at) in row_offsets.iter().enumerate() {
        let slot_at = PAGE_SIZE_BYTES - 2 * (slot + 1);
        page[slot_at..slot_at + 2].copy_from_slice(&(at as u16).to_le_bytes());
    }
    write_body_fields_of_kind(page, n as u16, column_count, free_space_offset as u16, PAGE_KIND_HEAP_PAGE_COMPRESSED);
}
