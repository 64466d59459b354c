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
//! - [`subquery_by_domain`]: subqueries DataFusion leaves in SELECT lists and WHERE clauses,
//!   decorrelated; [`output_names`]: repeated output names (`SELECT a AS c, b AS c`);
//! - [`error`]: one-line errors.

pub mod aggregate_kernel;
pub mod alter;
pub mod aggregate_pushdown;
pub mod build_side;
pub mod change;
pub mod column_defaults;
pub mod column_statistics;
pub mod copy_from;
pub mod deferred_build;
pub mod dml;
pub mod error;
pub mod exec_plan;
pub mod format;
pub mod index_ddl;
pub mod index_order;
pub mod index_scan;
pub mod join_order;
pub mod like;
pub mod metrics;
pub mod output_names;
pub mod parameters;
pub mod point_plan;
pub mod pruning;
pub mod reader;
pub mod returning;
pub mod rule_order;
pub mod scan_units;
pub mod null_in_filter;
pub mod sequence_functions;
pub mod session;
pub mod settings;
pub mod shell;
pub mod subquery_by_domain;
pub mod table_provider;
pub mod views;

pub use error::SqlError;

/// How deep a statement may nest (parentheses, subqueries, CASE): DataFusion's parser stops
/// at 50 by default, and the SQLite corpus's index/ queries nest 34 parentheses around AND/OR
/// chains (PostgreSQL takes 1,000 levels). Planning and execution recurse once per level, so
/// every thread that plans or runs SQL gets [`SQL_THREAD_STACK_BYTES`] of stack.
pub const SQL_NESTING_DEPTH_MAX: usize = 500;

/// The stack of every thread that plans or runs SQL (reserved address space; the kernel backs
/// only the pages a deep statement touches). Measured: statements at the limit (490
/// parenthesized AND/OR levels, 400 levels of `+`) plan and run with it in the debug build;
/// how much of it they use was not measured (docs/sql.md, "Conformance").
pub const SQL_THREAD_STACK_BYTES: usize = 64 << 20;
pub use format::{render, render_csv, render_json, render_table, OutputMode};
pub use reader::ReadOptions;
pub use session::{FlashscanSession, QueryOutput, SessionOptions};
pub use settings::FlashscanSettings;
pub use table_provider::FlashscanTable;
