//! `cluster.json`: the hosts of a cluster, their addresses, and the partitions each owns.
//!
//! ```json
//! {"format": "flashscan-cluster", "version": 1,
//!  "tables": {"lineitem": 8, "orders": 8},
//!  "hosts": [
//!    {"address": "10.0.0.1:7070", "database": "/data/tpch", "partitions": {"lineitem": [0, 2, 4, 6], "orders": [0, 2, 4, 6]}},
//!    {"address": "10.0.0.2:7070", "database": "/srv/h1",    "partitions": {"lineitem": [1, 3, 5, 7], "orders": [1, 3, 5, 7]}}]}
//! ```
//!
//! Host `i` is the `i`-th entry, loaded with `flashscan load DB --host i/N`. `tables` gives
//! each table's partition count, so a partition nobody claims is seen. `database` is where
//! this machine (the coordinator, or whoever runs `cluster check`) reads the host's catalog:
//! the host's database itself when it is local, or a directory holding a copy of its
//! `catalog.json` (the coordinator plans from the catalogs; it reads no data file).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use flashscan_storage::{Catalog, HostSlot, TableMeta};
use serde::{Deserialize, Serialize};

use crate::error::ClusterError;

pub const CLUSTER_FILE_FORMAT: &str = "flashscan-cluster";
pub const CLUSTER_FILE_VERSION: u32 = 1;
/// cluster.json is a small file: hosts x tables x partitions numbers.
pub const CLUSTER_FILE_BYTES_MAX: u64 = 16 << 20;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterFile {
    pub format: String,
    pub version: u32,
    /// Partition count per table.
    pub tables: BTreeMap<String, u32>,
    pub hosts: Vec<HostEntry>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostEntry {
    /// `host:port` the worker listens on (`flashscan worker DB --listen ADDR`).
    pub address: String,
    /// The host's database (or a copy of its catalog.json) as seen from this machine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub database: Option<PathBuf>,
    /// Per table, the partitions this host owns.
    pub partitions: BTreeMap<String, Vec<u32>>,
}

/// What `flashscan cluster check` proved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckReport {
    pub host_count: usize,
    pub table_count: usize,
    /// Partitions over all tables, each owned by exactly one host.
    pub partition_count: u64,
    /// Hosts whose catalog was read and agrees with the file.
    pub catalogs_read: usize,
}

impl ClusterFile {
    pub fn read(path: &Path) -> Result<ClusterFile, ClusterError> {
        let bad = |reason: String| ClusterError::ClusterFile { path: path.to_path_buf(), reason };
        let bytes = flashscan_storage::fs_safe::read_capped(path, CLUSTER_FILE_BYTES_MAX)
            .map_err(|e| bad(e.to_string()))?
            .ok_or_else(|| bad("no such file (make one with `flashscan cluster make`)".into()))?;
        let file: ClusterFile = serde_json::from_slice(&bytes).map_err(|e| bad(format!("not a cluster file: {} at line {} column {}", json_kind(&e), e.line(), e.column())))?;
        if file.format != CLUSTER_FILE_FORMAT || file.version != CLUSTER_FILE_VERSION {
            return Err(bad(format!("format {:?} version {}: this build reads {CLUSTER_FILE_FORMAT:?} version {CLUSTER_FILE_VERSION}", file.format, file.version)));
        }
        Ok(file)
    }

    /// A cluster file from the hosts' databases (address and database of host 0, 1, ...),
    /// after checking that each is the host its position says.
    pub fn make(hosts: &[(String, PathBuf)]) -> Result<ClusterFile, ClusterError> {
        let mut file = ClusterFile { format: CLUSTER_FILE_FORMAT.into(), version: CLUSTER_FILE_VERSION, tables: BTreeMap::new(), hosts: Vec::new() };
        for (i, (address, database)) in hosts.iter().enumerate() {
            let catalog = Catalog::read(database)?;
            let host_error = |reason: String| ClusterError::Host { host: i as u32, address: address.clone(), reason };
            let place = catalog.host.as_ref().ok_or_else(|| host_error(format!("{} is not a cluster host: load it with `flashscan load DB --host {i}/{}`", database.display(), hosts.len())))?;
            if place.index as usize != i || place.count as usize != hosts.len() {
                return Err(host_error(format!("{} is host {}/{}, listed here as host {i}/{}: list the hosts in order", database.display(), place.index, place.count, hosts.len())));
            }
            for (name, table) in &catalog.tables {
                file.tables.insert(name.clone(), table.partitions.len() as u32);
            }
            file.hosts.push(HostEntry { address: address.clone(), database: Some(database.clone()), partitions: place.partitions.clone() });
        }
        file.check_claims(Path::new("cluster.json"))?;
        Ok(file)
    }

