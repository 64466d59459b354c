//! sqllogictest over the PostgreSQL wire protocol: the `sqllogictest` crate parses the
//! files, runs each record and compares (sort modes, `hash-threshold`, `skipif`/`onlyif`);
//! this module is its driver, a tokio-postgres client on the simple query protocol that
//! calls itself `postgresql`, so the SQLite corpus's `skipif postgresql` / `onlyif
//! postgresql` records apply as they do to PostgreSQL itself.
//!
//! Shared by the CI test (`tests/sqllogictest.rs`, a flashscan server per file) and the
//! side-by-side runner (`examples/sqllogictest.rs`, driven by bench/sqllogictest/run.py
//! against flashscan and PostgreSQL).
//!
//! Values are formatted as the SQLite corpus's reference runner formats them, by the type
//! letter of the query's header: `I` the value as a 64-bit integer (a decimal truncated),
//! `R` as `%.3f`, `T` as text with an empty string shown as `(empty)` and characters outside
//! printable ASCII as `@`; NULL as `NULL` whatever the type. The expected answers were made
//! by that formatting, so an engine that returns `numeric` where SQLite returns a double
//! still matches.
#![allow(dead_code)] // the test and the example each use their own part

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sqllogictest::{
    AsyncDB, DBOutput, DefaultColumnType, QueryExpect, Record, RecordOutput, Runner, TestErrorKind,
};
use tokio_postgres::{Client, NoTls, SimpleQueryMessage};

/// The label records are matched against: the corpus marks what PostgreSQL does not accept
/// with `skipif postgresql` and PostgreSQL-only spellings with `onlyif postgresql`.
pub const ENGINE_LABEL: &str = "postgresql";

/// Results of more values than this are compared by their MD5 hash, unless a file says
/// otherwise (`hash-threshold N`): the SQLite corpus's runner hashes above 8 values
/// (sqllogictest.c, DEFAULT_HASH_THRESHOLD) and its `.test` files are written so; `.slt`
/// files (written for this crate's runner) list every value.
const HASH_THRESHOLD_SQLITE_CORPUS: usize = 8;
const HASH_THRESHOLD_SLT: usize = 0;

/// A statement that runs longer than this fails as "timed out" (and is cancelled), so one
/// slow plan cannot stop the run.
pub const RECORD_TIMEOUT_DEFAULT: Duration = Duration::from_secs(60);

/// One connection's error: the server's (`SQLSTATE: message`), or the record's time out.
#[derive(Debug)]
pub enum WireError {
    Server { sqlstate: String, message: String },
    Client(String),
    TimedOut(Duration),
}

impl std::fmt::Display for WireError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WireError::Server { sqlstate, message } => write!(f, "{sqlstate}: {message}"),
            WireError::Client(message) => write!(f, "client: {message}"),
            WireError::TimedOut(after) => write!(f, "timed out after {} s (cancelled)", after.as_secs()),
        }
    }
}

impl std::error::Error for WireError {}

impl From<tokio_postgres::Error> for WireError {
    fn from(e: tokio_postgres::Error) -> Self {
        match e.as_db_error() {
            Some(d) => WireError::Server { sqlstate: d.code().code().to_string(), message: d.message().to_string() },
            None => WireError::Client(e.to_string()),
        }
    }
}

/// The type letters of the query being run, set by [`run_file`] before each query record:
/// the driver formats each column by them (see the module comment).
type ExpectedTypes = Arc<Mutex<Vec<DefaultColumnType>>>;

/// The driver: one tokio-postgres connection.
pub struct WireDb {
    client: Client,
    connection_task: tokio::task::JoinHandle<()>,
    expected_types: ExpectedTypes,
    record_timeout: Duration,
}

impl WireDb {
    pub async fn connect(config: tokio_postgres::Config, expected_types: ExpectedTypes, record_timeout: Duration) -> Result<WireDb, WireError> {
        let (client, connection) = config.connect(NoTls).await?;
        let connection_task = tokio::spawn(async move {
            let _ = connection.await;
        });
        Ok(WireDb { client, connection_task, expected_types, record_timeout })
    }
}

