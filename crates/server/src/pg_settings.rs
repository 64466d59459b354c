//! The settings every connection shares, as PostgreSQL's clients read them: `SHOW name`
//! (handler.rs, with the per-connection ones beside), `current_setting(name)`,
//! `set_config(name, value, is_local)` and the `pg_settings` view.
//!
//! These settings are fixed: the server's behaviour they describe does not change.
//! `set_config` to the value a setting already has answers it (asyncpg turns `jit` off
//! before its type introspection: flashscan has no JIT, it is off); any other value is
//! refused, saying so, never taken and ignored.

use std::sync::Arc;

use arrow::array::{new_null_array, Array, ArrayRef, BooleanArray, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema};
use datafusion::error::{DataFusionError, Result};
use datafusion::logical_expr::{create_udf, ColumnarValue, ScalarUDF, Volatility};

use crate::psql_catalog::SCHEMA_NAME;

/// The fixed settings, by name (lower case), in `pg_settings`' order.
pub const FIXED_SETTING_NAMES: [&str; 16] = [
    "client_encoding",
    "datestyle",
    "default_table_access_method",
    "default_transaction_isolation",
    "default_transaction_read_only",
    "integer_datetimes",
    "jit",
    "search_path",
    "server_encoding",
    "server_version",
    "server_version_num",
    "standard_conforming_strings",
    "timezone",
    "transaction_isolation",
    "transaction_read_only",
    "lc_collate",
];

/// The settings every connection has the same value of, as `SHOW name` and
/// `current_setting('name')` answer them (the per-connection ones, `statement_timeout` and
/// `flashscan.*`, only `SHOW` answers: handler.rs).
pub fn fixed_setting(name: &str) -> Option<String> {
    Some(match name {
        "server_version" => crate::startup::SERVER_VERSION.to_string(),
        "server_version_num" => "150000".to_string(),
        "transaction_isolation" | "default_transaction_isolation" => "read committed".to_string(),
        // The server is the database's writer (lib.rs `start`): every transaction may write.
        // (libpq's `target_session_attrs=read-write` reads this.)
        "transaction_read_only" | "default_transaction_read_only" => "off".to_string(),
        "standard_conforming_strings" | "integer_datetimes" => "on".to_string(),
        "client_encoding" | "server_encoding" => "UTF8".to_string(),
        "datestyle" => "ISO, MDY".to_string(),
        "timezone" => "UTC".to_string(),
        "search_path" => SCHEMA_NAME.to_string(),
        // SQLAlchemy names a table's access method only when it is not the default.
        "default_table_access_method" => "heap".to_string(),
        // Queries are not compiled to machine code here (asyncpg asks before introspecting).
        "jit" => "off".to_string(),
        // Text compares bytewise (pg_catalog.rs, `NO_COLLATION_OID`).
        "lc_collate" => "C".to_string(),
        _ => return None,
    })
}

/// Whether `value` (as SET or a startup option gives it) asks for what `name`, a fixed
/// setting whose value is `current`, already is: names of one thing compared without case
/// or quotes (`'UTF-8'` is UTF8, `'ISO'` is the ISO half of `ISO, MDY`, `"$user", public`
/// is `public` since no schema is named for a user).
pub fn same_as_fixed(name: &str, current: &str, value: &str) -> bool {
    let norm = |v: &str| v.trim().trim_matches(|c| c == '\'' || c == '"').trim().to_ascii_lowercase();
    let value = norm(value);
    if value == "default" || value == current.to_ascii_lowercase() {
        return true;
    }
    let parts = || value.split(',').map(norm).filter(|p| !p.is_empty());
    match name {
        "client_encoding" => matches!(value.as_str(), "utf8" | "utf-8" | "unicode"),
        "datestyle" => parts().all(|p| p == "iso" || p == "mdy"),
        "timezone" => matches!(value.as_str(), "utc" | "gmt" | "etc/utc" | "z" | "zulu" | "universal"),
        "search_path" => parts().all(|p| p == SCHEMA_NAME || p == "$user" || p == "pg_catalog"),
        "jit" | "transaction_read_only" | "default_transaction_read_only" => matches!((current, value.as_str()), ("off", "false" | "0" | "no") | ("on", "true" | "1" | "yes")),
        _ => false,
    }
}

