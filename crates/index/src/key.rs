//! Index keys: one or more fixed-width columns, each widened to i64 and stored as 8
//! big-endian bytes with the sign bit flipped, so byte order (memcmp) is key order and a
//! composite key is the concatenation of its parts. NULL is stored as i64::MIN (NULLs
//! sort first, as in most engines).

use flashscan_storage::heap::row_codec::{ColumnSlot, RowLayout};
use flashscan_storage::{ColumnType, TableMeta};

use crate::error::IndexError;

/// Columns per key; 4 × 8 bytes keeps a leaf at 200+ entries.
pub const KEY_COLUMNS_MAX: usize = 4;
pub const KEY_PART_BYTES: usize = 8;
pub const KEY_BYTES_MAX: usize = KEY_COLUMNS_MAX * KEY_PART_BYTES;

/// The in-memory form of a key while building: the encoded parts as u64 (compare equal to
/// the byte order of their big-endian encoding).
pub type KeyWords = [u64; KEY_COLUMNS_MAX];

#[inline]
pub fn encode_part(value: i64) -> u64 {
    (value as u64) ^ (1 << 63)
}

#[inline]
pub fn decode_part(word: u64) -> i64 {
    (word ^ (1 << 63)) as i64
}

/// Writes the first `column_count` words big-endian.
#[inline]
pub fn words_to_bytes(words: &KeyWords, column_count: usize, out: &mut [u8]) {
    debug_assert_eq!(out.len(), column_count * KEY_PART_BYTES);
    for (i, w) in words[..column_count].iter().enumerate() {
        out[i * 8..i * 8 + 8].copy_from_slice(&w.to_be_bytes());
    }
}

pub fn bytes_to_values(bytes: &[u8]) -> Vec<i64> {
    bytes.chunks_exact(8).map(|c| decode_part(u64::from_be_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]))).collect()
}

/// Which columns a key is made of, where they sit in a row, and their types.
#[derive(Debug, Clone)]
pub struct KeySchema {
    pub names: Vec<String>,
    pub column_indexes: Vec<usize>,
    pub types: Vec<ColumnType>,
    /// (offset in row, width) of each key column in the row's fixed area.
    fixed: Vec<(usize, usize)>,
}

impl KeySchema {
    pub fn new(table: &TableMeta, columns: &[String]) -> Result<KeySchema, IndexError> {
        if columns.is_empty() || columns.len() > KEY_COLUMNS_MAX {
            return Err(IndexError::InvalidArgument(format!("an index key has 1 to {KEY_COLUMNS_MAX} columns, got {}", columns.len())));
        }
        let layout = RowLayout::new(&table.columns);
        let mut schema = KeySchema { names: Vec::new(), column_indexes: Vec::new(), types: Vec::new(), fixed: Vec::new() };
        for name in columns {
            let i = table.column_index(name)?;
            let c = &table.columns[i];
            let ColumnSlot::Fixed { offset_bytes, width_bytes } = layout.slots[i] else {
                return Err(IndexError::UnsupportedKeyColumn { column: c.name.clone(), column_type: format!("{:?}", c.column_type) });
            };
            if c.column_type == ColumnType::Float64 {
                return Err(IndexError::UnsupportedKeyColumn { column: c.name.clone(), column_type: "Float64".into() });
            }
            // Keys are i64 words: UInt64 past 2^63 and 16-byte decimals do not order as one.
            if matches!(c.column_type, ColumnType::UInt64 | ColumnType::WideDecimal { .. }) {
                return Err(IndexError::UnsupportedKeyColumn { column: c.name.clone(), column_type: format!("{:?}", c.column_type) });
            }
            schema.names.push(c.name.clone());
            schema.column_indexes.push(i);
            schema.types.push(c.column_type);
            schema.fixed.push((offset_bytes, width_bytes));
        }
        Ok(schema)
    }

    pub fn column_count(&self) -> usize {
        self.names.len()
    }

