//! `COPY t FROM 'file.parquet' | 'file.csv' [WITH (FORMAT csv|parquet, HEADER b,
//! DELIMITER 'c', QUOTE 'c', NULL 's')]`: a file's rows into a flashscan table through the
//! write path — one transaction (every row logged, one durable commit) or, inside
//! `BEGIN … COMMIT`, part of the open one.
//!
//! The file is read with the loader's own readers (`flashscan_storage::load::{csv,
//! parquet}`: CSV types inferred from the whole file, the same options as `flashscan load
//! --csv`), never a second parser. The file's columns map to the table's in order; each is
//! cast to the column's type (a value that does not convert is an error naming the column),
//! and the write path checks NOT NULL, ranges and row sizes. Every row is read and checked
//! before anything is logged, so a wrong file, a wrong column count or a bad value leaves
//! nothing behind. The rows are held in memory until their commit (as INSERT … SELECT).

use std::path::{Path, PathBuf};

use arrow::array::ArrayRef;
use arrow::compute::{can_cast_types, cast_with_options, CastOptions};
use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;
use datafusion::sql::sqlparser::ast::{CopyLegacyCsvOption, CopyLegacyOption, CopyOption};
use flashscan_storage::load::csv::{csv_source_with, CsvOptions};
use flashscan_storage::load::parquet::parquet_source;
use flashscan_storage::load::TableSource;
use flashscan_storage::TableMeta;

use crate::error::SqlError;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CopyFormat {
    Csv,
    Parquet,
}

/// What `COPY … FROM` was given, checked.
#[derive(Debug, Clone)]
pub struct CopyFromSpec {
    pub path: PathBuf,
    pub format: CopyFormat,
    pub csv: CsvOptions,
}

fn bad(message: String) -> SqlError {
    SqlError::InvalidArgument(message)
}

fn one_byte(what: &str, c: char) -> Result<u8, SqlError> {
    if c.is_ascii() {
        Ok(c as u8)
    } else {
        Err(bad(format!("COPY FROM {what} {c:?}: use one ASCII character")))
    }
}

impl CopyFromSpec {
    /// From the parsed statement's file name and options. The format comes from `FORMAT`
    /// or else the file's extension.
    pub fn new(filename: &str, options: &[CopyOption], legacy: &[CopyLegacyOption]) -> Result<CopyFromSpec, SqlError> {
        if filename.contains("://") {
            return Err(bad(format!("COPY FROM {filename:?}: give a local file path")));
        }
        let path = PathBuf::from(filename);
        let mut format = match path.extension().and_then(|e| e.to_str()).map(|e| e.to_ascii_lowercase()).as_deref() {
            Some("parquet") => Some(CopyFormat::Parquet),
            Some("csv") | Some("tsv") | Some("txt") => Some(CopyFormat::Csv),
            _ => None,
        };
        let mut csv = CsvOptions::default();
        let mut csv_option_given = false;
        for o in options {
            match o {
                CopyOption::Format(name) => {
                    format = Some(match name.value.to_ascii_lowercase().as_str() {
                        "csv" => CopyFormat::Csv,
                        "parquet" => CopyFormat::Parquet,
                        other => return Err(bad(format!("COPY FROM … FORMAT {other}: use csv or parquet"))),
                    })
                }
                CopyOption::Header(h) => {
                    csv.has_header = *h;
                    csv_option_given = true;
                }
                CopyOption::Delimiter(c) => {
                    csv.delimiter = one_byte("DELIMITER", *c)?;
                    csv_option_given = true;
                }
                CopyOption::Quote(c) => {
                    csv.quote = one_byte("QUOTE", *c)?;
                    csv_option_given = true;
                }
                CopyOption::Null(s) => {
                    csv.null_string = Some(s.clone());
                    csv_option_given = true;
                }
                other => return Err(bad(format!("COPY FROM option {other} is not supported: the options are FORMAT, HEADER, DELIMITER, QUOTE and NULL"))),
            }
        }
        for o in legacy {
            match o {
                CopyLegacyOption::Csv(csv_options) => {
                    format = Some(CopyFormat::Csv);
                    for c in csv_options {
                        match c {
                            CopyLegacyCsvOption::Header => csv.has_header = true,
                            CopyLegacyCsvOption::Quote(q) => csv.quote = one_byte("QUOTE", *q)?,
                            other => return Err(bad(format!("COPY FROM CSV option {other} is not supported: use HEADER, QUOTE, DELIMITER, NULL"))),
                        }
                    }
                }
                CopyLegacyOption::Delimiter(c) => {
                    csv.delimiter = one_byte("DELIMITER", *c)?;
                    csv_option_given = true;
                }
                CopyLegacyOption::Header => {
                    csv.has_header = true;
                    csv_option_given = true;
                }
                CopyLegacyOption::Parquet => format = Some(CopyFormat::Parquet),
                CopyLegacyOption::Null(s) => {
                    csv.null_string = Some(s.clone());
                    csv_option_given = true;
                }
                other => return Err(bad(format!("COPY FROM option {other} is not supported: the options are FORMAT, HEADER, DELIMITER, QUOTE and NULL"))),
            }
        }
        let Some(format) = format else {
            return Err(bad(format!("COPY FROM {filename:?}: name a .csv or .parquet file, or say WITH (FORMAT csv) or WITH (FORMAT parquet)")));
        };
        if format == CopyFormat::Parquet && csv_option_given {
            return Err(bad(format!("COPY FROM {filename:?}: HEADER, DELIMITER, QUOTE and NULL are CSV options; this file is Parquet")));
        }
        Ok(CopyFromSpec { path, format, csv })
    }
}