fn text_arrays(args: &[ColumnarValue], rows: usize) -> Result<Vec<StringArray>> {
    args.iter()
        .map(|a| {
            let array = arrow::compute::cast(&a.to_array(rows)?, &DataType::Utf8)?;
            array.as_any().downcast_ref::<StringArray>().cloned().ok_or_else(|| DataFusionError::Execution("a text argument expected".into()))
        })
        .collect()
}

fn rows_of(args: &[ColumnarValue]) -> Option<usize> {
    args.iter().find_map(|a| match a {
        ColumnarValue::Array(a) => Some(a.len()),
        ColumnarValue::Scalar(_) => None,
    })
}

fn columnar(rows: Option<usize>, out: ArrayRef) -> Result<ColumnarValue> {
    Ok(match rows {
        Some(_) => ColumnarValue::Array(out),
        None => ColumnarValue::Scalar(datafusion::common::ScalarValue::try_from_array(&out, 0)?),
    })
}

/// `current_setting(name)`: `fixed_setting`; any other name is an error saying to ask SHOW.
pub fn current_setting_udf() -> ScalarUDF {
    let f = Arc::new(|args: &[ColumnarValue]| -> Result<ColumnarValue> {
        let rows = rows_of(args);
        let texts = text_arrays(args, rows.unwrap_or(1))?;
        let names = texts.first().ok_or_else(|| DataFusionError::Plan("current_setting takes a setting's name".into()))?;
        let out: StringArray = names
            .iter()
            .map(|n| match n {
                None => Ok(None),
                Some(n) => fixed_setting(&n.to_ascii_lowercase())
                    .map(Some)
                    .ok_or_else(|| DataFusionError::Execution(format!("current_setting('{n}'): not a server-wide setting; SHOW {n} answers the connection's"))),
            })
            .collect::<Result<_>>()?;
        columnar(rows, Arc::new(out))
    });
    create_udf("current_setting", vec![DataType::Utf8], DataType::Utf8, Volatility::Stable, f).with_aliases(["pg_catalog.current_setting"])
}

/// `set_config(name, value, is_local)`: the value when the setting has it already; any
/// other value, or a setting that is not one of the fixed ones, is refused with what to do.
pub fn set_config_udf() -> ScalarUDF {
    let f = Arc::new(|args: &[ColumnarValue]| -> Result<ColumnarValue> {
        let rows = rows_of(args);
        let texts = text_arrays(&args[..args.len().min(2)], rows.unwrap_or(1))?;
        let [names, values] = texts.as_slice() else { return Err(DataFusionError::Plan("set_config takes a name, a value and is_local".into())) };
        let out: StringArray = names
            .iter()
            .zip(values.iter())
            .map(|(n, v)| {
                let (Some(n), Some(v)) = (n, v) else { return Ok(None) };
                let name = n.to_ascii_lowercase();
                match fixed_setting(&name) {
                    Some(current) if same_as_fixed(&name, &current, &v) => Ok(Some(current)),
                    Some(current) => Err(DataFusionError::Execution(format!("set_config('{n}', '{v}'): flashscan keeps {n} at '{current}' and cannot change it"))),
                    None => Err(DataFusionError::Execution(format!("set_config('{n}', …) is not supported: use SET {n} = … for the connection's settings (SHOW lists them)"))),
                }
            })
            .collect::<Result<_>>()?;
        columnar(rows, Arc::new(out))
    });
    create_udf("set_config", vec![DataType::Utf8, DataType::Utf8, DataType::Boolean], DataType::Utf8, Volatility::Volatile, f).with_aliases(["pg_catalog.set_config"])
}

