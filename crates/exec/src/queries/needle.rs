//! A needle in a haystack: the rows whose string column contains a rare word. Every row's
//! string is searched (memchr's SIMD substring search), so the scan reads and decodes
//! the widest column of lineitem to return a handful of rows. Returns the matching rows'
//! keys (at most `NEEDLE_KEYS_MAX`, smallest first) and, in `rows_total`, how many matched.

use std::cmp::Ordering;

use arrow::array::Array;
use arrow::record_batch::RecordBatch;
use arrow::util::display::array_value_to_string;
use memchr::memmem::Finder;

use flashscan_storage::{ColumnType, HeapPageView};

use crate::error::ExecError;
use crate::heap_pages::HeapPageSink;
use crate::limits::NEEDLE_KEYS_MAX;
use crate::queries::columns::{column, for_each_str, int_value};
use crate::queries::Kernel;
use crate::scan::BatchSink;
use crate::value::{QueryResult, Value};

const NAME: &str = "needle";

/// What to look for, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NeedleSpec {
    pub column: String,
    /// The bytes to find anywhere in the value (case-sensitive).
    pub pattern: String,
    /// Columns that identify a matching row, returned for each match.
    pub key_columns: Vec<String>,
}

impl Default for NeedleSpec {
    /// "Tiresias" weighs 1 of the 300 nouns of the TPC-H text grammar; "Tiresias sleep"
    /// is a phrase it rarely generates: a few hundred of 6 million lineitem comments at SF 1.
    fn default() -> NeedleSpec {
        NeedleSpec {
            column: "l_comment".into(),
            pattern: "Tiresias sleep".into(),
            key_columns: vec!["l_orderkey".into(), "l_linenumber".into()],
        }
    }
}

impl NeedleSpec {
    pub fn columns(&self) -> Vec<String> {
        let mut c = self.key_columns.clone();
        if !c.contains(&self.column) {
            c.push(self.column.clone());
        }
        c
    }

    pub fn sql(&self, table: &str) -> String {
        format!(
            "SELECT {}, {} FROM {table} WHERE {} LIKE '%{}%' ORDER BY {}",
            self.key_columns.join(", "),
            self.column,
            self.column,
            self.pattern.replace('\'', "''"),
            self.key_columns.join(", ")
        )
    }
}

pub struct NeedleKernel {
    spec: NeedleSpec,
    /// The projection the scan reads (`spec.columns()`), and where in it the searched
    /// column and each key column are: the page path reads columns by position.
    columns: Vec<String>,
    haystack_position: usize,
    key_positions: Vec<usize>,
    finder: Finder<'static>,
    /// (keys..., matched value) of matches, trimmed to the smallest NEEDLE_KEYS_MAX now and then.
    matches: Vec<Vec<Value>>,
    match_count: u64,
    hit_rows: Vec<usize>,
    /// Heap page path: each row's searched string as a span of the page (empty for NULL).
    spans: Vec<(usize, usize)>,
}

impl NeedleKernel {
    pub fn new(spec: NeedleSpec) -> NeedleKernel {
        let finder = Finder::new(spec.pattern.as_bytes()).into_owned();
        let columns = spec.columns();
        let position = |name: &String| columns.iter().position(|c| c == name).unwrap_or(0);
        let haystack_position = position(&spec.column);
        let key_positions = spec.key_columns.iter().map(position).collect();
        NeedleKernel { spec, columns, haystack_position, key_positions, finder, matches: Vec::new(), match_count: 0, hit_rows: Vec::new(), spans: Vec::new() }
    }

    fn trim(&mut self) {
        self.matches.sort_by(compare_rows);
        self.matches.truncate(NEEDLE_KEYS_MAX);
    }
}

fn compare_values(a: &Value, b: &Value) -> Ordering {
    match (a, b) {
        (Value::Int(x), Value::Int(y)) => x.cmp(y),
        _ => a.to_string().cmp(&b.to_string()),
    }
}

fn compare_rows(a: &Vec<Value>, b: &Vec<Value>) -> Ordering {
    a.iter().zip(b).map(|(x, y)| compare_values(x, y)).find(|o| o.is_ne()).unwrap_or(Ordering::Equal)
}

fn key_value(array: &dyn Array, row: usize) -> Result<Value, ExecError> {
    if array.is_null(row) {
        return Ok(Value::Null);
    }
    match int_value(array, row) {
        Some(v) => Ok(Value::Int(v)),
        None => Ok(Value::Text(array_value_to_string(array, row)?)),
    }
}

impl BatchSink for NeedleKernel {
    fn consume(&mut self, batch: &RecordBatch) -> Result<(), ExecError> {
        let haystack = column(batch, NAME, &self.spec.column)?;
        self.hit_rows.clear();
        let (finder, hit_rows) = (&self.finder, &mut self.hit_rows);
        for_each_str(haystack.as_ref(), NAME, &self.spec.column, |row, bytes| {
            if finder.find(bytes).is_some() {
                hit_rows.push(row);
            }
        })?;
        if self.hit_rows.is_empty() {
            return Ok(());
        }
        self.match_count += self.hit_rows.len() as u64;
        let keys = self
            .spec
            .key_columns
            .iter()
            .map(|k| column(batch, NAME, k).cloned())
            .collect::<Result<Vec<_>, _>>()?;
        for &row in &self.hit_rows {
            let mut r = keys.iter().map(|k| key_value(k.as_ref(), row)).collect::<Result<Vec<_>, _>>()?;
            r.push(key_value(haystack.as_ref(), row)?);
            self.matches.push(r);
        }
        if self.matches.len() > 2 * NEEDLE_KEYS_MAX {
            self.trim();
        }
        Ok(())
    }
}

