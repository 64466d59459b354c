//! Real `pg_catalog` tables, built from flashscan's catalog, for what drivers and BI tools
//! ask with ordinary SQL: `pg_catalog.pg_namespace`, `pg_class`, `pg_attribute`, `pg_type`,
//! `pg_database` (psql's `\l`), and the functions those queries call
//! (`pg_get_userbyid`, `pg_encoding_to_char`, `pg_table_is_visible`, `format_type`, and
//! what SQLAlchemy's PostgreSQL dialect asks: `version()`, `current_schema()`,
//! `pg_backend_pid()`, `has_table_privilege`, `obj_description`, … — `register_functions`).
//! `information_schema.tables` / `columns` are DataFusion's own (the session enables them).
//!
//! Small in-memory tables (DataFusion `MemTable`s in a `pg_catalog` schema), rebuilt when
//! the table list changes (start, CREATE/DROP TABLE). Why not `datafusion-pg-catalog`: it
//! turns on DataFusion's default features (parquet, compression codecs …), i.e. a second
//! build of the whole DataFusion tree in the shared target directory, for ~40 tables
//! flashscan has nothing to put in. psql's `\dt` and every step of `\d t` run on these
//! tables, their PostgreSQL spellings rewritten first (`pg_syntax.rs`); the tables of
//! what flashscan does not have (defaults, inheritance, policies, extended statistics,
//! publications, comments, enums, tablespaces, ranges) exist
//! with their columns and no rows. Beside this file: `pg_settings.rs` (settings,
//! `set_config`), `pg_proc.rs` (the session's functions), `pg_keys.rs` (indexes and keys:
//! `pg_index`, `pg_constraint` and their information_schema views from one list) and
//! `information_schema.rs` (the PostgreSQL-shaped information_schema tables).

use std::sync::Arc;

use arrow::array::{new_null_array, Array, ArrayRef, BooleanArray, Float32Array, Int32Array, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema};
use datafusion::catalog::{MemorySchemaProvider, SchemaProvider, TableProvider};
use datafusion::common::{ScalarValue, TableReference};
use datafusion::datasource::MemTable;
use datafusion::error::{DataFusionError, Result};
use datafusion::logical_expr::{create_udf, ColumnarValue, ScalarUDF, Volatility};
use datafusion::prelude::SessionContext;
use pgwire::api::Type;

use crate::psql_catalog::{pg_type_name, CatalogSequence, CatalogTable, OWNER_NAME, SCHEMA_NAME};
pub use crate::pg_settings::fixed_setting;

/// The schema the tables live in.
pub const PG_CATALOG: &str = "pg_catalog";
/// PostgreSQL's fixed oids: the `pg_catalog` and `public` namespaces, the bootstrap
/// superuser (the owner of everything here), the database.
const PG_CATALOG_OID: i64 = 11;
const PUBLIC_OID: i64 = 2200;
const INFORMATION_SCHEMA_OID: i64 = 13_000;
const OWNER_OID: i64 = 10;
const DATABASE_OID: i64 = 5;
/// The name `pg_database` lists (any name is accepted when connecting).
pub const DATABASE_NAME: &str = "flashscan";
/// PostgreSQL's encoding number for UTF8.
const UTF8_ENCODING: i32 = 6;

/// The types flashscan's columns map to, and what psycopg/JDBC look up by oid.
const TYPES: [Type; 17] = [
    Type::BOOL,
    Type::BYTEA,
    Type::CHAR,
    Type::NAME,
    Type::INT8,
    Type::INT2,
    Type::INT4,
    Type::TEXT,
    Type::OID,
    Type::FLOAT4,
    Type::FLOAT8,
    Type::VARCHAR,
    Type::DATE,
    Type::TIME,
    Type::TIMESTAMP,
    Type::TIMESTAMPTZ,
    Type::NUMERIC,
];

fn pg_type_of(t: &DataType) -> Type {
    arrow_pg::datatypes::into_pg_type(t).unwrap_or(Type::TEXT)
}

/// `atttypmod`: numeric packs (precision << 16 | scale) + 4, as PostgreSQL does; -1 otherwise.
fn typmod_of(t: &DataType) -> i32 {
    match t {
        DataType::Decimal32(p, s) | DataType::Decimal64(p, s) | DataType::Decimal128(p, s) | DataType::Decimal256(p, s) => {
            ((i32::from(*p) << 16) | (i32::from(*s) & 0xffff)) + 4
        }
        _ => -1,
    }
}

/// `typlen`: bytes of a fixed-size type, -1 for variable length.
fn typlen_of(t: &Type) -> i32 {
    match *t {
        Type::BOOL | Type::CHAR => 1,
        Type::INT2 => 2,
        Type::INT4 | Type::OID | Type::FLOAT4 | Type::DATE => 4,
        Type::INT8 | Type::FLOAT8 | Type::TIME | Type::TIMESTAMP | Type::TIMESTAMPTZ => 8,
        Type::NAME => 64,
        _ => -1,
    }
}

/// `attcollation` / `typcollation`: flashscan compares text bytewise, in one collation it
/// does not name, so no column or type names one (0, as PostgreSQL says of types that do
/// not collate) and `pg_collation` has no rows: psql's `\d` then shows no collation.
const NO_COLLATION_OID: i64 = 0;

/// `typarray`: the oid of the type's array type, as PostgreSQL numbers them (drivers such
/// as psycopg register the array type beside the type).
fn array_type_oid(t: &Type) -> i64 {
    let array = match *t {
        Type::BOOL => Type::BOOL_ARRAY,
        Type::BYTEA => Type::BYTEA_ARRAY,
        Type::CHAR => Type::CHAR_ARRAY,
        Type::NAME => Type::NAME_ARRAY,
        Type::INT8 => Type::INT8_ARRAY,
        Type::INT2 => Type::INT2_ARRAY,
        Type::INT4 => Type::INT4_ARRAY,
        Type::TEXT => Type::TEXT_ARRAY,
        Type::OID => Type::OID_ARRAY,
        Type::FLOAT4 => Type::FLOAT4_ARRAY,
        Type::FLOAT8 => Type::FLOAT8_ARRAY,
        Type::VARCHAR => Type::VARCHAR_ARRAY,
        Type::DATE => Type::DATE_ARRAY,
        Type::TIME => Type::TIME_ARRAY,
        Type::TIMESTAMP => Type::TIMESTAMP_ARRAY,
        Type::TIMESTAMPTZ => Type::TIMESTAMPTZ_ARRAY,
        Type::NUMERIC => Type::NUMERIC_ARRAY,
        _ => return 0,
    };
    i64::from(array.oid())
}

/// The name `regtype` prints for a type (PostgreSQL's `format_type` without a modifier):
/// the SQL standard's names where PostgreSQL uses them.
fn regtype_name_of(t: &Type) -> String {
    if let Some(e) = element_of(t) {
        return format!("{}[]", regtype_name_of(&e));
    }
    match *t {
        Type::BOOL => "boolean".into(),
        Type::CHAR => "\"char\"".into(),
        Type::INT8 => "bigint".into(),
        Type::INT2 => "smallint".into(),
        Type::INT4 => "integer".into(),
        Type::FLOAT4 => "real".into(),
        Type::FLOAT8 => "double precision".into(),
        Type::VARCHAR => "character varying".into(),
        Type::TIME => "time without time zone".into(),
        Type::TIMESTAMP => "timestamp without time zone".into(),
        Type::TIMESTAMPTZ => "timestamp with time zone".into(),
        ref other => other.name().to_string(),
    }
}

/// A type named as PostgreSQL's `regtype` input takes it: its `typname` (`int4`), its SQL
/// name (`integer`, `double precision`), a common alias (`int`, `float8`, `timestamptz`),
/// optionally `pg_catalog.`-qualified or quoted, any case; or its oid as a number. The
/// types are the ones `pg_type` lists.
fn type_of_name(name: &str) -> Option<Type> {
    let n = name.trim().trim_matches('"').to_ascii_lowercase();
    let n = n.strip_prefix("pg_catalog.").unwrap_or(&n).trim_matches('"').split_whitespace().collect::<Vec<_>>().join(" ");
    if let Ok(oid) = n.parse::<u32>() {
        return catalog_types().into_iter().find(|t| t.oid() == oid);
    }
    if let Some(element) = n.strip_suffix("[]") {
        return type_of_name(element).and_then(|e| Type::from_oid(array_type_oid(&e) as u32));
    }
    let alias = match n.as_str() {
        "int" | "integer" => "int4",
        "smallint" => "int2",
        "bigint" => "int8",
        "real" => "float4",
        "float" | "double precision" => "float8",
        "boolean" => "bool",
        "character varying" => "varchar",
        "decimal" => "numeric",
        "time without time zone" => "time",
        "timestamp without time zone" => "timestamp",
        "timestamp with time zone" => "timestamptz",
        other => other,
    };
    catalog_types().into_iter().find(|t| t.name() == alias)
}

fn text(name: &str) -> Field {
    Field::new(name, DataType::Utf8, true)
}

fn int64(name: &str) -> Field {
    Field::new(name, DataType::Int64, false)
}

fn int32(name: &str) -> Field {
    Field::new(name, DataType::Int32, false)
}

fn boolean(name: &str) -> Field {
    Field::new(name, DataType::Boolean, false)
}

fn batch(fields: Vec<Field>, columns: Vec<ArrayRef>) -> Result<RecordBatch> {
    Ok(RecordBatch::try_new(Arc::new(Schema::new(fields)), columns)?)
}

fn strings<'a>(v: impl IntoIterator<Item = &'a str>) -> ArrayRef {
    Arc::new(StringArray::from_iter_values(v))
}

fn namespaces() -> Result<RecordBatch> {
    batch(
        vec![int64("oid"), text("nspname"), int64("nspowner")],
        vec![
            Arc::new(Int64Array::from(vec![PG_CATALOG_OID, PUBLIC_OID, INFORMATION_SCHEMA_OID])),
            strings([PG_CATALOG, SCHEMA_NAME, "information_schema"]),
            Arc::new(Int64Array::from(vec![OWNER_OID; 3])),
        ],
    )
}

/// PostgreSQL's oid of its heap access method; flashscan's other storage formats get oids
/// from `AM_OID_FIRST` on, in name order.
const HEAP_AM_OID: i64 = 2;
const AM_OID_FIRST: i64 = 16_000;

/// The storage formats of `tables` as access methods: (oid, name), heap first.
fn access_methods(tables: &[CatalogTable]) -> Vec<(i64, String)> {
    let mut formats: Vec<&str> = tables.iter().filter(|t| !t.is_view()).map(|t| t.format.as_str()).filter(|f| *f != "heap").collect();
    formats.sort_unstable();
    formats.dedup();
    std::iter::once((HEAP_AM_OID, "heap".to_string())).chain(formats.into_iter().enumerate().map(|(i, f)| (AM_OID_FIRST + i as i64, f.to_string()))).collect()
}

/// `pg_am`: one row per storage format (psql's `\dt` joins it; `\d+` shows its name).
fn access_method_rows(tables: &[CatalogTable]) -> Result<RecordBatch> {
    let ams = access_methods(tables);
    // Table formats ('t'), then B-tree for the SQL indexes ('i').
    let rows: Vec<(i64, &str, &str)> = ams.iter().map(|a| (a.0, a.1.as_str(), "t")).chain(std::iter::once((BTREE_AM_OID, "btree", "i"))).collect();
    batch(
        vec![int64("oid"), text("amname"), text("amtype")],
        vec![
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|a| a.0))),
            strings(rows.iter().map(|a| a.1)),
            strings(rows.iter().map(|a| a.2)),
        ],
    )
}

/// PostgreSQL's oid and name of the B-tree access method: SQL indexes are listed under it
/// (`pg_am`), as PostgreSQL lists its default index kind.
const BTREE_AM_OID: i64 = 403;

/// One row of `pg_class`: a table, a view or an index.
struct ClassRow<'a> {
    oid: i64,
    name: &'a str,
    access_method: i64,
    /// 'r' a table, 'v' a view (psql's `\dv`), 'i' an index (`\di`), 'S' a sequence (`\ds`).
    kind: &'static str,
    columns: i32,
    has_index: bool,
}

fn classes(tables: &[CatalogTable], sequences: &[CatalogSequence]) -> Result<RecordBatch> {
    let ams = access_methods(tables);
    let am_of = |format: &str| ams.iter().find(|a| a.1 == format).map(|a| a.0).unwrap_or(HEAP_AM_OID);
    let keys = crate::pg_keys::sql_keys(tables);
    let rows: Vec<ClassRow> = tables
        .iter()
        .map(|t| ClassRow {
            oid: t.oid,
            name: t.name.as_str(),
            // The storage format stands where PostgreSQL names the access method (pg_am);
            // a view has none (0), as in PostgreSQL.
            access_method: if t.is_view() { 0 } else { am_of(&t.format) },
            kind: if t.is_view() { "v" } else { "r" },
            columns: t.schema.fields().len() as i32,
            has_index: !t.indexes.is_empty(),
        })
        // The SQL indexes, by the oids pg_index names them by (psql's `\d t` and `\di`,
        // SQLAlchemy's `get_indexes` join them here for their names).
        .chain(keys.iter().enumerate().map(|(i, k)| ClassRow {
            oid: crate::pg_keys::index_oid(i),
            name: k.index_name.as_str(),
            access_method: BTREE_AM_OID,
            kind: "i",
            columns: k.columns.len() as i32,
            has_index: false,
        }))
        // A sequence is a relation of three columns (last_value, log_cnt, is_called) with no
        // access method, as in PostgreSQL.
        .chain(sequences.iter().map(|s| ClassRow { oid: s.oid, name: s.name.as_str(), access_method: 0, kind: "S", columns: 3, has_index: false }))
        .collect();
    let n = rows.len();
    batch(
        vec![
            int64("oid"),
            text("relname"),
            int64("relnamespace"),
            int64("reltype"),
            int64("relowner"),
            int64("relam"),
            Field::new("reltuples", DataType::Float32, false),
            boolean("relhasindex"),
            text("relpersistence"),
            text("relkind"),
            int32("relnatts"),
            boolean("relispartition"),
            boolean("relrowsecurity"),
            // What psql's `\d t` reads beside: no checks, rules, triggers, tablespace,
            // typed tables, TOAST tables or partition bounds in flashscan.
            Field::new("relchecks", DataType::Int16, false),
            boolean("relhasrules"),
            boolean("relhastriggers"),
            boolean("relforcerowsecurity"),
            int64("reltablespace"),
            int64("reloftype"),
            text("relreplident"),
            int64("reltoastrelid"),
            text("relpartbound"),
            // Storage parameters (`WITH (…)`): SQLAlchemy's index reflection reads them.
            Field::new("reloptions", list_of(DataType::Utf8), true),
        ],
        vec![
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.oid))),
            strings(rows.iter().map(|r| r.name)),
            Arc::new(Int64Array::from(vec![PUBLIC_OID; n])),
            Arc::new(Int64Array::from(vec![0; n])),
            Arc::new(Int64Array::from(vec![OWNER_OID; n])),
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.access_method))),
            // -1: never analysed, as PostgreSQL says before the first ANALYZE.
            Arc::new(Float32Array::from(vec![-1.0; n])),
            Arc::new(BooleanArray::from_iter(rows.iter().map(|r| Some(r.has_index)))),
            strings(std::iter::repeat_n("p", n)),
            strings(rows.iter().map(|r| r.kind)),
            Arc::new(Int32Array::from_iter_values(rows.iter().map(|r| r.columns))),
            Arc::new(BooleanArray::from(vec![false; n])),
            Arc::new(BooleanArray::from(vec![false; n])),
            Arc::new(arrow::array::Int16Array::from(vec![0; n])),
            Arc::new(BooleanArray::from(vec![false; n])),
            Arc::new(BooleanArray::from(vec![false; n])),
            Arc::new(BooleanArray::from(vec![false; n])),
            Arc::new(Int64Array::from(vec![0; n])),
            Arc::new(Int64Array::from(vec![0; n])),
            // 'd': the default replica identity, as PostgreSQL says for a table; 'n'
            // (nothing) for a view or an index.
            strings(rows.iter().map(|r| if r.kind == "r" { "d" } else { "n" })),
            Arc::new(Int64Array::from(vec![0; n])),
            new_null_array(&DataType::Utf8, n),
            new_null_array(&list_of(DataType::Utf8), n),
        ],
    )
}

