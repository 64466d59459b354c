//! What the catalog knows about one table: columns, partitions, filegroups, files and the
//! page runs a scan reads.

use std::sync::Arc;

use arrow::datatypes::{Field, Schema, SchemaRef};
use serde::{Deserialize, Serialize};

use crate::column::ColumnDef;
use crate::error::StorageError;
use crate::table_format::TableFormat;

/// Contiguous pages in one file, in scan order: one large read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PageRun {
    /// Path relative to the database directory (absolute for files on other volumes).
    pub file: String,
    pub offset_bytes: u64,
    pub page_count: u32,
    /// Page id of the first page; the run's pages have consecutive ids.
    pub first_page_id: u64,
}

/// One hash partition of a table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionMeta {
    pub index: u32,
    pub row_count: u64,
    pub page_count: u64,
    /// The filegroup the partition's pages live in.
    pub filegroup: u32,
    pub runs: Vec<PageRun>,
    /// Column store tables only: the partition's row groups, in order. Each is written
    /// contiguously in one file and is also listed in `runs` (one run per row group), so
    /// tools that read runs (cache drop, raw passes) see the same bytes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub row_groups: Vec<RowGroupMeta>,
}

/// Where one column store row group sits. Its header, directory and segments are
/// self-describing (docs/formats-columnstore.md); the catalog only points at it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RowGroupMeta {
    /// Path relative to the database directory (absolute for files on other volumes).
    pub file: String,
    /// A multiple of 8192: row groups are page aligned.
    pub offset_bytes: u64,
    /// The padded row group, a multiple of 8192.
    pub total_bytes: u64,
    /// Header + directory + names: what a scan reads first.
    pub metadata_bytes: u64,
    pub row_count: u64,
}

/// A set of data files (over one or more volumes) that partitions are placed in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FilegroupMeta {
    pub index: u32,
    /// Indexes into `TableMeta::files`.
    pub files: Vec<u32>,
}

/// One data file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DataFileMeta {
    /// The database-wide file id, the high half of every page id in the file.
    pub file_id: u32,
    /// Path relative to the database directory (absolute for files on other volumes).
    pub path: String,
    /// The volume (directory) the file lives in, as given to `--volumes`.
    pub volume: String,
    /// File size on disk, a multiple of the 64 KB extent.
    pub size_bytes: u64,
    /// Pages holding rows.
    pub page_count: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TableMeta {
    pub name: String,
    pub columns: Vec<ColumnDef>,
    pub partitions: Vec<PartitionMeta>,
    pub row_count: u64,
    /// "heap", "heap_row", "heap_page" for 8 KB row pages; "columnstore",
    /// "columnstore_archive" for row groups of column segments.
    pub format: String,
    /// The column rows are hashed on to pick their partition.
    pub partition_by: String,
    pub filegroups: Vec<FilegroupMeta>,
    pub files: Vec<DataFileMeta>,
    /// Stripe unit over the files of a filegroup.
    pub interleave_bytes: u64,
    /// Sum of the data file sizes.
    pub size_bytes: u64,
    /// Where the rows came from ("tpch sf=1", a file path).
    pub source: String,
    /// LSN stamped on the table's pages when loaded.
    pub load_lsn: u64,
    /// Rows of the table's pages that DELETE or UPDATE removed, as of the last checkpoint
    /// (`deleted_rows`); scans skip them. None: no row was ever deleted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deleted_rows: Option<crate::deleted_rows::DeletedRowsMeta>,
    /// The table's SQL indexes (CREATE INDEX, PRIMARY KEY, UNIQUE): part of the table's
    /// definition, so TRUNCATE and a checkpoint keep them and DROP TABLE removes them in
    /// the same commit. Their entries are kept in memory by the write path
    /// (crates/write `key_index.rs`), built from the table when first used.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub indexes: Vec<KeyIndexDef>,
    /// What the last `ANALYZE` measured (distinct values per column), for the SQL
    /// planner's join order; None before the first. Estimates, never exact: writes since
    /// make them older, not wrong (docs/formats.md, "Table statistics").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub statistics: Option<TableStatisticsMeta>,
    /// Column DEFAULTs, SERIAL and identity columns, in column order; empty for a table
    /// with none (and in catalogs written before defaults existed).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub column_defaults: Vec<ColumnDefaultMeta>,
}