impl NeedleKernel {
    /// The rows of `page` whose searched string contains the pattern, into `hit_rows`, by
    /// one search over the page's row area instead of one per row (a page holds ~60
    /// lineitem comments of ~27 bytes: the per-call setup of 60 short searches cost more
    /// than one SIMD pass over 8 KB). A match counts only if it lies inside one row's
    /// string; one that straddles fields is skipped a byte at a time, so a real match
    /// overlapping it is still found. Needs the strings in ascending, non-overlapping
    /// order (as the page builder writes rows) and a non-empty pattern; returns false, and
    /// finds nothing, otherwise (the caller then searches row by row).
    fn find_in_page(&mut self, page: &HeapPageView<'_>) -> bool {
        let pattern_bytes = self.finder.needle().len();
        if pattern_bytes == 0 {
            return false;
        }
        let haystack = self.haystack_position;
        self.spans.clear();
        let mut previous_end = 0usize;
        for row in 0..page.row_count() {
            let Some((start, end)) = page.var_span(haystack, row) else { return false };
            if start < previous_end {
                return false;
            }
            // A NULL row keeps its (empty, as stored) bytes out of every match.
            let span = if page.is_null(haystack, row) { (start, start) } else { (start, end) };
            self.spans.push(span);
            previous_end = end;
        }
        let (Some(&(region_start, _)), Some(&(_, region_end))) = (self.spans.first(), self.spans.last()) else { return true };
        let bytes = page.page_bytes();
        let mut position = region_start;
        let mut row = 0usize;
        while position < region_end {
            let Some(found) = self.finder.find(&bytes[position..region_end]) else { break };
            let match_start = position + found;
            let match_end = match_start + pattern_bytes;
            // The first row whose string ends at or after the match's end.
            while row < self.spans.len() && self.spans[row].1 < match_end {
                row += 1;
            }
            let Some(&(start, end)) = self.spans.get(row) else { break };
            if start <= match_start {
                self.hit_rows.push(row);
                position = end;
                row += 1;
            } else {
                position = match_start + 1;
            }
        }
        true
    }
}

impl HeapPageSink for NeedleKernel {
    /// Each string searched where it lies in the verified page; only a matching row's
    /// keys and string are read out. Covers a Utf8 searched column and integer keys (what
    /// `key_value` makes `Value::Int` of); anything else goes through batches.
    fn consume_page(&mut self, page: &HeapPageView<'_>) -> Result<bool, ExecError> {
        if !page.has_columns(self.columns.as_slice())
            || page.column_type(self.haystack_position) != ColumnType::Utf8
            || !self.key_positions.iter().all(|&k| matches!(page.column_type(k), ColumnType::Int32 | ColumnType::Int64))
        {
            return Ok(false);
        }
        let haystack = self.haystack_position;
        self.hit_rows.clear();
        if !self.find_in_page(page) {
            for row in 0..page.row_count() {
                if page.is_null(haystack, row) {
                    continue;
                }
                if let Some(bytes) = page.var_bytes(haystack, row) {
                    if self.finder.find(bytes).is_some() {
                        self.hit_rows.push(row);
                    }
                }
            }
        }
        if self.hit_rows.is_empty() {
            return Ok(true);
        }
        self.match_count += self.hit_rows.len() as u64;
        for &row in &self.hit_rows {
            let mut r: Vec<Value> = self
                .key_positions
                .iter()
                .map(|&k| match page.integer(k, row) {
                    Some(v) if !page.is_null(k, row) => Value::Int(v),
                    _ => Value::Null,
                })
                .collect();
            // As the batch path shows it: the decoder turns bytes that are not UTF-8 into
            // U+FFFD (`HeapDecoder::finish`), and so does this.
            let text = page.var_bytes(haystack, row).unwrap_or_default();
            r.push(Value::Text(String::from_utf8_lossy(text).into_owned()));
            self.matches.push(r);
        }
        if self.matches.len() > 2 * NEEDLE_KEYS_MAX {
            self.trim();
        }
        Ok(true)
    }

    fn consume_batch(&mut self, batch: &RecordBatch) -> Result<(), ExecError> {
        self.consume(batch)
    }
}

impl Kernel for NeedleKernel {
    fn merge(&mut self, other: Self) -> Result<(), ExecError> {
        self.match_count += other.match_count;
        self.matches.extend(other.matches);
        self.trim();
        Ok(())
    }

    fn finish(mut self) -> QueryResult {
        self.trim();
        let mut columns = self.spec.key_columns.clone();
        columns.push(self.spec.column.clone());
        QueryResult { columns, rows: self.matches, rows_total: self.match_count }
    }
}
