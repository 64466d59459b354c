//! Handing out sequence values (`nextval`, `setval`) and their durable reservations
//! (`flashscan_storage::sequence` says what the catalog keeps and why).
//!
//! Values come from memory, under one mutex, out of a run reserved in the catalog; a value
//! past the run first commits a longer one (`write_atomic`: durable before the value is
//! handed out). A run that lasted under [`RESERVE_FAST_S`] doubles the next one (up to
//! [`RESERVE_VALUES_MAX`]), so a busy sequence costs one catalog write per many thousand
//! values and an idle one leaves a short gap after a crash. A checkpoint trims the
//! reservation to the last value handed out ([`WritePath::trim_sequence_reservations`]).
//!
//! Lock order: the write path's state before this mutex (a reservation takes both).
//! Reservations do not bump the catalog's generation: no plan or file name depends on
//! them.

use std::collections::BTreeMap;
use std::time::Instant;

use flashscan_storage::SequenceMeta;

use crate::error::WriteError;
use crate::write_path::{State, WritePath};

/// The first run a sequence reserves, in values.
pub const RESERVE_VALUES_MIN: i64 = 32;
/// The longest run one catalog write reserves.
pub const RESERVE_VALUES_MAX: i64 = 1 << 16;
/// A run used up faster than this doubles the next one.
pub const RESERVE_FAST_S: f64 = 1.0;

/// Each sequence handed out from since the database opened.
#[derive(Debug, Default)]
pub(crate) struct SequenceCounters {
    counters: std::sync::Mutex<BTreeMap<String, Counter>>,
}

impl SequenceCounters {
    /// Forgets what was handed out of sequences that are dropped or made anew (the next
    /// use reads the catalog again).
    pub(crate) fn forget(&self, names: &[String]) {
        if let Ok(mut counters) = self.counters.lock() {
            for n in names {
                counters.remove(n);
            }
        }
    }
}

#[derive(Debug, Clone)]
struct Counter {
    /// The sequence's definition (start, increment, maximum) as the catalog has it.
    meta: SequenceMeta,
    /// The last value handed out (None: none yet, and none before the reservation).
    last: Option<i64>,
    /// The catalog's reservation: values up to it may be handed out without a commit.
    reserved_through: Option<i64>,
    /// The length of the next run.
    run_values: i64,
    reserved_at: Instant,
}

impl Counter {
    fn of(meta: &SequenceMeta) -> Counter {
        // After a restart the reservation's values count as handed out: the next comes after.
        Counter { meta: meta.clone(), last: meta.reserved_through, reserved_through: meta.reserved_through, run_values: RESERVE_VALUES_MIN, reserved_at: Instant::now() }
    }
}

fn unknown(name: &str, st: &State) -> WriteError {
    let known: Vec<&str> = st.catalog.sequences.keys().map(String::as_str).collect();
    WriteError::UnknownSequence { name: name.to_string(), known: if known.is_empty() { "(none)".to_string() } else { known.join(", ") } }
}

fn exhausted(name: &str, meta: &SequenceMeta) -> WriteError {
    WriteError::InvalidArgument(format!("nextval: reached maximum value of sequence \"{name}\" ({})", meta.max_value))
}

