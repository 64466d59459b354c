//! The JSON printer: one object per scan. Formats the report, computes nothing.
//! Decimals are strings with their scale (`"56586554400.73"`), so no reader turns them
//! into floats; integers are numbers; NULL is null.

use serde_json::{json, Map, Value as Json};

use crate::report::ScanReport;
use crate::value::Value;

fn value_json(v: &Value) -> Json {
    match v {
        Value::Null => Json::Null,
        Value::Int(i) => json!(i),
        other => Json::String(other.to_string()),
    }
}

pub fn report_json(report: &ScanReport) -> Json {
    let mut object = match serde_json::to_value(report) {
        Ok(Json::Object(map)) => map,
        _ => Map::new(),
    };
    let rows: Vec<Json> = report.result.rows.iter().map(|r| Json::Array(r.iter().map(value_json).collect())).collect();
    object.insert("result".into(), Json::Array(rows));
    object.insert("result_columns".into(), json!(report.result.columns));
    object.insert("result_rows_total".into(), json!(report.result.rows_total));
    Json::Object(object)
}
