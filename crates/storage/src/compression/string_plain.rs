//! `plain` for strings: the lengths bit-packed (frame of reference: the offsets' deltas),
//! then all bytes back to back.
//!
//! | offset | size   | field                                                   |
//! |--------|--------|---------------------------------------------------------|
//! | 0      | varies | lengths: u64 payload_bytes + `bitpack` payload (n)      |
//! | …      | 8      | bytes_len u64 (= sum of lengths, ≤ STRING_BYTES_MAX)    |
//! | …      | bytes_len | UTF-8 bytes                                          |

use arrow::array::StringArray;
use arrow::buffer::{Buffer, NullBuffer, OffsetBuffer, ScalarBuffer};

use super::bitpack;
use super::error::CodecError;
use super::strings::{read_plain_values, PlainNames, StringInput};

pub fn analyze(input: &StringInput<'_>) -> Option<usize> {
    Some(bitpack::length_prefixed_bytes(&input.lengths()) + 8 + input.total_bytes())
}

pub fn compress(input: &StringInput<'_>, out: &mut Vec<u8>) {
    bitpack::encode_length_prefixed(&input.lengths(), out);
    out.extend_from_slice(&(input.total_bytes() as u64).to_le_bytes());
    for value in input.values {
        out.extend_from_slice(value.as_bytes());
    }
}

pub fn decompress(payload: &[u8], value_count: usize, nulls: Option<NullBuffer>) -> Result<StringArray, CodecError> {
    let names = PlainNames { lengths: "string lengths", bytes_length: "string bytes length", bytes: "string bytes", payload: "string plain payload" };
    let (offsets, bytes) = read_plain_values(payload, value_count, &names)?;
    let offsets = OffsetBuffer::new(ScalarBuffer::from(offsets));
    // try_new validates UTF-8 and char boundaries: these bytes came from disk.
    StringArray::try_new(offsets, Buffer::from(bytes), nulls)
        .map_err(|error| CodecError::corrupt("string bytes", error.to_string()))
}