#[async_trait::async_trait]
impl AsyncDB for WireDb {
    type Error = WireError;
    type ColumnType = DefaultColumnType;

    async fn run(&mut self, sql: &str) -> Result<DBOutput<DefaultColumnType>, WireError> {
        let messages = match tokio::time::timeout(self.record_timeout, self.client.simple_query(sql)).await {
            Ok(result) => result?,
            Err(_) => {
                let _ = self.client.cancel_token().cancel_query(NoTls).await;
                return Err(WireError::TimedOut(self.record_timeout));
            }
        };
        let expected = self.expected_types.lock().map(|t| t.clone()).unwrap_or_default();
        let mut rows = Vec::new();
        let mut column_count = None;
        let mut affected_count = 0;
        for message in messages {
            match message {
                SimpleQueryMessage::RowDescription(columns) => column_count = Some(columns.len()),
                SimpleQueryMessage::Row(row) => {
                    let values = (0..row.len())
                        .map(|i| format_value(row.get(i), expected.get(i).unwrap_or(&DefaultColumnType::Text)))
                        .collect();
                    rows.push(values);
                }
                SimpleQueryMessage::CommandComplete(count) => affected_count = count,
                _ => {}
            }
        }
        match column_count {
            Some(count) => {
                let types = (0..count).map(|i| expected.get(i).cloned().unwrap_or(DefaultColumnType::Any)).collect();
                Ok(DBOutput::Rows { types, rows })
            }
            None => Ok(DBOutput::StatementComplete(affected_count)),
        }
    }

    async fn shutdown(&mut self) {
        self.connection_task.abort();
    }

    fn engine_name(&self) -> &str {
        ENGINE_LABEL
    }

    async fn sleep(duration: Duration) {
        tokio::time::sleep(duration).await
    }

    fn error_sql_state(error: &WireError) -> Option<String> {
        match error {
            WireError::Server { sqlstate, .. } => Some(sqlstate.clone()),
            _ => None,
        }
    }
}

/// One value as the reference runner prints it for the column's type letter.
pub fn format_value(value: Option<&str>, column_type: &DefaultColumnType) -> String {
    let Some(text) = value else { return "NULL".to_string() };
    match column_type {
        DefaultColumnType::Integer => match integer_of(text) {
            Some(i) => i.to_string(),
            None => text.to_string(),
        },
        DefaultColumnType::FloatingPoint => match float_of(text) {
            Some(f) => format!("{f:.3}"),
            None => text.to_string(),
        },
        DefaultColumnType::Text | DefaultColumnType::Any => {
            if text.is_empty() {
                "(empty)".to_string()
            } else {
                text.chars().map(|c| if (' '..='~').contains(&c) { c } else { '@' }).collect()
            }
        }
    }
}

/// A wire value as an integer: integers as they are, decimals and doubles truncated toward
/// zero (as `sqlite3_column_int64` does), booleans as 1 and 0.
fn integer_of(text: &str) -> Option<i64> {
    if let Ok(i) = text.parse::<i64>() {
        return Some(i);
    }
    match text {
        "t" | "true" => return Some(1),
        "f" | "false" => return Some(0),
        _ => {}
    }
    let f = text.parse::<f64>().ok()?;
    // `as` saturates at the i64 bounds, as SQLite's conversion does.
    f.is_finite().then_some(f.trunc() as i64)
}

fn float_of(text: &str) -> Option<f64> {
    match text {
        "t" | "true" => Some(1.0),
        "f" | "false" => Some(0.0),
        _ => text.parse::<f64>().ok(),
    }
}

/// What became of one record.
#[derive(Debug, Clone)]
pub enum Verdict {
    Passed,
    /// A `skipif`/`onlyif` condition left it out for `postgresql`.
    Skipped,
    Failed(Failure),
}

#[derive(Debug, Clone)]
pub struct Failure {
    pub line: u32,
    pub sql: String,
    /// The failure in one line, numbers and quoted names replaced, to count alike failures
    /// together.
    pub reason: String,
    /// The failure as the runner printed it.
    pub detail: String,
}

