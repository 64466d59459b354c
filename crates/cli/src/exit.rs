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
