//! How errors leave the binary: one line, `flashscan: <what>`, and an exit code. This is
//! the one place that decides the code, for every crate's error type ([`Classified`]):
//! - exit 2: the input was wrong (a flag, a file, a directory, the data); the user can fix it;
//! - exit 1: something failed while running (a device error, a full disk);
//! - exit 1 too for an internal bug (a worker panicked, an invariant broke), and the line
//!   says it is a bug in flashscan rather than blaming the input.

use flashscan_bench::BenchError;
use flashscan_buffer::BufferError;
use flashscan_exec::ExecError;
use flashscan_index::IndexError;
use flashscan_storage::StorageError;
use flashscan_workbench::WorkbenchError;
use flashscan_write::WriteError;

/// Whose fault an error is: that decides the exit code and how the line reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// The user can fix it: exit 2.
    Input,
    /// It failed while running: exit 1.
    Running,
    /// flashscan itself is wrong: exit 1, and the line says so.
    Bug,
}

/// An error type the binary knows how to classify.
pub trait Classified: std::error::Error + Send + Sync + Sized + 'static {
    fn fault(&self) -> Fault;

    /// The line the user reads for the user's input or a bug (the error's own by default).
    fn line(&self) -> String {
        self.to_string()
    }

    /// The error as it leaves while running (the chain of causes, joined on one line).
    fn into_running(self) -> anyhow::Error {
        anyhow::Error::new(self)
    }
}

/// The error as the binary reports it: its fault decides the code.
pub fn classify<E: Classified>(e: E) -> anyhow::Error {
    match e.fault() {
        Fault::Input => bad_input(e.line()),
        Fault::Running => e.into_running(),
        Fault::Bug => anyhow::Error::new(InternalBug(e.line())),
    }
}

fn input_or_running(user_input: bool) -> Fault {
    if user_input { Fault::Input } else { Fault::Running }
}

/// For error types that say themselves whether they are a bug and whether the user can
/// fix them.
fn bug_input_or_running(bug: bool, user_input: bool) -> Fault {
    if bug { Fault::Bug } else { input_or_running(user_input) }
}

impl Classified for StorageError {
    fn fault(&self) -> Fault {
        bug_input_or_running(self.is_bug(), self.is_user_input())
    }
}

impl Classified for ExecError {
    fn fault(&self) -> Fault {
        match self {
            // A panic in a worker, or a stop (control flow between a scan and its consumer)
            // that reached the command: both are flashscan's bugs, not the user's input.
            ExecError::WorkerPanic(_) | ExecError::Stopped | ExecError::FileNotInPlan { .. } | ExecError::Internal(_) => Fault::Bug,
            // Storage's own verdict, bugs included (wrapped errors keep their fault).
            ExecError::StorageLayer(e) => e.fault(),
            e => input_or_running(e.is_bad_input()),
        }
    }
}

impl Classified for IndexError {
    fn fault(&self) -> Fault {
        match self {
            IndexError::Storage(e) => e.fault(),
            e => input_or_running(e.is_user_input()),
        }
    }
}

impl Classified for WriteError {
    fn fault(&self) -> Fault {
        match self {
            WriteError::Storage(e) => e.fault(),
            e => input_or_running(e.is_user_input()),
        }
    }

    // Its messages already carry their causes: one line without repeating them.
    fn into_running(self) -> anyhow::Error {
        anyhow::anyhow!(self.to_string())
    }
}

impl Classified for WorkbenchError {
    fn fault(&self) -> Fault {
        bug_input_or_running(self.is_bug(), self.is_bad_input())
    }
}

impl Classified for BenchError {
    fn fault(&self) -> Fault {
        match self {
            BenchError::Exec(e) => e.fault(),
            BenchError::Storage(e) => e.fault(),
            BenchError::WritePath(e) => e.fault(),
            BenchError::ThreadPanicked(_) => Fault::Bug,
            e => input_or_running(e.is_user_input()),
        }
    }
}

/// The pool's errors that reach a command directly come from sizing it (`--buffer-pool`)
/// or from what its size allows; the rest failed while running.
impl Classified for BufferError {
    fn fault(&self) -> Fault {
        match self {
            BufferError::BudgetOutOfRange { .. } | BufferError::AllocationFailed { .. } | BufferError::AllPinned { .. } | BufferError::RingSize { .. } => Fault::Input,
            _ => Fault::Running,
        }
    }
}

/// `flashscan sql` and the shell: errors in the query read `SQL error: …`.
#[cfg(feature = "sql")]
impl Classified for flashscan_sql::SqlError {
    fn fault(&self) -> Fault {
        use flashscan_sql::SqlError;
        match self {
            SqlError::Internal(_) => Fault::Bug,
            SqlError::Storage(e) => e.fault(),
            SqlError::Exec(e) => e.fault(),
            SqlError::Write(e) => e.fault(),
            e => input_or_running(e.is_user_input()),
        }
    }

    fn line(&self) -> String {
        if self.is_query_error() { format!("SQL error: {self}") } else { self.to_string() }
    }

    fn into_running(self) -> anyhow::Error {
        anyhow::anyhow!(self.line())
    }
}

/// `flashscan serve`: its configuration, its listener, and the SQL under it.
#[cfg(feature = "sql")]
impl Classified for flashscan_server::ServerError {
    fn fault(&self) -> Fault {
        match self {
            flashscan_server::ServerError::Sql(e) => e.fault(),
            e => input_or_running(e.is_user_input()),
        }
    }
}

pub fn storage_error(e: StorageError) -> anyhow::Error {
    classify(e)
}

pub fn exec_error(e: ExecError) -> anyhow::Error {
    classify(e)
}

