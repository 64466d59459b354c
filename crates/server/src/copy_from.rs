//! `COPY table [(columns)] FROM STDIN`: the client's lines, in PostgreSQL's text or CSV
//! format, become Arrow batches of the table's types, checked line by line so a bad
//! line is a one-line error naming it (`COPY t, line 3, column a: …`). The batches then
//! go to the write path as one statement: all rows or none.
//!
//! The parsers are written here rather than taken from the `csv` crate: PostgreSQL's CSV
//! tells NULL (an unquoted empty field) from the empty string (a quoted one), which the
//! `csv` crate's records do not say, and the text format's backslash escapes and `\N`
//! are PostgreSQL's own.

use std::sync::Arc;

use arrow::array::{new_null_array, Array, ArrayRef, RecordBatch, StringArray};
use arrow::compute::{cast_with_options, CastOptions};
use arrow::datatypes::{DataType, SchemaRef};

use crate::psql_catalog::pg_type_name;
use crate::statement::CopyFromOptions;

/// COPY data one statement may send: it is held in memory until the end of the copy (all
/// or nothing); more must be split into several COPYs.
pub const COPY_BYTES_MAX: usize = 256 << 20;
/// Rows per Arrow batch handed to the write path.
const BATCH_ROWS: usize = 8192;

/// A line that does not fit the table, or a format error: already one line, with the
/// line number as PostgreSQL counts it (the header is line 1 when there is one).
#[derive(Debug, Clone, PartialEq)]
pub struct CopyError {
    pub code: &'static str,
    pub message: String,
}

fn bad(table: &str, line: usize, what: String) -> CopyError {
    CopyError { code: crate::error::sqlstate::BAD_COPY_FORMAT, message: format!("COPY {table}, line {line}: {what}") }
}

/// A parsed line: its number and its fields (`None` = NULL).
type Line = (usize, Vec<Option<String>>);

/// Splits the data into records, honouring CSV quotes (a quoted field may hold newlines).
fn records(data: &str, csv: bool) -> Vec<(usize, &str)> {
    let mut out = Vec::new();
    let bytes = data.as_bytes();
    let (mut start, mut line_no, mut record_line) = (0usize, 1usize, 1usize);
    let mut in_quotes = false;
    for (i, &b) in bytes.iter().enumerate() {
        if csv && b == b'"' {
            in_quotes = !in_quotes;
        } else if b == b'\n' {
            if !in_quotes {
                let mut rec = &data[start..i];
                if let Some(r) = rec.strip_suffix('\r') {
                    rec = r;
                }
                out.push((record_line, rec));
                start = i + 1;
                record_line = line_no + 1;
            }
            line_no += 1;
        }
    }
    if start < data.len() {
        let rec = &data[start..];
        out.push((record_line, rec.strip_suffix('\r').unwrap_or(rec)));
    }
    out
}

/// The digits of a numeric escape (`\xHH`, `\OOO`): up to `most` more digits of `radix`
/// after what was read (`first`), each also kept in `raw`; the value and how many digits
/// this read.
fn escape_digits(chars: &mut std::iter::Peekable<std::str::Chars>, raw: &mut String, radix: u32, first: u32, most: usize) -> (u32, usize) {
    let mut n = first;
    let mut digits = 0;
    while digits < most {
        let Some(d) = chars.peek().and_then(|c| c.to_digit(radix)) else { break };
        n = n * radix + d;
        raw.push(chars.next().unwrap_or('0'));
        digits += 1;
    }
    (n, digits)
}