/// `pg_sequence`: one row per sequence (SERIAL and identity columns' and CREATE SEQUENCE's):
/// SQLAlchemy's identity reflection and psql's `\d sequence` read it. flashscan's
/// sequences cache nothing per session and never cycle.
fn pg_sequences(sequences: &[CatalogSequence]) -> Result<RecordBatch> {
    let numbers: Vec<[i64; 7]> = sequences.iter().map(sequence_numbers).collect();
    let mut fields: Vec<Field> = SEQUENCE_NUMBER_COLUMNS.iter().map(|name| int64(name)).collect();
    fields.push(boolean("seqcycle"));
    let mut columns: Vec<ArrayRef> = (0..SEQUENCE_NUMBER_COLUMNS.len()).map(|i| Arc::new(Int64Array::from_iter_values(numbers.iter().map(|v| v[i]))) as ArrayRef).collect();
    columns.push(Arc::new(BooleanArray::from(vec![false; sequences.len()])));
    batch(fields, columns)
}

/// `pg_depend`, for what flashscan has dependencies of: a SERIAL or identity column's
/// sequence on its column ('a' auto, 'i' internal for an identity, as PostgreSQL records
/// them) — psql's `\d sequence` prints "Owned by" from it.
fn dependencies(tables: &[CatalogTable], sequences: &[CatalogSequence]) -> Result<RecordBatch> {
    let pg_class = CATALOG_RELATION_OIDS.iter().find(|(n, _)| *n == "pg_class").map_or(1259, |(_, oid)| *oid);
    let mut rows: Vec<(i64, i64, i32, &'static str)> = Vec::new();
    for seq in sequences {
        let owner = tables.iter().find_map(|t| {
            let d = t.column_defaults.iter().find(|d| d.sequence.as_deref() == Some(seq.name.as_str()))?;
            let attnum = t.schema.index_of(&d.column).ok()? as i32 + 1;
            Some((t.oid, attnum, if d.identity || d.always { "i" } else { "a" }))
        });
        if let Some((table, attnum, kind)) = owner {
            rows.push((seq.oid, table, attnum, kind));
        }
    }
    let n = rows.len();
    batch(
        vec![int64("classid"), int64("objid"), int32("objsubid"), int64("refclassid"), int64("refobjid"), int32("refobjsubid"), text("deptype")],
        vec![
            Arc::new(Int64Array::from(vec![pg_class; n])),
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.0))),
            Arc::new(Int32Array::from(vec![0; n])),
            Arc::new(Int64Array::from(vec![pg_class; n])),
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.1))),
            Arc::new(Int32Array::from_iter_values(rows.iter().map(|r| r.2))),
            strings(rows.iter().map(|r| r.3)),
        ],
    )
}

/// The columns of `pg_sequence` that hold numbers, and their values for one sequence.
const SEQUENCE_NUMBER_COLUMNS: [&str; 7] = ["seqrelid", "seqtypid", "seqstart", "seqincrement", "seqmax", "seqmin", "seqcache"];

fn sequence_numbers(s: &CatalogSequence) -> [i64; 7] {
    [s.oid, i64::from(pg_type_of(&s.data_type).oid()), s.meta.start, s.meta.increment, s.meta.max_value, s.meta.min_value, 1]
}

/// `pg_catalog.sequence_column(oid, column)`: column `column` of the `pg_sequence` row of
/// sequence `oid` (`seqcycle` as 0 / 1), NULL when no sequence has that oid — what
/// `pg_syntax::sequence_lookup` turns a catalog subquery keyed by `seqrelid` into.
fn sequence_column_udf(sequences: &[CatalogSequence]) -> ScalarUDF {
    let rows: Vec<(i64, [i64; 7])> = sequences.iter().map(|s| (s.oid, sequence_numbers(s))).collect();
    let f = Arc::new(move |args: &[ColumnarValue]| -> Result<ColumnarValue> {
        let rows_n = args.iter().find_map(|a| match a {
            ColumnarValue::Array(a) => Some(a.len()),
            ColumnarValue::Scalar(_) => None,
        });
        let n = rows_n.unwrap_or(1);
        let oids = arrow::compute::cast(&args.first().ok_or_else(|| DataFusionError::Plan("sequence_column(oid, column)".into()))?.to_array(n)?, &DataType::Int64)?;
        let columns = arrow::compute::cast(&args.get(1).ok_or_else(|| DataFusionError::Plan("sequence_column(oid, column)".into()))?.to_array(n)?, &DataType::Utf8)?;
        let (Some(oids), Some(columns)) = (oids.as_any().downcast_ref::<Int64Array>(), columns.as_any().downcast_ref::<StringArray>()) else {
            return Err(DataFusionError::Plan("sequence_column(oid, column) takes a bigint and a text".into()));
        };
        let out: Int64Array = oids
            .iter()
            .zip(columns.iter())
            .map(|(oid, column)| {
                let (_, values) = rows.iter().find(|(o, _)| Some(*o) == oid)?;
                match column? {
                    "seqcycle" => Some(0),
                    c => SEQUENCE_NUMBER_COLUMNS.iter().position(|name| *name == c).map(|i| values[i]),
                }
            })
            .collect();
        columnar(rows_n, Arc::new(out))
    });
    create_udf("pg_catalog.sequence_column", vec![DataType::Int64, DataType::Utf8], DataType::Int64, Volatility::Stable, f)
}

/// `pg_get_serial_sequence(table, column)`: the sequence a SERIAL or identity column draws
/// from, as `public.name`; NULL for a column without one (a `DEFAULT nextval('s')` the
/// user wrote is not the column's own, as in PostgreSQL). The table is read as SQL reads a
/// name (folded to lower case unless quoted, `public.` allowed); the column literally.
/// An unknown table or column is an error, as in PostgreSQL.
fn serial_sequence_udf(tables: &[CatalogTable]) -> ScalarUDF {
    let owned: Vec<(String, Vec<(String, Option<String>)>)> = tables
        .iter()
        .filter(|t| !t.is_view())
        .map(|t| {
            let columns = t.schema.fields().iter().map(|f| (f.name().clone(), t.column_defaults.iter().find(|d| d.column == *f.name()).and_then(|d| d.sequence.clone()))).collect();
            (t.name.clone(), columns)
        })
        .collect();
    let f = Arc::new(move |args: &[ColumnarValue]| -> Result<ColumnarValue> {
        let rows = args.iter().find_map(|a| match a {
            ColumnarValue::Array(a) => Some(a.len()),
            ColumnarValue::Scalar(_) => None,
        });
        let n = rows.unwrap_or(1);
        let texts = |i: usize| -> Result<StringArray> {
            let a = args.get(i).ok_or_else(|| DataFusionError::Plan("pg_get_serial_sequence(table, column) takes two arguments".into()))?.to_array(n)?;
            let a = arrow::compute::cast(&a, &DataType::Utf8)?;
            Ok(a.as_any().downcast_ref::<StringArray>().cloned().unwrap_or_else(|| StringArray::from(vec![None::<&str>; n])))
        };
        let (table_names, column_names) = (texts(0)?, texts(1)?);
        let mut out = Vec::with_capacity(n);
        for (table, column) in table_names.iter().zip(column_names.iter()) {
            let (Some(table), Some(column)) = (table, column) else {
                out.push(None);
                continue;
            };
            let name = sql_relation_name(table);
            let Some((_, columns)) = owned.iter().find(|(t, _)| *t == name) else {
                return Err(DataFusionError::Execution(format!("relation \"{table}\" does not exist")));
            };
            let Some((_, sequence)) = columns.iter().find(|(c, _)| c == column) else {
                return Err(DataFusionError::Execution(format!("column \"{column}\" of relation \"{name}\" does not exist")));
            };
            out.push(sequence.as_ref().map(|s| format!("{SCHEMA_NAME}.{}", crate::pg_keys::quote_ident(s))));
        }
        columnar(rows, Arc::new(StringArray::from(out)))
    });
    create_udf("pg_get_serial_sequence", vec![DataType::Utf8, DataType::Utf8], DataType::Utf8, Volatility::Stable, f).with_aliases(["pg_catalog.pg_get_serial_sequence"])
}

/// A relation's name as SQL reads `text`: `public.` taken off, a quoted name as written,
/// an unquoted one folded to lower case.
fn sql_relation_name(text: &str) -> String {
    let text = text.trim();
    let last = match text.split_once('.') {
        Some((schema, rest)) if schema.trim_matches('"').eq_ignore_ascii_case(SCHEMA_NAME) => rest,
        _ => text,
    };
    match last.strip_prefix('"').and_then(|q| q.strip_suffix('"')) {
        Some(quoted) => quoted.replace("\"\"", "\""),
        None => last.to_ascii_lowercase(),
    }
}

/// `quote_ident(text)`: the name quoted where SQL needs it (psql's `\d sequence` prints the
/// owning column with it). Keywords are not quoted (PostgreSQL's are).
fn quote_ident_udf() -> ScalarUDF {
    let f = Arc::new(|args: &[ColumnarValue]| -> Result<ColumnarValue> {
        let (rows, texts) = text_argument(args)?;
        let out: StringArray = texts.iter().map(|t| t.map(crate::pg_keys::quote_ident)).collect();
        columnar(rows, Arc::new(out))
    });
    create_udf("quote_ident", vec![DataType::Utf8], DataType::Utf8, Volatility::Immutable, f).with_aliases(["pg_catalog.quote_ident"])
}

/// `pg_tables`: one row per table (views are `pg_views`'), in the one schema, with no
/// tablespace of its own, rules, triggers or row security.
fn pg_tables(tables: &[CatalogTable]) -> Result<RecordBatch> {
    let tables: Vec<&CatalogTable> = tables.iter().filter(|t| !t.is_view()).collect();
    let n = tables.len();
    let bool_field = |name: &str| Field::new(name, DataType::Boolean, true);
    batch(
        vec![text("schemaname"), text("tablename"), text("tableowner"), text("tablespace"), bool_field("hasindexes"), bool_field("hasrules"), bool_field("hastriggers"), bool_field("rowsecurity")],
        vec![
            strings(std::iter::repeat_n(SCHEMA_NAME, n)),
            strings(tables.iter().map(|t| t.name.as_str())),
            strings(std::iter::repeat_n(OWNER_NAME, n)),
            new_null_array(&DataType::Utf8, n),
            Arc::new(BooleanArray::from_iter(tables.iter().map(|t| Some(!t.indexes.is_empty())))),
            Arc::new(BooleanArray::from(vec![false; n])),
            Arc::new(BooleanArray::from(vec![false; n])),
            Arc::new(BooleanArray::from(vec![false; n])),
        ],
    )
}

/// `pg_views`: one row per view, its query as `definition`.
fn views(tables: &[CatalogTable]) -> Result<RecordBatch> {
    let views: Vec<&CatalogTable> = tables.iter().filter(|t| t.is_view()).collect();
    let n = views.len();
    batch(
        vec![text("schemaname"), text("viewname"), text("viewowner"), text("definition")],
        vec![
            strings(std::iter::repeat_n(SCHEMA_NAME, n)),
            strings(views.iter().map(|v| v.name.as_str())),
            strings(std::iter::repeat_n(OWNER_NAME, n)),
            strings(views.iter().map(|v| v.view_definition.as_deref().unwrap_or_default())),
        ],
    )
}

/// `pg_get_viewdef(oid [, pretty])`: a view's query (psql's `\d+ view`); NULL for any other
/// oid, as PostgreSQL answers for a relation that is not a view.
fn viewdef_udf(definitions: Vec<(i64, String)>) -> ScalarUDF {
    definition_udf("pg_get_viewdef", definitions)
}