/// The SQLite corpus lists a result one value per line; files written for the crate list
/// a row per line. Either matches (the rows are already sorted as the record asks).
fn rows_or_values_match(normalizer: sqllogictest::Normalizer, actual: &[Vec<String>], expected: &[String]) -> bool {
    if sqllogictest::default_validator(normalizer, actual, expected) {
        return true;
    }
    let values: Vec<String> = actual.iter().flatten().map(normalizer).collect();
    let expected: Vec<String> = expected.iter().map(normalizer).collect();
    values == expected
}

/// The records of one file, counted.
#[derive(Debug, Clone, Default)]
pub struct FileOutcome {
    pub path: PathBuf,
    pub passed: usize,
    pub skipped: usize,
    pub failures: Vec<Failure>,
}

impl FileOutcome {
    pub fn records(&self) -> usize {
        self.passed + self.failures.len()
    }
}

/// The file's text with its `halt` records applied for `postgresql`: the corpus stops a file
/// for an engine with `onlyif ENGINE` + `halt` (or runs it only for some with `skipif` +
/// `halt`). The crate's parser keeps a condition before `halt` for the next record instead,
/// so the lines are resolved here: the file ends at a halt that applies, and a halt that does
/// not becomes two comment lines (so records keep their line numbers).
pub fn apply_halts(script: &str) -> String {
    const REMOVED: &str = "# (a halt for another engine)";
    let lines: Vec<&str> = script.lines().collect();
    let mut kept: Vec<&str> = Vec::with_capacity(lines.len());
    let mut i = 0;
    while i < lines.len() {
        let words: Vec<&str> = lines[i].split_whitespace().take_while(|w| !w.starts_with('#')).collect();
        let condition = match words.as_slice() {
            ["onlyif", label, ..] => Some((true, *label)),
            ["skipif", label, ..] => Some((false, *label)),
            _ => None,
        };
        if let Some((only, label)) = condition {
            if lines.get(i + 1).map(|l| l.trim()) == Some("halt") {
                let applies = (label == ENGINE_LABEL) == only;
                if applies {
                    break;
                }
                kept.extend([REMOVED, REMOVED]);
                i += 2;
                continue;
            }
        }
        if lines[i].trim() == "halt" {
            break;
        }
        // `skipif mysql # why`: the crate's parser takes no comment after a condition.
        let line = match (condition, lines[i].find('#')) {
            (Some(_), Some(at)) => lines[i][..at].trim_end(),
            _ => lines[i],
        };
        kept.push(line);
        i += 1;
    }
    let mut text = kept.join("\n");
    text.push('\n');
    text
}

/// Runs every record of one file on connections made from `config`, each record on its own:
/// a failed record is counted and the file goes on (as the reference runner does).
pub async fn run_file(path: &Path, config: tokio_postgres::Config, record_timeout: Duration) -> FileOutcome {
    let mut outcome = FileOutcome { path: path.to_path_buf(), ..FileOutcome::default() };
    let script = match std::fs::read_to_string(path) {
        Ok(s) => s,
        Err(e) => {
            outcome.failures.push(Failure { line: 0, sql: String::new(), reason: format!("cannot read the file: {e}"), detail: String::new() });
            return outcome;
        }
    };
    let name = path.display().to_string();
    let records = match sqllogictest::parse_with_name::<DefaultColumnType>(&apply_halts(&script), name) {
        Ok(r) => r,
        Err(e) => {
            outcome.failures.push(Failure { line: 0, sql: String::new(), reason: format!("cannot parse the file: {e}"), detail: String::new() });
            return outcome;
        }
    };
    let expected_types: ExpectedTypes = Arc::new(Mutex::new(Vec::new()));
    let types_for_connections = expected_types.clone();
    let mut runner = Runner::new(move || WireDb::connect(config.clone(), types_for_connections.clone(), record_timeout));
    let sqlite_corpus = path.extension().is_some_and(|e| e == "test");
    runner.with_hash_threshold(if sqlite_corpus { HASH_THRESHOLD_SQLITE_CORPUS } else { HASH_THRESHOLD_SLT });
    runner.with_validator(rows_or_values_match);
    for record in records {
        let (line, sql) = match &record {
            Record::Statement { loc, sql, .. } => (loc.line(), sql.clone()),
            Record::Query { loc, sql, expected, .. } => {
                let types = match expected {
                    QueryExpect::Results { types, .. } => types.clone(),
                    QueryExpect::Error(_) => Vec::new(),
                };
                if let Ok(mut t) = expected_types.lock() {
                    *t = types;
                }
                (loc.line(), sql.clone())
            }
            _ => {
                // Control records (hash-threshold, sort mode), comments: no verdict.
                let _ = runner.run_async(record).await;
                continue;
            }
        };
        match runner.run_async(record).await {
            Ok(RecordOutput::Nothing) => outcome.skipped += 1,
            Ok(_) => outcome.passed += 1,
            Err(e) => {
                let kind = e.kind();
                outcome.failures.push(Failure { line, sql, reason: reason_of(&kind), detail: kind.to_string() });
            }
        }
    }
    outcome
}

