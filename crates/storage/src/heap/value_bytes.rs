//! The compressed form of one value (row and page compression): the fewest bytes that hold
//! it, and the 4-bit length code and varint that say how many bytes a cell takes.
//!
//! * Integers, dates (days), decimals (unscaled) and booleans (0/1) are zigzagged to u64 and
//!   stored big-endian with leading zero bytes dropped: 0 takes no bytes, 1..=127 one byte.
//!   Big-endian, not little-endian, so values close to each other share leading bytes and
//!   page compression's column prefix can drop them.
//! * Float64 is its IEEE bits big-endian with trailing zero bytes dropped (round values have
//!   zero low mantissa bytes; sign and exponent lead, so close values share a prefix too).
//! * Utf8 and Binary are their bytes, unchanged.
//! * UInt64 is its bits as an i64 (so values up to 2^63 stay short), timestamps and times
//!   their i64 (or i32) units: all as integers.
//! * Wide decimals (19 to 38 digits) are their unscaled i128 zigzagged to u128, big-endian
//!   with leading zero bytes dropped: at most 16 bytes.

use crate::column::ColumnType;

/// The 4-bit length code that says "the length follows as a varint".
pub const NIBBLE_ESCAPE: u8 = 15;
/// Bytes of the longest varint we write (lengths are below 2^21, pages are 8 KB).
pub const VARINT_BYTES_MAX: usize = 3;

/// How a column's values become bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValueEncoding {
    /// Zigzag, big-endian, leading zero bytes dropped; at most 8 bytes.
    Integer,
    /// IEEE bits big-endian, trailing zero bytes dropped; at most 8 bytes.
    Float,
    /// Raw bytes.
    Bytes,
    /// i128 zigzag, big-endian, leading zero bytes dropped; at most 16 bytes.
    Integer128,
}

impl ValueEncoding {
    pub fn of(t: ColumnType) -> ValueEncoding {
        match t {
            ColumnType::Int32
            | ColumnType::Int64
            | ColumnType::Date32
            | ColumnType::Decimal { .. }
            | ColumnType::Boolean
            | ColumnType::UInt64
            | ColumnType::Timestamp { .. }
            | ColumnType::Time { .. } => ValueEncoding::Integer,
            ColumnType::Float64 => ValueEncoding::Float,
            ColumnType::Utf8 | ColumnType::Binary => ValueEncoding::Bytes,
            ColumnType::WideDecimal { .. } => ValueEncoding::Integer128,
        }
    }

    /// The most bytes one value takes; `None` for unbounded strings.
    pub fn value_bytes_max(self) -> Option<usize> {
        match self {
            ValueEncoding::Integer | ValueEncoding::Float => Some(8),
            ValueEncoding::Integer128 => Some(16),
            ValueEncoding::Bytes => None,
        }
    }
}

/// The zigzag integer format at one width: `$encode`/`$decode` map signed to unsigned so
/// that small magnitudes have leading zero bytes; `$put` appends the minimal big-endian
/// bytes and returns how many (0 to the width); `$get` reads the value held by
/// `head ++ tail` (at most the width in all, checked by the caller). One body for the
/// 8-byte integers and the 16-byte wide decimals.
macro_rules! zigzag_width {
    ($signed:ty, $unsigned:ty, $bytes:literal, $encode:ident, $decode:ident, $put:ident, $get:ident) => {
        #[inline]
        pub fn $encode(v: $signed) -> $unsigned {
            ((v << 1) ^ (v >> ($bytes * 8 - 1))) as $unsigned
        }

        #[inline]
        pub fn $decode(u: $unsigned) -> $signed {
            ((u >> 1) as $signed) ^ -((u & 1) as $signed)
        }

        #[inline]
        pub fn $put(v: $signed, out: &mut Vec<u8>) -> usize {
            let u = $encode(v);
            let n = $bytes - (u.leading_zeros() as usize / 8);
            out.extend_from_slice(&u.to_be_bytes()[$bytes - n..]);
            n
        }

        #[inline]
        pub fn $get(head: &[u8], tail: &[u8]) -> $signed {
            debug_assert!(head.len() + tail.len() <= $bytes);
            let mut u: $unsigned = 0;
            for &b in head.iter().chain(tail) {
                u = (u << 8) | b as $unsigned;
            }
            $decode(u)
        }
    };
}

zigzag_width!(i64, u64, 8, zigzag_encode, zigzag_decode, put_integer, get_integer);
zigzag_width!(i128, u128, 16, zigzag_encode_128, zigzag_decode_128, put_integer128, get_integer128);

/// Appends the float's bits big-endian without trailing zero bytes; returns how many.
#[inline]
pub fn put_float(v: f64, out: &mut Vec<u8>) -> usize {
    let bits = v.to_bits();
    let n = 8 - (bits.trailing_zeros() as usize / 8).min(8);
    out.extend_from_slice(&bits.to_be_bytes()[..n]);
    n
}

