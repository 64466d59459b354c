//! The errors a cluster user sees, one line each, with what to do.

use std::path::PathBuf;

use flashscan_sql::SqlError;
use flashscan_storage::StorageError;

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClusterError {
    /// cluster.json does not read, or its claims do not hold together.
    #[error("{path}: {reason}")]
    ClusterFile { path: PathBuf, reason: String },

    /// A host's catalog disagrees with cluster.json or with the other hosts.
    #[error("host {host} ({address}): {reason}")]
    Host { host: u32, address: String, reason: String },

    /// A host was asked for a partition it does not hold.
    #[error("{0}")]
    Refused(String),

    #[error("{0}")]
    Storage(#[from] StorageError),

    /// Planning or running the query (DataFusion, a scan on a host, the network).
    #[error("{0}")]
    Sql(#[from] SqlError),

    #[error("{0}")]
    InvalidArgument(String),

    /// A host stopped answering during a query (down, killed, unreachable): a failure while
    /// running, not the user's input. The message names the host and its address.
    #[error("{0}")]
    HostDown(String),

    /// Binding the worker's address or serving on it.
    #[error("serving on {address}: {reason}")]
    Serve { address: String, reason: String },
}

impl ClusterError {
    /// True when the user can fix the cause (a file, a flag, a query); the CLI exits 2.
    pub fn is_user_input(&self) -> bool {
        match self {
            ClusterError::ClusterFile { .. } | ClusterError::Host { .. } | ClusterError::InvalidArgument(_) | ClusterError::Refused(_) => true,
            ClusterError::Storage(e) => e.is_user_input(),
            ClusterError::Sql(e) => e.is_user_input(),
            ClusterError::Serve { .. } | ClusterError::HostDown(_) => false,
        }
    }
}

impl From<datafusion::error::DataFusionError> for ClusterError {
    fn from(e: datafusion::error::DataFusionError) -> ClusterError {
        ClusterError::Sql(SqlError::from(e))
    }
}
