//! psql's `\d TABLE` steps that DataFusion cannot plan.
//!
//! psql describes tables with fixed queries over pg_class, pg_attribute and friends
//! (captured with `psql -E` against PostgreSQL 15, see docs/server.md). `\d`, `\dt
//! [PATTERN]` and the first step of `\d TABLE` (which tables match) run as SQL on the
//! real `pg_catalog` tables (`pg_catalog.rs`, with `OPERATOR(pg_catalog.~)` and `COLLATE
//! pg_catalog.default` normalised). The later steps of `\d TABLE` use what DataFusion
//! does not plan (`::pg_catalog.regtype`, `reloptions || array[…]`, correlated subqueries
//! over pg_attrdef and pg_collation): the server recognises those by their fixed text and
//! answers them from flashscan's own catalog (each table's columns and types). Any other
//! catalog query goes to DataFusion and fails there if it must.

use std::sync::{Arc, LazyLock};

use arrow::array::{ArrayRef, BooleanArray, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use regex::Regex;

/// The first oid PostgreSQL gives user objects; flashscan's tables count from here.
pub const FIRST_TABLE_OID: i64 = 16384;
/// The schema every flashscan table is in, as psql shows it.
pub const SCHEMA_NAME: &str = "public";
/// The owner psql shows.
pub const OWNER_NAME: &str = "flashscan";

#[derive(Debug, Clone)]
pub struct CatalogTable {
    pub oid: i64,
    pub name: String,
    pub schema: SchemaRef,
    /// Storage format (heap, page, columnstore...), shown as psql's access method.
    pub format: String,
}

#[derive(Debug, Clone, PartialEq)]
pub enum CatalogQuery {
    /// `\d TABLE`, second step: the table's flags.
    TableFlags { oid: i64 },
    /// `\d TABLE`, third step: the columns.
    Columns { oid: i64 },
    /// Policies, extended statistics, publications, inheritance: none in flashscan; an
    /// empty answer with the columns psql reads.
    NoRows { columns: usize },
}

static OID_RE: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"(?:c\.oid|a\.attrelid) = '(\d+)'").expect("static regex"));

fn oid_of(sql: &str) -> Option<i64> {
    OID_RE.captures(sql).and_then(|c| c[1].parse().ok())
}

/// Recognises psql's describe queries; `None` for anything else.
pub fn recognize(sql: &str) -> Option<CatalogQuery> {
    if !sql.contains("pg_catalog.") {
        return None;
    }
    if sql.starts_with("SELECT c.relchecks, c.relkind, c.relhasindex") {
        return oid_of(sql).map(|oid| CatalogQuery::TableFlags { oid });
    }
    if sql.starts_with("SELECT a.attname,\n  pg_catalog.format_type(a.atttypid, a.atttypmod)") && !sql.contains("a.attstorage") {
        return oid_of(sql).map(|oid| CatalogQuery::Columns { oid });
    }
    let no_rows = [
        ("FROM pg_catalog.pg_policy pol", 6),
        ("FROM pg_catalog.pg_statistic_ext", 9),
        ("FROM pg_catalog.pg_publication p", 3),
        ("WHERE c.oid = i.inhparent AND i.inhrelid", 1),
        ("WHERE c.oid = i.inhrelid AND i.inhparent", 4),
    ];
    no_rows.iter().find(|(needle, _)| sql.contains(needle)).map(|(_, columns)| CatalogQuery::NoRows { columns: *columns })
}

/// PostgreSQL's name for an Arrow type, as `format_type` prints it.
pub fn pg_type_name(t: &DataType) -> String {
    match t {
        DataType::Boolean => "boolean".into(),
        DataType::Int8 | DataType::Int16 | DataType::UInt8 => "smallint".into(),
        DataType::Int32 | DataType::UInt16 => "integer".into(),
        DataType::Int64 | DataType::UInt32 => "bigint".into(),
        DataType::UInt64 => "numeric(20,0)".into(),
        DataType::Float16 | DataType::Float32 => "real".into(),
        DataType::Float64 => "double precision".into(),
        DataType::Decimal32(p, s) | DataType::Decimal64(p, s) => format!("numeric({p},{s})"),
        DataType::Decimal128(p, s) | DataType::Decimal256(p, s) => format!("numeric({p},{s})"),
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => "text".into(),
        DataType::Binary | DataType::LargeBinary | DataType::BinaryView | DataType::FixedSizeBinary(_) => "bytea".into(),
        DataType::Date32 | DataType::Date64 => "date".into(),
        DataType::Timestamp(_, None) => "timestamp without time zone".into(),
        DataType::Timestamp(_, Some(_)) => "timestamp with time zone".into(),
        DataType::Time32(_) | DataType::Time64(_) => "time without time zone".into(),
        DataType::Duration(TimeUnit::Second) | DataType::Duration(_) | DataType::Interval(_) => "interval".into(),
        DataType::Dictionary(_, v) => pg_type_name(v),
        other => other.to_string().to_lowercase(),
    }
}

fn text_field(name: &str) -> Field {
    Field::new(name, DataType::Utf8, true)
}

