//! Errors of the workbench. Each says what went wrong and what to do; `is_bad_input` tells
//! the binary whether the user can fix it (exit 2) or the run failed (exit 1).

use std::path::PathBuf;

use flashscan_io::IoError;

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WorkbenchError {
    /// A flag or value the workbench cannot run with; the message names the flag, the value
    /// and the range it takes (`spec::check_job` and the flag parsers).
    #[error("{0}")]
    Spec(String),
    /// `--job FILE` could not be read.
    #[error("--job {path}: cannot read it ({source})")]
    JobFileRead { path: PathBuf, #[source] source: std::io::Error },
    #[error("--job {path}: larger than {bytes_max} bytes; not a job file")]
    JobFileTooLarge { path: PathBuf, bytes_max: u64 },
    /// What is wrong with the job document in `--job FILE` (the cause says what).
    #[error("--job {path}: {source}")]
    JobFile { path: PathBuf, #[source] source: Box<WorkbenchError> },
    /// A job document that is not JSON of the shape `--save-job` writes (`what`: which part).
    #[error("{what}: {source}")]
    JobJson { what: &'static str, #[source] source: serde_json::Error },
    /// A job document that parses but describes no job (an empty list, an entry without a job).
    #[error("{0}")]
    JobDocument(String),
    /// The job a file describes, refused by the same checks as the flags.
    #[error("job file: {0}")]
    JobInFile(Box<WorkbenchError>),
    /// A view of the results that needs something the run did not record.
    #[error("{0}")]
    NotRecorded(&'static str),
    /// The operating system refused a thread (the run stops before measuring).
    #[error("cannot start an I/O thread: {0}")]
    ThreadSpawn(#[source] std::io::Error),
    /// `flashscan io --child` got a request another flashscan did not write: a bug between
    /// parent and child, or a child started by hand.
    #[error("--child: not a child request ({0})")]
    ChildRequest(#[source] serde_json::Error),
    #[error("--child: cannot write the outcome ({0})")]
    ChildReply(#[source] serde_json::Error),
    /// A run of several processes asked of a caller that cannot start them: flashscan's bug.
    #[error("{processes} processes: this caller cannot start child processes")]
    NoChildProcesses { processes: u32 },
    #[error("{path}:{line_number}: {what}")]
    ParamFile { path: PathBuf, line_number: usize, what: String },
    #[error("cannot read parameter file {path}: {source}")]
    ParamFileRead { path: PathBuf, source: std::io::Error },
    /// A target that cannot be prepared: missing directory, no space, a foreign file.
    #[error("{path}: {what}")]
    Target { path: PathBuf, what: String },
    /// Opening a target or starting an engine failed before any I/O was measured.
    #[error(transparent)]
    Setup(IoError),
    /// An I/O failed during the run.
    #[error(transparent)]
    Run(IoError),
    #[error("cannot write {path}: {source}")]
    Output { path: PathBuf, source: std::io::Error },
    /// An output name that is taken: flashscan never replaces a file it did not create.
    #[error("{path} already exists and flashscan io never replaces a file: remove it or pick another name")]
    OutputExists { path: PathBuf },
    /// A child process of `--sweep processes=` failed or spoke nonsense.
    #[error("child process {index}: {what}")]
    Child { index: u32, what: String },
    #[error("chart: {0}")]
    Chart(String),
    #[error("thread {0} panicked")]
    ThreadPanicked(String),
}

impl WorkbenchError {
    /// True when the user's input caused the error (the binary exits 2).
    pub fn is_bad_input(&self) -> bool {
        match self {
            WorkbenchError::Spec(_)
            | WorkbenchError::JobFileRead { .. }
            | WorkbenchError::JobFileTooLarge { .. }
            | WorkbenchError::JobFile { .. }
            | WorkbenchError::JobJson { .. }
            | WorkbenchError::JobDocument(_)
            | WorkbenchError::JobInFile(_)
            | WorkbenchError::NotRecorded(_)
            | WorkbenchError::ParamFile { .. }
            | WorkbenchError::ParamFileRead { .. }
            | WorkbenchError::Target { .. }
            | WorkbenchError::Output { .. }
            | WorkbenchError::OutputExists { .. } => true,
            WorkbenchError::Setup(e) => matches!(
                e,
                IoError::Open { .. } | IoError::DirectUnsupported { .. } | IoError::InvalidRequest(_) | IoError::ArenaTooLarge { .. }
            ),
            _ => false,
        }
    }

    /// A broken invariant of flashscan's own (the binary says so instead of blaming the input).
    pub fn is_bug(&self) -> bool {
        matches!(self, WorkbenchError::ThreadPanicked(_) | WorkbenchError::NoChildProcesses { .. })
    }

    pub fn target(path: &std::path::Path, what: impl Into<String>) -> WorkbenchError {
        WorkbenchError::Target { path: path.to_path_buf(), what: what.into() }
    }
}
