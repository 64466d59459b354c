//! String (Utf8) columns: the candidate list, dispatch, and the helpers both string codecs
//! share. Null slots are encoded as empty strings.

use arrow::array::StringArray;
use arrow::buffer::NullBuffer;

use super::analyze::{choose_codec, CodecScore};
use super::codec::CodecId;
use super::error::CodecError;
use super::{string_dictionary, string_plain};

/// Bytes of string data one segment may hold: keeps decode allocations bounded and well
/// inside Arrow's i32 offsets.
pub const STRING_BYTES_MAX: usize = 1 << 30;

const KIND: &str = "string";

/// The values of one string segment (null slots already replaced by "").
#[derive(Debug, Clone, Copy)]
pub struct StringInput<'a> {
    pub values: &'a [&'a str],
}

impl<'a> StringInput<'a> {
    pub fn total_bytes(&self) -> usize {
        self.values.iter().map(|value| value.len()).sum()
    }

    pub fn lengths(&self) -> Vec<i64> {
        self.values.iter().map(|value| value.len() as i64).collect()
    }
}

/// What the parts of a plain payload of variable-length values are called in errors.
pub struct PlainNames {
    pub lengths: &'static str,
    pub bytes_length: &'static str,
    pub bytes: &'static str,
    pub payload: &'static str,
}

/// Reads a plain payload of `value_count` variable-length values — the lengths bit-packed,
/// then the byte count, then the bytes, then nothing — as offsets (from 0) and bytes: the
/// one reader of the layout strings and binaries share (docs/formats-columnstore.md).
pub fn read_plain_values<'a>(payload: &'a [u8], value_count: usize, names: &PlainNames) -> Result<(Vec<i32>, &'a [u8]), CodecError> {
    let mut reader = super::reader::ByteReader::new(payload);
    // Lengths land in offsets[1..], then become offsets in place: one buffer, no copy.
    let mut offsets = vec![0i32; value_count + 1];
    super::bitpack::decode_length_prefixed(&mut reader, &mut offsets[1..], names.lengths)?;
    let total_bytes = offsets_from_lengths(&mut offsets)?;
    let bytes_len = reader.u64_le(names.bytes_length)?;
    if bytes_len != total_bytes as u64 {
        return Err(CodecError::corrupt(names.bytes_length, format!("{bytes_len}, lengths sum to {total_bytes}")));
    }
    let bytes = reader.take(total_bytes, names.bytes)?;
    if reader.remaining_bytes() != 0 {
        return Err(CodecError::corrupt(names.payload, format!("{} trailing bytes", reader.remaining_bytes())));
    }
    debug_assert!(total_bytes <= STRING_BYTES_MAX);
    Ok((offsets, bytes))
}

/// Turns `offsets` holding [0, len0, len1, …] into running offsets in place, checking
/// each length is non-negative and the total stays within STRING_BYTES_MAX. Returns the total.
pub fn offsets_from_lengths(offsets: &mut [i32]) -> Result<usize, CodecError> {
    debug_assert!(!offsets.is_empty());
    debug_assert_eq!(offsets[0], 0);
    let mut total: i64 = 0;
    for offset in offsets.iter_mut().skip(1) {
        let length = *offset;
        if length < 0 {
            return Err(CodecError::corrupt("string length", format!("{length}")));
        }
        total += i64::from(length);
        if total > STRING_BYTES_MAX as i64 {
            return Err(CodecError::LimitExceeded { what: "string bytes", value: total as u64, limit: STRING_BYTES_MAX as u64 });
        }
        *offset = total as i32;
    }
    Ok(total as usize)
}

pub fn analyze_strings(input: &StringInput<'_>) -> Vec<CodecScore> {
    vec![
        CodecScore { codec: CodecId::Plain, encoded_bytes: string_plain::analyze(input) },
        CodecScore { codec: CodecId::Dictionary, encoded_bytes: string_dictionary::analyze(input) },
    ]
}

pub fn encode_strings(input: &StringInput<'_>, forced: Option<CodecId>, out: &mut Vec<u8>) -> Result<CodecId, CodecError> {
    let total_bytes = input.total_bytes();
    if total_bytes > STRING_BYTES_MAX {
        return Err(CodecError::LimitExceeded { what: "string bytes", value: total_bytes as u64, limit: STRING_BYTES_MAX as u64 });
    }
    let codec = choose_codec(&analyze_strings(input), forced, KIND)?;
    match codec {
        CodecId::Plain => string_plain::compress(input, out),
        CodecId::Dictionary => string_dictionary::compress(input, out),
        _ => unreachable!("not a string candidate"),
    }
    Ok(codec)
}

pub fn decode_strings(
    codec: CodecId,
    payload: &[u8],
    value_count: usize,
    nulls: Option<NullBuffer>,
) -> Result<StringArray, CodecError> {
    match codec {
        CodecId::Plain => string_plain::decompress(payload, value_count, nulls),
        CodecId::Dictionary => string_dictionary::decompress(payload, value_count, nulls),
        _ => Err(CodecError::NotApplicable { codec, kind: KIND, detail: "" }),
    }
}
