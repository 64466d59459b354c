//! `pg_proc`: one row per function the session runs — DataFusion's scalar, aggregate,
//! window and table functions and the catalog functions `pg_catalog.rs` adds — so a client
//! that asks whether a function exists (`SELECT … FROM pg_proc WHERE proname = 'x'`) gets
//! the session's answer.
//!
//! DataFusion's functions are typed per call (their signatures take many argument types),
//! so `pronargs`, `prorettype` and `proargtypes` are NULL: not one answer, not a guess.

use std::sync::Arc;

use arrow::array::{new_null_array, ArrayRef, BooleanArray, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema};
use datafusion::error::Result;
use datafusion::execution::session_state::SessionState;
use datafusion::logical_expr::Volatility;

/// Function oids count from here (above tables, indexes and constraints: `pg_keys.rs`).
const PROC_OID_FIRST: i64 = 2_000_000_000;
/// PostgreSQL's oids of the `pg_catalog` namespace, the owner, and the `internal` language.
const PG_CATALOG_OID: i64 = 11;
const OWNER_OID: i64 = 10;
const INTERNAL_LANGUAGE_OID: i64 = 12;

fn volatility_code(v: Volatility) -> &'static str {
    match v {
        Volatility::Immutable => "i",
        Volatility::Stable => "s",
        Volatility::Volatile => "v",
    }
}

/// (name, prokind, provolatile, proretset) of every function `state` runs, by name; the
/// schema-qualified aliases (`pg_catalog.version`) are the same functions and not repeated.
fn session_functions(state: &SessionState) -> Vec<(String, &'static str, &'static str, bool)> {
    let mut out: Vec<(String, &'static str, &'static str, bool)> = Vec::new();
    for (name, f) in state.scalar_functions() {
        out.push((name.clone(), "f", volatility_code(f.signature().volatility), false));
    }
    for (name, f) in state.aggregate_functions() {
        out.push((name.clone(), "a", volatility_code(f.signature().volatility), false));
    }
    for (name, f) in state.window_functions() {
        out.push((name.clone(), "w", volatility_code(f.signature().volatility), false));
    }
    for name in state.table_functions().keys() {
        out.push((name.clone(), "f", "v", true));
    }
    out.retain(|(name, ..)| !name.contains('.'));
    out.sort();
    out.dedup_by(|a, b| a.0 == b.0 && a.1 == b.1);
    out
}

/// The `pg_proc` rows of the session's functions.
pub fn functions(state: &SessionState) -> Result<RecordBatch> {
    let rows = session_functions(state);
    let n = rows.len();
    let text = |n: &str| Field::new(n, DataType::Utf8, true);
    let int64 = |n: &str| Field::new(n, DataType::Int64, true);
    let fields = vec![
        int64("oid"),
        text("proname"),
        int64("pronamespace"),
        int64("proowner"),
        int64("prolang"),
        text("prokind"),
        Field::new("proretset", DataType::Boolean, true),
        text("provolatile"),
        Field::new("pronargs", DataType::Int16, true),
        int64("prorettype"),
        Field::new("proargtypes", DataType::List(Arc::new(Field::new_list_field(DataType::Int64, true))), true),
        text("prosrc"),
    ];
    let list = fields[10].data_type().clone();
    let columns: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from_iter_values((0..n as i64).map(|i| PROC_OID_FIRST + i))),
        Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.0.as_str()))),
        Arc::new(Int64Array::from(vec![PG_CATALOG_OID; n])),
        Arc::new(Int64Array::from(vec![OWNER_OID; n])),
        Arc::new(Int64Array::from(vec![INTERNAL_LANGUAGE_OID; n])),
        Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.1))),
        Arc::new(BooleanArray::from_iter(rows.iter().map(|r| Some(r.3)))),
        Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.2))),
        new_null_array(&DataType::Int16, n),
        new_null_array(&DataType::Int64, n),
        new_null_array(&list, n),
        Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.0.as_str()))),
    ];
    Ok(RecordBatch::try_new(Arc::new(Schema::new(fields)), columns)?)
}
