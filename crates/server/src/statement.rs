//! What a statement asks for, decided before DataFusion sees it: session commands that
//! clients send on their own (SET, SHOW, BEGIN/COMMIT, savepoints), COPY TO STDOUT, and
//! everything else — catalog queries included (`pg_catalog.rs`) — for DataFusion.

use std::sync::LazyLock;

use flashscan_write::Isolation;
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

/// `DECLARE name [BINARY] [NO SCROLL] CURSOR [WITH HOLD | WITHOUT HOLD] FOR query`.
#[derive(Debug, Clone, PartialEq)]
pub struct DeclareCursor {
    /// As PostgreSQL folds it: lower case unless quoted.
    pub name: String,
    pub query: String,
    /// Rows in binary over the simple protocol (the extended protocol's Bind decides there).
    pub binary: bool,
    /// WITH HOLD: the cursor outlives the transaction that declared it.
    pub hold: bool,
    /// The whole DECLARE, as `pg_cursors.statement` shows it.
    pub statement: String,
}

/// How far FETCH or MOVE goes: forward only.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FetchCount {
    Rows(u64),
    All,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Command {
    Empty,
    /// `SET [SESSION | LOCAL] name = value`; `local`: until the transaction ends.
    Set { name: String, value: String, local: bool },
    Reset { name: String },
    Show { name: String },
    Begin,
    /// `BEGIN ISOLATION LEVEL …`.
    BeginIsolation(Isolation),
    /// `SET TRANSACTION ISOLATION LEVEL …` (the open transaction's; `session`: `SET SESSION
    /// CHARACTERISTICS …` / `default_transaction_isolation`, later transactions').
    SetIsolation { level: Isolation, session: bool },
    Commit,
    Rollback,
    /// `SAVEPOINT name`, `RELEASE [SAVEPOINT] name`, `ROLLBACK [WORK | TRANSACTION] TO
    /// [SAVEPOINT] name` (names folded to lower case unless quoted, as identifiers are).
    Savepoint(String),
    Release(String),
    RollbackTo(String),
    /// Accepted with no effect (DEALLOCATE, LISTEN, ...): the tag to answer.
    NoOp(&'static str),
    /// `DISCARD ALL`: closes the connection's cursors (the rest of its state has nothing
    /// DISCARD would reset here).
    DiscardAll,
    CopyTo { query: String, csv: bool, header: bool, delimiter: Option<String> },
    /// `COPY table [(columns)] FROM STDIN [options]`: rows from the client into the table.
    CopyFrom(CopyFromOptions),
    /// CREATE TABLE, DROP TABLE, TRUNCATE (and CREATE INDEX / ALTER TABLE, refused there
    /// with what to do): run by `flashscan sql`'s session and the write path, one catalog
    /// commit each. The tag PostgreSQL answers with, and the statement.
    Ddl { tag: &'static str, sql: String },
    /// `DECLARE … CURSOR FOR query` (`cursors.rs`).
    Declare(DeclareCursor),
    /// `FETCH` (rows to the client, tag `FETCH n`) or `MOVE` (`move_only`: rows skipped,
    /// tag `MOVE n`) forward from a cursor.
    Fetch { name: String, count: FetchCount, move_only: bool },
    /// `CLOSE name`; `None` for `CLOSE ALL`.
    Close(Option<String>),
    /// `CHECKPOINT`: the deltas written to table pages now (PostgreSQL's command).
    Checkpoint,
    /// Refused with a reason (SQLSTATE 0A000).
    Unsupported(String),
    /// Malformed (SQLSTATE 42601), with the form that is taken.
    SyntaxError(String),
    Sql(String),
}

static SET_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?is)^set\s+(session\s+|local\s+)?([a-z_][a-z0-9_.]*)\s*(?:=|\s+to\s+|\s)\s*(.*?)\s*$").expect("static regex")
});
static SET_TIME_ZONE_RE: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"(?is)^set\s+(session\s+|local\s+)?time\s+zone\s+(.*?)\s*$").expect("static regex"));
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
    Regex::new(
        r"(?is)^(create\s+table|drop\s+table|truncate|alter\s+table|create\s+(?:unique\s+)?index|drop\s+index|create\s+(?:or\s+replace\s+)?(?:materialized\s+|temp\s+|temporary\s+)?view|drop\s+view|create\s+(?:temp\s+|temporary\s+)?sequence|drop\s+sequence)\b",
    )
    .expect("static regex")
});
/// A cursor's name: an identifier, or a quoted one (`"c"`, with `""` for a quote).
const CURSOR_NAME: &str = r#"("(?:[^"]|"")+"|[a-z_][a-z0-9_$]*)"#;
static DECLARE_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(&format!(r"(?is)^declare\s+{CURSOR_NAME}\s+((?:(?:binary|insensitive|asensitive|no\s+scroll|scroll)\s+)*)cursor\s+(?:(with|without)\s+hold\s+)?for\s+(.+)$")).expect("static regex")
});
static CLOSE_RE: LazyLock<Regex> = LazyLock::new(|| Regex::new(&format!(r"(?is)^close\s+{CURSOR_NAME}$")).expect("static regex"));
static SCROLL_RE: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"(?is)(?:^|\s)scroll\b").expect("static regex"));
static NO_SCROLL_RE: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"(?is)\bno\s+scroll\b").expect("static regex"));