impl WritePath {
    /// `count` values of sequence `name`, in order, each handed out once (also when the
    /// caller's transaction rolls back: PostgreSQL's rule). Durable before they are
    /// returned: no value is handed out twice, across crashes too.
    pub fn next_sequence_values(&self, name: &str, count: usize) -> Result<Vec<i64>, WriteError> {
        let name = name.to_ascii_lowercase();
        if count == 0 {
            return Ok(Vec::new());
        }
        // Fast: within the reservation, from memory.
        {
            let mut counters = self.sequences.counters.lock().map_err(|_| crate::write_path::poisoned())?;
            if let Some(c) = counters.get_mut(&name) {
                if let Some(values) = take(c, count) {
                    return Ok(values);
                }
            }
        }
        // A new reservation: the state (catalog) first, then the counters (lock order).
        let mut st = self.lock_state()?;
        Self::require_writer(&st)?;
        let meta = st.catalog.sequences.get(&name).cloned().ok_or_else(|| unknown(&name, &st))?;
        let mut counters = self.sequences.counters.lock().map_err(|_| crate::write_path::poisoned())?;
        let counter = counters.entry(name.clone()).or_insert_with(|| Counter::of(&meta));
        if let Some(values) = take(counter, count) {
            return Ok(values);
        }
        // The values wanted and a run after them, as far as the sequence goes.
        let fast = counter.reserved_at.elapsed().as_secs_f64() < RESERVE_FAST_S;
        counter.run_values = if fast { (counter.run_values * 2).min(RESERVE_VALUES_MAX) } else { RESERVE_VALUES_MIN };
        let first = meta.after(counter.last).ok_or_else(|| exhausted(&name, &meta))?;
        let wanted = (count as i64).saturating_add(counter.run_values - 1);
        let through = first.saturating_add(meta.increment.saturating_mul(wanted - 1)).min(meta.max_value);
        let through = through - (through - first) % meta.increment;
        let mut next = st.catalog.clone();
        next.sequences.get_mut(&name).expect("read above under the same lock").reserved_through = Some(through);
        next.write_atomic(self.db_dir())?;
        st.catalog = next;
        counter.reserved_through = Some(through);
        counter.reserved_at = Instant::now();
        take(counter, count).ok_or_else(|| exhausted(&name, &meta))
    }

    /// `setval(name, value, is_called)`: the next value is `value` + increment (or `value`
    /// when `is_called` is false). One catalog commit. Returns `value`.
    pub fn set_sequence_value(&self, name: &str, value: i64, is_called: bool) -> Result<i64, WriteError> {
        let name = name.to_ascii_lowercase();
        let mut st = self.lock_state()?;
        Self::require_writer(&st)?;
        let meta = st.catalog.sequences.get(&name).cloned().ok_or_else(|| unknown(&name, &st))?;
        if value < meta.min_value || value > meta.max_value {
            return Err(WriteError::InvalidArgument(format!(
                "setval: value {value} is out of bounds for sequence \"{name}\" ({}..{})",
                meta.min_value, meta.max_value
            )));
        }
        // The last value handed out, as the catalog and the counter keep it.
        let last = match (is_called, value.checked_sub(meta.increment)) {
            (true, _) => Some(value),
            (false, Some(before)) => Some(before),
            // Only at the very bottom of i64: the start itself, nothing handed out.
            (false, None) if value == meta.start => None,
            (false, None) => return Err(WriteError::InvalidArgument(format!("setval: {value} minus the increment of sequence \"{name}\" is below the smallest bigint"))),
        };
        let mut next = st.catalog.clone();
        next.sequences.get_mut(&name).expect("read above under the same lock").reserved_through = last;
        next.write_atomic(self.db_dir())?;
        st.catalog = next;
        let mut counters = self.sequences.counters.lock().map_err(|_| crate::write_path::poisoned())?;
        counters.insert(name, Counter { meta, last, reserved_through: last, run_values: RESERVE_VALUES_MIN, reserved_at: Instant::now() });
        Ok(value)
    }

    /// CREATE SEQUENCE: one catalog commit. Returns false (nothing done) when it exists
    /// and `if_not_exists`.
    pub fn create_sequence(&self, name: &str, meta: SequenceMeta, if_not_exists: bool) -> Result<bool, WriteError> {
        let name = name.to_ascii_lowercase();
        if !flashscan_storage::load::valid_table_name(&name) {
            return Err(WriteError::InvalidArgument(format!("sequence name {name:?}: use letters, digits and _")));
        }
        let mut st = self.lock_state()?;
        Self::require_writer(&st)?;
        if st.catalog.sequences.contains_key(&name) && if_not_exists {
            return Ok(false);
        }
        if st.catalog.sequences.contains_key(&name) || crate::write_path::key_of(&st.catalog, &name).is_some() || st.catalog.view(&name).is_some() {
            return Err(flashscan_storage::StorageError::RelationExists { name, kind: "relation", hint: "" }.into());
        }
        let mut next = st.catalog.clone();
        next.sequences.insert(name.clone(), meta);
        next.generation += 1;
        next.write_atomic(self.db_dir())?;
        st.catalog = next;
        self.sequences.forget(&[name]);
        Ok(true)
    }

