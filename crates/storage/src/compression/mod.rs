//! Codecs, one file each, behind one trait (DuckDB's storage/compression).
//!
//! Per segment the column store calls `encode_integers` / `encode_strings` (analyze every
//! candidate, keep the smallest, ties to the cheapest decode) or the single codec of f64
//! (`float_plain`) and booleans (`boolean_bitmap`, also the layout of every validity bitmap). Decoders take bytes from disk: every
//! length is bounds-checked (`reader.rs`) and a bad payload is an error, never a panic.

pub mod analyze;
pub mod binary_plain;
pub mod bitpack;
pub mod bits;
pub mod boolean_bitmap;
pub mod codec;
pub mod constant;
pub mod cpu;
pub mod dictionary;
pub mod error;
pub mod fastlanes;
pub mod float_plain;
pub mod integers;
pub mod plain;
pub mod reader;
pub mod rle;
pub mod string_dictionary;
pub mod string_plain;
pub mod strings;
pub mod wide_plain;
pub mod vectors;

pub use analyze::{choose_codec, CodecScore};
pub use codec::{CodecId, IntegerCodec, IntegerInput, IntegerNative};
pub use error::CodecError;
pub use integers::{analyze_integers, decode_integers, encode_integers, fetch_integer};
pub use vectors::{IntegerVectors, Vector, VECTOR_VALUES};
pub use strings::{analyze_strings, decode_strings, encode_strings, StringInput, STRING_BYTES_MAX};
