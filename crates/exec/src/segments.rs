//! Column store row groups handed to kernels as verified segments rather than decoded
//! Arrow arrays, so a kernel decodes each column a vector (1,024 values) at a time into a
//! buffer it reuses and aggregates while the values are in L1: no whole-column
//! intermediates. The row group stays the unit of I/O, checksums and statistics: the
//! decoder verifies every segment (checksum, header against the directory) before the
//! kernel sees it.
//!
//! A kernel opts in through `BatchSink::segment_sink`; anything it does not cover (a codec
//! or a type its vector loop does not take) goes through `RowGroupSegments::to_batch`, the
//! whole-column decoder, and the kernel's ordinary `consume`.

use std::sync::atomic::{AtomicU8, Ordering};

use arrow::array::ArrayRef;
use arrow::datatypes::SchemaRef;
use arrow::record_batch::{RecordBatch, RecordBatchOptions};
use flashscan_storage::columnstore::{ColumnStoreError, Location, SegmentView, VecPool};
use flashscan_storage::compression::CodecError;

use crate::error::ExecError;

/// One row group's projected columns, verified, in projection order.
pub struct RowGroupSegments<'a> {
    pub row_count: usize,
    /// The projected fields, in the order of `columns`.
    pub schema: SchemaRef,
    pub columns: Vec<SegmentView<'a>>,
    /// Where each column's errors point (file, row group, column).
    pub locations: Vec<Location>,
}

impl RowGroupSegments<'_> {
    /// A codec error of column `slot`, with its location.
    pub fn codec_error(&self, slot: usize, error: CodecError) -> ExecError {
        let location = self.locations.get(slot).cloned().unwrap_or_else(Location::in_memory);
        ExecError::StorageLayer(ColumnStoreError::from_codec(location, error).into())
    }

    /// A value that contradicts the segment's own statistics: corrupt (or a writer bug).
    pub fn corrupt(&self, slot: usize, what: String) -> ExecError {
        let location = self.locations.get(slot).cloned().unwrap_or_else(Location::in_memory);
        ExecError::StorageLayer(ColumnStoreError::Corrupt { location, what: "segment values vs statistics", detail: what }.into())
    }

    /// The whole row group as one batch: the path for what vector kernels do not cover.
    pub fn to_batch(&self, pool: &mut VecPool) -> Result<RecordBatch, ExecError> {
        let arrays = self
            .columns
            .iter()
            .zip(&self.locations)
            .map(|(view, location)| view.decode_array(location, pool))
            .collect::<Result<Vec<ArrayRef>, ColumnStoreError>>()
            .map_err(flashscan_storage::StorageError::from)?;
        let options = RecordBatchOptions::new().with_row_count(Some(self.row_count));
        Ok(RecordBatch::try_new_with_options(self.schema.clone(), arrays, &options)?)
    }
}

/// A kernel that consumes row groups as segments.
pub trait SegmentSink {
    fn consume_segments(&mut self, group: &RowGroupSegments<'_>) -> Result<(), ExecError>;
}

/// 0: not decided yet; 1: on; 2: off.
static VECTOR_KERNELS: AtomicU8 = AtomicU8::new(0);

/// Vector kernels are on unless `FLASHSCAN_VECTOR_KERNELS=0` (for side-by-side timing of
/// the whole-column path) or `set_vector_kernels(false)` (tests that compare the two).
pub fn vector_kernels_enabled() -> bool {
    match VECTOR_KERNELS.load(Ordering::Relaxed) {
        1 => true,
        2 => false,
        _ => {
            let enabled = std::env::var("FLASHSCAN_VECTOR_KERNELS").map_or(true, |value| value != "0");
            VECTOR_KERNELS.store(if enabled { 1 } else { 2 }, Ordering::Relaxed);
            enabled
        }
    }
}

/// Turns the vector kernels on or off for the whole process (both paths give the same
/// answers; this only chooses which one runs).
pub fn set_vector_kernels(enabled: bool) {
    VECTOR_KERNELS.store(if enabled { 1 } else { 2 }, Ordering::Relaxed);
}