pub fn index_error(e: IndexError) -> anyhow::Error {
    classify(e)
}

pub fn write_error(e: WriteError) -> anyhow::Error {
    classify(e)
}

pub fn workbench_error(e: WorkbenchError) -> anyhow::Error {
    classify(e)
}

pub fn bench_error(e: BenchError) -> anyhow::Error {
    classify(e)
}

/// A broken invariant of flashscan itself, reported as such.
#[derive(Debug)]
pub struct InternalBug(pub String);

impl std::fmt::Display for InternalBug {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "internal error (a bug in flashscan, not in your input; please report it with the command line): {}", self.0)
    }
}

impl std::error::Error for InternalBug {}

/// An error caused by what the user gave us. Wrap with `bad_input(...)`.
#[derive(Debug)]
pub struct BadInput(pub String);

impl std::fmt::Display for BadInput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for BadInput {}

pub fn bad_input(message: impl Into<String>) -> anyhow::Error {
    anyhow::Error::new(BadInput(message.into()))
}

pub fn report_and_exit(error: anyhow::Error) -> ! {
    // One line: the chain of causes joined, most specific last.
    let line = error.chain().map(|c| c.to_string()).collect::<Vec<_>>().join(": ");
    eprintln!("flashscan: {line}");
    let code = if error.chain().any(|c| c.is::<BadInput>()) { 2 } else { 1 };
    std::process::exit(code)
}

/// Command-line errors from clap: help and version print as usual; a wrong flag or value
/// becomes one line naming it, plus where to read the usage, and exit code 2.
pub fn report_usage_error_and_exit(error: clap::Error) -> ! {
    use clap::error::ErrorKind;
    if matches!(error.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand) {
        error.exit();
    }
    eprintln!("flashscan: {}", usage_error_line(&error.to_string()));
    std::process::exit(2)
}

/// clap's multi-line error as one line: the error, the items listed under it (clap puts
/// missing arguments on their own indented lines), its tip, and the command's usage.
fn usage_error_line(text: &str) -> String {
    let mut lines = text.lines().skip_while(|l| l.trim().is_empty());
    let first = lines.next().unwrap_or("invalid command line").trim_start_matches("error: ").trim();
    let mut line = first.trim_end_matches(':').to_string();
    if first.ends_with(':') {
        let items: Vec<&str> = lines.take_while(|l| l.starts_with(' ') && !l.trim().is_empty()).map(str::trim).collect();
        line = format!("{line}: {}", items.join(", "));
    }
    if let Some(tip) = text.lines().find(|l| l.trim_start().starts_with("tip:")) {
        line = format!("{line} ({})", tip.trim());
    }
    match text.lines().find_map(|l| l.trim().strip_prefix("Usage: ")) {
        Some(usage) => format!("{line}; usage: {usage} (`--help` says more)"),
        None => format!("{line}; see `flashscan --help`"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A missing argument is named, with the command's usage, on one line.
    #[test]
    fn usage_errors_name_what_is_missing() {
        let text = "error: the following required arguments were not provided:\n  --compression <COMPRESSION>\n  <TABLE>\n\nUsage: flashscan rebuild --compression <COMPRESSION> <DB> <TABLE>\n\nFor more information, try '--help'.\n";
        assert_eq!(
            usage_error_line(text),
            "the following required arguments were not provided: --compression <COMPRESSION>, <TABLE>; usage: flashscan rebuild --compression <COMPRESSION> <DB> <TABLE> (`--help` says more)"
        );
        let text = "error: unexpected argument '--fast' found\n\n  tip: to pass '--fast' as a value, use '-- --fast'\n\nUsage: flashscan scan <DB> <TABLE>\n";
        assert_eq!(usage_error_line(text), "unexpected argument '--fast' found (tip: to pass '--fast' as a value, use '-- --fast'); usage: flashscan scan <DB> <TABLE> (`--help` says more)");
        assert_eq!(usage_error_line("error: bad\n"), "bad; see `flashscan --help`");
    }

    /// A broken invariant of storage stays a bug however many crates wrap it; the user's
    /// input stays the user's (exit 2), and the line says which.
    #[test]
    fn wrapped_errors_keep_their_fault() {
        let bug = || StorageError::FileNotOpened { path: "t.dat".into() };
        let input = || StorageError::UnknownTableFormat { table: "t".into(), format: "heap_zebra".into() };
        assert_eq!(bug().fault(), Fault::Bug);
        assert_eq!(ExecError::from(bug()).fault(), Fault::Bug);
        assert_eq!(IndexError::from(bug()).fault(), Fault::Bug);
        assert_eq!(WriteError::from(bug()).fault(), Fault::Bug);
        assert_eq!(BenchError::from(bug()).fault(), Fault::Bug);
        assert_eq!(input().fault(), Fault::Input);
        assert_eq!(ExecError::from(input()).fault(), Fault::Input);
        assert_eq!(IndexError::from(input()).fault(), Fault::Input);
        assert_eq!(WriteError::from(input()).fault(), Fault::Input);
        let line = classify(ExecError::from(bug())).to_string();
        assert!(line.starts_with("internal error (a bug in flashscan"), "{line}");
        let line = classify(input()).to_string();
        assert!(line.contains("heap_zebra") && !line.contains("internal error"), "{line}");
        assert_eq!(BenchError::ThreadPanicked("a thread").fault(), Fault::Bug);
        assert_eq!(WorkbenchError::NoChildProcesses { processes: 2 }.fault(), Fault::Bug);
        assert_eq!(WorkbenchError::JobDocument("a sweep with no points".into()).fault(), Fault::Input);
    }
}