/// A function from an oid (its first argument; any others, such as `pretty`, change
/// nothing here) to the definition `definitions` holds for it, NULL for any other oid:
/// `pg_get_viewdef`, `pg_get_indexdef`, `pg_get_constraintdef`.
fn definition_udf(name: &'static str, definitions: Vec<(i64, String)>) -> ScalarUDF {
    #[derive(Debug, PartialEq, Eq, Hash)]
    struct ViewDef {
        name: &'static str,
        aliases: Vec<String>,
        signature: datafusion::logical_expr::Signature,
        definitions: Vec<(i64, String)>,
    }
    impl datafusion::logical_expr::ScalarUDFImpl for ViewDef {
        fn name(&self) -> &str {
            self.name
        }
        fn aliases(&self) -> &[String] {
            &self.aliases
        }
        fn signature(&self) -> &datafusion::logical_expr::Signature {
            &self.signature
        }
        fn return_type(&self, _args: &[DataType]) -> Result<DataType> {
            Ok(DataType::Utf8)
        }
        fn invoke_with_args(&self, args: datafusion::logical_expr::ScalarFunctionArgs) -> Result<ColumnarValue> {
            let rows = args.args.iter().find_map(|a| match a {
                ColumnarValue::Array(a) => Some(a.len()),
                ColumnarValue::Scalar(_) => None,
            });
            let oids = args.args.first().ok_or_else(|| DataFusionError::Plan(format!("{} takes an oid", self.name)))?.to_array(rows.unwrap_or(1))?;
            let oids = arrow::compute::cast(&oids, &DataType::Int64)?;
            let oids = oids.as_any().downcast_ref::<Int64Array>().ok_or_else(|| DataFusionError::Execution(format!("{}: an oid expected", self.name)))?;
            let out: StringArray = oids.iter().map(|oid| oid.and_then(|o| self.definitions.iter().find(|(v, _)| *v == o)).map(|(_, d)| d.as_str())).collect();
            columnar(rows, Arc::new(out))
        }
    }
    ScalarUDF::new_from_impl(ViewDef {
        name,
        aliases: vec![format!("{PG_CATALOG}.{name}")],
        signature: datafusion::logical_expr::Signature::variadic_any(Volatility::Stable),
        definitions,
    })
}

fn attributes(tables: &[CatalogTable]) -> Result<RecordBatch> {
    let (mut relid, mut name, mut typid, mut num, mut notnull, mut typmod, mut len) = (vec![], vec![], vec![], vec![], vec![], vec![], vec![]);
    let (mut hasdef, mut identity) = (vec![], vec![]);
    for t in tables {
        for (i, f) in t.schema.fields().iter().enumerate() {
            let pg = pg_type_of(f.data_type());
            relid.push(t.oid);
            name.push(f.name().as_str());
            typid.push(i64::from(pg.oid()));
            num.push(i as i32 + 1);
            notnull.push(!f.is_nullable());
            typmod.push(typmod_of(f.data_type()));
            len.push(typlen_of(&pg));
            let kind = column_default_kind(t, f.name());
            hasdef.push(matches!(kind, Some(DefaultKind::Expression(_))));
            identity.push(match kind {
                Some(DefaultKind::Identity { always: true }) => "a",
                Some(DefaultKind::Identity { always: false }) => "d",
                _ => "",
            });
        }
    }
    let n = relid.len();
    batch(
        vec![
            int64("attrelid"),
            text("attname"),
            int64("atttypid"),
            int32("attlen"),
            int32("attnum"),
            int32("atttypmod"),
            boolean("attnotnull"),
            boolean("atthasdef"),
            boolean("attisdropped"),
            text("attidentity"),
            text("attgenerated"),
            int64("attcollation"),
        ],
        vec![
            Arc::new(Int64Array::from(relid)),
            strings(name),
            Arc::new(Int64Array::from(typid)),
            Arc::new(Int32Array::from(len)),
            Arc::new(Int32Array::from(num)),
            Arc::new(Int32Array::from(typmod)),
            Arc::new(BooleanArray::from(notnull)),
            Arc::new(BooleanArray::from(hasdef)),
            Arc::new(BooleanArray::from(vec![false; n])),
            strings(identity),
            strings(std::iter::repeat_n("", n)),
            Arc::new(Int64Array::from(vec![NO_COLLATION_OID; n])),
        ],
    )
}

/// What a column's DEFAULT is in PostgreSQL's catalog: an identity column has no
/// `pg_attrdef` row (its `attidentity` says 'a' or 'd'); any other default (a SERIAL's
/// `nextval`, a constant, `now()`) is an expression `pg_attrdef` holds.
pub(crate) enum DefaultKind {
    Identity { always: bool },
    Expression(String),
}

pub(crate) fn column_default_kind(table: &CatalogTable, column: &str) -> Option<DefaultKind> {
    let d = table.column_defaults.iter().find(|d| d.column.eq_ignore_ascii_case(column))?;
    // A catalog from before identities were marked: ALWAYS is one for sure.
    if d.identity || d.always {
        return Some(DefaultKind::Identity { always: d.always });
    }
    Some(DefaultKind::Expression(postgres_default_text(&d.sql)))
}

/// A default as PostgreSQL prints it (`pg_get_expr`): a sequence's name as a regclass.
fn postgres_default_text(sql: &str) -> String {
    match sql.strip_prefix("nextval('").and_then(|rest| rest.strip_suffix("')")) {
        Some(sequence) if !sequence.contains('\'') => format!("nextval('{sequence}'::regclass)"),
        _ => sql.to_string(),
    }
}

/// `pg_attrdef`: one row per column with a default that is not an identity.
fn attribute_defaults(tables: &[CatalogTable]) -> Result<RecordBatch> {
    let (mut oid, mut relid, mut num, mut bin) = (vec![], vec![], vec![], vec![]);
    for t in tables {
        for (i, f) in t.schema.fields().iter().enumerate() {
            if let Some(DefaultKind::Expression(text)) = column_default_kind(t, f.name()) {
                // PostgreSQL's oids of these rows are its own; unique here is what matters.
                oid.push(ATTRDEF_FIRST_OID + t.oid * 1_000 + i as i64 + 1);
                relid.push(t.oid);
                num.push(i as i16 + 1);
                bin.push(text);
            }
        }
    }
    batch(
        vec![int64("oid"), int64("adrelid"), Field::new("adnum", DataType::Int16, true), text("adbin")],
        vec![Arc::new(Int64Array::from(oid)), Arc::new(Int64Array::from(relid)), Arc::new(arrow::array::Int16Array::from(num)), strings(bin.iter().map(|s| s.as_str()))],
    )
}

/// `pg_catalog.attribute_default(relid, attnum)`: the text `pg_get_expr` gives for that
/// column's `pg_attrdef` row, NULL when it has none — what `pg_syntax::attrdef_lookup`
/// turns the catalog's correlated subquery over `pg_attrdef` into.
fn attribute_default_udf(tables: &[CatalogTable]) -> ScalarUDF {
    let mut texts: std::collections::HashMap<(i64, i64), String> = std::collections::HashMap::new();
    for t in tables {
        for (i, f) in t.schema.fields().iter().enumerate() {
            if let Some(DefaultKind::Expression(text)) = column_default_kind(t, f.name()) {
                texts.insert((t.oid, i as i64 + 1), text);
            }
        }
    }
    let f = Arc::new(move |args: &[ColumnarValue]| -> Result<ColumnarValue> {
        let rows = args.iter().find_map(|a| match a {
            ColumnarValue::Array(a) => Some(a.len()),
            ColumnarValue::Scalar(_) => None,
        });
        let n = rows.unwrap_or(1);
        let arrays: Vec<ArrayRef> = args.iter().map(|a| a.to_array(n)).collect::<Result<_>>()?;
        let (Some(relid), Some(num)) = (arrays.first().and_then(|a| a.as_any().downcast_ref::<Int64Array>()), arrays.get(1).and_then(|a| a.as_any().downcast_ref::<Int64Array>())) else {
            return Err(DataFusionError::Plan("attribute_default(relid, attnum) takes two bigints".into()));
        };
        let out: StringArray = relid.iter().zip(num.iter()).map(|(r, a)| texts.get(&(r?, a?)).map(|s| s.as_str())).collect();
        Ok(match rows {
            Some(_) => ColumnarValue::Array(Arc::new(out)),
            None => ColumnarValue::Scalar(ScalarValue::try_from_array(&out, 0)?),
        })
    });
    create_udf("attribute_default", vec![DataType::Int64, DataType::Int64], DataType::Utf8, Volatility::Stable, f).with_aliases(["pg_catalog.attribute_default"])
}

/// `pg_attrdef` oids count from here (above every table's oid).
const ATTRDEF_FIRST_OID: i64 = 1 << 40;

/// `pg_type.typtype` of every row `types` makes: base types only ('b'; arrays are base
/// types too). No domains ('d'), composite row types ('c'), enums ('e'), ranges ('r'),
/// multiranges ('m') or pseudo-types ('p'): `pg_syntax.rs` drops a `CASE WHEN
/// t.typtype = 'd' THEN …` arm over `pg_type` as one that never matches.
pub const TYPE_KINDS: [&str; 1] = ["b"];

/// The element type of an array type (`_int8` → int8), None for any other type.
fn element_of(t: &Type) -> Option<Type> {
    TYPES.iter().find(|e| array_type_oid(e) == i64::from(t.oid())).cloned()
}

/// The types `pg_type` lists: `TYPES` and their array types (asyncpg asks for `_int8` and
/// kin by oid before it decodes an array column, psycopg registers them by `typarray`).
fn catalog_types() -> Vec<Type> {
    let arrays = TYPES.iter().filter_map(|t| Type::from_oid(array_type_oid(t) as u32));
    TYPES.iter().cloned().chain(arrays).collect()
}

/// `typcategory`: PostgreSQL's letter for a base type's category ('A' for arrays is set
/// by the caller).
fn type_category(t: &Type) -> &'static str {
    match *t {
        Type::BOOL => "B",
        Type::INT2 | Type::INT4 | Type::INT8 | Type::OID | Type::FLOAT4 | Type::FLOAT8 | Type::NUMERIC => "N",
        Type::DATE | Type::TIME | Type::TIMESTAMP | Type::TIMESTAMPTZ => "D",
        Type::TEXT | Type::VARCHAR | Type::NAME | Type::CHAR => "S",
        _ => "U",
    }
}

fn types() -> Result<RecordBatch> {
    let all = catalog_types();
    let n = all.len();
    batch(
        vec![
            int64("oid"),
            text("typname"),
            int64("typnamespace"),
            int64("typowner"),
            int32("typlen"),
            text("typtype"),
            int64("typbasetype"),
            int32("typtypmod"),
            boolean("typnotnull"),
            int64("typrelid"),
            int64("typelem"),
            text("typdelim"),
            int64("typcollation"),
            int64("typarray"),
            text("typcategory"),
        ],
        vec![
            Arc::new(Int64Array::from_iter_values(all.iter().map(|t| i64::from(t.oid())))),
            strings(all.iter().map(|t| t.name())),
            Arc::new(Int64Array::from(vec![PG_CATALOG_OID; n])),
            Arc::new(Int64Array::from(vec![OWNER_OID; n])),
            Arc::new(Int32Array::from_iter_values(all.iter().map(typlen_of))),
            strings(std::iter::repeat_n(TYPE_KINDS[0], n)),
            Arc::new(Int64Array::from(vec![0; n])),
            Arc::new(Int32Array::from(vec![-1; n])),
            Arc::new(BooleanArray::from(vec![false; n])),
            Arc::new(Int64Array::from(vec![0; n])),
            Arc::new(Int64Array::from_iter_values(all.iter().map(|t| element_of(t).map_or(0, |e| i64::from(e.oid()))))),
            strings(std::iter::repeat_n(",", n)),
            Arc::new(Int64Array::from(vec![NO_COLLATION_OID; n])),
            Arc::new(Int64Array::from_iter_values(all.iter().map(array_type_oid))),
            strings(all.iter().map(|t| if element_of(t).is_some() { "A" } else { type_category(t) })),
        ],
    )
}

fn databases() -> Result<RecordBatch> {
    let acl = DataType::List(Arc::new(Field::new_list_field(DataType::Utf8, true)));
    batch(
        vec![
            int64("oid"),
            text("datname"),
            int64("datdba"),
            int32("encoding"),
            text("datlocprovider"),
            boolean("datistemplate"),
            boolean("datallowconn"),
            text("datcollate"),
            text("datctype"),
            text("daticulocale"),
            Field::new("datacl", acl.clone(), true),
        ],
        vec![
            Arc::new(Int64Array::from(vec![DATABASE_OID])),
            strings([DATABASE_NAME]),
            Arc::new(Int64Array::from(vec![OWNER_OID])),
            Arc::new(Int32Array::from(vec![UTF8_ENCODING])),
            strings(["c"]),
            Arc::new(BooleanArray::from(vec![false])),
            Arc::new(BooleanArray::from(vec![true])),
            strings(["C.UTF-8"]),
            strings(["C.UTF-8"]),
            new_null_array(&DataType::Utf8, 1),
            new_null_array(&acl, 1),
        ],
    )
}

fn list_of(t: DataType) -> DataType {
    DataType::List(Arc::new(Field::new_list_field(t, true)))
}

/// The catalog tables of what flashscan does not have: column defaults, collations (see
/// `NO_COLLATION_OID`), inheritance and partitions, row-level policies, extended
/// statistics, publications, indexes, constraints, triggers, rules, comments, sequences. They exist, with PostgreSQL's columns (those clients read), and no rows,
/// so queries over them plan and answer truthfully: nothing.
fn empty_tables() -> Vec<(&'static str, Vec<Field>)> {
    let b = |n: &str| Field::new(n, DataType::Boolean, true);
    let i = |n: &str| Field::new(n, DataType::Int64, true);
    let i32f = |n: &str| Field::new(n, DataType::Int32, true);
    let t = |n: &str| Field::new(n, DataType::Utf8, true);
    vec![
        ("pg_collation", vec![i("oid"), t("collname"), i("collnamespace"), t("collprovider")]),
        ("pg_inherits", vec![i("inhrelid"), i("inhparent"), i32f("inhseqno"), b("inhdetachpending")]),
        (
            "pg_policy",
            vec![i("oid"), t("polname"), i("polrelid"), t("polcmd"), b("polpermissive"), Field::new("polroles", list_of(DataType::Int64), true), t("polqual"), t("polwithcheck")],
        ),
        (
            "pg_statistic_ext",
            vec![i("oid"), i("stxrelid"), t("stxname"), i("stxnamespace"), i("stxowner"), i32f("stxstattarget"), Field::new("stxkind", list_of(DataType::Utf8), true)],
        ),
        ("pg_publication", vec![i("oid"), t("pubname"), i("pubowner"), b("puballtables"), b("pubinsert"), b("pubupdate"), b("pubdelete"), b("pubtruncate"), b("pubviaroot")]),
        ("pg_publication_rel", vec![i("oid"), i("prpubid"), i("prrelid"), t("prqual"), Field::new("prattrs", list_of(DataType::Int16), true)]),
        ("pg_publication_namespace", vec![i("oid"), i("pnpubid"), i("pnnspid")]),
        // Indexes and keys: their rows come from `pg_keys::key_rows` (none today).
        // Range types (none here): asyncpg's type introspection joins it.
        ("pg_range", vec![i("rngtypid"), i("rngsubtype"), i("rngmultitypid"), i("rngcollation"), i("rngsubopc"), t("rngcanonical"), t("rngsubdiff")]),
        // Comments (COMMENT ON): SQLAlchemy's reflection joins it for every column and table.
        ("pg_description", vec![i("objoid"), i("classoid"), i32f("objsubid"), t("description")]),
        // Operator classes of index columns (no indexes here) and enum labels (no enum
        // types): SQLAlchemy's index and enum reflection read them.
        ("pg_opclass", vec![i("oid"), i("opcmethod"), t("opcname"), i("opcnamespace"), i("opcowner"), i("opcfamily"), i("opcintype"), b("opcdefault"), i("opckeytype")]),
        ("pg_enum", vec![i("oid"), i("enumtypid"), Field::new("enumsortorder", DataType::Float32, true), t("enumlabel")]),
        // Tablespaces: every table is in the database's directory (`reltablespace` 0).
        ("pg_tablespace", vec![i("oid"), t("spcname"), i("spcowner"), Field::new("spcoptions", list_of(DataType::Utf8), true)]),
        ("pg_trigger", vec![i("oid"), i("tgrelid"), t("tgname"), i("tgfoid"), b("tgisinternal"), t("tgenabled")]),
        ("pg_rewrite", vec![i("oid"), t("rulename"), i("ev_class"), t("ev_type")]),
    ]
}

