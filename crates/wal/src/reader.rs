//! The recovery reader: scans the log from a redo point and returns its records in order.
//!
//! Where the log ends:
//! - a block that is all zeros (preallocated, never written), a block whose LSN is not its
//!   position or whose epoch is older (left from a recycled segment or from before the last
//!   recovery), a missing or not-yet-used segment: the clean end;
//! - a block whose checksum fails (torn by a power loss): the end too, **if** nothing after
//!   it proves it was durable once. The writer keeps up to `flushes_in_flight_max` flushes
//!   in flight and acknowledges a commit only once every byte before it is durable; each
//!   block records the log's durable LSN when its flush was submitted
//!   (`durable_at_submit_lsn`, block.rs). So at the first damaged or missing block p:
//!   - a valid later block with `durable_at_submit_lsn <= p` was submitted while p was not
//!     yet durable: nothing at or after p was ever acknowledged, p is a torn tail, and
//!     such later blocks (flushes that overtook p's) are dropped with it;
//!   - a valid later block with `durable_at_submit_lsn > p` was submitted after p was
//!     durable: p was damaged after it was acknowledged — corruption, and the scan refuses
//!     with `WalError::Corrupt` instead of dropping committed records.
//!   A v1 block (one flush at a time) reads as submitted when everything before its flush
//!   was durable, which is the v1 rule ("a later flush proves the damage was durable");
//! - a record cut off at the end (its flush was torn) is dropped whole: never half-visible.
//!
//! A limit of any log format without a per-commit marker elsewhere: if one of the last
//! durable flushes is damaged later (bit rot) and no flush submitted after it became
//! durable follows, that damage looks like a torn tail. With flushes in flight that window
//! is the flushes submitted before the damaged one was durable (at most
//! `flushes_in_flight_max` of them); device checksums and the checkpoint's redo point keep
//! it small.

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};

use crate::block::{inspect, payload, BlockState};
use crate::error::{file_err, WalError};
use crate::files::{inspect_segment_header, segment_path, SegmentHeaderState};
use crate::limits::{BLOCK_HEADER_BYTES, BLOCK_PAYLOAD_BYTES, BLOCK_SIZE_BYTES, RECORD_HEADER_BYTES};
use crate::lsn::{Lsn, SegmentPosition, TxnId};
use crate::record::{decode_body, decode_header, DeleteRow, InsertRow, Record};

const BLOCK: u64 = BLOCK_SIZE_BYTES as u64;

/// Where segment images come from: the log directory, or memory (tests, fuzzing).
pub trait SegmentSource {
    /// The whole segment file, or None if it does not exist.
    fn read_segment(&mut self, segment_no: u64) -> Result<Option<Vec<u8>>, WalError>;
    /// The name to put in errors.
    fn segment_path(&self, segment_no: u64) -> PathBuf;
}

pub struct DirSource {
    pub dir: PathBuf,
}

impl SegmentSource for DirSource {
    fn read_segment(&mut self, segment_no: u64) -> Result<Option<Vec<u8>>, WalError> {
        let path = segment_path(&self.dir, segment_no);
        let mut f = match crate::files::open_existing(&path, false) {
            Ok(f) => f,
            Err(WalError::File { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(&mut f, &mut bytes).map_err(file_err(&path))?;
        Ok(Some(bytes))
    }
    fn segment_path(&self, segment_no: u64) -> PathBuf {
        segment_path(&self.dir, segment_no)
    }
}

/// Segments held in memory.
#[derive(Default)]
pub struct MemSource {
    pub segments: BTreeMap<u64, Vec<u8>>,
}

impl SegmentSource for MemSource {
    fn read_segment(&mut self, segment_no: u64) -> Result<Option<Vec<u8>>, WalError> {
        Ok(self.segments.get(&segment_no).cloned())
    }
    fn segment_path(&self, segment_no: u64) -> PathBuf {
        PathBuf::from(format!("<memory segment {segment_no}>"))
    }
}

/// Why the scan stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LogEnd {
    /// A zeroed block, a stale block, or a missing/unused segment: nothing was lost.
    Clean,
    /// A damaged block with nothing durable after it: the torn tail of an unacknowledged flush.
    TornTail { at: Lsn, what: String },
}

/// A record and the log range it occupies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoggedRecord {
    pub lsn: Lsn,
    /// One past its last byte: the log must be durable up to here before a page it changed
    /// may be written.
    pub end: Lsn,
    pub record: Record,
}

#[derive(Debug, Clone)]
pub struct Scan {
    pub records: Vec<LoggedRecord>,
    /// One past the last byte of the last complete record (`from` if there is none).
    pub end_lsn: Lsn,
    /// The first block after the last valid one: where a writer continues.
    pub next_block_lsn: Lsn,
    /// Highest epoch among the blocks read (0 if none).
    pub last_epoch: u32,
    pub blocks_read_count: u64,
    pub end: LogEnd,
    /// Valid blocks found past the end that belong to flushes submitted before the end's
    /// block was durable (flushes in flight that overtook it): never acknowledged, dropped.
    pub overtaking_blocks_dropped_count: u64,
}

impl Scan {
    /// The records redo must replay, with the contract documented on [`Redo`].
    pub fn redo(&self) -> Redo<'_> {
        Redo::new(&self.records)
    }
}

