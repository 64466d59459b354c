//! Key → frame, split into shards by the key's hash, each a mutex-guarded hash map. The
//! shard lock is also what orders pinning against eviction (see `frame`).

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use parking_lot::{Mutex, MutexGuard};

use crate::limits::PAGE_TABLE_SHARD_COUNT;
use crate::page_key::PageKey;

/// Hashes a `PageKey` with its own mix function (set once per key, no SipHash).
#[derive(Default)]
pub struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ b as u64).wrapping_mul(0x100_0000_01B3);
        }
    }
    fn write_u32(&mut self, n: u32) {
        self.0 = (self.0 ^ n as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
    fn write_u64(&mut self, n: u64) {
        let x = (self.0 ^ n).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        self.0 = x ^ (x >> 29);
    }
}

pub type Shard = HashMap<PageKey, u32, BuildHasherDefault<KeyHasher>>;

pub struct PageTable {
    shards: Box<[Mutex<Shard>]>,
}

impl PageTable {
    pub fn new(frame_count: u32) -> PageTable {
        let per_shard = (frame_count as usize / PAGE_TABLE_SHARD_COUNT + 1) * 2;
        let shards = (0..PAGE_TABLE_SHARD_COUNT)
            .map(|_| Mutex::new(HashMap::with_capacity_and_hasher(per_shard, Default::default())))
            .collect();
        PageTable { shards }
    }

    #[inline]
    pub fn shard(&self, key: PageKey) -> MutexGuard<'_, Shard> {
        let i = key.mix() as usize & (PAGE_TABLE_SHARD_COUNT - 1);
        self.shards[i].lock()
    }

    /// Every shard locked at once (in index order; every other path holds at most one
    /// shard), for a consistent view of the whole table.
    pub fn lock_all(&self) -> Vec<MutexGuard<'_, Shard>> {
        self.shards.iter().map(|s| s.lock()).collect()
    }

    /// Entries over all shards (locks each shard in turn: for reports and tests).
    pub fn len(&self) -> usize {
        self.shards.iter().map(|s| s.lock().len()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