    /// Every partition of every table is owned by exactly one host, and by the host the
    /// round robin rule names (the rule `load --host` followed when it wrote the rows).
    pub fn check_claims(&self, path: &Path) -> Result<u64, ClusterError> {
        let bad = |reason: String| ClusterError::ClusterFile { path: path.to_path_buf(), reason };
        let count = self.hosts.len() as u32;
        if count == 0 {
            return Err(bad("no hosts".into()));
        }
        HostSlot::new(0, count).map_err(|e| bad(e.to_string()))?;
        let mut addresses = BTreeSet::new();
        for (i, h) in self.hosts.iter().enumerate() {
            if h.address.parse::<std::net::SocketAddr>().is_err() && !h.address.contains(':') {
                return Err(bad(format!("host {i}: address {:?} is not host:port", h.address)));
            }
            if !addresses.insert(h.address.as_str()) {
                return Err(bad(format!("host {i}: address {} is listed twice", h.address)));
            }
            if let Some(t) = h.partitions.keys().find(|t| !self.tables.contains_key(*t)) {
                return Err(bad(format!("host {i} ({}) claims partitions of table {t:?}, which `tables` does not list", h.address)));
            }
        }
        let mut total = 0u64;
        for (table, &partition_count) in &self.tables {
            // The count comes from the file: bounded before it sizes anything.
            if partition_count == 0 || partition_count > flashscan_storage::partitioning::PARTITION_COUNT_MAX {
                return Err(bad(format!(
                    "table {table:?} has {partition_count} partitions: a table has 1 to {} (flashscan's PARTITION_COUNT_MAX)",
                    flashscan_storage::partitioning::PARTITION_COUNT_MAX
                )));
            }
            let mut owners: Vec<Vec<usize>> = vec![Vec::new(); partition_count as usize];
            for (i, h) in self.hosts.iter().enumerate() {
                for &p in h.partitions.get(table).map(|v| v.as_slice()).unwrap_or_default() {
                    let Some(o) = owners.get_mut(p as usize) else {
                        return Err(bad(format!("host {i} ({}) claims partition {p} of {table}, which has {partition_count} partitions", h.address)));
                    };
                    o.push(i);
                }
            }
            for (p, o) in owners.iter().enumerate() {
                let expected = HostSlot::owner_of(p as u32, count) as usize;
                match o.as_slice() {
                    [] => return Err(bad(format!("partition {p} of {table} is owned by no host (host {expected} should hold it)"))),
                    [only] if *only == expected => {}
                    [only] => {
                        return Err(bad(format!("partition {p} of {table} is claimed by host {only}, but host {expected} holds it (partition p belongs to host p mod {count})")))
                    }
                    many => return Err(bad(format!("partition {p} of {table} is claimed by hosts {many:?}: each partition must be owned exactly once"))),
                }
            }
            total += partition_count as u64;
        }
        Ok(total)
    }

    /// `check_claims`, then each host's catalog (for hosts with a `database`) agrees with
    /// the file: same place, same tables, same partition counts, same partitions.
    pub fn check(&self, path: &Path) -> Result<CheckReport, ClusterError> {
        let partition_count = self.check_claims(path)?;
        let mut catalogs_read = 0;
        for (i, h) in self.hosts.iter().enumerate() {
            if h.database.is_some() {
                self.host_catalog(i)?;
                catalogs_read += 1;
            }
        }
        Ok(CheckReport { host_count: self.hosts.len(), table_count: self.tables.len(), partition_count, catalogs_read })
    }

    /// Host `i`'s catalog, checked against this file.
    pub fn host_catalog(&self, i: usize) -> Result<Catalog, ClusterError> {
        let h = self.hosts.get(i).ok_or_else(|| ClusterError::InvalidArgument(format!("no host {i}")))?;
        let host_error = |reason: String| ClusterError::Host { host: i as u32, address: h.address.clone(), reason };
        let database = h.database.as_ref().ok_or_else(|| host_error("no \"database\" given: the coordinator plans from each host's catalog (the database, or a directory holding a copy of its catalog.json)".into()))?;
        let catalog = Catalog::read(database).map_err(|e| host_error(e.to_string()))?;
        let place = catalog.host.as_ref().ok_or_else(|| host_error(format!("{} is not a cluster host (loaded without --host)", database.display())))?;
        let n = self.hosts.len();
        if place.index as usize != i || place.count as usize != n {
            return Err(host_error(format!("{} is host {}/{}, but cluster.json lists it as host {i}/{n}", database.display(), place.index, place.count)));
        }
        let names: BTreeSet<&String> = catalog.tables.keys().collect();
        let listed: BTreeSet<&String> = self.tables.keys().collect();
        if names != listed {
            return Err(host_error(format!("holds tables {names:?}, cluster.json lists {listed:?}")));
        }
        for (table, meta) in &catalog.tables {
            let count = self.tables.get(table).copied().unwrap_or(0);
            if meta.partitions.len() as u32 != count {
                return Err(host_error(format!("table {table} has {} partitions, cluster.json says {count}", meta.partitions.len())));
            }
            let claimed = h.partitions.get(table).cloned().unwrap_or_default();
            let held = place.partitions.get(table).cloned().unwrap_or_default();
            if claimed != held {
                return Err(host_error(format!("holds partitions {held:?} of {table}, cluster.json claims {claimed:?}")));
            }
        }
        Ok(catalog)
    }

