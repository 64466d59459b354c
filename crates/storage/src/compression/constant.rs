//! `constant`: every value equal; the payload is that value once (i64 little-endian, 8 bytes).

use super::codec::{CodecId, IntegerCodec, IntegerInput, IntegerNative};
use super::error::CodecError;
use super::reader::ByteReader;

pub struct Constant;

pub const PAYLOAD_BYTES: usize = 8;

fn read_value(payload: &[u8]) -> Result<i64, CodecError> {
    let mut reader = ByteReader::new(payload);
    let value = reader.i64_le("constant value")?;
    if reader.remaining_bytes() != 0 {
        return Err(CodecError::corrupt("constant payload", format!("{} trailing bytes", reader.remaining_bytes())));
    }
    Ok(value)
}

impl IntegerCodec for Constant {
    const ID: CodecId = CodecId::Constant;

    fn analyze(input: &IntegerInput<'_>) -> Option<usize> {
        (input.min == input.max).then_some(PAYLOAD_BYTES)
    }

    fn compress(input: &IntegerInput<'_>, out: &mut Vec<u8>) {
        debug_assert_eq!(input.min, input.max);
        out.extend_from_slice(&input.min.to_le_bytes());
    }

    fn decompress<T: IntegerNative>(payload: &[u8], out: &mut [T]) -> Result<(), CodecError> {
        out.fill(T::from_i64(read_value(payload)?));
        Ok(())
    }

    fn fetch(payload: &[u8], value_count: usize, row: usize) -> Result<i64, CodecError> {
        if row >= value_count {
            return Err(CodecError::corrupt("constant fetch", format!("row {row} of {value_count} values")));
        }
        read_value(payload)
    }
}
