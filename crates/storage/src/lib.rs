//! flashscan-storage: how tables sit on flash.
//!
//! Owned by the storage work (heap pages, catalog, partitioning, placement, load), except
//! `compression/` and `columnstore/`, owned by the column store work.
//!
//! Data flow of a load: rows (tpchgen, Parquet, CSV) -> `partitioning` (hash to a
//! partition) -> `heap` (8 KB heap pages) -> `placement` (extents over files and volumes)
//! -> data files -> `catalog` (committed atomically). A scan reads `PageRun`s from the
//! catalog and decodes pages with `HeapDecoder`.
//!
//! The two table formats sit side by side, each a folder with its format, decoder and
//! reader: `heap/` (slotted 8 KB pages: plain, row- and page-compressed) and `columnstore/`
//! (row groups of compressed column segments, codecs in `compression/`). `TableFormat`
//! names which one a table uses.

pub mod catalog;
pub mod column;
pub mod columnstore;
pub mod compression;
pub mod database;
pub mod deleted_rows;
pub mod drop;
pub mod error;
pub mod export;
pub mod fs_safe;
pub mod heap;
pub mod host_place;
pub mod live_rows;
pub mod load;
pub mod orphans;
pub mod page_path;
pub mod partitioning;
pub mod placement;
pub mod rebuild;
pub mod row_id;
pub mod sequence;
pub mod table_format;
pub mod table_meta;
#[cfg(feature = "testkit")]
pub mod testkit;
pub mod verify;
pub mod write_meta;

pub use catalog::{Catalog, ViewEntry};
pub use column::{ColumnDef, ColumnType};
pub use database::Database;
pub use drop::{drop_table, DropReport};
pub use error::StorageError;
pub use heap::decoder::{decode_page_count_only, HeapDecoder};
pub use heap::heap_page::verify_page;
pub use heap::page_view::{HeapPageLayout, HeapPageView};
pub use heap::{Lsn, PageId, EXTENT_SIZE_BYTES, PAGE_SIZE_BYTES};
pub use table_format::TableFormat;
pub use table_meta::{ColumnDefaultMeta, DataFileMeta, FilegroupMeta, KeyIndexDef, PageRun, PartitionMeta, RowGroupMeta, TableMeta, TableStatisticsMeta};
pub use host_place::{HostPlace, HostSlot};
pub use live_rows::{DeletedOnPage, DeletedRowSet, DeletedSlotBeyondPage, LiveHeapDecoder, LiveRows};
pub use row_id::RowId;
pub use sequence::SequenceMeta;
pub use rebuild::{rebuild_table, rebuild_table_locked, RebuildOptions, RebuildProgress, RebuildReport, RebuildTarget, Reshape};
pub use write_meta::WriteMeta;
pub use load::{load_table, LoadCounters, LoadOptions, LoadReport, TableSource};