/// One column's DEFAULT: planned for every INSERT that leaves the column out (or writes
/// `DEFAULT` for it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ColumnDefaultMeta {
    pub column: String,
    /// The expression as SQL: `0`, `now()`, `nextval('t_id_seq')`.
    pub sql: String,
    /// The sequence a SERIAL or identity column draws from (owned by the table).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sequence: Option<String>,
    /// `GENERATED ALWAYS AS IDENTITY`: an INSERT may not give the column a value.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub always: bool,
    /// `GENERATED … AS IDENTITY` (not SERIAL): the catalogs clients read show it as an
    /// identity column (`attidentity`), not as a `nextval` default.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub identity: bool,
}

impl TableMeta {
    /// The DEFAULT of `column` (case-insensitive), if it has one.
    pub fn column_default(&self, column: &str) -> Option<&ColumnDefaultMeta> {
        self.column_defaults.iter().find(|d| d.column.eq_ignore_ascii_case(column))
    }
}

/// A table's statistics as `ANALYZE` measured them at one snapshot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TableStatisticsMeta {
    /// The rows the table had at the snapshot measured (pages and delta, less deletions).
    pub row_count: u64,
    /// Per column, in the table's column order: the estimated number of distinct non-NULL
    /// values (a HyperLogLog sketch's, about 1 % off); None for a column of a type the sketch
    /// does not take.
    pub distinct_counts: Vec<Option<u64>>,
}

/// One SQL index of a table: its name (unique in the database, as PostgreSQL's index
/// names are in a schema), its key columns in order, and whether it enforces uniqueness.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyIndexDef {
    pub name: String,
    pub columns: Vec<String>,
    pub unique: bool,
    /// The table's PRIMARY KEY (unique, and its columns NOT NULL).
    #[serde(default)]
    pub primary: bool,
    /// Made by a PRIMARY KEY or UNIQUE constraint (CREATE TABLE, ALTER TABLE … ADD), not by
    /// CREATE INDEX: dropped with ALTER TABLE … DROP CONSTRAINT, not DROP INDEX.
    #[serde(default)]
    pub constraint: bool,
}

impl TableMeta {
    pub fn arrow_schema(&self) -> SchemaRef {
        let fields: Vec<Field> = self.columns.iter().map(|c| Field::new(&c.name, c.column_type.arrow_type(), c.nullable)).collect();
        Arc::new(Schema::new(fields))
    }

    pub fn column_index(&self, name: &str) -> Result<usize, StorageError> {
        self.columns.iter().position(|c| c.name.eq_ignore_ascii_case(name)).ok_or_else(|| StorageError::UnknownColumn {
            table: self.name.clone(),
            column: name.to_string(),
            known: self.columns.iter().map(|c| c.name.as_str()).collect::<Vec<_>>().join(", "),
        })
    }

    /// A plain heap table of `columns` with no rows, partitions or files yet, partitioned on
    /// its first column: the one way tests, fuzzers and property tests make a `TableMeta`
    /// (a load or a CREATE TABLE fills in the rest).
    pub fn heap_without_rows(name: &str, columns: Vec<ColumnDef>) -> TableMeta {
        let partition_by = columns.first().map(|c| c.name.clone()).unwrap_or_default();
        TableMeta {
            name: name.to_string(),
            columns,
            partitions: Vec::new(),
            row_count: 0,
            format: TableFormat::Heap(crate::heap::page_encoder::HeapFormat::Plain).catalog_name().to_string(),
            partition_by,
            filegroups: Vec::new(),
            files: Vec::new(),
            interleave_bytes: crate::EXTENT_SIZE_BYTES as u64,
            size_bytes: 0,
            source: String::new(),
            load_lsn: 1,
            deleted_rows: None,
            indexes: Vec::new(),
            statistics: None,
            column_defaults: Vec::new(),
        }
    }

    /// The table's format; an unknown name is an error naming the table.
    pub fn table_format(&self) -> Result<TableFormat, StorageError> {
        TableFormat::from_catalog_name(&self.name, &self.format)
    }

    /// True for the column store formats (row groups), false for heap pages (and for an
    /// unknown format, which `table_format` refuses wherever the format decides a read).
    pub fn is_column_store(&self) -> bool {
        self.table_format().is_ok_and(TableFormat::is_column_store)
    }

    pub fn page_count(&self) -> u64 {
        self.partitions.iter().map(|p| p.page_count).sum()
    }
}
