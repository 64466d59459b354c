//! PostgreSQL's `json` values over the wire: `json_build_object(key, value, …)`, and a
//! column marked as json (field metadata [`PG_TYPE_METADATA_KEY`] = `json`) described to the
//! client as type `json` (oid 114), so drivers decode it (psycopg and asyncpg give a dict:
//! SQLAlchemy's identity reflection reads its options that way).
//!
//! Arrow has no json type and DataFusion keeps a field's metadata only through some
//! expressions (a function's own return field, an alias; not a CASE). So a json value is
//! text marked on its field, and [`when_then_udf`] — `pg_catalog.when_then(cond, value)`,
//! what `pg_syntax.rs` writes for the catalog's `CASE WHEN c THEN json… END` — keeps the
//! mark where CASE would drop it.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, BooleanArray, StringArray};
use arrow::datatypes::{DataType, Field, FieldRef};
use datafusion::common::{exec_err, Result, ScalarValue};
use datafusion::logical_expr::{ColumnarValue, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility};

/// The field metadata key naming a column's PostgreSQL type where Arrow's does not say it.
pub const PG_TYPE_METADATA_KEY: &str = "flashscan.pg_type";

/// Whether `field` holds json text (described to clients as `json`).
pub fn is_json(field: &Field) -> bool {
    field.data_type() == &DataType::Utf8 && field.metadata().get(PG_TYPE_METADATA_KEY).is_some_and(|t| t == "json")
}

fn json_field(name: &str) -> FieldRef {
    Arc::new(Field::new(name, DataType::Utf8, true).with_metadata([(PG_TYPE_METADATA_KEY.to_string(), "json".to_string())].into()))
}

/// `s` as a JSON string literal.
fn quoted(s: &str) -> String {
    // serde_json's escaping is JSON's (control characters as \uXXXX, quotes, backslashes).
    serde_json::Value::String(s.to_string()).to_string()
}