/// PostgreSQL's text format: fields split at the delimiter, `\N` (or the NULL string) for
/// NULL, backslash escapes decoded.
fn text_fields(record: &str, delimiter: char, null: &str) -> Result<Vec<Option<String>>, String> {
    let mut fields = Vec::new();
    let mut raw = String::new();
    let mut value = String::new();
    let mut chars = record.chars().peekable();
    let finish = |raw: &mut String, value: &mut String, fields: &mut Vec<Option<String>>| {
        fields.push(if raw == null { None } else { Some(std::mem::take(value)) });
        raw.clear();
        value.clear();
    };
    while let Some(c) = chars.next() {
        if c == delimiter {
            finish(&mut raw, &mut value, &mut fields);
            continue;
        }
        raw.push(c);
        if c != '\\' {
            value.push(c);
            continue;
        }
        let Some(e) = chars.next() else { return Err("the line ends in a lone backslash".into()) };
        raw.push(e);
        match e {
            'b' => value.push('\u{8}'),
            'f' => value.push('\u{c}'),
            'n' => value.push('\n'),
            'r' => value.push('\r'),
            't' => value.push('\t'),
            'v' => value.push('\u{b}'),
            'x' => {
                let (n, digits) = escape_digits(&mut chars, &mut raw, 16, 0, 2);
                if digits == 0 {
                    value.push('x');
                } else {
                    value.push(char::from_u32(n).ok_or_else(|| format!("\\x{n:x} is not a character"))?);
                }
            }
            '0'..='7' => {
                let (n, _) = escape_digits(&mut chars, &mut raw, 8, e.to_digit(8).unwrap_or(0), 2);
                value.push(char::from_u32(n).ok_or_else(|| format!("octal escape {n:o} is not a character"))?);
            }
            other => value.push(other),
        }
    }
    finish(&mut raw, &mut value, &mut fields);
    Ok(fields)
}

/// PostgreSQL's CSV: `"` quotes, `""` inside quotes is a quote; an unquoted field equal
/// to the NULL string (empty by default) is NULL, a quoted one never is.
fn csv_fields(record: &str, delimiter: char, null: &str) -> Result<Vec<Option<String>>, String> {
    let mut fields = Vec::new();
    let mut value = String::new();
    let mut quoted = false;
    let mut in_quotes = false;
    let mut chars = record.chars().peekable();
    while let Some(c) = chars.next() {
        if in_quotes {
            if c == '"' {
                if chars.peek() == Some(&'"') {
                    chars.next();
                    value.push('"');
                } else {
                    in_quotes = false;
                }
            } else {
                value.push(c);
            }
        } else if c == '"' {
            in_quotes = true;
            quoted = true;
        } else if c == delimiter {
            fields.push(if !quoted && value == null { None } else { Some(std::mem::take(&mut value)) });
            value.clear();
            quoted = false;
        } else {
            value.push(c);
        }
    }
    if in_quotes {
        return Err("unterminated CSV quoted field".into());
    }
    fields.push(if !quoted && value == null { None } else { Some(value) });
    Ok(fields)
}

/// Parses the whole COPY data into lines of fields.
pub fn parse_lines(data: &[u8], options: &CopyFromOptions) -> Result<Vec<Line>, CopyError> {
    let table = &options.table;
    let text = std::str::from_utf8(data).map_err(|e| {
        let line = data[..e.valid_up_to()].iter().filter(|&&b| b == b'\n').count() + 1;
        bad(table, line, "invalid UTF-8 (flashscan takes UTF-8 only)".into())
    })?;
    let delimiter_text = options.delimiter.clone().unwrap_or_else(|| if options.csv { ",".into() } else { "\t".into() });
    let mut dchars = delimiter_text.chars();
    let delimiter = match (dchars.next(), dchars.next()) {
        (Some(d), None) if d != '\n' && d != '\r' && d != '\\' => d,
        _ => return Err(CopyError { code: crate::error::sqlstate::INVALID_PARAMETER_VALUE, message: format!("COPY delimiter {delimiter_text:?}: use one character (not a newline or backslash)") }),
    };
    let null = options.null.clone().unwrap_or_else(|| if options.csv { String::new() } else { "\\N".into() });
    let mut out = Vec::new();
    for (i, (line, record)) in records(text, options.csv).into_iter().enumerate() {
        if i == 0 && options.header {
            continue;
        }
        // The end-of-data marker of the old protocol; psql may still send it.
        if record == "\\." {
            break;
        }
        let fields = if options.csv { csv_fields(record, delimiter, &null) } else { text_fields(record, delimiter, &null) };
        out.push((line, fields.map_err(|what| bad(table, line, what))?));
    }
    Ok(out)
}