/// PostgreSQL's oids of its catalog tables (fixed since they were created, `pg_class.h`
/// and kin), for `'pg_catalog.pg_constraint'::regclass`: clients join `pg_description` on
/// `classoid = 'pg_catalog.pg_class'::regclass`. `pg_roles` is a view whose oid varies
/// between PostgreSQL builds: it takes the one of the table behind it, `pg_authid`.
const CATALOG_RELATION_OIDS: [(&str, i64); 30] = [
    ("pg_type", 1247),
    ("pg_attribute", 1249),
    ("pg_class", 1259),
    ("pg_roles", 1260),
    ("pg_database", 1262),
    ("pg_am", 2601),
    ("pg_attrdef", 2604),
    ("pg_constraint", 2606),
    ("pg_description", 2609),
    ("pg_index", 2610),
    ("pg_inherits", 2611),
    ("pg_namespace", 2615),
    ("pg_rewrite", 2618),
    ("pg_trigger", 2620),
    ("pg_sequence", 2224),
    ("pg_depend", 2608),
    ("pg_tablespace", 1213),
    ("pg_opclass", 2616),
    ("pg_enum", 3501),
    ("pg_policy", 3256),
    ("pg_statistic_ext", 3381),
    ("pg_collation", 3456),
    ("pg_publication", 6104),
    ("pg_publication_rel", 6106),
    ("pg_publication_namespace", 6237),
    // A system view: its oid is given at initdb, not fixed; PostgreSQL 15.18's.
    ("pg_views", 12028),
    ("pg_tables", 12033),
    ("pg_settings", 12104),
    ("pg_proc", 1255),
    ("pg_range", 3541),
];

/// Whether the database has SQL indexes or keys, as `register` found them: kept in the
/// session's config (so each server and session answers for its own database). Until it
/// has some, `pg_index` and `pg_constraint` are empty too, and a client's statement over
/// them that flashscan cannot plan (SQLAlchemy's key reflection calls
/// `generate_subscripts`) is answered as no rows, as for the other empty tables. With keys
/// such a statement fails with its planning error: key reflection through those queries is
/// not supported yet.
/// Likewise `pg_attrdef` while no column has a default, and `pg_sequence` while there is
/// no sequence.
#[derive(Debug, Clone, Copy, Default)]
pub struct CatalogFilled {
    pub keys: bool,
    pub defaults: bool,
    pub sequences: bool,
}

/// The names of the catalog tables flashscan keeps empty (`empty_tables`), the key tables
/// while there are no keys, and `pg_attrdef` while there are no defaults.
pub fn empty_table_names(filled: CatalogFilled) -> Vec<&'static str> {
    let mut names: Vec<&'static str> = empty_tables().into_iter().map(|(name, _)| name).collect();
    if !filled.keys {
        names.extend(["pg_index", "pg_constraint"]);
    }
    if !filled.defaults {
        names.push("pg_attrdef");
    }
    if !filled.sequences {
        names.push("pg_sequence");
    }
    names
}

/// `pg_roles`: the one owner every object here has.
fn roles() -> Result<RecordBatch> {
    batch(
        vec![int64("oid"), text("rolname"), boolean("rolsuper"), boolean("rolcanlogin")],
        vec![
            Arc::new(Int64Array::from(vec![OWNER_OID])),
            strings([OWNER_NAME]),
            Arc::new(BooleanArray::from(vec![true])),
            Arc::new(BooleanArray::from(vec![true])),
        ],
    )
}

/// The default schema with PostgreSQL's search path behind it: a name the schema does not
/// have is looked up in `pg_catalog` (PostgreSQL searches `pg_catalog` implicitly, so
/// drivers and people write `pg_class`, `pg_type` unqualified). The schema's own tables
/// come first — a user's table is never hidden — and only they are listed
/// (`information_schema.tables`, `\dt`); registering and dropping go to the schema itself.
#[derive(Debug)]
struct SearchPath {
    own: Arc<dyn SchemaProvider>,
    pg_catalog: Arc<dyn SchemaProvider>,
}

#[async_trait::async_trait]
impl SchemaProvider for SearchPath {
    fn owner_name(&self) -> Option<&str> {
        self.own.owner_name()
    }

    fn table_names(&self) -> Vec<String> {
        self.own.table_names()
    }

    async fn table(&self, name: &str) -> Result<Option<Arc<dyn TableProvider>>> {
        match self.own.table(name).await? {
            Some(t) => Ok(Some(t)),
            None => self.pg_catalog.table(name).await,
        }
    }

    fn register_table(&self, name: String, table: Arc<dyn TableProvider>) -> Result<Option<Arc<dyn TableProvider>>> {
        self.own.register_table(name, table)
    }

    fn deregister_table(&self, name: &str) -> Result<Option<Arc<dyn TableProvider>>> {
        self.own.deregister_table(name)
    }

    fn table_exist(&self, name: &str) -> bool {
        self.own.table_exist(name)
    }
}

/// (Re)registers the `pg_catalog` tables for `tables` and `sequences`, and (once) puts them
/// on the default schema's search path. Plans already made keep the tables they were made
/// with.
pub fn register(ctx: &SessionContext, tables: &[CatalogTable], sequences: &[CatalogSequence]) -> Result<()> {
    let keys = crate::pg_keys::key_rows(tables, &crate::pg_keys::sql_keys(tables), DATABASE_NAME)?;
    let defaults = tables.iter().any(|t| t.column_defaults.iter().any(|d| matches!(column_default_kind(t, &d.column), Some(DefaultKind::Expression(_)))));
    ctx.state_ref().write().config_mut().set_extension(Arc::new(CatalogFilled { keys: keys.pg_index.num_rows() > 0, defaults, sequences: !sequences.is_empty() }));
    crate::information_schema::register(ctx, tables, sequences, &keys, DATABASE_NAME)?;
    // The functions first: `pg_proc` lists them.
    // `regclass` looks names up among the tables of the moment.
    let relations: Vec<(i64, String)> = tables.iter().map(|t| (t.oid, t.name.clone())).chain(sequences.iter().map(|s| (s.oid, s.name.clone()))).collect();
    ctx.register_udf(attribute_default_udf(tables));
    ctx.register_udf(serial_sequence_udf(tables));
    ctx.register_udf(sequence_column_udf(sequences));
    ctx.register_udf(viewdef_udf(tables.iter().filter_map(|t| t.view_definition.clone().map(|d| (t.oid, d))).collect()));
    // `pg_get_indexdef(oid [, column, pretty])`, `pg_get_constraintdef(oid [, pretty])`: the
    // definition of an index or key `pg_keys` lists; NULL for any other oid.
    ctx.register_udf(definition_udf("pg_get_indexdef", keys.index_definitions.clone()));
    ctx.register_udf(definition_udf("pg_get_constraintdef", keys.constraint_definitions.clone()));
    ctx.register_udf(oid_alias_udf("regclass_oid", OidLookup::Classes(relations.clone()), true));
    ctx.register_udf(oid_alias_udf("regclass_name", OidLookup::Classes(relations.clone()), false));
    ctx.register_udf(to_reg_udf("to_regclass", "pg_catalog.to_regclass", OidLookup::Classes(relations)));
    let catalog = ctx.catalog("datafusion").ok_or_else(|| DataFusionError::Plan("no default catalog".into()))?;
    if catalog.schema(PG_CATALOG).is_none() {
        catalog.register_schema(PG_CATALOG, Arc::new(MemorySchemaProvider::new()))?;
    }
    let default_schema = ctx.state().config().options().catalog.default_schema.clone();
    if let (Some(own), Some(pg_catalog)) = (catalog.schema(&default_schema), catalog.schema(PG_CATALOG)) {
        if !own.as_ref().is::<SearchPath>() {
            catalog.register_schema(&default_schema, Arc::new(SearchPath { own, pg_catalog }))?;
        }
    }
    for (name, b) in [
        ("pg_namespace", namespaces()?),
        ("pg_class", classes(tables, sequences)?),
        ("pg_sequence", pg_sequences(sequences)?),
        ("pg_depend", dependencies(tables, sequences)?),
        ("pg_attribute", attributes(tables)?),
        ("pg_attrdef", attribute_defaults(tables)?),
        ("pg_type", types()?),
        ("pg_database", databases()?),
        ("pg_am", access_method_rows(tables)?),
        ("pg_roles", roles()?),
        ("pg_views", views(tables)?),
        ("pg_tables", pg_tables(tables)?),
        ("pg_settings", crate::pg_settings::settings()?),
        ("pg_proc", crate::pg_proc::functions(&ctx.state())?),
    ]
    .into_iter()
    .chain(empty_tables().into_iter().map(|(name, fields)| (name, RecordBatch::new_empty(Arc::new(Schema::new(fields))))))
    .chain([("pg_index", keys.pg_index.clone()), ("pg_constraint", keys.pg_constraint.clone())])
    {
        let reference = TableReference::partial(PG_CATALOG, name);
        ctx.deregister_table(reference.clone())?;
        ctx.register_table(reference, Arc::new(MemTable::try_new(b.schema(), vec![vec![b]])?))?;
    }
    Ok(())
}

/// The names an object-identifier type (`regtype`, `regclass`, `regnamespace`) maps.
#[derive(Debug, Clone)]
enum OidLookup {
    Types,
    Classes(Vec<(i64, String)>),
    Namespaces,
}

/// The lookups' kinds, with the SQLSTATE PostgreSQL gives when a name is not found:
/// `'x'::regtype` → 42704 undefined_object, `'x'::regclass` → 42P01 undefined_table,
/// `'x'::regnamespace` → 3F000 invalid_schema_name.
const OID_LOOKUP_KINDS: [(&str, &str); 3] =
    [("type", crate::error::sqlstate::UNDEFINED_OBJECT), ("relation", crate::error::sqlstate::UNDEFINED_TABLE), ("schema", crate::error::sqlstate::INVALID_SCHEMA_NAME)];

/// The SQLSTATE of a lookup's "<kind> "<name>" does not exist" error (`oid_alias_udf`),
/// found in a DataFusion execution error's text; None for any other error.
pub fn undefined_object_sqlstate(message: &str) -> Option<&'static str> {
    let at = message.find(" does not exist")?;
    let head = &message[..at];
    OID_LOOKUP_KINDS.iter().find(|(kind, _)| head.rfind(&format!("{kind} \"")).is_some_and(|i| head[i..].ends_with('"'))).map(|(_, code)| *code)
}

impl OidLookup {
    fn kind(&self) -> &'static str {
        let i = match self {
            OidLookup::Types => 0,
            OidLookup::Classes(_) => 1,
            OidLookup::Namespaces => 2,
        };
        OID_LOOKUP_KINDS[i].0
    }

    /// (oid, name as PostgreSQL prints it) of a name or of an oid written as a number.
    fn find(&self, text: &str) -> Option<(i64, String)> {
        let number = text.trim().parse::<i64>().ok();
        match self {
            OidLookup::Types => type_of_name(text).map(|t| (i64::from(t.oid()), regtype_name_of(&t))),
            OidLookup::Classes(tables) => {
                let name = text.trim().trim_matches('"');
                // A user's table first (the search path, `SearchPath`), then the catalog's own.
                let (user, catalog) = match name.split_once('.') {
                    Some((schema, n)) if schema.eq_ignore_ascii_case(SCHEMA_NAME) => (Some(n), None),
                    Some((schema, n)) if schema.eq_ignore_ascii_case(PG_CATALOG) => (None, Some(n)),
                    _ => (Some(name), Some(name)),
                };
                let users = tables.iter().find(|(oid, n)| Some(*oid) == number || user.is_some_and(|u| n.eq_ignore_ascii_case(u))).cloned();
                users.or_else(|| {
                    CATALOG_RELATION_OIDS
                        .iter()
                        .find(|(n, oid)| Some(*oid) == number || catalog.is_some_and(|c| n.eq_ignore_ascii_case(c)))
                        .map(|(n, oid)| (*oid, n.to_string()))
                })
            }
            OidLookup::Namespaces => {
                let spaces = [(PG_CATALOG_OID, PG_CATALOG), (PUBLIC_OID, SCHEMA_NAME), (INFORMATION_SCHEMA_OID, "information_schema")];
                let name = text.trim().trim_matches('"');
                spaces.iter().find(|(oid, n)| Some(*oid) == number || n.eq_ignore_ascii_case(name)).map(|(o, n)| (*o, n.to_string()))
            }
        }
    }
}

/// The text arguments of a one-argument catalog function, whatever string type the
/// planner gave them.
fn text_argument(args: &[ColumnarValue]) -> Result<(Option<usize>, StringArray)> {
    let rows = args.iter().find_map(|a| match a {
        ColumnarValue::Array(a) => Some(a.len()),
        ColumnarValue::Scalar(_) => None,
    });
    let array = args.first().ok_or_else(|| DataFusionError::Plan("one argument expected".into()))?.to_array(rows.unwrap_or(1))?;
    let array = arrow::compute::cast(&array, &DataType::Utf8)?;
    let strings = array.as_any().downcast_ref::<StringArray>().ok_or_else(|| DataFusionError::Execution("a text argument expected".into()))?.clone();
    Ok((rows, strings))
}

