//! `plain` for integers: every value at the column's native width, little-endian.
//!
//! | offset | size  | field                                   |
//! |--------|-------|-----------------------------------------|
//! | 0      | 1     | width_bytes u8: 4 (Int32, Date32) or 8  |
//! | 1      | w·n   | values, little-endian two's complement  |

use super::codec::{CodecId, IntegerCodec, IntegerInput, IntegerNative};
use super::error::CodecError;
use super::reader::ByteReader;

pub struct Plain;

fn read_width(reader: &mut ByteReader<'_>) -> Result<usize, CodecError> {
    match reader.u8("plain width")? {
        4 => Ok(4),
        8 => Ok(8),
        other => Err(CodecError::corrupt("plain width", format!("{other} bytes, expected 4 or 8"))),
    }
}

impl IntegerCodec for Plain {
    const ID: CodecId = CodecId::Plain;

    fn analyze(input: &IntegerInput<'_>) -> Option<usize> {
        Some(1 + input.values.len() * input.native_width_bytes)
    }

    fn compress(input: &IntegerInput<'_>, out: &mut Vec<u8>) {
        out.push(input.native_width_bytes as u8);
        if input.native_width_bytes == 4 {
            for value in input.values {
                debug_assert!(i32::try_from(*value).is_ok());
                out.extend_from_slice(&(*value as i32).to_le_bytes());
            }
        } else {
            for value in input.values {
                out.extend_from_slice(&value.to_le_bytes());
            }
        }
    }

    fn decompress<T: IntegerNative>(payload: &[u8], out: &mut [T]) -> Result<(), CodecError> {
        let mut reader = ByteReader::new(payload);
        let width_bytes = read_width(&mut reader)?;
        let values = reader.take(out.len().saturating_mul(width_bytes), "plain values")?;
        if reader.remaining_bytes() != 0 {
            return Err(CodecError::corrupt("plain payload", format!("{} trailing bytes", reader.remaining_bytes())));
        }
        // Fixed-width chunks: the compiler turns these loops into vector loads and widenings.
        if width_bytes == 4 {
            for (value, chunk) in out.iter_mut().zip(values.chunks_exact(4)) {
                let mut array = [0u8; 4];
                array.copy_from_slice(chunk);
                *value = T::from_i64(i64::from(i32::from_le_bytes(array)));
            }
        } else {
            for (value, chunk) in out.iter_mut().zip(values.chunks_exact(8)) {
                let mut array = [0u8; 8];
                array.copy_from_slice(chunk);
                *value = T::from_i64(i64::from_le_bytes(array));
            }
        }
        Ok(())
    }

    fn fetch(payload: &[u8], value_count: usize, row: usize) -> Result<i64, CodecError> {
        if row >= value_count {
            return Err(CodecError::corrupt("plain fetch", format!("row {row} of {value_count} values")));
        }
        let mut reader = ByteReader::new(payload);
        let width_bytes = read_width(&mut reader)?;
        reader.take(row * width_bytes, "plain values")?;
        let bytes = reader.take(width_bytes, "plain value")?;
        let mut array = [0u8; 8];
        array[..width_bytes].copy_from_slice(bytes);
        Ok(if width_bytes == 4 { i64::from(i32::from_le_bytes([array[0], array[1], array[2], array[3]])) } else { i64::from_le_bytes(array) })
    }
}
