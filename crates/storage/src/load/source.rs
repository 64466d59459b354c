//! A table to load, as parts that produce Arrow batches independently (one worker each).

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;

use crate::error::StorageError;

pub type BatchIter = Box<dyn Iterator<Item = Result<RecordBatch, StorageError>> + Send>;
/// Opens one part; called on a worker thread.
pub type PartSource = Box<dyn FnOnce() -> Result<BatchIter, StorageError> + Send>;

pub struct TableSource {
    pub name: String,
    pub schema: SchemaRef,
    pub parts: Vec<PartSource>,
    /// Where the rows come from, recorded in the catalog.
    pub description: String,
    /// For progress bars; not relied on.
    pub rows_estimate: u64,
}