fn columnar(rows: Option<usize>, out: ArrayRef) -> Result<ColumnarValue> {
    Ok(match rows {
        Some(_) => ColumnarValue::Array(out),
        None => ColumnarValue::Scalar(ScalarValue::try_from_array(&out, 0)?),
    })
}

/// `pg_catalog.<type>_oid(text)` (what `x::regtype` becomes, `pg_syntax.rs`): the object's
/// oid, or an error naming it, as PostgreSQL's cast fails (`type "x" does not exist`);
/// `pg_catalog.<type>_name(text)` (`x::regtype::text`): its name as PostgreSQL prints it.
fn oid_alias_udf(name: &'static str, lookup: OidLookup, to_oid: bool) -> ScalarUDF {
    let returns = if to_oid { DataType::Int64 } else { DataType::Utf8 };
    let f = Arc::new(move |args: &[ColumnarValue]| -> Result<ColumnarValue> {
        let (rows, texts) = text_argument(args)?;
        let mut oids = Vec::with_capacity(texts.len());
        let mut names = Vec::with_capacity(texts.len());
        for text in texts.iter() {
            match text {
                None => {
                    oids.push(None);
                    names.push(None);
                }
                Some(t) => match lookup.find(t) {
                    Some((oid, n)) => {
                        oids.push(Some(oid));
                        names.push(Some(n));
                    }
                    // Oid 0 (none: `typelem` of a type that is no array) prints as `-`.
                    None if !to_oid && t.trim() == "0" => {
                        oids.push(None);
                        names.push(Some("-".to_string()));
                    }
                    // An oid of nothing prints as its number, as PostgreSQL does.
                    None if !to_oid && t.trim().parse::<i64>().is_ok() => {
                        oids.push(None);
                        names.push(Some(t.trim().to_string()));
                    }
                    None => return Err(DataFusionError::Execution(format!("{} \"{t}\" does not exist", lookup.kind()))),
                },
            }
        }
        let out: ArrayRef = if to_oid { Arc::new(Int64Array::from(oids)) } else { Arc::new(StringArray::from(names)) };
        columnar(rows, out)
    });
    create_udf(&format!("{PG_CATALOG}.{name}"), vec![DataType::Utf8], returns, Volatility::Immutable, f)
}

/// `to_regtype(text)` / `to_regclass(text)`: the oid, or NULL when nothing has that name
/// (psycopg's `TypeInfo.fetch` asks with it).
fn to_reg_udf(name: &'static str, qualified: &'static str, lookup: OidLookup) -> ScalarUDF {
    let f = Arc::new(move |args: &[ColumnarValue]| -> Result<ColumnarValue> {
        let (rows, texts) = text_argument(args)?;
        let out: Int64Array = texts.iter().map(|t| t.and_then(|t| lookup.find(t)).map(|(oid, _)| oid)).collect();
        columnar(rows, Arc::new(out))
    });
    create_udf(name, vec![DataType::Utf8], DataType::Int64, Volatility::Immutable, f).with_aliases([qualified])
}

/// A function whose answer here is the same for any arguments:
/// `pg_get_statisticsobjdef_columns` (no extended statistics), `obj_description` (no
/// comments) … — NULL; `pg_relation_is_publishable` — false (no publications);
/// `has_table_privilege` … — true (one owner, `register_functions`).
fn null_answer_udf(name: &'static str, value: ScalarValue) -> ScalarUDF {
    any_args_udf(name, value, |value, _args, rows| sized(value.clone(), rows))
}

/// `value` as one row (`rows` None: scalar arguments only) or `rows` rows.
fn sized(value: ScalarValue, rows: Option<usize>) -> Result<ColumnarValue> {
    Ok(match rows {
        Some(n) => ColumnarValue::Array(value.to_array_of_size(n)?),
        None => ColumnarValue::Scalar(value),
    })
}

/// A catalog function taking any arguments, typed as `value` is, answering with `answer`
/// (given `value`, the arguments, and their row count when any is an array).
fn any_args_udf(name: &'static str, value: ScalarValue, answer: fn(&ScalarValue, &[ColumnarValue], Option<usize>) -> Result<ColumnarValue>) -> ScalarUDF {
    #[derive(Debug)]
    struct AnyArgs {
        name: String,
        aliases: Vec<String>,
        signature: datafusion::logical_expr::Signature,
        value: ScalarValue,
        answer: fn(&ScalarValue, &[ColumnarValue], Option<usize>) -> Result<ColumnarValue>,
    }
    // One answer per name: functions compare (and hash) by name, signature and value.
    impl PartialEq for AnyArgs {
        fn eq(&self, other: &Self) -> bool {
            (&self.name, &self.aliases, &self.signature, &self.value) == (&other.name, &other.aliases, &other.signature, &other.value)
        }
    }
    impl Eq for AnyArgs {}
    impl std::hash::Hash for AnyArgs {
        fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
            (&self.name, &self.aliases, &self.signature, &self.value).hash(state);
        }
    }
    impl datafusion::logical_expr::ScalarUDFImpl for AnyArgs {
        fn name(&self) -> &str {
            &self.name
        }
        fn aliases(&self) -> &[String] {
            &self.aliases
        }
        fn signature(&self) -> &datafusion::logical_expr::Signature {
            &self.signature
        }
        fn return_type(&self, _args: &[DataType]) -> Result<DataType> {
            Ok(self.value.data_type())
        }
        fn invoke_with_args(&self, args: datafusion::logical_expr::ScalarFunctionArgs) -> Result<ColumnarValue> {
            let rows = args.args.iter().find_map(|a| match a {
                ColumnarValue::Array(a) => Some(a.len()),
                ColumnarValue::Scalar(_) => None,
            });
            (self.answer)(&self.value, &args.args, rows)
        }
    }
    ScalarUDF::new_from_impl(AnyArgs {
        name: name.to_string(),
        aliases: vec![format!("{PG_CATALOG}.{name}")],
        signature: datafusion::logical_expr::Signature::variadic_any(Volatility::Immutable),
        value,
        answer,
    })
}

/// `pg_get_expr(expression, relation [, pretty])`: the expression's text. The catalog
/// columns it is called on (`pg_attrdef.adbin`) hold PostgreSQL's printed form already
/// (PostgreSQL keeps a parse tree there); a column of no text type (`relpartbound`,
/// `polqual`: always NULL here) gives NULL.
fn get_expr_udf() -> ScalarUDF {
    any_args_udf("pg_get_expr", ScalarValue::Utf8(None), |null, args, rows| {
        let is_text = |t: &DataType| matches!(t, DataType::Utf8 | DataType::Utf8View | DataType::LargeUtf8);
        match args.first() {
            Some(ColumnarValue::Array(a)) if is_text(a.data_type()) => Ok(ColumnarValue::Array(arrow::compute::cast(a, &DataType::Utf8)?)),
            Some(ColumnarValue::Scalar(v)) if is_text(&v.data_type()) => sized(v.cast_to(&DataType::Utf8)?, rows),
            _ => sized(null.clone(), rows),
        }
    })
}

/// A function of constant answer over one argument's rows (or one row for scalars).
fn constant_udf(name: &str, qualified: &'static str, inputs: Vec<DataType>, value: ScalarValue) -> ScalarUDF {
    let returns = value.data_type();
    let f = Arc::new(move |args: &[ColumnarValue]| -> Result<ColumnarValue> {
        let rows = args.iter().find_map(|a| match a {
            ColumnarValue::Array(a) => Some(a.len()),
            ColumnarValue::Scalar(_) => None,
        });
        sized(value.clone(), rows)
    });
    create_udf(name, inputs, returns, Volatility::Immutable, f).with_aliases([qualified])
}

/// PostgreSQL's `like_escape(pattern, escape)`: `pattern`, written with `escape` as its
/// escape character (one character, or none when empty), rewritten with backslash as its
/// escape, the only one DataFusion's LIKE runs (`pg_syntax.rs` turns `LIKE p ESCAPE 'c'`
/// into `LIKE like_escape(p, 'c')`).
fn like_escape(pattern: &str, escape: &str) -> std::result::Result<String, &'static str> {
    let mut escape_chars = escape.chars();
    let escape = match (escape_chars.next(), escape_chars.next()) {
        (None, _) => None,
        (Some(c), None) => Some(c),
        _ => return Err("invalid escape string: it must be empty or one character"),
    };
    let mut out = String::with_capacity(pattern.len() + 2);
    let mut chars = pattern.chars();
    while let Some(c) = chars.next() {
        if Some(c) == escape {
            let escaped = chars.next().ok_or("LIKE pattern must not end with escape character")?;
            out.push('\\');
            out.push(escaped);
        } else if c == '\\' {
            // A backslash that is not the escape character stands for itself.
            out.push_str("\\\\");
        } else {
            out.push(c);
        }
    }
    Ok(out)
}

fn like_escape_udf() -> ScalarUDF {
    let f = Arc::new(|args: &[ColumnarValue]| -> Result<ColumnarValue> {
        let rows = args.iter().find_map(|a| match a {
            ColumnarValue::Array(a) => Some(a.len()),
            ColumnarValue::Scalar(_) => None,
        });
        let texts: Vec<StringArray> = args
            .iter()
            .map(|a| {
                let array = arrow::compute::cast(&a.to_array(rows.unwrap_or(1))?, &DataType::Utf8)?;
                array.as_any().downcast_ref::<StringArray>().cloned().ok_or_else(|| DataFusionError::Execution("like_escape: text arguments expected".into()))
            })
            .collect::<Result<_>>()?;
        let [patterns, escapes] = texts.as_slice() else { return Err(DataFusionError::Execution("like_escape takes a pattern and an escape character".into())) };
        let out: StringArray = patterns
            .iter()
            .zip(escapes.iter())
            .map(|(p, e)| match (p, e) {
                (Some(p), Some(e)) => like_escape(p, e).map(Some).map_err(|m| DataFusionError::Execution(m.into())),
                _ => Ok(None),
            })
            .collect::<Result<_>>()?;
        columnar(rows, Arc::new(out))
    });
    create_udf("like_escape", vec![DataType::Utf8, DataType::Utf8], DataType::Utf8, Volatility::Immutable, f).with_aliases(["pg_catalog.like_escape"])
}

/// `format_type(type_oid, typmod)`: the type's SQL name, `numeric(p,s)` with its typmod.
fn format_type_udf() -> ScalarUDF {
    let f = Arc::new(|args: &[ColumnarValue]| -> Result<ColumnarValue> {
        let rows = args.iter().find_map(|a| match a {
            ColumnarValue::Array(a) => Some(a.len()),
            ColumnarValue::Scalar(_) => None,
        });
        let arrays: Vec<ArrayRef> = args.iter().map(|a| a.to_array(rows.unwrap_or(1))).collect::<Result<_>>()?;
        let oids = arrays[0].as_any().downcast_ref::<Int64Array>().ok_or_else(|| DataFusionError::Execution("format_type: oid must be an integer".into()))?;
        let mods = arrow::compute::cast(&arrays[1], &DataType::Int32)?;
        let mods = mods.as_any().downcast_ref::<Int32Array>().ok_or_else(|| DataFusionError::Execution("format_type: typmod must be an integer".into()))?;
        let names: StringArray = (0..oids.len())
            .map(|i| {
                if oids.is_null(i) {
                    return None;
                }
                let t = Type::from_oid(oids.value(i) as u32)?;
                let m = if mods.is_null(i) { -1 } else { mods.value(i) };
                if let Some(e) = element_of(&t) {
                    return Some(format!("{}[]", regtype_name_of(&e)));
                }
                Some(match t {
                    Type::NUMERIC if m >= 4 => format!("numeric({},{})", (m - 4) >> 16, (m - 4) & 0xffff),
                    Type::INT8 => pg_type_name(&DataType::Int64),
                    Type::INT4 => pg_type_name(&DataType::Int32),
                    Type::INT2 => pg_type_name(&DataType::Int16),
                    Type::FLOAT8 => pg_type_name(&DataType::Float64),
                    Type::FLOAT4 => pg_type_name(&DataType::Float32),
                    Type::TIMESTAMP => pg_type_name(&DataType::Timestamp(arrow::datatypes::TimeUnit::Microsecond, None)),
                    Type::TIMESTAMPTZ => pg_type_name(&DataType::Timestamp(arrow::datatypes::TimeUnit::Microsecond, Some("UTC".into()))),
                    Type::TIME => pg_type_name(&DataType::Time64(arrow::datatypes::TimeUnit::Microsecond)),
                    Type::BOOL => pg_type_name(&DataType::Boolean),
                    Type::VARCHAR => "character varying".into(),
                    other => other.name().to_string(),
                })
            })
            .collect();
        let out: ArrayRef = Arc::new(names);
        Ok(match rows {
            Some(_) => ColumnarValue::Array(out),
            None => ColumnarValue::Scalar(ScalarValue::try_from_array(&out, 0)?),
        })
    });
    create_udf("format_type", vec![DataType::Int64, DataType::Int64], DataType::Utf8, Volatility::Immutable, f).with_aliases(["pg_catalog.format_type"])
}

/// `pg_catalog.array_to_string(text[], sep)` for `pg_database.datacl` (psql's `\l`): the
/// elements joined, NULL elements skipped, as PostgreSQL does.
fn array_to_string_udf() -> ScalarUDF {
    let list = DataType::List(Arc::new(Field::new_list_field(DataType::Utf8, true)));
    let f = Arc::new(|args: &[ColumnarValue]| -> Result<ColumnarValue> {
        let rows = args.iter().find_map(|a| match a {
            ColumnarValue::Array(a) => Some(a.len()),
            ColumnarValue::Scalar(_) => None,
        });
        let arrays: Vec<ArrayRef> = args.iter().map(|a| a.to_array(rows.unwrap_or(1))).collect::<Result<_>>()?;
        let lists = arrays[0].as_any().downcast_ref::<arrow::array::ListArray>().ok_or_else(|| DataFusionError::Execution("array_to_string: a text[] first".into()))?;
        let seps = arrays[1].as_any().downcast_ref::<StringArray>().ok_or_else(|| DataFusionError::Execution("array_to_string: a text separator".into()))?;
        let out: StringArray = (0..lists.len())
            .map(|i| {
                if lists.is_null(i) || seps.is_null(i) {
                    return None;
                }
                let v = lists.value(i);
                let v = v.as_any().downcast_ref::<StringArray>()?;
                Some(v.iter().flatten().collect::<Vec<_>>().join(seps.value(i)))
            })
            .collect();
        let out: ArrayRef = Arc::new(out);
        Ok(match rows {
            Some(_) => ColumnarValue::Array(out),
            None => ColumnarValue::Scalar(ScalarValue::try_from_array(&out, 0)?),
        })
    });
    create_udf("pg_catalog.array_to_string", vec![list, DataType::Utf8], DataType::Utf8, Volatility::Immutable, f)
}