/// The table's columns the lines fill, in line order (indexes into the schema).
pub fn target_columns(schema: &SchemaRef, options: &CopyFromOptions) -> Result<Vec<usize>, CopyError> {
    if options.columns.is_empty() {
        return Ok((0..schema.fields().len()).collect());
    }
    let mut out: Vec<usize> = Vec::new();
    for name in &options.columns {
        let i = schema.fields().iter().position(|f| f.name().eq_ignore_ascii_case(name)).ok_or_else(|| CopyError {
            code: crate::error::sqlstate::UNDEFINED_COLUMN,
            message: format!("column {name:?} of table {} does not exist", options.table),
        })?;
        if out.contains(&i) {
            return Err(CopyError { code: crate::error::sqlstate::SYNTAX_ERROR, message: format!("column {name:?} specified more than once") });
        }
        out.push(i);
    }
    Ok(out)
}

/// The lines as batches of the table's schema: each value converted to its column's type
/// (the first that does not convert names its line and column), NOT NULL checked,
/// columns not listed NULL.
pub fn to_batches(lines: &[Line], schema: &SchemaRef, targets: &[usize], table: &str) -> Result<Vec<RecordBatch>, CopyError> {
    for (line, fields) in lines {
        if fields.len() > targets.len() {
            return Err(bad(table, *line, format!("extra data after last expected column ({} fields, {} columns)", fields.len(), targets.len())));
        }
        if fields.len() < targets.len() {
            let missing = schema.field(targets[fields.len()]).name();
            return Err(bad(table, *line, format!("missing data for column {missing:?}")));
        }
    }
    let mut batches = Vec::new();
    for chunk in lines.chunks(BATCH_ROWS) {
        let mut columns: Vec<ArrayRef> = Vec::with_capacity(schema.fields().len());
        for (c, field) in schema.fields().iter().enumerate() {
            let array = match targets.iter().position(|&t| t == c) {
                None => new_null_array(field.data_type(), chunk.len()),
                Some(k) => {
                    let text: StringArray = chunk.iter().map(|(_, f)| f[k].as_deref()).collect();
                    convert(&text, field.data_type()).map_err(|(row, what)| {
                        let (line, fields) = &chunk[row];
                        let value = fields[k].as_deref().unwrap_or("");
                        bad(table, *line, format!("column {}: {what} {:?} for type {}", field.name(), value, pg_type_name(field.data_type())))
                    })?
                }
            };
            if !field.is_nullable() && array.null_count() > 0 {
                let row = (0..array.len()).find(|&r| array.is_null(r)).unwrap_or(0);
                return Err(CopyError {
                    code: crate::error::sqlstate::NOT_NULL_VIOLATION,
                    message: format!("COPY {table}, line {}: null value in column {:?} violates its NOT NULL constraint", chunk[row].0, field.name()),
                });
            }
            columns.push(array);
        }
        let batch = RecordBatch::try_new(schema.clone(), columns).map_err(|e| CopyError { code: crate::error::sqlstate::INTERNAL_ERROR, message: e.to_string() })?;
        batches.push(batch);
    }
    Ok(batches)
}