/// A failure in one line: the server's message for an error (numbers and quoted names
/// replaced so alike failures count together), or what went wrong with a result.
pub fn reason_of(kind: &TestErrorKind) -> String {
    match kind {
        TestErrorKind::Fail { err, .. } => normalize_error(&err.to_string()),
        TestErrorKind::Ok { .. } => "succeeded where the file expects an error".to_string(),
        TestErrorKind::ErrorMismatch { err, .. } => format!("another error than expected: {}", normalize_error(&err.to_string())),
        TestErrorKind::StatementResultMismatch { .. } => "wrong affected-row count".to_string(),
        TestErrorKind::QueryResultMismatch { .. } => "wrong result".to_string(),
        TestErrorKind::QueryResultColumnsMismatch { .. } => "wrong column types".to_string(),
        other => normalize_message(&other.to_string()),
    }
}

const REASON_CHARS_MAX: usize = 110;

/// `SQLSTATE: message` with the message normalized, the SQLSTATE kept.
fn normalize_error(error: &str) -> String {
    match error.split_once(": ") {
        Some((code, message)) if code.len() == 5 && code.chars().all(|c| c.is_ascii_alphanumeric()) => format!("{code}: {}", normalize_message(message)),
        _ => normalize_message(error),
    }
}

fn normalize_message(message: &str) -> String {
    let first_line = message.lines().next().unwrap_or("");
    let mut out = String::with_capacity(first_line.len());
    let mut chars = first_line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '0'..='9' => {
                while chars.peek().is_some_and(|d| d.is_ascii_digit()) {
                    chars.next();
                }
                out.push('N');
            }
            '\'' | '"' => {
                for d in chars.by_ref() {
                    if d == c {
                        break;
                    }
                }
                out.push_str(if c == '\'' { "'…'" } else { "\"…\"" });
            }
            _ => out.push(c),
        }
    }
    if out.chars().count() > REASON_CHARS_MAX {
        out = out.chars().take(REASON_CHARS_MAX).collect::<String>() + "…";
    }
    out
}

/// The failures of several files by reason, most frequent first, with one example each.
pub fn failures_by_reason<'a>(outcomes: impl IntoIterator<Item = &'a FileOutcome>) -> Vec<(String, usize, String)> {
    let mut by_reason: BTreeMap<String, (usize, String)> = BTreeMap::new();
    for outcome in outcomes {
        for f in &outcome.failures {
            let entry = by_reason.entry(f.reason.clone()).or_insert_with(|| {
                let name = outcome.path.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default();
                (0, format!("{name}:{} {}", f.line, one_line(&f.sql)))
            });
            entry.0 += 1;
        }
    }
    let mut list: Vec<_> = by_reason.into_iter().map(|(reason, (count, example))| (reason, count, example)).collect();
    list.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    list
}

fn one_line(sql: &str) -> String {
    let s = sql.split_whitespace().collect::<Vec<_>>().join(" ");
    if s.chars().count() > 100 {
        s.chars().take(100).collect::<String>() + "…"
    } else {
        s
    }
}

