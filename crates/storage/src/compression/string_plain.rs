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

/// A plain string payload read a slice of rows at a time: the lengths are decoded once into
/// offsets, the bytes stay borrowed from the payload, and each slice's bytes are checked as
/// UTF-8 (every string on a char boundary) when it is asked for. A scan builds its batch's
/// strings (views or offsets) from a slice directly: the whole column is never copied into
/// one array and then cast (what made column store string views cost, issue 13: Q13).
#[derive(Debug)]
pub struct PlainStrings<'a> {
    /// `value_count + 1` running offsets into `bytes`, from 0.
    offsets: Vec<i32>,
    bytes: &'a [u8],
}

impl<'a> PlainStrings<'a> {
    /// Opens a plain payload of `value_count` strings, checking its structure (lengths sum
    /// to the byte count, nothing trailing); UTF-8 is checked slice by slice.
    pub fn open(payload: &'a [u8], value_count: usize) -> Result<Self, CodecError> {
        let names = PlainNames { lengths: "string lengths", bytes_length: "string bytes length", bytes: "string bytes", payload: "string plain payload" };
        let (offsets, bytes) = read_plain_values(payload, value_count, &names)?;
        debug_assert_eq!(offsets.len(), value_count + 1);
        debug_assert_eq!(offsets.last().map(|&o| o as usize), Some(bytes.len()));
        Ok(PlainStrings { offsets, bytes })
    }

    pub fn value_count(&self) -> usize {
        self.offsets.len() - 1
    }

    /// Strings `start..start + rows`: their `rows + 1` offsets (into the whole column's
    /// bytes: subtract the first to index the returned bytes) and the bytes they span,
    /// valid UTF-8 with every string starting on a char boundary.
    pub fn slice(&self, start: usize, rows: usize) -> Result<(&[i32], &'a [u8]), CodecError> {
        let end = start.checked_add(rows).filter(|&end| end <= self.value_count()).ok_or(CodecError::LimitExceeded {
            what: "string slice end",
            value: start.saturating_add(rows) as u64,
            limit: self.value_count() as u64,
        })?;
        let offsets = &self.offsets[start..=end];
        // Offsets never decrease and end at bytes.len() (read_plain_values made them).
        let (from, to) = (offsets[0] as usize, offsets[rows] as usize);
        let bytes = &self.bytes[from..to];
        // ASCII (most data) is valid UTF-8 with a char boundary at every byte.
        if !bytes.is_ascii() {
            let text = std::str::from_utf8(bytes).map_err(|error| CodecError::corrupt("string bytes", error.to_string()))?;
            if let Some(bad) = offsets.iter().map(|&o| o as usize - from).find(|&o| !text.is_char_boundary(o)) {
                return Err(CodecError::corrupt("string offsets", format!("offset {bad} of a slice splits a character")));
            }
        }
        Ok((offsets, bytes))
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        /// Any slice of a plain payload holds exactly the strings the whole-column decoder
        /// gives at those rows (multi-byte characters included).
        #[test]
        fn slices_equal_the_whole_decode(
            values in prop::collection::vec("[a-z é日]{0,20}", 0..300),
            cuts in prop::collection::vec(0usize..300, 0..6),
        ) {
            let refs: Vec<&str> = values.iter().map(String::as_str).collect();
            let mut payload = Vec::new();
            compress(&StringInput { values: &refs }, &mut payload);
            let whole = decompress(&payload, refs.len(), None).unwrap();
            let strings = PlainStrings::open(&payload, refs.len()).unwrap();
            prop_assert_eq!(strings.value_count(), refs.len());
            let mut bounds: Vec<usize> = cuts.iter().map(|c| c % (refs.len() + 1)).collect();
            bounds.extend([0, refs.len()]);
            bounds.sort_unstable();
            for w in bounds.windows(2) {
                let (offsets, bytes) = strings.slice(w[0], w[1] - w[0]).unwrap();
                prop_assert_eq!(offsets.len(), w[1] - w[0] + 1);
                for (i, row) in (w[0]..w[1]).enumerate() {
                    let (a, b) = ((offsets[i] - offsets[0]) as usize, (offsets[i + 1] - offsets[0]) as usize);
                    prop_assert_eq!(std::str::from_utf8(&bytes[a..b]).unwrap(), whole.value(row));
                }
            }
            prop_assert!(strings.slice(refs.len(), 1).is_err());
        }
    }

    #[test]
    fn a_slice_that_splits_a_character_is_an_error() {
        // "é" (2 bytes) stored as lengths 1 + 1: each half alone is not UTF-8.
        let mut payload = Vec::new();
        crate::compression::bitpack::encode_length_prefixed(&[1, 1], &mut payload);
        payload.extend_from_slice(&2u64.to_le_bytes());
        payload.extend_from_slice("é".as_bytes());
        let strings = PlainStrings::open(&payload, 2).unwrap();
        assert!(strings.slice(0, 1).is_err());
        assert!(strings.slice(1, 1).is_err());
        assert!(strings.slice(0, 2).is_err());
    }
}