/// `pg_settings`: the fixed settings, with PostgreSQL's columns. `context` is `internal`
/// (PostgreSQL's word for "cannot be changed"), `source` `default`. The per-connection
/// settings (`statement_timeout`, `flashscan.*`) are not here: SHOW answers them.
pub fn settings() -> Result<RecordBatch> {
    let names = [
        "name", "setting", "unit", "category", "short_desc", "extra_desc", "context", "vartype", "source", "min_val", "max_val", "enumvals", "boot_val", "reset_val", "sourcefile", "sourceline",
        "pending_restart",
    ];
    let enumvals = DataType::List(Arc::new(Field::new_list_field(DataType::Utf8, true)));
    let fields: Vec<Field> = names
        .iter()
        .map(|n| match *n {
            "enumvals" => Field::new(*n, enumvals.clone(), true),
            "sourceline" => Field::new(*n, DataType::Int32, true),
            "pending_restart" => Field::new(*n, DataType::Boolean, true),
            _ => Field::new(*n, DataType::Utf8, true),
        })
        .collect();
    let values: Vec<String> = FIXED_SETTING_NAMES.iter().map(|n| fixed_setting(n).unwrap_or_default()).collect();
    debug_assert!(FIXED_SETTING_NAMES.iter().all(|n| fixed_setting(n).is_some()), "every listed setting has a value");
    let n = values.len();
    let text = |v: Vec<Option<&str>>| -> ArrayRef { Arc::new(StringArray::from(v)) };
    let columns: Vec<ArrayRef> = vec![
        text(FIXED_SETTING_NAMES.iter().map(|s| Some(*s)).collect()),
        text(values.iter().map(|v| Some(v.as_str())).collect()),
        new_null_array(&DataType::Utf8, n),
        text(vec![Some("flashscan"); n]),
        text(vec![Some("fixed by flashscan"); n]),
        new_null_array(&DataType::Utf8, n),
        text(vec![Some("internal"); n]),
        text(vec![Some("string"); n]),
        text(vec![Some("default"); n]),
        new_null_array(&DataType::Utf8, n),
        new_null_array(&DataType::Utf8, n),
        new_null_array(&enumvals, n),
        text(values.iter().map(|v| Some(v.as_str())).collect()),
        text(values.iter().map(|v| Some(v.as_str())).collect()),
        new_null_array(&DataType::Utf8, n),
        new_null_array(&DataType::Int32, n),
        Arc::new(BooleanArray::from(vec![false; n])),
    ];
    Ok(RecordBatch::try_new(Arc::new(Schema::new(fields)), columns)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::prelude::SessionContext;

    #[tokio::test]
    async fn set_config_answers_the_value_it_has_and_refuses_any_other() {
        let ctx = SessionContext::new();
        ctx.register_udf(current_setting_udf());
        ctx.register_udf(set_config_udf());
        // asyncpg's query before its type introspection.
        let batches = ctx.sql("SELECT current_setting('jit') AS cur, set_config('jit', 'off', false) AS new").await.expect("plan").collect().await.expect("run");
        let row: Vec<String> = (0..2).map(|c| arrow::util::display::array_value_to_string(batches[0].column(c), 0).expect("text")).collect();
        assert_eq!(row, vec!["off", "off"]);
        for (sql, says) in [("SELECT set_config('jit', 'on', false)", "cannot change it"), ("SELECT set_config('work_mem', '1GB', false)", "use SET work_mem")] {
            let err = ctx.sql(sql).await.expect("plan").collect().await.expect_err(sql);
            assert!(err.to_string().contains(says), "{sql}: {err}");
        }
        let listed = settings().expect("pg_settings");
        assert_eq!(listed.num_rows(), FIXED_SETTING_NAMES.len());
    }
}
