//! COUNT(*): reads no column. Rows come from each page's header (after its checksum is
//! verified), so the decoder materializes nothing.

use arrow::record_batch::RecordBatch;

use crate::error::ExecError;
use crate::queries::Kernel;
use crate::scan::BatchSink;
use crate::value::{QueryResult, Value};

pub const COLUMNS: &[&str] = &[];

#[derive(Debug, Default)]
pub struct CountKernel {
    rows: u64,
}

impl BatchSink for CountKernel {
    fn consume(&mut self, batch: &RecordBatch) -> Result<(), ExecError> {
        self.rows += batch.num_rows() as u64;
        Ok(())
    }
}

impl Kernel for CountKernel {
    fn merge(&mut self, other: Self) -> Result<(), ExecError> {
        self.rows += other.rows;
        Ok(())
    }

    fn finish(self) -> QueryResult {
        QueryResult { columns: vec!["count".into()], rows: vec![vec![Value::Int(self.rows as i64)]], rows_total: 1 }
    }
}
