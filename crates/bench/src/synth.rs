//! Synthetic tables with an exact number of rows per page, for tests and the cost bench:
//! `id` (Int64, row number, or a permutation of it), `val` (Int64, id mod 1000) and
//! `filler` (Utf8) sized so `rows_per_page` rows fill a page, as the 1…323 rows-per-page
//! tables of the I/O cost article. Written through the real loader (`load_table`, one
//! partition, pages closed at `rows_per_page` rows), so the files, the catalog entry, the
//! crash safety and the replacement of an older table are the loader's, not a copy of them.

use std::path::Path;
use std::sync::Arc;

use arrow::array::{Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema};
use flashscan_storage::load::source::{BatchIter, PartSource};
use flashscan_storage::load::{load_table, LoadOptions, TableSource};
use flashscan_storage::heap::header::PAGE_HEADER_BYTES;
use flashscan_storage::{Database, StorageError, TableMeta, PAGE_SIZE_BYTES};
use rand::seq::SliceRandom;
use rand::SeedableRng;

use crate::error::BenchError;

/// Null bitmap (1) + id (8) + val (8) + one var offset (2).
const ROW_FIXED_BYTES: usize = 19;
const SLOT_BYTES: usize = 2;
pub const ROWS_PER_PAGE_MAX: usize = (PAGE_SIZE_BYTES - PAGE_HEADER_BYTES) / (ROW_FIXED_BYTES + SLOT_BYTES);
/// Rows per Arrow batch handed to the loader: large enough to amortize the batch, small
/// enough that a million-row table never sits in memory twice.
const BATCH_ROWS: usize = 65_536;

#[derive(Debug, Clone)]
pub struct SynthSpec {
    pub name: String,
    pub rows_per_page: usize,
    pub row_count: u64,
    /// Shuffle ids over rows (seeded), so neighbouring keys live on unrelated pages.
    pub shuffle_seed: Option<u64>,
}

impl SynthSpec {
    /// What the catalog records as the table's source: a later run reuses a table whose
    /// source and row count match.
    pub fn description(&self) -> String {
        format!("synthetic rows_per_page={} rows={}", self.rows_per_page, self.row_count)
    }
}

/// Filler bytes that make `rows_per_page` rows (and their slots) fit one page.
pub fn filler_bytes(rows_per_page: usize) -> usize {
    (PAGE_SIZE_BYTES - PAGE_HEADER_BYTES) / rows_per_page - ROW_FIXED_BYTES - SLOT_BYTES
}

fn schema() -> Arc<Schema> {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("val", DataType::Int64, false),
        Field::new("filler", DataType::Utf8, false),
    ]))
}

/// Writes the table into database `dir` (created if needed), replacing a table of the
/// same name. Returns its catalog entry.
pub fn write_table(dir: &Path, spec: &SynthSpec) -> Result<TableMeta, BenchError> {
    if spec.rows_per_page == 0 || spec.rows_per_page > ROWS_PER_PAGE_MAX {
        return Err(BenchError::InvalidOption(format!("rows per page {} out of range 1..={ROWS_PER_PAGE_MAX}", spec.rows_per_page)));
    }
    let mut ids: Vec<i64> = (0..spec.row_count as i64).collect();
    if let Some(seed) = spec.shuffle_seed {
        ids.shuffle(&mut rand::rngs::SmallRng::seed_from_u64(seed));
    }
    let filler = "x".repeat(filler_bytes(spec.rows_per_page));
    let schema = schema();
    let batch_schema = schema.clone();
    let batches: BatchIter = Box::new((0..ids.len()).step_by(BATCH_ROWS).map(move |start| {
        let chunk = &ids[start..(start + BATCH_ROWS).min(ids.len())];
        let id = Int64Array::from(chunk.to_vec());
        let val = Int64Array::from_iter_values(chunk.iter().map(|id| id % 1000));
        let filler = StringArray::from_iter_values(std::iter::repeat_n(filler.as_str(), chunk.len()));
        RecordBatch::try_new(batch_schema.clone(), vec![Arc::new(id), Arc::new(val), Arc::new(filler)]).map_err(|e| StorageError::InvalidArgument(format!("synthetic batch: {e}")))
    }));
    let part: PartSource = Box::new(move || Ok(batches));
    let source = TableSource {
        name: spec.name.clone(),
        schema,
        parts: vec![part],
        description: spec.description(),
        rows_estimate: spec.row_count,
    };
    // One partition and one encoder keep the rows in the order given (the shuffle is the
    // layout the lookups measure); every page is closed at exactly `rows_per_page` rows.
    let options = LoadOptions {
        partition_count: 1,
        partition_by: Some("id".into()),
        threads: 1,
        replace: true,
        rows_per_page_max: Some(spec.rows_per_page),
        ..LoadOptions::default()
    };
    load_table(dir, source, &options)?;
    Ok(Database::open(dir)?.table(&spec.name)?.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filler_gives_exact_rows_per_page() {
        for n in [1usize, 2, 5, 10, 20, 40, 80, 158, 323, ROWS_PER_PAGE_MAX] {
            let row = ROW_FIXED_BYTES + filler_bytes(n);
            assert!(n * (row + SLOT_BYTES) <= PAGE_SIZE_BYTES - PAGE_HEADER_BYTES, "{n} rows do not fit");
        }
    }

    #[test]
    fn every_page_holds_exactly_rows_per_page() {
        let dir = tempfile::tempdir().unwrap();
        for (rows_per_page, row_count) in [(1usize, 50u64), (20, 1000), (323, 323 * 3 + 7)] {
            let spec = SynthSpec { name: format!("t{rows_per_page}"), rows_per_page, row_count, shuffle_seed: Some(1) };
            let table = write_table(dir.path(), &spec).unwrap();
            assert_eq!(table.row_count, row_count);
            assert_eq!(table.source, spec.description());
            assert_eq!(table.partitions.len(), 1);
            assert_eq!(table.partitions[0].page_count, row_count.div_ceil(rows_per_page as u64));
        }
        // Replacing keeps one table of that name, with the new shape.
        let spec = SynthSpec { name: "t20".into(), rows_per_page: 10, row_count: 100, shuffle_seed: None };
        let table = write_table(dir.path(), &spec).unwrap();
        assert_eq!(table.partitions[0].page_count, 10);
        assert_eq!(Database::open(dir.path()).unwrap().table("t20").unwrap().row_count, 100);
    }
}
