//! `rle`: run-length encoding; run values and run lengths as two nested bit-packed streams.
//!
//! | offset | size   | field                                                 |
//! |--------|--------|-------------------------------------------------------|
//! | 0      | 4      | run_count u32                                         |
//! | 4      | varies | run values: u64 payload_bytes + `bitpack` payload     |
//! | …      | varies | run lengths: u64 payload_bytes + `bitpack` payload    |
//! Run lengths are ≥ 1 and sum to the segment's value count (checked on decode).

use super::bitpack;
use super::codec::{CodecId, IntegerCodec, IntegerInput, IntegerNative};
use super::error::CodecError;
use super::reader::ByteReader;

pub struct Rle;

/// Runs of `values`: (values, lengths).
fn runs(values: &[i64]) -> (Vec<i64>, Vec<i64>) {
    let mut run_values = Vec::new();
    let mut run_lengths: Vec<i64> = Vec::new();
    for value in values {
        if let (Some(last), Some(length)) = (run_values.last().copied(), run_lengths.last_mut()) {
            if last == *value {
                *length += 1;
                continue;
            }
        }
        run_values.push(*value);
        run_lengths.push(1);
    }
    (run_values, run_lengths)
}

/// Reads the run streams, checking run lengths against `value_count`.
pub(crate) fn read_runs(payload: &[u8], value_count: usize) -> Result<(Vec<i64>, Vec<i64>), CodecError> {
    let mut reader = ByteReader::new(payload);
    let run_count = reader.u32_le("rle run count")? as usize;
    if run_count > value_count {
        return Err(CodecError::corrupt("rle run count", format!("{run_count} runs for {value_count} values")));
    }
    let mut run_values = vec![0i64; run_count];
    let mut run_lengths = vec![0i64; run_count];
    bitpack::decode_length_prefixed(&mut reader, &mut run_values, "rle run values")?;
    bitpack::decode_length_prefixed(&mut reader, &mut run_lengths, "rle run lengths")?;
    if reader.remaining_bytes() != 0 {
        return Err(CodecError::corrupt("rle payload", format!("{} trailing bytes", reader.remaining_bytes())));
    }
    let mut total: u64 = 0;
    for length in &run_lengths {
        if *length < 1 {
            return Err(CodecError::corrupt("rle run length", format!("{length}")));
        }
        total = total.saturating_add(*length as u64);
    }
    if total != value_count as u64 {
        return Err(CodecError::corrupt("rle run lengths", format!("sum to {total}, expected {value_count}")));
    }
    Ok((run_values, run_lengths))
}

impl IntegerCodec for Rle {
    const ID: CodecId = CodecId::Rle;

    fn analyze(input: &IntegerInput<'_>) -> Option<usize> {
        if input.values.len() > u32::MAX as usize {
            return None;
        }
        let (run_values, run_lengths) = runs(input.values);
        Some(4 + bitpack::length_prefixed_bytes(&run_values) + bitpack::length_prefixed_bytes(&run_lengths))
    }

    fn compress(input: &IntegerInput<'_>, out: &mut Vec<u8>) {
        let (run_values, run_lengths) = runs(input.values);
        out.extend_from_slice(&(run_values.len() as u32).to_le_bytes());
        bitpack::encode_length_prefixed(&run_values, out);
        bitpack::encode_length_prefixed(&run_lengths, out);
    }

    fn decompress<T: IntegerNative>(payload: &[u8], out: &mut [T]) -> Result<(), CodecError> {
        let (run_values, run_lengths) = read_runs(payload, out.len())?;
        let mut position = 0usize;
        for (value, length) in run_values.iter().zip(&run_lengths) {
            // Lengths were checked to sum to out.len(), so this slice is in bounds.
            let end = position + *length as usize;
            out[position..end].fill(T::from_i64(*value));
            position = end;
        }
        debug_assert_eq!(position, out.len());
        Ok(())
    }

    fn fetch(payload: &[u8], value_count: usize, row: usize) -> Result<i64, CodecError> {
        if row >= value_count {
            return Err(CodecError::corrupt("rle fetch", format!("row {row} of {value_count} values")));
        }
        let (run_values, run_lengths) = read_runs(payload, value_count)?;
        let mut end = 0usize;
        for (value, length) in run_values.iter().zip(&run_lengths) {
            end += *length as usize;
            if row < end {
                return Ok(*value);
            }
        }
        unreachable!("run lengths sum to value_count > row")
    }
}
