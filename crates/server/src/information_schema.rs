//! The `information_schema` tables clients read that DataFusion's own information_schema
//! lacks or shapes differently: `views` (PostgreSQL's columns — `view_definition`,
//! `check_option`, `is_updatable`, … — and only views; DataFusion's lists every relation
//! with its own columns), `table_constraints` and `key_column_usage` (`pg_keys.rs`).
//!
//! DataFusion answers every `information_schema.X` itself (its session resolves that schema
//! before any registered one), so these live in the schema `PG_INFORMATION_SCHEMA` and
//! `pg_syntax.rs` points `information_schema.views` (and the others in `TABLES`) there, in
//! the parsed statement. `information_schema.tables`, `columns`, `schemata` stay
//! DataFusion's.

use std::sync::Arc;

use arrow::array::{ArrayRef, RecordBatch, StringArray};
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
pub const TABLES: [&str; 3] = ["views", "table_constraints", "key_column_usage"];

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

/// (Re)registers the tables for `tables` and `keys` (`pg_keys::key_rows`).
pub fn register(ctx: &SessionContext, tables: &[CatalogTable], keys: &KeyRows, database: &str) -> Result<()> {
    let catalog = ctx.catalog("datafusion").ok_or_else(|| DataFusionError::Plan("no default catalog".into()))?;
    if catalog.schema(PG_INFORMATION_SCHEMA).is_none() {
        catalog.register_schema(PG_INFORMATION_SCHEMA, Arc::new(MemorySchemaProvider::new()))?;
    }
    let batches = [("views", views(tables, database)?), ("table_constraints", keys.table_constraints.clone()), ("key_column_usage", keys.key_column_usage.clone())];
    debug_assert!(batches.iter().map(|(n, _)| *n).eq(TABLES), "every table pg_syntax points here is registered");
    for (name, b) in batches {
        let reference = TableReference::partial(PG_INFORMATION_SCHEMA, name);
        ctx.deregister_table(reference.clone())?;
        ctx.register_table(reference, Arc::new(MemTable::try_new(b.schema(), vec![vec![b]])?))?;
    }
    Ok(())
}
