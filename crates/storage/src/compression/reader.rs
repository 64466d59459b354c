//! A bounds-checked little-endian cursor over bytes read from disk: every length and
//! offset a decoder follows goes through here, so bad bytes yield `Truncated`, never a panic.

use super::error::CodecError;

#[derive(Debug, Clone)]
pub struct ByteReader<'a> {
    bytes: &'a [u8],
    position_bytes: usize,
}

impl<'a> ByteReader<'a> {
    pub fn new(bytes: &'a [u8]) -> Self {
        ByteReader { bytes, position_bytes: 0 }
    }

    pub fn remaining_bytes(&self) -> usize {
        debug_assert!(self.position_bytes <= self.bytes.len());
        self.bytes.len() - self.position_bytes
    }

    /// The next `length_bytes` bytes, or `Truncated` naming `what`.
    pub fn take(&mut self, length_bytes: usize, what: &'static str) -> Result<&'a [u8], CodecError> {
        let available_bytes = self.remaining_bytes();
        if length_bytes > available_bytes {
            return Err(CodecError::Truncated {
                what,
                needed_bytes: length_bytes as u64,
                available_bytes: available_bytes as u64,
            });
        }
        let start = self.position_bytes;
        self.position_bytes += length_bytes;
        Ok(&self.bytes[start..start + length_bytes])
    }

    /// Like `take`, with a length read from disk as u64 (checked against usize and what is left).
    pub fn take_u64_length(&mut self, length_bytes: u64, what: &'static str) -> Result<&'a [u8], CodecError> {
        let available_bytes = self.remaining_bytes();
        match usize::try_from(length_bytes) {
            Ok(length) => self.take(length, what),
            Err(_) => Err(CodecError::Truncated { what, needed_bytes: length_bytes, available_bytes: available_bytes as u64 }),
        }
    }

    /// Everything not read yet.
    pub fn rest(&mut self) -> &'a [u8] {
        let rest = &self.bytes[self.position_bytes..];
        self.position_bytes = self.bytes.len();
        rest
    }

    pub fn u8(&mut self, what: &'static str) -> Result<u8, CodecError> {
        Ok(self.array::<1>(what)?[0])
    }

    pub fn u32_le(&mut self, what: &'static str) -> Result<u32, CodecError> {
        Ok(u32::from_le_bytes(self.array::<4>(what)?))
    }

    pub fn u64_le(&mut self, what: &'static str) -> Result<u64, CodecError> {
        Ok(u64::from_le_bytes(self.array::<8>(what)?))
    }

    pub fn i64_le(&mut self, what: &'static str) -> Result<i64, CodecError> {
        Ok(i64::from_le_bytes(self.array::<8>(what)?))
    }

    fn array<const N: usize>(&mut self, what: &'static str) -> Result<[u8; N], CodecError> {
        let bytes = self.take(N, what)?;
        let mut array = [0u8; N];
        array.copy_from_slice(bytes);
        Ok(array)
    }
}

/// Reads a u64 little-endian field at a fixed offset of a header already length-checked.
pub fn u64_at(bytes: &[u8], offset_bytes: usize) -> u64 {
    let mut array = [0u8; 8];
    array.copy_from_slice(&bytes[offset_bytes..offset_bytes + 8]);
    u64::from_le_bytes(array)
}

/// Reads a u32 little-endian field at a fixed offset of a header already length-checked.
pub fn u32_at(bytes: &[u8], offset_bytes: usize) -> u32 {
    let mut array = [0u8; 4];
    array.copy_from_slice(&bytes[offset_bytes..offset_bytes + 4]);
    u32::from_le_bytes(array)
}

/// Reads a u16 little-endian field at a fixed offset of a header already length-checked.
pub fn u16_at(bytes: &[u8], offset_bytes: usize) -> u16 {
    let mut array = [0u8; 2];
    array.copy_from_slice(&bytes[offset_bytes..offset_bytes + 2]);
    u16::from_le_bytes(array)
}
