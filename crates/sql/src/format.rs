//! Printers for query answers: a table for people, JSON and CSV for programs. All three
//! read the same `QueryOutput` and render values the same way (decimals with their scale,
//! dates as ISO strings); none computes a figure of its own.

use arrow::array::{Array, ArrayRef};
use arrow::datatypes::DataType;
use arrow::util::display::{ArrayFormatter, FormatOptions};
use comfy_table::presets::UTF8_FULL_CONDENSED;
use comfy_table::{CellAlignment, Table};
use serde_json::{json, Map, Value};

use crate::error::SqlError;
use crate::metrics::TableScanFigures;
use crate::reader::UnitFigures;
use crate::session::QueryOutput;

fn format_options() -> FormatOptions<'static> {
    FormatOptions::default().with_null("NULL")
}

/// The values of a column as text, one per row: the one rendering every printer shares.
fn column_text(array: &ArrayRef) -> Result<Vec<String>, SqlError> {
    let options = format_options();
    let formatter = ArrayFormatter::try_new(array.as_ref(), &options).map_err(|e| SqlError::Execution(e.to_string()))?;
    Ok((0..array.len()).map(|i| formatter.value(i).to_string()).collect())
}

fn is_numeric(t: &DataType) -> bool {
    t.is_numeric()
}

/// Rows of text, column by column turned into row by row.
fn rows_text(output: &QueryOutput) -> Result<Vec<Vec<String>>, SqlError> {
    let mut rows = Vec::with_capacity(output.row_count());
    for batch in &output.batches {
        let columns: Vec<Vec<String>> = batch.columns().iter().map(column_text).collect::<Result<_, _>>()?;
        for r in 0..batch.num_rows() {
            rows.push(columns.iter().map(|c| c[r].clone()).collect());
        }
    }
    Ok(rows)
}

/// A table for people, then one line on the time and the scans. EXPLAIN answers print
/// their plan text as is: a table would wrap it.
pub fn render_table(output: &QueryOutput) -> Result<String, SqlError> {
    let names: Vec<&str> = output.schema.fields().iter().map(|f| crate::output_names::wire_name(f)).collect();
    let mut text = String::new();
    if names == ["plan_type", "plan"] {
        for row in rows_text(output)? {
            text.push_str(&format!("{}:\n{}\n", row[0], row[1]));
        }
    } else {
        let mut table = Table::new();
        table.load_preset(UTF8_FULL_CONDENSED);
        table.set_header(names.clone());
        for row in rows_text(output)? {
            table.add_row(row);
        }
        for (i, field) in output.schema.fields().iter().enumerate() {
            if is_numeric(field.data_type()) {
                if let Some(column) = table.column_mut(i) {
                    column.set_cell_alignment(CellAlignment::Right);
                }
            }
        }
        text.push_str(&table.to_string());
        text.push('\n');
    }
    text.push_str(&summary_line(output));
    text.push('\n');
    Ok(text)
}

/// "3 rows in 0.012 s; scanned 1.2 MB (150 pages) from lineitem 4/4 partitions; I/O wait ...".
pub fn summary_line(output: &QueryOutput) -> String {
    let rows = output.row_count();
    let mut line = format!("{rows} row{} in {:.3} s", if rows == 1 { "" } else { "s" }, output.elapsed_s);
    if output.scans.is_empty() {
        return line;
    }
    let total = output.scan_total();
    let tables: Vec<String> = output
        .scans
        .iter()
        .map(|(name, t)| format!("{name} {}/{}", t.partitions_total - t.partitions_pruned, t.partitions_total))
        .collect();
    line.push_str(&format!(
        "; scanned {:.1} MB ({} pages, {} rows) from {} partitions; I/O wait {:.3} s, decode {:.3} s",
        total.bytes_read as f64 / 1e6,
        total.pages_read,
        total.rows_scanned,
        tables.join(", "),
        total.io_wait_ns as f64 / 1e9,
        total.decode_ns as f64 / 1e9,
    ));
    line
}

