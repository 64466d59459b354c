//! Any bytes → the write-ahead log's recovery scan (`flashscan_wal::scan`) returns Ok or Err,
//! never panics, and a scan that succeeds hands every record to `Redo` without panicking.
//!
//! Byte 0 picks the mode: raw segment images (1 to 3 segments of 16 KiB, each with a valid
//! header so the bytes reach the blocks); patched (every block stamped with magic, version
//! and its own LSN and its checksum recomputed, so record parsing is reached); or
//! synthesized (a log written by `LogImage`, the writer's own append/seal code, from
//! input-chosen records and flush points, with up to four flushes in flight finishing in
//! an input-chosen order — block format v2's durable LSN at submit — then input-chosen
//! mutations, checksums recomputed or not). Unmutated synthesized logs must scan back
//! exactly.
#![no_main]

mod common;

use common::{mutate, Cursor};
use flashscan_wal::block::{restamp_checksum, BLOCK_FORMAT_VERSION, BLOCK_MAGIC};
use flashscan_wal::files::encode_segment_header;
use flashscan_wal::limits::{BLOCK_SIZE_BYTES, SEGMENT_SIZE_BYTES_MIN};
use flashscan_wal::reader::MemSource;
use flashscan_wal::*;
use libfuzzer_sys::fuzz_target;

const DB: u128 = 0xF022;
const SEG: u64 = SEGMENT_SIZE_BYTES_MIN;

fn check_scan(source: &mut MemSource) -> Option<Scan> {
    let scan = scan(source, SEG, DB, FIRST_RECORD_LSN).ok()?;
    for item in scan.redo() {
        let _ = item;
    }
    Some(scan)
}

fuzz_target!(|data: &[u8]| {
    let mut c = Cursor::new(data);
    let mode = c.u8();
    let mut source = MemSource::default();
    match mode % 3 {
        0 | 1 => {
            let segments = 1 + (c.u8() % 3) as u64;
            for no in 0..segments {
                let mut img = vec![0u8; SEG as usize];
                img[..BLOCK_SIZE_BYTES].copy_from_slice(&encode_segment_header(no, SEG, DB));
                let body = c.bytes(SEG as usize - BLOCK_SIZE_BYTES);
                img[BLOCK_SIZE_BYTES..BLOCK_SIZE_BYTES + body.len()].copy_from_slice(body);
                if mode % 3 == 1 {
                    for (i, b) in img.chunks_exact_mut(BLOCK_SIZE_BYTES).enumerate().skip(1) {
                        b[0..4].copy_from_slice(&BLOCK_MAGIC);
                        b[4..6].copy_from_slice(&BLOCK_FORMAT_VERSION.to_le_bytes());
                        let lsn = no * SEG + (i * BLOCK_SIZE_BYTES) as u64;
                        b[8..16].copy_from_slice(&lsn.to_le_bytes());
                        restamp_checksum(b);
                    }
                }
                source.segments.insert(no, img);
            }
            check_scan(&mut source);
        }
        _ => {
            let mut image = LogImage::new(SEG, DB, 1 + (c.u8() % 3) as u32).unwrap();
            let window = 1 + (c.u8() % 4) as usize;
            let mut in_flight: Vec<PendingFlush> = Vec::new();
            let count = c.u8() % 24;
            let mut appended = Vec::new();
            for _ in 0..count {
                let k = c.u8();
                let txn = TxnId(c.u64());
                let record = match k % 6 {
                    0 | 1 => {
                        let len = c.u16() as usize % 9000;
                        Record::Insert(InsertRow { txn, table_id: c.u32(), partition: c.u32(), page_no: c.u64(), row: c.bytes(len).to_vec() })
                    }
                    2 => Record::Commit { txn },
                    3 => Record::Abort { txn },
                    4 => Record::CheckpointEnd { redo: Lsn(c.u64()) },
                    _ => {
                        let kind = 6 + c.u8() % 250;
                        let len = c.u8() as usize;
                        Record::Other { kind, body: c.bytes(len).to_vec() }
                    }
                };
                let a = image.append(&record).unwrap();
                appended.push((a, record));
                if k & 0x80 != 0 {
                    if in_flight.len() == window {
                        let done = in_flight.remove(c.u8() as usize % window);
                        image.complete(&done);
                    }
                    if let Some(f) = image.submit() {
                        image.write(&f);
                        in_flight.push(f);
                    }
                }
            }
            for f in in_flight.drain(..) {
                image.complete(&f);
            }
            image.flush();
            let mutated = {
                let no = c.u8() as u64 % 4;
                let restamp = c.u8() & 1 == 0;
                match image.source.segments.get_mut(&no) {
                    Some(img) => {
                        let n = mutate(img, &mut c);
                        if restamp && n > 0 {
                            for b in img.chunks_exact_mut(BLOCK_SIZE_BYTES).skip(1) {
                                restamp_checksum(b);
                            }
                        }
                        n
                    }
                    None => 0,
                }
            };
            let scan = check_scan(&mut image.source);
            if mutated == 0 {
                let scan = scan.expect("an unmutated log scans");
                assert_eq!(scan.records.len(), appended.len());
                for (got, (a, r)) in scan.records.iter().zip(&appended) {
                    assert_eq!((got.lsn, got.end), (a.lsn, a.end));
                    assert_eq!(&got.record, r);
                }
            }
        }
    }
});