struct Assembler {
    bytes: Vec<u8>,
    start: Lsn,
    /// Body length once the header is complete.
    body_len: Option<usize>,
}

struct Cursor {
    segment_size_bytes: u64,
    database_id: u128,
    loaded_no: Option<u64>,
    image: Option<Vec<u8>>,
}

enum Loaded {
    Ready,
    /// Missing file or unused segment (zero header, other number): a clean end.
    Absent,
    Bad(String),
}

impl Cursor {
    fn load(&mut self, source: &mut dyn SegmentSource, no: u64) -> Result<Loaded, WalError> {
        if self.loaded_no == Some(no) {
            return Ok(if self.image.is_some() { Loaded::Ready } else { Loaded::Absent });
        }
        self.loaded_no = Some(no);
        self.image = None;
        let Some(image) = source.read_segment(no)? else { return Ok(Loaded::Absent) };
        match inspect_segment_header(&image) {
            SegmentHeaderState::Valid { segment_no, segment_size_bytes, database_id } => {
                if database_id != self.database_id {
                    return Err(WalError::Corrupt {
                        path: source.segment_path(no),
                        offset_bytes: 0,
                        what: format!("the segment belongs to another database (id {database_id:032x})"),
                    });
                }
                if segment_no != no {
                    // Recycled but never used under its new number (crash during recycling).
                    return Ok(Loaded::Absent);
                }
                if segment_size_bytes != self.segment_size_bytes {
                    return Ok(Loaded::Bad(format!("segment size {segment_size_bytes}, the log uses {}", self.segment_size_bytes)));
                }
                self.image = Some(image);
                Ok(Loaded::Ready)
            }
            SegmentHeaderState::Zero => Ok(Loaded::Absent),
            SegmentHeaderState::Bad(what) => {
                // Keep the image: the look-ahead decides whether blocks after it are durable.
                self.image = Some(image);
                Ok(Loaded::Bad(format!("segment header: {what}")))
            }
        }
    }

    fn block(&self, offset: u64) -> &[u8] {
        const ZERO: [u8; BLOCK_SIZE_BYTES] = [0; BLOCK_SIZE_BYTES];
        match &self.image {
            // A file shorter than a segment reads as zeros past its end (never written).
            Some(img) if (offset + BLOCK) as usize <= img.len() => &img[offset as usize..(offset + BLOCK) as usize],
            _ => &ZERO,
        }
    }
}

