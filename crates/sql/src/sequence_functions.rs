//! `nextval`, `setval`, `currval` and `lastval`: PostgreSQL's sequence functions over the
//! write path's sequences (crates/write `sequences.rs`, which says what is durable when).
//!
//! `nextval` is volatile (never folded at planning, one value per row); it hands values
//! out even inside a transaction that rolls back, as PostgreSQL's does. `currval` and
//! `lastval` answer from the session's memory of what `nextval` gave it
//! ([`SessionSequences`], carried in the planning state's config: one per `flashscan sql`
//! session, one per connection of `flashscan serve`), so two sessions drawing from one
//! sequence each see their own last value, as in PostgreSQL.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, Int64Array};
use arrow::datatypes::DataType;
use datafusion::common::{Result, ScalarValue};
use datafusion::logical_expr::{ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, TypeSignature, Volatility};
use datafusion::prelude::SessionContext;
use flashscan_write::WritePath;

/// Registers the sequence functions on `ctx`, drawing from `write`'s sequences, and gives
/// `ctx`'s config a session memory (a server gives each connection's state its own).
pub fn register(ctx: &SessionContext, write: &Arc<WritePath>) {
    for kind in [Kind::NextVal, Kind::SetVal, Kind::CurrVal, Kind::LastVal] {
        ctx.register_udf(ScalarUDF::from(SequenceFunction::new(kind, write.clone())));
    }
    ctx.state_ref().write().config_mut().options_mut().extensions.insert(SessionSequences::default());
}

/// One session's memory of its sequence values, PostgreSQL's per-backend `currval` state:
/// the last value `nextval` (or `setval` with `is_called`) gave this session for each
/// sequence, and the sequence its last `nextval` drew from (`lastval`). Clones share the
/// memory: a config copied for one statement writes to its session's.
#[derive(Debug, Clone, Default)]
pub struct SessionSequences {
    memory: Arc<std::sync::Mutex<Memory>>,
}

#[derive(Debug, Default)]
struct Memory {
    last_by_sequence: std::collections::HashMap<String, i64>,
    /// The sequence of the session's last `nextval`.
    last_drawn: Option<String>,
}

impl SessionSequences {
    fn memory(&self) -> std::sync::MutexGuard<'_, Memory> {
        // A panic while holding it cannot leave the map half-changed (single inserts).
        self.memory.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `count` values of `sequence` (a name as [`sequence_name`] gives it) drawn for this
    /// session: handed out by `write` and the last remembered for `currval` / `lastval`.
    pub fn next_values(&self, write: &WritePath, sequence: &str, count: usize) -> Result<Vec<i64>, flashscan_write::WriteError> {
        let values = write.next_sequence_values(sequence, count)?;
        if let Some(last) = values.last() {
            self.drew(sequence, *last);
        }
        Ok(values)
    }

    /// `nextval` gave this session `value` of `sequence` (its last, when it gave several).
    fn drew(&self, sequence: &str, value: i64) {
        let mut m = self.memory();
        m.last_by_sequence.insert(sequence.to_string(), value);
        if m.last_drawn.as_deref() != Some(sequence) {
            m.last_drawn = Some(sequence.to_string());
        }
    }

    /// `setval(sequence, value, true)`: `currval` answers `value`; `lastval`'s sequence
    /// stays the last one `nextval` drew from (PostgreSQL's `do_setval`).
    fn set(&self, sequence: &str, value: i64) {
        self.memory().last_by_sequence.insert(sequence.to_string(), value);
    }

    /// What `currval(sequence)` answers: None before this session's first value of it.
    pub fn current(&self, sequence: &str) -> Option<i64> {
        self.memory().last_by_sequence.get(sequence).copied()
    }

    /// What `lastval()` answers: the sequence of the session's last `nextval` and its
    /// value now in this session.
    pub fn last(&self) -> Option<(String, i64)> {
        let m = self.memory();
        let name = m.last_drawn.clone()?;
        let value = *m.last_by_sequence.get(&name)?;
        Some((name, value))
    }

    /// Forgets `sequences` (dropped: a sequence made again under the name starts with no
    /// session value, as a new relation does in PostgreSQL).
    pub fn forget(&self, sequences: &[String]) {
        let mut m = self.memory();
        for s in sequences {
            m.last_by_sequence.remove(s);
            if m.last_drawn.as_deref() == Some(s.as_str()) {
                m.last_drawn = None;
            }
        }
    }
}