/// The answer, as one Arrow batch (streamed to the client like any other result).
pub fn answer(query: &CatalogQuery, tables: &[CatalogTable]) -> Result<RecordBatch, arrow::error::ArrowError> {
    match query {
        CatalogQuery::TableFlags { oid } => {
            let found: Vec<&CatalogTable> = tables.iter().filter(|t| t.oid == *oid).collect();
            let n = found.len();
            let names = [
                "relchecks", "relkind", "relhasindex", "relhasrules", "relhastriggers", "relrowsecurity", "relforcerowsecurity", "relhasoids",
                "relispartition", "?column?", "reltablespace", "reloftype", "relpersistence", "relreplident", "amname",
            ];
            let bools = [2usize, 3, 4, 5, 6, 7, 8];
            let mut fields = Vec::new();
            let mut columns: Vec<ArrayRef> = Vec::new();
            for (i, name) in names.iter().enumerate() {
                if bools.contains(&i) {
                    fields.push(Field::new(*name, DataType::Boolean, false));
                    columns.push(Arc::new(BooleanArray::from(vec![false; n])));
                } else {
                    let value = |t: &CatalogTable| -> String {
                        match i {
                            0 | 10 => "0".into(),
                            1 => "r".into(),
                            12 => "p".into(),
                            13 => "d".into(),
                            14 => t.format.clone(),
                            _ => String::new(),
                        }
                    };
                    fields.push(text_field(name));
                    columns.push(Arc::new(StringArray::from_iter_values(found.iter().map(|t| value(t)))));
                }
            }
            RecordBatch::try_new(Arc::new(Schema::new(fields)), columns)
        }
        CatalogQuery::Columns { oid } => {
            let table = tables.iter().find(|t| t.oid == *oid);
            let cols: Vec<&Field> = table.map(|t| t.schema.fields().iter().map(|f| f.as_ref()).collect()).unwrap_or_default();
            let schema = Schema::new(vec![
                text_field("attname"),
                text_field("format_type"),
                text_field("pg_get_expr"),
                Field::new("attnotnull", DataType::Boolean, false),
                text_field("attcollation"),
                text_field("attidentity"),
                text_field("attgenerated"),
            ]);
            let n = cols.len();
            RecordBatch::try_new(
                Arc::new(schema),
                vec![
                    Arc::new(StringArray::from_iter_values(cols.iter().map(|f| f.name().as_str()))),
                    Arc::new(StringArray::from_iter_values(cols.iter().map(|f| pg_type_name(f.data_type())))),
                    Arc::new(StringArray::from(vec![None::<&str>; n])),
                    Arc::new(BooleanArray::from_iter(cols.iter().map(|f| Some(!f.is_nullable())))),
                    Arc::new(StringArray::from(vec![None::<&str>; n])),
                    Arc::new(StringArray::from_iter_values(cols.iter().map(|_| ""))),
                    Arc::new(StringArray::from_iter_values(cols.iter().map(|_| ""))),
                ],
            )
        }
        CatalogQuery::NoRows { columns } => {
            let fields: Vec<Field> = (0..*columns).map(|i| text_field(&format!("column{}", i + 1))).collect();
            let arrays: Vec<ArrayRef> = (0..*columns).map(|_| Arc::new(StringArray::from(Vec::<String>::new())) as ArrayRef).collect();
            RecordBatch::try_new(Arc::new(Schema::new(fields)), arrays)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Verbatim from `psql -E` (PostgreSQL 15.18's psql), `\dt` and `\d t`.
    const LIST: &str = "SELECT n.nspname as \"Schema\",\n  c.relname as \"Name\",\n  CASE c.relkind WHEN 'r' THEN 'table' END as \"Type\",\n  pg_catalog.pg_get_userbyid(c.relowner) as \"Owner\"\nFROM pg_catalog.pg_class c\n     LEFT JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace\nWHERE c.relkind IN ('r','p','')\n  AND pg_catalog.pg_table_is_visible(c.oid)\nORDER BY 1,2;";
    const FIND: &str = "SELECT c.oid,\n  n.nspname,\n  c.relname\nFROM pg_catalog.pg_class c\n     LEFT JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace\nWHERE c.relname OPERATOR(pg_catalog.~) '^(line.*)$' COLLATE pg_catalog.default\n  AND pg_catalog.pg_table_is_visible(c.oid)\nORDER BY 2, 3;";
    const COLUMNS: &str = "SELECT a.attname,\n  pg_catalog.format_type(a.atttypid, a.atttypmod),\n  (SELECT 1)\nFROM pg_catalog.pg_attribute a\nWHERE a.attrelid = '16385' AND a.attnum > 0 AND NOT a.attisdropped\nORDER BY a.attnum;";

    fn tables() -> Vec<CatalogTable> {
        let schema = Arc::new(Schema::new(vec![
            Field::new("l_orderkey", DataType::Int64, false),
            Field::new("l_tax", DataType::Decimal128(15, 2), true),
        ]));
        vec![
            CatalogTable { oid: 16384, name: "customer".into(), schema: schema.clone(), format: "heap".into() },
            CatalogTable { oid: 16385, name: "lineitem".into(), schema, format: "columnstore".into() },
        ]
    }

    #[test]
    fn psql_list_and_find_queries_are_left_to_pg_catalog() {
        // They run as SQL on the pg_catalog tables (pg_catalog.rs tests them verbatim).
        assert_eq!(recognize(LIST), None);
        assert_eq!(recognize(FIND), None);
    }

    #[test]
    fn psql_column_query_gives_postgresql_type_names() {
        let q = recognize(COLUMNS).expect("columns recognised");
        assert_eq!(q, CatalogQuery::Columns { oid: 16385 });
        let batch = answer(&q, &tables()).expect("answer");
        let types = batch.column(1).as_any().downcast_ref::<StringArray>().expect("types");
        assert_eq!((types.value(0), types.value(1)), ("bigint", "numeric(15,2)"));
        let not_null = batch.column(3).as_any().downcast_ref::<BooleanArray>().expect("notnull");
        assert!(not_null.value(0) && !not_null.value(1));
    }

    #[test]
    fn ordinary_queries_are_not_catalog_queries() {
        assert_eq!(recognize("select * from lineitem"), None);
        assert_eq!(recognize("select * from pg_catalog.pg_class"), None);
    }
}
