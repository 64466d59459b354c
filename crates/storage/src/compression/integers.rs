//! Integer-like columns (Int32, Int64, Date32, Decimal128 ≤ 18 digits as i64): the
//! candidate list and the dispatch from a codec id to its function table.

use super::analyze::{choose_codec, CodecScore};
use super::bitpack::Bitpack;
use super::codec::{CodecId, IntegerCodec, IntegerInput, IntegerNative};
use super::constant::Constant;
use super::dictionary::Dictionary;
use super::error::CodecError;
use super::fastlanes::FastLanes;
use super::plain::Plain;
use super::rle::Rle;

const KIND: &str = "integer";

/// Every integer codec's score for `input`.
pub fn analyze_integers(input: &IntegerInput<'_>) -> Vec<CodecScore> {
    vec![
        CodecScore { codec: CodecId::Constant, encoded_bytes: Constant::analyze(input) },
        CodecScore { codec: CodecId::Plain, encoded_bytes: Plain::analyze(input) },
        CodecScore { codec: CodecId::Bitpack, encoded_bytes: Bitpack::analyze(input) },
        CodecScore { codec: CodecId::FastLanes, encoded_bytes: FastLanes::analyze(input) },
        CodecScore { codec: CodecId::Rle, encoded_bytes: Rle::analyze(input) },
        CodecScore { codec: CodecId::Dictionary, encoded_bytes: Dictionary::analyze(input) },
    ]
}

/// Analyzes, then compresses `input` with the winner (or `forced`); returns the codec used.
pub fn encode_integers(input: &IntegerInput<'_>, forced: Option<CodecId>, out: &mut Vec<u8>) -> Result<CodecId, CodecError> {
    let codec = choose_codec(&analyze_integers(input), forced, KIND)?;
    let start_bytes = out.len();
    match codec {
        CodecId::Constant => Constant::compress(input, out),
        CodecId::Plain => Plain::compress(input, out),
        CodecId::Bitpack => Bitpack::compress(input, out),
        CodecId::FastLanes => FastLanes::compress(input, out),
        CodecId::Rle => Rle::compress(input, out),
        CodecId::Dictionary => Dictionary::compress(input, out),
        CodecId::Bitmap => unreachable!("not an integer candidate"),
    }
    debug_assert!(out.len() >= start_bytes);
    Ok(codec)
}

/// Decodes a whole integer payload of `codec` into `out` (its length is the value count).
pub fn decode_integers<T: IntegerNative>(codec: CodecId, payload: &[u8], out: &mut [T]) -> Result<(), CodecError> {
    match codec {
        CodecId::Constant => Constant::decompress(payload, out),
        CodecId::Plain => Plain::decompress(payload, out),
        CodecId::Bitpack => Bitpack::decompress(payload, out),
        CodecId::FastLanes => FastLanes::decompress(payload, out),
        CodecId::Rle => Rle::decompress(payload, out),
        CodecId::Dictionary => Dictionary::decompress(payload, out),
        CodecId::Bitmap => Err(CodecError::NotApplicable { codec, kind: KIND, detail: "" }),
    }
}

/// One value of an integer payload.
pub fn fetch_integer(codec: CodecId, payload: &[u8], value_count: usize, row: usize) -> Result<i64, CodecError> {
    match codec {
        CodecId::Constant => Constant::fetch(payload, value_count, row),
        CodecId::Plain => Plain::fetch(payload, value_count, row),
        CodecId::Bitpack => Bitpack::fetch(payload, value_count, row),
        CodecId::FastLanes => FastLanes::fetch(payload, value_count, row),
        CodecId::Rle => Rle::fetch(payload, value_count, row),
        CodecId::Dictionary => Dictionary::fetch(payload, value_count, row),
        CodecId::Bitmap => Err(CodecError::NotApplicable { codec, kind: KIND, detail: "" }),
    }
}