    pub fn key_width_bytes(&self) -> usize {
        self.names.len() * KEY_PART_BYTES
    }

    /// The key of the row starting at `row` (already bounds-checked to hold the fixed area).
    #[inline]
    pub fn read_row_key(&self, row: &[u8]) -> KeyWords {
        let mut words = [0u64; KEY_COLUMNS_MAX];
        for (k, (&(offset, width), &column)) in self.fixed.iter().zip(&self.column_indexes).enumerate() {
            let is_null = row[column / 8] & (1 << (column % 8)) != 0;
            let b = &row[offset..offset + width];
            let v: i64 = if is_null {
                i64::MIN
            } else {
                match width {
                    1 => b[0] as i64,
                    4 => i32::from_le_bytes([b[0], b[1], b[2], b[3]]) as i64,
                    _ => i64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]),
                }
            };
            words[k] = encode_part(v);
        }
        words
    }

    /// Parses one key as typed on the command line: parts separated by ':' (for composite
    /// keys; fewer parts than columns make a prefix). Integers, dates (YYYY-MM-DD or days),
    /// decimals (12.34), booleans.
    pub fn parse_key(&self, text: &str) -> Result<Vec<u8>, IndexError> {
        let parts: Vec<&str> = text.split(':').collect();
        if parts.len() > self.column_count() {
            return Err(IndexError::BadKey { text: text.into(), reason: format!("{} parts for a {}-column key", parts.len(), self.column_count()) });
        }
        let mut out = Vec::with_capacity(parts.len() * KEY_PART_BYTES);
        for (part, t) in parts.iter().zip(&self.types) {
            let v = parse_value(part.trim(), *t).map_err(|reason| IndexError::BadKey { text: text.into(), reason })?;
            out.extend_from_slice(&encode_part(v).to_be_bytes());
        }
        Ok(out)
    }

    /// A key's parts as the user would type them.
    pub fn format_key(&self, bytes: &[u8]) -> String {
        bytes_to_values(bytes).iter().zip(&self.types).map(|(&v, t)| format_value(v, *t)).collect::<Vec<_>>().join(":")
    }
}

fn parse_value(s: &str, t: ColumnType) -> Result<i64, String> {
    match t {
        ColumnType::Int32 | ColumnType::Int64 => s.parse::<i64>().map_err(|e| format!("{s:?} is not an integer ({e})")),
        ColumnType::Boolean => match s {
            "true" | "1" => Ok(1),
            "false" | "0" => Ok(0),
            _ => Err(format!("{s:?} is not a boolean")),
        },
        ColumnType::Date32 => {
            if let Ok(days) = s.parse::<i64>() {
                // A Date32 column holds i32 days: a key past that can match nothing and
                // would compare as a different date once narrowed.
                if i32::try_from(days).is_err() {
                    return Err(format!("{s:?} days is outside the dates a date column holds ({} to {})", i32::MIN, i32::MAX));
                }
                return Ok(days);
            }
            parse_date(s).ok_or_else(|| format!("{s:?} is not a calendar date (YYYY-MM-DD, year {DATE_YEAR_MIN} to {DATE_YEAR_MAX}, a day the month has)"))
        }
        ColumnType::Decimal { scale, .. } => parse_decimal(s, scale).ok_or_else(|| format!("{s:?} is not a decimal with {scale} digits after the point")),
        // Timestamps and times as their integer units.
        ColumnType::Timestamp { .. } | ColumnType::Time { .. } => s.parse::<i64>().map_err(|e| format!("{s:?} is not an integer count of the column's units ({e})")),
        ColumnType::Float64 | ColumnType::Utf8 | ColumnType::UInt64 | ColumnType::WideDecimal { .. } | ColumnType::Binary => Err("unsupported key type".into()),
    }
}

