//! A needle in a haystack: the rows whose string column contains a rare word. Every row's
//! string is searched (memchr's SIMD substring search), so the scan reads and decodes
//! the widest column of lineitem to return a handful of rows. Returns the matching rows'
//! keys (at most `NEEDLE_KEYS_MAX`, smallest first) and, in `rows_total`, how many matched.

use std::cmp::Ordering;

use arrow::array::Array;
use arrow::record_batch::RecordBatch;
use arrow::util::display::array_value_to_string;
use memchr::memmem::Finder;

use crate::error::ExecError;
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
    finder: Finder<'static>,
    /// (keys..., matched value) of matches, trimmed to the smallest NEEDLE_KEYS_MAX now and then.
    matches: Vec<Vec<Value>>,
    match_count: u64,
    hit_rows: Vec<usize>,
}

impl NeedleKernel {
    pub fn new(spec: NeedleSpec) -> NeedleKernel {
        let finder = Finder::new(spec.pattern.as_bytes()).into_owned();
        NeedleKernel { spec, finder, matches: Vec::new(), match_count: 0, hit_rows: Vec::new() }
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
