//! Property tests: every codec decodes what it encoded, for every value shape we can think
//! of (extremes, negatives, all widths 0..=64, runs, few distinct values, empty, single).

use arrow::array::Array;
use flashscan_storage::compression::{
    analyze_integers, decode_integers, decode_strings, encode_integers, encode_strings, fetch_integer, CodecId,
    IntegerInput, StringInput,
};
use proptest::prelude::*;

const INTEGER_CODECS: [CodecId; 6] = [CodecId::Constant, CodecId::Plain, CodecId::Bitpack, CodecId::FastLanes, CodecId::Rle, CodecId::Dictionary];

/// Encodes with `codec` (skipping if it cannot apply) and checks decode, i32/i64/i128
/// outputs, and fetch of a few rows.
fn check_integer_codec(values: &[i64], width_bytes: usize, codec: CodecId) {
    let input = IntegerInput::new(values, width_bytes);
    let applicable = analyze_integers(&input).iter().any(|score| score.codec == codec && score.encoded_bytes.is_some());
    let mut payload = Vec::new();
    let result = encode_integers(&input, Some(codec), &mut payload);
    if !applicable {
        assert!(result.is_err(), "{codec} accepted values it scored as not applicable");
        return;
    }
    assert_eq!(result.unwrap(), codec);
    let mut decoded = vec![0i64; values.len()];
    decode_integers(codec, &payload, &mut decoded).unwrap();
    assert_eq!(decoded, values, "{codec} i64");
    let mut decoded_i128 = vec![0i128; values.len()];
    decode_integers(codec, &payload, &mut decoded_i128).unwrap();
    assert!(decoded_i128.iter().zip(values).all(|(a, b)| *a == i128::from(*b)), "{codec} i128");
    if width_bytes == 4 {
        let mut decoded_i32 = vec![0i32; values.len()];
        decode_integers(codec, &payload, &mut decoded_i32).unwrap();
        assert!(decoded_i32.iter().zip(values).all(|(a, b)| i64::from(*a) == *b), "{codec} i32");
    }
    for row in [0, values.len() / 2, values.len().saturating_sub(1)] {
        if row < values.len() {
            assert_eq!(fetch_integer(codec, &payload, values.len(), row).unwrap(), values[row], "{codec} fetch {row}");
        }
    }
    // The score is the real size (bitpack, plain, constant, rle) or an upper bound (dictionary).
    let score = analyze_integers(&input).into_iter().find(|score| score.codec == codec).unwrap().encoded_bytes.unwrap();
    assert!(payload.len() <= score, "{codec}: {} bytes > score {score}", payload.len());
}

fn check_all_integer_codecs(values: &[i64], width_bytes: usize) {
    for codec in INTEGER_CODECS {
        check_integer_codec(values, width_bytes, codec);
    }
    // And whatever analysis picks.
    let input = IntegerInput::new(values, width_bytes);
    let mut payload = Vec::new();
    let codec = encode_integers(&input, None, &mut payload).unwrap();
    let mut decoded = vec![0i64; values.len()];
    decode_integers(codec, &payload, &mut decoded).unwrap();
    assert_eq!(decoded, values);
}

/// Values of a given bit width around a base, so every width 0..=64 gets exercised.
fn values_of_width() -> impl Strategy<Value = Vec<i64>> {
    (0u32..=64, any::<i64>(), 0usize..3000).prop_flat_map(|(width_bits, base, length)| {
        let mask = if width_bits == 64 { u64::MAX } else { (1u64 << width_bits) - 1 };
        prop::collection::vec(any::<u64>(), length)
            .prop_map(move |raw| raw.into_iter().map(|value| base.wrapping_add((value & mask) as i64)).collect())
    })
}

fn runs() -> impl Strategy<Value = Vec<i64>> {
    prop::collection::vec((any::<i64>(), 1usize..300), 0..40)
        .prop_map(|runs| runs.into_iter().flat_map(|(value, length)| std::iter::repeat_n(value, length)).collect())
}