fn format_value(v: i64, t: ColumnType) -> String {
    match t {
        ColumnType::Date32 => format_date(v),
        ColumnType::Decimal { scale, .. } if scale > 0 => {
            let p = 10i64.pow(scale as u32);
            let sign = if v < 0 { "-" } else { "" };
            format!("{sign}{}.{:0width$}", (v / p).unsigned_abs(), (v % p).unsigned_abs(), width = scale as usize)
        }
        ColumnType::Boolean => (v != 0).to_string(),
        _ => v.to_string(),
    }
}

fn parse_decimal(s: &str, scale: i8) -> Option<i64> {
    let scale = scale.max(0) as u32;
    let (neg, s) = s.strip_prefix('-').map(|r| (true, r)).unwrap_or((false, s));
    let (int, frac) = s.split_once('.').unwrap_or((s, ""));
    if frac.len() > scale as usize || (int.is_empty() && frac.is_empty()) {
        return None;
    }
    let int: i64 = if int.is_empty() { 0 } else { int.parse().ok()? };
    let frac_v: i64 = if frac.is_empty() { 0 } else { frac.parse::<i64>().ok()? * 10i64.pow(scale - frac.len() as u32) };
    let v = int.checked_mul(10i64.pow(scale))?.checked_add(frac_v)?;
    Some(if neg { -v } else { v })
}

/// Years a date key may name: four digits, as `YYYY-MM-DD` (and far inside Date32's range,
/// so the day arithmetic below cannot overflow).
const DATE_YEAR_MIN: i64 = 0;
const DATE_YEAR_MAX: i64 = 9999;

fn days_in_month(y: i64, m: i64) -> i64 {
    match m {
        2 if (y % 4 == 0 && y % 100 != 0) || y % 400 == 0 => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 (Howard Hinnant's days_from_civil), for a date the calendar has:
/// 2024-02-30 is refused, not read as March 1.
fn parse_date(s: &str) -> Option<i64> {
    let mut it = s.split('-');
    let y: i64 = it.next()?.parse().ok()?;
    let m: i64 = it.next()?.parse().ok()?;
    let d: i64 = it.next()?.parse().ok()?;
    if it.next().is_some() || !(DATE_YEAR_MIN..=DATE_YEAR_MAX).contains(&y) || !(1..=12).contains(&m) || !(1..=days_in_month(y, m)).contains(&d) {
        return None;
    }
    let y = if m <= 2 { y - 1 } else { y };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let doy = (153 * (m + if m > 2 { -3 } else { 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    Some(era * 146097 + doe - 719468)
}

fn format_date(days: i64) -> String {
    let z = days + 719468;
    let era = if z >= 0 { z } else { z - 146096 } / 146097;
    let doe = z - era * 146097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    format!("{:04}-{:02}-{:02}", if m <= 2 { y + 1 } else { y }, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encoding_preserves_order() {
        let values = [i64::MIN, -5, -1, 0, 1, 7, i64::MAX];
        for w in values.windows(2) {
            assert!(encode_part(w[0]).to_be_bytes() < encode_part(w[1]).to_be_bytes());
            assert_eq!(decode_part(encode_part(w[0])), w[0]);
        }
    }

    #[test]
    fn dates_and_decimals_round_trip() {
        for s in ["1970-01-01", "1995-03-15", "1992-02-29", "1960-12-31"] {
            assert_eq!(format_date(parse_date(s).unwrap()), s);
        }
        assert_eq!(parse_date("1970-01-02"), Some(1));
        assert_eq!(parse_date("2024-02-29"), Some(19782));
        for past_the_calendar in ["2023-02-29", "2024-02-30", "2024-04-31", "2024-13-01", "2024-00-10", "10000-01-01", "-1-01-01", "9223372036854775807-01-01"] {
            assert_eq!(parse_date(past_the_calendar), None, "{past_the_calendar}");
        }
        assert_eq!(parse_decimal("12.34", 2), Some(1234));
        assert_eq!(parse_decimal("-0.5", 2), Some(-50));
        assert_eq!(parse_decimal("1.234", 2), None);
        assert_eq!(format_value(-50, ColumnType::Decimal { precision: 10, scale: 2 }), "-0.50");
    }
}
