//! Heap pages handed to kernels in place, the heap's counterpart of `segments.rs`: the
//! decoder verifies each uncompressed page (checksum, header, every slot and every
//! projected string's bounds: `flashscan_storage::HeapPageView`) and the kernel reads the
//! fields it needs straight out of the I/O buffer — a COUNT(col) reads null bits only, the
//! needle searches each string where it lies, SUM and Q1 read their fixed-width fields
//! into small reused vectors and aggregate — instead of every projected value being copied
//! into Arrow columns (and every string's UTF-8 validated) first.
//!
//! A kernel opts in through `BatchSink::heap_page_sink`. Pages it does not cover — row- and
//! page-compressed pages, or column types its loop does not take (it answers `false`) —
//! are decoded by `HeapDecoder` into a batch for `consume_batch`, its ordinary path. The
//! switch is the vector kernels' (`FLASHSCAN_VECTOR_KERNELS=0` turns both off).

use arrow::record_batch::RecordBatch;
use flashscan_storage::HeapPageView;

use crate::error::ExecError;

/// A kernel that reads verified heap pages in place.
pub trait HeapPageSink {
    /// Takes one verified uncompressed page. `Ok(false)`: this kernel does not cover the
    /// page's columns (their names or types); it changed nothing, and the page is decoded
    /// into a batch for `consume_batch` instead.
    fn consume_page(&mut self, page: &HeapPageView<'_>) -> Result<bool, ExecError>;

    /// The pages `consume_page` did not take, decoded (the kernel's `BatchSink::consume`).
    fn consume_batch(&mut self, batch: &RecordBatch) -> Result<(), ExecError>;
}
