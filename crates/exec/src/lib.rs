//! flashscan-exec: table scans at the speed of the device, and the proof.
//!
//! Data flows top to bottom through these files:
//! - [`source`]: what a scan needs from a table (a read plan, a chunk decoder);
//!   [`storage_source`] adapts heap tables to it, [`columnstore_source`] column stores;
//! - [`chunk`]: runs cut into I/O-sized chunks, handed out to workers;
//! - [`read_ahead`]: one engine per worker keeping `depth` large reads in flight;
//! - [`depth`]: how many: the user's `--depth`, or found while scanning (doubled while the
//!   rate the workers get still rises);
//! - [`scan`]: workers on all cores, decode of the projected columns, batches to a sink
//!   (or verified heap pages read in place, [`heap_pages`], and column store segments,
//!   [`segments`], to kernels that take them);
//! - [`queries`]: the built-in queries, one file each, as kernels over Arrow arrays;
//! - [`run`]: cache preparation, the scan, the check, assembled into a [`ScanReport`];
//! - [`check`]: the same files read raw, beside the scan, for the efficiency verdict;
//! - [`report`] / [`report_json`]: where the time went, collected once, printed by others.

pub mod cache;
pub mod check;
pub mod chunk;
pub mod columnstore_source;
pub mod depth;
pub mod error;
pub mod heap_pages;
pub mod limits;
pub mod queries;
pub mod read_ahead;
pub mod report;
pub mod report_json;
pub mod run;
pub mod scan;
pub mod segment_slices;
pub mod segments;
pub mod source;
pub mod storage_source;
pub mod value;
pub mod verdict;
pub mod waits;

pub use cache::CacheMode;
pub use error::ExecError;
pub use queries::BuiltinQuery;
pub use report::{CheckReport, FileReport, PassFigures, ScanReport};
pub use run::{run_query, ScanOptions};
pub use scan::{scan_batches, scan_plan, BatchSink, ScanStats};
pub use source::{ChunkDecoder, ColumnRange, PageDecoder, ReadPlan, RunSpec, ScanFilter, SkipFigures, TableSource};
pub use columnstore_source::ColumnStoreTable;
pub use storage_source::{open_source, StorageTable};
pub use value::{QueryResult, Value};
pub use waits::WaitTimes;