/// Registers the catalog functions (once, at start).
pub fn register_functions(ctx: &SessionContext) {
    ctx.register_udf(array_to_string_udf());
    ctx.register_udf(constant_udf("pg_get_userbyid", "pg_catalog.pg_get_userbyid", vec![DataType::Int64], ScalarValue::from(OWNER_NAME)));
    ctx.register_udf(constant_udf("pg_encoding_to_char", "pg_catalog.pg_encoding_to_char", vec![DataType::Int32], ScalarValue::from("UTF8")));
    // Every flashscan table is in `public`, on the search path.
    ctx.register_udf(constant_udf("pg_table_is_visible", "pg_catalog.pg_table_is_visible", vec![DataType::Int64], ScalarValue::Boolean(Some(true))));
    ctx.register_udf(format_type_udf());
    ctx.register_udf(oid_alias_udf("regtype_oid", OidLookup::Types, true));
    ctx.register_udf(oid_alias_udf("regtype_name", OidLookup::Types, false));
    ctx.register_udf(to_reg_udf("to_regtype", "pg_catalog.to_regtype", OidLookup::Types));
    ctx.register_udf(oid_alias_udf("regnamespace_oid", OidLookup::Namespaces, true));
    ctx.register_udf(oid_alias_udf("regnamespace_name", OidLookup::Namespaces, false));
    ctx.register_udf(get_expr_udf());
    ctx.register_udf(null_answer_udf("pg_get_statisticsobjdef_columns", ScalarValue::Utf8(None)));
    ctx.register_udf(null_answer_udf("pg_relation_is_publishable", ScalarValue::Boolean(Some(false))));
    // What SQLAlchemy's PostgreSQL dialect asks when it connects and reflects (docs/server.md,
    // "SQLAlchemy and pandas"). `version()` replaces DataFusion's own, which names
    // DataFusion: drivers read the server's version from it with a regex over
    // "PostgreSQL N.N".
    ctx.register_udf(constant_udf("version", "pg_catalog.version", vec![], ScalarValue::from(version_text())));
    ctx.register_udf(constant_udf("current_schema", "pg_catalog.current_schema", vec![], ScalarValue::from(SCHEMA_NAME)));
    ctx.register_udf(constant_udf("current_database", "pg_catalog.current_database", vec![], ScalarValue::from(DATABASE_NAME)));
    ctx.register_udf(backend_pid_udf());
    ctx.register_udf(crate::pg_json::json_build_object_udf());
    ctx.register_udf(quote_ident_udf());
    ctx.register_udf(crate::pg_json::when_then_udf());
    ctx.register_udf(like_escape_udf());
    ctx.register_udf(crate::pg_settings::current_setting_udf());
    ctx.register_udf(crate::pg_settings::set_config_udf());
    // One owner, and every connection acts as it (docs/server.md, "Authentication"): it
    // holds every privilege on every table and schema.
    for name in ["has_table_privilege", "has_schema_privilege", "has_database_privilege", "has_column_privilege"] {
        ctx.register_udf(null_answer_udf(name, ScalarValue::Boolean(Some(true))));
    }
    // Nothing here has a comment (COMMENT ON is not taken): NULL, as PostgreSQL answers
    // for an object without one.
    // (`pg_get_indexdef` / `pg_get_constraintdef` answer from `pg_keys`: `register`.)
    for name in ["obj_description", "col_description", "shobj_description"] {
        ctx.register_udf(null_answer_udf(name, ScalarValue::Utf8(None)));
    }
    // The one collation and every type are in pg_catalog, on the search path.
    for name in ["pg_collation_is_visible", "pg_type_is_visible"] {
        ctx.register_udf(null_answer_udf(name, ScalarValue::Boolean(Some(true))));
    }
}

/// The connection a query runs for, carried in its context's config
/// (`Shared::planning_state`): what `pg_backend_pid()` answers. Not a setting: `SET` cannot
/// change it and it lists no entries.
#[derive(Debug, Clone, Default)]
pub struct Connection {
    /// The process id the client was given at startup (its cancel key's).
    pub backend_pid: i32,
}

impl datafusion::common::config::ConfigExtension for Connection {
    const PREFIX: &'static str = "flashscan_connection";
}

impl datafusion::common::config::ExtensionOptions for Connection {
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }

    fn as_any_mut(&mut self) -> &mut dyn std::any::Any {
        self
    }

    fn cloned(&self) -> Box<dyn datafusion::common::config::ExtensionOptions> {
        Box::new(self.clone())
    }

    fn set(&mut self, key: &str, _value: &str) -> Result<()> {
        Err(DataFusionError::Configuration(format!("{key} is the server's to set")))
    }

    fn entries(&self) -> Vec<datafusion::common::config::ConfigEntry> {
        Vec::new()
    }
}

/// `pg_backend_pid()`: the pid of the connection running the query (0 outside a
/// connection, as in unit tests). Volatile, so the planner never folds it with another
/// context's config.
fn backend_pid_udf() -> ScalarUDF {
    #[derive(Debug, PartialEq, Eq, Hash)]
    struct BackendPid {
        aliases: Vec<String>,
        signature: datafusion::logical_expr::Signature,
    }
    impl datafusion::logical_expr::ScalarUDFImpl for BackendPid {
        fn name(&self) -> &str {
            "pg_backend_pid"
        }
        fn aliases(&self) -> &[String] {
            &self.aliases
        }
        fn signature(&self) -> &datafusion::logical_expr::Signature {
            &self.signature
        }
        fn return_type(&self, _args: &[DataType]) -> Result<DataType> {
            Ok(DataType::Int32)
        }
        fn invoke_with_args(&self, args: datafusion::logical_expr::ScalarFunctionArgs) -> Result<ColumnarValue> {
            let pid = args.config_options.extensions.get::<Connection>().map_or(0, |c| c.backend_pid);
            Ok(ColumnarValue::Scalar(ScalarValue::Int32(Some(pid))))
        }
    }
    ScalarUDF::new_from_impl(BackendPid {
        aliases: vec![format!("{PG_CATALOG}.pg_backend_pid")],
        signature: datafusion::logical_expr::Signature::exact(vec![], Volatility::Volatile),
    })
}

/// `version()`: PostgreSQL's shape ("PostgreSQL 15.0 (flashscan 0.1.0) on x86_64-linux,
/// 64-bit"), so clients that parse it (SQLAlchemy: `PostgreSQL (\d+)\.?(\d+)?`) read the
/// version `server_version` reports at startup.
fn version_text() -> String {
    format!("PostgreSQL {} on {}-{}, {}-bit", crate::startup::SERVER_VERSION, std::env::consts::ARCH, std::env::consts::OS, usize::BITS)
}

