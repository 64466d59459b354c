//! The interactive shell: statements end with `;` and may span lines; history is kept in
//! `~/.flashscan_sql_history`. Errors print one line and the shell goes on.

use std::io::Write;
use std::path::PathBuf;

use rustyline::config::Configurer;
use rustyline::error::ReadlineError;
use rustyline::DefaultEditor;

use crate::error::SqlError;
use crate::format::{render, OutputMode};
use crate::session::FlashscanSession;

/// Lines kept in the history file, at most.
pub const HISTORY_LINES_MAX: usize = 1000;

const HELP: &str = "\
Statements end with ';' and may span lines. EXPLAIN and EXPLAIN ANALYZE show the plan,
the scans' bytes read, I/O wait and decode time. BEGIN … COMMIT (or ROLLBACK) makes the
statements between one transaction (the prompt shows `*`); an error inside aborts it.
  \\d            list tables
  \\d TABLE      columns of a table
  \\table \\json \\csv   output mode
  \\q            quit (also Ctrl-D)";

fn history_path() -> Option<PathBuf> {
    std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".flashscan_sql_history"))
}

/// Runs the shell until `\q` or end of input.
pub fn run_interactive(session: &FlashscanSession, runtime: &tokio::runtime::Runtime, mut mode: OutputMode) -> Result<(), SqlError> {
    let mut editor = DefaultEditor::new().map_err(|e| SqlError::InvalidArgument(format!("cannot start the line editor: {e}")))?;
    // Best effort: a missing or unreadable history file only means no history.
    let _ = editor.set_max_history_size(HISTORY_LINES_MAX);
    let history = history_path();
    if let Some(h) = &history {
        let _ = editor.load_history(h);
    }
    println!("flashscan SQL on {} ({} tables). \\? for help, \\q to quit.", session.db_dir().display(), session.table_names().len());
    let mut pending = String::new();
    loop {
        // psql's marker: `*` inside BEGIN … COMMIT.
        let prompt = match (pending.is_empty(), session.in_transaction()) {
            (true, false) => "flashscan> ",
            (true, true) => "flashscan*> ",
            (false, false) => "        -> ",
            (false, true) => "         -> ",
        };
        let line = match editor.readline(prompt) {
            Ok(line) => line,
            // Ctrl-C drops the statement being typed, as psql does.
            Err(ReadlineError::Interrupted) => {
                pending.clear();
                continue;
            }
            Err(ReadlineError::Eof) => break,
            Err(e) => return Err(SqlError::InvalidArgument(format!("reading input: {e}"))),
        };
        let trimmed = line.trim();
        if pending.is_empty() && trimmed.starts_with('\\') {
            let _ = editor.add_history_entry(trimmed);
            match meta_command(session, runtime, trimmed, &mut mode) {
                MetaOutcome::Quit => break,
                MetaOutcome::Done => continue,
            }
        }
        if pending.is_empty() && matches!(trimmed, "quit" | "exit") {
            break;
        }
        if trimmed.is_empty() {
            continue;
        }
        pending.push_str(&line);
        pending.push('\n');
        if !trimmed.ends_with(';') {
            continue;
        }
        let sql = std::mem::take(&mut pending);
        let _ = editor.add_history_entry(sql.trim());
        run_and_print(session, runtime, &sql, mode);
    }
    if let Some(h) = &history {
        let _ = editor.save_history(h);
    }
    if let Some(message) = session.end_of_input() {
        eprintln!("{message}");
    }
    Ok(())
}

enum MetaOutcome {
    Quit,
    Done,
}

fn meta_command(session: &FlashscanSession, runtime: &tokio::runtime::Runtime, command: &str, mode: &mut OutputMode) -> MetaOutcome {
    let mut words = command.split_whitespace();
    match (words.next(), words.next()) {
        (Some("\\q"), _) => return MetaOutcome::Quit,
        (Some("\\?") | Some("\\h"), _) => println!("{HELP}"),
        (Some("\\table"), _) => *mode = OutputMode::Table,
        (Some("\\json"), _) => *mode = OutputMode::Json,
        (Some("\\csv"), _) => *mode = OutputMode::Csv,
        (Some("\\d"), None) => run_and_print(session, runtime, "SHOW TABLES", *mode),
        (Some("\\d"), Some(table)) => {
            // Quoted as an identifier literal: the name comes from the user.
            let table = table.replace('\'', "''");
            let sql = format!(
                "SELECT column_name, data_type, is_nullable FROM information_schema.columns \
                 WHERE table_name = '{table}' ORDER BY ordinal_position"
            );
            run_and_print(session, runtime, &sql, *mode)
        }
        _ => eprintln!("unknown command {command}; \\? for help"),
    }
    MetaOutcome::Done
}

fn run_and_print(session: &FlashscanSession, runtime: &tokio::runtime::Runtime, sql: &str, mode: OutputMode) {
    match runtime.block_on(session.run(sql)) {
        Ok(outputs) => {
            let mut out = std::io::stdout().lock();
            for o in &outputs {
                o.print_warnings();
                match render(o, mode) {
                    Ok(text) => {
                        let _ = out.write_all(text.as_bytes());
                    }
                    Err(e) => eprintln!("SQL error: {e}"),
                }
            }
        }
        Err(e) => eprintln!("SQL error: {e}"),
    }
}
