//! CSV files with a header line; column types inferred by arrow-csv from the first rows.

use std::fs::File;
use std::io::{BufReader, Seek};
use std::path::Path;
use std::sync::Arc;

use arrow::csv::reader::Format;
use arrow::csv::ReaderBuilder;
use arrow::datatypes::{DataType, Field, Schema};

use super::source::{BatchIter, PartSource, TableSource};
use crate::error::StorageError;

const CSV_BATCH_ROWS: usize = 8192;
/// Rows read to infer column types.
const CSV_INFER_ROWS: usize = 10_000;

pub fn csv_source(path: &Path, table_name: &str) -> Result<TableSource, StorageError> {
    let mut f = File::open(path).map_err(|e| StorageError::io("opening", path, e))?;
    let format = Format::default().with_header(true);
    let (schema, _) = format.infer_schema(BufReader::new(&mut f), Some(CSV_INFER_ROWS)).map_err(|e| StorageError::Arrow { path: path.to_path_buf(), source: e })?;
    if schema.fields().is_empty() {
        return Err(StorageError::InvalidArgument(format!("{} has no columns (a CSV file needs a header line)", path.display())));
    }
    // Timestamps (and anything else flashscan does not store) load as text.
    let fields: Vec<Field> = schema
        .fields()
        .iter()
        .map(|fl| match fl.data_type() {
            DataType::Timestamp(..) | DataType::Time32(..) | DataType::Time64(..) | DataType::Date64 => Field::new(fl.name(), DataType::Utf8, true),
            _ => fl.as_ref().clone().with_nullable(true),
        })
        .collect();
    let schema = Arc::new(Schema::new(fields));
    f.rewind().map_err(|e| StorageError::io("reading", path, e))?;
    let path_buf = path.to_path_buf();
    let reader_schema = schema.clone();
    let part: PartSource = Box::new(move || {
        let reader = ReaderBuilder::new(reader_schema)
            .with_format(format)
            .with_batch_size(CSV_BATCH_ROWS)
            .build(BufReader::with_capacity(1 << 20, f))
            .map_err(|e| StorageError::Arrow { path: path_buf.clone(), source: e })?;
        let it: BatchIter = Box::new(reader.map(move |r| r.map_err(|e| StorageError::Arrow { path: path_buf.clone(), source: e })));
        Ok(it)
    });
    let rows_estimate = std::fs::metadata(path).map(|m| m.len() / 64).unwrap_or(0);
    Ok(TableSource { name: table_name.to_string(), schema, parts: vec![part], description: path.display().to_string(), rows_estimate })
}
