//! Query answers as rows of values. Decimals stay exact (scaled integers) and print as
//! strings with their scale, so `56586554400.73` never passes through a float.

use std::fmt;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    /// SQL NULL (e.g. SUM over no values).
    Null,
    Int(i64),
    /// `value / 10^scale`, exactly.
    Decimal { value: i128, scale: u8 },
    Text(String),
    /// Days since 1970-01-01.
    Date(i32),
}

impl Value {
    /// Rounds a decimal to `scale` digits, half away from zero (as SQL engines print).
    pub fn rounded(&self, scale: u8) -> Value {
        match *self {
            Value::Decimal { value, scale: from } if from > scale => {
                let divisor = 10i128.pow((from - scale) as u32);
                let half = divisor / 2;
                let rounded = if value >= 0 { (value + half) / divisor } else { (value - half) / divisor };
                Value::Decimal { value: rounded, scale }
            }
            Value::Decimal { value, scale: from } => {
                Value::Decimal { value: value * 10i128.pow((scale - from) as u32), scale }
            }
            ref other => other.clone(),
        }
    }
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Null => f.write_str("NULL"),
            Value::Int(v) => write!(f, "{v}"),
            Value::Decimal { value, scale } => f.write_str(&format_decimal(*value, *scale)),
            Value::Text(s) => f.write_str(s),
            Value::Date(days) => {
                let (y, m, d) = civil_from_days(*days as i64);
                write!(f, "{y:04}-{m:02}-{d:02}")
            }
        }
    }
}

pub fn format_decimal(value: i128, scale: u8) -> String {
    if scale == 0 {
        return value.to_string();
    }
    let sign = if value < 0 { "-" } else { "" };
    let digits = value.unsigned_abs().to_string();
    let scale = scale as usize;
    let padded = if digits.len() <= scale { format!("{}{}", "0".repeat(scale + 1 - digits.len()), digits) } else { digits };
    let (int_part, frac_part) = padded.split_at(padded.len() - scale);
    format!("{sign}{int_part}.{frac_part}")
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
pub const fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let m = month as i64;
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + day as i64 - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146097 + doe - 719468
}

pub fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719468;
    let era = if z >= 0 { z } else { z - 146096 } / 146097;
    let doe = z - era * 146097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + if m <= 2 { 1 } else { 0 };
    (y, m, d)
}

/// A query's answer: named columns, rows of values.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct QueryResult {
    pub columns: Vec<String>,
    pub rows: Vec<Vec<Value>>,
    /// Rows of the full answer; more than `rows.len()` when the answer was cut (the needle
    /// query keeps at most `NEEDLE_KEYS_MAX` keys but counts every match).
    pub rows_total: u64,
}

impl QueryResult {
    /// Every value as text, rows joined by `|` (the TPC-H answer-file format).
    pub fn to_pipe_lines(&self) -> Vec<String> {
        self.rows.iter().map(|r| r.iter().map(|v| v.to_string()).collect::<Vec<_>>().join("|")).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimals_print_with_their_scale() {
        assert_eq!(format_decimal(5658655440073, 2), "56586554400.73");
        assert_eq!(format_decimal(-5, 2), "-0.05");
        assert_eq!(format_decimal(5, 0), "5");
        assert_eq!(format_decimal(0, 3), "0.000");
    }

    #[test]
    fn rounding_is_half_away_from_zero() {
        assert_eq!(Value::Decimal { value: 12345, scale: 3 }.rounded(2), Value::Decimal { value: 1235, scale: 2 });
        assert_eq!(Value::Decimal { value: -12345, scale: 3 }.rounded(2), Value::Decimal { value: -1235, scale: 2 });
        assert_eq!(Value::Decimal { value: 12344, scale: 3 }.rounded(2), Value::Decimal { value: 1234, scale: 2 });
        assert_eq!(Value::Decimal { value: 7, scale: 0 }.rounded(2), Value::Decimal { value: 700, scale: 2 });
    }

    #[test]
    fn dates_round_trip() {
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(days_from_civil(1998, 12, 1) - 90, days_from_civil(1998, 9, 2));
        for days in [-800_000i64, -1, 0, 1, 10_471, 10_561, 2_000_000] {
            let (y, m, d) = civil_from_days(days);
            assert_eq!(days_from_civil(y, m, d), days);
        }
        assert_eq!(Value::Date(days_from_civil(1998, 9, 2) as i32).to_string(), "1998-09-02");
    }
}