/// Scans the log from `from` (a record boundary: a redo point, or the first record's LSN).
pub fn scan(source: &mut dyn SegmentSource, segment_size_bytes: u64, database_id: u128, from: Lsn) -> Result<Scan, WalError> {
    crate::config::check_segment_size(segment_size_bytes)?;
    let seg = segment_size_bytes;
    let in_block = from.0 % BLOCK;
    if from.0 % seg < BLOCK || (in_block != 0 && in_block < BLOCK_HEADER_BYTES as u64) {
        return Err(WalError::Config(format!("scan start {from} is not inside a log block's payload")));
    }
    let mut cur = Cursor { segment_size_bytes: seg, database_id, loaded_no: None, image: None };
    let mut pos = Lsn(from.0 - in_block);
    let mut skip = if in_block == 0 { 0 } else { in_block as usize - BLOCK_HEADER_BYTES };
    let mut out = Scan {
        records: Vec::new(),
        end_lsn: from,
        next_block_lsn: pos,
        last_epoch: 0,
        blocks_read_count: 0,
        end: LogEnd::Clean,
        overtaking_blocks_dropped_count: 0,
    };
    let mut asm = Assembler { bytes: Vec::new(), start: Lsn::ZERO, body_len: None };
    // The flush the previous block belonged to, and whether it ended there.
    let mut prev: Option<(Lsn, bool)> = None;
    let mut damage: Option<String> = None;
    loop {
        let (no, off);
        (pos, no, off) = block_at(pos, seg);
        match cur.load(source, no)? {
            Loaded::Ready => {}
            Loaded::Absent => break,
            Loaded::Bad(what) => {
                damage = Some(what);
                break;
            }
        }
        let state = inspect(cur.block(off));
        let header = match state {
            BlockState::Zero => break,
            BlockState::Bad(what) => {
                damage = Some(what);
                break;
            }
            BlockState::Valid(h) => h,
        };
        if header.block_lsn != pos || header.epoch < out.last_epoch {
            break; // stale: from a recycled segment or from before the last recovery
        }
        let continues = match prev {
            None => true,
            // A block either continues the write of the block before it or starts a new one.
            Some((flush_start, ended)) if ended || header.flush_start_lsn != flush_start => header.flush_start_lsn == pos,
            Some(_) => true,
        };
        if !continues {
            break; // a block of another, older write that happens to sit at the right place
        }
        if prev.is_some() && header.flush_start_lsn == pos && !asm.bytes.is_empty() {
            // A record cut off by the end of the previous write. Records never span writes,
            // so that write was torn: legitimate only as the tail an earlier recovery cut
            // (the log continued under a newer epoch); within one epoch it is corruption.
            if header.epoch > out.last_epoch {
                asm.bytes.clear();
                asm.body_len = None;
            } else {
                return Err(WalError::Corrupt {
                    path: source.segment_path(no),
                    offset_bytes: off,
                    what: format!("a record starting at LSN {} is cut off by a later write", asm.start),
                });
            }
        }
        out.blocks_read_count += 1;
        out.last_epoch = header.epoch;
        let data = payload(cur.block(off), &header);
        let start_at = skip.min(data.len());
        skip = 0;
        let mut i = start_at;
        while i < data.len() {
            if asm.bytes.is_empty() {
                asm.start = pos.advance((BLOCK_HEADER_BYTES + i) as u64);
            }
            let want = match asm.body_len {
                None => RECORD_HEADER_BYTES - asm.bytes.len(),
                Some(b) => RECORD_HEADER_BYTES + b - asm.bytes.len(),
            };
            let take = want.min(data.len() - i);
            asm.bytes.extend_from_slice(&data[i..i + take]);
            i += take;
            let corrupt = |what: String| WalError::Corrupt {
                path: source.segment_path(no),
                offset_bytes: off,
                what: format!("a checksummed block holds an invalid record at LSN {}: {what}", asm.start),
            };
            if asm.body_len.is_none() && asm.bytes.len() == RECORD_HEADER_BYTES {
                let mut h = [0u8; RECORD_HEADER_BYTES];
                h.copy_from_slice(&asm.bytes);
                let (_, body_len) = decode_header(&h).map_err(|e| corrupt(e.0))?;
                asm.body_len = Some(body_len);
            }
            if let Some(body_len) = asm.body_len {
                if asm.bytes.len() == RECORD_HEADER_BYTES + body_len {
                    let record = decode_body(asm.bytes[0], &asm.bytes[RECORD_HEADER_BYTES..]).map_err(|e| corrupt(e.0))?;
                    let end = pos.advance((BLOCK_HEADER_BYTES + i) as u64);
                    out.records.push(LoggedRecord { lsn: asm.start, end, record });
                    out.end_lsn = end;
                    asm.bytes.clear();
                    asm.body_len = None;
                }
            }
        }
        let ended = (header.used_bytes as usize) < BLOCK_PAYLOAD_BYTES;
        if ended && !asm.bytes.is_empty() {
            return Err(WalError::Corrupt {
                path: source.segment_path(no),
                offset_bytes: off,
                what: format!("a record starting at LSN {} continues past the end of its write", asm.start),
            });
        }
        prev = Some((header.flush_start_lsn, ended));
        pos = pos.advance(BLOCK);
        out.next_block_lsn = pos;
    }
    if out.next_block_lsn.segment_offset_bytes(seg) == 0 {
        out.next_block_lsn = out.next_block_lsn.advance(BLOCK);
    }
    // Whatever ended the scan, no valid block may follow that was submitted after the
    // block at `pos` was durable.
    let ahead = look_ahead(source, &mut cur, seg, pos, out.last_epoch)?;
    if let Some(later) = ahead.proof_of_durability {
        let what = damage.as_deref().unwrap_or("the block is missing (zeroed or stale)");
        return Err(WalError::Corrupt {
            path: source.segment_path(pos.segment_no(seg)),
            offset_bytes: pos.segment_offset_bytes(seg),
            what: format!("{what}, but the log continues after it: {later} was written by a later flush, submitted after this block was durable"),
        });
    }
    out.overtaking_blocks_dropped_count = ahead.overtaking_blocks_count;
    if let Some(what) = damage {
        out.end = LogEnd::TornTail { at: pos, what };
    } else if ahead.overtaking_blocks_count > 0 {
        out.end = LogEnd::TornTail {
            at: pos,
            what: format!(
                "the block is missing (zeroed or stale) while {} later block(s) of flushes submitted before it was durable reached the disk",
                ahead.overtaking_blocks_count
            ),
        };
    }
    Ok(out)
}