/// Converts text to `to`; on failure, the row and what went wrong.
fn convert(text: &StringArray, to: &DataType) -> Result<ArrayRef, (usize, &'static str)> {
    if matches!(to, DataType::Utf8) {
        return Ok(Arc::new(text.clone()));
    }
    // PostgreSQL's booleans as text: t/f, true/false, yes/no, on/off, 1/0.
    let normalized;
    let source: &StringArray = if matches!(to, DataType::Boolean) {
        normalized = text
            .iter()
            .map(|v| {
                v.map(|s| match s.trim().to_ascii_lowercase().as_str() {
                    "t" | "true" | "yes" | "y" | "on" | "1" => "true".to_string(),
                    "f" | "false" | "no" | "n" | "off" | "0" => "false".to_string(),
                    other => other.to_string(),
                })
            })
            .collect::<StringArray>();
        &normalized
    } else {
        text
    };
    let safe = CastOptions { safe: true, ..Default::default() };
    let out = cast_with_options(source, to, &safe).map_err(|_| (0, "no conversion from text"))?;
    // A value that did not convert is NULL in the output where the input was not.
    if out.null_count() != source.null_count() {
        if let Some(row) = (0..source.len()).find(|&r| source.is_valid(r) && out.is_null(r)) {
            return Err((row, "invalid input"));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::datatypes::{Field, Schema};

    fn options(csv: bool) -> CopyFromOptions {
        CopyFromOptions { table: "t".into(), columns: vec![], csv, header: false, delimiter: None, null: None }
    }

    #[test]
    fn text_format_decodes_escapes_and_nulls() {
        let lines = parse_lines(b"1\ta\\tb\t\\N\n2\tx\\\\y\\n\t\\101\n\\.\n", &options(false)).expect("parse");
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0], (1, vec![Some("1".into()), Some("a\tb".into()), None]));
        assert_eq!(lines[1], (2, vec![Some("2".into()), Some("x\\y\n".into()), Some("A".into())]));
    }

    /// Numeric escapes as PostgreSQL reads them: `\xH` or `\xHH` (a lone `\x` is `x`),
    /// `\O` to `\OOO` (a fourth digit is text).
    #[test]
    fn text_format_decodes_hex_and_octal_escapes() {
        let lines = parse_lines(b"\\x41\t\\x4z\t\\xg\t\\1\t\\1018\n", &options(false)).expect("parse");
        assert_eq!(lines, vec![(1, vec![Some("A".into()), Some("\u{4}z".into()), Some("xg".into()), Some("\u{1}".into()), Some("A8".into())])]);
    }

    #[test]
    fn csv_tells_null_from_empty_and_keeps_quoted_newlines() {
        let mut o = options(true);
        o.header = true;
        let lines = parse_lines(b"a,b,c\n1,,\"\"\n2,\"x,\"\"y\"\"\nz\",3\r\n", &o).expect("parse");
        assert_eq!(lines[0], (2, vec![Some("1".into()), None, Some("".into())]));
        assert_eq!(lines[1], (3, vec![Some("2".into()), Some("x,\"y\"\nz".into()), Some("3".into())]));
        assert!(parse_lines(b"1,\"open\n", &options(true)).is_err());
    }

    #[test]
    fn a_bad_value_names_its_line_and_column() {
        let schema: SchemaRef = Arc::new(Schema::new(vec![
            Field::new("k", DataType::Int64, false),
            Field::new("d", DataType::Date32, true),
            Field::new("f", DataType::Boolean, true),
        ]));
        let o = options(false);
        let lines = parse_lines(b"1\t2020-01-02\tt\n2\t\\N\toff\n", &o).expect("parse");
        let targets = target_columns(&schema, &o).expect("targets");
        let batches = to_batches(&lines, &schema, &targets, "t").expect("batches");
        assert_eq!(batches[0].num_rows(), 2);
        let bad_lines = parse_lines(b"1\t2020-01-02\tt\nx2\t\\N\tf\n", &o).expect("parse");
        let err = to_batches(&bad_lines, &schema, &targets, "t").expect_err("bad value");
        assert!(err.message.contains("line 2") && err.message.contains("column k") && err.message.contains("x2"), "{}", err.message);
        let short = parse_lines(b"1\t2020-01-02\n", &o).expect("parse");
        assert!(to_batches(&short, &schema, &targets, "t").expect_err("short").message.contains("missing data for column \"f\""));
        let null_key = parse_lines(b"\\N\t2020-01-02\tt\n", &o).expect("parse");
        assert_eq!(to_batches(&null_key, &schema, &targets, "t").expect_err("null").code, crate::error::sqlstate::NOT_NULL_VIOLATION);
    }
}