/// A cursor name as PostgreSQL folds it.
fn cursor_name(raw: &str) -> String {
    match raw.strip_prefix('"').and_then(|r| r.strip_suffix('"')) {
        Some(quoted) => quoted.replace("\"\"", "\""),
        None => raw.to_ascii_lowercase(),
    }
}

/// What a cursor over the wire does not do, said once for FETCH and MOVE.
const FORWARD_ONLY: &str = "flashscan cursors move forward only: use NEXT, FORWARD n, n, ALL or FORWARD ALL (DECLARE the cursor again to start over)";

fn classify_declare(t: &str) -> Command {
    let Some(c) = DECLARE_RE.captures(t) else {
        return Command::SyntaxError("DECLARE: the form taken is DECLARE name [BINARY] [NO SCROLL] CURSOR [WITH HOLD | WITHOUT HOLD] FOR query".into());
    };
    let options = c.get(2).map(|m| m.as_str()).unwrap_or("");
    let without_no_scroll = NO_SCROLL_RE.replace_all(options, " ");
    if SCROLL_RE.is_match(&without_no_scroll) {
        return Command::Unsupported(format!("DECLARE … SCROLL CURSOR: {FORWARD_ONLY}; declare it NO SCROLL or without SCROLL"));
    }
    let hold = c.get(3).is_some_and(|m| m.as_str().eq_ignore_ascii_case("with"));
    Command::Declare(DeclareCursor {
        name: cursor_name(&c[1]),
        query: c[4].trim().to_string(),
        binary: options.to_ascii_lowercase().split_whitespace().any(|w| w == "binary"),
        hold,
        statement: t.to_string(),
    })
}

