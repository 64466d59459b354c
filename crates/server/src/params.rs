//! Bind parameters of the extended protocol into DataFusion values: decoded by the type
//! the client declared (or the type DataFusion inferred for the placeholder, or text),
//! then cast to the type the plan expects.

use arrow::datatypes::DataType;
use datafusion::common::tree_node::{TreeNode, TreeNodeRecursion};
use datafusion::common::ScalarValue;
use datafusion::logical_expr::expr::{Cast, Placeholder, TryCast};
use datafusion::logical_expr::{Expr, LogicalPlan};
use pgwire::api::portal::Portal;
use pgwire::api::Type;
use pgwire::error::{PgWireError, PgWireResult};

use crate::error::{pg_error, sqlstate};

/// The PostgreSQL type to announce for a placeholder DataFusion typed as `t`. A
/// parameter cast to `oid` / `oid[]` is typed UInt32 (`pg_syntax.rs`): announced as oid,
/// the type clients encode for it (asyncpg's introspection sends `$1::oid[]` as oid[]).
pub fn pg_type_for_param(t: Option<&DataType>) -> Type {
    match t {
        Some(DataType::UInt32) => Type::OID,
        Some(DataType::List(f)) if f.data_type() == &DataType::UInt32 => Type::OID_ARRAY,
        Some(t) => arrow_pg::datatypes::into_pg_type(t).unwrap_or(Type::TEXT),
        None => Type::TEXT,
    }
}

/// The types of the placeholders the plan casts (`$1::int`, `$2::oid[]`), by number (1 for
/// `$1`): PostgreSQL types a parameter by its cast, and clients encode it by the type the
/// server describes (DataFusion infers placeholder types from comparisons, not casts).
pub fn placeholder_cast_types(plan: &LogicalPlan) -> Vec<(usize, DataType)> {
    let mut out = Vec::new();
    let _ = plan.apply_with_subqueries(|node| {
        node.apply_expressions(|e| {
            e.apply(|e| {
                if let Expr::Cast(Cast { expr, field }) | Expr::TryCast(TryCast { expr, field }) = e {
                    if let Expr::Placeholder(Placeholder { id, field: None }) = expr.as_ref() {
                        if let Some(n) = id.trim_start_matches('$').parse::<usize>().ok().filter(|n| *n >= 1) {
                            out.push((n, field.data_type().clone()));
                        }
                    }
                }
                Ok(TreeNodeRecursion::Continue)
            })
        })
    });
    out
}

/// Fills the parameters DataFusion left untyped with the type of their cast, if any.
pub fn type_by_casts(plan: &LogicalPlan, types: &mut Vec<Option<DataType>>) {
    for (n, t) in placeholder_cast_types(plan) {
        if types.len() < n {
            types.resize(n, None);
        }
        if types[n - 1].is_none() {
            types[n - 1] = Some(t);
        }
    }
}

/// A list parameter (binary or text array) as a DataFusion list of `element`.
fn list_param(values: Option<Vec<ScalarValue>>, element: &DataType) -> ScalarValue {
    match values {
        Some(v) => ScalarValue::List(ScalarValue::new_list_nullable(&v, element)),
        None => ScalarValue::try_from(DataType::List(std::sync::Arc::new(arrow::datatypes::Field::new_list_field(element.clone(), true)))).unwrap_or(ScalarValue::Null),
    }
}

fn bad(i: usize, e: impl std::fmt::Display) -> PgWireError {
    pg_error(sqlstate::INVALID_PARAMETER_VALUE, format!("parameter ${}: {e}", i + 1))
}

