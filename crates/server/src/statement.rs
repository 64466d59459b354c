//! What a statement asks for, decided before DataFusion sees it: session commands that
//! clients send on their own (SET, SHOW, BEGIN/COMMIT, savepoints), COPY TO STDOUT, and
//! everything else — catalog queries included (`pg_catalog.rs`) — for DataFusion.

use std::sync::LazyLock;

use regex::Regex;

/// What `COPY … FROM STDIN` asked for.
#[derive(Debug, Clone, PartialEq)]
pub struct CopyFromOptions {
    pub table: String,
    /// The columns the lines hold, in order; every column of the table when empty.
    pub columns: Vec<String>,
    pub csv: bool,
    pub header: bool,
    /// One character; tab (text) or comma (CSV) when not given.
    pub delimiter: Option<String>,
    /// The text that means NULL: `\N` (text) or an unquoted empty field (CSV) by default.
    pub null: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Command {
    Empty,
    Set { name: String, value: String },
    Reset { name: String },
    Show { name: String },
    Begin,
    Commit,
    Rollback,
    /// Accepted with no effect (DISCARD ALL, DEALLOCATE, ...): the tag to answer.
    NoOp(&'static str),
    CopyTo { query: String, csv: bool, header: bool, delimiter: Option<String> },
    /// `COPY table [(columns)] FROM STDIN [options]`: rows from the client into the table.
    CopyFrom(CopyFromOptions),
    /// CREATE TABLE, DROP TABLE, TRUNCATE (and CREATE INDEX / ALTER TABLE, refused there
    /// with what to do): run by `flashscan sql`'s session and the write path, one catalog
    /// commit each. The tag PostgreSQL answers with, and the statement.
    Ddl { tag: &'static str, sql: String },
    /// Refused with a reason (SQLSTATE 0A000).
    Unsupported(String),
    Sql(String),
}

static SET_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?is)^set\s+(?:session\s+|local\s+)?([a-z_][a-z0-9_.]*)\s*(?:=|\s+to\s+|\s)\s*(.*?)\s*$").expect("static regex")
});
static SHOW_RE: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"(?is)^show\s+([a-z_][a-z0-9_.]*)\s*$").expect("static regex"));
static RESET_RE: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"(?is)^reset\s+([a-z_][a-z0-9_.]*)\s*$").expect("static regex"));
static COPY_TO_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?is)^copy\s+(?:\((.*)\)|([a-z_][a-z0-9_.]*)(?:\s*\(([^)]*)\))?)\s+to\s+stdout\b(.*)$").expect("static regex")
});
static COPY_FROM_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r#"(?is)^copy\s+("?[a-z_][a-z0-9_.]*"?)(?:\s*\(([^)]*)\))?\s+from\s+stdin\b(.*)$"#).expect("static regex")
});
static NULL_RE: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"(?is)\bnull\s*(?:as\s*)?'((?:[^']|'')*)'").expect("static regex"));
static HEADER_OFF_RE: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"(?is)\bheader\s+(?:false|off|0)\b").expect("static regex"));
/// Statements `flashscan sql`'s session runs (or refuses with what to do instead): the
/// first group is the command tag PostgreSQL answers them with.
static DDL_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?is)^(create\s+table|drop\s+table|truncate|alter\s+table|create\s+(?:unique\s+)?index)\b").expect("static regex")
});
static DELIMITER_RE: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"(?is)delimiter\s*(?:as\s*)?'((?:[^']|'')*)'").expect("static regex"));

/// A request for REPEATABLE READ or SERIALIZABLE (`BEGIN ISOLATION LEVEL …`, `SET
/// TRANSACTION …`, `SET SESSION CHARACTERISTICS …`, `SET [default_]transaction_isolation`):
/// refused until flashscan provides it, never run as the READ COMMITTED it is (READ
/// UNCOMMITTED is READ COMMITTED in PostgreSQL too, and taken).
fn stronger_isolation(lower: &str, first: &str) -> Option<Command> {
    if !matches!(first, "begin" | "start" | "set") {
        return None;
    }
    let words: Vec<&str> = lower.split(|c: char| c.is_whitespace() || c == '=' || c == '\'' || c == ',').filter(|w| !w.is_empty()).collect();
    let asks_isolation = words.windows(2).any(|w| w == ["isolation", "level"]) || words.iter().any(|w| *w == "transaction_isolation" || *w == "default_transaction_isolation");
    let level = if words.windows(2).any(|w| w == ["repeatable", "read"]) {
        "REPEATABLE READ"
    } else if words.contains(&"serializable") {
        "SERIALIZABLE"
    } else {
        return None;
    };
    asks_isolation.then(|| {
        Command::Unsupported(format!(
            "isolation level {level} is not supported yet: flashscan runs every transaction READ COMMITTED (PostgreSQL's default); use BEGIN without an isolation level"
        ))
    })
}

