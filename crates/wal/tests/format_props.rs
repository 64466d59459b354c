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
        2 => (any::<u64>(), any::<u32>(), any::<u64>()).prop_map(|(t, table_id, row_id)| Record::Delete(DeleteRow { txn: TxnId(t), table_id, row_id })),
        2 => any::<u64>().prop_map(|t| Record::Commit { txn: TxnId(t) }),
        1 => any::<u64>().prop_map(|t| Record::Abort { txn: TxnId(t) }),
        1 => Just(Record::CheckpointBegin),
        1 => any::<u64>().prop_map(|l| Record::CheckpointEnd { redo: Lsn(l) }),
        1 => (8u8..=255, prop::collection::vec(any::<u8>(), 0..300)).prop_map(|(kind, body)| Record::Other { kind, body }),
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
    let redo: Vec<u64> = s.redo().map(|r| r.unwrap().txn().0).collect();
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

/// Steps of a log whose flushes overlap: per record, whether a flush is submitted after
/// it; how many flushes may be in flight (1..=4); which in-flight flush finishes when the
/// window is full (any of them: flushes finish in any order); where the power goes out.
fn arb_overlapping_log() -> impl Strategy<Value = (Vec<(Record, bool)>, usize, Vec<u8>, usize, u64)> {
    (
        prop::collection::vec((arb_record(), any::<bool>()), 1..40),
        1usize..=4,
        prop::collection::vec(any::<u8>(), 40),
        any::<usize>(),
        any::<u64>(),
    )
}

/// Runs `log` through a LogImage with up to `window` flushes in flight, completing the one
/// `picks` chooses whenever the window is full; stops after `stop` records (the power
/// loss). Returns the appended records and the flushes still in flight.
fn run_overlapping(image: &mut LogImage, log: &[(Record, bool)], window: usize, picks: &[u8], stop: usize) -> (Vec<(Appended, Record)>, Vec<PendingFlush>) {
    let mut appended = Vec::new();
    let mut in_flight: Vec<PendingFlush> = Vec::new();
    let mut pick = picks.iter().cycle();
    for (r, submit) in &log[..stop] {
        appended.push((image.append(r).unwrap(), r.clone()));
        if *submit {
            if in_flight.len() == window {
                let i = *pick.next().unwrap() as usize % in_flight.len();
                let done = in_flight.remove(i);
                image.complete(&done);
            }
            if let Some(f) = image.submit() {
                image.write(&f);
                in_flight.push(f);
            }
        }
    }
    (appended, in_flight)
}

