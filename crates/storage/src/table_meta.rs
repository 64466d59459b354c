//! What the catalog knows about one table: columns, partitions, filegroups, files and the
//! page runs a scan reads.

use std::sync::Arc;

use arrow::datatypes::{Field, Schema, SchemaRef};
use serde::{Deserialize, Serialize};

use crate::column::ColumnDef;
use crate::error::StorageError;

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
    /// "heap" for 8 KB row pages.
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

    pub fn page_count(&self) -> u64 {
        self.partitions.iter().map(|p| p.page_count).sum()
    }
}