/// The float held by `head ++ tail` (at most 8 bytes in all, checked by the caller).
#[inline]
pub fn get_float(head: &[u8], tail: &[u8]) -> f64 {
    debug_assert!(head.len() + tail.len() <= 8);
    let mut b = [0u8; 8];
    b[..head.len()].copy_from_slice(head);
    b[head.len()..head.len() + tail.len()].copy_from_slice(tail);
    f64::from_bits(u64::from_be_bytes(b))
}

/// Bytes of the LEB128 varint for `v`.
#[inline]
pub fn varint_len(v: usize) -> usize {
    match v {
        0..=0x7f => 1,
        0x80..=0x3fff => 2,
        _ => 3,
    }
}

#[inline]
pub fn put_varint(mut v: usize, out: &mut Vec<u8>) {
    debug_assert!(v < 1 << 21);
    while v >= 0x80 {
        out.push((v as u8 & 0x7f) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Reads a varint at `at`, no further than `end`; returns (value, bytes read) or `None` if
/// it runs past `end` or is longer than `VARINT_BYTES_MAX`.
#[inline]
pub fn get_varint(bytes: &[u8], at: usize, end: usize) -> Option<(usize, usize)> {
    let mut v = 0usize;
    for i in 0..VARINT_BYTES_MAX {
        if at + i >= end {
            return None;
        }
        let b = bytes[at + i];
        v |= ((b & 0x7f) as usize) << (7 * i);
        if b & 0x80 == 0 {
            return Some((v, i + 1));
        }
    }
    None
}

/// The 4-bit code for a cell of `len` bytes.
#[inline]
pub fn nibble_for(len: usize) -> u8 {
    if len < NIBBLE_ESCAPE as usize {
        len as u8
    } else {
        NIBBLE_ESCAPE
    }
}

/// Bytes a cell of `len` bytes takes in a row besides its nibble: the varint if escaped.
#[inline]
pub fn cell_cost_bytes(len: usize) -> usize {
    if len < NIBBLE_ESCAPE as usize {
        len
    } else {
        varint_len(len) + len
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_round_trip_at_the_extremes() {
        for v in [0i64, 1, -1, 63, -64, 64, 127, 128, i32::MAX as i64, i32::MIN as i64, i64::MAX, i64::MIN] {
            let mut out = Vec::new();
            let n = put_integer(v, &mut out);
            assert_eq!(n, out.len());
            assert_eq!(get_integer(&[], &out), v);
            let (head, tail) = out.split_at(n / 2);
            assert_eq!(get_integer(head, tail), v);
        }
        let mut out = Vec::new();
        assert_eq!(put_integer(0, &mut out), 0);
    }

    #[test]
    fn wide_integers_round_trip_at_the_extremes() {
        let max38 = 10i128.pow(38) - 1;
        for v in [0i128, 1, -1, i64::MAX as i128 + 1, i64::MIN as i128 - 1, max38, -max38, i128::MAX, i128::MIN] {
            let mut out = Vec::new();
            let n = put_integer128(v, &mut out);
            assert_eq!(n, out.len());
            assert!(n <= 16);
            let (head, tail) = out.split_at(n / 3);
            assert_eq!(get_integer128(head, tail), v);
        }
        let mut out = Vec::new();
        assert_eq!(put_integer128(0, &mut out), 0);
        assert_eq!(put_integer128(-1, &mut out), 1);
    }

    proptest::proptest! {
        #[test]
        fn any_i128_round_trips(v: i128, cut in 0usize..17) {
            let mut out = Vec::new();
            let n = put_integer128(v, &mut out);
            let (head, tail) = out.split_at(cut.min(n));
            proptest::prop_assert_eq!(get_integer128(head, tail), v);
            // Small magnitudes stay short, as with i64.
            if let Ok(small) = i64::try_from(v) {
                let mut narrow = Vec::new();
                proptest::prop_assert_eq!(put_integer(small, &mut narrow), n);
                proptest::prop_assert_eq!(narrow, out);
            }
        }
    }

    #[test]
    fn floats_and_varints_round_trip() {
        for v in [0.0f64, -0.0, 1.0, 1234.5, f64::MAX, f64::MIN_POSITIVE, f64::NAN, f64::INFINITY] {
            let mut out = Vec::new();
            put_float(v, &mut out);
            assert_eq!(get_float(&out, &[]).to_bits(), v.to_bits());
        }
        for v in [0usize, 127, 128, 16383, 16384, 8192, (1 << 21) - 1] {
            let mut out = Vec::new();
            put_varint(v, &mut out);
            assert_eq!(out.len(), varint_len(v));
            assert_eq!(get_varint(&out, 0, out.len()), Some((v, out.len())));
        }
    }
}
