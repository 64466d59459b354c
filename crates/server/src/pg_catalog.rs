//! Real `pg_catalog` tables, built from flashscan's catalog, for what drivers and BI tools
//! ask with ordinary SQL: `pg_catalog.pg_namespace`, `pg_class`, `pg_attribute`, `pg_type`,
//! `pg_database` (psql's `\l`), and the functions those queries call
//! (`pg_get_userbyid`, `pg_encoding_to_char`, `pg_table_is_visible`, `format_type`).
//! `information_schema.tables` / `columns` are DataFusion's own (the session enables them).
//!
//! Small in-memory tables (DataFusion `MemTable`s in a `pg_catalog` schema), rebuilt when
//! the table list changes (start, CREATE/DROP TABLE). Why not `datafusion-pg-catalog`: it
//! turns on DataFusion's default features (parquet, compression codecs …), i.e. a second
//! build of the whole DataFusion tree in the shared target directory, for ~40 tables
//! flashscan has nothing to put in. psql's `\dt`/`\d t` queries stay recognised by their
//! text (`psql_catalog.rs`): they use `OPERATOR(pg_catalog.~)`, `::regclass` and
//! `ARRAY(SELECT …)`, which DataFusion does not plan.

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

use crate::psql_catalog::{pg_type_name, CatalogTable, OWNER_NAME, SCHEMA_NAME};

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
    let mut formats: Vec<&str> = tables.iter().map(|t| t.format.as_str()).filter(|f| *f != "heap").collect();
    formats.sort_unstable();
    formats.dedup();
    std::iter::once((HEAP_AM_OID, "heap".to_string())).chain(formats.into_iter().enumerate().map(|(i, f)| (AM_OID_FIRST + i as i64, f.to_string()))).collect()
}

/// `pg_am`: one row per storage format (psql's `\dt` joins it; `\d+` shows its name).
fn access_method_rows(tables: &[CatalogTable]) -> Result<RecordBatch> {
    let ams = access_methods(tables);
    batch(
        vec![int64("oid"), text("amname"), text("amtype")],
        vec![
            Arc::new(Int64Array::from_iter_values(ams.iter().map(|a| a.0))),
            strings(ams.iter().map(|a| a.1.as_str())),
            strings(std::iter::repeat_n("t", ams.len())),
        ],
    )
}

fn classes(tables: &[CatalogTable]) -> Result<RecordBatch> {
    let n = tables.len();
    let ams = access_methods(tables);
    let am_of = |format: &str| ams.iter().find(|a| a.1 == format).map(|a| a.0).unwrap_or(HEAP_AM_OID);
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
        ],
        vec![
            Arc::new(Int64Array::from_iter_values(tables.iter().map(|t| t.oid))),
            strings(tables.iter().map(|t| t.name.as_str())),
            Arc::new(Int64Array::from(vec![PUBLIC_OID; n])),
            Arc::new(Int64Array::from(vec![0; n])),
            Arc::new(Int64Array::from(vec![OWNER_OID; n])),
            // The storage format stands where PostgreSQL names the access method (pg_am).
            Arc::new(Int64Array::from_iter_values(tables.iter().map(|t| am_of(&t.format)))),
            // -1: never analysed, as PostgreSQL says before the first ANALYZE.
            Arc::new(Float32Array::from(vec![-1.0; n])),
            Arc::new(BooleanArray::from(vec![false; n])),
            strings(std::iter::repeat_n("p", n)),
            strings(std::iter::repeat_n("r", n)),
            Arc::new(Int32Array::from_iter_values(tables.iter().map(|t| t.schema.fields().len() as i32))),
            Arc::new(BooleanArray::from(vec![false; n])),
            Arc::new(BooleanArray::from(vec![false; n])),
        ],
    )
}

