use std::path::PathBuf;

/// Errors of the I/O layer. Each carries what a user needs to act on it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum IoError {
    #[error("cannot open {path}: {source}")]
    Open { path: PathBuf, source: std::io::Error },
    #[error("cannot open {path} with O_DIRECT (the file system refuses direct I/O): use --buffered")]
    DirectUnsupported { path: PathBuf },
    #[error("{path}: {what}")]
    File { path: PathBuf, what: String },
    #[error("I/O engine {engine} could not start: {source}")]
    EngineSetup { engine: &'static str, source: std::io::Error },
    #[error("I/O engine {engine} failed: {source}")]
    Engine { engine: &'static str, source: std::io::Error },
    #[error("invalid I/O request: {0}")]
    InvalidRequest(String),
    #[error("buffer arena of {bytes} bytes is too large (limit {limit} bytes): lower the queue depth or block size")]
    ArenaTooLarge { bytes: usize, limit: usize },
}
