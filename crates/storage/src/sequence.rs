//! Sequences: the counters behind `SERIAL`, `GENERATED … AS IDENTITY` and `CREATE
//! SEQUENCE`, kept in the catalog (docs/formats.md, "Sequences").
//!
//! A sequence is not transactional (PostgreSQL's rule): a value handed out is used up even
//! if its transaction rolls back. What the catalog keeps is a *reservation*: the last value
//! that may have been handed out. The write path hands values out of a reserved run from
//! memory and commits a new reservation to the catalog (durably) before it hands out a
//! value beyond it, as PostgreSQL logs 32 values ahead; so after a crash the next value
//! comes after every value ever handed out (a gap, never a value twice). A checkpoint
//! trims the reservation to the last value handed out, so a clean stop leaves no gap.

use serde::{Deserialize, Serialize};

/// One sequence in the catalog.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SequenceMeta {
    pub start: i64,
    /// Positive: flashscan's sequences count up.
    pub increment: i64,
    pub min_value: i64,
    pub max_value: i64,
    /// The last value that may have been handed out (see the module comment); None when
    /// none has been (the next value is `start`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reserved_through: Option<i64>,
    /// The table whose SERIAL or identity column owns it: dropped with the table.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owned_by: Option<String>,
}

impl SequenceMeta {
    /// A sequence counting `start, start + increment, …` up to `max_value`.
    pub fn new(start: i64, increment: i64, min_value: i64, max_value: i64) -> Result<SequenceMeta, String> {
        if increment <= 0 {
            return Err(format!("INCREMENT {increment}: flashscan's sequences count up; use a positive increment"));
        }
        if min_value > max_value {
            return Err(format!("MINVALUE ({min_value}) must be less than MAXVALUE ({max_value})"));
        }
        if start < min_value || start > max_value {
            return Err(format!("START value ({start}) cannot be outside MINVALUE ({min_value}) … MAXVALUE ({max_value})"));
        }
        Ok(SequenceMeta { start, increment, min_value, max_value, reserved_through: None, owned_by: None })
    }

    /// The largest value of an integer column `bits` wide: a SERIAL's sequence ends there.
    pub fn max_of_bits(bits: u32) -> i64 {
        match bits {
            16 => i16::MAX as i64,
            32 => i32::MAX as i64,
            _ => i64::MAX,
        }
    }

    /// The value after `last` (None: the first value), or None past `max_value`.
    pub fn after(&self, last: Option<i64>) -> Option<i64> {
        match last {
            None => Some(self.start),
            Some(v) => v.checked_add(self.increment).filter(|n| *n <= self.max_value),
        }
    }

    /// The next value a restarted database hands out.
    pub fn next_after_reservation(&self) -> Option<i64> {
        self.after(self.reserved_through)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_count_up_and_stop_at_the_maximum() {
        let s = SequenceMeta::new(1, 1, 1, 3).unwrap();
        assert_eq!(s.after(None), Some(1));
        assert_eq!(s.after(Some(1)), Some(2));
        assert_eq!(s.after(Some(3)), None);
        let big = SequenceMeta::new(i64::MAX - 1, 5, 1, i64::MAX).unwrap();
        assert_eq!(big.after(Some(i64::MAX - 1)), None, "an overflow is the end, not a wrap");
        assert!(SequenceMeta::new(1, 0, 1, 10).is_err());
        assert!(SequenceMeta::new(1, -1, 1, 10).is_err());
        assert!(SequenceMeta::new(0, 1, 1, 10).is_err());
        assert!(SequenceMeta::new(1, 1, 5, 4).is_err());
    }

    #[test]
    fn a_reservation_is_resumed_after() {
        let mut s = SequenceMeta::new(10, 10, 1, i64::MAX).unwrap();
        assert_eq!(s.next_after_reservation(), Some(10));
        s.reserved_through = Some(330);
        assert_eq!(s.next_after_reservation(), Some(340));
        let json = serde_json::to_string(&s).unwrap();
        assert_eq!(serde_json::from_str::<SequenceMeta>(&json).unwrap(), s);
    }
}