/// `FETCH`/`MOVE [direction] [FROM | IN] name` split by hand, not by a regex: psycopg sends
/// one per `itersize` rows of a named cursor, so this is on the path of every batch of a
/// streamed result (a regex with a lazy group and word boundaries was ~3 % of the server's
/// CPU fetching 100 rows at a time). The name is the last token: a quoted identifier (`""`
/// is a quote inside it) or a plain one.
fn classify_fetch(t: &str) -> Command {
    let malformed = || Command::SyntaxError("FETCH/MOVE: the form taken is FETCH [NEXT | FORWARD | FORWARD n | n | ALL | FORWARD ALL] [FROM | IN] name".into());
    let Some((head, raw_name)) = split_trailing_name(t) else { return malformed() };
    let mut words: Vec<&str> = head.split_whitespace().collect();
    let Some(verb) = words.first().map(|w| w.to_ascii_uppercase()).filter(|v| v == "FETCH" || v == "MOVE") else { return malformed() };
    if words.len() > 1 && words.last().is_some_and(|w| w.eq_ignore_ascii_case("from") || w.eq_ignore_ascii_case("in")) {
        words.pop();
    }
    let move_only = verb == "MOVE";
    let direction: Vec<String> = words[1..].iter().map(|w| w.to_ascii_lowercase()).collect();
    let words: Vec<&str> = direction.iter().map(String::as_str).collect();
    let count = |n: &str| -> Result<FetchCount, Command> {
        match n.parse::<i64>() {
            Ok(n) if n > 0 => Ok(FetchCount::Rows(n as u64)),
            Ok(0) => Err(Command::Unsupported(format!("{verb} 0 reads the current row again, which flashscan cursors do not keep: {FORWARD_ONLY}"))),
            Ok(_) => Err(Command::Unsupported(format!("{verb} with a negative count goes backward: {FORWARD_ONLY}"))),
            Err(_) => Err(Command::SyntaxError(format!("{verb} {n}: expected a count of rows"))),
        }
    };
    let count = match words.as_slice() {
        [] | ["next"] | ["forward"] => Ok(FetchCount::Rows(1)),
        ["all"] | ["forward", "all"] => Ok(FetchCount::All),
        [w, ..] if ["prior", "first", "last", "absolute", "relative", "backward"].contains(w) => {
            Err(Command::Unsupported(format!("{verb} {}: {FORWARD_ONLY}", w.to_ascii_uppercase())))
        }
        [n] => count(n),
        ["forward", n] => count(n),
        _ => Err(Command::SyntaxError(format!("{verb} {}: the form taken is {verb} [NEXT | FORWARD | FORWARD n | n | ALL | FORWARD ALL] [FROM | IN] name", words.join(" ")))),
    };
    match count {
        Ok(count) => Command::Fetch { name: cursor_name(raw_name), count, move_only },
        Err(refusal) => refusal,
    }
}

/// `t` without its last token, and that token if it is a cursor name: `"quoted"` (with
/// `""` inside for a quote) or `[a-z_][a-z0-9_$]*` in any case.
fn split_trailing_name(t: &str) -> Option<(&str, &str)> {
    let bytes = t.as_bytes();
    let start = if bytes.last() == Some(&b'"') {
        // Walk back over the quoted name: a `""` pair is a quote inside it.
        let mut i = bytes.len() - 1;
        loop {
            let j = i.checked_sub(1)?;
            if bytes[j] != b'"' {
                i = j;
                continue;
            }
            match j.checked_sub(1) {
                Some(k) if bytes[k] == b'"' => i = k,
                _ => break j,
            }
        }
    } else {
        let start = t.char_indices().rev().find(|(_, c)| c.is_whitespace()).map_or(0, |(i, c)| i + c.len_utf8());
        let name = &bytes[start..];
        let plain = name.first().is_some_and(|c| c.is_ascii_alphabetic() || *c == b'_') && name.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'_' || *c == b'$');
        if !plain {
            return None;
        }
        start
    };
    let name = &t[start..];
    (start > 0 && (name.len() > 2 || !name.starts_with('"'))).then_some((&t[..start], name))
}
/// `SAVEPOINT name` / `RELEASE [SAVEPOINT] name` / `ROLLBACK [WORK|TRANSACTION] TO [SAVEPOINT] name`:
/// which of the three, and the name (plain or double-quoted).
static SAVEPOINT_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r#"(?is)^(?:(savepoint)|(release)(?:\s+savepoint)?|(?:rollback|abort)(?:\s+(?:work|transaction))?\s+(to)(?:\s+savepoint)?)\s+("(?:[^"]|"")+"|[a-z_][a-z0-9_$]*)\s*$"#).expect("static regex")
});

