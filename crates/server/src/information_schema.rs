//! The `information_schema` tables clients read that DataFusion's own information_schema
//! lacks or shapes differently: `views` (PostgreSQL's columns — `view_definition`,
//! `check_option`, `is_updatable`, … — and only views; DataFusion's lists every relation
//! with its own columns), `columns` (PostgreSQL's type names, `udt_name`, precision and
//! scale, `column_default`, identity: DataFusion's says `Int32` and knows no defaults),
//! `table_constraints` and `key_column_usage` (`pg_keys.rs`).
//!
//! DataFusion answers every `information_schema.X` itself (its session resolves that schema
//! before any registered one), so these live in the schema `PG_INFORMATION_SCHEMA` and
//! `pg_syntax.rs` points `information_schema.views` (and the others in `TABLES`) there, in
//! the parsed statement. `information_schema.tables` and `schemata` stay DataFusion's.

use std::sync::Arc;

use arrow::array::{ArrayRef, Int32Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema};
use datafusion::catalog::MemorySchemaProvider;
use datafusion::common::TableReference;
use datafusion::datasource::MemTable;
use datafusion::error::{DataFusionError, Result};
use datafusion::prelude::SessionContext;

use crate::pg_keys::KeyRows;
use crate::psql_catalog::{CatalogTable, SCHEMA_NAME};

/// Where the tables are registered.
pub const PG_INFORMATION_SCHEMA: &str = "pg_information_schema";
/// The `information_schema` tables answered from `PG_INFORMATION_SCHEMA`.
pub const TABLES: [&str; 4] = ["views", "columns", "table_constraints", "key_column_usage"];

fn strings<'a>(v: impl IntoIterator<Item = &'a str>) -> ArrayRef {
    Arc::new(StringArray::from_iter_values(v))
}

/// `information_schema.views`: one row per view. flashscan's views are read-only (INSERT,
/// UPDATE, DELETE into one are refused) and have no CHECK OPTION or triggers.
fn views(tables: &[CatalogTable], database: &str) -> Result<RecordBatch> {
    let views: Vec<&CatalogTable> = tables.iter().filter(|t| t.is_view()).collect();
    let n = views.len();
    let names = [
        "table_catalog",
        "table_schema",
        "table_name",
        "view_definition",
        "check_option",
        "is_updatable",
        "is_insertable_into",
        "is_trigger_updatable",
        "is_trigger_deletable",
        "is_trigger_insertable_into",
    ];
    let fields: Vec<Field> = names.iter().map(|n| Field::new(*n, DataType::Utf8, true)).collect();
    let mut columns = vec![
        strings(std::iter::repeat_n(database, n)),
        strings(std::iter::repeat_n(SCHEMA_NAME, n)),
        strings(views.iter().map(|v| v.name.as_str())),
        strings(views.iter().map(|v| v.view_definition.as_deref().unwrap_or_default())),
        strings(std::iter::repeat_n("NONE", n)),
    ];
    columns.extend((0..5).map(|_| strings(std::iter::repeat_n("NO", n))));
    Ok(RecordBatch::try_new(Arc::new(Schema::new(fields)), columns)?)
}

/// A column type's `data_type` (PostgreSQL's name without modifiers), `udt_name`, and its
/// numeric precision, radix and scale, or datetime precision, as PostgreSQL's
/// information_schema gives them.
struct TypeFacts {
    data_type: &'static str,
    udt_name: &'static str,
    /// (precision, radix, scale): floats have no scale.
    numeric: Option<(i32, i32, Option<i32>)>,
    datetime_precision: Option<i32>,
}