/// One JSON value per cell: numbers stay numbers; decimals are strings carrying their
/// scale (a float would lose cents), dates ISO strings.
fn column_json(array: &ArrayRef) -> Result<Vec<Value>, SqlError> {
    use arrow::array::AsArray;
    use arrow::datatypes::*;
    let n = array.len();
    let number = |v: Option<f64>| match v {
        Some(f) if f.is_finite() => json!(f),
        Some(f) => json!(f.to_string()),
        None => Value::Null,
    };
    macro_rules! ints {
        ($t:ty) => {{
            let a = array.as_primitive::<$t>();
            (0..n).map(|i| if a.is_null(i) { Value::Null } else { json!(a.value(i)) }).collect()
        }};
    }
    // Arrow's own dispatch over the eight integer types.
    Ok(arrow::array::downcast_integer! {
        array.data_type() => (ints),
        DataType::Float32 => {
            let a = array.as_primitive::<Float32Type>();
            (0..n).map(|i| number((!a.is_null(i)).then(|| a.value(i) as f64))).collect()
        }
        DataType::Float64 => {
            let a = array.as_primitive::<Float64Type>();
            (0..n).map(|i| number((!a.is_null(i)).then(|| a.value(i)))).collect()
        }
        DataType::Boolean => {
            let a = array.as_boolean();
            (0..n).map(|i| if a.is_null(i) { Value::Null } else { json!(a.value(i)) }).collect()
        }
        _ => {
            let text = column_text(array)?;
            text.into_iter().enumerate().map(|(i, s)| if array.is_null(i) { Value::Null } else { Value::String(s) }).collect()
        }
    })
}

fn figures_json(f: &UnitFigures) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("bytes_read".into(), json!(f.bytes_read));
    m.insert("reads".into(), json!(f.reads_count));
    m.insert("pages_read".into(), json!(f.pages_read));
    m.insert("rows_scanned".into(), json!(f.rows_scanned));
    m.insert("io_wait_s".into(), json!(f.io_wait_ns as f64 / 1e9));
    m.insert("decode_s".into(), json!(f.decode_ns as f64 / 1e9));
    m.insert("deliver_s".into(), json!(f.deliver_ns as f64 / 1e9));
    m.insert("scan_s".into(), json!(f.elapsed_ns as f64 / 1e9));
    m
}

fn table_json(t: &TableScanFigures) -> Value {
    let mut m = figures_json(&t.figures);
    m.insert("partitions_total".into(), json!(t.partitions_total));
    m.insert("partitions_pruned".into(), json!(t.partitions_pruned));
    m.insert("units_read".into(), json!(t.units_read));
    m.insert("table_bytes".into(), json!(t.table_bytes));
    Value::Object(m)
}

/// `{"columns": [...], "rows": [[...]], "elapsed_s": s, "scan": {totals..., "tables": {...}}}`.
pub fn render_json(output: &QueryOutput) -> Result<Value, SqlError> {
    let columns: Vec<&str> = output.schema.fields().iter().map(|f| crate::output_names::wire_name(f)).collect();
    let mut rows: Vec<Value> = Vec::with_capacity(output.row_count());
    for batch in &output.batches {
        let values: Vec<Vec<Value>> = batch.columns().iter().map(column_json).collect::<Result<_, _>>()?;
        for r in 0..batch.num_rows() {
            rows.push(Value::Array(values.iter().map(|c| c[r].clone()).collect()));
        }
    }
    let mut scan = figures_json(&output.scan_total());
    let elapsed = output.elapsed_s;
    let bytes = output.scan_total().bytes_read as f64;
    scan.insert("mb_per_s".into(), json!(if elapsed > 0.0 { bytes / 1e6 / elapsed } else { 0.0 }));
    scan.insert("tables".into(), Value::Object(output.scans.iter().map(|(n, t)| (n.clone(), table_json(t))).collect()));
    Ok(json!({ "columns": columns, "rows": rows, "elapsed_s": elapsed, "scan": scan }))
}