fn describe(schema: &SchemaRef) -> String {
    schema.fields().iter().map(|f| format!("{} {}", f.name(), f.data_type())).collect::<Vec<_>>().join(", ")
}

/// Reads the whole file and returns its rows as batches of the table's column types.
pub fn read_for_table(spec: &CopyFromSpec, table: &TableMeta) -> Result<Vec<RecordBatch>, SqlError> {
    let path: &Path = &spec.path;
    match std::fs::metadata(path) {
        Ok(m) if m.is_file() => {}
        Ok(_) => return Err(bad(format!("COPY FROM {}: not a file; give a CSV or Parquet file", path.display()))),
        Err(e) => return Err(bad(format!("COPY FROM {}: {e}; give an existing CSV or Parquet file", path.display()))),
    }
    let source: TableSource = match spec.format {
        CopyFormat::Csv => csv_source_with(path, &table.name, &spec.csv)?,
        CopyFormat::Parquet => parquet_source(path, &table.name, 1)?,
    };
    let file_schema = source.schema.clone();
    if file_schema.fields().len() != table.columns.len() {
        return Err(bad(format!(
            "COPY {} FROM {}: the file has {} columns ({}), the table {} ({}); columns map in order",
            table.name,
            path.display(),
            file_schema.fields().len(),
            describe(&file_schema),
            table.columns.len(),
            table.columns.iter().map(|c| c.name.as_str()).collect::<Vec<_>>().join(", ")
        )));
    }
    let targets: Vec<_> = table.columns.iter().map(|c| c.column_type.arrow_type()).collect();
    for (i, (f, t)) in file_schema.fields().iter().zip(&targets).enumerate() {
        if !can_cast_types(f.data_type(), t) {
            return Err(bad(format!(
                "COPY {} FROM {}: column {} ({} in the file) cannot become {} ({t})",
                table.name,
                path.display(),
                i + 1,
                f.name(),
                table.columns[i].name
            )));
        }
    }
    // A value that does not convert is an error, never a NULL.
    let cast_options = CastOptions { safe: false, ..CastOptions::default() };
    let mut out = Vec::new();
    for part in source.parts {
        for batch in part()? {
            let batch = batch?;
            let columns = batch
                .columns()
                .iter()
                .zip(&targets)
                .enumerate()
                .map(|(i, (a, t))| {
                    if a.data_type() == t {
                        return Ok(a.clone());
                    }
                    cast_with_options(a, t, &cast_options).map_err(|e| {
                        bad(format!("COPY {} FROM {}: column {} ({}): {e}; nothing was written", table.name, path.display(), i + 1, table.columns[i].name))
                    })
                })
                .collect::<Result<Vec<ArrayRef>, SqlError>>()?;
            let schema = std::sync::Arc::new(arrow::datatypes::Schema::new(
                table.columns.iter().zip(&targets).map(|(c, t)| arrow::datatypes::Field::new(&c.name, t.clone(), true)).collect::<Vec<_>>(),
            ));
            out.push(RecordBatch::try_new(schema, columns).map_err(|e| SqlError::Internal(e.to_string()))?);
        }
    }
    Ok(out)
}
