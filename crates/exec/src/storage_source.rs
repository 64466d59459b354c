//! flashscan-storage tables as scan sources: runs from the catalog, pages through the
//! storage crate's heap decoder. COUNT(*) (no columns) uses the page-count-only path:
//! the page's checksum is verified and its header's row count taken, nothing is decoded.
//!
//! Rows a DELETE removed stay in their pages until a rebuild; the table's deleted rows file
//! is read once per scan (`DeletedRowSet`, shared by the workers) and every decoder skips
//! them: COUNT(*) subtracts a page's deleted rows, batches are filtered, and only pages
//! with none are handed to a kernel in place (it reads every row of the page).

use std::path::Path;

use arrow::datatypes::{Schema, SchemaRef};
use arrow::record_batch::{RecordBatch, RecordBatchOptions};
use flashscan_storage::{decode_page_count_only, Database, DeletedRowSet, HeapDecoder, HeapPageLayout, LiveHeapDecoder, PageId, TableMeta, PAGE_SIZE_BYTES};
use std::sync::Arc;

use crate::chunk::Chunk;
use crate::error::ExecError;
use crate::heap_pages::HeapPageSink;
use crate::source::{ChunkDecoder, Emit, PageDecoder, PagesChunkDecoder, ReadPlan, RunSpec, TableSource};

/// The scan source for any stored table: heap pages or column store row groups.
pub fn open_source<'a>(db: &'a Database, table: &str) -> Result<Box<dyn TableSource + 'a>, ExecError> {
    let meta = db.table(table)?;
    if meta.is_column_store() {
        // Its deleted rows file is read and applied by the column store source itself.
        Ok(Box::new(crate::columnstore_source::ColumnStoreTable::new(db, meta)?))
    } else {
        Ok(Box::new(StorageTable::new(db, table)?))
    }
}

pub struct StorageTable<'a> {
    db: &'a Database,
    meta: &'a TableMeta,
    /// The table's deleted rows, read once: every worker's decoder shares them.
    deleted: DeletedRowSet,
}

impl<'a> StorageTable<'a> {
    pub fn new(db: &'a Database, table: &str) -> Result<StorageTable<'a>, ExecError> {
        let meta = db.table(table)?;
        if meta.table_format()?.is_column_store() {
            return Err(ExecError::QueryColumns {
                query: "scan".into(),
                table: meta.name.clone(),
                what: format!("its format {:?} is not a heap format (open it with open_source)", meta.format),
            });
        }
        let deleted = DeletedRowSet::of_table(db.dir(), meta)?;
        Ok(StorageTable { db, meta, deleted })
    }

    pub fn meta(&self) -> &TableMeta {
        self.meta
    }

    /// Rows in the table's pages that a DELETE removed (skipped by every scan).
    pub fn deleted_row_count(&self) -> u64 {
        self.deleted.len()
    }
}

impl TableSource for StorageTable<'_> {
    crate::table_meta_methods!(meta);

    fn row_count(&self) -> u64 {
        // Never negative: `DeletedRowSet::of_table` refuses more deleted rows than rows.
        self.meta.row_count - self.deleted.len()
    }

    fn partition_count(&self) -> u32 {
        self.meta.partitions.len() as u32
    }

    fn runs(&self) -> Vec<RunSpec> {
        self.meta
            .partitions
            .iter()
            .flat_map(|p| {
                p.runs.iter().map(move |r| RunSpec {
                    path: self.db.file_path(r),
                    offset_bytes: r.offset_bytes,
                    page_count: r.page_count,
                    first_page_id: r.first_page_id,
                    partition_index: p.index,
                })
            })
            .collect()
    }

    fn new_decoder(&self, projection: &[usize]) -> Result<Box<dyn PageDecoder>, ExecError> {
        if projection.is_empty() {
            return Ok(Box::new(CountOnlyDecoder { rows: 0, schema: Arc::new(Schema::empty()), deleted: self.deleted.clone(), deleted_rows_skipped: 0 }));
        }
        Ok(Box::new(HeapPageDecoder(self.live_decoder(projection)?)))
    }

    fn new_chunk_decoder(&self, projection: &[usize], plan: &ReadPlan) -> Result<Box<dyn ChunkDecoder>, ExecError> {
        let _ = plan;
        if projection.is_empty() {
            // COUNT(*): page headers only, nothing for a kernel to read in place.
            return Ok(Box::new(PagesChunkDecoder::new(self.new_decoder(projection)?, PAGE_SIZE_BYTES)));
        }
        Ok(Box::new(HeapChunkDecoder {
            decoder: self.live_decoder(projection)?,
            layout: HeapPageLayout::try_new(self.meta, projection)?,
            row_starts: Vec::new(),
        }))
    }
}

impl StorageTable<'_> {
    fn live_decoder(&self, projection: &[usize]) -> Result<LiveHeapDecoder, ExecError> {
        Ok(LiveHeapDecoder::new(HeapDecoder::try_new(self.meta, projection)?, self.deleted.clone()))
    }
}