fn attributes(tables: &[CatalogTable]) -> Result<RecordBatch> {
    let (mut relid, mut name, mut typid, mut num, mut notnull, mut typmod, mut len) = (vec![], vec![], vec![], vec![], vec![], vec![], vec![]);
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
            Arc::new(BooleanArray::from(vec![false; n])),
            Arc::new(BooleanArray::from(vec![false; n])),
            strings(std::iter::repeat_n("", n)),
            strings(std::iter::repeat_n("", n)),
            Arc::new(Int64Array::from(vec![0; n])),
        ],
    )
}

fn types() -> Result<RecordBatch> {
    let n = TYPES.len();
    batch(
        vec![int64("oid"), text("typname"), int64("typnamespace"), int64("typowner"), int32("typlen"), text("typtype"), int64("typbasetype"), int32("typtypmod"), boolean("typnotnull"), int64("typrelid"), int64("typelem"), text("typdelim")],
        vec![
            Arc::new(Int64Array::from_iter_values(TYPES.iter().map(|t| i64::from(t.oid())))),
            strings(TYPES.iter().map(|t| t.name())),
            Arc::new(Int64Array::from(vec![PG_CATALOG_OID; n])),
            Arc::new(Int64Array::from(vec![OWNER_OID; n])),
            Arc::new(Int32Array::from_iter_values(TYPES.iter().map(typlen_of))),
            strings(std::iter::repeat_n("b", n)),
            Arc::new(Int64Array::from(vec![0; n])),
            Arc::new(Int32Array::from(vec![-1; n])),
            Arc::new(BooleanArray::from(vec![false; n])),
            Arc::new(Int64Array::from(vec![0; n])),
            Arc::new(Int64Array::from(vec![0; n])),
            strings(std::iter::repeat_n(",", n)),
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

/// PostgreSQL spellings DataFusion does not plan but means the same as ones it does, as
/// psql and drivers write them in catalog queries: `a OPERATOR(pg_catalog.~) b` (an
/// operator named with its schema) becomes `a ~ b`, and `COLLATE pg_catalog.default`
/// (the database's default collation, the only one flashscan compares with) is dropped.
/// Rewritten in the parsed statement, never in its text; anything else is left for the
/// planner to accept or refuse.
pub fn normalize_postgres_syntax(statement: &mut datafusion::sql::parser::Statement) {
    use datafusion::sql::sqlparser::ast::{visit_expressions_mut, BinaryOperator, Expr};
    let datafusion::sql::parser::Statement::Statement(statement) = statement else { return };
    let _ = visit_expressions_mut(statement.as_mut(), |e| {
        match e {
            Expr::BinaryOp { op, .. } => {
                if let BinaryOperator::PGCustomBinaryOperator(parts) = op {
                    let standard = match parts.as_slice() {
                        [schema, name] if schema.eq_ignore_ascii_case(PG_CATALOG) => match name.as_str() {
                            "~" => Some(BinaryOperator::PGRegexMatch),
                            "~*" => Some(BinaryOperator::PGRegexIMatch),
                            "!~" => Some(BinaryOperator::PGRegexNotMatch),
                            "!~*" => Some(BinaryOperator::PGRegexNotIMatch),
                            "=" => Some(BinaryOperator::Eq),
                            "<>" | "!=" => Some(BinaryOperator::NotEq),
                            "<" => Some(BinaryOperator::Lt),
                            "<=" => Some(BinaryOperator::LtEq),
                            ">" => Some(BinaryOperator::Gt),
                            ">=" => Some(BinaryOperator::GtEq),
                            _ => None,
                        },
                        _ => None,
                    };
                    if let Some(standard) = standard {
                        *op = standard;
                    }
                }
            }
            Expr::Collate { expr, collation } if collation.to_string().eq_ignore_ascii_case("pg_catalog.default") => {
                let inner = std::mem::replace(expr.as_mut(), Expr::Identifier(datafusion::sql::sqlparser::ast::Ident::new("")));
                *e = inner;
            }
            _ => {}
        }
        std::ops::ControlFlow::<()>::Continue(())
    });
}

/// (Re)registers the `pg_catalog` tables for `tables`, and (once) puts them on the
/// default schema's search path. Plans already made keep the tables they were made with.
pub fn register(ctx: &SessionContext, tables: &[CatalogTable]) -> Result<()> {
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
        ("pg_class", classes(tables)?),
        ("pg_attribute", attributes(tables)?),
        ("pg_type", types()?),
        ("pg_database", databases()?),
        ("pg_am", access_method_rows(tables)?),
    ] {
        let reference = TableReference::partial(PG_CATALOG, name);
        ctx.deregister_table(reference.clone())?;
        ctx.register_table(reference, Arc::new(MemTable::try_new(b.schema(), vec![vec![b]])?))?;
    }
    Ok(())
}

/// A function of constant answer over one argument's rows (or one row for scalars).
fn constant_udf(name: &str, qualified: &'static str, inputs: Vec<DataType>, value: ScalarValue) -> ScalarUDF {
    let returns = value.data_type();
    let f = Arc::new(move |args: &[ColumnarValue]| -> Result<ColumnarValue> {
        let rows = args.iter().find_map(|a| match a {
            ColumnarValue::Array(a) => Some(a.len()),
            ColumnarValue::Scalar(_) => None,
        });
        Ok(match rows {
            Some(n) => ColumnarValue::Array(value.to_array_of_size(n)?),
            None => ColumnarValue::Scalar(value.clone()),
        })
    });
    create_udf(name, inputs, returns, Volatility::Immutable, f).with_aliases([qualified])
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
        let mods = arrays[1].as_any().downcast_ref::<Int32Array>().ok_or_else(|| DataFusionError::Execution("format_type: typmod must be an integer".into()))?;
        let names: StringArray = (0..oids.len())
            .map(|i| {
                if oids.is_null(i) {
                    return None;
                }
                let t = Type::from_oid(oids.value(i) as u32)?;
                let m = if mods.is_null(i) { -1 } else { mods.value(i) };
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
    create_udf("format_type", vec![DataType::Int64, DataType::Int32], DataType::Utf8, Volatility::Immutable, f).with_aliases(["pg_catalog.format_type"])
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::util::pretty::pretty_format_batches;

    fn tables() -> Vec<CatalogTable> {
        let schema = Arc::new(Schema::new(vec![
            Field::new("k", DataType::Int64, false),
            Field::new("price", DataType::Decimal128(12, 2), true),
            Field::new("name", DataType::Utf8, true),
        ]));
        vec![CatalogTable { oid: 16384, name: "items".into(), schema, format: "heap".into() }]
    }

    async fn run(ctx: &SessionContext, sql: &str) -> String {
        let batches = ctx.sql(sql).await.unwrap_or_else(|e| panic!("{sql}: {e}")).collect().await.unwrap_or_else(|e| panic!("{sql}: {e}"));
        pretty_format_batches(&batches).map(|t| t.to_string()).unwrap_or_default()
    }

    #[tokio::test]
    async fn catalog_queries_of_drivers_answer_from_flashscans_tables() {
        let ctx = SessionContext::new();
        register_functions(&ctx);
        register(&ctx, &tables()).expect("register");
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
        register(&ctx, &[]).expect("register again");
        assert!(!run(&ctx, "SELECT relname FROM pg_catalog.pg_class").await.contains("items"));
    }

    /// Plans as the server does: parsed, PostgreSQL spellings normalised, then planned.
    async fn run_normalized(ctx: &SessionContext, sql: &str) -> String {
        let state = ctx.state();
        let mut statement = state.sql_to_statement(sql, &datafusion::config::Dialect::PostgreSQL).unwrap_or_else(|e| panic!("{sql}: {e}"));
        normalize_postgres_syntax(&mut statement);
        let plan = state.statement_to_plan(statement).await.unwrap_or_else(|e| panic!("{sql}: {e}"));
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
        two.push(CatalogTable { oid: 16385, name: "lineitem".into(), schema: two[0].schema.clone(), format: "columnstore".into() });
        register(&ctx, &two).expect("register");
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
        normalize_postgres_syntax(&mut other);
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
        register(&ctx, &tables()).expect("register");
        register(&ctx, &tables()).expect("register again: wrapped once");
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
}
