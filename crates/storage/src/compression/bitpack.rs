//! `bitpack`: frame of reference + bit-packing, per block of 1024 values.
//!
//! Each block stores its own minimum and packs `value - min` at the width of `max - min`,
//! so a column whose range drifts (order keys, dates) stays narrow block by block.
//!
//! Payload (all little-endian), for n values in b = ceil(n / 1024) blocks:
//! | offset | size   | field                                              |
//! |--------|--------|----------------------------------------------------|
//! | 0      | 9·b    | per block: min i64, width_bits u8 (0..=64)         |
//! | 9·b    | varies | per block: ceil(len·width/64) u64 words, LSB first |
//! Block i holds values [1024·i, min(n, 1024·(i+1))).

use super::bits::{self, BLOCK_VALUES, BLOCK_WORDS_MAX, WIDTH_BITS_MAX};
use super::codec::{CodecId, IntegerCodec, IntegerInput, IntegerNative};
use super::error::CodecError;
use super::reader::ByteReader;

/// Bytes of one block header: min (8) + width (1).
pub const BLOCK_HEADER_BYTES: usize = 9;

pub struct Bitpack;

fn block_min_max(block: &[i64]) -> (i64, i64) {
    debug_assert!(!block.is_empty());
    let mut min = block[0];
    let mut max = block[0];
    for value in block {
        min = min.min(*value);
        max = max.max(*value);
    }
    (min, max)
}

fn block_width_bits(min: i64, max: i64) -> u32 {
    debug_assert!(min <= max);
    // The difference of two i64 always fits in u64.
    bits::width_bits_for(max.wrapping_sub(min) as u64)
}

/// Exact payload size in bytes for `values`.
pub fn encoded_bytes(values: &[i64]) -> usize {
    values
        .chunks(BLOCK_VALUES)
        .map(|block| {
            let (min, max) = block_min_max(block);
            BLOCK_HEADER_BYTES + bits::packed_words(block.len(), block_width_bits(min, max)) * 8
        })
        .sum()
}

/// Appends the payload for `values`.
pub fn encode(values: &[i64], out: &mut Vec<u8>) {
    let start_bytes = out.len();
    let mut widths = Vec::with_capacity(values.len().div_ceil(BLOCK_VALUES));
    for block in values.chunks(BLOCK_VALUES) {
        let (min, max) = block_min_max(block);
        let width_bits = block_width_bits(min, max);
        out.extend_from_slice(&min.to_le_bytes());
        out.push(width_bits as u8);
        widths.push((min, width_bits));
    }
    let mut deltas = [0u64; BLOCK_VALUES];
    for (block, (min, width_bits)) in values.chunks(BLOCK_VALUES).zip(widths) {
        for (delta, value) in deltas.iter_mut().zip(block) {
            *delta = value.wrapping_sub(min) as u64;
        }
        bits::pack_block(&deltas[..block.len()], width_bits, out);
    }
    debug_assert_eq!(out.len() - start_bytes, encoded_bytes(values));
}

struct BlockHeader {
    min: i64,
    width_bits: u32,
}

fn read_block_header(headers: &mut ByteReader<'_>) -> Result<BlockHeader, CodecError> {
    let min = headers.i64_le("bitpack block min")?;
    let width_bits = u32::from(headers.u8("bitpack block width")?);
    if width_bits > WIDTH_BITS_MAX {
        return Err(CodecError::corrupt("bitpack block width", format!("{width_bits} bits, more than 64")));
    }
    Ok(BlockHeader { min, width_bits })
}

