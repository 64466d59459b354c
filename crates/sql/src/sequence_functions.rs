//! `nextval`, `setval`, `currval` and `lastval`: PostgreSQL's sequence functions over the
//! write path's sequences (crates/write `sequences.rs`, which says what is durable when).
//!
//! `nextval` is volatile (never folded at planning, one value per row); it hands values
//! out even inside a transaction that rolls back, as PostgreSQL's does. `currval` and
//! `lastval` are a PostgreSQL session's memory of its last `nextval`: flashscan does not
//! keep it per session yet, so they are refused with what to use instead.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, Int64Array};
use arrow::datatypes::DataType;
use datafusion::common::{Result, ScalarValue};
use datafusion::logical_expr::{ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, TypeSignature, Volatility};
use datafusion::prelude::SessionContext;
use flashscan_write::WritePath;

/// Registers the sequence functions on `ctx`, drawing from `write`'s sequences.
pub fn register(ctx: &SessionContext, write: &Arc<WritePath>) {
    for kind in [Kind::NextVal, Kind::SetVal, Kind::CurrVal, Kind::LastVal] {
        ctx.register_udf(ScalarUDF::from(SequenceFunction::new(kind, write.clone())));
    }
}

/// The sequence a name given to `nextval` names: `public.` and quotes taken off, unquoted
/// names folded to lower case (as PostgreSQL reads a `regclass` text).
pub fn sequence_name(given: &str) -> String {
    let given = given.trim();
    let last = given.strip_prefix("public.").unwrap_or(given);
    match last.strip_prefix('"').and_then(|q| q.strip_suffix('"')) {
        Some(quoted) => quoted.to_string(),
        None => last.to_ascii_lowercase(),
    }
}

/// A write path error through DataFusion, so it comes back out as itself (its SQLSTATE).
fn external(e: flashscan_write::WriteError) -> datafusion::error::DataFusionError {
    datafusion::error::DataFusionError::External(Box::new(e))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Kind {
    NextVal,
    SetVal,
    CurrVal,
    LastVal,
}

#[derive(Debug)]
struct SequenceFunction {
    kind: Kind,
    signature: Signature,
    write: Arc<WritePath>,
}

impl PartialEq for SequenceFunction {
    fn eq(&self, other: &Self) -> bool {
        self.kind == other.kind && Arc::ptr_eq(&self.write, &other.write)
    }
}
impl Eq for SequenceFunction {}
impl std::hash::Hash for SequenceFunction {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.kind.hash(state);
    }
}

impl SequenceFunction {
    fn new(kind: Kind, write: Arc<WritePath>) -> SequenceFunction {
        let signature = match kind {
            Kind::NextVal | Kind::CurrVal => Signature::exact(vec![DataType::Utf8], Volatility::Volatile),
            Kind::SetVal => Signature::one_of(
                vec![TypeSignature::Exact(vec![DataType::Utf8, DataType::Int64]), TypeSignature::Exact(vec![DataType::Utf8, DataType::Int64, DataType::Boolean])],
                Volatility::Volatile,
            ),
            Kind::LastVal => Signature::exact(vec![], Volatility::Volatile),
        };
        SequenceFunction { kind, signature, write }
    }
}

/// Argument `i` of row `row` as a string / i64 / bool (a scalar repeats for every row).
fn text_at(arg: &ColumnarValue, row: usize) -> Option<String> {
    match arg {
        ColumnarValue::Scalar(s) => match s {
            ScalarValue::Utf8(v) | ScalarValue::Utf8View(v) | ScalarValue::LargeUtf8(v) => v.clone(),
            _ => None,
        },
        ColumnarValue::Array(a) => {
            let a = arrow::compute::cast(a, &DataType::Utf8).ok()?;
            let a = a.as_string::<i32>();
            (!a.is_null(row)).then(|| a.value(row).to_string())
        }
    }
}

fn i64_at(arg: &ColumnarValue, row: usize) -> Option<i64> {
    match arg {
        ColumnarValue::Scalar(s) => match s.cast_to(&DataType::Int64).ok()? {
            ScalarValue::Int64(v) => v,
            _ => None,
        },
        ColumnarValue::Array(a) => {
            let a = arrow::compute::cast(a, &DataType::Int64).ok()?;
            let a = a.as_primitive::<arrow::datatypes::Int64Type>();
            (!a.is_null(row)).then(|| a.value(row))
        }
    }
}

fn bool_at(arg: &ColumnarValue, row: usize) -> Option<bool> {
    match arg {
        ColumnarValue::Scalar(ScalarValue::Boolean(v)) => *v,
        ColumnarValue::Array(a) => {
            let a = a.as_boolean();
            (!a.is_null(row)).then(|| a.value(row))
        }
        _ => None,
    }
}

impl ScalarUDFImpl for SequenceFunction {
    fn name(&self) -> &str {
        match self.kind {
            Kind::NextVal => "nextval",
            Kind::SetVal => "setval",
            Kind::CurrVal => "currval",
            Kind::LastVal => "lastval",
        }
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(DataType::Int64)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let rows = args.number_rows;
        let all_scalar = args.args.iter().all(|a| matches!(a, ColumnarValue::Scalar(_)));
        let values: Vec<Option<i64>> = match self.kind {
            Kind::CurrVal | Kind::LastVal => {
                return Err(external(flashscan_write::WriteError::NotSupported(format!(
                    "{} is not supported yet: flashscan keeps no per-session memory of nextval; take the value with INSERT … RETURNING, or SELECT nextval(…) first",
                    self.name()
                ))))
            }
            Kind::NextVal if all_scalar => {
                // One name for every row: one call hands the rows' values out in order.
                let Some(name) = text_at(&args.args[0], 0) else { return Ok(ColumnarValue::Scalar(ScalarValue::Int64(None))) };
                let taken = self.write.next_sequence_values(&sequence_name(&name), rows.max(1)).map_err(external)?;
                taken.into_iter().take(rows.max(1)).map(Some).collect()
            }
            Kind::NextVal => (0..rows)
                .map(|r| match text_at(&args.args[0], r) {
                    None => Ok(None),
                    Some(name) => {
                        let v = self.write.next_sequence_values(&sequence_name(&name), 1).map_err(external)?;
                        Ok(v.first().copied())
                    }
                })
                .collect::<Result<_>>()?,
            Kind::SetVal => (0..rows.max(1))
                .map(|r| {
                    let (Some(name), Some(value)) = (text_at(&args.args[0], r), i64_at(&args.args[1], r)) else { return Ok(None) };
                    let is_called = args.args.get(2).map(|a| bool_at(a, r).unwrap_or(true)).unwrap_or(true);
                    let v = self.write.set_sequence_value(&sequence_name(&name), value, is_called).map_err(external)?;
                    Ok(Some(v))
                })
                .collect::<Result<_>>()?,
        };
        if all_scalar && rows <= 1 {
            return Ok(ColumnarValue::Scalar(ScalarValue::Int64(values.first().copied().flatten())));
        }
        let array: ArrayRef = Arc::new(Int64Array::from(values));
        debug_assert_eq!(array.len(), rows);
        Ok(ColumnarValue::Array(array))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_fold_as_postgresql_reads_them() {
        assert_eq!(sequence_name("T_id_seq"), "t_id_seq");
        assert_eq!(sequence_name("public.t_id_seq"), "t_id_seq");
        assert_eq!(sequence_name("\"Mixed\""), "Mixed");
    }
}
