//! flashscan-storage tables as scan sources: runs from the catalog, pages through the
//! storage crate's heap decoder. COUNT(*) (no columns) uses the page-count-only path:
//! the page's checksum is verified and its header's row count taken, nothing is decoded.

use std::path::Path;

use arrow::datatypes::{Schema, SchemaRef};
use arrow::record_batch::{RecordBatch, RecordBatchOptions};
use flashscan_storage::{decode_page_count_only, Database, HeapDecoder, TableMeta};
use std::sync::Arc;

use crate::error::ExecError;
use crate::source::{PageDecoder, RunSpec, TableSource};

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
