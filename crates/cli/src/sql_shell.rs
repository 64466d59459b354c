//! `flashscan sql DB ["QUERY"] [--json | --csv] [--file QUERY.sql]`: runs the statements
//! given (or starts the interactive shell) and prints each answer.

use std::io::Write;

use flashscan_sql::{render, shell, FlashscanSession, OutputMode, SessionOptions, SqlError};

use crate::cmd_sql::SqlArgs;
use crate::exit::bad_input;

pub fn run(args: SqlArgs) -> anyhow::Result<()> {
    // Statements are planned on this thread (`block_on`): a stack for deep expressions, as
    // the runtime's threads have (flashscan_sql::SQL_THREAD_STACK_BYTES).
    std::thread::Builder::new()
        .name("flashscan-sql".into())
        .stack_size(flashscan_sql::SQL_THREAD_STACK_BYTES)
        .spawn(move || run_on_this_thread(args))
        .map_err(|e| anyhow::anyhow!("cannot start the SQL thread: {e}"))?
        .join()
        .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
}

fn run_on_this_thread(args: SqlArgs) -> anyhow::Result<()> {
    let mode = match (args.json, args.csv) {
        (true, true) => return Err(bad_input("--json and --csv exclude each other: choose one")),
        (true, false) => OutputMode::Json,
        (false, true) => OutputMode::Csv,
        (false, false) => OutputMode::Table,
    };
    let sql = match (args.query, &args.file) {
        (Some(_), Some(_)) => return Err(bad_input("give the query or --file, not both")),
        (Some(q), None) => Some(q),
        (None, Some(path)) => Some(
            std::fs::read_to_string(path)
                .map_err(|source| to_anyhow(SqlError::ReadFile { path: path.clone(), source }))?,
        ),
        (None, None) => None,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .thread_stack_size(flashscan_sql::SQL_THREAD_STACK_BYTES)
        .enable_all()
        .build()
        .map_err(|e| anyhow::anyhow!("cannot start the query runtime: {e}"))?;
    let session = FlashscanSession::open(&args.db, SessionOptions::default()).map_err(to_anyhow)?;
    // A cluster host's database holds only its host's partitions: say so, so a count or a
    // sum over it is not mistaken for the whole table's.
    if let Ok(catalog) = flashscan_storage::Catalog::read(&args.db) {
        if let Some(host) = &catalog.host {
            eprintln!(
                "flashscan: note: {} is host {} of {} of a cluster: answers cover only the partitions it owns; for the whole tables run `flashscan sql --cluster CLUSTER.json \"QUERY\"`",
                args.db.display(),
                host.index,
                host.count
            );
        }
    }
    let Some(sql) = sql else {
        return shell::run_interactive(&session, &runtime, mode).map_err(to_anyhow);
    };
    let outputs = runtime.block_on(session.run(&sql)).map_err(to_anyhow)?;
    let mut out = std::io::stdout().lock();
    for output in &outputs {
        output.print_warnings();
        let text = render(output, mode).map_err(to_anyhow)?;
        out.write_all(text.as_bytes())?;
    }
    // A file (or query) that ends inside BEGIN … without COMMIT wrote nothing of the block.
    if let Some(message) = session.end_of_input() {
        return Err(bad_input(message));
    }
    Ok(())
}

/// One line, `SQL error: ...` for errors in the query; its exit code decided in exit.rs.
fn to_anyhow(e: SqlError) -> anyhow::Error {
    crate::exit::classify(e)
}
