//! Property tests of the log's bytes: records round trip; a log of arbitrary records,
//! spanning blocks and segments, flushed at arbitrary points, scans back exactly; a torn
//! last flush loses only that flush's records, whole; damage before a later flush is refused.

use flashscan_wal::block::{inspect, BlockState};
use flashscan_wal::limits::{BLOCK_SIZE_BYTES, SEGMENT_SIZE_BYTES_MIN};
use flashscan_wal::record::{decode, kind};
use flashscan_wal::*;
use proptest::prelude::*;

const DB: u128 = 0x5eed_0000_0000_0000_0000_0000_0000_0001;

fn arb_record() -> impl Strategy<Value = Record> {
    prop_oneof![
        4 => (any::<u64>(), any::<u32>(), any::<u32>(), any::<u64>(), prop::collection::vec(any::<u8>(), 0..9000)).prop_map(
            |(t, table_id, partition, page_no, row)| Record::Insert(InsertRow { txn: TxnId(t), table_id, partition, page_no, row })
        ),
        2 => any::<u64>().prop_map(|t| Record::Commit { txn: TxnId(t) }),
        1 => any::<u64>().prop_map(|t| Record::Abort { txn: TxnId(t) }),
        1 => Just(Record::CheckpointBegin),
        1 => any::<u64>().prop_map(|l| Record::CheckpointEnd { redo: Lsn(l) }),
        1 => (6u8..=255, prop::collection::vec(any::<u8>(), 0..300)).prop_map(|(kind, body)| Record::Other { kind, body }),
    ]
}

/// Records, each followed (or not) by a flush.
fn arb_log() -> impl Strategy<Value = (Vec<(Record, bool)>, u64)> {
    (prop::collection::vec((arb_record(), any::<bool>()), 1..40), 4u64..12).prop_map(|(r, blocks)| (r, blocks * BLOCK_SIZE_BYTES as u64))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn record_round_trips(r in arb_record()) {
        let bytes = r.encode();
        prop_assert_eq!(bytes.len(), r.encoded_len());
        prop_assert_eq!(decode(&bytes).unwrap(), r);
    }

    #[test]
    fn truncated_or_extended_record_is_an_error(r in arb_record(), cut in 1usize..8) {
        let bytes = r.encode();
        prop_assert!(decode(&bytes[..bytes.len().saturating_sub(cut)]).is_err());
        let mut longer = bytes.clone();
        longer.push(0);
        prop_assert!(decode(&longer).is_err());
    }

    #[test]
    fn log_round_trips((log, seg) in arb_log()) {
        prop_assume!(seg >= SEGMENT_SIZE_BYTES_MIN);
        let mut image = LogImage::new(seg, DB, 1).unwrap();
        let mut expected = Vec::new();
        for (r, flush) in &log {
            let a = image.append(r).unwrap();
            expected.push((a, r.clone()));
            if *flush { image.flush(); }
        }
        let end = image.flush();
        let scan = scan(&mut image.source, seg, DB, FIRST_RECORD_LSN).unwrap();
        prop_assert_eq!(scan.end.clone(), LogEnd::Clean);
        prop_assert_eq!(scan.end_lsn, end);
        prop_assert_eq!(scan.records.len(), expected.len());
        for (got, (a, r)) in scan.records.iter().zip(&expected) {
            prop_assert_eq!(got.lsn, a.lsn);
            prop_assert_eq!(got.end, a.end);
            prop_assert_eq!(&got.record, r);
        }
        // Every block of every segment is valid, zero, or a segment header.
        for (no, img) in &image.source.segments {
            for (i, b) in img.chunks_exact(BLOCK_SIZE_BYTES).enumerate().skip(1) {
                prop_assert!(!matches!(inspect(b), BlockState::Bad(_)), "segment {} block {}", no, i);
            }
        }
    }

    /// A power loss during the last flush: any of its blocks torn. The scan keeps every
    /// record of the earlier flushes, and of the last flush only whole records.
    #[test]
    fn torn_last_flush_keeps_earlier_flushes((log, seg) in arb_log(), tear_seed in any::<u64>()) {
        prop_assume!(seg >= SEGMENT_SIZE_BYTES_MIN);
        let mut image = LogImage::new(seg, DB, 1).unwrap();
        let mut expected = Vec::new();
        for (r, _) in &log[..log.len() - 1] {
            expected.push((image.append(r).unwrap(), r.clone()));
        }
        let durable = image.flush();
        let before = image.source.segments.clone();
        let last = log.last().unwrap().0.clone();
        let a_last = image.append(&last).unwrap();
        image.flush();
        // Tear: each block that changed in the last flush is kept, zeroed, or has a byte flipped.
        let mut s = tear_seed;
        for (no, img) in image.source.segments.iter_mut() {
            let old = before.get(no);
            for (i, b) in img.chunks_exact_mut(BLOCK_SIZE_BYTES).enumerate().skip(1) {
                let prev = old.map(|o| &o[i * BLOCK_SIZE_BYTES..(i + 1) * BLOCK_SIZE_BYTES]);
                if prev == Some(&*b) || (prev.is_none() && b.iter().all(|x| *x == 0)) { continue; }
                s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                match (s >> 33) % 3 {
                    0 => {}
                    1 => b.fill(0),
                    _ => { let at = (s >> 40) as usize % BLOCK_SIZE_BYTES; b[at] ^= 0x5a; }
                }
            }
        }
        let got = scan(&mut image.source, seg, DB, FIRST_RECORD_LSN).unwrap();
        prop_assert!(got.end_lsn >= durable);
        let n = expected.len();
        prop_assert!(got.records.len() == n || got.records.len() == n + 1);
        for (g, (a, r)) in got.records.iter().zip(&expected) {
            prop_assert_eq!(g.lsn, a.lsn);
            prop_assert_eq!(&g.record, r);
        }
        if got.records.len() == n + 1 {
            prop_assert_eq!(got.records[n].lsn, a_last.lsn);
            prop_assert_eq!(&got.records[n].record, &last);
        }
    }

    /// A damaged block followed by blocks of a later flush: refused, never a shorter log.
    #[test]
    fn damage_before_a_later_flush_is_refused(rows in prop::collection::vec(0usize..5000, 2..20), victim in any::<prop::sample::Index>(), zero in any::<bool>()) {
        let seg = 64 * 1024;
        let mut image = LogImage::new(seg, DB, 1).unwrap();
        let mut flush_blocks = Vec::new();
        for (i, len) in rows.iter().enumerate() {
            let a = image.append(&Record::Insert(InsertRow { txn: TxnId(i as u64), table_id: 1, partition: 0, page_no: 0, row: vec![7; *len] })).unwrap();
            image.flush();
            flush_blocks.push(a.lsn.0 - a.lsn.0 % BLOCK_SIZE_BYTES as u64);
        }
        // A block of any flush but the last.
        let at = flush_blocks[victim.index(flush_blocks.len() - 1)];
        let (no, off) = (at / seg, (at % seg) as usize);
        let img = image.source.segments.get_mut(&no).unwrap();
        if zero { img[off..off + BLOCK_SIZE_BYTES].fill(0) } else { img[off + 100] ^= 1 }
        let err = scan(&mut image.source, seg, DB, FIRST_RECORD_LSN).unwrap_err();
        let is_corrupt = matches!(err, WalError::Corrupt { .. });
        prop_assert!(is_corrupt, "{}", err);
        prop_assert!(err.to_string().contains("later flush"), "{}", err);
    }
}

