//! SQL-visible indexes and keys in PostgreSQL's catalog shape: `pg_index`, `pg_constraint`,
//! `information_schema.table_constraints` and `information_schema.key_column_usage`, and
//! the definitions `pg_get_indexdef` / `pg_get_constraintdef` print — all made by
//! `key_rows` from one list of `SqlKey`s.
//!
//! The list is every table's SQL indexes and keys as the catalog keeps them (`sql_keys`:
//! CREATE INDEX, PRIMARY KEY, UNIQUE; crates/write `key_index.rs`). `flashscan index
//! create` B+tree files are not SQL objects and are not listed.

use std::sync::Arc;

use arrow::array::{new_null_array, ArrayRef, BooleanArray, Int16Array, Int32Array, Int64Array, ListArray, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Int16Type, Int64Type, Schema};
use datafusion::error::{DataFusionError, Result};

use crate::psql_catalog::{CatalogTable, SCHEMA_NAME};

/// One SQL-visible index, and the key it backs when unique or primary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SqlKey {
    pub table: String,
    pub index_name: String,
    /// Key columns, in key order.
    pub columns: Vec<String>,
    pub unique: bool,
    pub primary: bool,
}

/// The SQL-visible indexes and keys of the database: every table's `indexes` (CREATE INDEX,
/// PRIMARY KEY, UNIQUE), in table then index order.
pub fn sql_keys(tables: &[CatalogTable]) -> Vec<SqlKey> {
    tables
        .iter()
        .flat_map(|t| {
            t.indexes.iter().map(move |i| SqlKey { table: t.name.clone(), index_name: i.name.clone(), columns: i.columns.clone(), unique: i.unique, primary: i.primary })
        })
        .collect()
}

/// Index oids count from here, constraint oids from `CONSTRAINT_OID_FIRST`: above any table
/// oid (tables count from `FIRST_TABLE_OID`, 16384, one per table).
const INDEX_OID_FIRST: i64 = 1_000_000_000;
const CONSTRAINT_OID_FIRST: i64 = 1_500_000_000;

/// The oid of the index at `position` in `sql_keys`' list (`pg_index.indexrelid`, and its
/// row in `pg_class`).
pub fn index_oid(position: usize) -> i64 {
    INDEX_OID_FIRST + position as i64
}
/// PostgreSQL's oid of the `public` namespace (`pg_catalog.rs`).
const PUBLIC_OID: i64 = 2200;

fn list_of(t: DataType) -> DataType {
    DataType::List(Arc::new(Field::new_list_field(t, true)))
}

/// `pg_index`'s columns (int2vector / oidvector are arrays here).
pub fn index_fields() -> Vec<Field> {
    let b = |n: &str| Field::new(n, DataType::Boolean, true);
    let i = |n: &str| Field::new(n, DataType::Int64, true);
    vec![
        i("indexrelid"),
        i("indrelid"),
        Field::new("indnatts", DataType::Int16, true),
        Field::new("indnkeyatts", DataType::Int16, true),
        b("indisunique"),
        b("indnullsnotdistinct"),
        b("indisprimary"),
        b("indisexclusion"),
        b("indimmediate"),
        b("indisclustered"),
        b("indisvalid"),
        b("indisreplident"),
        Field::new("indkey", list_of(DataType::Int16), true),
        Field::new("indclass", list_of(DataType::Int64), true),
        // int2vector's text form ("0 0"), as PostgreSQL sends it: SQLAlchemy's INT2VECTOR
        // splits it (an array arrives as a list and fails `get_indexes`). No column selects
        // it into `unnest` (indkey and indclass, which SQLAlchemy unnests, stay arrays).
        Field::new("indoption", DataType::Utf8, true),
        Field::new("indpred", DataType::Utf8, true),
        Field::new("indexprs", DataType::Utf8, true),
    ]
}

/// `pg_constraint`'s columns.
pub fn constraint_fields() -> Vec<Field> {
    let b = |n: &str| Field::new(n, DataType::Boolean, true);
    let i = |n: &str| Field::new(n, DataType::Int64, true);
    let t = |n: &str| Field::new(n, DataType::Utf8, true);
    vec![
        i("oid"),
        t("conname"),
        i("connamespace"),
        t("contype"),
        b("condeferrable"),
        b("condeferred"),
        b("convalidated"),
        i("conrelid"),
        i("conindid"),
        i("confrelid"),
        Field::new("conkey", list_of(DataType::Int16), true),
        Field::new("confkey", list_of(DataType::Int16), true),
        t("confupdtype"),
        t("confdeltype"),
        t("confmatchtype"),
        t("conbin"),
    ]
}

