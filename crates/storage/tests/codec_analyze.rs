//! Analysis picks the codec the data calls for ("analyze, then compress").

use flashscan_storage::compression::{analyze_integers, analyze_strings, encode_integers, encode_strings, CodecId, IntegerInput, StringInput};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

fn chosen(values: &[i64]) -> CodecId {
    let mut payload = Vec::new();
    encode_integers(&IntegerInput::new(values, 8), None, &mut payload).unwrap()
}

#[test]
fn codec_analyze_picks_constant_for_one_value() {
    assert_eq!(chosen(&vec![123_456_789i64; 10_000]), CodecId::Constant);
}

#[test]
fn codec_analyze_picks_rle_for_long_runs() {
    // Ten runs of 10,000 values spread over the whole i64 range: bitpack needs ~64 bits per
    // value, dictionary ~4, RLE ten runs.
    let values: Vec<i64> =
        (0..100_000).map(|i| ((i / 10_000) as i64).wrapping_mul(0x1234_5678_9ABC_DEF)).collect();
    assert_eq!(chosen(&values), CodecId::Rle);
}

#[test]
fn codec_analyze_picks_dictionary_for_low_cardinality_wide_values() {
    let mut rng = SmallRng::seed_from_u64(7);
    let palette = [i64::MIN, -5, 1_000_000_000_000, i64::MAX, 17];
    let values: Vec<i64> = (0..100_000).map(|_| palette[rng.gen_range(0..palette.len())]).collect();
    assert_eq!(chosen(&values), CodecId::Dictionary);
}

#[test]
fn codec_analyze_picks_bitpack_for_small_ranges() {
    let mut rng = SmallRng::seed_from_u64(8);
    let values: Vec<i64> = (0..100_000).map(|_| 1_000_000 + rng.gen_range(0..100)).collect();
    assert_eq!(chosen(&values), CodecId::Bitpack);
    // And the win is real: 7 bits per value instead of 64.
    let scores = analyze_integers(&IntegerInput::new(&values, 8));
    let bitpack = scores.iter().find(|score| score.codec == CodecId::Bitpack).unwrap().encoded_bytes.unwrap();
    assert!(bitpack < values.len(), "{bitpack} bytes for {} values", values.len());
}

#[test]
fn codec_analyze_picks_plain_for_random_i64() {
    let mut rng = SmallRng::seed_from_u64(9);
    let values: Vec<i64> = (0..10_000).map(|_| rng.gen()).collect();
    // Random 64-bit values: bitpack ties plain on data and loses on block headers.
    assert_eq!(chosen(&values), CodecId::Plain);
}

#[test]
fn codec_analyze_strings_dictionary_for_low_cardinality_plain_for_unique() {
    let modes = ["AIR", "FOB", "MAIL", "RAIL", "REG AIR", "SHIP", "TRUCK"];
    let values: Vec<&str> = (0..10_000).map(|i| modes[i % modes.len()]).collect();
    let mut payload = Vec::new();
    assert_eq!(encode_strings(&StringInput { values: &values }, None, &mut payload).unwrap(), CodecId::Dictionary);

    let unique: Vec<String> = (0..10_000).map(|i| format!("comment number {i}")).collect();
    let refs: Vec<&str> = unique.iter().map(String::as_str).collect();
    let scores = analyze_strings(&StringInput { values: &refs });
    assert_eq!(scores.len(), 2);
    let mut payload = Vec::new();
    assert_eq!(encode_strings(&StringInput { values: &refs }, None, &mut payload).unwrap(), CodecId::Plain);
}