/// `pos`, or the block after it where `pos` is a segment's first block (the segment
/// header, never a log block), with its segment number and offset in the segment.
fn block_at(pos: Lsn, segment_size_bytes: u64) -> (Lsn, u64, u64) {
    let pos = if pos.segment_offset_bytes(segment_size_bytes) == 0 { pos.advance(BLOCK) } else { pos };
    (pos, pos.segment_no(segment_size_bytes), pos.segment_offset_bytes(segment_size_bytes))
}

/// What lies past the end of the scan.
struct Ahead {
    /// The first valid later block submitted after `damaged` was durable, described for
    /// the error message.
    proof_of_durability: Option<String>,
    /// Valid later blocks of flushes submitted before `damaged` was durable.
    overtaking_blocks_count: u64,
}

/// The valid blocks after `damaged` (in position, of this or a newer epoch) whose write
/// began after `damaged`: the first submitted after `damaged` was durable, and how many
/// were submitted before.
fn look_ahead(source: &mut dyn SegmentSource, cur: &mut Cursor, seg: u64, damaged: Lsn, epoch_min: u32) -> Result<Ahead, WalError> {
    let mut ahead = Ahead { proof_of_durability: None, overtaking_blocks_count: 0 };
    let mut pos = damaged.advance(BLOCK);
    let mut absent_segments = 0;
    loop {
        let (no, off);
        (pos, no, off) = block_at(pos, seg);
        match cur.load(source, no)? {
            Loaded::Ready | Loaded::Bad(_) if cur.image.is_some() => absent_segments = 0,
            _ => {
                // Segments are used in order; two missing ones in a row end the search.
                absent_segments += 1;
                if absent_segments >= 2 {
                    return Ok(ahead);
                }
                pos = Lsn((no + 1) * seg);
                continue;
            }
        }
        if let BlockState::Valid(h) = inspect(cur.block(off)) {
            if h.block_lsn == pos && h.epoch >= epoch_min && h.flush_start_lsn > damaged {
                if h.durable_at_submit_lsn > damaged {
                    ahead.proof_of_durability = Some(format!("the block at LSN {pos} ({} offset {off})", source.segment_path(no).display()));
                    return Ok(ahead);
                }
                ahead.overtaking_blocks_count += 1;
            }
        }
        pos = pos.advance(BLOCK);
    }
}

