//! `plain` for wide decimals (19 to 38 digits) whose values do not all fit an i64: every
//! value as 16 bytes, little-endian two's complement. The same layout as the integer
//! `plain` (a width byte, then the values), with width 16; a wide decimal segment whose
//! values all fit an i64 uses the integer codecs instead (so the width byte tells which).
//!
//! | offset | size  | field                                   |
//! |--------|-------|-----------------------------------------|
//! | 0      | 1     | width_bytes u8: 16                      |
//! | 1      | 16·n  | values, little-endian two's complement  |

use super::codec::CodecId;
use super::error::CodecError;
use super::reader::ByteReader;

/// The width byte of this layout.
pub const WIDE_WIDTH_BYTES: u8 = 16;
pub const ID: CodecId = CodecId::Plain;

pub fn encoded_bytes(value_count: usize) -> usize {
    1 + value_count * WIDE_WIDTH_BYTES as usize
}

pub fn compress(values: &[i128], out: &mut Vec<u8>) {
    out.reserve(encoded_bytes(values.len()));
    out.push(WIDE_WIDTH_BYTES);
    for value in values {
        out.extend_from_slice(&value.to_le_bytes());
    }
}

/// True when `payload` is in this layout (its width byte is 16), false for an integer payload.
pub fn is_wide(payload: &[u8]) -> bool {
    payload.first() == Some(&WIDE_WIDTH_BYTES)
}

/// Decodes exactly `out.len()` values.
pub fn decompress(payload: &[u8], out: &mut [i128]) -> Result<(), CodecError> {
    let mut reader = ByteReader::new(payload);
    let width = reader.u8("wide plain width")?;
    if width != WIDE_WIDTH_BYTES {
        return Err(CodecError::corrupt("wide plain width", format!("{width} bytes, expected {WIDE_WIDTH_BYTES}")));
    }
    let values = reader.take(out.len().saturating_mul(WIDE_WIDTH_BYTES as usize), "wide plain values")?;
    if reader.remaining_bytes() != 0 {
        return Err(CodecError::corrupt("wide plain payload", format!("{} trailing bytes", reader.remaining_bytes())));
    }
    for (value, chunk) in out.iter_mut().zip(values.chunks_exact(WIDE_WIDTH_BYTES as usize)) {
        let mut array = [0u8; 16];
        array.copy_from_slice(chunk);
        *value = i128::from_le_bytes(array);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn round_trips(values in proptest::collection::vec(any::<i128>(), 0..200)) {
            let mut payload = Vec::new();
            compress(&values, &mut payload);
            prop_assert_eq!(payload.len(), encoded_bytes(values.len()));
            prop_assert!(is_wide(&payload));
            let mut out = vec![0i128; values.len()];
            decompress(&payload, &mut out).map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert_eq!(out, values);
        }

        #[test]
        fn bad_lengths_are_errors(values in proptest::collection::vec(any::<i128>(), 1..20), cut in 0usize..400) {
            let mut payload = Vec::new();
            compress(&values, &mut payload);
            let cut = cut.min(payload.len() - 1);
            let mut out = vec![0i128; values.len()];
            prop_assert!(decompress(&payload[..cut], &mut out).is_err());
            payload.push(0);
            prop_assert!(decompress(&payload, &mut out).is_err());
        }
    }
}
