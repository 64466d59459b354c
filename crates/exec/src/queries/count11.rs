//! COUNT of 11 lineitem columns, counting the non-null values of each, as the article's
//! `SELECT COUNT(Col1), ..., COUNT(Col11)`: five numbers and six strings or dates, so the
//! cost is in decoding eleven columns, not in counting.

use arrow::record_batch::RecordBatch;

use crate::error::ExecError;
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
