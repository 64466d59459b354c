//! `dictionary` for strings: the distinct strings once (sorted, so codes keep the order),
//! then one bit-packed code per row.
//!
//! | offset | size   | field                                                        |
//! |--------|--------|--------------------------------------------------------------|
//! | 0      | 4      | entry_count u32 (≤ DICTIONARY_ENTRIES_MAX)                   |
//! | 4      | varies | entry lengths: u64 payload_bytes + `bitpack` payload         |
//! | …      | 8      | entry bytes_len u64                                          |
//! | …      | varies | entry UTF-8 bytes, back to back                              |
//! | …      | varies | codes (0..entry_count): u64 payload_bytes + `bitpack` payload |

use std::collections::HashMap;

use arrow::array::StringArray;
use arrow::buffer::{Buffer, NullBuffer, OffsetBuffer, ScalarBuffer};

use super::bitpack;
use super::dictionary::{codes_bytes_max, DICTIONARY_ENTRIES_MAX};
use super::error::CodecError;
use super::reader::ByteReader;
use super::strings::{offsets_from_lengths, StringInput, STRING_BYTES_MAX};
use super::vectors::{check_codes, next_block, PackedBlocks, VectorPosition, VECTOR_VALUES};

/// Sorted distinct strings, or None past DICTIONARY_ENTRIES_MAX.
fn distinct_sorted<'a>(input: &StringInput<'a>) -> Option<Vec<&'a str>> {
    let mut seen: HashMap<&'a str, ()> = HashMap::new();
    for value in input.values {
        if seen.insert(value, ()).is_none() && seen.len() > DICTIONARY_ENTRIES_MAX {
            return None;
        }
    }
    let mut entries: Vec<&'a str> = seen.into_keys().collect();
    entries.sort_unstable();
    Some(entries)
}

fn entries_bytes(entries: &[&str]) -> usize {
    entries.iter().map(|entry| entry.len()).sum()
}

fn entry_lengths(entries: &[&str]) -> Vec<i64> {
    entries.iter().map(|entry| entry.len() as i64).collect()
}

pub fn analyze(input: &StringInput<'_>) -> Option<usize> {
    let entries = distinct_sorted(input)?;
    Some(
        4 + bitpack::length_prefixed_bytes(&entry_lengths(&entries))
            + 8
            + entries_bytes(&entries)
            + codes_bytes_max(input.values.len(), entries.len()),
    )
}

pub fn compress(input: &StringInput<'_>, out: &mut Vec<u8>) {
    let Some(entries) = distinct_sorted(input) else {
        unreachable!("compress is only called after analyze accepted the values");
    };
    let code_of: HashMap<&str, i64> = entries.iter().enumerate().map(|(code, entry)| (*entry, code as i64)).collect();
    let codes: Vec<i64> = input.values.iter().map(|value| code_of[value]).collect();
    out.extend_from_slice(&(entries.len() as u32).to_le_bytes());
    bitpack::encode_length_prefixed(&entry_lengths(&entries), out);
    out.extend_from_slice(&(entries_bytes(&entries) as u64).to_le_bytes());
    for entry in &entries {
        out.extend_from_slice(entry.as_bytes());
    }
    bitpack::encode_length_prefixed(&codes, out);
}

/// The entries of a string dictionary: offsets (entry_count + 1, from 0) into UTF-8 bytes,
/// every entry validated.
fn read_entries<'a>(reader: &mut ByteReader<'a>) -> Result<(Vec<i32>, &'a [u8]), CodecError> {
    let entry_count = super::dictionary::read_entry_count(reader, "string dictionary entry count")?;
    let mut entry_offsets = vec![0i32; entry_count + 1];
    bitpack::decode_length_prefixed(reader, &mut entry_offsets[1..], "string dictionary entry lengths")?;
    let entry_total_bytes = offsets_from_lengths(&mut entry_offsets)?;
    let entry_bytes_len = reader.u64_le("string dictionary bytes length")?;
    if entry_bytes_len != entry_total_bytes as u64 {
        return Err(CodecError::corrupt(
            "string dictionary bytes length",
            format!("{entry_bytes_len}, lengths sum to {entry_total_bytes}"),
        ));
    }
    let entry_bytes = reader.take(entry_total_bytes, "string dictionary bytes")?;
    // Validate each entry once; every output string is then a copy of a valid entry.
    for window in entry_offsets.windows(2) {
        let entry = &entry_bytes[window[0] as usize..window[1] as usize];
        if let Err(error) = std::str::from_utf8(entry) {
            return Err(CodecError::corrupt("string dictionary entry", error.to_string()));
        }
    }
    Ok((entry_offsets, entry_bytes))
}

/// A string dictionary read as codes: the entries once, then the codes a vector at a time,
/// so a kernel can group or filter on codes and never build the strings.
#[derive(Debug)]
pub struct StringCodes<'a> {
    entry_offsets: Vec<i32>,
    entry_bytes: &'a [u8],
    codes: PackedBlocks<'a>,
    deltas: Box<[u64; VECTOR_VALUES]>,
    at: VectorPosition,
}