/// The `.test` and `.slt` files under `path` (or `path` itself), sorted.
pub fn corpus_files(path: &Path) -> Vec<PathBuf> {
    if path.is_file() {
        return vec![path.to_path_buf()];
    }
    let mut files = Vec::new();
    let mut stack = vec![path.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for entry in entries.flatten() {
            let p = entry.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|e| e == "test" || e == "slt") {
                files.push(p);
            }
        }
    }
    files.sort();
    files
}

#[cfg(test)]
mod unit {
    use super::*;

    #[test]
    fn values_are_formatted_by_the_type_letter() {
        assert_eq!(format_value(Some("222.5000000000"), &DefaultColumnType::Integer), "222");
        assert_eq!(format_value(Some("-7.9"), &DefaultColumnType::Integer), "-7");
        assert_eq!(format_value(Some("222"), &DefaultColumnType::FloatingPoint), "222.000");
        assert_eq!(format_value(Some("0.33333333333333333333"), &DefaultColumnType::FloatingPoint), "0.333");
        assert_eq!(format_value(Some(""), &DefaultColumnType::Text), "(empty)");
        assert_eq!(format_value(Some("a\tb"), &DefaultColumnType::Text), "a@b");
        assert_eq!(format_value(None, &DefaultColumnType::Integer), "NULL");
    }

    #[test]
    fn a_halt_applies_only_to_its_engine() {
        let script = "onlyif mssql\nhalt\n\nstatement ok\nSELECT 1\n\nonlyif postgresql\nhalt\n\nstatement ok\nSELECT 2\n";
        let text = apply_halts(script);
        assert!(text.contains("SELECT 1"));
        assert!(!text.contains("mssql"));
        assert_eq!(text.lines().position(|l| l == "SELECT 1"), Some(4), "line numbers kept");
        assert!(!text.contains("SELECT 2"));
        assert!(apply_halts("skipif postgresql\nhalt\nstatement ok\nSELECT 3\n").ends_with("\nstatement ok\nSELECT 3\n"));
        assert_eq!(apply_halts("skipif mysql # why\nstatement ok\nSELECT 3\n"), "skipif mysql\nstatement ok\nSELECT 3\n");
        assert!(apply_halts("skipif mysql\nhalt\nstatement ok\nSELECT 3\n").trim().is_empty());
    }
}

/// Records passed, failed and skipped over several files.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Totals {
    pub passed: usize,
    pub failed: usize,
    pub skipped: usize,
}

impl Totals {
    pub fn of<'a>(outcomes: impl IntoIterator<Item = &'a FileOutcome>) -> Totals {
        let mut t = Totals::default();
        for o in outcomes {
            t.passed += o.passed;
            t.failed += o.failures.len();
            t.skipped += o.skipped;
        }
        t
    }

    /// Passed records in percent of those run (skipped ones left out).
    pub fn pass_percent(&self) -> f64 {
        let run = self.passed + self.failed;
        if run == 0 {
            return 0.0;
        }
        100.0 * self.passed as f64 / run as f64
    }
}

/// A table of the files and the failures by reason, as the test and the example print it.
pub fn summary(outcomes: &[FileOutcome], reasons_max: usize) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    for o in outcomes {
        let _ = writeln!(out, "{:>6} passed {:>5} failed {:>5} skipped  {}", o.passed, o.failures.len(), o.skipped, o.path.display());
    }
    let t = Totals::of(outcomes);
    let _ = writeln!(out, "{:>6} passed {:>5} failed {:>5} skipped  total: {:.2} % of the records run passed", t.passed, t.failed, t.skipped, t.pass_percent());
    let reasons = failures_by_reason(outcomes);
    if !reasons.is_empty() {
        let _ = writeln!(out, "failures by reason ({} reasons):", reasons.len());
        for (reason, count, example) in reasons.iter().take(reasons_max) {
            let _ = writeln!(out, "{count:>6}  {reason}\n        e.g. {example}");
        }
    }
    out
}