/// Sorts one statement (no trailing semicolon needed).
pub fn classify(text: &str) -> Command {
    let t = text.trim().trim_end_matches(';').trim();
    if t.is_empty() {
        return Command::Empty;
    }
    let lower = t.to_ascii_lowercase();
    let first = lower.split_whitespace().next().unwrap_or("");
    let second = lower.split_whitespace().nth(1).unwrap_or("");
    if let Some(refused) = stronger_isolation(&lower, first) {
        return refused;
    }
    match (first, second) {
        // Savepoints are taken (psycopg's `conn.transaction()` nests with them) and
        // released; rolling back to one would need the rows staged since it undone, which
        // flashscan's transactions do not keep apart: refused, the whole ROLLBACK works.
        ("savepoint", _) => return Command::NoOp("SAVEPOINT"),
        ("release", _) => return Command::NoOp("RELEASE"),
        ("rollback", "to") => {
            return Command::Unsupported("ROLLBACK TO SAVEPOINT: flashscan does not keep savepoints apart; ROLLBACK the whole transaction".into())
        }
        _ => {}
    }
    match first {
        "begin" | "start" => return Command::Begin,
        "commit" | "end" => return Command::Commit,
        "rollback" | "abort" => return Command::Rollback,
        "discard" => return Command::NoOp("DISCARD ALL"),
        "deallocate" => return Command::NoOp("DEALLOCATE"),
        "listen" | "unlisten" => return Command::NoOp("LISTEN"),
        _ => {}
    }
    if first == "set" {
        if let Some(c) = SET_RE.captures(t) {
            let name = c[1].to_ascii_lowercase();
            let value = c[2].trim().to_string();
            return Command::Set { name, value };
        }
    }
    if let Some(c) = SHOW_RE.captures(t) {
        return Command::Show { name: c[1].to_ascii_lowercase() };
    }
    // The SQL standard's spellings of two settings (SQLAlchemy asks the first on connect).
    if first == "show" {
        let words: Vec<&str> = lower.split_whitespace().skip(1).collect();
        match words.as_slice() {
            ["transaction", "isolation", "level"] => return Command::Show { name: "transaction_isolation".into() },
            ["time", "zone"] => return Command::Show { name: "timezone".into() },
            _ => {}
        }
    }
    if let Some(c) = RESET_RE.captures(t) {
        return Command::Reset { name: c[1].to_ascii_lowercase() };
    }
    if first == "copy" {
        if let Some(c) = COPY_TO_RE.captures(t) {
            let query = match (c.get(1), c.get(2)) {
                (Some(q), _) => q.as_str().to_string(),
                (None, Some(table)) => {
                    let columns = c.get(3).map(|m| m.as_str().trim().to_string()).filter(|s| !s.is_empty()).unwrap_or_else(|| "*".into());
                    format!("SELECT {columns} FROM {}", table.as_str())
                }
                (None, None) => return Command::Unsupported("COPY: name a table or a query in parentheses".into()),
            };
            let options = c.get(4).map(|m| m.as_str().to_ascii_lowercase()).unwrap_or_default();
            let delimiter = DELIMITER_RE.captures(c.get(4).map(|m| m.as_str()).unwrap_or("")).map(|d| d[1].replace("''", "'"));
            return Command::CopyTo { query, csv: options.contains("csv"), header: options.contains("header"), delimiter };
        }
        if let Some(c) = COPY_FROM_RE.captures(t) {
            let options = c.get(3).map(|m| m.as_str()).unwrap_or("");
            let lower_options = options.to_ascii_lowercase();
            let columns = c
                .get(2)
                .map(|m| m.as_str().split(',').map(|s| s.trim().trim_matches('"').to_string()).filter(|s| !s.is_empty()).collect())
                .unwrap_or_default();
            if lower_options.contains("binary") {
                return Command::Unsupported("COPY FROM STDIN takes the text and CSV formats, not binary".into());
            }
            return Command::CopyFrom(CopyFromOptions {
                table: c[1].trim_matches('"').to_string(),
                columns,
                csv: lower_options.contains("csv"),
                header: lower_options.contains("header") && !HEADER_OFF_RE.is_match(options),
                delimiter: DELIMITER_RE.captures(options).map(|d| d[1].replace("''", "'")),
                null: NULL_RE.captures(options).map(|d| d[1].replace("''", "'")),
            });
        }
        if lower.contains(" from ") {
            return Command::Unsupported(
                "COPY FROM a file on the server is not taken over the wire: send the rows with COPY ... FROM STDIN (psql: \\copy t from 'file')".into(),
            );
        }
        return Command::Unsupported("COPY writes only TO STDOUT over the wire (psql: \\copy ... to 'file')".into());
    }
    if let Some(c) = DDL_RE.captures(t) {
        let words: Vec<String> = c[1].split_whitespace().map(|w| w.to_ascii_uppercase()).collect();
        let tag = match words.join(" ").as_str() {
            "CREATE TABLE" => "CREATE TABLE",
            "DROP TABLE" => "DROP TABLE",
            "TRUNCATE" => "TRUNCATE TABLE",
            "ALTER TABLE" => "ALTER TABLE",
            _ => "CREATE INDEX",
        };
        return Command::Ddl { tag, sql: t.to_string() };
    }
    Command::Sql(t.to_string())
}