fn damage_block(image: &mut LogImage, seg: u64, lsn: Lsn, how: u64) {
    let (no, off) = (lsn.0 / seg, (lsn.0 % seg) as usize);
    let img = image.source.segments.get_mut(&no).unwrap();
    match how % 2 {
        0 => img[off..off + BLOCK_SIZE_BYTES].fill(0),
        _ => {
            let at = (how >> 8) as usize % BLOCK_SIZE_BYTES;
            img[off + at] ^= 0x5a;
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 160, ..ProptestConfig::default() })]

    /// Block headers round trip, v2 with any durable lag, and a v1 block (reserved bytes
    /// zero) reads as submitted when everything before its flush was durable.
    #[test]
    fn block_headers_round_trip(used in 1usize..=4056, block_no in 1u64..1000, back in 0u64..1000, lag in 0u64..(1u64 << 40), epoch in any::<u32>(), v1 in any::<bool>()) {
        use flashscan_wal::block::{init_fresh, seal, restamp_checksum, BLOCK_FORMAT_VERSION_V1};
        let block_lsn = Lsn(block_no * 4096);
        let flush_start = Lsn((block_no - back.min(block_no - 1)) * 4096);
        let durable = Lsn(flush_start.0.saturating_sub(if v1 { 0 } else { lag }));
        let mut b = vec![0u8; BLOCK_SIZE_BYTES];
        init_fresh(&mut b);
        b[40..40 + used].fill(0x33);
        seal(&mut b, used, block_lsn, flush_start, durable, epoch);
        if v1 {
            b[4..6].copy_from_slice(&BLOCK_FORMAT_VERSION_V1.to_le_bytes());
            restamp_checksum(&mut b);
        }
        match inspect(&b) {
            BlockState::Valid(h) => {
                prop_assert_eq!(h.used_bytes as usize, used);
                prop_assert_eq!(h.block_lsn, block_lsn);
                prop_assert_eq!(h.flush_start_lsn, flush_start);
                prop_assert_eq!(h.durable_at_submit_lsn, durable);
                prop_assert_eq!(h.epoch, epoch);
            }
            other => prop_assert!(false, "{:?}", other),
        }
        // A v1 block with a non-zero lag is not a v1 block.
        if v1 && back < 1000 {
            b[30] = 1;
            restamp_checksum(&mut b);
            prop_assert!(matches!(inspect(&b), BlockState::Bad(_)));
        }
    }

    /// Power loss with flushes in flight: the blocks of every flush not yet finished are
    /// each kept, lost (zero) or torn; finished ones are on disk, including ones behind an
    /// unfinished earlier flush (never acknowledged). Recovery never reports corruption,
    /// returns a prefix of what was appended — every acknowledged record (end <= durable)
    /// included — with nothing half-visible.
    #[test]
    fn overlapping_flushes_torn_at_a_power_loss_keep_every_acknowledged_record(
        (log, window, picks, stop, tear) in arb_overlapping_log(), seg_blocks in 4u64..12
    ) {
        let seg = seg_blocks * BLOCK_SIZE_BYTES as u64;
        let stop = 1 + stop % log.len();
        let mut image = LogImage::new(seg, DB, 1).unwrap();
        let (appended, in_flight) = run_overlapping(&mut image, &log, window, &picks, stop);
        let durable = image.durable();
        let mut s = tear;
        for f in &in_flight {
            for lsn in f.block_lsns(seg) {
                s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                if (s >> 33) % 3 != 0 {
                    damage_block(&mut image, seg, lsn, s >> 20);
                }
            }
        }
        let got = scan(&mut image.source, seg, DB, FIRST_RECORD_LSN).map_err(|e| TestCaseError::fail(format!("recovery refused: {e}")))?;
        prop_assert!(got.end_lsn >= durable, "end {} below durable {}", got.end_lsn, durable);
        prop_assert!(got.records.len() <= appended.len());
        for (g, (a, r)) in got.records.iter().zip(&appended) {
            prop_assert_eq!(g.lsn, a.lsn);
            prop_assert_eq!(g.end, a.end);
            prop_assert_eq!(&g.record, r);
        }
        let acknowledged = appended.iter().filter(|(a, _)| a.end <= durable).count();
        prop_assert!(got.records.len() >= acknowledged, "{} records, {} acknowledged", got.records.len(), acknowledged);
    }

    /// With flushes in flight, damage to a block is refused as corruption whenever a flush
    /// submitted after that block was durable is on disk; otherwise (the damaged block was
    /// in one of the last flushes, only overtaken by flushes submitted before it was
    /// durable) the log ends there — the documented limit — keeping everything before it.
    #[test]
    fn damage_is_refused_once_a_later_flush_proves_it_was_durable(
        (log, window, picks, _stop, how) in arb_overlapping_log(), victim in any::<prop::sample::Index>()
    ) {
        let seg = 64 * 1024;
        let mut image = LogImage::new(seg, DB, 1).unwrap();
        let mut flushes = Vec::new();
        let mut in_flight: Vec<PendingFlush> = Vec::new();
        let mut pick = picks.iter().cycle();
        let mut appended = Vec::new();
        for (r, submit) in &log {
            appended.push(image.append(r).unwrap());
            if *submit {
                if in_flight.len() == window {
                    let i = *pick.next().unwrap() as usize % in_flight.len();
                    image.complete(&in_flight.remove(i));
                }
                if let Some(f) = image.submit() {
                    image.write(&f);
                    flushes.push(f.clone());
                    in_flight.push(f);
                }
            }
        }
        for f in in_flight.drain(..) {
            image.complete(&f);
        }
        if let Some(f) = image.submit() {
            image.write(&f);
            image.complete(&f);
            flushes.push(f);
        }
        let blocks: Vec<Lsn> = flushes.iter().flat_map(|f| f.block_lsns(seg)).collect();
        let p = blocks[victim.index(blocks.len())];
        let proven = flushes.iter().any(|f| f.start > p && f.durable_at_submit > p);
        damage_block(&mut image, seg, p, how);
        match scan(&mut image.source, seg, DB, FIRST_RECORD_LSN) {
            Err(e) => {
                prop_assert!(proven, "refused without proof: {}", e);
                prop_assert!(matches!(e, WalError::Corrupt { .. }), "{}", e);
                prop_assert!(e.to_string().contains("later flush"), "{}", e);
            }
            Ok(got) => {
                prop_assert!(!proven, "damage at {} after a later flush proved it durable was accepted", p);
                // A zeroed block with nothing after it is a clean end; else a torn tail at p.
                let ends_at_p = got.end == LogEnd::Clean || matches!(got.end, LogEnd::TornTail { at, .. } if at == p);
                prop_assert!(ends_at_p, "{:?}", got.end);
                let before = appended.iter().filter(|a| a.end.0 <= p.0).count();
                prop_assert_eq!(got.records.len(), before);
            }
        }
    }
}

