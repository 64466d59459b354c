//! flashscan-cluster: a table bigger than one machine (issue 17, docs/cluster.md).
//!
//! Each host is an ordinary flashscan database holding the hash partitions it owns
//! (`flashscan load DB --host I/N`: partition p on host p mod N). A coordinator plans a
//! query once over the hosts' catalogs, and datafusion-distributed (datafusion-contrib) runs
//! it: flashscan adds only what is its own —
//! - [`cluster_file`]: cluster.json, the hosts and the partitions each owns, and its check;
//! - [`scan`]: the scan node as it travels, one variant per host; [`codec`]: its bytes;
//! - [`host`]: a worker turning a scan request into a scan of its own files, or refusing;
//! - [`planner`]: the hooks that give each host its task and route the task there;
//! - [`network`]: host URLs and channels with bounded waits; [`worker`]: the gRPC service;
//! - [`coordinator`]: `sql --cluster`; [`figures`]: what each task read, on which host.
//!
//! Scheduling, shuffles and transport are datafusion-distributed's.

pub mod cluster_file;
pub mod codec;
pub mod coordinator;
pub mod error;
pub mod figures;
pub mod host;
pub mod network;
pub mod planner;
pub mod scan;
pub mod worker;

pub use cluster_file::{CheckReport, ClusterFile, HostEntry};
pub use coordinator::{ClusterOptions, ClusterOutput, ClusterSession};
pub use error::ClusterError;
pub use figures::{render_tasks, TaskFigures};
pub use host::HostState;
