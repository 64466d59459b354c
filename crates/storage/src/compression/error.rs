//! Errors of the codecs. They carry no file or column: the column store adds that context,
//! because a codec only ever sees one payload.

use super::codec::CodecId;

/// What went wrong while decoding (or, for `NotApplicable`, encoding) one codec payload.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CodecError {
    /// The payload ends before a field the format says is there.
    #[error("truncated {what}: needs {needed_bytes} bytes, {available_bytes} available")]
    Truncated { what: &'static str, needed_bytes: u64, available_bytes: u64 },
    /// A field has a value the format forbids (bad width, run lengths not summing up, …).
    #[error("corrupt {what}: {detail}")]
    Corrupt { what: &'static str, detail: String },
    /// The codec id byte names no codec we know.
    #[error("unknown codec id {codec_id}")]
    UnknownCodec { codec_id: u8 },
    /// A codec was forced (or read from disk) for values or a type it cannot represent.
    #[error("codec {codec} cannot encode {kind} values{detail}")]
    NotApplicable { codec: CodecId, kind: &'static str, detail: &'static str },
    /// A limit of the format would be exceeded (sizes are bounded so decoding never
    /// allocates without limit).
    #[error("{what} is {value}, over the limit of {limit}")]
    LimitExceeded { what: &'static str, value: u64, limit: u64 },
}

impl CodecError {
    pub(crate) fn corrupt(what: &'static str, detail: impl Into<String>) -> Self {
        CodecError::Corrupt { what, detail: detail.into() }
    }
}
