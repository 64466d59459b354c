//! Errors of the workbench. Each says what went wrong and what to do; `is_bad_input` tells
//! the binary whether the user can fix it (exit 2) or the run failed (exit 1).

use std::path::PathBuf;

use flashscan_io::IoError;

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WorkbenchError {
    /// A flag or value the workbench cannot run with.
    #[error("{0}")]
    Spec(String),
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

    pub fn target(path: &std::path::Path, what: impl Into<String>) -> WorkbenchError {
        WorkbenchError::Target { path: path.to_path_buf(), what: what.into() }
    }
}
