//! flashscan-storage tables as scan sources: runs from the catalog, pages through the
//! storage crate's heap decoder. COUNT(*) (no columns) uses the page-count-only path:
//! the page's checksum is verified and its header's row count taken, nothing is decoded.

use std::path::Path;

use arrow::datatypes::{Schema, SchemaRef};
use arrow::record_batch::{RecordBatch, RecordBatchOptions};
use flashscan_storage::{decode_page_count_only, Database, HeapDecoder, HeapPageLayout, TableMeta, PAGE_SIZE_BYTES};
use std::sync::Arc;

use crate::chunk::Chunk;
use crate::error::ExecError;
use crate::heap_pages::HeapPageSink;
use crate::source::{ChunkDecoder, Emit, PageDecoder, PagesChunkDecoder, ReadPlan, RunSpec, TableSource};

/// The scan source for any stored table: heap pages or column store row groups.
pub fn open_source<'a>(db: &'a Database, table: &str) -> Result<Box<dyn TableSource + 'a>, ExecError> {
    let meta = db.table(table)?;
    if meta.is_column_store() {
        Ok(Box::new(crate::columnstore_source::ColumnStoreTable::new(db, meta)?))
    } else {
        Ok(Box::new(StorageTable::new(db, table)?))
    }
}

pub struct StorageTable<'a> {
    db: &'a Database,
    meta: &'a TableMeta,
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
        Ok(StorageTable { db, meta })
    }

    pub fn meta(&self) -> &TableMeta {
        self.meta
    }
}

impl TableSource for StorageTable<'_> {
    crate::table_meta_methods!(meta);

    fn row_count(&self) -> u64 {
        self.meta.row_count
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
            return Ok(Box::new(CountOnlyDecoder { rows: 0, schema: Arc::new(Schema::empty()) }));
        }
        Ok(Box::new(HeapPageDecoder(HeapDecoder::try_new(self.meta, projection)?)))
    }

    fn new_chunk_decoder(&self, projection: &[usize], plan: &ReadPlan) -> Result<Box<dyn ChunkDecoder>, ExecError> {
        let _ = plan;
        if projection.is_empty() {
            // COUNT(*): page headers only, nothing for a kernel to read in place.
            return Ok(Box::new(PagesChunkDecoder::new(self.new_decoder(projection)?, PAGE_SIZE_BYTES)));
        }
        Ok(Box::new(HeapChunkDecoder {
            decoder: HeapDecoder::try_new(self.meta, projection)?,
            layout: HeapPageLayout::try_new(self.meta, projection)?,
            row_starts: Vec::new(),
        }))
    }
}

/// The heap's chunk decoder: a batch per chunk for batch sinks (`decode_chunk`), or each
/// page verified once and read in place by a page sink (`decode_chunk_pages`).
struct HeapChunkDecoder {
    decoder: HeapDecoder,
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
        emit(&self.decoder.finish())?;
        Ok(rows)
    }

    fn decode_chunk_pages(&mut self, chunk: &Chunk, bytes: &[u8], path: &Path, sink: &mut dyn HeapPageSink) -> Option<Result<u64, ExecError>> {
        Some(self.pages_to_sink(chunk, bytes, path, sink))
    }
}

impl HeapChunkDecoder {
    fn pages_to_sink(&mut self, chunk: &Chunk, bytes: &[u8], path: &Path, sink: &mut dyn HeapPageSink) -> Result<u64, ExecError> {
        if self.decoder.rows_buffered() > 0 {
            // Left by a chunk that failed halfway: its rows were never counted; drop them.
            drop(self.decoder.finish());
        }
        let mut rows = 0u64;
        for (i, page) in bytes.chunks_exact(PAGE_SIZE_BYTES).enumerate() {
            let offset_bytes = chunk.offset_bytes + (i * PAGE_SIZE_BYTES) as u64;
            let page_id = chunk.first_page_id + i as u64;
            let taken = match self.layout.view(page, page_id, path, offset_bytes, &mut self.row_starts)? {
                Some(view) if sink.consume_page(&view)? => Some(view.row_count() as u64),
                _ => None,
            };
            rows += match taken {
                Some(page_rows) => page_rows,
                // Compressed, or a column the kernel does not read in place: decoded.
                None => self.decoder.push_page(page, page_id, path, offset_bytes)? as u64,
            };
        }
        if self.decoder.rows_buffered() > 0 {
            sink.consume_batch(&self.decoder.finish())?;
        }
        Ok(rows)
    }
}

struct HeapPageDecoder(HeapDecoder);

impl PageDecoder for HeapPageDecoder {
    fn push_page(&mut self, page: &[u8], expected_page_id: u64, path: &Path, offset_bytes: u64) -> Result<u32, ExecError> {
        Ok(self.0.push_page(page, expected_page_id, path, offset_bytes)?)
    }

    fn finish_batch(&mut self) -> Result<RecordBatch, ExecError> {
        Ok(self.0.finish())
    }
}

struct CountOnlyDecoder {
    rows: usize,
    schema: SchemaRef,
}

impl PageDecoder for CountOnlyDecoder {
    fn push_page(&mut self, page: &[u8], expected_page_id: u64, path: &Path, offset_bytes: u64) -> Result<u32, ExecError> {
        let rows = decode_page_count_only(page, expected_page_id, path, offset_bytes)?;
        self.rows += rows as usize;
        Ok(rows)
    }

    fn finish_batch(&mut self) -> Result<RecordBatch, ExecError> {
        let options = RecordBatchOptions::new().with_row_count(Some(self.rows));
        self.rows = 0;
        Ok(RecordBatch::try_new_with_options(self.schema.clone(), vec![], &options)?)
    }
}