/// Parameter `i` of the portal as a value of `pg_type`.
pub fn decode_param<S: Clone>(portal: &Portal<S>, i: usize, pg_type: &Type) -> PgWireResult<ScalarValue> {
    let v = match *pg_type {
        Type::BOOL => ScalarValue::Boolean(portal.parameter::<bool>(i, pg_type)?),
        Type::INT2 => ScalarValue::Int16(portal.parameter::<i16>(i, pg_type)?),
        Type::INT4 => ScalarValue::Int32(portal.parameter::<i32>(i, pg_type)?),
        Type::INT8 => ScalarValue::Int64(portal.parameter::<i64>(i, pg_type)?),
        Type::FLOAT4 => ScalarValue::Float32(portal.parameter::<f32>(i, pg_type)?),
        Type::FLOAT8 => ScalarValue::Float64(portal.parameter::<f64>(i, pg_type)?),
        Type::OID => ScalarValue::UInt32(portal.parameter::<u32>(i, pg_type)?),
        Type::OID_ARRAY => list_param(portal.parameter::<Vec<Option<u32>>>(i, pg_type)?.map(|v| v.into_iter().map(ScalarValue::UInt32).collect()), &DataType::UInt32),
        Type::INT4_ARRAY => list_param(portal.parameter::<Vec<Option<i32>>>(i, pg_type)?.map(|v| v.into_iter().map(ScalarValue::Int32).collect()), &DataType::Int32),
        Type::INT8_ARRAY => list_param(portal.parameter::<Vec<Option<i64>>>(i, pg_type)?.map(|v| v.into_iter().map(ScalarValue::Int64).collect()), &DataType::Int64),
        Type::TEXT_ARRAY => list_param(portal.parameter::<Vec<Option<String>>>(i, pg_type)?.map(|v| v.into_iter().map(ScalarValue::Utf8).collect()), &DataType::Utf8),
        Type::NUMERIC => match portal.parameter::<rust_decimal::Decimal>(i, pg_type)? {
            Some(d) => ScalarValue::Decimal128(Some(d.mantissa()), 38, d.scale() as i8),
            None => ScalarValue::Decimal128(None, 38, 0),
        },
        Type::DATE => {
            let epoch = chrono::NaiveDate::from_ymd_opt(1970, 1, 1).ok_or_else(|| bad(i, "epoch"))?;
            ScalarValue::Date32(portal.parameter::<chrono::NaiveDate>(i, pg_type)?.map(|d| (d - epoch).num_days() as i32))
        }
        Type::TIMESTAMP => ScalarValue::TimestampMicrosecond(
            portal.parameter::<chrono::NaiveDateTime>(i, pg_type)?.map(|t| t.and_utc().timestamp_micros()),
            None,
        ),
        // A moment (psycopg sends tz-aware datetimes so: pandas' tz-aware columns): in
        // UTC, which the cast below keeps as the wall time of a column without a time
        // zone, as PostgreSQL stores it with the session's `TimeZone` (UTC here).
        Type::TIMESTAMPTZ => ScalarValue::TimestampMicrosecond(
            portal.parameter::<chrono::DateTime<chrono::FixedOffset>>(i, pg_type)?.map(|t| t.timestamp_micros()),
            Some("UTC".into()),
        ),
        _ => {
            // Text, varchar, unknown and anything else: the client's text, which the cast
            // below turns into the type the plan wants.
            let as_text = if portal.parameter_format.is_binary(i) { pg_type.clone() } else { Type::TEXT };
            ScalarValue::Utf8(portal.parameter::<String>(i, &as_text)?)
        }
    };
    Ok(v)
}

/// Every parameter, cast to the types the plan expects (`expected[i]`, when known).
pub fn decode_params<S: Clone>(portal: &Portal<S>, types: &[Type], expected: &[Option<DataType>]) -> PgWireResult<Vec<ScalarValue>> {
    (0..portal.parameter_len())
        .map(|i| {
            let t = types.get(i).cloned().unwrap_or(Type::TEXT);
            let v = decode_param(portal, i, &t)?;
            match expected.get(i).cloned().flatten() {
                Some(dt) if v.data_type() != dt => v.cast_to(&dt).map_err(|e| bad(i, e)),
                _ => Ok(v),
            }
        })
        .collect()
}
