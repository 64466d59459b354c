//! Any bytes → the deleted rows file decoder (crates/storage `deleted_rows.rs`) returns
//! Ok or Err, never panics; what it accepts is strictly ascending and encodes back to the
//! same bytes (so a damaged file can never read as another set of rows).
#![no_main]

use flashscan_storage::deleted_rows::{decode_deleted_rows, encode_deleted_rows};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(ids) = decode_deleted_rows(data) {
        assert!(ids.windows(2).all(|w| w[0] < w[1]), "accepted ids are strictly ascending");
        assert_eq!(encode_deleted_rows(&ids), data, "accepted bytes are exactly the encoding of what they decode to");
    }
});