/// Plans a statement as the server does: PostgreSQL spellings normalised first
/// (`pg_syntax.rs`), then DataFusion. A statement DataFusion still cannot plan whose every
/// branch reads, by an inner or cross join, a catalog table flashscan keeps empty
/// (`empty_tables`) has no rows whatever its expressions say: it is answered as no rows
/// with its columns' names (as text), and anything else keeps DataFusion's error. (A
/// misspelt column or table is DataFusion's error, not this.)
pub async fn statement_to_plan(state: &datafusion::execution::session_state::SessionState, mut statement: datafusion::sql::parser::Statement) -> Result<datafusion::logical_expr::LogicalPlan> {
    let empty = empty_table_names(state.config().get_extension::<CatalogFilled>().map(|f| *f).unwrap_or_default());
    crate::pg_syntax::normalize(&mut statement, &empty);
    let no_rows = crate::pg_syntax::empty_result_columns(&statement, &empty);
    // Unaliased items go out under PostgreSQL's names (`count`, not `count(*)`).
    let postgres_names = flashscan_sql::output_names::postgres_names(&statement);
    let answer_no_rows = |names: Vec<String>| async move {
        let columns: Vec<String> = names.iter().map(|n| format!("CAST(NULL AS TEXT) AS \"{}\"", n.replace('"', "\"\""))).collect();
        state.create_logical_plan(&format!("SELECT {} WHERE false", columns.join(", "))).await
    };
    // `SELECT a AS c, b AS c`: planned with unique names, the client's kept beside them.
    match flashscan_sql::output_names::statement_to_plan(state, statement).await {
        // A name that does not exist stays an error (as in PostgreSQL), empty tables or not.
        Err(e) if matches!(e.find_root(), DataFusionError::SchemaError(..)) => Err(e),
        Err(e) => match no_rows {
            Some(names) => answer_no_rows(names).await,
            None => Err(e),
        },
        Ok(plan) => match no_rows {
            // Some statements DataFusion plans logically but cannot run (a subquery it
            // cannot decorrelate fails when made physical): checked only for statements
            // over the empty tables, so no other query is planned twice.
            Some(names) if state.create_physical_plan(&plan).await.is_err() => answer_no_rows(names).await,
            _ => match &postgres_names {
                Some(names) => flashscan_sql::output_names::name_like_postgres(plan, names),
                None => Ok(plan),
            },
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::util::pretty::pretty_format_batches;

    #[test]
    fn a_name_not_found_gets_postgresqls_sqlstate() {
        use crate::error::sqlstate;
        assert_eq!(undefined_object_sqlstate("Execution error: type \"no_such\" does not exist"), Some(sqlstate::UNDEFINED_OBJECT));
        assert_eq!(undefined_object_sqlstate("relation \"nope\" does not exist"), Some(sqlstate::UNDEFINED_TABLE));
        assert_eq!(undefined_object_sqlstate("schema \"s\" does not exist"), Some(sqlstate::INVALID_SCHEMA_NAME));
        assert_eq!(undefined_object_sqlstate("division by zero"), None);
        assert_eq!(undefined_object_sqlstate("file does not exist"), None);
    }

    fn tables() -> Vec<CatalogTable> {
        let schema = Arc::new(Schema::new(vec![
            Field::new("k", DataType::Int64, false),
            Field::new("price", DataType::Decimal128(12, 2), true),
            Field::new("name", DataType::Utf8, true),
        ]));
        vec![CatalogTable { oid: 16384, name: "items".into(), schema, format: "heap".into(), view_definition: None, indexes: Vec::new(), column_defaults: Vec::new() }]
    }

    async fn run(ctx: &SessionContext, sql: &str) -> String {
        let batches = ctx.sql(sql).await.unwrap_or_else(|e| panic!("{sql}: {e}")).collect().await.unwrap_or_else(|e| panic!("{sql}: {e}"));
        pretty_format_batches(&batches).map(|t| t.to_string()).unwrap_or_default()
    }

    #[tokio::test]
    async fn catalog_queries_of_drivers_answer_from_flashscans_tables() {
        let ctx = SessionContext::new();
        register_functions(&ctx);
        register(&ctx, &tables(), &[]).expect("register");
        let columns = run(
            &ctx,
            "SELECT a.attname, pg_catalog.format_type(a.atttypid, a.atttypmod) AS t, a.attnotnull FROM pg_catalog.pg_attribute a \
             JOIN pg_catalog.pg_class c ON c.oid = a.attrelid JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace \
             WHERE c.relname = 'items' AND n.nspname = 'public' AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum",
        )
        .await;
        for want in [["k", "bigint", "true"], ["price", "numeric(12,2)", "false"], ["name", "text", "false"]] {
            let cells = |l: &str| l.split('|').map(str::trim).filter(|c| !c.is_empty()).map(str::to_string).collect::<Vec<_>>();
            assert!(columns.lines().any(|l| cells(l) == want), "{want:?} in\n{columns}");
        }
        let types = run(&ctx, "SELECT t.typname FROM pg_catalog.pg_type t JOIN pg_catalog.pg_attribute a ON a.atttypid = t.oid ORDER BY a.attnum").await;
        assert!(types.contains("int8") && types.contains("numeric") && types.contains("text"), "{types}");
        let owner = run(&ctx, "SELECT pg_catalog.pg_get_userbyid(c.relowner) AS o FROM pg_catalog.pg_class c WHERE pg_catalog.pg_table_is_visible(c.oid)").await;
        assert!(owner.contains(OWNER_NAME), "{owner}");
        // psql's \l query.
        let l = run(&ctx, "SELECT d.datname, pg_catalog.pg_get_userbyid(d.datdba) AS owner, pg_catalog.pg_encoding_to_char(d.encoding) AS enc, \
             pg_catalog.array_to_string(d.datacl, E'\\n') AS acl FROM pg_catalog.pg_database d ORDER BY 1").await;
        assert!(l.contains(DATABASE_NAME) && l.contains("UTF8"), "{l}");
        // Re-registering (after CREATE/DROP TABLE) replaces the rows.
        register(&ctx, &[], &[]).expect("register again");
        assert!(!run(&ctx, "SELECT relname FROM pg_catalog.pg_class").await.contains("items"));
    }

    /// Plans as the server does: parsed, PostgreSQL spellings normalised, then planned.
    async fn run_normalized(ctx: &SessionContext, sql: &str) -> String {
        let state = ctx.state();
        let statement = state.sql_to_statement(sql, &datafusion::config::Dialect::PostgreSQL).unwrap_or_else(|e| panic!("{sql}: {e}"));
        let plan = statement_to_plan(&state, statement).await.unwrap_or_else(|e| panic!("{sql}: {e}"));
        let batches = ctx.execute_logical_plan(plan).await.expect("execute").collect().await.expect("collect");
        pretty_format_batches(&batches).map(|t| t.to_string()).unwrap_or_default()
    }

    /// psql 15's own `\dt`, `\dt PATTERN` and the first step of `\d TABLE`, verbatim
    /// (`psql -E` against PostgreSQL 15), run on the catalog tables.
    #[tokio::test]
    async fn psql_list_queries_run_on_the_catalog_tables() {
        let ctx = SessionContext::new();
        register_functions(&ctx);
        let mut two = tables();
        two.push(CatalogTable { oid: 16385, name: "lineitem".into(), schema: two[0].schema.clone(), format: "columnstore".into(), view_definition: None, indexes: Vec::new(), column_defaults: Vec::new() });
        register(&ctx, &two, &[]).expect("register");
        let dt = "SELECT n.nspname as \"Schema\",\n  c.relname as \"Name\",\n  CASE c.relkind WHEN 'r' THEN 'table' WHEN 'v' THEN 'view' WHEN 'm' THEN 'materialized view' WHEN 'i' THEN 'index' WHEN 'S' THEN 'sequence' WHEN 't' THEN 'TOAST table' WHEN 'f' THEN 'foreign table' WHEN 'p' THEN 'partitioned table' WHEN 'I' THEN 'partitioned index' END as \"Type\",\n  pg_catalog.pg_get_userbyid(c.relowner) as \"Owner\"\nFROM pg_catalog.pg_class c\n     LEFT JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace\n     LEFT JOIN pg_catalog.pg_am am ON am.oid = c.relam\nWHERE c.relkind IN ('r','p','')\n      AND n.nspname <> 'pg_catalog'\n      AND n.nspname !~ '^pg_toast'\n      AND n.nspname <> 'information_schema'\n  AND pg_catalog.pg_table_is_visible(c.oid)\nORDER BY 1,2;";
        let out = run_normalized(&ctx, dt).await;
        let rows: Vec<Vec<String>> = out
            .lines()
            .filter(|l| l.starts_with('|') && !l.contains("Schema"))
            .map(|l| l.split('|').map(str::trim).filter(|c| !c.is_empty()).map(str::to_string).collect())
            .collect();
        assert_eq!(rows, vec![vec!["public", "items", "table", OWNER_NAME], vec!["public", "lineitem", "table", OWNER_NAME]], "{out}");
        let dt_pattern = "SELECT n.nspname as \"Schema\",\n  c.relname as \"Name\",\n  CASE c.relkind WHEN 'r' THEN 'table' WHEN 'v' THEN 'view' WHEN 'm' THEN 'materialized view' WHEN 'i' THEN 'index' WHEN 'S' THEN 'sequence' WHEN 't' THEN 'TOAST table' WHEN 'f' THEN 'foreign table' WHEN 'p' THEN 'partitioned table' WHEN 'I' THEN 'partitioned index' END as \"Type\",\n  pg_catalog.pg_get_userbyid(c.relowner) as \"Owner\"\nFROM pg_catalog.pg_class c\n     LEFT JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace\n     LEFT JOIN pg_catalog.pg_am am ON am.oid = c.relam\nWHERE c.relkind IN ('r','p','t','s','')\n  AND c.relname OPERATOR(pg_catalog.~) '^(line.*)$' COLLATE pg_catalog.default\n  AND pg_catalog.pg_table_is_visible(c.oid)\nORDER BY 1,2;";
        let out = run_normalized(&ctx, dt_pattern).await;
        assert!(out.contains("lineitem") && !out.contains("items"), "{out}");
        let find = "SELECT c.oid,\n  n.nspname,\n  c.relname\nFROM pg_catalog.pg_class c\n     LEFT JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace\nWHERE c.relname OPERATOR(pg_catalog.~) '^(items)$' COLLATE pg_catalog.default\n  AND pg_catalog.pg_table_is_visible(c.oid)\nORDER BY 2, 3;";
        let out = run_normalized(&ctx, find).await;
        assert!(out.contains("16384") && out.contains("items") && !out.contains("lineitem"), "{out}");
        // The access method joined: heap and the column store.
        let am = run(&ctx, "SELECT c.relname, am.amname FROM pg_catalog.pg_class c JOIN pg_catalog.pg_am am ON am.oid = c.relam ORDER BY 1").await;
        assert!(am.contains("heap") && am.contains("columnstore"), "{am}");
        // Another collation than the default is not dropped: the planner decides (refuses).
        let state = ctx.state();
        let mut other = state.sql_to_statement("SELECT relname FROM pg_class WHERE relname = 'x' COLLATE \"C\"", &datafusion::config::Dialect::PostgreSQL).expect("parse");
        crate::pg_syntax::normalize(&mut other, &empty_table_names(CatalogFilled::default()));
        assert!(other.to_string().contains("COLLATE"), "{other}");
    }

    /// PostgreSQL's search path: `pg_class`, `pg_type` … without `pg_catalog.`; the
    /// default schema's own tables come first, stay the only ones listed, and tables
    /// registered after the wrapping land in the schema itself.
    #[tokio::test]
    async fn pg_catalog_is_on_the_search_path() {
        let ctx = SessionContext::new_with_config(datafusion::prelude::SessionConfig::new().with_information_schema(true));
        let user = |name: &str| {
            let b = batch(vec![text(name)], vec![strings(["a user's row"])]).expect("batch");
            Arc::new(MemTable::try_new(b.schema(), vec![vec![b]]).expect("table"))
        };
        ctx.register_table("pg_database", user("mine")).expect("a user table named like a catalog table");
        register_functions(&ctx);
        register(&ctx, &tables(), &[]).expect("register");
        register(&ctx, &tables(), &[]).expect("register again: wrapped once");
        let classes = run(&ctx, "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'public'").await;
        assert!(classes.contains("items"), "{classes}");
        let types = run(&ctx, "SELECT typname FROM pg_type WHERE oid = 20").await;
        assert!(types.contains("int8"), "{types}");
        // The user's own table wins over pg_catalog's.
        let mine = run(&ctx, "SELECT * FROM pg_database").await;
        assert!(mine.contains("a user's row") && !mine.contains(DATABASE_NAME), "{mine}");
        // Registered after the wrapping: in the schema, queryable, listed; catalog tables not listed.
        ctx.register_table("later", user("v")).expect("register later");
        assert!(run(&ctx, "SELECT v FROM later").await.contains("a user's row"));
        let listed = run(&ctx, "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' ORDER BY 1").await;
        assert!(listed.contains("later") && listed.contains("pg_database"), "{listed}");
        assert!(!listed.contains("pg_class") && !listed.contains("pg_type"), "{listed}");
        ctx.deregister_table("later").expect("deregister");
        assert!(ctx.sql("SELECT * FROM later").await.is_err());
    }

    /// psql 15's `\d TABLE` after its first step, verbatim (`psql -E` against PostgreSQL
    /// 15.20, `\d t`), oid 16385 = lineitem below.
    const PSQL_DESCRIBE: [&str; 7] = [
        "SELECT c.relchecks, c.relkind, c.relhasindex, c.relhasrules, c.relhastriggers, c.relrowsecurity, c.relforcerowsecurity, false AS relhasoids, c.relispartition, '', c.reltablespace, CASE WHEN c.reloftype = 0 THEN '' ELSE c.reloftype::pg_catalog.regtype::pg_catalog.text END, c.relpersistence, c.relreplident, am.amname\nFROM pg_catalog.pg_class c\n LEFT JOIN pg_catalog.pg_class tc ON (c.reltoastrelid = tc.oid)\nLEFT JOIN pg_catalog.pg_am am ON (c.relam = am.oid)\nWHERE c.oid = '16385';",
        "SELECT a.attname,\n  pg_catalog.format_type(a.atttypid, a.atttypmod),\n  (SELECT pg_catalog.pg_get_expr(d.adbin, d.adrelid, true)\n   FROM pg_catalog.pg_attrdef d\n   WHERE d.adrelid = a.attrelid AND d.adnum = a.attnum AND a.atthasdef),\n  a.attnotnull,\n  (SELECT c.collname FROM pg_catalog.pg_collation c, pg_catalog.pg_type t\n   WHERE c.oid = a.attcollation AND t.oid = a.atttypid AND a.attcollation <> t.typcollation) AS attcollation,\n  a.attidentity,\n  a.attgenerated\nFROM pg_catalog.pg_attribute a\nWHERE a.attrelid = '16385' AND a.attnum > 0 AND NOT a.attisdropped\nORDER BY a.attnum;",
        "SELECT pol.polname, pol.polpermissive,\n  CASE WHEN pol.polroles = '{0}' THEN NULL ELSE pg_catalog.array_to_string(array(select rolname from pg_catalog.pg_roles where oid = any (pol.polroles) order by 1),',') END,\n  pg_catalog.pg_get_expr(pol.polqual, pol.polrelid),\n  pg_catalog.pg_get_expr(pol.polwithcheck, pol.polrelid),\n  CASE pol.polcmd\n    WHEN 'r' THEN 'SELECT'\n    WHEN 'a' THEN 'INSERT'\n    WHEN 'w' THEN 'UPDATE'\n    WHEN 'd' THEN 'DELETE'\n    END AS cmd\nFROM pg_catalog.pg_policy pol\nWHERE pol.polrelid = '16385' ORDER BY 1;",
        "SELECT oid, stxrelid::pg_catalog.regclass, stxnamespace::pg_catalog.regnamespace::pg_catalog.text AS nsp, stxname,\npg_catalog.pg_get_statisticsobjdef_columns(oid) AS columns,\n  'd' = any(stxkind) AS ndist_enabled,\n  'f' = any(stxkind) AS deps_enabled,\n  'm' = any(stxkind) AS mcv_enabled,\nstxstattarget\nFROM pg_catalog.pg_statistic_ext\nWHERE stxrelid = '16385'\nORDER BY nsp, stxname;",
        "SELECT pubname\n     , NULL\n     , NULL\nFROM pg_catalog.pg_publication p\n     JOIN pg_catalog.pg_publication_namespace pn ON p.oid = pn.pnpubid\n     JOIN pg_catalog.pg_class pc ON pc.relnamespace = pn.pnnspid\nWHERE pc.oid ='16385' and pg_catalog.pg_relation_is_publishable('16385')\nUNION\nSELECT pubname\n     , pg_get_expr(pr.prqual, c.oid)\n     , (CASE WHEN pr.prattrs IS NOT NULL THEN\n         (SELECT string_agg(attname, ', ')\n           FROM pg_catalog.generate_series(0, pg_catalog.array_upper(pr.prattrs::pg_catalog.int2[], 1)) s,\n                pg_catalog.pg_attribute\n          WHERE attrelid = pr.prrelid AND attnum = prattrs[s])\n        ELSE NULL END) FROM pg_catalog.pg_publication p\n     JOIN pg_catalog.pg_publication_rel pr ON p.oid = pr.prpubid\n     JOIN pg_catalog.pg_class c ON c.oid = pr.prrelid\nWHERE pr.prrelid = '16385'\nUNION\nSELECT pubname\n     , NULL\n     , NULL\nFROM pg_catalog.pg_publication p\nWHERE p.puballtables AND pg_catalog.pg_relation_is_publishable('16385')\nORDER BY 1;",
        "SELECT c.oid::pg_catalog.regclass\nFROM pg_catalog.pg_class c, pg_catalog.pg_inherits i\nWHERE c.oid = i.inhparent AND i.inhrelid = '16385'\n  AND c.relkind != 'p' AND c.relkind != 'I'\nORDER BY inhseqno;",
        "SELECT c.oid::pg_catalog.regclass, c.relkind, inhdetachpending, pg_catalog.pg_get_expr(c.relpartbound, c.oid)\nFROM pg_catalog.pg_class c, pg_catalog.pg_inherits i\nWHERE c.oid = i.inhrelid AND i.inhparent = '16385'\nORDER BY pg_catalog.pg_get_expr(c.relpartbound, c.oid) = 'DEFAULT', c.oid::pg_catalog.regclass::pg_catalog.text;",
    ];

    fn rows_of(out: &str) -> Vec<Vec<String>> {
        out.lines()
            .skip(3)
            .filter(|l| l.starts_with('|'))
            .map(|l| l.trim_matches('|').split('|').map(|c| c.trim().to_string()).collect())
            .collect()
    }

    /// psql's `\d TABLE` shows a SERIAL's default as PostgreSQL prints it, an identity
    /// column as one (`attidentity`), and a constant default; `pg_attrdef` has a row for
    /// each default that is not an identity.
    #[tokio::test]
    async fn psql_describe_shows_defaults_and_identity_columns() {
        let ctx = SessionContext::new();
        register_functions(&ctx);
        let mut two = tables();
        let default = |column: &str, sql: &str, sequence: Option<&str>, always: bool, identity: bool| flashscan_storage::ColumnDefaultMeta {
            column: column.into(),
            sql: sql.into(),
            sequence: sequence.map(Into::into),
            always,
            identity,
        };
        two.push(CatalogTable {
            oid: 16385,
            name: "lineitem".into(),
            schema: two[0].schema.clone(),
            format: "heap".into(),
            view_definition: None,
            indexes: Vec::new(),
            column_defaults: vec![
                default("k", "nextval('lineitem_k_seq')", Some("lineitem_k_seq"), false, false),
                default("price", "nextval('lineitem_price_seq')", Some("lineitem_price_seq"), true, true),
                default("name", "'x'", None, false, false),
            ],
        });
        register(&ctx, &two, &[]).expect("register");
        let columns = rows_of(&run_normalized(&ctx, PSQL_DESCRIBE[1]).await);
        let got: Vec<(&str, &str, &str)> = columns.iter().map(|r| (r[0].as_str(), r[2].as_str(), r[5].as_str())).collect();
        assert_eq!(got, vec![("k", "nextval('lineitem_k_seq'::regclass)", ""), ("price", "", "a"), ("name", "'x'", "")], "{columns:?}");
        let attrdef = rows_of(&run_normalized(&ctx, "SELECT adrelid, adnum, pg_get_expr(adbin, adrelid) FROM pg_catalog.pg_attrdef ORDER BY adnum").await);
        assert_eq!(attrdef, vec![vec!["16385".to_string(), "1".into(), "nextval('lineitem_k_seq'::regclass)".into()], vec!["16385".into(), "3".into(), "'x'".into()]]);
    }

    /// Every later step of psql's `\d TABLE` plans and answers from the catalog tables:
    /// the flags, the columns with PostgreSQL's type names and nullability, and no policies,
    /// statistics, publications or inheritance.
    #[tokio::test]
    async fn psql_describe_steps_run_on_the_catalog_tables() {
        let ctx = SessionContext::new();
        register_functions(&ctx);
        let mut two = tables();
        two.push(CatalogTable { oid: 16385, name: "lineitem".into(), schema: two[0].schema.clone(), format: "columnstore".into(), view_definition: None, indexes: Vec::new(), column_defaults: Vec::new() });
        register(&ctx, &two, &[]).expect("register");
        let state = ctx.state();
        for (i, sql) in PSQL_DESCRIBE.iter().enumerate() {
            // Which steps DataFusion plans itself, and which only as an empty relation.
            let mut direct = state.sql_to_statement(sql, &datafusion::config::Dialect::PostgreSQL).expect("parse");
            crate::pg_syntax::normalize(&mut direct, &empty_table_names(CatalogFilled::default()));
            let planned = match state.statement_to_plan(direct).await {
                Ok(plan) => state.create_physical_plan(&plan).await.map(|_| ()),
                Err(e) => Err(e),
            };
            let how = match planned {
                Ok(()) => "run by DataFusion".to_string(),
                Err(e) => format!("no rows over empty tables (DataFusion: {})", flashscan_sql::error::one_line(&e.to_string())),
            };
            eprintln!("psql \\d step {}: {how}", i + 2);
        }
        let flags = rows_of(&run_normalized(&ctx, PSQL_DESCRIBE[0]).await);
        assert_eq!(flags.len(), 1, "{flags:?}");
        let f = &flags[0];
        // relchecks, relkind, relhasindex … relreplident, amname.
        assert_eq!((f[0].as_str(), f[1].as_str(), f[2].as_str(), f[10].as_str(), f[11].as_str()), ("0", "r", "false", "0", ""), "{f:?}");
        assert_eq!((f[12].as_str(), f[13].as_str(), f[14].as_str()), ("p", "d", "columnstore"), "{f:?}");
        let columns = rows_of(&run_normalized(&ctx, PSQL_DESCRIBE[1]).await);
        let got: Vec<(&str, &str, &str, &str)> = columns.iter().map(|r| (r[0].as_str(), r[1].as_str(), r[2].as_str(), r[3].as_str())).collect();
        assert_eq!(got, vec![("k", "bigint", "", "true"), ("price", "numeric(12,2)", "", "false"), ("name", "text", "", "false")], "{columns:?}");
        // No collation shown: flashscan names none.
        assert!(columns.iter().all(|r| r[4].is_empty()), "{columns:?}");
        for sql in &PSQL_DESCRIBE[2..] {
            assert_eq!(rows_of(&run_normalized(&ctx, sql).await), Vec::<Vec<String>>::new(), "{sql}");
        }
        // A user's table a query DataFusion cannot plan still fails with its error.
        let bad = state.sql_to_statement("SELECT array(select 1 from items i2 where i2.k = i.k limit 1) FROM items i", &datafusion::config::Dialect::PostgreSQL).expect("parse");
        assert!(statement_to_plan(&state, bad).await.is_err());
        // A misspelt column over an empty catalog table is an error, not no rows.
        let typo = state.sql_to_statement("SELECT inhnosuch FROM pg_catalog.pg_inherits", &datafusion::config::Dialect::PostgreSQL).expect("parse");
        assert!(statement_to_plan(&state, typo).await.is_err());
    }

    /// What SQLAlchemy's PostgreSQL dialect calls on connect and while reflecting.
    #[tokio::test]
    async fn functions_sqlalchemy_calls_answer_as_postgresql_does() {
        let ctx = SessionContext::new();
        register_functions(&ctx);
        register(&ctx, &tables(), &[]).expect("register");
        let version = run(&ctx, "SELECT pg_catalog.version() AS v, version() AS w").await;
        // SQLAlchemy's regex: `.*(?:PostgreSQL|EnterpriseDB) (\d+)\.?(\d+)?`.
        assert!(version.contains("| PostgreSQL 15.0 (flashscan ") && !version.contains("DataFusion"), "{version}");
        let rows = rows_of(&run(&ctx, "SELECT current_schema(), current_database(), pg_backend_pid(), has_table_privilege('items', 'SELECT'), has_schema_privilege('public', 'USAGE')").await);
        assert_eq!(rows, vec![vec!["public", DATABASE_NAME, "0", "true", "true"]]);
        let rows = rows_of(&run(&ctx, "SELECT obj_description(16384, 'pg_class') IS NULL, col_description(16384, 1) IS NULL, pg_get_indexdef(1, 0, true) IS NULL, pg_get_constraintdef(1, true) IS NULL").await);
        assert_eq!(rows, vec![vec!["true", "true", "true", "true"]]);
        let rows = rows_of(&run(&ctx, "SELECT current_setting('default_table_access_method'), current_setting('server_version_num')").await);
        assert_eq!(rows, vec![vec!["heap", "150000"]]);
        // The catalog's own tables by name (pg_description.classoid joins), user tables first.
        let rows = rows_of(&run_normalized(&ctx, "SELECT 'pg_catalog.pg_constraint'::regclass = 2606, 'pg_class'::regclass = 1259, 'items'::regclass = 16384").await);
        assert_eq!(rows, vec![vec!["true", "true", "true"]]);
        // Every catalog table flashscan registers has PostgreSQL's oid, and only those.
        let mut registered: Vec<String> = ctx.catalog("datafusion").and_then(|c| c.schema(PG_CATALOG)).map(|s| s.table_names()).unwrap_or_default();
        registered.sort();
        let mut named: Vec<String> = CATALOG_RELATION_OIDS.iter().map(|(n, _)| n.to_string()).collect();
        named.sort();
        assert_eq!(registered, named);
        // LIKE with another escape character (SQLAlchemy's `startswith(autoescape=True)`).
        let rows = rows_of(&run_normalized(&ctx, "SELECT nspname FROM pg_namespace WHERE nspname NOT LIKE 'pg/_%' ESCAPE '/' ORDER BY 1").await);
        assert_eq!(rows, vec![vec!["information_schema"], vec!["public"]]);
    }

    #[test]
    fn like_escape_rewrites_to_backslash_escapes() {
        assert_eq!(like_escape("pg/_%", "/"), Ok("pg\\_%".to_string()));
        assert_eq!(like_escape("a//b", "/"), Ok("a\\/b".to_string()));
        assert_eq!(like_escape("a\\b", "/"), Ok("a\\\\b".to_string()));
        assert_eq!(like_escape("a\\b", ""), Ok("a\\\\b".to_string()));
        assert!(like_escape("ab/", "/").is_err());
        assert!(like_escape("ab", "//").is_err());
    }

    /// psycopg 3's `TypeInfo.fetch` query and the `::regtype` casts drivers write.
    #[tokio::test]
    async fn regtype_casts_and_to_regtype_look_types_up() {
        let ctx = SessionContext::new();
        register_functions(&ctx);
        register(&ctx, &tables(), &[]).expect("register");
        let info = "SELECT\n    typname AS name, oid, typarray AS array_oid,\n    oid::regtype::text AS regtype, typdelim AS delimiter\nFROM pg_type t\nWHERE t.oid = to_regtype('int4')\nORDER BY t.oid\n";
        assert_eq!(rows_of(&run_normalized(&ctx, info).await), vec![vec!["int4", "23", "1007", "integer", ","]]);
        let none = info.replace("to_regtype('int4')", "to_regtype('no_such_type')");
        assert!(rows_of(&run_normalized(&ctx, &none).await).is_empty());
        let casts = "SELECT 'numeric'::regtype AS n, 'double precision'::regtype::text AS d, 'pg_catalog.int8'::regtype AS i, 20::regtype::text AS by_oid, 'items'::regclass AS t, 'public'::regnamespace AS ns";
        // In a result the object's name, as PostgreSQL prints it; inside an expression its oid.
        assert_eq!(rows_of(&run_normalized(&ctx, casts).await), vec![vec!["numeric", "double precision", "bigint", "bigint", "items", "public"]]);
        let oids = "SELECT 'numeric'::regtype = 1700, 'pg_catalog.int8'::regtype = 20, 'items'::regclass = 16384, 'public'::regnamespace = 2200";
        assert_eq!(rows_of(&run_normalized(&ctx, oids).await), vec![vec!["true", "true", "true", "true"]]);
        let state = ctx.state();
        let bad = state.sql_to_statement("SELECT 'no_such_type'::regtype", &datafusion::config::Dialect::PostgreSQL).expect("parse");
        let plan = statement_to_plan(&state, bad).await.expect("plans");
        let err = ctx.execute_logical_plan(plan).await.expect("df").collect().await.expect_err("unknown type");
        assert!(err.to_string().contains("type \"no_such_type\" does not exist"), "{err}");
    }

    /// asyncpg 0.32's type introspection (its `INTRO_LOOKUP_TYPES`, verbatim in
    /// testdata/) for `int8[]`, the parameter bound as asyncpg binds it (oid[]): the array
    /// type at depth 0, its element at depth 1, names as PostgreSQL prints them.
    #[tokio::test]
    async fn asyncpg_type_introspection_runs_on_the_catalog() {
        let ctx = SessionContext::new();
        register_functions(&ctx);
        register(&ctx, &tables(), &[]).expect("register");
        let state = ctx.state();
        let sql = include_str!("testdata/asyncpg_introspection.sql");
        let statement = state.sql_to_statement(sql, &datafusion::config::Dialect::PostgreSQL).expect("parse");
        let plan = statement_to_plan(&state, statement).await.expect("plans");
        let mut types = Vec::new();
        crate::params::type_by_casts(&plan, &mut types);
        assert_eq!(crate::params::pg_type_for_param(types[0].as_ref()), Type::OID_ARRAY, "asyncpg encodes $1 as oid[]");
        let oids = ScalarValue::List(ScalarValue::new_list_nullable(&[ScalarValue::UInt32(Some(1016))], &DataType::UInt32));
        let plan = plan.with_param_values(datafusion::common::ParamValues::from(vec![oids])).expect("bind");
        let batches = ctx.execute_logical_plan(plan).await.expect("df").collect().await.expect("runs");
        let out = pretty_format_batches(&batches).expect("format").to_string();
        let rows = rows_of(&out);
        let header = out.lines().nth(1).unwrap_or_default().to_string();
        let column = |name: &str| header.split('|').map(str::trim).filter(|c| !c.is_empty()).position(|c| c == name).unwrap_or_else(|| panic!("{name} in {header}"));
        let pick = |r: &Vec<String>| ["oid", "ns", "name", "kind", "elemtype", "depth", "elemtype_name", "basetype"].map(|c| r[column(c)].clone());
        let got: Vec<[String; 8]> = rows.iter().map(pick).collect();
        let want = |v: [&str; 8]| v.map(str::to_string);
        assert_eq!(got, vec![want(["20", "pg_catalog", "int8", "b", "0", "1", "-", ""]), want(["1016", "pg_catalog", "_int8", "b", "20", "0", "bigint", ""])], "{out}");
    }

    /// The catalog tables and functions issue 30 adds.
    #[tokio::test]
    async fn issue_30_catalog_tables_and_functions_answer() {
        let ctx = SessionContext::new();
        register_functions(&ctx);
        let mut with_view = tables();
        let schema = Arc::new(Schema::new(vec![Field::new("k", DataType::Int64, false)]));
        with_view.push(CatalogTable { oid: 16385, name: "v".into(), schema, format: "heap".into(), view_definition: Some("SELECT k FROM items".into()), indexes: Vec::new(), column_defaults: Vec::new() });
        register(&ctx, &with_view, &[]).expect("register");
        let q = |sql: &'static str| {
            let ctx = ctx.clone();
            async move { rows_of(&run_normalized(&ctx, sql).await) }
        };
        assert_eq!(q("SELECT setting, context FROM pg_settings WHERE name = 'jit'").await, vec![vec!["off", "internal"]]);
        assert_eq!(q("SELECT count(*) FROM pg_settings WHERE name = 'server_version_num' AND setting = '150000'").await, vec![vec!["1"]]);
        assert_eq!(q("SELECT prokind, provolatile FROM pg_catalog.pg_proc WHERE proname = 'sum'").await, vec![vec!["a", "i"]]);
        assert_eq!(q("SELECT count(*) FROM pg_proc WHERE proname IN ('version', 'pg_get_viewdef', 'set_config', 'row_number')").await, vec![vec!["4"]]);
        // information_schema.views: PostgreSQL's columns, views only.
        assert_eq!(
            q("SELECT table_schema, table_name, view_definition, check_option, is_updatable FROM information_schema.views").await,
            vec![vec!["public", "v", "SELECT k FROM items", "NONE", "NO"]]
        );
        // information_schema.columns: PostgreSQL's type names, precision and defaults.
        assert_eq!(
            q("SELECT table_name, column_name, ordinal_position, data_type, udt_name, numeric_precision, numeric_scale, is_nullable, is_updatable FROM information_schema.columns ORDER BY table_name, ordinal_position").await,
            vec![
                vec!["items", "k", "1", "bigint", "int8", "64", "0", "NO", "YES"],
                vec!["items", "price", "2", "numeric", "numeric", "12", "2", "YES", "YES"],
                vec!["items", "name", "3", "text", "text", "", "", "YES", "YES"],
                vec!["v", "k", "1", "bigint", "int8", "64", "0", "NO", "NO"],
            ]
        );
        assert_eq!(q("SELECT schemaname, tablename, hasindexes FROM pg_tables").await, vec![vec!["public", "items", "false"]]);
        assert_eq!(q("SELECT count(*) FROM information_schema.table_constraints WHERE constraint_type = 'PRIMARY KEY'").await, vec![vec!["0"]]);
        assert_eq!(q("SELECT count(column_name), count(ordinal_position) FROM information_schema.key_column_usage").await, vec![vec!["0", "0"]]);
        assert_eq!(q("SELECT count(*) FROM pg_index i JOIN pg_constraint c ON c.conindid = i.indexrelid").await, vec![vec!["0"]]);
        assert_eq!(q("SELECT count(*) FROM pg_range").await, vec![vec!["0"]]);
        // format_type with an integer literal typmod; arrays print as PostgreSQL prints them.
        assert_eq!(q("SELECT format_type(23, -1), format_type(1016, NULL), 1016::regtype::text, 0::regtype::text").await, vec![vec!["integer", "bigint[]", "bigint[]", "-"]]);
        assert_eq!(q("SELECT typname, typelem, typcategory FROM pg_type WHERE oid = 'int4[]'::regtype").await, vec![vec!["_int4", "23", "A"]]);
        assert_eq!(q("SELECT pg_get_indexdef(1) IS NULL, pg_get_constraintdef(1, true) IS NULL").await, vec![vec!["true", "true"]]);
        // A CASE arm over pg_type for a kind no row has (domains) is dropped, others kept.
        assert_eq!(
            q("SELECT count(*) FROM (SELECT CASE WHEN t.typtype = 'd' THEN (SELECT 1 FROM pg_type t2 WHERE t2.oid = t.oid LIMIT 1) WHEN t.typtype = 'b' THEN 2 END AS x FROM pg_type t) s WHERE x = 2").await,
            vec![vec![(TYPES.len() * 2).to_string()]]
        );
    }
}
