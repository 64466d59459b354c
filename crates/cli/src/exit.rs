//! How errors leave the binary: one line, `flashscan: <what>`, and an exit code.
//! Exit 2 means the input was wrong (a flag, a file, a directory, the data); the user can
//! fix it. Exit 1 means something failed while running.

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
    let text = error.to_string();
    let first = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("invalid command line");
    let first = first.trim_start_matches("error: ").trim();
    let hint = text.lines().find(|l| l.trim_start().starts_with("tip:")).map(|l| format!(" ({})", l.trim())).unwrap_or_default();
    eprintln!("flashscan: {first}{hint}; see `flashscan --help`");
    std::process::exit(2)
}