impl datafusion::common::config::ConfigExtension for SessionSequences {
    const PREFIX: &'static str = "flashscan_session_sequences";
}

impl datafusion::common::config::ExtensionOptions for SessionSequences {
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }

    fn as_any_mut(&mut self) -> &mut dyn std::any::Any {
        self
    }

    fn cloned(&self) -> Box<dyn datafusion::common::config::ExtensionOptions> {
        Box::new(self.clone())
    }

    fn set(&mut self, key: &str, _value: &str) -> Result<()> {
        Err(datafusion::error::DataFusionError::Configuration(format!("{key} is the session's own memory of nextval, not a setting")))
    }

    fn entries(&self) -> Vec<datafusion::common::config::ConfigEntry> {
        Vec::new()
    }
}

/// The sequence a name given to `nextval` names: `public.` and quotes taken off, unquoted
/// names folded to lower case (as PostgreSQL reads a `regclass` text).
pub fn sequence_name(given: &str) -> String {
    let given = given.trim();
    let last = given.strip_prefix("public.").unwrap_or(given);
    match last.strip_prefix('"').and_then(|q| q.strip_suffix('"')) {
        Some(quoted) => quoted.to_string(),
        None => last.to_ascii_lowercase(),
    }
}

/// A write path error through DataFusion, so it comes back out as itself (its SQLSTATE).
fn external(e: flashscan_write::WriteError) -> datafusion::error::DataFusionError {
    datafusion::error::DataFusionError::External(Box::new(e))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Kind {
    NextVal,
    SetVal,
    CurrVal,
    LastVal,
}

#[derive(Debug)]
struct SequenceFunction {
    kind: Kind,
    signature: Signature,
    write: Arc<WritePath>,
}

impl PartialEq for SequenceFunction {
    fn eq(&self, other: &Self) -> bool {
        self.kind == other.kind && Arc::ptr_eq(&self.write, &other.write)
    }
}
impl Eq for SequenceFunction {}
impl std::hash::Hash for SequenceFunction {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.kind.hash(state);
    }
}

impl SequenceFunction {
    fn new(kind: Kind, write: Arc<WritePath>) -> SequenceFunction {
        let signature = match kind {
            Kind::NextVal | Kind::CurrVal => Signature::exact(vec![DataType::Utf8], Volatility::Volatile),
            Kind::SetVal => Signature::one_of(
                vec![TypeSignature::Exact(vec![DataType::Utf8, DataType::Int64]), TypeSignature::Exact(vec![DataType::Utf8, DataType::Int64, DataType::Boolean])],
                Volatility::Volatile,
            ),
            Kind::LastVal => Signature::exact(vec![], Volatility::Volatile),
        };
        SequenceFunction { kind, signature, write }
    }
}

/// Argument `i` of row `row` as a string / i64 / bool (a scalar repeats for every row).
fn text_at(arg: &ColumnarValue, row: usize) -> Option<String> {
    match arg {
        ColumnarValue::Scalar(s) => match s {
            ScalarValue::Utf8(v) | ScalarValue::Utf8View(v) | ScalarValue::LargeUtf8(v) => v.clone(),
            _ => None,
        },
        ColumnarValue::Array(a) => {
            let a = arrow::compute::cast(a, &DataType::Utf8).ok()?;
            let a = a.as_string::<i32>();
            (!a.is_null(row)).then(|| a.value(row).to_string())
        }
    }
}

fn i64_at(arg: &ColumnarValue, row: usize) -> Option<i64> {
    match arg {
        ColumnarValue::Scalar(s) => match s.cast_to(&DataType::Int64).ok()? {
            ScalarValue::Int64(v) => v,
            _ => None,
        },
        ColumnarValue::Array(a) => {
            let a = arrow::compute::cast(a, &DataType::Int64).ok()?;
            let a = a.as_primitive::<arrow::datatypes::Int64Type>();
            (!a.is_null(row)).then(|| a.value(row))
        }
    }
}

fn bool_at(arg: &ColumnarValue, row: usize) -> Option<bool> {
    match arg {
        ColumnarValue::Scalar(ScalarValue::Boolean(v)) => *v,
        ColumnarValue::Array(a) => {
            let a = a.as_boolean();
            (!a.is_null(row)).then(|| a.value(row))
        }
        _ => None,
    }
}