/// A log of version 1 blocks (written before flushes overlapped: every flush submitted
/// when all before it was durable) reads back exactly, and damage before a later v1 flush
/// is still refused.
#[test]
fn version_1_blocks_are_read_as_before() {
    use flashscan_wal::block::{restamp_checksum, BLOCK_FORMAT_VERSION_V1};
    let seg = 64 * 1024;
    let mut image = LogImage::new(seg, DB, 1).unwrap();
    let mut appended = Vec::new();
    for t in 0..60u64 {
        let r = Record::Insert(InsertRow { txn: TxnId(t), table_id: 1, partition: 0, page_no: t, row: vec![t as u8; 300 + 97 * t as usize] });
        appended.push((image.append(&r).unwrap(), r));
        if t % 3 == 0 {
            image.flush();
        }
    }
    image.flush();
    let mut first_blocks = Vec::new();
    for (no, img) in image.source.segments.iter_mut() {
        for (i, b) in img.chunks_exact_mut(BLOCK_SIZE_BYTES).enumerate().skip(1) {
            if let BlockState::Valid(h) = inspect(b) {
                assert_eq!(h.durable_at_submit_lsn, h.flush_start_lsn, "sequential flushes have no lag");
                b[4..6].copy_from_slice(&BLOCK_FORMAT_VERSION_V1.to_le_bytes());
                restamp_checksum(b);
                if h.flush_start_lsn == h.block_lsn {
                    first_blocks.push((*no, i));
                }
            }
        }
    }
    let got = scan(&mut image.source, seg, DB, FIRST_RECORD_LSN).unwrap();
    assert_eq!(got.end, LogEnd::Clean);
    assert_eq!(got.records.len(), appended.len());
    for (g, (a, r)) in got.records.iter().zip(&appended) {
        assert_eq!((g.lsn, &g.record), (a.lsn, r));
    }
    let (no, i) = first_blocks[first_blocks.len() / 2];
    image.source.segments.get_mut(&no).unwrap()[i * BLOCK_SIZE_BYTES + 100] ^= 1;
    let err = scan(&mut image.source, seg, DB, FIRST_RECORD_LSN).unwrap_err();
    assert!(matches!(err, WalError::Corrupt { .. }), "{err}");
}
