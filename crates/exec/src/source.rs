//! What a scan needs from a table, and nothing more: where its pages sit (runs of
//! contiguous pages in files), the page size, the schema, and a decoder that turns pages
//! into Arrow batches of the projected columns. The storage crate's tables implement it
//! (see `storage_source`); tests implement it with a toy page format, so the reader and
//! the scan are tested without the real formats.

use std::path::{Path, PathBuf};

use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;

use crate::error::ExecError;

/// Contiguous pages of one file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunSpec {
    pub path: PathBuf,
    pub offset_bytes: u64,
    pub page_count: u32,
    /// Id of the first page; page `i` of the run carries id `first_page_id + i`.
    pub first_page_id: u64,
    pub partition_index: u32,
}

/// Turns pages into a batch of the projected columns. One per worker, reused for every
/// chunk, so buffers are allocated once.
pub trait PageDecoder: Send {
    /// Verifies and decodes one page (checksum, page id); returns the rows it holds.
    fn push_page(&mut self, page: &[u8], expected_page_id: u64, path: &Path, offset_bytes: u64) -> Result<u32, ExecError>;
    /// The rows pushed since the last call, as one batch with the projected columns in
    /// projection order (a batch with no columns still carries its row count).
    fn finish_batch(&mut self) -> Result<RecordBatch, ExecError>;
}

pub trait TableSource: Sync {
    fn table_name(&self) -> &str;
    /// The storage format, as users see it (`heap`, `heap+page`, `columnstore`...).
    fn format_name(&self) -> String;
    fn schema(&self) -> SchemaRef;
    fn page_size_bytes(&self) -> usize;
    fn row_count(&self) -> u64;
    fn partition_count(&self) -> u32;
    /// Every run of the table, partition by partition.
    fn runs(&self) -> Vec<RunSpec>;
    fn new_decoder(&self, projection: &[usize]) -> Result<Box<dyn PageDecoder>, ExecError>;
}

/// Positions of `names` in the schema, or an error naming the first missing column.
pub fn projection_of(source: &dyn TableSource, query: &str, names: &[&str]) -> Result<Vec<usize>, ExecError> {
    let schema = source.schema();
    names
        .iter()
        .map(|n| {
            schema.index_of(n).map_err(|_| ExecError::QueryColumns {
                query: query.to_string(),
                table: source.table_name().to_string(),
                what: format!("the table has no column {n}"),
            })
        })
        .collect()
}

/// Distinct files of the runs, in first-seen order.
pub fn distinct_paths(runs: &[RunSpec]) -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = Vec::new();
    for r in runs {
        if !paths.iter().any(|p| p == &r.path) {
            paths.push(r.path.clone());
        }
    }
    paths
}