impl<'a> StringCodes<'a> {
    pub fn open(payload: &'a [u8], value_count: usize) -> Result<Self, CodecError> {
        let mut reader = ByteReader::new(payload);
        let (entry_offsets, entry_bytes) = read_entries(&mut reader)?;
        if entry_offsets.len() == 1 && value_count > 0 {
            return Err(CodecError::corrupt("string dictionary", "no entries for a non-empty segment"));
        }
        let payload_bytes = reader.u64_le("string dictionary codes")?;
        let codes = PackedBlocks::open(reader.take_u64_length(payload_bytes, "string dictionary codes")?, value_count, false)?;
        if reader.remaining_bytes() != 0 {
            return Err(CodecError::corrupt("string dictionary payload", format!("{} trailing bytes", reader.remaining_bytes())));
        }
        Ok(StringCodes { entry_offsets, entry_bytes, codes, deltas: Box::new([0u64; VECTOR_VALUES]), at: VectorPosition::new(value_count) })
    }

    pub fn entry_count(&self) -> usize {
        self.entry_offsets.len() - 1
    }

    /// Entry `code` (< entry_count) as UTF-8 bytes.
    pub fn entry(&self, code: usize) -> &'a [u8] {
        &self.entry_bytes[self.entry_offsets[code] as usize..self.entry_offsets[code + 1] as usize]
    }

    /// The next vector's codes into `out`, each checked below `entry_count`; returns how
    /// many (0 at the end).
    pub fn next_codes(&mut self, out: &mut [u32; VECTOR_VALUES]) -> Result<usize, CodecError> {
        let length = self.at.next_length();
        if length == 0 {
            return Ok(0);
        }
        let block = next_block(&mut self.codes, length)?;
        self.codes.unpack(&block, &mut self.deltas);
        let deltas = &self.deltas[..length];
        check_codes(deltas, block.min, self.entry_count())?;
        // Below entry_count ≤ DICTIONARY_ENTRIES_MAX: fits u32.
        let base = block.min as u64;
        for (code, delta) in out.iter_mut().zip(deltas) {
            *code = (base + *delta) as u32;
        }
        self.at.advance(length);
        Ok(length)
    }

    /// Moves past the next vector's codes without unpacking them; returns how many values
    /// it held (0 at the end).
    pub fn skip_vector(&mut self) -> Result<usize, CodecError> {
        let length = self.at.next_length();
        if length == 0 {
            return Ok(0);
        }
        next_block(&mut self.codes, length)?;
        self.at.advance(length);
        Ok(length)
    }
}

pub fn decompress(payload: &[u8], value_count: usize, nulls: Option<NullBuffer>) -> Result<StringArray, CodecError> {
    let mut reader = ByteReader::new(payload);
    let (entry_offsets, entry_bytes) = read_entries(&mut reader)?;
    let entry_count = entry_offsets.len() - 1;
    let mut codes = vec![0i32; value_count];
    bitpack::decode_length_prefixed(&mut reader, &mut codes, "string dictionary codes")?;
    if reader.remaining_bytes() != 0 {
        return Err(CodecError::corrupt("string dictionary payload", format!("{} trailing bytes", reader.remaining_bytes())));
    }
    let code_max = codes.iter().fold(0u32, |max, code| max.max(*code as u32));
    if !codes.is_empty() && code_max as usize >= entry_count {
        return Err(CodecError::corrupt("string dictionary code", format!("{code_max} for {entry_count} entries")));
    }
    // Size the output once, checked against the limit before allocating.
    let output_bytes: u64 = codes
        .iter()
        .map(|code| (entry_offsets[*code as usize + 1] - entry_offsets[*code as usize]) as u64)
        .sum();
    if output_bytes > STRING_BYTES_MAX as u64 {
        return Err(CodecError::LimitExceeded {
            what: "decoded string bytes",
            value: output_bytes,
            limit: STRING_BYTES_MAX as u64,
        });
    }
    let mut offsets = Vec::with_capacity(value_count + 1);
    let mut bytes = Vec::with_capacity(output_bytes as usize);
    offsets.push(0i32);
    for code in &codes {
        let start = entry_offsets[*code as usize] as usize;
        let end = entry_offsets[*code as usize + 1] as usize;
        bytes.extend_from_slice(&entry_bytes[start..end]);
        offsets.push(bytes.len() as i32);
    }
    debug_assert_eq!(bytes.len() as u64, output_bytes);
    let offsets = OffsetBuffer::new(ScalarBuffer::from(offsets));
    if let Some(nulls) = &nulls {
        if nulls.len() != value_count {
            return Err(CodecError::corrupt("string validity", format!("{} bits for {value_count} values", nulls.len())));
        }
    }
    // SAFETY: offsets start at 0, never decrease and end at bytes.len() (built just above);
    // every string is a whole copy of a dictionary entry validated as UTF-8 above, so all
    // offsets fall on char boundaries; the null buffer length was checked.
    Ok(unsafe { StringArray::new_unchecked(offsets, Buffer::from(bytes), nulls) })
}