#[test]
fn unknown_kinds_are_kept_and_redo_refuses_them() {
    let mut image = LogImage::new(SEGMENT_SIZE_BYTES_MIN, DB, 1).unwrap();
    image.append(&Record::Other { kind: kind::UPDATE_RESERVED, body: vec![1, 2, 3] }).unwrap();
    image.flush();
    let s = scan(&mut image.source, SEGMENT_SIZE_BYTES_MIN, DB, FIRST_RECORD_LSN).unwrap();
    assert_eq!(s.records[0].record, Record::Other { kind: kind::UPDATE_RESERVED, body: vec![1, 2, 3] });
    let err = s.redo().next().unwrap().unwrap_err();
    assert!(err.to_string().contains("kind 6"), "{err}");
    assert!(Record::Other { kind: kind::COMMIT, body: vec![] }.validate_for_append().is_err());
}

#[test]
fn redo_skips_uncommitted_and_aborted() {
    let mut image = LogImage::new(SEGMENT_SIZE_BYTES_MIN * 4, DB, 1).unwrap();
    let ins = |t: u64| Record::Insert(InsertRow { txn: TxnId(t), table_id: 1, partition: 0, page_no: t, row: vec![t as u8; 10] });
    for r in [ins(1), ins(2), ins(3), Record::Commit { txn: TxnId(2) }, Record::Abort { txn: TxnId(3) }, ins(1)] {
        image.append(&r).unwrap();
    }
    image.flush();
    let s = scan(&mut image.source, SEGMENT_SIZE_BYTES_MIN * 4, DB, FIRST_RECORD_LSN).unwrap();
    let redo: Vec<u64> = s.redo().map(|r| r.unwrap().row.txn.0).collect();
    assert_eq!(redo, vec![2]);
}

#[test]
fn redo_point_in_the_middle_scans_from_there() {
    let seg = SEGMENT_SIZE_BYTES_MIN * 2;
    let mut image = LogImage::new(seg, DB, 1).unwrap();
    for t in 0..50u64 {
        image.append(&Record::Commit { txn: TxnId(t) }).unwrap();
        if t.is_multiple_of(7) {
            image.flush();
        }
    }
    let redo = image.append(&Record::CheckpointBegin).unwrap().lsn;
    image.append(&Record::Commit { txn: TxnId(99) }).unwrap();
    image.flush();
    let s = scan(&mut image.source, seg, DB, redo).unwrap();
    assert_eq!(s.records.len(), 2);
    assert_eq!(s.records[0].record, Record::CheckpointBegin);
    assert_eq!(s.records[1].record, Record::Commit { txn: TxnId(99) });
}

#[test]
fn bad_block_inspection_never_panics_on_short_input() {
    for n in [0, 1, 39, 40, 4095, 4097] {
        assert!(matches!(inspect(&vec![1u8; n]), BlockState::Bad(_)));
    }
}
