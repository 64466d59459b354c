//! Parquet files: row groups are split over parts so large files decode in parallel.

use std::fs::File;
use std::path::Path;

use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

use super::source::{BatchIter, PartSource, TableSource};
use crate::error::StorageError;

const PARQUET_BATCH_ROWS: usize = 8192;

pub fn parquet_source(path: &Path, table_name: &str, threads: usize) -> Result<TableSource, StorageError> {
    let open = |path: &Path| -> Result<ParquetRecordBatchReaderBuilder<File>, StorageError> {
        let f = File::open(path).map_err(|e| StorageError::io("opening", path, e))?;
        ParquetRecordBatchReaderBuilder::try_new(f).map_err(|e| StorageError::Parquet { path: path.to_path_buf(), source: e })
    };
    let builder = open(path)?;
    let schema = builder.schema().clone();
    let row_groups = builder.metadata().num_row_groups();
    let rows_estimate = builder.metadata().file_metadata().num_rows().max(0) as u64;
    let part_count = row_groups.clamp(1, threads.max(1) * 2);
    let mut parts: Vec<PartSource> = Vec::new();
    for part in 0..part_count {
        let groups: Vec<usize> = (0..row_groups).filter(|g| g % part_count == part).collect();
        if groups.is_empty() && part > 0 {
            continue;
        }
        let path = path.to_path_buf();
        parts.push(Box::new(move || {
            let reader = open(&path)?
                .with_row_groups(groups)
                .with_batch_size(PARQUET_BATCH_ROWS)
                .build()
                .map_err(|e| StorageError::Parquet { path: path.clone(), source: e })?;
            let it: BatchIter = Box::new(reader.map(move |r| r.map_err(|e| StorageError::Arrow { path: path.clone(), source: e })));
            Ok(it)
        }));
    }
    Ok(TableSource { name: table_name.to_string(), schema, parts, description: path.display().to_string(), rows_estimate })
}