impl ScalarUDFImpl for SequenceFunction {
    fn name(&self) -> &str {
        match self.kind {
            Kind::NextVal => "nextval",
            Kind::SetVal => "setval",
            Kind::CurrVal => "currval",
            Kind::LastVal => "lastval",
        }
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(DataType::Int64)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let rows = args.number_rows;
        let all_scalar = args.args.iter().all(|a| matches!(a, ColumnarValue::Scalar(_)));
        // Outside a session (a unit test's bare context) values are drawn but not kept.
        let memory = args.config_options.extensions.get::<SessionSequences>().cloned().unwrap_or_default();
        let values: Vec<Option<i64>> = match self.kind {
            Kind::LastVal => {
                let (name, value) = memory.last().ok_or_else(|| undefined("lastval".into(), "SELECT nextval('a_sequence') in this session, or take the value with INSERT … RETURNING".into()))?;
                // A sequence dropped since: PostgreSQL's "lastval is not yet defined".
                if self.write.sequence(&name).map_err(external)?.is_none() {
                    memory.forget(std::slice::from_ref(&name));
                    return Err(undefined("lastval".into(), format!("its sequence {name} was dropped")));
                }
                vec![Some(value); rows.max(1)]
            }
            Kind::CurrVal => (0..rows.max(1))
                .map(|r| {
                    let Some(given) = text_at(&args.args[0], r) else { return Ok(None) };
                    let name = sequence_name(&given);
                    // An unknown name is "does not exist" (42P01) before "not yet defined".
                    if self.write.sequence(&name).map_err(external)?.is_none() {
                        memory.forget(std::slice::from_ref(&name));
                        return Err(external(self.write.unknown_sequence(&name)));
                    }
                    match memory.current(&name) {
                        Some(v) => Ok(Some(v)),
                        None => Err(undefined(format!("currval of sequence \"{name}\""), format!("SELECT nextval('{name}') in this session"))),
                    }
                })
                .collect::<Result<_>>()?,
            Kind::NextVal if all_scalar => {
                // One name for every row: one call hands the rows' values out in order.
                let Some(given) = text_at(&args.args[0], 0) else { return Ok(ColumnarValue::Scalar(ScalarValue::Int64(None))) };
                let name = sequence_name(&given);
                let taken = memory.next_values(&self.write, &name, rows.max(1)).map_err(external)?;
                taken.into_iter().take(rows.max(1)).map(Some).collect()
            }
            Kind::NextVal => (0..rows)
                .map(|r| match text_at(&args.args[0], r) {
                    None => Ok(None),
                    Some(given) => {
                        let name = sequence_name(&given);
                        let v = memory.next_values(&self.write, &name, 1).map_err(external)?;
                        Ok(v.first().copied())
                    }
                })
                .collect::<Result<_>>()?,
            Kind::SetVal => (0..rows.max(1))
                .map(|r| {
                    let (Some(given), Some(value)) = (text_at(&args.args[0], r), i64_at(&args.args[1], r)) else { return Ok(None) };
                    let is_called = args.args.get(2).map(|a| bool_at(a, r).unwrap_or(true)).unwrap_or(true);
                    let name = sequence_name(&given);
                    let v = self.write.set_sequence_value(&name, value, is_called).map_err(external)?;
                    if is_called {
                        memory.set(&name, v);
                    }
                    Ok(Some(v))
                })
                .collect::<Result<_>>()?,
        };
        if all_scalar && rows <= 1 {
            return Ok(ColumnarValue::Scalar(ScalarValue::Int64(values.first().copied().flatten())));
        }
        let array: ArrayRef = Arc::new(Int64Array::from(values));
        debug_assert_eq!(array.len(), rows);
        Ok(ColumnarValue::Array(array))
    }
}

/// `currval` / `lastval` before the session has a value to answer.
fn undefined(what: String, hint: String) -> datafusion::error::DataFusionError {
    external(flashscan_write::WriteError::SequenceValueUndefined { what, hint })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_fold_as_postgresql_reads_them() {
        assert_eq!(sequence_name("T_id_seq"), "t_id_seq");
        assert_eq!(sequence_name("public.t_id_seq"), "t_id_seq");
        assert_eq!(sequence_name("\"Mixed\""), "Mixed");
    }
}
