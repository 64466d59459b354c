//! `synchronous_commit`, PostgreSQL's name for when a commit is acknowledged: `on` (and
//! `local`, `remote_write`, `remote_apply`, which on one server ask the same) after its log
//! flush, `off` before it — flashscan's delayed durability (flashscan_wal::durability has
//! the contract: a crash may lose the commits of the last unflushed interval, at most
//! 10 ms plus one flush, never half a transaction, never anything before an acknowledged
//! durable commit). Rows of an `off` commit are visible at once, as in PostgreSQL.
//!
//! Set per connection with `SET`, for one transaction block with `SET LOCAL`, back to the
//! connection's start value with `RESET` (or `RESET ALL`, `DISCARD ALL`), read with `SHOW`,
//! and at connect in the startup packet's `options` (`-c synchronous_commit=off`, as
//! `PGOPTIONS` sends it). Every commit of the connection takes the value in force when it
//! commits: an INSERT, UPDATE, DELETE or COPY outside a block, or the block's COMMIT.

use flashscan_write::Durability;
use pgwire::error::PgWireError;

use crate::error::{pg_error, sqlstate};

pub const NAME: &str = "synchronous_commit";

/// The connection's value: from its start, from `SET`, and from `SET LOCAL` in a block.
#[derive(Debug, Clone, Copy, Default)]
pub struct SynchronousCommit {
    /// What `RESET` returns to: the startup `options`' value, else `on`.
    start: Value,
    session: Value,
    /// `SET LOCAL`: until the block ends.
    local: Option<Value>,
}

/// One of PostgreSQL's spellings, kept as given (`SHOW` answers it back), and what it means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Value {
    name: &'static str,
    durability: Durability,
}

impl Default for Value {
    fn default() -> Self {
        Value { name: "on", durability: Durability::Strict }
    }
}

/// The value `text` names (quotes and case as PostgreSQL takes them), or the error to send.
fn parse(text: &str) -> Result<Value, PgWireError> {
    let v = text.trim().trim_matches('\'').trim_matches('"').to_ascii_lowercase();
    let (name, durability) = match v.as_str() {
        "on" | "true" | "yes" | "1" => ("on", Durability::Strict),
        // One server: the local flush is all each of these waits for.
        "local" => ("local", Durability::Strict),
        "remote_write" => ("remote_write", Durability::Strict),
        "remote_apply" => ("remote_apply", Durability::Strict),
        "off" | "false" | "no" | "0" => ("off", Durability::Delayed),
        _ => return Err(pg_error(sqlstate::INVALID_PARAMETER_VALUE, format!("invalid value for parameter \"{NAME}\": \"{text}\" (use on or off)"))),
    };
    Ok(Value { name, durability })
}

/// The `-c name=value` (or `--name=value`) settings of the startup packet's `options`, in
/// order, names lower-cased as SET's are. Each is applied as `SET name = value` at startup
/// (startup.rs), `synchronous_commit` also as the value RESET returns to.
pub fn startup_settings(options: Option<&str>) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let Some(options) = options else { return out };
    let mut words = options.split_whitespace();
    while let Some(word) = words.next() {
        let setting = match word {
            "-c" => words.next().unwrap_or_default(),
            w => w.strip_prefix("--").or_else(|| w.strip_prefix("-c")).unwrap_or_default(),
        };
        if let Some((name, value)) = setting.split_once('=') {
            out.push((name.trim().to_ascii_lowercase(), value.to_string()));
        }
    }
    out
}

impl SynchronousCommit {
    /// The value at connect: `options` of the startup packet (`-c synchronous_commit=off`,
    /// `--synchronous_commit=off`), else `on`. Other settings in `options` are left to the
    /// caller.
    pub fn from_startup_options(options: Option<&str>) -> Result<SynchronousCommit, PgWireError> {
        let mut start = Value::default();
        for (name, value) in startup_settings(options) {
            if name == NAME {
                start = parse(&value)?;
            }
        }
        Ok(SynchronousCommit { start, session: start, local: None })
    }

    /// How the connection's next commit is acknowledged.
    pub fn durability(&self) -> Durability {
        self.local.unwrap_or(self.session).durability
    }

    /// `SHOW synchronous_commit`.
    pub fn show(&self) -> &'static str {
        self.local.unwrap_or(self.session).name
    }

    /// `SET [LOCAL] synchronous_commit = value` (`DEFAULT`: the start value). `SET LOCAL`
    /// outside a block is refused: it would do nothing (PostgreSQL warns and ignores it).
    pub fn set(&mut self, value: &str, local: bool, in_block: bool) -> Result<(), PgWireError> {
        let v = if value.trim().eq_ignore_ascii_case("default") { self.start } else { parse(value)? };
        if local {
            if !in_block {
                return Err(pg_error(
                    sqlstate::INVALID_PARAMETER_VALUE,
                    format!("SET LOCAL {NAME} outside a transaction block would have no effect: use SET {NAME}, or BEGIN first"),
                ));
            }
            self.local = Some(v);
        } else {
            self.session = v;
            // PostgreSQL: a SET in a block replaces the block's SET LOCAL too.
            self.local = None;
        }
        Ok(())
    }

    /// `RESET synchronous_commit`, `RESET ALL`, `DISCARD ALL`.
    pub fn reset(&mut self) {
        self.session = self.start;
        self.local = None;
    }

    /// The block ended (COMMIT or ROLLBACK): `SET LOCAL` ends with it.
    pub fn end_block(&mut self) {
        self.local = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_local_reset_and_startup_options_follow_postgresql() {
        let mut s = SynchronousCommit::from_startup_options(None).expect("no options");
        assert_eq!((s.durability(), s.show()), (Durability::Strict, "on"));
        s.set("off", false, false).expect("SET");
        assert_eq!((s.durability(), s.show()), (Durability::Delayed, "off"));
        s.set("'on'", true, true).expect("SET LOCAL in a block");
        assert_eq!(s.durability(), Durability::Strict);
        s.end_block();
        assert_eq!(s.durability(), Durability::Delayed, "SET LOCAL ends with the block");
        s.reset();
        assert_eq!(s.show(), "on");
        assert!(s.set("off", true, false).unwrap_err().to_string().contains("outside a transaction block"));
        assert!(s.set("sometimes", false, false).unwrap_err().to_string().contains("use on or off"));
        s.set("remote_apply", false, false).expect("a PostgreSQL value");
        assert_eq!((s.durability(), s.show()), (Durability::Strict, "remote_apply"));

        let mut o = SynchronousCommit::from_startup_options(Some("-c statement_timeout=5s -c synchronous_commit=off")).expect("options");
        assert_eq!(o.durability(), Durability::Delayed);
        o.set("on", false, false).expect("SET");
        o.set("default", false, false).expect("SET DEFAULT");
        assert_eq!(o.durability(), Durability::Delayed, "DEFAULT is the connection's start value");
        assert_eq!(SynchronousCommit::from_startup_options(Some("--synchronous_commit=off")).expect("options").show(), "off");
        assert!(SynchronousCommit::from_startup_options(Some("-csynchronous_commit=maybe")).is_err());
    }
}