/// Splits a simple-query text into statements at semicolons outside quotes, dollar
/// quotes and comments.
pub fn split_statements(text: &str) -> Vec<String> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut start = 0;
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'\'' | b'"' => {
                let q = b[i];
                i += 1;
                while i < b.len() {
                    if b[i] == q {
                        if i + 1 < b.len() && b[i + 1] == q {
                            i += 2;
                            continue;
                        }
                        break;
                    }
                    i += 1;
                }
                i += 1;
            }
            b'-' if b.get(i + 1) == Some(&b'-') => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                i += 2;
                while i + 1 < b.len() && !(b[i] == b'*' && b[i + 1] == b'/') {
                    i += 1;
                }
                i += 2;
            }
            b'$' => {
                // $tag$ ... $tag$ or $$ ... $$; a placeholder such as $1 is not a tag.
                let close_of_tag = b[i + 1..].iter().position(|&c| c == b'$').map(|p| i + 1 + p);
                let is_tag = match close_of_tag {
                    Some(e) => {
                        let tag = &b[i + 1..e];
                        tag.is_empty() || (!tag[0].is_ascii_digit() && tag.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'_'))
                    }
                    None => false,
                };
                match (is_tag, close_of_tag) {
                    (true, Some(e)) => {
                        let tag = &b[i..=e];
                        let body_start = e + 1;
                        i = match b[body_start..].windows(tag.len()).position(|w| w == tag) {
                            Some(p) => body_start + p + tag.len(),
                            None => b.len(),
                        };
                    }
                    _ => i += 1,
                }
            }
            b';' => {
                out.push(text[start..i].to_string());
                i += 1;
                start = i;
            }
            _ => i += 1,
        }
    }
    if start < text.len() {
        out.push(text[start..].to_string());
    }
    out.into_iter().filter(|s| !s.trim().is_empty() && !only_comments(s)).collect()
}

