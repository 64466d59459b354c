//! The built-in queries, one file each. A query is a projection (the columns it reads) and
//! a kernel: vectorized loops over the raw value slices of each decoded batch, producing a
//! partial answer per worker; partial answers merge at the end of the scan.

pub mod columns;
pub mod count;
pub mod count11;
pub mod needle;
pub mod q1;
pub mod sum4;

use arrow::record_batch::RecordBatch;

use crate::error::ExecError;
use crate::heap_pages::HeapPageSink;
use crate::scan::BatchSink;
use crate::segments::{vector_kernels_enabled, SegmentSink};
use crate::source::{projection_of, ColumnRange, ScanFilter, TableSource};
use crate::value::QueryResult;

pub use needle::NeedleSpec;

/// A query's per-worker state.
pub trait Kernel: BatchSink + Sized {
    /// Folds another worker's partial answer into this one.
    fn merge(&mut self, other: Self) -> Result<(), ExecError>;
    fn finish(self) -> QueryResult;
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BuiltinQuery {
    /// COUNT(*).
    Count,
    /// COUNT of 11 lineitem columns (non-null values of each), as in the article.
    Count11,
    /// SUM of l_quantity, l_extendedprice, l_discount, l_tax.
    Sum4,
    /// Rows whose string column contains a rare word: their count and keys.
    Needle(NeedleSpec),
    /// TPC-H Q1 (pricing summary report), delta 90 days.
    Q1,
}

impl BuiltinQuery {
    pub const NAMES: [&'static str; 5] = ["count", "count11", "sum4", "needle", "q1"];

    /// The query by name; the needle gets the default word on the default column.
    pub fn parse(name: &str) -> Result<BuiltinQuery, ExecError> {
        match name {
            "count" => Ok(BuiltinQuery::Count),
            "count11" => Ok(BuiltinQuery::Count11),
            "sum4" => Ok(BuiltinQuery::Sum4),
            "needle" => Ok(BuiltinQuery::Needle(NeedleSpec::default())),
            "q1" => Ok(BuiltinQuery::Q1),
            other => Err(ExecError::UnknownQuery(other.to_string())),
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            BuiltinQuery::Count => "count",
            BuiltinQuery::Count11 => "count11",
            BuiltinQuery::Sum4 => "sum4",
            BuiltinQuery::Needle(_) => "needle",
            BuiltinQuery::Q1 => "q1",
        }
    }

    /// The columns the query reads (its projection), by name.
    pub fn columns(&self) -> Vec<String> {
        let names: &[&str] = match self {
            BuiltinQuery::Count => count::COLUMNS,
            BuiltinQuery::Count11 => count11::COLUMNS,
            BuiltinQuery::Sum4 => sum4::COLUMNS,
            BuiltinQuery::Needle(spec) => return spec.columns(),
            BuiltinQuery::Q1 => q1::COLUMNS,
        };
        names.iter().map(|s| s.to_string()).collect()
    }

    /// What the query promises about the rows it keeps, for sources that can skip data
    /// (column store row groups by min/max). Q1 keeps l_shipdate <= 1998-09-02 only.
    pub fn scan_filter(&self, source: &dyn TableSource) -> Result<ScanFilter, ExecError> {
        Ok(match self {
            BuiltinQuery::Q1 => {
                let column = projection_of(source, self.name(), &["l_shipdate"])?[0];
                ScanFilter { ranges: vec![ColumnRange { column, min: None, max: Some(q1::SHIPDATE_DAYS_MAX as i64) }] }
            }
            BuiltinQuery::Count | BuiltinQuery::Count11 | BuiltinQuery::Sum4 | BuiltinQuery::Needle(_) => ScanFilter::none(),
        })
    }

    /// The query as SQL, for the report and for comparing with other engines.
    pub fn sql(&self, table: &str) -> String {
        match self {
            BuiltinQuery::Count => format!("SELECT COUNT(*) FROM {table}"),
            BuiltinQuery::Count11 => format!(
                "SELECT {} FROM {table}",
                count11::COLUMNS.iter().map(|c| format!("COUNT({c})")).collect::<Vec<_>>().join(", ")
            ),
            BuiltinQuery::Sum4 => format!(
                "SELECT {} FROM {table}",
                sum4::COLUMNS.iter().map(|c| format!("SUM({c})")).collect::<Vec<_>>().join(", ")
            ),
            BuiltinQuery::Needle(spec) => spec.sql(table),
            BuiltinQuery::Q1 => q1::SQL.replace("lineitem", table),
        }
    }
}

/// One worker's state for any built-in query: lets callers that do not care which query
/// runs (the scan driver, tests) hold kernels without naming their types.
pub enum AnyKernel {
    Count(count::CountKernel),
    Count11(count11::Count11Kernel),
    Sum4(sum4::Sum4Kernel),
    Needle(Box<needle::NeedleKernel>),
    Q1(Box<q1::Q1Kernel>),
}

impl AnyKernel {
    pub fn new(query: &BuiltinQuery) -> AnyKernel {
        match query {
            BuiltinQuery::Count => AnyKernel::Count(Default::default()),
            BuiltinQuery::Count11 => AnyKernel::Count11(Default::default()),
            BuiltinQuery::Sum4 => AnyKernel::Sum4(Default::default()),
            BuiltinQuery::Needle(spec) => AnyKernel::Needle(Box::new(needle::NeedleKernel::new(spec.clone()))),
            BuiltinQuery::Q1 => AnyKernel::Q1(Box::default()),
        }
    }
}

impl BatchSink for AnyKernel {
    // One match per batch, not per row: the loops inside each kernel stay monomorphic.
    fn consume(&mut self, batch: &RecordBatch) -> Result<(), ExecError> {
        match self {
            AnyKernel::Count(k) => k.consume(batch),
            AnyKernel::Count11(k) => k.consume(batch),
            AnyKernel::Sum4(k) => k.consume(batch),
            AnyKernel::Needle(k) => k.consume(batch),
            AnyKernel::Q1(k) => k.consume(batch),
        }
    }

