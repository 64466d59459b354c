//! `plain` for f64: n × 8 bytes, IEEE 754 bits little-endian. (An ALP-style codec would go
//! beside this file; TPC-H money columns are decimals, so f64 is rare in our tables.)

use super::codec::CodecId;
use super::error::CodecError;
use super::reader::ByteReader;

pub const ID: CodecId = CodecId::Plain;

pub fn encoded_bytes(value_count: usize) -> usize {
    value_count * 8
}

pub fn compress(values: &[f64], out: &mut Vec<u8>) {
    out.reserve(encoded_bytes(values.len()));
    for value in values {
        out.extend_from_slice(&value.to_le_bytes());
    }
}

pub fn decompress(payload: &[u8], out: &mut [f64]) -> Result<(), CodecError> {
    let mut reader = ByteReader::new(payload);
    let bytes = reader.take(encoded_bytes(out.len()), "f64 values")?;
    if reader.remaining_bytes() != 0 {
        return Err(CodecError::corrupt("f64 plain payload", format!("{} trailing bytes", reader.remaining_bytes())));
    }
    for (value, chunk) in out.iter_mut().zip(bytes.chunks_exact(8)) {
        let mut array = [0u8; 8];
        array.copy_from_slice(chunk);
        *value = f64::from_le_bytes(array);
    }
    Ok(())
}
