//! "Analyze, then compress": every candidate codec scores the segment by the bytes it
//! would write; the smallest wins, ties go to the codec cheapest to decode. A forced codec
//! (tests, experiments) skips the contest but must still be able to represent the values.

use super::codec::CodecId;
use super::error::CodecError;

/// One candidate's verdict: the payload size it would produce, or None if it cannot encode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CodecScore {
    pub codec: CodecId,
    pub encoded_bytes: Option<usize>,
}

/// Picks the winner among `scores`, or checks that `forced` is among the able candidates.
pub fn choose_codec(scores: &[CodecScore], forced: Option<CodecId>, kind: &'static str) -> Result<CodecId, CodecError> {
    debug_assert!(!scores.is_empty());
    if let Some(forced_codec) = forced {
        return match scores.iter().find(|score| score.codec == forced_codec) {
            Some(CodecScore { encoded_bytes: Some(_), .. }) => Ok(forced_codec),
            Some(CodecScore { encoded_bytes: None, .. }) => {
                Err(CodecError::NotApplicable { codec: forced_codec, kind, detail: " (these values)" })
            }
            None => Err(CodecError::NotApplicable { codec: forced_codec, kind, detail: "" }),
        };
    }
    scores
        .iter()
        .filter_map(|score| score.encoded_bytes.map(|bytes| (bytes, score.codec.decode_cost_rank(), score.codec)))
        .min()
        .map(|(_, _, codec)| codec)
        .ok_or(CodecError::NotApplicable { codec: scores[0].codec, kind, detail: " (no candidate applies)" })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compression_analyze_smallest_wins_ties_go_to_cheapest_decode() {
        let scores = [
            CodecScore { codec: CodecId::Dictionary, encoded_bytes: Some(100) },
            CodecScore { codec: CodecId::Bitpack, encoded_bytes: Some(100) },
            CodecScore { codec: CodecId::Plain, encoded_bytes: Some(800) },
            CodecScore { codec: CodecId::Constant, encoded_bytes: None },
        ];
        assert_eq!(choose_codec(&scores, None, "int").unwrap(), CodecId::Bitpack);
        assert_eq!(choose_codec(&scores, Some(CodecId::Plain), "int").unwrap(), CodecId::Plain);
        assert!(choose_codec(&scores, Some(CodecId::Constant), "int").is_err());
        assert!(choose_codec(&scores, Some(CodecId::Bitmap), "int").is_err());
    }
}
