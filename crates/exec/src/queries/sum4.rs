//! SUM of four decimal columns (l_quantity, l_extendedprice, l_discount, l_tax), exact:
//! sums of scaled integers in i128, printed with the column's scale.

use arrow::array::Array;
use arrow::record_batch::RecordBatch;

use crate::error::ExecError;
use crate::queries::columns::{column, decimal_values};
use crate::queries::Kernel;
use crate::scan::BatchSink;
use crate::value::{QueryResult, Value};

pub const COLUMNS: &[&str] = &["l_quantity", "l_extendedprice", "l_discount", "l_tax"];
const NAME: &str = "sum4";

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct ExactSum {
    sum: i128,
    non_null_count: u64,
    /// Set by the first batch; every later batch must agree.
    scale: Option<u8>,
}

#[derive(Debug, Default)]
pub struct Sum4Kernel {
    sums: [ExactSum; COLUMNS.len()],
    scratch: Vec<i128>,
}

/// Sum of a slice: a plain loop the compiler unrolls; i128 never overflows here (a batch
/// of 2^32 values of 10^18 each stays below 2^127).
fn sum_all(values: &[i128]) -> i128 {
    values.iter().sum()
}

fn sum_valid(values: &[i128], array: &dyn Array) -> i128 {
    match array.nulls() {
        None => sum_all(values),
        Some(nulls) => nulls.valid_indices().map(|i| values[i]).sum(),
    }
}

impl BatchSink for Sum4Kernel {
    fn consume(&mut self, batch: &RecordBatch) -> Result<(), ExecError> {
        for (acc, name) in self.sums.iter_mut().zip(COLUMNS) {
            let array = column(batch, NAME, name)?;
            let (values, scale) = decimal_values(array.as_ref(), &mut self.scratch, NAME, name)?;
            merge_scale(&mut acc.scale, scale, name)?;
            acc.sum += sum_valid(values, array.as_ref());
            acc.non_null_count += (array.len() - array.null_count()) as u64;
        }
        Ok(())
    }
}

fn merge_scale(mine: &mut Option<u8>, theirs: u8, name: &str) -> Result<(), ExecError> {
    match *mine {
        None => *mine = Some(theirs),
        Some(s) if s == theirs => {}
        Some(s) => {
            return Err(ExecError::QueryColumns {
                query: NAME.into(),
                table: String::new(),
                what: format!("column {name} changes scale between pages ({s} then {theirs})"),
            })
        }
    }
    Ok(())
}

impl Kernel for Sum4Kernel {
    fn merge(&mut self, other: Self) -> Result<(), ExecError> {
        for ((a, b), name) in self.sums.iter_mut().zip(other.sums).zip(COLUMNS) {
            if let Some(scale) = b.scale {
                merge_scale(&mut a.scale, scale, name)?;
            }
            a.sum += b.sum;
            a.non_null_count += b.non_null_count;
        }
        Ok(())
    }

    fn finish(self) -> QueryResult {
        let row = self
            .sums
            .iter()
            .map(|s| match s.scale {
                // SQL: the sum of no values is NULL.
                _ if s.non_null_count == 0 => Value::Null,
                Some(scale) => Value::Decimal { value: s.sum, scale },
                None => Value::Null,
            })
            .collect();
        QueryResult { columns: COLUMNS.iter().map(|c| format!("sum({c})")).collect(), rows: vec![row], rows_total: 1 }
    }
}
