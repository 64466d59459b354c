//! `bitmap` for booleans: ceil(n / 8) bytes, value i at bit i % 8 of byte i / 8 (LSB first,
//! Arrow's layout, so decoding is one copy). The validity bitmap of every segment uses the
//! same layout (see `validity.rs`).

use arrow::buffer::{BooleanBuffer, Buffer};

use super::codec::CodecId;
use super::error::CodecError;
use super::reader::ByteReader;

pub const ID: CodecId = CodecId::Bitmap;

pub fn encoded_bytes(value_count: usize) -> usize {
    value_count.div_ceil(8)
}

/// Appends the bits of `values` (offset handled: the buffer may be a slice).
pub fn compress(values: &BooleanBuffer, out: &mut Vec<u8>) {
    let sliced = values.sliced();
    let bytes = &sliced.as_slice()[..encoded_bytes(values.len())];
    let start = out.len();
    out.extend_from_slice(bytes);
    // Bits past the last value are zeroed so equal values always encode to equal bytes.
    let tail_bits = values.len() % 8;
    if tail_bits != 0 {
        if let Some(last) = out[start..].last_mut() {
            *last &= (1u8 << tail_bits) - 1;
        }
    }
}

pub fn decompress(payload: &[u8], value_count: usize, what: &'static str) -> Result<BooleanBuffer, CodecError> {
    let mut reader = ByteReader::new(payload);
    let bytes = reader.take(encoded_bytes(value_count), what)?;
    if reader.remaining_bytes() != 0 {
        return Err(CodecError::corrupt(what, format!("{} trailing bytes", reader.remaining_bytes())));
    }
    Ok(BooleanBuffer::new(Buffer::from(bytes), 0, value_count))
}