fn few_distinct() -> impl Strategy<Value = Vec<i64>> {
    (prop::collection::vec(any::<i64>(), 1..20), prop::collection::vec(any::<prop::sample::Index>(), 0..3000))
        .prop_map(|(palette, picks)| picks.into_iter().map(|pick| palette[pick.index(palette.len())]).collect())
}

fn extremes() -> impl Strategy<Value = Vec<i64>> {
    prop::collection::vec(prop_oneof![Just(i64::MIN), Just(i64::MAX), Just(0i64), Just(-1i64), any::<i64>()], 0..2100)
}

fn config() -> ProptestConfig {
    ProptestConfig { cases: 64, ..ProptestConfig::default() }
}

/// One property test per strategy of BIGINT columns: every integer codec round-trips them.
macro_rules! bigint_codec_properties {
    ($($name:ident: $strategy:expr;)*) => {
        proptest! {
            #![proptest_config(config())]
            $(
                #[test]
                fn $name(values in $strategy) {
                    check_all_integer_codecs(&values, 8);
                }
            )*
        }
    };
}

bigint_codec_properties! {
    codec_integers_every_width_round_trip: values_of_width();
    codec_integers_runs_round_trip: runs();
    codec_integers_few_distinct_round_trip: few_distinct();
    codec_integers_extremes_round_trip: extremes();
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn codec_i32_round_trip(values in prop::collection::vec(any::<i32>(), 0..3000)) {
        let values: Vec<i64> = values.into_iter().map(i64::from).collect();
        check_all_integer_codecs(&values, 4);
    }

    #[test]
    fn codec_strings_round_trip(values in prop::collection::vec(prop_oneof!["", "[a-c]{1,3}", "\\PC{0,40}"], 0..1500)) {
        check_strings(&values);
    }

    #[test]
    fn codec_strings_low_cardinality_round_trip(
        palette in prop::collection::vec("\\PC{0,12}", 1..8),
        picks in prop::collection::vec(any::<prop::sample::Index>(), 0..3000),
    ) {
        let values: Vec<String> = picks.into_iter().map(|pick| palette[pick.index(palette.len())].clone()).collect();
        check_strings(&values);
    }
}

fn check_strings(values: &[String]) {
    let refs: Vec<&str> = values.iter().map(String::as_str).collect();
    let input = StringInput { values: &refs };
    for codec in [None, Some(CodecId::Plain), Some(CodecId::Dictionary)] {
        let mut payload = Vec::new();
        let used = encode_strings(&input, codec, &mut payload).unwrap();
        if let Some(forced) = codec {
            assert_eq!(used, forced);
        }
        let decoded = decode_strings(used, &payload, values.len(), None).unwrap();
        assert_eq!(decoded.len(), values.len());
        for (index, value) in values.iter().enumerate() {
            assert_eq!(decoded.value(index), value, "{used} row {index}");
        }
    }
}

#[test]
fn codec_empty_and_single_value_segments() {
    for values in [vec![], vec![42i64], vec![i64::MIN], vec![i64::MAX], vec![i64::MIN, i64::MAX]] {
        check_all_integer_codecs(&values, 8);
    }
    check_strings(&[]);
    check_strings(&[String::new()]);
}

#[test]
fn codec_maximum_length_strings() {
    // A few strings of 4 MiB each, and one empty: lengths need 23 bits.
    let big = "x".repeat(4 << 20);
    let values = vec![big.clone(), String::new(), "é".repeat(1 << 20), big];
    check_strings(&values);
}

#[test]
fn codec_forced_codec_is_used_and_inapplicable_is_an_error() {
    let values: Vec<i64> = (0..5000).map(|i| i % 7).collect();
    for codec in [CodecId::Plain, CodecId::Bitpack, CodecId::Rle, CodecId::Dictionary] {
        let mut payload = Vec::new();
        assert_eq!(encode_integers(&IntegerInput::new(&values, 8), Some(codec), &mut payload).unwrap(), codec);
    }
    let mut payload = Vec::new();
    assert!(encode_integers(&IntegerInput::new(&values, 8), Some(CodecId::Constant), &mut payload).is_err());
    assert!(encode_integers(&IntegerInput::new(&values, 8), Some(CodecId::Bitmap), &mut payload).is_err());
}
