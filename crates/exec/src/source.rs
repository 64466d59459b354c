//! What a scan needs from a table, and nothing more: what to read (a `ReadPlan`: chunks of
//! files, grouped into units one decoder handles together), the schema, and a decoder that
//! turns chunks into Arrow batches of the projected columns.
//!
//! Page formats (heap) only describe their runs of pages and a page decoder: the default
//! plan cuts runs into I/O-sized chunks and the default chunk decoder walks their pages.
//! The column store plans its own reads (only the projected columns' segments, row groups
//! skipped by min/max) and decodes whole row groups (`columnstore_source`). Tests
//! implement a toy page format, so the reader and the scan are tested without the real
//! formats.

use std::path::{Path, PathBuf};

use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;

use crate::chunk::{chunks_of_runs, units_every, Chunk};
use crate::error::ExecError;
use crate::heap_pages::HeapPageSink;
use crate::limits::CHUNKS_PER_GRAB;
use crate::segments::SegmentSink;

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
    /// Verifies and decodes one page (checksum, page id); returns the rows it yields: its
    /// live rows (those no DELETE removed).
    fn push_page(&mut self, page: &[u8], expected_page_id: u64, path: &Path, offset_bytes: u64) -> Result<u32, ExecError>;
    /// The rows pushed since the last call, as one batch with the projected columns in
    /// projection order (a batch with no columns still carries its row count).
    fn finish_batch(&mut self) -> Result<RecordBatch, ExecError>;
    /// Rows the pages pushed since the last call held but a DELETE removed: read, skipped,
    /// in no batch and not among the rows `push_page` returned.
    fn take_deleted_rows_skipped(&mut self) -> u64 {
        0
    }
}

/// Where a chunk decoder hands each batch it completes.
pub type Emit<'e> = dyn FnMut(&RecordBatch) -> Result<(), ExecError> + 'e;

/// Turns the chunks of one unit into batches. One per worker, reused for every chunk.
pub trait ChunkDecoder: Send {
    /// Verifies and decodes one chunk read (`bytes`, from `path`), handing every batch it
    /// completes to `emit` (none while a unit is incomplete). Returns the rows decoded.
    fn decode_chunk(&mut self, chunk: &Chunk, bytes: &[u8], path: &Path, emit: &mut Emit<'_>) -> Result<u64, ExecError>;

    /// Like `decode_chunk`, for a sink that decodes segments itself (`segments.rs`): hands
    /// it each row group's verified segments once all have arrived. None: this decoder
    /// makes batches only (the caller then uses `decode_chunk`).
    fn decode_chunk_segments(&mut self, _chunk: &Chunk, _bytes: &[u8], _path: &Path, _sink: &mut dyn SegmentSink) -> Option<Result<u64, ExecError>> {
        None
    }

    /// Like `decode_chunk`, for a sink that reads heap pages in place (`heap_pages.rs`):
    /// hands it each verified uncompressed page, and a batch of the pages it does not take.
    /// None: this decoder makes batches only (the caller then uses `decode_chunk`).
    fn decode_chunk_pages(&mut self, _chunk: &Chunk, _bytes: &[u8], _path: &Path, _sink: &mut dyn HeapPageSink) -> Option<Result<u64, ExecError>> {
        None
    }

    /// After the worker's last chunk: an error if a unit was left incomplete (a bug).
    fn finish(&mut self) -> Result<(), ExecError> {
        Ok(())
    }

    /// Rows the chunks decoded since the last call held but a DELETE removed (read and
    /// skipped; not among the rows the decode calls returned).
    fn take_deleted_rows_skipped(&mut self) -> u64 {
        0
    }
}

/// Page formats' chunk decoder: every page of the chunk through a `PageDecoder`, one batch
/// per chunk.
pub struct PagesChunkDecoder {
    pages: Box<dyn PageDecoder>,
    page_size_bytes: usize,
}

impl PagesChunkDecoder {
    pub fn new(pages: Box<dyn PageDecoder>, page_size_bytes: usize) -> PagesChunkDecoder {
        assert!(page_size_bytes > 0);
        PagesChunkDecoder { pages, page_size_bytes }
    }
}

impl ChunkDecoder for PagesChunkDecoder {
    fn decode_chunk(&mut self, chunk: &Chunk, bytes: &[u8], path: &Path, emit: &mut Emit<'_>) -> Result<u64, ExecError> {
        let mut rows = 0u64;
        for (i, page) in bytes.chunks_exact(self.page_size_bytes).enumerate() {
            let offset_bytes = chunk.offset_bytes + (i * self.page_size_bytes) as u64;
            rows += self.pages.push_page(page, chunk.first_page_id + i as u64, path, offset_bytes)? as u64;
        }
        emit(&self.pages.finish_batch()?)?;
        Ok(rows)
    }

    fn take_deleted_rows_skipped(&mut self) -> u64 {
        self.pages.take_deleted_rows_skipped()
    }
}

/// An inclusive range of one column's values, in the column's integer domain: integers
/// as they are, dates in days since 1970-01-01, decimals unscaled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ColumnRange {
    /// Index into the table's columns.
    pub column: usize,
    pub min: Option<i64>,
    pub max: Option<i64>,
}

