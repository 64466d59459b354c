//! What the server says about flashscan's tables in PostgreSQL's terms: their oids, schema
//! and owner, and PostgreSQL's names of their column types. psql's `\dt`, `\d` and every
//! step of `\d TABLE` run as SQL on the `pg_catalog` tables built from these
//! (`pg_catalog.rs`); no query is recognised by its text.

use arrow::datatypes::{DataType, SchemaRef, TimeUnit};

/// The first oid PostgreSQL gives user objects; flashscan's tables count from here.
pub const FIRST_TABLE_OID: i64 = 16384;
/// The schema every flashscan table is in, as psql shows it.
pub const SCHEMA_NAME: &str = "public";
/// The owner psql shows.
pub const OWNER_NAME: &str = "flashscan";

/// Sequences' oids count from here, in name order: above any table's (one per table from
/// `FIRST_TABLE_OID`) and below the indexes' (`pg_keys`).
pub const FIRST_SEQUENCE_OID: i64 = 500_000_000;

/// A sequence as `pg_class` (relkind 'S'), `pg_sequence` and `information_schema.sequences`
/// show it.
#[derive(Debug, Clone)]
pub struct CatalogSequence {
    pub oid: i64,
    pub name: String,
    pub meta: flashscan_storage::SequenceMeta,
    /// The type it counts in: the column's for a SERIAL or identity column's sequence
    /// (`integer` for SERIAL), `bigint` for CREATE SEQUENCE (PostgreSQL's `AS` default).
    pub data_type: DataType,
    /// An identity column's: part of its column, so `information_schema.sequences` leaves
    /// it out (PostgreSQL's internal dependency).
    pub identity: bool,
}

/// What the catalogs list: tables and views, and sequences.
#[derive(Debug, Clone, Default)]
pub struct CatalogRelations {
    pub tables: Vec<CatalogTable>,
    pub sequences: Vec<CatalogSequence>,
}

#[derive(Debug, Clone)]
pub struct CatalogTable {
    pub oid: i64,
    pub name: String,
    pub schema: SchemaRef,
    /// Storage format (heap, page, columnstore...), shown as psql's access method.
    pub format: String,
    /// For a view (`CREATE VIEW`): its query, as `pg_views.definition` and
    /// `pg_get_viewdef` show it; `None` for a table.
    pub view_definition: Option<String>,
    /// Its SQL indexes and keys (CREATE INDEX, PRIMARY KEY, UNIQUE), as the catalog keeps them.
    pub indexes: Vec<flashscan_storage::KeyIndexDef>,
    /// Its columns' DEFAULTs, SERIAL and identity columns (`pg_attrdef`, `attidentity`).
    pub column_defaults: Vec<flashscan_storage::ColumnDefaultMeta>,
}

impl CatalogTable {
    pub fn is_view(&self) -> bool {
        self.view_definition.is_some()
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arrow_types_get_postgresql_names() {
        assert_eq!(pg_type_name(&DataType::Int64), "bigint");
        assert_eq!(pg_type_name(&DataType::Decimal128(15, 2)), "numeric(15,2)");
        assert_eq!(pg_type_name(&DataType::Utf8View), "text");
        assert_eq!(pg_type_name(&DataType::Timestamp(TimeUnit::Microsecond, None)), "timestamp without time zone");
        assert_eq!(pg_type_name(&DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8))), "text");
    }
}
