//! Runs sqllogictest files against any PostgreSQL-protocol server (flashscan serve or
//! PostgreSQL itself) with the driver of the CI test (tests/slt/runner.rs), and prints one
//! JSON line per file: passed, failed, skipped and each failure's line, reason and SQL.
//! bench/sqllogictest/run.py drives it, a fresh database per file, for both engines.
//!
//! cargo build --workspace --all-features --example sqllogictest
//! target/debug/examples/sqllogictest "host=127.0.0.1 port=5432 user=u dbname=d" FILE...

#[path = "../tests/slt/runner.rs"]
mod runner;

use std::path::PathBuf;
use std::time::Duration;

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let mut args = std::env::args().skip(1);
    let (Some(connection), files) = (args.next(), args.map(PathBuf::from).collect::<Vec<_>>()) else {
        eprintln!("usage: sqllogictest \"host=H port=P user=U dbname=D\" FILE_OR_DIR... (FLASHSCAN_SLT_TIMEOUT_S: seconds per record)");
        std::process::exit(2);
    };
    let config: tokio_postgres::Config = match connection.parse() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("sqllogictest: bad connection string {connection:?}: {e}");
            std::process::exit(2);
        }
    };
    let timeout = match std::env::var("FLASHSCAN_SLT_TIMEOUT_S") {
        Ok(s) => match s.parse::<u64>() {
            Ok(n) if n > 0 => Duration::from_secs(n),
            _ => {
                eprintln!("sqllogictest: FLASHSCAN_SLT_TIMEOUT_S={s:?} is not a positive number of seconds");
                std::process::exit(2);
            }
        },
        Err(_) => runner::RECORD_TIMEOUT_DEFAULT,
    };
    for path in files.iter().flat_map(|p| runner::corpus_files(p)) {
        let outcome = runner::run_file(&path, config.clone(), timeout).await;
        let failures: Vec<serde_json::Value> = outcome
            .failures
            .iter()
            .map(|f| serde_json::json!({"line": f.line, "reason": f.reason, "sql": f.sql}))
            .collect();
        let line = serde_json::json!({
            "file": outcome.path.display().to_string(),
            "passed": outcome.passed,
            "failed": outcome.failures.len(),
            "skipped": outcome.skipped,
            "failures": failures,
        });
        println!("{line}");
    }
}