fn type_facts(t: &DataType) -> TypeFacts {
    let plain = |data_type, udt_name| TypeFacts { data_type, udt_name, numeric: None, datetime_precision: None };
    let number = |data_type, udt_name, bits| TypeFacts { data_type, udt_name, numeric: Some((bits, 2, Some(0))), datetime_precision: None };
    let time = |data_type, udt_name, precision| TypeFacts { data_type, udt_name, numeric: None, datetime_precision: Some(precision) };
    match t {
        DataType::Boolean => plain("boolean", "bool"),
        DataType::Int8 | DataType::Int16 | DataType::UInt8 => number("smallint", "int2", 16),
        DataType::Int32 | DataType::UInt16 => number("integer", "int4", 32),
        DataType::Int64 | DataType::UInt32 => number("bigint", "int8", 64),
        DataType::Float16 | DataType::Float32 => TypeFacts { numeric: Some((24, 2, None)), ..plain("real", "float4") },
        DataType::Float64 => TypeFacts { numeric: Some((53, 2, None)), ..plain("double precision", "float8") },
        DataType::UInt64 => TypeFacts { numeric: Some((20, 10, Some(0))), ..plain("numeric", "numeric") },
        DataType::Decimal32(p, s) | DataType::Decimal64(p, s) | DataType::Decimal128(p, s) | DataType::Decimal256(p, s) => {
            TypeFacts { numeric: Some((i32::from(*p), 10, Some(i32::from(*s)))), ..plain("numeric", "numeric") }
        }
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => plain("text", "text"),
        DataType::Binary | DataType::LargeBinary | DataType::BinaryView | DataType::FixedSizeBinary(_) => plain("bytea", "bytea"),
        DataType::Date32 | DataType::Date64 => time("date", "date", 0),
        DataType::Timestamp(_, None) => time("timestamp without time zone", "timestamp", 6),
        DataType::Timestamp(_, Some(_)) => time("timestamp with time zone", "timestamptz", 6),
        DataType::Time32(_) | DataType::Time64(_) => time("time without time zone", "time", 6),
        DataType::Duration(_) | DataType::Interval(_) => time("interval", "interval", 6),
        DataType::Dictionary(_, v) => type_facts(v),
        _ => plain("USER-DEFINED", "unknown"),
    }
}

