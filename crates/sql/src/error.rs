//! The errors SQL users see. Every error reaches the user as one line: DataFusion's messages
//! can span lines and carry backtraces, so they are flattened here, once, for every printer.

use std::path::PathBuf;

use datafusion::error::DataFusionError;
use flashscan_exec::ExecError;
use flashscan_storage::StorageError;

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SqlError {
    /// Opening the database or reading its catalog.
    #[error("{0}")]
    Storage(#[from] StorageError),

    /// A scan failed under a query (a read, a damaged page).
    #[error("{0}")]
    Exec(#[from] ExecError),

    /// The SQL text does not parse.
    #[error("syntax error: {0}")]
    Syntax(String),

    /// The query parses but cannot be planned: unknown table or column, a type mismatch.
    #[error("{0}")]
    Plan(String),

    /// The query failed while running (a division by zero, a failed cast).
    #[error("{0}")]
    Execution(String),

    /// A bug in flashscan or DataFusion, not in the query.
    #[error("internal error: {0}")]
    Internal(String),

    #[error("reading {path}: {source}")]
    ReadFile { path: PathBuf, #[source] source: std::io::Error },

    #[error("{0}")]
    InvalidArgument(String),

    /// The write path: the lock, the log, a commit, the catalog.
    #[error("{0}")]
    Write(#[from] flashscan_write::WriteError),

    /// A statement inside `BEGIN … COMMIT` failed: the whole block is aborted.
    #[error("{cause} (inside BEGIN … COMMIT: the whole transaction is aborted, nothing of it is written)")]
    TransactionAborted { cause: Box<SqlError> },
}

impl SqlError {
    /// True when the user can fix the cause (the query, a path, the data); the CLI exits 2
    /// for these and 1 for the rest.
    pub fn is_user_input(&self) -> bool {
        match self {
            SqlError::Storage(e) => e.is_user_input(),
            SqlError::Exec(e) => e.is_bad_input(),
            SqlError::Syntax(_) | SqlError::Plan(_) | SqlError::Execution(_) | SqlError::ReadFile { .. } | SqlError::InvalidArgument(_) => true,
            SqlError::Internal(_) => false,
            SqlError::Write(e) => e.is_user_input(),
            SqlError::TransactionAborted { cause } => cause.is_user_input(),
        }
    }
}

impl SqlError {
    /// True for errors in the SQL itself (shown as `SQL error: ...`), false for errors of
    /// the database or the scans under it (shown as they are).
    pub fn is_query_error(&self) -> bool {
        match self {
            SqlError::TransactionAborted { cause } => cause.is_query_error(),
            _ => matches!(self, SqlError::Syntax(_) | SqlError::Plan(_) | SqlError::Execution(_) | SqlError::Internal(_)),
        }
    }
}

impl From<DataFusionError> for SqlError {
    fn from(error: DataFusionError) -> SqlError {
        classify(error)
    }
}

/// Sorts a DataFusion error into syntax / plan / execution and keeps the most specific
/// message. Errors of our own scans travel through DataFusion as `External`; they come back
/// out as what they were, so a damaged page reads the same in SQL as in `flashscan scan`.
fn classify(error: DataFusionError) -> SqlError {
    match error {
        DataFusionError::SQL(e, _) if matches!(*e, datafusion::sql::sqlparser::parser::ParserError::RecursionLimitExceeded) => SqlError::Syntax(format!(
            "the statement nests deeper than flashscan's limit of {} levels (parentheses, subqueries, CASE): split it, or write long AND/OR chains without a parenthesis around each term",
            crate::SQL_NESTING_DEPTH_MAX
        )),
        DataFusionError::SQL(e, _) => SqlError::Syntax(one_line(&e.to_string())),
        DataFusionError::Context(_, inner) | DataFusionError::Diagnostic(_, inner) => classify(*inner),
        DataFusionError::Shared(inner) => match std::sync::Arc::try_unwrap(inner) {
            Ok(inner) => classify(inner),
            Err(shared) => SqlError::Execution(one_line(&shared.message())),
        },
        DataFusionError::Collection(mut errors) => match errors.is_empty() {
            false => classify(errors.swap_remove(0)),
            true => SqlError::Internal("an empty collection of errors".into()),
        },
        DataFusionError::External(e) => match e.downcast::<ExecError>() {
            Ok(exec) => SqlError::Exec(*exec),
            Err(e) if e.is::<flashscan_write::WriteError>() => match e.downcast::<flashscan_write::WriteError>() {
                Ok(w) => SqlError::Write(*w),
                Err(e) => SqlError::Execution(one_line(&e.to_string())),
            },
            Err(e) if e.is::<StorageError>() => match e.downcast::<StorageError>() {
                Ok(s) => SqlError::Storage(*s),
                Err(e) => SqlError::Execution(one_line(&e.to_string())),
            },
            Err(e) => match e.downcast::<DataFusionError>() {
                Ok(inner) => classify(*inner),
                Err(e) => SqlError::Execution(one_line(&e.to_string())),
            },
        },
        DataFusionError::Plan(m) => SqlError::Plan(one_line(&m)),
        e @ DataFusionError::SchemaError(..) => SqlError::Plan(one_line(&e.message())),
        DataFusionError::NotImplemented(m) => SqlError::Plan(format!("not supported: {}", one_line(&m))),
        DataFusionError::Configuration(m) => SqlError::Plan(one_line(&m)),
        DataFusionError::ArrowError(e, _) => SqlError::Execution(one_line(&e.to_string())),
        e @ DataFusionError::Internal(_) => SqlError::Internal(one_line(&e.message())),
        e => SqlError::Execution(one_line(&e.message())),
    }
}

/// Joins lines and drops backtraces: errors reach the user as `flashscan: SQL error: ...`.
pub fn one_line(message: &str) -> String {
    let cut = message.find("\n\nbacktrace:").map(|i| &message[..i]).unwrap_or(message);
    cut.split('\n').map(str::trim).filter(|l| !l.is_empty()).collect::<Vec<_>>().join(" ")
}

/// An `ExecError` carried through DataFusion.
pub fn exec_to_datafusion(error: ExecError) -> DataFusionError {
    DataFusionError::External(Box::new(error))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `(((a > 0) OR b <> 0) AND b <> 1) …` nested `depth` levels deep.
    fn nested_predicate(depth: usize) -> String {
        let mut e = "a > 0".to_string();
        for i in 0..depth {
            e = format!("({e} {} b <> {i})", if i % 2 == 1 { "AND" } else { "OR" });
        }
        format!("SELECT count(*) FROM t WHERE {e}")
    }

    #[test]
    fn a_statement_deeper_than_the_limit_is_refused_with_the_limit() {
        // On a thread with the stack every SQL thread gets (a test thread has 2 MiB).
        let outcome = std::thread::Builder::new()
            .stack_size(crate::SQL_THREAD_STACK_BYTES)
            .spawn(|| {
                let under = crate::session::parse_statements(&nested_predicate(crate::SQL_NESTING_DEPTH_MAX - 20)).is_ok();
                let over = crate::session::parse_statements(&nested_predicate(crate::SQL_NESTING_DEPTH_MAX + 20)).err().map(|e| e.to_string()).unwrap_or_default();
                (under, over)
            })
            .expect("thread")
            .join()
            .expect("no panic");
        assert!(outcome.0, "a statement under the limit parses");
        assert!(outcome.1.contains("nests deeper than flashscan's limit of 500 levels"), "{}", outcome.1);
    }

    #[test]
    fn one_line_joins_lines_and_drops_backtraces() {
        assert_eq!(one_line("a\n  b\n\nbacktrace: x\ny"), "a b");
        assert_eq!(one_line("plain"), "plain");
    }

    #[test]
    fn exec_errors_come_back_out_of_datafusion() {
        let e = exec_to_datafusion(ExecError::InvalidOption("bad depth".into()));
        let s = SqlError::from(e);
        assert!(matches!(s, SqlError::Exec(ExecError::InvalidOption(ref m)) if m == "bad depth"), "{s:?}");
    }
}