/// An identifier as PostgreSQL reads it: a quoted one as written (`""` is `"`), a plain one
/// in lower case.
fn identifier(text: &str) -> String {
    match text.strip_prefix('"').and_then(|t| t.strip_suffix('"')) {
        Some(quoted) => quoted.replace("\"\"", "\""),
        None => text.to_ascii_lowercase(),
    }
}

static DELIMITER_RE: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"(?is)delimiter\s*(?:as\s*)?'((?:[^']|'')*)'").expect("static regex"));

/// A statement that names an isolation level (`BEGIN ISOLATION LEVEL …`, `SET TRANSACTION
/// …`, `SET SESSION CHARACTERISTICS AS TRANSACTION …`, `SET [default_]transaction_isolation`):
/// READ COMMITTED (READ UNCOMMITTED is READ COMMITTED, as in PostgreSQL) and REPEATABLE READ
/// are taken; SERIALIZABLE is refused until flashscan provides it, never run as something
/// weaker.
fn isolation_command(lower: &str, first: &str) -> Option<Command> {
    if !matches!(first, "begin" | "start" | "set") {
        return None;
    }
    let words: Vec<&str> = lower.split(|c: char| c.is_whitespace() || c == '=' || c == '\'' || c == ',').filter(|w| !w.is_empty()).collect();
    let asks_isolation = words.windows(2).any(|w| w == ["isolation", "level"]) || words.iter().any(|w| *w == "transaction_isolation" || *w == "default_transaction_isolation");
    if !asks_isolation {
        return None;
    }
    let level = if words.windows(2).any(|w| w == ["repeatable", "read"]) {
        Isolation::RepeatableRead
    } else if words.windows(2).any(|w| w == ["read", "committed"] || w == ["read", "uncommitted"]) {
        Isolation::ReadCommitted
    } else if words.contains(&"serializable") {
        return Some(Command::Unsupported(
            "isolation level SERIALIZABLE is not supported yet: flashscan runs READ COMMITTED (PostgreSQL's default) or REPEATABLE READ; ask for one of those".into(),
        ));
    } else {
        return Some(Command::SyntaxError("isolation level: the levels taken are READ COMMITTED, READ UNCOMMITTED (as READ COMMITTED) and REPEATABLE READ".into()));
    };
    Some(match first {
        "begin" | "start" => Command::BeginIsolation(level),
        // The session's default for later transactions, or the open transaction's own.
        _ if words.contains(&"characteristics") || words.contains(&"default_transaction_isolation") => Command::SetIsolation { level, session: true },
        _ => Command::SetIsolation { level, session: false },
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
    if let Some(isolation) = isolation_command(&lower, first) {
        return isolation;
    }
    // Savepoints (psycopg's nested `conn.transaction()`, SQLAlchemy's `begin_nested()`):
    // the write crate's transaction keeps what each undoes (`Transaction::savepoint`).
    if matches!(first, "savepoint" | "release" | "rollback" | "abort") {
        if let Some(c) = SAVEPOINT_RE.captures(t) {
            let name = identifier(&c[4]);
            return match (c.get(1), c.get(2)) {
                (Some(_), _) => Command::Savepoint(name),
                (_, Some(_)) => Command::Release(name),
                _ => Command::RollbackTo(name),
            };
        }
        // Never a whole ROLLBACK for a ROLLBACK TO that did not parse.
        if matches!(first, "savepoint" | "release") || lower.split_whitespace().any(|w| w == "to") {
            return Command::SyntaxError(format!("{}: the forms taken are SAVEPOINT name, RELEASE [SAVEPOINT] name, ROLLBACK TO [SAVEPOINT] name", first.to_ascii_uppercase()));
        }
    }
    match first {
        "declare" => return classify_declare(t),
        "fetch" | "move" => return classify_fetch(t),
        "close" => {
            return match CLOSE_RE.captures(t) {
                Some(c) if c[1].eq_ignore_ascii_case("all") => Command::Close(None),
                Some(c) => Command::Close(Some(cursor_name(&c[1]))),
                None => Command::SyntaxError("CLOSE: the form taken is CLOSE name or CLOSE ALL".into()),
            }
        }
        "begin" | "start" => return Command::Begin,
        "commit" | "end" => return Command::Commit,
        "rollback" | "abort" => return Command::Rollback,
        "discard" if second == "all" => return Command::DiscardAll,
        "discard" => return Command::NoOp("DISCARD ALL"),
        "deallocate" => return Command::NoOp("DEALLOCATE"),
        "checkpoint" if second.is_empty() => return Command::Checkpoint,
        // Nothing is ever listened to, so UNLISTEN (asyncpg's pool reset sends `UNLISTEN *`)
        // has nothing to undo; a LISTEN would wait for notifications that never come.
        "unlisten" => return Command::NoOp("UNLISTEN"),
        "listen" | "notify" => return Command::Unsupported(format!("{} is not supported: flashscan has no LISTEN/NOTIFY channels; poll a table instead", first.to_ascii_uppercase())),
        _ => {}
    }
    if first == "set" {
        // `SET [SESSION | LOCAL] TIME ZONE x` is PostgreSQL's other spelling of `SET TimeZone = x`.
        if let Some(c) = SET_TIME_ZONE_RE.captures(t) {
            let local = c.get(1).is_some_and(|m| m.as_str().trim().eq_ignore_ascii_case("local"));
            return Command::Set { name: "timezone".into(), value: c[2].trim().to_string(), local };
        }
        if let Some(c) = SET_RE.captures(t) {
            let local = c.get(1).is_some_and(|m| m.as_str().trim().eq_ignore_ascii_case("local"));
            let name = c[2].to_ascii_lowercase();
            let value = c[3].trim().to_string();
            return Command::Set { name, value, local };
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
                return Command::Unsupported("COPY FROM STDIN takes the text and CSV formats, not binary: send CSV (asyncpg: copy_to_table(..., format='csv') or executemany)".into());
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
            "DROP VIEW" => "DROP VIEW",
            "DROP INDEX" => "DROP INDEX",
            "DROP SEQUENCE" => "DROP SEQUENCE",
            w if w.ends_with("SEQUENCE") => "CREATE SEQUENCE",
            w if w.ends_with("VIEW") => "CREATE VIEW",
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
        assert_eq!(classify("SET statement_timeout = '5s'"), Command::Set { name: "statement_timeout".into(), value: "'5s'".into(), local: false });
        assert_eq!(classify("set statement_timeout to 100;"), Command::Set { name: "statement_timeout".into(), value: "100".into(), local: false });
        assert_eq!(classify("SET TIME ZONE 'UTC'"), Command::Set { name: "timezone".into(), value: "'UTC'".into(), local: false });
        assert_eq!(classify("UNLISTEN *"), Command::NoOp("UNLISTEN"));
        assert!(matches!(classify("LISTEN jobs"), Command::Unsupported(m) if m.contains("LISTEN is not supported")));
        assert_eq!(classify("SET LOCAL synchronous_commit TO off"), Command::Set { name: "synchronous_commit".into(), value: "off".into(), local: true });
        assert_eq!(classify("set session synchronous_commit = on"), Command::Set { name: "synchronous_commit".into(), value: "on".into(), local: false });
        assert_eq!(classify("SHOW statement_timeout"), Command::Show { name: "statement_timeout".into() });
        assert_eq!(classify("show transaction isolation level"), Command::Show { name: "transaction_isolation".into() });
        for refused in [
            "begin transaction isolation level serializable",
            "START TRANSACTION ISOLATION LEVEL SERIALIZABLE, READ WRITE",
            "set session characteristics as transaction isolation level serializable",
            "SET default_transaction_isolation = 'serializable'",
        ] {
            assert!(matches!(classify(refused), Command::Unsupported(m) if m.contains("not supported yet")), "{refused}");
        }
        let rr = Isolation::RepeatableRead;
        assert_eq!(classify("BEGIN ISOLATION LEVEL REPEATABLE READ"), Command::BeginIsolation(rr));
        assert_eq!(classify("START TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ WRITE"), Command::BeginIsolation(rr));
        assert_eq!(classify("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ"), Command::SetIsolation { level: rr, session: false });
        assert_eq!(classify("set transaction_isolation to 'repeatable read'"), Command::SetIsolation { level: rr, session: false });
        assert_eq!(classify("SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL REPEATABLE READ"), Command::SetIsolation { level: rr, session: true });
        assert_eq!(classify("SET default_transaction_isolation = 'repeatable read'"), Command::SetIsolation { level: rr, session: true });
        assert_eq!(classify("BEGIN ISOLATION LEVEL READ COMMITTED"), Command::BeginIsolation(Isolation::ReadCommitted));
        assert_eq!(classify("begin isolation level read uncommitted"), Command::BeginIsolation(Isolation::ReadCommitted));
        assert!(matches!(classify("SET TRANSACTION ISOLATION LEVEL SOMETHING"), Command::SyntaxError(_)));
        assert!(matches!(classify("SET application_name = 'serializable'"), Command::Set { .. }));
        assert_eq!(classify("SHOW TIME ZONE;"), Command::Show { name: "timezone".into() });
        assert_eq!(classify("BEGIN"), Command::Begin);
        assert_eq!(classify("commit;"), Command::Commit);
        assert!(matches!(classify("select 1"), Command::Sql(_)));
        assert_eq!(classify("SAVEPOINT \"_pg3_1\""), Command::Savepoint("_pg3_1".into()));
        assert_eq!(classify("savepoint Sp1;"), Command::Savepoint("sp1".into()));
        assert_eq!(classify("RELEASE SAVEPOINT \"_pg3_1\""), Command::Release("_pg3_1".into()));
        assert_eq!(classify("release sp1"), Command::Release("sp1".into()));
        assert_eq!(classify("ROLLBACK TO SAVEPOINT \"_pg3_1\""), Command::RollbackTo("_pg3_1".into()));
        assert_eq!(classify("rollback transaction to sp1"), Command::RollbackTo("sp1".into()));
        assert_eq!(classify("ROLLBACK TO \"a\"\"b\""), Command::RollbackTo("a\"b".into()));
        assert_eq!(classify("ROLLBACK"), Command::Rollback);
        assert_eq!(classify("ROLLBACK WORK"), Command::Rollback);
        assert!(matches!(classify("SAVEPOINT"), Command::SyntaxError(_)));
        assert!(matches!(classify("ROLLBACK TO"), Command::SyntaxError(_)));
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
        assert!(matches!(classify("create view v as select 1"), Command::Ddl { tag: "CREATE VIEW", .. }));
        assert!(matches!(classify("CREATE OR REPLACE VIEW v (a) AS select 1"), Command::Ddl { tag: "CREATE VIEW", .. }));
        assert!(matches!(classify("drop view if exists v, w"), Command::Ddl { tag: "DROP VIEW", .. }));
        assert!(matches!(classify("create sequence s start with 5"), Command::Ddl { tag: "CREATE SEQUENCE", .. }));
        assert!(matches!(classify("DROP SEQUENCE IF EXISTS s"), Command::Ddl { tag: "DROP SEQUENCE", .. }));
        assert!(matches!(classify("create viewer_table"), Command::Sql(_)));
    }

    #[test]
    fn cursor_statements_are_read_as_postgresql_writes_them() {
        let declare = |hold, binary, name: &str, query: &str| (hold, binary, name.to_string(), query.to_string());
        let declared = |c: Command| match c {
            Command::Declare(d) => (d.hold, d.binary, d.name, d.query),
            other => panic!("{other:?}"),
        };
        assert_eq!(declared(classify("DECLARE c CURSOR FOR select 1")), declare(false, false, "c", "select 1"));
        // psycopg 3 quotes the name and may say NO SCROLL and WITH HOLD.
        assert_eq!(declared(classify("DECLARE \"Big One\" NO SCROLL CURSOR WITH HOLD FOR\n select * from t where a > $1;")), declare(true, false, "Big One", "select * from t where a > $1"));
        assert_eq!(declared(classify("declare C binary cursor without hold for values (1)")), declare(false, true, "c", "values (1)"));
        assert!(matches!(classify("DECLARE c SCROLL CURSOR FOR select 1"), Command::Unsupported(m) if m.contains("forward only")));
        assert!(matches!(classify("DECLARE c CURSOR select 1"), Command::SyntaxError(_)));
        let fetch = |name: &str, count, move_only| Command::Fetch { name: name.into(), count, move_only };
        assert_eq!(classify("FETCH c"), fetch("c", FetchCount::Rows(1), false));
        assert_eq!(classify("fetch next from c"), fetch("c", FetchCount::Rows(1), false));
        assert_eq!(classify("FETCH FORWARD 2000 FROM \"c\""), fetch("c", FetchCount::Rows(2000), false));
        assert_eq!(classify("FETCH 5 IN c"), fetch("c", FetchCount::Rows(5), false));
        assert_eq!(classify("fetch all c"), fetch("c", FetchCount::All, false));
        assert_eq!(classify("FETCH FORWARD ALL FROM c"), fetch("c", FetchCount::All, false));
        assert_eq!(classify("MOVE FORWARD 10 IN c"), fetch("c", FetchCount::Rows(10), true));
        for backward in ["FETCH PRIOR FROM c", "FETCH BACKWARD 2 FROM c", "FETCH -1 FROM c", "FETCH ABSOLUTE 1 c", "MOVE LAST IN c", "FETCH 0 FROM c"] {
            assert!(matches!(classify(backward), Command::Unsupported(ref m) if m.contains("forward only")), "{backward}: {:?}", classify(backward));
        }
        assert!(matches!(classify("FETCH lots FROM c"), Command::SyntaxError(_)));
        // Quoted names: spaces, quotes (`""`) and keywords inside; no space before them.
        assert_eq!(classify("FETCH 3 FROM \"a \"\"b\"\" in c\""), fetch("a \"b\" in c", FetchCount::Rows(3), false));
        assert_eq!(classify("fetch forward 7 in\"C\""), fetch("C", FetchCount::Rows(7), false));
        assert_eq!(classify("FETCH \"\"\"\""), fetch("\"", FetchCount::Rows(1), false));
        assert_eq!(classify("FETCH 2 FROM\u{a0}c\u{a0}"), fetch("c", FetchCount::Rows(2), false), "any white space, as the regex's \\s");
        assert_eq!(classify("FETCH FROM from"), fetch("from", FetchCount::Rows(1), false));
        for malformed in ["FETCH", "FETCH \"\"", "FETCH 2 FROM c-d", "MOVE 1 FROM \"c", "FETCH 1 2 3 c"] {
            assert!(matches!(classify(malformed), Command::SyntaxError(_)), "{malformed}: {:?}", classify(malformed));
        }
        assert_eq!(classify("CLOSE c"), Command::Close(Some("c".into())));
        assert_eq!(classify("close \"ALL\""), Command::Close(Some("ALL".into())));
        assert_eq!(classify("CLOSE ALL"), Command::Close(None));
        assert_eq!(classify("DISCARD ALL"), Command::DiscardAll);
        assert_eq!(classify("checkpoint;"), Command::Checkpoint);
        assert!(matches!(classify("CHECKPOINT now"), Command::Sql(_)), "no other form: DataFusion's error");
    }
}