/// Value `row` of `array` as PostgreSQL's `to_json` writes it: numbers and booleans bare,
/// NULL as `null`, anything else as a JSON string of its text.
fn json_value(array: &ArrayRef, row: usize) -> Result<String> {
    if array.is_null(row) {
        return Ok("null".into());
    }
    let t = array.data_type();
    if t == &DataType::Boolean {
        return Ok(array.as_boolean().value(row).to_string());
    }
    let text = ScalarValue::try_from_array(array, row)?.cast_to(&DataType::Utf8)?;
    let ScalarValue::Utf8(Some(text)) = text else { return Ok("null".into()) };
    let bare = t.is_integer() || (t.is_floating() && text.parse::<f64>().is_ok_and(f64::is_finite)) || matches!(t, DataType::Decimal128(..) | DataType::Decimal256(..));
    Ok(if bare { text } else { quoted(&text) })
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct JsonBuildObject {
    signature: Signature,
    aliases: Vec<String>,
}

impl ScalarUDFImpl for JsonBuildObject {
    fn name(&self) -> &str {
        "json_build_object"
    }
    fn aliases(&self) -> &[String] {
        &self.aliases
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn return_type(&self, _args: &[DataType]) -> Result<DataType> {
        Ok(DataType::Utf8)
    }
    fn return_field_from_args(&self, _args: ReturnFieldArgs) -> Result<FieldRef> {
        Ok(json_field(self.name()))
    }
    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        if args.args.len() % 2 != 0 {
            return exec_err!("json_build_object: argument list must have even number of elements (key, value, key, value, …)");
        }
        let rows = args.number_rows;
        let arrays: Vec<ArrayRef> = args.args.iter().map(|a| a.to_array(rows)).collect::<Result<_>>()?;
        let mut out = Vec::with_capacity(rows);
        for row in 0..rows {
            let mut pairs = Vec::with_capacity(arrays.len() / 2);
            for kv in arrays.chunks(2) {
                if kv[0].is_null(row) {
                    return exec_err!("json_build_object: null value not allowed for object key");
                }
                let key = ScalarValue::try_from_array(&kv[0], row)?.cast_to(&DataType::Utf8)?;
                let ScalarValue::Utf8(Some(key)) = key else { return exec_err!("json_build_object: a key must be text") };
                pairs.push(format!("{} : {}", quoted(&key), json_value(&kv[1], row)?));
            }
            // PostgreSQL's spacing: `{"a" : 1, "b" : true}`.
            out.push(format!("{{{}}}", pairs.join(", ")));
        }
        let all_scalar = args.args.iter().all(|a| matches!(a, ColumnarValue::Scalar(_)));
        let array: ArrayRef = Arc::new(StringArray::from(out));
        Ok(if all_scalar && rows == 1 { ColumnarValue::Scalar(ScalarValue::try_from_array(&array, 0)?) } else { ColumnarValue::Array(array) })
    }
}

/// `json_build_object(k1, v1, …)`: a json object of the pairs, as PostgreSQL's.
pub fn json_build_object_udf() -> ScalarUDF {
    ScalarUDF::new_from_impl(JsonBuildObject { signature: Signature::variadic_any(Volatility::Immutable), aliases: vec!["pg_catalog.json_build_object".into()] })
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct WhenThen {
    signature: Signature,
}

impl ScalarUDFImpl for WhenThen {
    fn name(&self) -> &str {
        "pg_catalog.when_then"
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn return_type(&self, args: &[DataType]) -> Result<DataType> {
        Ok(args.get(1).cloned().unwrap_or(DataType::Null))
    }
    /// The value's field (its metadata too), nullable.
    fn return_field_from_args(&self, args: ReturnFieldArgs) -> Result<FieldRef> {
        let Some(value) = args.arg_fields.get(1) else { return exec_err!("when_then(condition, value) takes two arguments") };
        Ok(Arc::new(value.as_ref().clone().with_name(self.name()).with_nullable(true)))
    }
    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let [condition, value] = args.args.as_slice() else { return exec_err!("when_then(condition, value) takes two arguments") };
        let rows = args.number_rows;
        let condition = condition.to_array(rows)?;
        let Some(condition) = condition.as_any().downcast_ref::<BooleanArray>() else { return exec_err!("when_then: the condition must be boolean") };
        // NULL where the condition is not true (false or NULL), as CASE WHEN answers.
        let not_true: BooleanArray = condition.iter().map(|c| Some(c != Some(true))).collect();
        let value = value.to_array(rows)?;
        Ok(ColumnarValue::Array(arrow::compute::nullif(&value, &not_true)?))
    }
}

/// `pg_catalog.when_then(c, v)`: `CASE WHEN c THEN v END`, keeping `v`'s field metadata.
pub fn when_then_udf() -> ScalarUDF {
    ScalarUDF::new_from_impl(WhenThen { signature: Signature::any(2, Volatility::Immutable) })
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::prelude::SessionContext;

    async fn one(ctx: &SessionContext, sql: &str) -> (String, bool) {
        let df = ctx.sql(sql).await.unwrap_or_else(|e| panic!("{sql}: {e}"));
        let json = is_json(df.schema().field(0));
        let batches = df.collect().await.expect("collect");
        let v = arrow::util::display::array_value_to_string(batches[0].column(0), 0).expect("text");
        (v, json)
    }

    #[tokio::test]
    async fn json_build_object_writes_postgresqls_text_and_keeps_its_type_through_when_then() {
        let ctx = SessionContext::new();
        ctx.register_udf(json_build_object_udf());
        ctx.register_udf(when_then_udf());
        // PostgreSQL 15: SELECT json_build_object('a', 1, 'b', true, 'c', 'x"y', 'd', NULL, 'e', 2.5);
        let (v, json) = one(&ctx, "SELECT json_build_object('a', 1, 'b', true, 'c', 'x\"y', 'd', NULL, 'e', 2.5) AS o").await;
        assert_eq!(v, r#"{"a" : 1, "b" : true, "c" : "x\"y", "d" : null, "e" : 2.5}"#);
        assert!(json, "described as json");
        let (v, json) = one(&ctx, "SELECT pg_catalog.when_then(1 > 0, json_build_object('k', 7)) AS o").await;
        assert_eq!((v.as_str(), json), (r#"{"k" : 7}"#, true));
        let (v, _) = one(&ctx, "SELECT pg_catalog.when_then(1 < 0, json_build_object('k', 7)) AS o").await;
        assert_eq!(v, "");
        assert!(ctx.sql("SELECT json_build_object('a')").await.expect("plan").collect().await.is_err(), "an odd argument count is an error");
        assert!(ctx.sql("SELECT json_build_object(NULL, 1)").await.expect("plan").collect().await.is_err(), "a NULL key is an error");
    }
}