/// Scans the log in `dir`.
pub fn scan_dir(dir: &Path, segment_size_bytes: u64, database_id: u128, from: Lsn) -> Result<Scan, WalError> {
    scan(&mut DirSource { dir: dir.to_path_buf() }, segment_size_bytes, database_id, from)
}

/// What redo replays: the inserts and deletes of committed transactions, in log order.
///
/// **Contract.** Redo is idempotent only if the caller makes it so: for each item, read the
/// page (`table_id`, `partition`, `page_no`), and apply the row only if the page's LSN is
/// below the item's `lsn`; after applying, set the page's LSN to the item's `end`. Records of
/// transactions with no commit record (aborted, or unfinished at the crash) are skipped:
/// their rows never reached a page that reached disk, because the WAL rule kept pages
/// behind the log and a transaction's rows stay invisible until it commits. A record kind
/// this version cannot replay (written by a newer flashscan) is an error, never skipped.
/// A delete names its row by the table writer's row id; the table writer applies it.
pub struct Redo<'a> {
    records: &'a [LoggedRecord],
    committed: HashSet<TxnId>,
    next: usize,
}

impl<'a> Redo<'a> {
    pub fn new(records: &'a [LoggedRecord]) -> Redo<'a> {
        let committed = records
            .iter()
            .filter_map(|r| match r.record {
                Record::Commit { txn } => Some(txn),
                _ => None,
            })
            .collect();
        Redo { records, committed, next: 0 }
    }

    pub fn is_committed(&self, txn: TxnId) -> bool {
        self.committed.contains(&txn)
    }
}

/// One row to put back.
#[derive(Debug, Clone, Copy)]
pub struct RedoInsert<'a> {
    pub lsn: Lsn,
    pub end: Lsn,
    pub row: &'a InsertRow,
}

/// One row to delete again.
#[derive(Debug, Clone, Copy)]
pub struct RedoDelete<'a> {
    pub lsn: Lsn,
    pub row: &'a DeleteRow,
}

/// A committed change, in log order.
#[derive(Debug, Clone, Copy)]
pub enum RedoChange<'a> {
    Insert(RedoInsert<'a>),
    Delete(RedoDelete<'a>),
}

impl RedoChange<'_> {
    pub fn lsn(&self) -> Lsn {
        match self {
            RedoChange::Insert(i) => i.lsn,
            RedoChange::Delete(d) => d.lsn,
        }
    }

    pub fn table_id(&self) -> u32 {
        match self {
            RedoChange::Insert(i) => i.row.table_id,
            RedoChange::Delete(d) => d.row.table_id,
        }
    }

    pub fn txn(&self) -> TxnId {
        match self {
            RedoChange::Insert(i) => i.row.txn,
            RedoChange::Delete(d) => d.row.txn,
        }
    }

    /// The insert, if this is one (tests and tools that log inserts only).
    pub fn insert(&self) -> Option<&RedoInsert<'_>> {
        match self {
            RedoChange::Insert(i) => Some(i),
            RedoChange::Delete(_) => None,
        }
    }
}

impl<'a> Iterator for Redo<'a> {
    type Item = Result<RedoChange<'a>, WalError>;
    fn next(&mut self) -> Option<Self::Item> {
        while self.next < self.records.len() {
            let r = &self.records[self.next];
            self.next += 1;
            match &r.record {
                Record::Insert(row) if self.committed.contains(&row.txn) => {
                    return Some(Ok(RedoChange::Insert(RedoInsert { lsn: r.lsn, end: r.end, row })));
                }
                Record::Delete(row) if self.committed.contains(&row.txn) => {
                    return Some(Ok(RedoChange::Delete(RedoDelete { lsn: r.lsn, row })));
                }
                Record::Other { kind, .. } => return Some(Err(WalError::UnsupportedRecord { lsn: r.lsn, kind: *kind })),
                _ => {}
            }
        }
        None
    }
}
