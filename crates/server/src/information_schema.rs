//! The `information_schema` tables clients read that DataFusion's own information_schema
//! lacks or shapes differently: `views` (PostgreSQL's columns — `view_definition`,
//! `check_option`, `is_updatable`, … — and only views; DataFusion's lists every relation
//! with its own columns), `columns` (PostgreSQL's type names, `udt_name`, precision and
//! scale, `column_default`, identity: DataFusion's says `Int32` and knows no defaults),
//! `table_constraints` and `key_column_usage` (`pg_keys.rs`), `sequences` (DataFusion's has
//! none).
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
use crate::psql_catalog::{CatalogSequence, CatalogTable, SCHEMA_NAME};

/// Where the tables are registered.
pub const PG_INFORMATION_SCHEMA: &str = "pg_information_schema";
/// The `information_schema` tables answered from `PG_INFORMATION_SCHEMA`.
pub const TABLES: [&str; 5] = ["views", "columns", "table_constraints", "key_column_usage", "sequences"];

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

/// `information_schema.sequences`: one row per sequence, its numbers as text
/// (`character_data`, as PostgreSQL's), its type's precision as `columns` gives it.
/// Identity columns' sequences are not listed, as in PostgreSQL.
fn sequence_rows(sequences: &[CatalogSequence], database: &str) -> Result<RecordBatch> {
    let sequences: Vec<&CatalogSequence> = sequences.iter().filter(|s| !s.identity).collect();
    let n = sequences.len();
    let facts: Vec<TypeFacts> = sequences.iter().map(|s| type_facts(&s.data_type)).collect();
    let text = |name: &str| Field::new(name, DataType::Utf8, true);
    let int = |name: &str| Field::new(name, DataType::Int32, true);
    let numbers = |f: fn(&&CatalogSequence) -> i64| -> ArrayRef { Arc::new(StringArray::from_iter_values(sequences.iter().map(|s| f(s).to_string()))) };
    let fields = vec![
        text("sequence_catalog"),
        text("sequence_schema"),
        text("sequence_name"),
        text("data_type"),
        int("numeric_precision"),
        int("numeric_precision_radix"),
        int("numeric_scale"),
        text("start_value"),
        text("minimum_value"),
        text("maximum_value"),
        text("increment"),
        text("cycle_option"),
    ];
    let columns = vec![
        strings(std::iter::repeat_n(database, n)),
        strings(std::iter::repeat_n(SCHEMA_NAME, n)),
        strings(sequences.iter().map(|s| s.name.as_str())),
        strings(facts.iter().map(|f| f.data_type)),
        Arc::new(Int32Array::from_iter(facts.iter().map(|f| f.numeric.map(|(p, _, _)| p)))) as ArrayRef,
        Arc::new(Int32Array::from_iter(facts.iter().map(|f| f.numeric.map(|(_, r, _)| r)))),
        Arc::new(Int32Array::from_iter(facts.iter().map(|f| f.numeric.and_then(|(_, _, s)| s)))),
        numbers(|s| s.meta.start),
        numbers(|s| s.meta.min_value),
        numbers(|s| s.meta.max_value),
        numbers(|s| s.meta.increment),
        strings(std::iter::repeat_n("NO", n)),
    ];
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

/// The columns of PostgreSQL's `information_schema.columns` that flashscan fills (the
/// character-set, collation, domain and scope ones are NULL in PostgreSQL for these types
/// and left out), in PostgreSQL's order; `true` for an integer column.
const COLUMNS: [(&str, bool); 21] = [
    ("table_catalog", false),
    ("table_schema", false),
    ("table_name", false),
    ("column_name", false),
    ("ordinal_position", true),
    ("column_default", false),
    ("is_nullable", false),
    ("data_type", false),
    ("character_maximum_length", true),
    ("character_octet_length", true),
    ("numeric_precision", true),
    ("numeric_precision_radix", true),
    ("numeric_scale", true),
    ("datetime_precision", true),
    ("udt_catalog", false),
    ("udt_schema", false),
    ("udt_name", false),
    ("is_identity", false),
    ("identity_generation", false),
    ("is_generated", false),
    ("is_updatable", false),
];

/// One value of a row of `information_schema.columns`.
enum Cell {
    Text(Option<String>),
    Int(Option<i32>),
}

/// Column `position` (0-based) of `table`, as the cells of `COLUMNS`.
fn column_row(table: &CatalogTable, position: usize, field: &Field, database: &str) -> [Cell; 21] {
    let facts = type_facts(field.data_type());
    let (default, identity) = match crate::pg_catalog::column_default_kind(table, field.name()) {
        Some(crate::pg_catalog::DefaultKind::Expression(text)) => (Some(text), None),
        Some(crate::pg_catalog::DefaultKind::Identity { always }) => (None, Some(if always { "ALWAYS" } else { "BY DEFAULT" })),
        None => (None, None),
    };
    let text = |s: &str| Cell::Text(Some(s.to_string()));
    let yes_no = |yes: bool| text(if yes { "YES" } else { "NO" });
    [
        text(database),
        text(SCHEMA_NAME),
        text(&table.name),
        text(field.name()),
        Cell::Int(Some(position as i32 + 1)),
        Cell::Text(default),
        yes_no(field.is_nullable()),
        text(facts.data_type),
        Cell::Int(None),
        // PostgreSQL's largest text value, as it reports it for `text`.
        Cell::Int((facts.udt_name == "text").then_some(1_073_741_824)),
        Cell::Int(facts.numeric.map(|n| n.0)),
        Cell::Int(facts.numeric.map(|n| n.1)),
        Cell::Int(facts.numeric.and_then(|n| n.2)),
        Cell::Int(facts.datetime_precision),
        text(database),
        text("pg_catalog"),
        text(facts.udt_name),
        yes_no(identity.is_some()),
        Cell::Text(identity.map(str::to_string)),
        text("NEVER"),
        yes_no(!table.is_view()),
    ]
}

/// `information_schema.columns`: one row per column of every table and view, with
/// PostgreSQL's columns (`COLUMNS`).
fn columns(tables: &[CatalogTable], database: &str) -> Result<RecordBatch> {
    let mut texts: Vec<Vec<Option<String>>> = vec![Vec::new(); COLUMNS.len()];
    let mut ints: Vec<Vec<Option<i32>>> = vec![Vec::new(); COLUMNS.len()];
    for t in tables {
        for (i, f) in t.schema.fields().iter().enumerate() {
            for (c, cell) in column_row(t, i, f, database).into_iter().enumerate() {
                match cell {
                    Cell::Text(v) => texts[c].push(v),
                    Cell::Int(v) => ints[c].push(v),
                }
            }
        }
    }
    let fields: Vec<Field> = COLUMNS.iter().map(|(name, int)| Field::new(*name, if *int { DataType::Int32 } else { DataType::Utf8 }, true)).collect();
    let arrays: Vec<ArrayRef> = COLUMNS
        .iter()
        .zip(texts.into_iter().zip(ints))
        .map(|((_, int), (text, number))| if *int { Arc::new(Int32Array::from(number)) as ArrayRef } else { Arc::new(StringArray::from(text)) as ArrayRef })
        .collect();
    Ok(RecordBatch::try_new(Arc::new(Schema::new(fields)), arrays)?)
}

/// (Re)registers the tables for `tables`, `sequences` and `keys` (`pg_keys::key_rows`).
pub fn register(ctx: &SessionContext, tables: &[CatalogTable], sequences: &[CatalogSequence], keys: &KeyRows, database: &str) -> Result<()> {
    let catalog = ctx.catalog("datafusion").ok_or_else(|| DataFusionError::Plan("no default catalog".into()))?;
    if catalog.schema(PG_INFORMATION_SCHEMA).is_none() {
        catalog.register_schema(PG_INFORMATION_SCHEMA, Arc::new(MemorySchemaProvider::new()))?;
    }
    let batches = [("views", views(tables, database)?), ("columns", columns(tables, database)?), ("table_constraints", keys.table_constraints.clone()), ("key_column_usage", keys.key_column_usage.clone()), ("sequences", sequence_rows(sequences, database)?)];
    debug_assert!(batches.iter().map(|(n, _)| *n).eq(TABLES), "every table pg_syntax points here is registered");
    for (name, b) in batches {
        let reference = TableReference::partial(PG_INFORMATION_SCHEMA, name);
        ctx.deregister_table(reference.clone())?;
        ctx.register_table(reference, Arc::new(MemTable::try_new(b.schema(), vec![vec![b]])?))?;
    }
    Ok(())
}
