//! COUNT of 11 lineitem columns, counting the non-null values of each, as the article's
//! `SELECT COUNT(Col1), ..., COUNT(Col11)`: five numbers and six strings or dates, so the
//! cost is in decoding eleven columns, not in counting.

use arrow::record_batch::RecordBatch;

use flashscan_storage::HeapPageView;

use crate::error::ExecError;
use crate::heap_pages::HeapPageSink;
use crate::queries::columns::column;
use crate::queries::Kernel;
use crate::scan::BatchSink;
use crate::value::{QueryResult, Value};

pub const COLUMNS: &[&str] = &[
    "l_orderkey",
    "l_partkey",
    "l_suppkey",
    "l_linenumber",
    "l_quantity",
    "l_returnflag",
    "l_linestatus",
    "l_shipdate",
    "l_shipinstruct",
    "l_shipmode",
    "l_comment",
];
const NAME: &str = "count11";

#[derive(Debug, Default)]
pub struct Count11Kernel {
    non_null_counts: [u64; COLUMNS.len()],
}

impl BatchSink for Count11Kernel {
    fn consume(&mut self, batch: &RecordBatch) -> Result<(), ExecError> {
        for (count, name) in self.non_null_counts.iter_mut().zip(COLUMNS) {
            let array = column(batch, NAME, name)?;
            *count += (array.len() - array.null_count()) as u64;
        }
        Ok(())
    }
}

impl HeapPageSink for Count11Kernel {
    /// COUNT(col) needs no value: the non-null rows of each column, from the null bitmaps
    /// of the verified page (every row of a NOT NULL column), no value decoded or copied.
    fn consume_page(&mut self, page: &HeapPageView<'_>) -> Result<bool, ExecError> {
        if !page.has_columns(COLUMNS) {
            return Ok(false);
        }
        for (k, count) in self.non_null_counts.iter_mut().enumerate() {
            *count += page.non_null_count(k) as u64;
        }
        Ok(true)
    }

    fn consume_batch(&mut self, batch: &RecordBatch) -> Result<(), ExecError> {
        self.consume(batch)
    }
}

impl Kernel for Count11Kernel {
    fn merge(&mut self, other: Self) -> Result<(), ExecError> {
        for (a, b) in self.non_null_counts.iter_mut().zip(other.non_null_counts) {
            *a += b;
        }
        Ok(())
    }

    fn finish(self) -> QueryResult {
        QueryResult {
            columns: COLUMNS.iter().map(|c| format!("count({c})")).collect(),
            rows: vec![self.non_null_counts.iter().map(|c| Value::Int(*c as i64)).collect()],
            rows_total: 1,
        }
    }
}