    fn segment_sink(&mut self) -> Option<&mut dyn SegmentSink> {
        if !vector_kernels_enabled() {
            return None;
        }
        match self {
            AnyKernel::Sum4(k) => Some(k),
            AnyKernel::Q1(k) => Some(k.as_mut()),
            AnyKernel::Count(_) | AnyKernel::Count11(_) | AnyKernel::Needle(_) => None,
        }
    }

    fn heap_page_sink(&mut self) -> Option<&mut dyn HeapPageSink> {
        if !vector_kernels_enabled() {
            return None;
        }
        match self {
            AnyKernel::Count11(k) => Some(k),
            AnyKernel::Sum4(k) => Some(k),
            AnyKernel::Needle(k) => Some(k.as_mut()),
            AnyKernel::Q1(k) => Some(k.as_mut()),
            // COUNT(*) reads page headers only (no projected column, no page to view).
            AnyKernel::Count(_) => None,
        }
    }
}

impl Kernel for AnyKernel {
    fn merge(&mut self, other: Self) -> Result<(), ExecError> {
        match (self, other) {
            (AnyKernel::Count(a), AnyKernel::Count(b)) => a.merge(b),
            (AnyKernel::Count11(a), AnyKernel::Count11(b)) => a.merge(b),
            (AnyKernel::Sum4(a), AnyKernel::Sum4(b)) => a.merge(b),
            (AnyKernel::Needle(a), AnyKernel::Needle(b)) => a.merge(*b),
            (AnyKernel::Q1(a), AnyKernel::Q1(b)) => a.merge(*b),
            _ => Err(ExecError::InvalidOption("merging partial answers of two different queries".into())),
        }
    }

    fn finish(self) -> QueryResult {
        match self {
            AnyKernel::Count(k) => k.finish(),
            AnyKernel::Count11(k) => k.finish(),
            AnyKernel::Sum4(k) => k.finish(),
            AnyKernel::Needle(k) => k.finish(),
            AnyKernel::Q1(k) => k.finish(),
        }
    }
}

/// Merges per-worker kernels into the answer.
pub fn merge_all<K: Kernel>(kernels: Vec<K>) -> Result<Option<QueryResult>, ExecError> {
    let mut iter = kernels.into_iter();
    let Some(mut first) = iter.next() else { return Ok(None) };
    for k in iter {
        first.merge(k)?;
    }
    Ok(Some(first.finish()))
}

/// Runs a query over batches already in memory, split over `partial_count` kernels that are
/// merged at the end, as the scan's workers are. For tests and callers with batches in hand.
pub fn run_on_batches<'a>(
    query: &BuiltinQuery,
    batches: impl IntoIterator<Item = &'a RecordBatch>,
    partial_count: usize,
) -> Result<QueryResult, ExecError> {
    let partial_count = partial_count.max(1);
    let mut kernels: Vec<AnyKernel> = (0..partial_count).map(|_| AnyKernel::new(query)).collect();
    for (i, batch) in batches.into_iter().enumerate() {
        kernels[i % partial_count].consume(batch)?;
    }
    Ok(merge_all(kernels)?.unwrap_or_default())
}
