//! flashscan-sql: SQL over flashscan tables through Apache DataFusion.
//!
//! Kept in a crate of its own so the core builds without DataFusion. Data flows:
//! - [`session`]: a DataFusion context with every table of a database registered;
//! - [`settings`]: the `flashscan.*` session settings (`SET flashscan.runtime_filters = false`);
//! - [`table_provider`]: a table's schema, statistics and pushdown answers, and its scan node;
//! - [`pruning`]: which filters skip partitions (min/max ranges, where the format has them);
//! - [`scan_units`]: partitions (or slices of them) dealt out to execution partitions;
//! - [`build_side`]: partitioned hash joins build on the input with fewer estimated rows;
//! - [`exec_plan`]: the scan node, one blocking reader per execution partition;
//! - [`aggregate_pushdown`]: small-domain GROUP BY + SUM/AVG/COUNT/MIN/MAX answered in the
//!   scan by [`aggregate_kernel`] (the partial aggregate's state, exactly);
//! - [`reader`]: the one function that reads pages through flashscan's I/O layer;
//! - [`like`]: `LIKE` patterns of several `%` pieces matched by substring search in the scan;
//! - [`metrics`]: where the scan time went, for EXPLAIN ANALYZE and `--json`;
//! - [`format`]: table, JSON and CSV printers; [`shell`]: the interactive shell;
//! - [`dml`]: CREATE/DROP TABLE and INSERT through flashscan's write path;
//! - [`error`]: one-line errors.

pub mod aggregate_kernel;
pub mod aggregate_pushdown;
pub mod build_side;
pub mod column_statistics;
pub mod copy_from;
pub mod dml;
pub mod error;
pub mod exec_plan;
pub mod format;
pub mod like;
pub mod metrics;
pub mod pruning;
pub mod reader;
pub mod scan_units;
pub mod session;
pub mod settings;
pub mod shell;
pub mod table_provider;
pub mod views;

pub use error::SqlError;
pub use format::{render, render_csv, render_json, render_table, OutputMode};
pub use reader::ReadOptions;
pub use session::{FlashscanSession, QueryOutput, SessionOptions};
pub use settings::FlashscanSettings;
pub use table_provider::FlashscanTable;
