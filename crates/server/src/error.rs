//! The server's errors: startup problems the CLI prints as one line, and the SQLSTATE
//! every query error carries to the client.

use std::path::PathBuf;

use pgwire::error::{ErrorInfo, PgWireError};

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServerError {
    #[error("{0}")]
    InvalidArgument(String),

    /// Another process owns the database.
    #[error("{0}")]
    DatabaseBusy(String),

    #[error("{what} {path}: {source}")]
    Io { what: &'static str, path: PathBuf, #[source] source: std::io::Error },

    #[error("listening on {addr}: {source}")]
    Listen { addr: String, #[source] source: std::io::Error },

    #[error("{0}")]
    Sql(#[from] flashscan_sql::SqlError),

    /// The group committer's threads could not be started (`writes.rs`).
    #[error("{0}")]
    Committer(#[from] crate::writes::CommitterStartError),
}

impl ServerError {
    /// True when the user can fix it (a flag, a path, a busy database): exit code 2.
    pub fn is_user_input(&self) -> bool {
        match self {
            ServerError::InvalidArgument(_) | ServerError::DatabaseBusy(_) | ServerError::Listen { .. } => true,
            ServerError::Io { .. } => true,
            ServerError::Sql(e) => e.is_user_input(),
            ServerError::Committer(_) => false,
        }
    }
}

/// SQLSTATE codes the server sends (PostgreSQL's appendix A).
pub mod sqlstate {
    pub const SYNTAX_ERROR: &str = "42601";
    pub const UNDEFINED_TABLE: &str = "42P01";
    pub const FEATURE_NOT_SUPPORTED: &str = "0A000";
    pub const DATA_EXCEPTION: &str = "22000";
    pub const INSUFFICIENT_RESOURCES: &str = "53000";
    pub const OUT_OF_MEMORY: &str = "53200";
    pub const TOO_MANY_CONNECTIONS: &str = "53300";
    pub const QUERY_CANCELED: &str = "57014";
    pub const ADMIN_SHUTDOWN: &str = "57P01";
    pub const INTERNAL_ERROR: &str = "XX000";
    pub const IO_ERROR: &str = "58030";
    pub const INVALID_PARAMETER_VALUE: &str = "22023";
    pub const INVALID_PASSWORD: &str = "28P01";
    pub const READ_ONLY: &str = "25006";
    pub const NOT_NULL_VIOLATION: &str = "23502";
    pub const UNIQUE_VIOLATION: &str = "23505";
    pub const IN_FAILED_TRANSACTION: &str = "25P02";
    pub const NO_ACTIVE_SQL_TRANSACTION: &str = "25P01";
    pub const ACTIVE_SQL_TRANSACTION: &str = "25001";
    pub const INVALID_SAVEPOINT_SPECIFICATION: &str = "3B001";
    pub const BAD_COPY_FORMAT: &str = "22P04";
    pub const UNDEFINED_COLUMN: &str = "42703";
    pub const DUPLICATE_COLUMN: &str = "42701";
    pub const UNDEFINED_OBJECT: &str = "42704";
    pub const INVALID_SCHEMA_NAME: &str = "3F000";
    pub const PROTOCOL_VIOLATION: &str = "08P01";
    pub const CONNECTION_FAILURE: &str = "08006";
    pub const CANT_CHANGE_RUNTIME_PARAM: &str = "55P02";
    pub const LOCK_NOT_AVAILABLE: &str = "55P03";
    pub const OBJECT_NOT_IN_PREREQUISITE_STATE: &str = "55000";
    pub const SERIALIZATION_FAILURE: &str = "40001";
    /// ON CONFLICT DO UPDATE changing one row twice.
    pub const CARDINALITY_VIOLATION: &str = "21000";
    /// ON CONFLICT naming columns no unique index has.
    pub const INVALID_COLUMN_REFERENCE: &str = "42P10";
    /// A value for a `GENERATED ALWAYS` identity column.
    pub const GENERATED_ALWAYS: &str = "428C9";
    pub const DEADLOCK_DETECTED: &str = "40P01";
    pub const DUPLICATE_TABLE: &str = "42P07";
    pub const DEPENDENT_OBJECTS_STILL_EXIST: &str = "2BP01";
    pub const WRONG_OBJECT_TYPE: &str = "42809";
    pub const INVALID_TABLE_DEFINITION: &str = "42P16";
}

/// An ERROR for the client with its SQLSTATE.
pub fn pg_error(code: &str, message: impl Into<String>) -> PgWireError {
    PgWireError::UserError(Box::new(ErrorInfo::new("ERROR".to_owned(), code.to_owned(), message.into())))
}

/// A FATAL error: the server closes the connection after sending it.
pub fn pg_fatal(code: &str, message: impl Into<String>) -> PgWireError {
    PgWireError::UserError(Box::new(ErrorInfo::new("FATAL".to_owned(), code.to_owned(), message.into())))
}

/// A SQL error as the client sees it: one line, with the SQLSTATE that fits it.
pub fn sql_error_to_pg(error: &flashscan_sql::SqlError) -> PgWireError {
    use flashscan_sql::SqlError as E;
    if let E::Write(w) = error {
        return crate::writes::WriteFailure::of(w).to_pg();
    }
    let message = error.to_string();
    let code = match error {
        E::Syntax(_) => sqlstate::SYNTAX_ERROR,
        E::Plan(m) if m.contains("not found") && m.contains("table") => sqlstate::UNDEFINED_TABLE,
        E::Plan(m) if m.contains("not supported") => sqlstate::FEATURE_NOT_SUPPORTED,
        E::Plan(_) => sqlstate::SYNTAX_ERROR,
        E::Execution(m) if m.contains("Resources exhausted") || m.contains("memory") => sqlstate::OUT_OF_MEMORY,
        // A name a catalog lookup did not find (`'x'::regtype`): PostgreSQL's code for it.
        E::Execution(m) => crate::pg_catalog::undefined_object_sqlstate(m).unwrap_or(sqlstate::DATA_EXCEPTION),
        E::Storage(_) | E::Exec(_) | E::ReadFile { .. } => sqlstate::IO_ERROR,
        E::InvalidArgument(_) => sqlstate::INVALID_PARAMETER_VALUE,
        _ => sqlstate::INTERNAL_ERROR,
    };
    let message = if code == sqlstate::OUT_OF_MEMORY {
        format!("{message} (the query is over its memory budget: raise --query-memory, or narrow the query)")
    } else {
        message
    };
    pg_error(code, message)
}
