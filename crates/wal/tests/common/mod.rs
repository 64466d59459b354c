//! Shared helpers of the log's integration tests.
#![allow(dead_code)]

use std::collections::{BTreeMap, HashSet};
use std::path::Path;
use std::sync::Arc;

use flashscan_io::sim::{FaultPlan, SimDisk, SimEngine};
use flashscan_io::IoEngine;
use flashscan_wal::config::writer_engine_config;
use flashscan_wal::*;

/// A temporary directory on tmpfs where there is one: the crash tests create and fsync
/// thousands of small files, which costs milliseconds each on a real disk.
pub fn temp_dir() -> tempfile::TempDir {
    let shm = Path::new("/dev/shm");
    if shm.is_dir() {
        if let Ok(d) = tempfile::Builder::new().prefix("flashscan-wal-test").tempdir_in(shm) {
            return d;
        }
    }
    tempfile::tempdir().unwrap()
}

pub fn identity(id: u128) -> DatabaseIdentity {
    DatabaseIdentity { id, label: format!("/db/test-{id:x}") }
}

/// Engines that write through `disk`'s power-loss model.
pub fn sim_factory(disk: Arc<SimDisk>) -> EngineFactory {
    Arc::new(move |files| {
        Ok(Box::new(SimEngine::new(files, writer_engine_config(), FaultPlan::default())?.with_disk(disk.clone())) as Box<dyn IoEngine>)
    })
}

pub fn config(dir: &Path, segment_size_bytes: u64, factory: EngineFactory) -> WalConfig {
    let mut c = WalConfig::new(dir.join("wal"));
    c.segment_size_bytes = segment_size_bytes;
    c.engine_factory = factory;
    c
}

/// The row a test writes for (txn, index): its content says where it came from and its
/// length varies so records span blocks; a half-written row cannot match it.
pub fn row_for(txn: TxnId, index: u32) -> Vec<u8> {
    let len = ((txn.0.wrapping_mul(2654435761) ^ index as u64) % 2600) as usize + 1;
    let mut x = txn.0 ^ ((index as u64) << 32) ^ 0x9E37_79B9_7F4A_7C15;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// Runs a future to completion on this thread: enough to await [`Wal::durable`] from a
/// plain thread (the log's own tests have no async runtime).
pub use futures::executor::block_on;

/// Commits `txn` the way an async caller does: appends its commit record, then awaits
/// durability ([`Wal::durable`]) instead of leading a flush.
pub fn commit_async(wal: &Wal, txn: TxnId) -> Result<Appended, WalError> {
    let a = wal.append(&Record::Commit { txn })?;
    block_on(wal.durable(a.end))?;
    Ok(a)
}

/// The transactions a crashed log holds, read back: which committed, and the row indexes of
/// each in log order. Asserts what every crash test asserts of any log: records in order,
/// every row as its transaction wrote it (no half-visible write), no row after its commit.
pub fn logged_transactions(seed: u64, scan: &Scan) -> (HashSet<TxnId>, BTreeMap<TxnId, Vec<u32>>) {
    let mut rows: BTreeMap<TxnId, Vec<u32>> = BTreeMap::new();
    let mut committed = HashSet::new();
    let mut last = Lsn::ZERO;
    for r in &scan.records {
        assert!(r.lsn >= last, "seed {seed}: records out of order");
        last = r.end;
        match &r.record {
            Record::Insert(row) => {
                let i = row.page_no as u32;
                assert_eq!(row.row, row_for(row.txn, i), "seed {seed}: row of txn {} index {i} differs: half-visible write", row.txn);
                assert!(!committed.contains(&row.txn), "seed {seed}: row after its commit");
                rows.entry(row.txn).or_default().push(i);
            }
            Record::Commit { txn } => {
                committed.insert(*txn);
            }
            Record::CheckpointBegin | Record::CheckpointEnd { .. } => {}
            other => panic!("seed {seed}: unexpected record {other:?}"),
        }
    }
    (committed, rows)
}