fn table_constraint_fields() -> Vec<Field> {
    let t = |n: &str| Field::new(n, DataType::Utf8, true);
    ["constraint_catalog", "constraint_schema", "constraint_name", "table_catalog", "table_schema", "table_name", "constraint_type", "is_deferrable", "initially_deferred", "enforced", "nulls_distinct"]
        .into_iter()
        .map(t)
        .collect()
}

fn key_column_usage_fields() -> Vec<Field> {
    let t = |n: &str| Field::new(n, DataType::Utf8, true);
    let mut fields: Vec<Field> = ["constraint_catalog", "constraint_schema", "constraint_name", "table_catalog", "table_schema", "table_name", "column_name"].into_iter().map(t).collect();
    fields.push(Field::new("ordinal_position", DataType::Int32, true));
    fields.push(Field::new("position_in_unique_constraint", DataType::Int32, true));
    fields
}

/// A key resolved against the catalog: its index's and constraint's oids, its table's oid
/// and its columns' attnums.
#[derive(Debug, Clone)]
struct ResolvedKey<'a> {
    key: &'a SqlKey,
    index_oid: i64,
    /// Unique and primary keys are constraints as well.
    constraint_oid: Option<i64>,
    table_oid: i64,
    attnums: Vec<i16>,
}

fn resolve<'a>(tables: &[CatalogTable], keys: &'a [SqlKey]) -> Result<Vec<ResolvedKey<'a>>> {
    let mut constraints = 0;
    keys.iter()
        .enumerate()
        .map(|(i, key)| {
            let table = tables
                .iter()
                .find(|t| t.name == key.table && !t.is_view())
                .ok_or_else(|| DataFusionError::Internal(format!("index {} names table {}, which is not in the catalog", key.index_name, key.table)))?;
            let attnums = key
                .columns
                .iter()
                .map(|c| {
                    let at = table.schema.index_of(c).map_err(|_| DataFusionError::Internal(format!("index {} names column {c}, which {} does not have", key.index_name, key.table)))?;
                    i16::try_from(at + 1).map_err(|_| DataFusionError::Internal(format!("column {c} of {} is past attnum 32767", key.table)))
                })
                .collect::<Result<Vec<i16>>>()?;
            if attnums.is_empty() {
                return Err(DataFusionError::Internal(format!("index {} has no columns", key.index_name)));
            }
            debug_assert!(!key.primary || key.unique, "a primary key is unique");
            let constraint_oid = (key.unique || key.primary).then(|| {
                constraints += 1;
                CONSTRAINT_OID_FIRST + constraints - 1
            });
            Ok(ResolvedKey { key, index_oid: index_oid(i), constraint_oid, table_oid: table.oid, attnums })
        })
        .collect()
}

fn i16_lists(lists: impl Iterator<Item = Vec<i16>>) -> ArrayRef {
    Arc::new(ListArray::from_iter_primitive::<Int16Type, _, _>(lists.map(|l| Some(l.into_iter().map(Some).collect::<Vec<_>>()))))
}

fn strings<'a>(v: impl IntoIterator<Item = &'a str>) -> ArrayRef {
    Arc::new(StringArray::from_iter_values(v))
}

fn batch(fields: Vec<Field>, columns: Vec<ArrayRef>) -> Result<RecordBatch> {
    Ok(RecordBatch::try_new(Arc::new(Schema::new(fields)), columns)?)
}

/// The rows of the four tables, and the definitions, made from one list of keys.
#[derive(Debug)]
pub struct KeyRows {
    pub pg_index: RecordBatch,
    pub pg_constraint: RecordBatch,
    pub table_constraints: RecordBatch,
    pub key_column_usage: RecordBatch,
    /// (index oid, `pg_get_indexdef`'s text).
    pub index_definitions: Vec<(i64, String)>,
    /// (constraint oid, `pg_get_constraintdef`'s text).
    pub constraint_definitions: Vec<(i64, String)>,
}

/// `name` quoted as PostgreSQL's `quote_ident` would: bare when it is lower-case letters,
/// digits and underscores not starting with a digit (keywords are not quoted here).
pub(crate) fn quote_ident(name: &str) -> String {
    let plain = name.chars().next().is_some_and(|c| c.is_ascii_lowercase() || c == '_') && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if plain {
        name.to_string()
    } else {
        format!("\"{}\"", name.replace('"', "\"\""))
    }
}