/// Decodes `out.len()` values; returns the payload bytes consumed (callers nest payloads).
pub fn decode<T: IntegerNative>(payload: &[u8], out: &mut [T]) -> Result<usize, CodecError> {
    let value_count = out.len();
    let block_count = value_count.div_ceil(BLOCK_VALUES);
    let mut reader = ByteReader::new(payload);
    let mut headers = ByteReader::new(reader.take(
        block_count.checked_mul(BLOCK_HEADER_BYTES).ok_or(CodecError::LimitExceeded {
            what: "bitpack block count",
            value: block_count as u64,
            limit: (usize::MAX / BLOCK_HEADER_BYTES) as u64,
        })?,
        "bitpack block headers",
    )?);
    // Scratch lives on the stack: no allocation per block or per value.
    let mut words = [0u64; BLOCK_WORDS_MAX];
    let mut deltas = [0u64; BLOCK_VALUES];
    for (block_index, block_out) in out.chunks_mut(BLOCK_VALUES).enumerate() {
        let header = read_block_header(&mut headers)?;
        let word_count = bits::packed_words(block_out.len(), header.width_bits);
        let packed = reader.take(word_count * 8, "bitpack block words")?;
        bits::load_words(packed, &mut words);
        bits::unpack_block(header.width_bits, &words, &mut deltas);
        let min = header.min;
        for (value, delta) in block_out.iter_mut().zip(deltas.iter()) {
            *value = T::from_i64(min.wrapping_add(*delta as i64));
        }
        debug_assert!(block_index < block_count);
    }
    Ok(payload.len() - reader.remaining_bytes())
}

/// Value `row` of a payload of `value_count` values, reading only its block.
pub fn fetch_one(payload: &[u8], value_count: usize, row: usize) -> Result<i64, CodecError> {
    if row >= value_count {
        return Err(CodecError::corrupt("bitpack fetch", format!("row {row} of {value_count} values")));
    }
    let block_count = value_count.div_ceil(BLOCK_VALUES);
    let mut reader = ByteReader::new(payload);
    let mut headers = ByteReader::new(reader.take(block_count * BLOCK_HEADER_BYTES, "bitpack block headers")?);
    let target_block = row / BLOCK_VALUES;
    for block_index in 0..=target_block {
        let header = read_block_header(&mut headers)?;
        let block_len = BLOCK_VALUES.min(value_count - block_index * BLOCK_VALUES);
        let packed = reader.take(bits::packed_words(block_len, header.width_bits) * 8, "bitpack block words")?;
        if block_index == target_block {
            let delta = bits::unpack_one(packed, header.width_bits, row % BLOCK_VALUES);
            return Ok(header.min.wrapping_add(delta as i64));
        }
    }
    unreachable!("the loop returns at the target block")
}

impl IntegerCodec for Bitpack {
    const ID: CodecId = CodecId::Bitpack;

    fn analyze(input: &IntegerInput<'_>) -> Option<usize> {
        Some(encoded_bytes(input.values))
    }

    fn compress(input: &IntegerInput<'_>, out: &mut Vec<u8>) {
        encode(input.values, out);
    }

    fn decompress<T: IntegerNative>(payload: &[u8], out: &mut [T]) -> Result<(), CodecError> {
        let used_bytes = decode(payload, out)?;
        if used_bytes != payload.len() {
            return Err(CodecError::corrupt("bitpack payload", format!("{} trailing bytes", payload.len() - used_bytes)));
        }
        Ok(())
    }

    fn fetch(payload: &[u8], value_count: usize, row: usize) -> Result<i64, CodecError> {
        fetch_one(payload, value_count, row)
    }
}

/// Size of a nested payload written by `encode_length_prefixed`.
pub fn length_prefixed_bytes(values: &[i64]) -> usize {
    8 + encoded_bytes(values)
}

/// Writes `u64 payload_bytes` then the payload: how other codecs nest bit-packed streams.
pub fn encode_length_prefixed(values: &[i64], out: &mut Vec<u8>) {
    out.extend_from_slice(&(encoded_bytes(values) as u64).to_le_bytes());
    encode(values, out);
}

/// Reads a nested stream written by `encode_length_prefixed` into `out`.
pub fn decode_length_prefixed<T: IntegerNative>(
    reader: &mut ByteReader<'_>,
    out: &mut [T],
    what: &'static str,
) -> Result<(), CodecError> {
    let payload_bytes = reader.u64_le(what)?;
    let payload = reader.take_u64_length(payload_bytes, what)?;
    Bitpack::decompress(payload, out)
}