/// RFC 4180 CSV with a header line; NULL is the empty field.
pub fn render_csv(output: &QueryOutput) -> Result<String, SqlError> {
    let mut text = String::new();
    let header: Vec<String> = output.schema.fields().iter().map(|f| csv_field(crate::output_names::wire_name(f))).collect();
    text.push_str(&header.join(","));
    text.push('\n');
    for batch in &output.batches {
        let columns: Vec<Vec<String>> = batch.columns().iter().map(column_text).collect::<Result<_, _>>()?;
        for r in 0..batch.num_rows() {
            let fields: Vec<String> = batch
                .columns()
                .iter()
                .zip(&columns)
                .map(|(a, c)| if a.is_null(r) { String::new() } else { csv_field(&c[r]) })
                .collect();
            text.push_str(&fields.join(","));
            text.push('\n');
        }
    }
    Ok(text)
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// How answers are printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputMode {
    Table,
    Json,
    Csv,
}

/// The answer in `mode`, ending with a newline.
pub fn render(output: &QueryOutput, mode: OutputMode) -> Result<String, SqlError> {
    match mode {
        OutputMode::Table => render_table(output),
        OutputMode::Json => render_json(output).map(|v| format!("{v}\n")),
        OutputMode::Csv => render_csv(output),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::Arc;

    use arrow::array::{Date32Array, Decimal128Array, Float64Array, Int64Array, RecordBatch, StringArray};
    use arrow::datatypes::{Field, Schema};

    use super::*;

    fn output() -> QueryOutput {
        let schema = Arc::new(Schema::new(vec![
            Field::new("k", DataType::Int64, true),
            Field::new("price", DataType::Decimal128(15, 2), true),
            Field::new("d", DataType::Date32, true),
            Field::new("s", DataType::Utf8, true),
            Field::new("f", DataType::Float64, true),
        ]));
        let batch = RecordBatch::try_new(
            schema.clone(),
            vec![
                Arc::new(Int64Array::from(vec![Some(1), None])),
                Arc::new(Decimal128Array::from(vec![Some(12345), Some(-5)]).with_precision_and_scale(15, 2).unwrap_or_else(|e| panic!("{e}"))),
                Arc::new(Date32Array::from(vec![Some(10561), None])),
                Arc::new(StringArray::from(vec![Some("a,\"b\""), None])),
                Arc::new(Float64Array::from(vec![Some(0.5), Some(f64::NAN)])),
            ],
        )
        .unwrap_or_else(|e| panic!("{e}"));
        QueryOutput { statement: "q".into(), schema, batches: vec![batch], elapsed_s: 0.25, scans: BTreeMap::new(), warnings: Vec::new() }
    }

    #[test]
    fn json_keeps_decimal_scale_and_iso_dates() {
        let v = render_json(&output()).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(v["columns"], json!(["k", "price", "d", "s", "f"]));
        assert_eq!(v["rows"][0], json!([1, "123.45", "1998-12-01", "a,\"b\"", 0.5]));
        assert_eq!(v["rows"][1], json!([null, "-0.05", null, null, "NaN"]));
        assert_eq!(v["elapsed_s"], json!(0.25));
    }

    #[test]
    fn csv_quotes_and_leaves_nulls_empty() {
        let s = render_csv(&output()).unwrap_or_else(|e| panic!("{e}"));
        let lines: Vec<&str> = s.lines().collect();
        assert_eq!(lines[0], "k,price,d,s,f");
        assert_eq!(lines[1], "1,123.45,1998-12-01,\"a,\"\"b\"\"\",0.5");
        assert_eq!(lines[2], ",-0.05,,,NaN");
    }

    #[test]
    fn table_shows_rows_and_summary() {
        let s = render_table(&output()).unwrap_or_else(|e| panic!("{e}"));
        assert!(s.contains("123.45") && s.contains("1998-12-01"), "{s}");
        assert!(s.contains("2 rows in 0.250 s"), "{s}");
    }
}