/// `pg_index`, `pg_constraint`, `table_constraints`, `key_column_usage` and the
/// definitions for `keys` over `tables`; `database` is `table_catalog`'s value.
pub fn key_rows(tables: &[CatalogTable], keys: &[SqlKey], database: &str) -> Result<KeyRows> {
    let resolved = resolve(tables, keys)?;
    let n = resolved.len();
    let pg_index = batch(
        index_fields(),
        vec![
            Arc::new(Int64Array::from_iter_values(resolved.iter().map(|k| k.index_oid))),
            Arc::new(Int64Array::from_iter_values(resolved.iter().map(|k| k.table_oid))),
            Arc::new(Int16Array::from_iter_values(resolved.iter().map(|k| k.attnums.len() as i16))),
            Arc::new(Int16Array::from_iter_values(resolved.iter().map(|k| k.attnums.len() as i16))),
            Arc::new(BooleanArray::from_iter(resolved.iter().map(|k| Some(k.key.unique)))),
            Arc::new(BooleanArray::from(vec![false; n])),
            Arc::new(BooleanArray::from_iter(resolved.iter().map(|k| Some(k.key.primary)))),
            Arc::new(BooleanArray::from(vec![false; n])),
            Arc::new(BooleanArray::from(vec![true; n])),
            Arc::new(BooleanArray::from(vec![false; n])),
            Arc::new(BooleanArray::from(vec![true; n])),
            Arc::new(BooleanArray::from(vec![false; n])),
            i16_lists(resolved.iter().map(|k| k.attnums.clone())),
            Arc::new(ListArray::from_iter_primitive::<Int64Type, _, _>(resolved.iter().map(|k| Some(vec![Some(0_i64); k.attnums.len()])))),
            Arc::new(StringArray::from_iter_values(resolved.iter().map(|k| vec!["0"; k.attnums.len()].join(" ")))),
            new_null_array(&DataType::Utf8, n),
            new_null_array(&DataType::Utf8, n),
        ],
    )?;
    let constraints: Vec<&ResolvedKey> = resolved.iter().filter(|k| k.constraint_oid.is_some()).collect();
    let c = constraints.len();
    let contype = |k: &ResolvedKey| if k.key.primary { "p" } else { "u" };
    let pg_constraint = batch(
        constraint_fields(),
        vec![
            Arc::new(Int64Array::from_iter(constraints.iter().map(|k| k.constraint_oid))),
            strings(constraints.iter().map(|k| k.key.index_name.as_str())),
            Arc::new(Int64Array::from(vec![PUBLIC_OID; c])),
            strings(constraints.iter().map(|k| contype(*k))),
            Arc::new(BooleanArray::from(vec![false; c])),
            Arc::new(BooleanArray::from(vec![false; c])),
            Arc::new(BooleanArray::from(vec![true; c])),
            Arc::new(Int64Array::from_iter_values(constraints.iter().map(|k| k.table_oid))),
            Arc::new(Int64Array::from_iter_values(constraints.iter().map(|k| k.index_oid))),
            Arc::new(Int64Array::from(vec![0; c])),
            i16_lists(constraints.iter().map(|k| k.attnums.clone())),
            new_null_array(&list_of(DataType::Int16), c),
            strings(std::iter::repeat_n(" ", c)),
            strings(std::iter::repeat_n(" ", c)),
            strings(std::iter::repeat_n(" ", c)),
            new_null_array(&DataType::Utf8, c),
        ],
    )?;
    let table_constraints = batch(
        table_constraint_fields(),
        vec![
            strings(std::iter::repeat_n(database, c)),
            strings(std::iter::repeat_n(SCHEMA_NAME, c)),
            strings(constraints.iter().map(|k| k.key.index_name.as_str())),
            strings(std::iter::repeat_n(database, c)),
            strings(std::iter::repeat_n(SCHEMA_NAME, c)),
            strings(constraints.iter().map(|k| k.key.table.as_str())),
            strings(constraints.iter().map(|k| if k.key.primary { "PRIMARY KEY" } else { "UNIQUE" })),
            strings(std::iter::repeat_n("NO", c)),
            strings(std::iter::repeat_n("NO", c)),
            strings(std::iter::repeat_n("YES", c)),
            strings(std::iter::repeat_n("YES", c)),
        ],
    )?;
    let usage: Vec<(&ResolvedKey, usize, &str)> = constraints.iter().flat_map(|k| k.key.columns.iter().enumerate().map(move |(i, col)| (*k, i, col.as_str()))).collect();
    let u = usage.len();
    let key_column_usage = batch(
        key_column_usage_fields(),
        vec![
            strings(std::iter::repeat_n(database, u)),
            strings(std::iter::repeat_n(SCHEMA_NAME, u)),
            strings(usage.iter().map(|(k, _, _)| k.key.index_name.as_str())),
            strings(std::iter::repeat_n(database, u)),
            strings(std::iter::repeat_n(SCHEMA_NAME, u)),
            strings(usage.iter().map(|(k, _, _)| k.key.table.as_str())),
            strings(usage.iter().map(|(_, _, col)| *col)),
            Arc::new(Int32Array::from_iter_values(usage.iter().map(|(_, i, _)| *i as i32 + 1))),
            // Only foreign keys refer to another key's columns.
            new_null_array(&DataType::Int32, u),
        ],
    )?;
    let column_list = |k: &ResolvedKey| k.key.columns.iter().map(|c| quote_ident(c)).collect::<Vec<_>>().join(", ");
    let index_definitions = resolved
        .iter()
        .map(|k| {
            let unique = if k.key.unique { "UNIQUE " } else { "" };
            (k.index_oid, format!("CREATE {unique}INDEX {} ON {SCHEMA_NAME}.{} USING btree ({})", quote_ident(&k.key.index_name), quote_ident(&k.key.table), column_list(k)))
        })
        .collect();
    let constraint_definitions = constraints
        .iter()
        .filter_map(|k| Some((k.constraint_oid?, format!("{} ({})", if k.key.primary { "PRIMARY KEY" } else { "UNIQUE" }, column_list(*k)))))
        .collect();
    Ok(KeyRows { pg_index, pg_constraint, table_constraints, key_column_usage, index_definitions, constraint_definitions })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tables() -> Vec<CatalogTable> {
        let schema = Arc::new(Schema::new(vec![Field::new("id", DataType::Int64, false), Field::new("Name", DataType::Utf8, true), Field::new("at", DataType::Date32, true)]));
        vec![CatalogTable { oid: 16384, name: "t".into(), schema, format: "heap".into(), view_definition: None, indexes: Vec::new(), column_defaults: Vec::new() }]
    }

    #[test]
    fn no_keys_today_gives_empty_tables_with_postgresqls_columns() {
        let rows = key_rows(&tables(), &sql_keys(&tables()), "flashscan").expect("rows");
        assert_eq!(rows.pg_index.num_rows(), 0);
        assert_eq!(rows.pg_constraint.num_rows(), 0);
        assert_eq!(rows.table_constraints.num_rows(), 0);
        assert_eq!(rows.key_column_usage.num_rows(), 0);
        assert_eq!(rows.pg_index.schema().field(12).name(), "indkey");
        assert_eq!(rows.key_column_usage.schema().fields().len(), 9);
        assert_eq!(rows.table_constraints.schema().fields().len(), 11);
    }

    #[test]
    fn a_primary_key_and_a_plain_index_fill_every_table() {
        let keys = vec![
            SqlKey { table: "t".into(), index_name: "t_pkey".into(), columns: vec!["id".into()], unique: true, primary: true },
            SqlKey { table: "t".into(), index_name: "t_name_at".into(), columns: vec!["Name".into(), "at".into()], unique: false, primary: false },
        ];
        let rows = key_rows(&tables(), &keys, "flashscan").expect("rows");
        assert_eq!(rows.pg_index.num_rows(), 2);
        // Only the primary key is a constraint.
        assert_eq!(rows.pg_constraint.num_rows(), 1);
        assert_eq!(rows.table_constraints.num_rows(), 1);
        assert_eq!(rows.key_column_usage.num_rows(), 1);
        let indkey = rows.pg_index.column(12).as_any().downcast_ref::<ListArray>().expect("list").value(1);
        assert_eq!(indkey.as_any().downcast_ref::<Int16Array>().expect("int2").values().to_vec(), vec![2, 3]);
        assert_eq!(rows.index_definitions[1].1, "CREATE INDEX t_name_at ON public.t USING btree (\"Name\", at)");
        assert_eq!(rows.constraint_definitions, vec![(CONSTRAINT_OID_FIRST, "PRIMARY KEY (id)".to_string())]);
        let bad = vec![SqlKey { table: "t".into(), index_name: "x".into(), columns: vec!["nope".into()], unique: false, primary: false }];
        assert!(key_rows(&tables(), &bad, "flashscan").is_err());
    }
}
