//! `dictionary` for integers: the distinct values once (sorted, bit-packed), then one
//! bit-packed code per row. Wins over `bitpack` when few values are spread over a wide
//! range (e.g. {0, 10^12, -5}).
//!
//! | offset | size   | field                                                        |
//! |--------|--------|--------------------------------------------------------------|
//! | 0      | 4      | entry_count u32 (≤ DICTIONARY_ENTRIES_MAX)                   |
//! | 4      | varies | entries, ascending: u64 payload_bytes + `bitpack` payload    |
//! | …      | varies | codes (0..entry_count): u64 payload_bytes + `bitpack` payload |

use std::collections::{HashMap, HashSet};

use super::bitpack;
use super::bits::{self, BLOCK_VALUES};
use super::codec::{CodecId, IntegerCodec, IntegerInput, IntegerNative};
use super::error::CodecError;
use super::reader::ByteReader;

/// Above this many distinct values a dictionary no longer pays for its lookups.
pub const DICTIONARY_ENTRIES_MAX: usize = 1 << 16;

pub struct Dictionary;

/// Sorted distinct values, or None once there are more than DICTIONARY_ENTRIES_MAX.
fn distinct_sorted(values: &[i64]) -> Option<Vec<i64>> {
    let mut seen = HashSet::new();
    for value in values {
        if seen.insert(*value) && seen.len() > DICTIONARY_ENTRIES_MAX {
            return None;
        }
    }
    let mut entries: Vec<i64> = seen.into_iter().collect();
    entries.sort_unstable();
    Some(entries)
}

/// Upper bound of a bit-packed stream of `value_count` codes below `entry_count`.
pub fn codes_bytes_max(value_count: usize, entry_count: usize) -> usize {
    let width_bits = bits::width_bits_for(entry_count.saturating_sub(1) as u64);
    let full_blocks = value_count / BLOCK_VALUES;
    let tail = value_count % BLOCK_VALUES;
    let block_bytes = bitpack::BLOCK_HEADER_BYTES + bits::packed_words(BLOCK_VALUES, width_bits) * 8;
    let tail_bytes = if tail == 0 { 0 } else { bitpack::BLOCK_HEADER_BYTES + bits::packed_words(tail, width_bits) * 8 };
    8 + full_blocks * block_bytes + tail_bytes
}

impl IntegerCodec for Dictionary {
    const ID: CodecId = CodecId::Dictionary;

    fn analyze(input: &IntegerInput<'_>) -> Option<usize> {
        let entries = distinct_sorted(input.values)?;
        Some(4 + bitpack::length_prefixed_bytes(&entries) + codes_bytes_max(input.values.len(), entries.len()))
    }

    fn compress(input: &IntegerInput<'_>, out: &mut Vec<u8>) {
        let Some(entries) = distinct_sorted(input.values) else {
            unreachable!("compress is only called after analyze accepted the values");
        };
        let code_of: HashMap<i64, i64> = entries.iter().enumerate().map(|(code, value)| (*value, code as i64)).collect();
        let codes: Vec<i64> = input.values.iter().map(|value| code_of[value]).collect();
        out.extend_from_slice(&(entries.len() as u32).to_le_bytes());
        bitpack::encode_length_prefixed(&entries, out);
        bitpack::encode_length_prefixed(&codes, out);
    }

    fn decompress<T: IntegerNative>(payload: &[u8], out: &mut [T]) -> Result<(), CodecError> {
        let mut reader = ByteReader::new(payload);
        let entries: Vec<T> = read_entries(&mut reader, out.len())?;
        // Codes are below DICTIONARY_ENTRIES_MAX, so they decode into i32 scratch at half the
        // memory traffic of i64. The scratch is the thread's, reused segment after segment:
        // a fresh 4 MB vector per segment cost more in page faults than the decode itself.
        CODES_SCRATCH.with_borrow_mut(|codes| Self::gather(&mut reader, codes, &entries, out))?;
        if reader.remaining_bytes() != 0 {
            return Err(CodecError::corrupt("dictionary payload", format!("{} trailing bytes", reader.remaining_bytes())));
        }
        Ok(())
    }
}

/// A dictionary's entry count (integer or string), checked against the limit before
/// anything is sized by it.
pub(crate) fn read_entry_count(reader: &mut ByteReader<'_>, what: &'static str) -> Result<usize, CodecError> {
    let entry_count = reader.u32_le(what)? as usize;
    if entry_count > DICTIONARY_ENTRIES_MAX {
        return Err(CodecError::LimitExceeded { what, value: entry_count as u64, limit: DICTIONARY_ENTRIES_MAX as u64 });
    }
    Ok(entry_count)
}

/// Reads a dictionary payload's entries (count, then the bit-packed sorted values), leaving
/// `reader` at the codes: the one reader of that header, for whole-segment decodes and
/// vector-at-a-time cursors alike.
pub(crate) fn read_entries<T: IntegerNative>(reader: &mut ByteReader<'_>, value_count: usize) -> Result<Vec<T>, CodecError> {
    let entry_count = read_entry_count(reader, "dictionary entry count")?;
    if entry_count == 0 && value_count > 0 {
        return Err(CodecError::corrupt("dictionary", "no entries for a non-empty segment"));
    }
    let mut entries = vec![T::default(); entry_count];
    bitpack::decode_length_prefixed(reader, &mut entries, "dictionary entries")?;
    Ok(entries)
}

thread_local! {
    static CODES_SCRATCH: std::cell::RefCell<Vec<i32>> = const { std::cell::RefCell::new(Vec::new()) };
}

impl Dictionary {
    /// Decodes the codes into `codes` (resized, contents overwritten) and gathers `out`.
    fn gather<T: IntegerNative>(reader: &mut ByteReader<'_>, codes: &mut Vec<i32>, entries: &[T], out: &mut [T]) -> Result<(), CodecError> {
        // Stale codes are overwritten: bitpack decodes every one of `out.len()` or fails.
        codes.resize(out.len(), 0);
        bitpack::decode_length_prefixed(reader, codes, "dictionary codes")?;
        let entry_count = entries.len();
        // One branch-free pass validates every code, so the gather below cannot go out of bounds.
        let code_max = codes.iter().fold(0u32, |max, code| max.max(*code as u32));
        if !codes.is_empty() && code_max as usize >= entry_count {
            return Err(CodecError::corrupt("dictionary code", format!("{code_max} for {entry_count} entries")));
        }
        for (value, code) in out.iter_mut().zip(codes.iter()) {
            *value = entries[*code as u32 as usize];
        }
        Ok(())
    }
}