fn only_comments(s: &str) -> bool {
    s.lines().all(|l| {
        let l = l.trim();
        l.is_empty() || l.starts_with("--")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statements_split_outside_quotes_and_comments() {
        let parts = split_statements("select ';' as a; -- c;\nselect $$x;y$$; select \"a;b\" from t;");
        assert_eq!(parts.len(), 3, "{parts:?}");
        assert!(parts[0].contains("';'"));
        assert!(parts[1].contains("$$x;y$$"));
        assert!(parts[2].contains("\"a;b\""));
        assert_eq!(split_statements("select $1 + $2; select 2").len(), 2);
        assert!(split_statements(" ; ;").is_empty());
    }

    #[test]
    fn session_commands_are_recognised() {
        assert_eq!(classify("SET statement_timeout = '5s'"), Command::Set { name: "statement_timeout".into(), value: "'5s'".into() });
        assert_eq!(classify("set statement_timeout to 100;"), Command::Set { name: "statement_timeout".into(), value: "100".into() });
        assert_eq!(classify("SHOW statement_timeout"), Command::Show { name: "statement_timeout".into() });
        assert_eq!(classify("show transaction isolation level"), Command::Show { name: "transaction_isolation".into() });
        for refused in [
            "BEGIN ISOLATION LEVEL REPEATABLE READ",
            "begin transaction isolation level serializable",
            "START TRANSACTION ISOLATION LEVEL SERIALIZABLE, READ WRITE",
            "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ",
            "set session characteristics as transaction isolation level serializable",
            "SET default_transaction_isolation = 'serializable'",
            "set transaction_isolation to 'repeatable read'",
        ] {
            assert!(matches!(classify(refused), Command::Unsupported(m) if m.contains("not supported yet")), "{refused}");
        }
        assert_eq!(classify("BEGIN ISOLATION LEVEL READ COMMITTED"), Command::Begin);
        assert_eq!(classify("begin isolation level read uncommitted"), Command::Begin);
        assert!(matches!(classify("SET application_name = 'serializable'"), Command::Set { .. }));
        assert_eq!(classify("SHOW TIME ZONE;"), Command::Show { name: "timezone".into() });
        assert_eq!(classify("BEGIN"), Command::Begin);
        assert_eq!(classify("commit;"), Command::Commit);
        assert!(matches!(classify("select 1"), Command::Sql(_)));
        assert_eq!(classify("SAVEPOINT \"_pg3_1\""), Command::NoOp("SAVEPOINT"));
        assert_eq!(classify("RELEASE SAVEPOINT \"_pg3_1\""), Command::NoOp("RELEASE"));
        assert!(matches!(classify("ROLLBACK TO SAVEPOINT \"_pg3_1\""), Command::Unsupported(_)));
        // A secondary index (pandas' `to_sql` asks for one on the DataFrame's index) goes to
        // the session, which refuses it with what to do (`flashscan sql` alike).
        assert!(matches!(classify("CREATE INDEX ix_frames_index ON frames (index)"), Command::Ddl { tag: "CREATE INDEX", .. }));
        assert_eq!(classify("rollback"), Command::Rollback);
    }

    #[test]
    fn copy_to_stdout_becomes_a_query() {
        match classify("COPY (select a from t where b = 'x') TO STDOUT WITH (FORMAT csv, HEADER true)") {
            Command::CopyTo { query, csv, header, .. } => {
                assert_eq!(query, "select a from t where b = 'x'");
                assert!(csv && header);
            }
            other => panic!("{other:?}"),
        }
        match classify("copy lineitem (l_orderkey, l_tax) to stdout") {
            Command::CopyTo { query, csv, .. } => {
                assert_eq!(query, "SELECT l_orderkey, l_tax FROM lineitem");
                assert!(!csv);
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(classify("COPY t FROM '/etc/passwd'"), Command::Unsupported(_)));
        assert!(matches!(classify("COPY t FROM STDIN (FORMAT binary)"), Command::Unsupported(_)));
    }

    #[test]
    fn copy_from_stdin_options_are_read() {
        assert_eq!(
            classify("COPY t (a, b) FROM STDIN WITH (FORMAT csv, HEADER true, DELIMITER ';', NULL 'NA')"),
            Command::CopyFrom(CopyFromOptions {
                table: "t".into(),
                columns: vec!["a".into(), "b".into()],
                csv: true,
                header: true,
                delimiter: Some(";".into()),
                null: Some("NA".into())
            })
        );
        match classify("copy t from stdin") {
            Command::CopyFrom(o) => assert!(!o.csv && !o.header && o.columns.is_empty() && o.delimiter.is_none()),
            other => panic!("{other:?}"),
        }
        match classify("COPY t FROM STDIN CSV HEADER") {
            Command::CopyFrom(o) => assert!(o.csv && o.header),
            other => panic!("{other:?}"),
        }
        assert!(matches!(classify("create table t (a int)"), Command::Ddl { tag: "CREATE TABLE", .. }));
        assert!(matches!(classify("DROP TABLE IF EXISTS t"), Command::Ddl { tag: "DROP TABLE", .. }));
        assert!(matches!(classify("truncate pgbench_accounts, pgbench_branches"), Command::Ddl { tag: "TRUNCATE TABLE", .. }));
        assert!(matches!(classify("TRUNCATE TABLE t"), Command::Ddl { tag: "TRUNCATE TABLE", .. }));
        assert!(matches!(classify("alter table t add primary key (a)"), Command::Ddl { tag: "ALTER TABLE", .. }));
        assert!(matches!(classify("create unique index i on t (a)"), Command::Ddl { tag: "CREATE INDEX", .. }));
        assert!(matches!(classify("truncated_table_query"), Command::Sql(_)));
        assert!(matches!(classify("create view v as select 1"), Command::Sql(_)));
    }
}
