//! Log records: an 8-byte header (kind, flags, reserved, body length) and a body whose
//! layout the kind defines. The length lets a reader step over a kind it does not know, so
//! new kinds come without a format break (a redo that meets one refuses it by name instead
//! of guessing). DELETE (kind 7) came this way; an UPDATE is logged as a delete of the old
//! row and an insert of the new one (kind 6 stays reserved for an in-place update).

use crate::limits::{RECORD_BODY_BYTES_MAX, RECORD_HEADER_BYTES};
use crate::lsn::{Lsn, TxnId};

/// Record kinds. 0 is never a record, so a zeroed area cannot decode as one.
pub mod kind {
    pub const INSERT: u8 = 1;
    pub const COMMIT: u8 = 2;
    pub const ABORT: u8 = 3;
    pub const CHECKPOINT_BEGIN: u8 = 4;
    pub const CHECKPOINT_END: u8 = 5;
    /// Planned, not written yet: an UPDATE of a row in place.
    pub const UPDATE_RESERVED: u8 = 6;
    /// A row deleted (and the old version of an updated row).
    pub const DELETE: u8 = 7;
}

/// Body of a delete: txn, table id, reserved (zero), row id.
pub const DELETE_BODY_BYTES: usize = 8 + 4 + 4 + 8;

/// One row deleted from a table. `row_id` names the row as the table writer addresses it
/// (its page and slot, or the LSN of the insert record of a row not yet in a page): the
/// table writer's business, like an insert's row bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeleteRow {
    pub txn: TxnId,
    pub table_id: u32,
    pub row_id: u64,
}

/// Fixed part of an insert body: txn, table id, partition, page number.
pub const INSERT_FIXED_BYTES: usize = 8 + 4 + 4 + 8;
// `encode_parts` puts every fixed part in one header buffer of the insert's size.
const _: () = assert!(DELETE_BODY_BYTES <= INSERT_FIXED_BYTES);

/// One row inserted into a page of a table partition. `row` is the row in the page's own
/// encoding (the table writer's business); redo puts it back on `page_no` if the page's
/// LSN is older than the record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InsertRow {
    pub txn: TxnId,
    pub table_id: u32,
    pub partition: u32,
    pub page_no: u64,
    pub row: Vec<u8>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Record {
    Insert(InsertRow),
    Delete(DeleteRow),
    Commit { txn: TxnId },
    Abort { txn: TxnId },
    /// Its LSN is the redo point of the checkpoint it starts.
    CheckpointBegin,
    /// The checkpoint that began at `redo` has written every page dirtied before it.
    CheckpointEnd { redo: Lsn },
    /// A kind this version does not know (written by a newer one); kept, not interpreted.
    Other { kind: u8, body: Vec<u8> },
}

/// Why bytes in a valid block are not a record. The reader turns it into `Corrupt`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordDecodeError(pub String);

impl Record {
    pub fn kind(&self) -> u8 {
        match self {
            Record::Insert(_) => kind::INSERT,
            Record::Delete(_) => kind::DELETE,
            Record::Commit { .. } => kind::COMMIT,
            Record::Abort { .. } => kind::ABORT,
            Record::CheckpointBegin => kind::CHECKPOINT_BEGIN,
            Record::CheckpointEnd { .. } => kind::CHECKPOINT_END,
            Record::Other { kind, .. } => *kind,
        }
    }

    pub fn body_len(&self) -> usize {
        match self {
            Record::Insert(r) => INSERT_FIXED_BYTES + r.row.len(),
            Record::Delete(_) => DELETE_BODY_BYTES,
            Record::Commit { .. } | Record::Abort { .. } => 8,
            Record::CheckpointBegin => 0,
            Record::CheckpointEnd { .. } => 8,
            Record::Other { body, .. } => body.len(),
        }
    }

    pub fn encoded_len(&self) -> usize {
        RECORD_HEADER_BYTES + self.body_len()
    }