    /// DROP SEQUENCE a, b, …: all in one commit or none. A sequence a column owns (SERIAL,
    /// identity) goes with its table only. Returns the names dropped.
    pub fn drop_sequences(&self, names: &[String], if_exists: bool) -> Result<Vec<String>, WriteError> {
        let mut st = self.lock_state()?;
        Self::require_writer(&st)?;
        let mut next = st.catalog.clone();
        let mut dropped = Vec::new();
        for name in names {
            let name = name.to_ascii_lowercase();
            match next.sequences.get(&name) {
                None if if_exists => continue,
                None => return Err(unknown(&name, &st)),
                Some(s) if s.owned_by.is_some() => return Err(WriteError::SequenceInUse { table: s.owned_by.clone().unwrap_or_default(), name }),
                // A DEFAULT of another table draws from it (PostgreSQL's dependency).
                Some(_) if next.tables.values().any(|t| t.column_defaults.iter().any(|d| d.sql.contains(&format!("'{name}'")))) => {
                    let table = next.tables.values().find(|t| t.column_defaults.iter().any(|d| d.sql.contains(&format!("'{name}'")))).map(|t| t.name.clone()).unwrap_or_default();
                    return Err(WriteError::SequenceInUse { name, table });
                }
                Some(_) => {
                    next.sequences.remove(&name);
                    dropped.push(name);
                }
            }
        }
        if dropped.is_empty() {
            return Ok(dropped);
        }
        next.generation += 1;
        next.write_atomic(self.db_dir())?;
        st.catalog = next;
        self.sequences.forget(&dropped);
        Ok(dropped)
    }

    /// The sequence's catalog entry as it is now.
    /// The error for a sequence `name` the catalog does not have, naming the ones it has.
    pub fn unknown_sequence(&self, name: &str) -> WriteError {
        match self.lock_state_shared() {
            Ok(st) => unknown(name, &st),
            Err(e) => e,
        }
    }

    pub fn sequence(&self, name: &str) -> Result<Option<SequenceMeta>, WriteError> {
        Ok(self.lock_state_shared()?.catalog.sequences.get(&name.to_ascii_lowercase()).cloned())
    }

    /// TRUNCATE … RESTART IDENTITY: the sequences start over (part of the caller's catalog
    /// commit `next`; the counters follow once it is written).
    pub(crate) fn restart_sequences(&self, next: &mut flashscan_storage::Catalog, names: &[String]) -> Result<(), WriteError> {
        let mut counters = self.sequences.counters.lock().map_err(|_| crate::write_path::poisoned())?;
        for name in names {
            if let Some(meta) = next.sequences.get_mut(name) {
                meta.reserved_through = None;
                counters.remove(name);
            }
        }
        Ok(())
    }

    /// A checkpoint's part: each reservation trimmed to the last value handed out, so a
    /// clean stop (which checkpoints) leaves no gap. Writes the catalog only when some
    /// reservation has unused values. The caller holds the state.
    pub(crate) fn trim_sequence_reservations(&self, st: &mut State) -> Result<(), WriteError> {
        let mut counters = self.sequences.counters.lock().map_err(|_| crate::write_path::poisoned())?;
        let unused: Vec<(String, Option<i64>)> = counters.iter().filter(|(_, c)| c.reserved_through != c.last).map(|(n, c)| (n.clone(), c.last)).collect();
        if unused.is_empty() {
            return Ok(());
        }
        let mut next = st.catalog.clone();
        for (name, last) in &unused {
            if let Some(meta) = next.sequences.get_mut(name) {
                meta.reserved_through = *last;
            }
        }
        next.write_atomic(self.db_dir())?;
        st.catalog = next;
        for (name, last) in unused {
            if let Some(c) = counters.get_mut(&name) {
                c.reserved_through = last;
            }
        }
        Ok(())
    }
}

/// `count` values from within the counter's reservation, or None (nothing taken) if they
/// do not all fit in it.
fn take(c: &mut Counter, count: usize) -> Option<Vec<i64>> {
    let reserved = c.reserved_through?;
    let mut values = Vec::with_capacity(count);
    let mut last = c.last;
    for _ in 0..count {
        let v = c.meta.after(last).filter(|v| *v <= reserved)?;
        values.push(v);
        last = Some(v);
    }
    c.last = last;
    Some(values)
}