impl ColumnRange {
    /// Some value in `[min, max]` may lie in this range.
    pub fn overlaps(&self, min: i64, max: i64) -> bool {
        self.min.is_none_or(|lo| max >= lo) && self.max.is_none_or(|hi| min <= hi)
    }
}

/// What a query promises about the rows it keeps: every range holds (a conjunction). A
/// source may skip data it can prove lies outside (a row group whose min/max miss a
/// range); the query still filters every row it is given, so skipping only saves work.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ScanFilter {
    pub ranges: Vec<ColumnRange>,
}

impl ScanFilter {
    pub fn none() -> ScanFilter {
        ScanFilter::default()
    }

}

/// What a plan skipped without reading.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct SkipFigures {
    /// Row groups (or other units of elimination) the plan considered, and skipped.
    pub row_groups_total: u64,
    pub row_groups_skipped: u64,
    pub rows_skipped: u64,
}

/// What a scan reads, and how its workers share it.
#[derive(Debug, Clone, Default)]
pub struct ReadPlan {
    /// Distinct files; a chunk's `file_index` points here.
    pub paths: Vec<PathBuf>,
    pub chunks: Vec<Chunk>,
    /// One past the last chunk of each unit: a unit's chunks all go to one worker.
    pub unit_ends: Vec<usize>,
    pub skipped: SkipFigures,
}

impl ReadPlan {
    /// Page formats: every run cut into chunks of at most `io_size_bytes`, a few chunks a unit.
    pub fn of_runs(runs: &[RunSpec], page_size_bytes: usize, io_size_bytes: usize) -> Result<ReadPlan, ExecError> {
        let paths = distinct_paths(runs);
        let mut chunks = Vec::new();
        for run in runs {
            let file_index = file_index_of(&paths, &run.path)?;
            chunks.extend(chunks_of_runs(std::slice::from_ref(run), page_size_bytes, io_size_bytes, |_| file_index));
        }
        let unit_ends = units_every(chunks.len(), CHUNKS_PER_GRAB);
        Ok(ReadPlan { paths, chunks, unit_ends, skipped: SkipFigures::default() })
    }

    pub fn bytes(&self) -> u64 {
        self.chunks.iter().map(|c| c.length_bytes as u64).sum()
    }
}

/// The `TableSource` methods of a source over one table's `TableMeta` (in field `$meta`):
/// its name, format, schema and page size. One definition for the heap
/// (`StorageTable`), the column store (`ColumnStoreTable`) and SQL's scan units.
#[macro_export]
macro_rules! table_meta_methods {
    ($meta:ident) => {
        fn table_name(&self) -> &str {
            &self.$meta.name
        }

        fn format_name(&self) -> String {
            self.$meta.format.clone()
        }

        fn schema(&self) -> ::arrow::datatypes::SchemaRef {
            self.$meta.arrow_schema()
        }

        fn page_size_bytes(&self) -> usize {
            ::flashscan_storage::PAGE_SIZE_BYTES
        }
    };
}

pub trait TableSource: Sync {
    fn table_name(&self) -> &str;
    /// The storage format, as users see it (`heap`, `heap+page`, `columnstore`...).
    fn format_name(&self) -> String;

    /// Whether the table is a column store (its `--check` verdict is measured against
    /// memory rather than the device).
    fn is_column_store(&self) -> bool {
        false
    }
    fn schema(&self) -> SchemaRef;
    fn page_size_bytes(&self) -> usize;
    /// Live rows: those a scan yields (rows a DELETE removed are not counted).
    fn row_count(&self) -> u64;
    fn partition_count(&self) -> u32;
    /// Every run of the table, partition by partition.
    fn runs(&self) -> Vec<RunSpec>;
    fn new_decoder(&self, projection: &[usize]) -> Result<Box<dyn PageDecoder>, ExecError>;

    /// What a scan of `projection` under `filter` reads. Page formats read every run.
    fn plan_reads(&self, projection: &[usize], filter: &ScanFilter, io_size_bytes: usize) -> Result<ReadPlan, ExecError> {
        let _ = (projection, filter);
        ReadPlan::of_runs(&self.runs(), self.page_size_bytes(), io_size_bytes)
    }

    /// A decoder for the chunks of `plan`. Page formats walk pages with `new_decoder`.
    fn new_chunk_decoder(&self, projection: &[usize], plan: &ReadPlan) -> Result<Box<dyn ChunkDecoder>, ExecError> {
        let _ = plan;
        Ok(Box::new(PagesChunkDecoder::new(self.new_decoder(projection)?, self.page_size_bytes())))
    }
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

/// The index of `path` among a plan's `paths`: a chunk's `file_index`. A path that is not
/// there is a bug in the plan's builder, reported as such rather than read from file 0.
pub fn file_index_of(paths: &[PathBuf], path: &Path) -> Result<u32, ExecError> {
    paths.iter().position(|p| p == path).map(|i| i as u32).ok_or_else(|| ExecError::FileNotInPlan { path: path.to_path_buf() })
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
