//! CSV files: column types inferred by arrow-csv from the whole file (not a sample: a
//! column empty for its first 20,000 rows still gets the type of its later values), or
//! declared with `--schema name:type,...`; delimiter, quote, header and NULL string as the
//! user's file needs them. Errors name the file, the line and the column.

use std::fs::File;
use std::io::{BufReader, Seek};
use std::path::Path;
use std::sync::Arc;

use arrow::csv::reader::Format;
use arrow::csv::ReaderBuilder;
use arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use arrow::error::ArrowError;

use super::source::{BatchIter, PartSource, TableSource};
use crate::column::{TIMESTAMP_TIME_ZONE, WIDE_DECIMAL_PRECISION_MAX};
use crate::error::StorageError;

const CSV_BATCH_ROWS: usize = 8192;
/// Bytes of a `--null` string: a marker, not data.
const NULL_STRING_BYTES_MAX: usize = 64;

/// How to read a CSV file (`flashscan load --csv` flags).
#[derive(Debug, Clone)]
pub struct CsvOptions {
    pub delimiter: u8,
    pub quote: u8,
    /// The first line names the columns; without it they are column_1, column_2, ...
    pub has_header: bool,
    /// A value that means NULL besides the empty field (`NA`, `\N`, `NULL`).
    pub null_string: Option<String>,
    /// `name:type,...`: types for the columns named (the others are inferred).
    pub schema: Option<String>,
}

impl Default for CsvOptions {
    fn default() -> Self {
        CsvOptions { delimiter: b',', quote: b'"', has_header: true, null_string: None, schema: None }
    }
}

impl CsvOptions {
    fn format(&self) -> Result<Format, StorageError> {
        let mut format = Format::default().with_header(self.has_header).with_delimiter(self.delimiter).with_quote(self.quote);
        if let Some(null) = &self.null_string {
            if null.len() > NULL_STRING_BYTES_MAX || null.contains(['\n', '\r']) {
                return Err(StorageError::InvalidArgument(format!("--null {null:?}: use a short marker on one line, like NA or \\N")));
            }
            // The empty field stays NULL too: numbers and dates have no other reading of it.
            let pattern = format!("^(|{})$", regex::escape(null));
            let regex = regex::Regex::new(&pattern).map_err(|e| StorageError::InvalidArgument(format!("--null {null:?}: {e}")))?;
            format = format.with_null_regex(regex);
        }
        Ok(format)
    }
}

/// One-byte CSV option (`--delimiter`, `--quote`): a single ASCII character, or `tab`.
pub fn parse_csv_byte(flag: &str, text: &str) -> Result<u8, StorageError> {
    let byte = match text {
        "tab" | "\\t" => b'\t',
        s if s.len() == 1 && s.is_ascii() && s != "\n" && s != "\r" => s.as_bytes()[0],
        _ => return Err(StorageError::InvalidArgument(format!("{flag} {text:?}: give one ASCII character (or tab)"))),
    };
    Ok(byte)
}

