//! A database's place in a cluster (issue 17, docs/cluster.md): host `index` of `count`
//! hosts, each holding only the hash partitions it owns.
//!
//! Ownership is round robin: partition `p` belongs to host `p mod count`. Round robin
//! rather than contiguous ranges because it balances any partition count (8 partitions over
//! 3 hosts: 3, 3, 2) and needs no table of ranges: every host, the coordinator and
//! `flashscan cluster check` compute the owner from the partition number alone. The rows'
//! hash (`partitioning`) is the same on every host, so a key hashes to the same partition,
//! and therefore the same host, wherever it is computed.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::error::StorageError;

/// Hosts in one cluster, at most: a partition count is at most 1024 (`PARTITION_COUNT_MAX`),
/// so more hosts than that would own nothing.
pub const HOST_COUNT_MAX: u32 = crate::partitioning::PARTITION_COUNT_MAX;

/// Which host of how many: what `--host I/N` says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostSlot {
    pub index: u32,
    pub count: u32,
}

impl HostSlot {
    /// Parses `I/N` (host I of N, counted from 0).
    pub fn parse(text: &str) -> Result<HostSlot, StorageError> {
        let bad = || StorageError::InvalidArgument(format!("--host {text:?}: give I/N, host I of N hosts counted from 0, like 0/2 and 1/2"));
        let (i, n) = text.split_once('/').ok_or_else(bad)?;
        let index: u32 = i.trim().parse().map_err(|_| bad())?;
        let count: u32 = n.trim().parse().map_err(|_| bad())?;
        HostSlot::new(index, count)
    }

    pub fn new(index: u32, count: u32) -> Result<HostSlot, StorageError> {
        if count == 0 || count > HOST_COUNT_MAX || index >= count {
            return Err(StorageError::InvalidArgument(format!("host {index}/{count}: need 1 to {HOST_COUNT_MAX} hosts and a host number below their count")));
        }
        Ok(HostSlot { index, count })
    }

    /// The host that owns `partition` in a cluster of `count` hosts.
    pub fn owner_of(partition: u32, count: u32) -> u32 {
        debug_assert!(count > 0);
        partition % count.max(1)
    }

    pub fn owns(&self, partition: u32) -> bool {
        Self::owner_of(partition, self.count) == self.index
    }

    /// The partitions of a table of `partition_count` this host owns, in order.
    pub fn owned(&self, partition_count: u32) -> Vec<u32> {
        (0..partition_count).filter(|&p| self.owns(p)).collect()
    }
}

impl std::fmt::Display for HostSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

/// What the catalog of a cluster host records: its slot and, per table, the partitions it
/// holds (a table's other partitions are present in the catalog but empty).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostPlace {
    pub index: u32,
    pub count: u32,
    /// Per table (catalog name), the partitions this host holds.
    #[serde(default)]
    pub partitions: BTreeMap<String, Vec<u32>>,
}

impl HostPlace {
    pub fn slot(&self) -> HostSlot {
        HostSlot { index: self.index, count: self.count }
    }

    /// The catalog's claims hold together: a valid slot, and every listed partition owned by
    /// this host under the round robin rule.
    pub fn check(&self) -> Result<(), String> {
        let slot = HostSlot::new(self.index, self.count).map_err(|e| e.to_string())?;
        for (table, partitions) in &self.partitions {
            if let Some(p) = partitions.iter().find(|&&p| !slot.owns(p)) {
                return Err(format!("host {slot} lists partition {p} of table {table:?}, which belongs to host {}", HostSlot::owner_of(*p, slot.count)));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_partition_has_exactly_one_owner() {
        for count in 1..=5u32 {
            for partitions in [1u32, 7, 8, 64] {
                let mut owners = vec![0u32; partitions as usize];
                for index in 0..count {
                    for p in HostSlot::new(index, count).unwrap().owned(partitions) {
                        owners[p as usize] += 1;
                    }
                }
                assert!(owners.iter().all(|&n| n == 1), "{count} hosts, {partitions} partitions: {owners:?}");
            }
        }
    }

    #[test]
    fn parse_refuses_what_is_not_a_host() {
        assert_eq!(HostSlot::parse("1/3").unwrap(), HostSlot { index: 1, count: 3 });
        for bad in ["3/3", "0/0", "1", "a/2", "-1/2", "1/2/3", ""] {
            assert!(HostSlot::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_listed_partition_of_another_host_is_refused() {
        let mut place = HostPlace { index: 0, count: 2, partitions: BTreeMap::new() };
        place.partitions.insert("t".into(), vec![0, 2]);
        assert!(place.check().is_ok());
        place.partitions.insert("t".into(), vec![0, 1]);
        assert!(place.check().unwrap_err().contains("belongs to host 1"));
    }
}