    /// The record as two parts to copy into the log: the header with the fixed fields in
    /// `head` (returned as a prefix of it), and the variable tail borrowed from the record.
    /// No allocation: the append path calls this under the log lock.
    pub fn encode_parts<'a>(&'a self, head: &'a mut [u8; RECORD_HEADER_BYTES + INSERT_FIXED_BYTES]) -> (&'a [u8], &'a [u8]) {
        let body_len = self.body_len();
        debug_assert!(body_len <= RECORD_BODY_BYTES_MAX);
        head[0] = self.kind();
        head[1] = 0; // flags
        head[2..4].copy_from_slice(&0u16.to_le_bytes());
        head[4..8].copy_from_slice(&(body_len as u32).to_le_bytes());
        let (fixed, tail): (usize, &'a [u8]) = match self {
            Record::Insert(r) => {
                head[8..16].copy_from_slice(&r.txn.0.to_le_bytes());
                head[16..20].copy_from_slice(&r.table_id.to_le_bytes());
                head[20..24].copy_from_slice(&r.partition.to_le_bytes());
                head[24..32].copy_from_slice(&r.page_no.to_le_bytes());
                (INSERT_FIXED_BYTES, &r.row)
            }
            Record::Delete(d) => {
                head[8..16].copy_from_slice(&d.txn.0.to_le_bytes());
                head[16..20].copy_from_slice(&d.table_id.to_le_bytes());
                head[20..24].copy_from_slice(&0u32.to_le_bytes());
                head[24..32].copy_from_slice(&d.row_id.to_le_bytes());
                (DELETE_BODY_BYTES, &[])
            }
            Record::Commit { txn } | Record::Abort { txn } => {
                head[8..16].copy_from_slice(&txn.0.to_le_bytes());
                (8, &[])
            }
            Record::CheckpointBegin => (0, &[]),
            Record::CheckpointEnd { redo } => {
                head[8..16].copy_from_slice(&redo.0.to_le_bytes());
                (8, &[])
            }
            Record::Other { body, .. } => (0, body),
        };
        (&head[..RECORD_HEADER_BYTES + fixed], tail)
    }

    /// The record as one byte string (tests, tools).
    pub fn encode(&self) -> Vec<u8> {
        let mut head = [0u8; RECORD_HEADER_BYTES + INSERT_FIXED_BYTES];
        let (h, t) = self.encode_parts(&mut head);
        let mut out = Vec::with_capacity(h.len() + t.len());
        out.extend_from_slice(h);
        out.extend_from_slice(t);
        out
    }

    /// Whether a record of this kind and body may be written by this version.
    pub fn validate_for_append(&self) -> Result<(), crate::WalError> {
        let bytes = self.body_len();
        if bytes > RECORD_BODY_BYTES_MAX {
            return Err(crate::WalError::RecordTooLarge { bytes, limit: RECORD_BODY_BYTES_MAX });
        }
        if let Record::Other { kind, .. } = self {
            if *kind <= kind::CHECKPOINT_END || *kind == kind::DELETE {
                return Err(crate::WalError::Config(format!("record kind {kind} is a known kind; use its variant")));
            }
        }
        Ok(())
    }
}

/// Parses a record header: (kind, body length).
pub fn decode_header(h: &[u8; RECORD_HEADER_BYTES]) -> Result<(u8, usize), RecordDecodeError> {
    let kind = h[0];
    if kind == 0 {
        return Err(RecordDecodeError("record kind 0 (zeroed bytes inside a block's used area)".into()));
    }
    if h[1] != 0 || h[2] != 0 || h[3] != 0 {
        return Err(RecordDecodeError(format!("record flags/reserved bytes {:02x} {:02x} {:02x} are not zero", h[1], h[2], h[3])));
    }
    let body_len = u32::from_le_bytes([h[4], h[5], h[6], h[7]]) as usize;
    if body_len > RECORD_BODY_BYTES_MAX {
        return Err(RecordDecodeError(format!("record body length {body_len} exceeds {RECORD_BODY_BYTES_MAX}")));
    }
    Ok((kind, body_len))
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(a)
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(a)
}

/// Parses a body of `kind`.
pub fn decode_body(kind: u8, body: &[u8]) -> Result<Record, RecordDecodeError> {
    let exact = |n: usize| {
        if body.len() == n {
            Ok(())
        } else {
            Err(RecordDecodeError(format!("record kind {kind} has a {}-byte body, expected {n}", body.len())))
        }
    };
    match kind {
        kind::INSERT => {
            if body.len() < INSERT_FIXED_BYTES {
                return Err(RecordDecodeError(format!("insert record body of {} bytes is shorter than {INSERT_FIXED_BYTES}", body.len())));
            }
            Ok(Record::Insert(InsertRow {
                txn: TxnId(u64_at(body, 0)),
                table_id: u32_at(body, 8),
                partition: u32_at(body, 12),
                page_no: u64_at(body, 16),
                row: body[INSERT_FIXED_BYTES..].to_vec(),
            }))
        }
        kind::DELETE => {
            exact(DELETE_BODY_BYTES)?;
            if u32_at(body, 12) != 0 {
                return Err(RecordDecodeError(format!("delete record's reserved field is {:#x}, not zero", u32_at(body, 12))));
            }
            Ok(Record::Delete(DeleteRow { txn: TxnId(u64_at(body, 0)), table_id: u32_at(body, 8), row_id: u64_at(body, 16) }))
        }
        kind::COMMIT => exact(8).map(|_| Record::Commit { txn: TxnId(u64_at(body, 0)) }),
        kind::ABORT => exact(8).map(|_| Record::Abort { txn: TxnId(u64_at(body, 0)) }),
        kind::CHECKPOINT_BEGIN => exact(0).map(|_| Record::CheckpointBegin),
        kind::CHECKPOINT_END => exact(8).map(|_| Record::CheckpointEnd { redo: Lsn(u64_at(body, 0)) }),
        0 => Err(RecordDecodeError("record kind 0".into())),
        other => Ok(Record::Other { kind: other, body: body.to_vec() }),
    }
}

/// Decodes one whole record from `bytes` (exactly one record's bytes).
pub fn decode(bytes: &[u8]) -> Result<Record, RecordDecodeError> {
    if bytes.len() < RECORD_HEADER_BYTES {
        return Err(RecordDecodeError(format!("{} bytes are shorter than a record header", bytes.len())));
    }
    let mut h = [0u8; RECORD_HEADER_BYTES];
    h.copy_from_slice(&bytes[..RECORD_HEADER_BYTES]);
    let (kind, body_len) = decode_header(&h)?;
    if bytes.len() != RECORD_HEADER_BYTES + body_len {
        return Err(RecordDecodeError(format!("record of {} bytes, header says {}", bytes.len(), RECORD_HEADER_BYTES + body_len)));
    }
    decode_body(kind, &bytes[RECORD_HEADER_BYTES..])
}