/// `information_schema.columns`: one row per column of every table and view, with
/// PostgreSQL's columns (the ones clients read; the character-set, collation, domain and
/// scope columns are NULL, as PostgreSQL has them for these types).
fn columns(tables: &[CatalogTable], database: &str) -> Result<RecordBatch> {
    let names_text = [
        "table_catalog",
        "table_schema",
        "table_name",
        "column_name",
        "column_default",
        "is_nullable",
        "data_type",
        "udt_catalog",
        "udt_schema",
        "udt_name",
        "is_identity",
        "identity_generation",
        "is_generated",
        "is_updatable",
    ];
    let (mut text_columns, mut ordinal, mut precision, mut radix, mut scale, mut datetime, mut octets) =
        (vec![Vec::<Option<String>>::new(); names_text.len()], vec![], vec![], vec![], vec![], vec![], vec![]);
    for t in tables {
        for (i, f) in t.schema.fields().iter().enumerate() {
            let facts = type_facts(f.data_type());
            let (default, identity) = match crate::pg_catalog::column_default_kind(t, f.name()) {
                Some(crate::pg_catalog::DefaultKind::Expression(text)) => (Some(text), None),
                Some(crate::pg_catalog::DefaultKind::Identity { always }) => (None, Some(if always { "ALWAYS" } else { "BY DEFAULT" })),
                None => (None, None),
            };
            let row: [Option<String>; 14] = [
                Some(database.to_string()),
                Some(SCHEMA_NAME.to_string()),
                Some(t.name.clone()),
                Some(f.name().clone()),
                default,
                Some(if f.is_nullable() { "YES" } else { "NO" }.to_string()),
                Some(facts.data_type.to_string()),
                Some(database.to_string()),
                Some("pg_catalog".to_string()),
                Some(facts.udt_name.to_string()),
                Some(if identity.is_some() { "YES" } else { "NO" }.to_string()),
                identity.map(str::to_string),
                Some("NEVER".to_string()),
                Some(if t.is_view() { "NO" } else { "YES" }.to_string()),
            ];
            for (column, value) in text_columns.iter_mut().zip(row) {
                column.push(value);
            }
            ordinal.push(Some(i as i32 + 1));
            precision.push(facts.numeric.map(|n| n.0));
            radix.push(facts.numeric.map(|n| n.1));
            scale.push(facts.numeric.and_then(|n| n.2));
            // PostgreSQL's largest text value, as it reports it for `text`.
            octets.push((facts.udt_name == "text").then_some(1_073_741_824));
            datetime.push(facts.datetime_precision);
        }
    }
    let mut fields: Vec<Field> = names_text.iter().map(|n| Field::new(*n, DataType::Utf8, true)).collect();
    let mut arrays: Vec<ArrayRef> = text_columns.into_iter().map(|c| Arc::new(StringArray::from(c)) as ArrayRef).collect();
    let no_limit = vec![None; ordinal.len()];
    for (name, values) in [
        ("ordinal_position", ordinal),
        ("numeric_precision", precision),
        ("numeric_precision_radix", radix),
        ("numeric_scale", scale),
        ("datetime_precision", datetime),
        ("character_maximum_length", no_limit),
        ("character_octet_length", octets),
    ] {
        fields.push(Field::new(name, DataType::Int32, true));
        arrays.push(Arc::new(Int32Array::from(values)));
    }
    // PostgreSQL's column order (of the columns kept), for `SELECT *`.
    const ORDER: [&str; 21] = [
        "table_catalog",
        "table_schema",
        "table_name",
        "column_name",
        "ordinal_position",
        "column_default",
        "is_nullable",
        "data_type",
        "character_maximum_length",
        "character_octet_length",
        "numeric_precision",
        "numeric_precision_radix",
        "numeric_scale",
        "datetime_precision",
        "udt_catalog",
        "udt_schema",
        "udt_name",
        "is_identity",
        "identity_generation",
        "is_generated",
        "is_updatable",
    ];
    debug_assert_eq!(fields.len(), ORDER.len());
    let position = |name: &str| fields.iter().position(|f| f.name() == name).ok_or_else(|| DataFusionError::Internal(format!("information_schema.columns lacks {name}")));
    let order: Vec<usize> = ORDER.iter().map(|n| position(n)).collect::<Result<_>>()?;
    let fields: Vec<Field> = order.iter().map(|&i| fields[i].clone()).collect();
    let arrays: Vec<ArrayRef> = order.iter().map(|&i| arrays[i].clone()).collect();
    Ok(RecordBatch::try_new(Arc::new(Schema::new(fields)), arrays)?)
}

/// (Re)registers the tables for `tables` and `keys` (`pg_keys::key_rows`).
pub fn register(ctx: &SessionContext, tables: &[CatalogTable], keys: &KeyRows, database: &str) -> Result<()> {
    let catalog = ctx.catalog("datafusion").ok_or_else(|| DataFusionError::Plan("no default catalog".into()))?;
    if catalog.schema(PG_INFORMATION_SCHEMA).is_none() {
        catalog.register_schema(PG_INFORMATION_SCHEMA, Arc::new(MemorySchemaProvider::new()))?;
    }
    let batches = [("views", views(tables, database)?), ("columns", columns(tables, database)?), ("table_constraints", keys.table_constraints.clone()), ("key_column_usage", keys.key_column_usage.clone())];
    debug_assert!(batches.iter().map(|(n, _)| *n).eq(TABLES), "every table pg_syntax points here is registered");
    for (name, b) in batches {
        let reference = TableReference::partial(PG_INFORMATION_SCHEMA, name);
        ctx.deregister_table(reference.clone())?;
        ctx.register_table(reference, Arc::new(MemTable::try_new(b.schema(), vec![vec![b]])?))?;
    }
    Ok(())
}
