//! Test helpers: TPC-H lineitem batches from tpchgen-arrow, and a toy table format whose
//! pages carry a header (magic, page id, row count, checksum of the header) and whose
//! decoder serves the rows from memory. The toy format lets the reader, the scan and the
//! report be tested end to end with real queries before and apart from the storage crate.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::compute::concat_batches;
use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;
use flashscan_exec::{ExecError, PageDecoder, RunSpec, TableSource};
use tpchgen::generators::LineItemGenerator;
use tpchgen_arrow::LineItemArrow;

pub const TOY_PAGE_SIZE_BYTES: usize = 8192;
const TOY_MAGIC: u32 = 0x5459_4f54;

/// Lineitem at `scale_factor`, generated in `parts` pieces on as many threads.
pub fn lineitem(scale_factor: f64, parts: i32) -> Vec<RecordBatch> {
    std::thread::scope(|s| {
        let handles: Vec<_> = (1..=parts)
            .map(|part| {
                s.spawn(move || {
                    LineItemArrow::new(LineItemGenerator::new(scale_factor, part, parts))
                        .with_batch_size(8192)
                        .collect::<Result<Vec<_>, _>>()
                        .unwrap()
                })
            })
            .collect();
        handles.into_iter().flat_map(|h| h.join().unwrap()).collect()
    })
}

pub struct ToyTable {
    pub dir: PathBuf,
    pub schema: SchemaRef,
    /// Rows of each page, by page id.
    pub pages: Arc<Vec<RecordBatch>>,
    pub runs: Vec<RunSpec>,
    pub partition_count: u32,
    pub row_count: u64,
}

fn page_header(page_id: u64, rows: u32) -> [u8; 20] {
    let mut h = [0u8; 20];
    h[0..4].copy_from_slice(&TOY_MAGIC.to_le_bytes());
    h[4..12].copy_from_slice(&page_id.to_le_bytes());
    h[12..16].copy_from_slice(&rows.to_le_bytes());
    let check = crc(&h[0..16]);
    h[16..20].copy_from_slice(&check.to_le_bytes());
    h
}

fn crc(bytes: &[u8]) -> u32 {
    // FNV-1a: enough to notice a flipped byte in a test.
    bytes.iter().fold(0x811c_9dc5u32, |h, b| (h ^ *b as u32).wrapping_mul(0x0100_0193))
}

impl ToyTable {
    /// Writes `batches` as toy pages of `rows_per_page` rows, round-robin over
    /// `partition_count` files, with a gap page between runs so runs are really separate.
    pub fn write(dir: &Path, batches: &[RecordBatch], rows_per_page: usize, partition_count: u32) -> ToyTable {
        let schema = batches[0].schema();
        let mut pages = Vec::new();
        for b in batches {
            let mut start = 0;
            while start < b.num_rows() {
                let len = rows_per_page.min(b.num_rows() - start);
                pages.push(b.slice(start, len));
                start += len;
            }
        }
        let mut files: Vec<Vec<u8>> = vec![Vec::new(); partition_count as usize];
        let mut runs = Vec::new();
        // Runs of up to 37 pages (not a multiple of any I/O size) per file in turn.
        let mut page_id = 0u64;
        let mut part = 0usize;
        while (page_id as usize) < pages.len() {
            let count = 37.min(pages.len() - page_id as usize) as u32;
            let file = &mut files[part];
            file.extend(std::iter::repeat(0xAAu8).take(TOY_PAGE_SIZE_BYTES)); // gap page
            let offset_bytes = file.len() as u64;
            for i in 0..count as u64 {
                let mut page = vec![0u8; TOY_PAGE_SIZE_BYTES];
                page[..20].copy_from_slice(&page_header(page_id + i, pages[(page_id + i) as usize].num_rows() as u32));
                file.extend_from_slice(&page);
            }
            runs.push(RunSpec {
                path: dir.join(format!("part{part}.toy")),
                offset_bytes,
                page_count: count,
                first_page_id: page_id,
                partition_index: part as u32,
            });
            page_id += count as u64;
            part = (part + 1) % partition_count as usize;
        }
        for (i, f) in files.iter().enumerate() {
            std::fs::write(dir.join(format!("part{i}.toy")), f).unwrap();
        }
        let row_count = pages.iter().map(|p| p.num_rows() as u64).sum();
        ToyTable { dir: dir.to_path_buf(), schema, pages: Arc::new(pages), runs, partition_count, row_count }
    }
}

pub struct ToyDecoder {
    pages: Arc<Vec<RecordBatch>>,
    projected_schema: SchemaRef,
    projection: Vec<usize>,
    pending: Vec<RecordBatch>,
    rows: usize,
}

impl PageDecoder for ToyDecoder {
    fn push_page(&mut self, page: &[u8], expected_page_id: u64, path: &Path, offset_bytes: u64) -> Result<u32, ExecError> {
        let corrupt = |what: String| ExecError::Corrupt { path: path.to_path_buf(), offset_bytes, what };
        let word = |r: std::ops::Range<usize>| page[r].iter().rev().fold(0u64, |a, b| a << 8 | *b as u64);
        if word(0..4) as u32 != TOY_MAGIC {
            return Err(corrupt("not a toy page (bad magic)".into()));
        }
        if word(16..20) as u32 != crc(&page[0..16]) {
            return Err(corrupt("header checksum mismatch".into()));
        }
        let page_id = word(4..12);
        if page_id != expected_page_id {
            return Err(corrupt(format!("page id {page_id}, expected {expected_page_id}")));
        }
        let rows = word(12..16) as u32;
        let batch = self.pages.get(page_id as usize).ok_or_else(|| corrupt("page id past the table".into()))?;
        self.pending.push(batch.project(&self.projection).map_err(ExecError::from)?);
        self.rows += rows as usize;
        Ok(rows)
    }

    fn finish_batch(&mut self) -> Result<RecordBatch, ExecError> {
        let batch = if self.projection.is_empty() {
            RecordBatch::try_new_with_options(
                self.projected_schema.clone(),
                vec![],
                &arrow::record_batch::RecordBatchOptions::new().with_row_count(Some(self.rows)),
            )?
        } else {
            concat_batches(&self.projected_schema, &self.pending)?
        };
        self.pending.clear();
        self.rows = 0;
        Ok(batch)
    }
}

impl TableSource for ToyTable {
    fn table_name(&self) -> &str {
        "lineitem"
    }
    fn format_name(&self) -> String {
        "toy".into()
    }
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }
    fn page_size_bytes(&self) -> usize {
        TOY_PAGE_SIZE_BYTES
    }
    fn row_count(&self) -> u64 {
        self.row_count
    }
    fn partition_count(&self) -> u32 {
        self.partition_count
    }
    fn runs(&self) -> Vec<RunSpec> {
        self.runs.clone()
    }
    fn new_decoder(&self, projection: &[usize]) -> Result<Box<dyn PageDecoder>, ExecError> {
        Ok(Box::new(ToyDecoder {
            pages: self.pages.clone(),
            projected_schema: Arc::new(self.schema.project(projection)?),
            projection: projection.to_vec(),
            pending: Vec::new(),
            rows: 0,
        }))
    }
}