/// The heap's chunk decoder: a batch per chunk for batch sinks (`decode_chunk`), or each
/// page verified once and read in place by a page sink (`decode_chunk_pages`).
struct HeapChunkDecoder {
    decoder: LiveHeapDecoder,
    layout: HeapPageLayout,
    /// The current page's row starts, reused across pages.
    row_starts: Vec<u16>,
}

impl ChunkDecoder for HeapChunkDecoder {
    fn decode_chunk(&mut self, chunk: &Chunk, bytes: &[u8], path: &Path, emit: &mut Emit<'_>) -> Result<u64, ExecError> {
        let mut rows = 0u64;
        for (i, page) in bytes.chunks_exact(PAGE_SIZE_BYTES).enumerate() {
            let offset_bytes = chunk.offset_bytes + (i * PAGE_SIZE_BYTES) as u64;
            rows += self.decoder.push_page(page, chunk.first_page_id + i as u64, path, offset_bytes)? as u64;
        }
        emit(&self.decoder.finish()?)?;
        Ok(rows)
    }

    fn decode_chunk_pages(&mut self, chunk: &Chunk, bytes: &[u8], path: &Path, sink: &mut dyn HeapPageSink) -> Option<Result<u64, ExecError>> {
        Some(self.pages_to_sink(chunk, bytes, path, sink))
    }

    fn take_deleted_rows_skipped(&mut self) -> u64 {
        self.decoder.take_deleted_rows_skipped()
    }
}

impl HeapChunkDecoder {
    fn pages_to_sink(&mut self, chunk: &Chunk, bytes: &[u8], path: &Path, sink: &mut dyn HeapPageSink) -> Result<u64, ExecError> {
        if self.decoder.rows_buffered() > 0 {
            // Left by a chunk that failed halfway: its rows were never counted; drop them.
            self.decoder.discard();
        }
        let mut rows = 0u64;
        for (i, page) in bytes.chunks_exact(PAGE_SIZE_BYTES).enumerate() {
            let offset_bytes = chunk.offset_bytes + (i * PAGE_SIZE_BYTES) as u64;
            let page_id = chunk.first_page_id + i as u64;
            // A kernel reads every row of a page it takes: only pages without deleted rows.
            let view = if self.decoder.deleted().on_page(PageId(page_id)).is_empty() {
                self.layout.view(page, page_id, path, offset_bytes, &mut self.row_starts)?
            } else {
                None
            };
            let taken = match view {
                Some(view) if sink.consume_page(&view)? => Some(view.row_count() as u64),
                _ => None,
            };
            rows += match taken {
                Some(page_rows) => page_rows,
                // Compressed, a column the kernel does not read in place, or deleted rows
                // to skip: decoded, filtered.
                None => self.decoder.push_page(page, page_id, path, offset_bytes)? as u64,
            };
        }
        if self.decoder.rows_buffered() > 0 {
            sink.consume_batch(&self.decoder.finish()?)?;
        }
        Ok(rows)
    }
}

struct HeapPageDecoder(LiveHeapDecoder);

impl PageDecoder for HeapPageDecoder {
    fn push_page(&mut self, page: &[u8], expected_page_id: u64, path: &Path, offset_bytes: u64) -> Result<u32, ExecError> {
        Ok(self.0.push_page(page, expected_page_id, path, offset_bytes)?)
    }

    fn finish_batch(&mut self) -> Result<RecordBatch, ExecError> {
        Ok(self.0.finish()?)
    }

    fn take_deleted_rows_skipped(&mut self) -> u64 {
        self.0.take_deleted_rows_skipped()
    }
}

/// COUNT(*): each page's live rows from its header's count less its deleted rows (two
/// binary searches), no row decoded.
struct CountOnlyDecoder {
    rows: usize,
    schema: SchemaRef,
    deleted: DeletedRowSet,
    deleted_rows_skipped: u64,
}

impl PageDecoder for CountOnlyDecoder {
    fn push_page(&mut self, page: &[u8], expected_page_id: u64, path: &Path, offset_bytes: u64) -> Result<u32, ExecError> {
        let rows = decode_page_count_only(page, expected_page_id, path, offset_bytes)?;
        let live = self.deleted.on_page(PageId(expected_page_id)).live_rows(rows).map_err(|e| e.at(path, expected_page_id, offset_bytes))?;
        self.deleted_rows_skipped += (rows - live) as u64;
        self.rows += live as usize;
        Ok(live)
    }

    fn finish_batch(&mut self) -> Result<RecordBatch, ExecError> {
        let options = RecordBatchOptions::new().with_row_count(Some(self.rows));
        self.rows = 0;
        Ok(RecordBatch::try_new_with_options(self.schema.clone(), vec![], &options)?)
    }

    fn take_deleted_rows_skipped(&mut self) -> u64 {
        std::mem::take(&mut self.deleted_rows_skipped)
    }
}
