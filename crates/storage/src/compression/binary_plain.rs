//! `plain` for binary columns: the layout of `string_plain` (lengths bit-packed, then the
//! bytes back to back) without the UTF-8 check. A separate file rather than a generic
//! string codec so the string codecs (and their speed work) stay as they are.
//!
//! | offset | size   | field                                                   |
//! |--------|--------|---------------------------------------------------------|
//! | 0      | varies | lengths: u64 payload_bytes + `bitpack` payload (n)      |
//! | …      | 8      | bytes_len u64 (= sum of lengths, ≤ STRING_BYTES_MAX)    |
//! | …      | bytes_len | the bytes                                            |

use arrow::array::BinaryArray;
use arrow::buffer::{Buffer, NullBuffer, OffsetBuffer, ScalarBuffer};

use super::bitpack;
use super::codec::CodecId;
use super::error::CodecError;
use super::strings::{read_plain_values, PlainNames, STRING_BYTES_MAX};

pub const ID: CodecId = CodecId::Plain;

/// Appends the payload of `values` (null slots given as empty); errors past STRING_BYTES_MAX.
pub fn compress(values: &[&[u8]], out: &mut Vec<u8>) -> Result<(), CodecError> {
    let total_bytes: usize = values.iter().map(|value| value.len()).sum();
    if total_bytes > STRING_BYTES_MAX {
        return Err(CodecError::LimitExceeded { what: "binary bytes", value: total_bytes as u64, limit: STRING_BYTES_MAX as u64 });
    }
    let lengths: Vec<i64> = values.iter().map(|value| value.len() as i64).collect();
    bitpack::encode_length_prefixed(&lengths, out);
    out.extend_from_slice(&(total_bytes as u64).to_le_bytes());
    for value in values {
        out.extend_from_slice(value);
    }
    Ok(())
}

pub fn decompress(payload: &[u8], value_count: usize, nulls: Option<NullBuffer>) -> Result<BinaryArray, CodecError> {
    let names = PlainNames { lengths: "binary lengths", bytes_length: "binary bytes length", bytes: "binary bytes", payload: "binary plain payload" };
    let (offsets, bytes) = read_plain_values(payload, value_count, &names)?;
    let offsets = OffsetBuffer::new(ScalarBuffer::from(offsets));
    BinaryArray::try_new(offsets, Buffer::from(bytes), nulls).map_err(|error| CodecError::corrupt("binary array", error.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::Array;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn round_trips(values in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..40), 0..100)) {
            let slices: Vec<&[u8]> = values.iter().map(|v| v.as_slice()).collect();
            let mut payload = Vec::new();
            compress(&slices, &mut payload).map_err(|e| TestCaseError::fail(e.to_string()))?;
            let array = decompress(&payload, values.len(), None).map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert_eq!(array.len(), values.len());
            for (i, v) in values.iter().enumerate() {
                prop_assert_eq!(array.value(i), v.as_slice());
            }
            // Truncated payloads are errors, never panics.
            for cut in [0, payload.len() / 2, payload.len().saturating_sub(1)] {
                if cut < payload.len() {
                    prop_assert!(decompress(&payload[..cut], values.len(), None).is_err());
                }
            }
        }
    }
}