    /// Every host's catalog, checked; then each table as the whole cluster holds it: the
    /// columns of host 0 (all hosts must agree) and each partition from its owner.
    pub fn merged_tables(&self, path: &Path) -> Result<BTreeMap<String, TableMeta>, ClusterError> {
        self.check_claims(path)?;
        let catalogs: Vec<Catalog> = (0..self.hosts.len()).map(|i| self.host_catalog(i)).collect::<Result<_, _>>()?;
        let count = self.hosts.len() as u32;
        let mut merged = BTreeMap::new();
        for (name, first) in catalogs[0].tables.iter() {
            let mut table = first.clone();
            table.row_count = 0;
            table.size_bytes = 0;
            // The coordinator reads no data file: the merged table names none.
            table.files.clear();
            table.filegroups.clear();
            for (i, c) in catalogs.iter().enumerate() {
                let t = c.tables.get(name).ok_or_else(|| ClusterError::Host { host: i as u32, address: self.hosts[i].address.clone(), reason: format!("has no table {name}") })?;
                if t.columns != first.columns || t.partition_by != first.partition_by || t.format != first.format {
                    return Err(ClusterError::Host {
                        host: i as u32,
                        address: self.hosts[i].address.clone(),
                        reason: format!("table {name} differs from host 0's (columns, partition key or format): load every host from the same source and options"),
                    });
                }
                table.size_bytes += t.size_bytes;
            }
            for (p, partition) in table.partitions.iter_mut().enumerate() {
                let owner = HostSlot::owner_of(p as u32, count) as usize;
                let own = catalogs[owner].tables.get(name).and_then(|t| t.partitions.get(p)).cloned();
                match own {
                    Some(own) if own.index == p as u32 => *partition = own,
                    _ => {
                        return Err(ClusterError::Host { host: owner as u32, address: self.hosts[owner].address.clone(), reason: format!("table {name} has no partition {p}") })
                    }
                }
                table.row_count += partition.row_count;
            }
            merged.insert(name.clone(), table);
        }
        Ok(merged)
    }
}

fn json_kind(e: &serde_json::Error) -> &'static str {
    match e.classify() {
        serde_json::error::Category::Io => "unreadable",
        serde_json::error::Category::Syntax => "not valid JSON",
        serde_json::error::Category::Data => "a field is missing, unknown or of the wrong type",
        serde_json::error::Category::Eof => "cut short",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(claims: &[&[u32]], partitions: u32) -> ClusterFile {
        ClusterFile {
            format: CLUSTER_FILE_FORMAT.into(),
            version: CLUSTER_FILE_VERSION,
            tables: [("t".to_string(), partitions)].into(),
            hosts: claims
                .iter()
                .enumerate()
                .map(|(i, c)| HostEntry { address: format!("127.0.0.1:{}", 7000 + i), database: None, partitions: [("t".to_string(), c.to_vec())].into() })
                .collect(),
        }
    }

    #[test]
    fn each_partition_owned_once_passes_and_every_other_shape_fails() {
        let p = Path::new("cluster.json");
        assert_eq!(file(&[&[0, 2], &[1, 3]], 4).check_claims(p).unwrap(), 4);
        let missing = file(&[&[0, 2], &[1]], 4).check_claims(p).unwrap_err().to_string();
        assert!(missing.contains("partition 3 of t is owned by no host"), "{missing}");
        let twice = file(&[&[0, 1, 2], &[1, 3]], 4).check_claims(p).unwrap_err().to_string();
        assert!(twice.contains("claimed by hosts [0, 1]"), "{twice}");
        let wrong_host = file(&[&[1, 2], &[0, 3]], 4).check_claims(p).unwrap_err().to_string();
        assert!(wrong_host.contains("but host 0 holds it"), "{wrong_host}");
        let beyond = file(&[&[0, 2, 4], &[1, 3]], 4).check_claims(p).unwrap_err().to_string();
        assert!(beyond.contains("has 4 partitions"), "{beyond}");
        for e in [missing, twice, wrong_host, beyond] {
            assert_eq!(e.lines().count(), 1);
        }
    }
}