/// Parses `--schema`: `name:type` pairs separated by commas (commas inside parentheses,
/// as in decimal(12,2), belong to the type). Types: int/integer/int32, bigint/int64,
/// ubigint/uint64, double/float/float64/real, decimal(p,s)/numeric(p,s), date, timestamp,
/// timestamptz, time, text/varchar/string/utf8, boolean/bool.
pub fn parse_schema_spec(spec: &str) -> Result<Vec<(String, DataType)>, StorageError> {
    let bad = |what: String| StorageError::InvalidArgument(format!("--schema {spec:?}: {what}; write name:type,... (types: int, bigint, ubigint, double, decimal(p,s), date, timestamp, timestamptz, time, text, boolean)"));
    let mut entries = Vec::new();
    let (mut depth, mut start) = (0i32, 0usize);
    let mut pieces = Vec::new();
    for (i, ch) in spec.char_indices() {
        match ch {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                pieces.push(&spec[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    pieces.push(&spec[start..]);
    for piece in pieces {
        let Some((name, type_text)) = piece.split_once(':') else { return Err(bad(format!("{:?} has no ':type'", piece.trim()))) };
        let name = name.trim();
        if name.is_empty() {
            return Err(bad("a column without a name".into()));
        }
        let t = type_text.trim().to_ascii_lowercase();
        let data_type = match t.as_str() {
            "int" | "integer" | "int32" => DataType::Int32,
            "bigint" | "int64" | "long" => DataType::Int64,
            "ubigint" | "uint64" => DataType::UInt64,
            "double" | "float" | "float64" | "real" => DataType::Float64,
            "date" => DataType::Date32,
            "timestamp" => DataType::Timestamp(TimeUnit::Microsecond, None),
            "timestamptz" | "timestamp with time zone" => DataType::Timestamp(TimeUnit::Microsecond, Some(TIMESTAMP_TIME_ZONE.into())),
            "time" => DataType::Time64(TimeUnit::Microsecond),
            "text" | "varchar" | "string" | "utf8" => DataType::Utf8,
            "boolean" | "bool" => DataType::Boolean,
            other => {
                let inner = other.strip_prefix("decimal(").or_else(|| other.strip_prefix("numeric(")).and_then(|s| s.strip_suffix(')'));
                let Some((p, s)) = inner.and_then(|i| i.split_once(',')) else { return Err(bad(format!("unknown type {other:?} for {name:?}"))) };
                let (Ok(p), Ok(s)) = (p.trim().parse::<u8>(), s.trim().parse::<i8>()) else { return Err(bad(format!("bad decimal {other:?} for {name:?}"))) };
                if p == 0 || p > WIDE_DECIMAL_PRECISION_MAX || s < 0 || s as u8 > p {
                    return Err(bad(format!("decimal({p},{s}) for {name:?}: precision 1 to {WIDE_DECIMAL_PRECISION_MAX}, scale 0 to the precision")));
                }
                DataType::Decimal128(p, s)
            }
        };
        if entries.iter().any(|(n, _): &(String, DataType)| n.eq_ignore_ascii_case(name)) {
            return Err(bad(format!("{name:?} twice")));
        }
        entries.push((name.to_string(), data_type));
    }
    Ok(entries)
}

/// The schema to read `path` with: inferred over every row (unless every column is
/// declared), declared types applied, all-empty columns as nullable text.
fn schema_of(path: &Path, file: &mut File, options: &CsvOptions, format: &Format) -> Result<SchemaRef, StorageError> {
    let declared = options.schema.as_deref().map(parse_schema_spec).transpose()?.unwrap_or_default();
    // The header alone (0 records) names the columns; inference reads the whole file.
    let (header, _) = format.infer_schema(BufReader::new(&mut *file), Some(0)).map_err(|e| csv_error(path, e, None))?;
    file.rewind().map_err(|e| StorageError::io("reading", path, e))?;
    let all_declared = !header.fields().is_empty() && header.fields().iter().all(|f| declared.iter().any(|(n, _)| n.eq_ignore_ascii_case(f.name())));
    let inferred = if all_declared {
        header
    } else {
        let (s, _) = format.infer_schema(BufReader::with_capacity(1 << 20, &mut *file), None).map_err(|e| csv_error(path, e, None))?;
        file.rewind().map_err(|e| StorageError::io("reading", path, e))?;
        s
    };
    if inferred.fields().is_empty() {
        return Err(StorageError::InvalidArgument(format!("{} has no columns (a CSV file needs at least one field per line)", path.display())));
    }
    for (name, _) in &declared {
        if !inferred.fields().iter().any(|f| f.name().eq_ignore_ascii_case(name)) {
            let known: Vec<&str> = inferred.fields().iter().map(|f| f.name().as_str()).collect();
            return Err(StorageError::InvalidArgument(format!("--schema names {name:?}, which {} does not have; its columns: {}", path.display(), known.join(", "))));
        }
    }
    let fields: Vec<Field> = inferred
        .fields()
        .iter()
        .map(|fl| {
            let data_type = match declared.iter().find(|(n, _)| n.eq_ignore_ascii_case(fl.name())) {
                Some((_, t)) => t.clone(),
                // Empty in every row: nothing says what it holds; text keeps whatever comes later.
                None if fl.data_type() == &DataType::Null => DataType::Utf8,
                None => fl.data_type().clone(),
            };
            Field::new(fl.name(), data_type, true)
        })
        .collect();
    Ok(Arc::new(Schema::new(fields)))
}

/// An arrow-csv error with the file, and the column's name where arrow gives its index.
/// arrow-csv counts a value's line from 0 (the header is line 0); editors count from 1.
fn csv_error(path: &Path, error: ArrowError, schema: Option<&Schema>) -> StorageError {
    let mut message = error.to_string();
    if let Some(at) = message.find("for column ").and_then(|c| message[c..].find(" at line ").map(|l| c + l + " at line ".len())) {
        let digits: String = message[at..].chars().take_while(|c| c.is_ascii_digit()).collect();
        if let Ok(line) = digits.parse::<u64>() {
            message.replace_range(at..at + digits.len(), &(line + 1).to_string());
        }
    }
    let column_name = schema.and_then(|schema| {
        let at = message.find("for column ")? + "for column ".len();
        let digits: String = message[at..].chars().take_while(|c| c.is_ascii_digit()).collect();
        let index: usize = digits.parse().ok()?;
        Some(format!(" (column {index} counting from 0 is {:?}; declare its type with --schema or fix the value)", schema.fields().get(index)?.name()))
    });
    StorageError::Csv { path: path.to_path_buf(), message: format!("{message}{}", column_name.unwrap_or_default()) }
}

pub fn csv_source(path: &Path, table_name: &str) -> Result<TableSource, StorageError> {
    csv_source_with(path, table_name, &CsvOptions::default())
}

pub fn csv_source_with(path: &Path, table_name: &str, options: &CsvOptions) -> Result<TableSource, StorageError> {
    let mut f = File::open(path).map_err(|e| StorageError::io("opening", path, e))?;
    let format = options.format()?;
    let schema = schema_of(path, &mut f, options, &format)?;
    let path_buf = path.to_path_buf();
    let reader_schema = schema.clone();
    let part: PartSource = Box::new(move || {
        let reader = ReaderBuilder::new(reader_schema.clone())
            .with_format(format)
            .with_batch_size(CSV_BATCH_ROWS)
            .build(BufReader::with_capacity(1 << 20, f))
            .map_err(|e| csv_error(&path_buf, e, None))?;
        let it: BatchIter = Box::new(reader.map(move |r| r.map_err(|e| csv_error(&path_buf, e, Some(&reader_schema)))));
        Ok(it)
    });
    let rows_estimate = std::fs::metadata(path).map(|m| m.len() / 64).unwrap_or(0);
    Ok(TableSource { name: table_name.to_string(), schema, parts: vec![part], description: path.display().to_string(), rows_estimate })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schema_specs_parse_with_decimal_commas() {
        let s = parse_schema_spec("id:bigint, price:decimal(12,2),at:timestamptz,t:time,n:text").unwrap_or_default();
        assert_eq!(s.len(), 5);
        assert_eq!(s[1], ("price".to_string(), DataType::Decimal128(12, 2)));
        assert_eq!(s[2].1, DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())));
        for bad in ["id", "id:blob", "id:int,id:int", ":int", "d:decimal(40,2)", "d:decimal(5,6)"] {
            let e = parse_schema_spec(bad).err().map(|e| e.to_string()).unwrap_or_default();
            assert!(e.contains("--schema"), "{bad}: {e}");
        }
    }

    #[test]
    fn csv_bytes_are_single_ascii_characters() {
        assert_eq!(parse_csv_byte("--delimiter", "tab").ok(), Some(b'\t'));
        assert_eq!(parse_csv_byte("--delimiter", ";").ok(), Some(b';'));
        assert!(parse_csv_byte("--delimiter", ";;").is_err());
        assert!(parse_csv_byte("--quote", "é").is_err());
    }
}
