//! The catalog file: every table of a database, persisted atomically.
//!
//! `catalog.json` is one header line followed by the body:
//! `{"magic":"flashscan-catalog","format_version":1,"body_bytes":N,"body_crc32c":C}\n<body JSON>`.
//! It is replaced by `fs_safe::replace_file_atomic` (a unique `O_EXCL|O_NOFOLLOW` temporary,
//! fsync, rename over `catalog.json`, fsync of the directory): a reader sees the old catalog
//! or the new one, never a mix. Every path in it is checked on read (`fs_safe`): a catalog
//! pointing outside the database and its declared volumes is refused as a whole.
//!
//! Besides the tables it holds the indexes (`indexes`, since they share the tables' lock and
//! checksum), the declared volumes, and `unreferenced_files`: files flashscan created that no
//! table or index references (yet or any more), which the next writer removes under the lock.

use std::collections::BTreeMap;
use std::collections::HashSet;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::column::{ColumnType, DECIMAL_PRECISION_MAX};
use crate::error::StorageError;
use crate::fs_safe::DatabaseRoots;
use crate::table_meta::TableMeta;

pub const CATALOG_FILE_NAME: &str = "catalog.json";
pub const CATALOG_MAGIC: &str = "flashscan-catalog";
pub const CATALOG_FORMAT_VERSION: u32 = 1;

#[derive(Debug, Serialize, Deserialize)]
struct CatalogHeader {
    magic: String,
    format_version: u32,
    body_bytes: u64,
    body_crc32c: u32,
}

/// The catalog body.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Catalog {
    /// Bumped on every commit; new data file names carry it so they never collide.
    pub generation: u64,
    /// The next database-wide data file id.
    pub next_file_id: u32,
    /// The next LSN to stamp on loaded pages.
    pub next_lsn: u64,
    pub tables: BTreeMap<String, TableMeta>,
    /// Absolute directories outside the database that hold some of its data files; each
    /// carries the `.flashscan-volume` marker. Paths in the catalog point only here or into
    /// the database directory.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub volumes: Vec<String>,
    /// The B+tree indexes (`flashscan index create`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub indexes: Vec<IndexEntry>,
    /// Files flashscan created that nothing references: those a commit left behind
    /// (a dropped or replaced table's, a dropped index's) and those a write in progress is
    /// about to create (listed before they exist, so a crash leaves them named here). The
    /// next writer removes them under the lock; nothing else is ever swept.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unreferenced_files: Vec<String>,
    /// Databases made by `flashscan init` (which take SQL writes): the log and redo point.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write: Option<crate::write_meta::WriteMeta>,
    /// Cluster hosts (`flashscan load --host I/N`, issue 17): which host this database is
    /// and the partitions it holds. Absent for a database of one machine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<crate::host_place::HostPlace>,
    /// `CREATE VIEW`: each view's query as SQL text, planned again whenever the SQL session
    /// registers the tables. Absent (empty) in catalogs written before views existed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub views: Vec<ViewEntry>,
    /// Sequences by name (`SERIAL`, identity columns, `CREATE SEQUENCE`; `sequence.rs`).
    /// Absent (empty) in catalogs written before sequences existed.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub sequences: BTreeMap<String, crate::sequence::SequenceMeta>,
}

/// One view in the catalog. Tables and views share one namespace.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ViewEntry {
    /// Lower case, as SQL folds unquoted names.
    pub name: String,
    /// The view's query (`SELECT …`), as the SQL parser prints it.
    pub sql: String,
    /// The view's column names, in order: the declared ones (`CREATE VIEW v (a, b)`), then
    /// the query's own for any column not named.
    pub columns: Vec<String>,
    /// The tables and views the query reads, lower case: DROP of one of them is refused
    /// while this view exists (PostgreSQL's rule without CASCADE).
    #[serde(default)]
    pub reads: Vec<String>,
}

/// Views a catalog holds at most: each is planned at every registration of the tables.
pub const VIEW_COUNT_MAX: usize = 10_000;

/// One B+tree index in the catalog.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IndexEntry {
    pub name: String,
    pub table: String,
    pub columns: Vec<String>,
    /// The index file: a file name in the database directory.
    pub file: String,
    /// The tree's shape (root, height, counts) as the index crate writes it; storage keeps
    /// it opaque, the index crate checks it against the file's meta node on open.
    pub tree: serde_json::Value,
    pub size_bytes: u64,
    /// The table's load LSN when the index was built: a reload makes the index stale.
    pub table_load_lsn: u64,
    pub build_seconds: f64,
}

impl Catalog {
    pub fn path(dir: &Path) -> PathBuf {
        dir.join(CATALOG_FILE_NAME)
    }

    pub fn exists(dir: &Path) -> bool {
        Self::path(dir).is_file()
    }

    /// Reads and verifies `dir/catalog.json`.
    pub fn read(dir: &Path) -> Result<Catalog, StorageError> {
        let path = Self::path(dir);
        if !dir.is_dir() {
            return Err(StorageError::NotADatabase { dir: dir.to_path_buf() });
        }
        let Some(bytes) = crate::fs_safe::read_capped(&path, crate::fs_safe::SMALL_FILE_BYTES_MAX)? else {
            return Err(StorageError::NotADatabase { dir: dir.to_path_buf() });
        };
        let corrupt = |reason: String| StorageError::CatalogCorrupt { path: path.clone(), reason };
        let newline = bytes.iter().position(|&b| b == b'\n').ok_or_else(|| corrupt("no header line".into()))?;
        let header: CatalogHeader = serde_json::from_slice(&bytes[..newline]).map_err(|e| corrupt(format!("header: {}", json_error_place(&e))))?;
        if header.magic != CATALOG_MAGIC {
            return Err(corrupt("bad magic: not a flashscan catalog".into()));
        }
        if header.format_version != CATALOG_FORMAT_VERSION {
            return Err(corrupt(format!("format version {} (this build reads {CATALOG_FORMAT_VERSION})", header.format_version)));
        }
        let body = &bytes[newline + 1..];
        if body.len() as u64 != header.body_bytes {
            return Err(corrupt(format!("body is {} bytes, header says {}", body.len(), header.body_bytes)));
        }
        let crc = crc32c::crc32c(body);
        if crc != header.body_crc32c {
            return Err(corrupt(format!("checksum {crc:#010x}, header says {:#010x}", header.body_crc32c)));
        }
        let catalog: Catalog = serde_json::from_slice(body).map_err(|e| corrupt(format!("body: {}", json_error_place(&e))))?;
        for (name, table) in &catalog.tables {
            check_table(table).map_err(|reason| corrupt(format!("table {name:?}: {reason}")))?;
            // A format this build cannot read is refused here, in one line, before any
            // reader or writer decides anything by it.
            table.table_format()?;
        }
        check_views(&catalog).map_err(|reason| corrupt(format!("views: {reason}")))?;
        if let Some(host) = &catalog.host {
            check_host(&catalog, host).map_err(|reason| corrupt(format!("host place: {reason}")))?;
        }
        catalog.check_paths(dir)?;
        Ok(catalog)
    }

    /// Where this catalog's paths may point (the database directory and the declared
    /// volumes, each checked).
    pub fn roots(&self, dir: &Path) -> Result<DatabaseRoots, StorageError> {
        DatabaseRoots::new(dir, &self.volumes, &Self::path(dir))
    }

    /// Every path the catalog holds is confined (`fs_safe`), every run and row group lies in
    /// one of its table's files, and every index names a table that exists.
    fn check_paths(&self, dir: &Path) -> Result<(), StorageError> {
        let roots = self.roots(dir)?;
        let catalog_path = Self::path(dir);
        for (name, table) in &self.tables {
            let mut paths: HashSet<&str> = HashSet::new();
            for (i, f) in table.files.iter().enumerate() {
                roots.confine(&f.path, &|| format!("table {name:?} file {i}"), &catalog_path)?;
                paths.insert(f.path.as_str());
            }
            if let Some(d) = &table.deleted_rows {
                roots.confine(&d.path, &|| format!("table {name:?} deleted rows file"), &catalog_path)?;
            }
            for p in &table.partitions {
                let places = p.runs.iter().map(|r| &r.file).chain(p.row_groups.iter().map(|g| &g.file));
                for file in places {
                    if !paths.contains(file.as_str()) {
                        return Err(StorageError::PathOutsideDatabase {
                            catalog: catalog_path.clone(),
                            entry: format!("table {name:?} partition {}", p.index),
                            path: file.clone(),
                            reason: "a run or row group names a file the table does not list".into(),
                        });
                    }
                }
            }
        }
        for (i, index) in self.indexes.iter().enumerate() {
            roots.confine(&index.file, &|| format!("index {i} ({:?} on {:?})", index.name, index.table), &catalog_path)?;
            if !self.tables.contains_key(&index.table) {
                return Err(StorageError::CatalogCorrupt { path: catalog_path, reason: format!("index {:?} is on table {:?}, which does not exist", index.name, index.table) });
            }
        }
        for (i, f) in self.unreferenced_files.iter().enumerate() {
            roots.confine(f, &|| format!("unreferenced file {i}"), &catalog_path)?;
        }
        Ok(())
    }

    /// The indexes on `table`.
    pub fn indexes_on<'a>(&'a self, table: &'a str) -> impl Iterator<Item = &'a IndexEntry> + 'a {
        self.indexes.iter().filter(move |i| i.table == table)
    }

    /// Takes `table` and its indexes out of this catalog, listing their files as
    /// unreferenced (removed after the commit by `commit_and_sweep`).
    pub fn remove_table(&mut self, table: &str) -> Option<TableMeta> {
        let removed = self.tables.remove(table)?;
        self.unreferenced_files.extend(removed.files.iter().map(|f| f.path.clone()));
        self.unreferenced_files.extend(removed.deleted_rows.iter().map(|d| d.path.clone()));
        let (gone, kept): (Vec<IndexEntry>, Vec<IndexEntry>) = std::mem::take(&mut self.indexes).into_iter().partition(|i| i.table == table);
        self.indexes = kept;
        self.unreferenced_files.extend(gone.into_iter().map(|i| i.file));
        Some(removed)
    }

    /// DROP TABLE's part for sequences: those `table`'s SERIAL and identity columns own.
    pub fn remove_owned_sequences(&mut self, table: &str) {
        self.sequences.retain(|_, s| s.owned_by.as_deref() != Some(table));
    }

    /// The view named `name` (any case).
    pub fn view(&self, name: &str) -> Option<&ViewEntry> {
        self.views.iter().find(|v| v.name.eq_ignore_ascii_case(name))
    }

    /// The views whose query reads `relation` (a table or a view), by name.
    pub fn views_reading(&self, relation: &str) -> Vec<&str> {
        self.views.iter().filter(|v| v.reads.iter().any(|r| r.eq_ignore_ascii_case(relation))).map(|v| v.name.as_str()).collect()
    }

    /// Refuses to drop `relation` (a "table" or "view", `kind`) while a view reads it and is
    /// not among `dropped_too` (the other views the same statement drops).
    pub fn refuse_drop_read_by_views(&self, kind: &'static str, relation: &str, dropped_too: &[String]) -> Result<(), StorageError> {
        let readers: Vec<&str> = self.views_reading(relation).into_iter().filter(|v| !dropped_too.iter().any(|d| d.eq_ignore_ascii_case(v))).collect();
        if readers.is_empty() {
            return Ok(());
        }
        Err(StorageError::DependentViews { kind, name: relation.to_string(), views: readers.join(", ") })
    }

    /// CREATE [OR REPLACE] VIEW into this catalog (the caller commits it). A name a table has,
    /// or a view has without `or_replace`, is refused; a replacement keeps the old columns
    /// in order (it may add columns after them) and may not read itself, directly or
    /// through other views.
    pub fn put_view(&mut self, view: ViewEntry, or_replace: bool) -> Result<(), StorageError> {
        let name = view.name.to_ascii_lowercase();
        if self.tables.keys().any(|t| t.eq_ignore_ascii_case(&name)) {
            return Err(StorageError::RelationExists { name, kind: "table", hint: "" });
        }
        if view.columns.is_empty() {
            return Err(StorageError::ViewColumnsChanged { name, reason: "a view needs at least one column".into() });
        }
        if let Some(i) = view.columns.iter().enumerate().position(|(i, c)| view.columns[..i].contains(c)) {
            return Err(StorageError::ViewColumnsChanged { name, reason: format!("column {:?} appears twice", view.columns[i]) });
        }
        let existing = self.views.iter().position(|v| v.name == name);
        match existing {
            Some(_) if !or_replace => Err(StorageError::RelationExists { name, kind: "view", hint: ", or CREATE OR REPLACE VIEW" }),
            Some(i) => {
                let old = &self.views[i];
                if let Some((k, c)) = old.columns.iter().enumerate().find(|(k, c)| view.columns.get(*k) != Some(*c)) {
                    let reason = match view.columns.get(k) {
                        Some(new) => format!("column {} would be {new:?}, not {c:?}", k + 1),
                        None => format!("column {c:?} would be dropped"),
                    };
                    return Err(StorageError::ViewColumnsChanged { name, reason });
                }
                if self.reads_transitively(&view.reads, &name) {
                    return Err(StorageError::ViewColumnsChanged { name: name.clone(), reason: format!("the new query reads {name} itself (through a view)") });
                }
                self.views[i] = ViewEntry { name, ..view };
                Ok(())
            }
            None => {
                if self.views.len() >= VIEW_COUNT_MAX {
                    return Err(StorageError::ViewColumnsChanged { name, reason: format!("the database holds {VIEW_COUNT_MAX} views, the most it keeps: drop one first") });
                }
                self.views.push(ViewEntry { name, ..view });
                self.views.sort_by(|a, b| a.name.cmp(&b.name));
                Ok(())
            }
        }
    }

    /// True when reading `reads` reaches `target`, directly or through the views in this
    /// catalog.
    fn reads_transitively(&self, reads: &[String], target: &str) -> bool {
        let mut seen: HashSet<String> = HashSet::new();
        let mut todo: Vec<String> = reads.to_vec();
        while let Some(r) = todo.pop() {
            if r.eq_ignore_ascii_case(target) {
                return true;
            }
            if !seen.insert(r.to_ascii_lowercase()) {
                continue;
            }
            if let Some(v) = self.view(&r) {
                todo.extend(v.reads.iter().cloned());
            }
        }
        false
    }

    /// DROP VIEW [IF EXISTS] a, b, …: every named view out of this catalog (the caller
    /// commits it), or nothing changed on the first refusal (a table's name, an unknown
    /// name without `if_exists`, a view another view reads that this statement keeps).
    /// Returns the names dropped.
    pub fn remove_views(&mut self, names: &[String], if_exists: bool) -> Result<Vec<String>, StorageError> {
        let mut dropped: Vec<String> = Vec::new();
        for n in names {
            let name = n.to_ascii_lowercase();
            if self.tables.keys().any(|t| t.eq_ignore_ascii_case(&name)) {
                return Err(StorageError::WrongObjectType { name, wanted: "view", actual: "table", actual_upper: "TABLE" });
            }
            match self.view(&name) {
                Some(_) => {
                    if !dropped.contains(&name) {
                        dropped.push(name)
                    }
                }
                None if if_exists => {}
                None => {
                    let known: Vec<&str> = self.views.iter().map(|v| v.name.as_str()).collect();
                    return Err(StorageError::UnknownView { name, known: if known.is_empty() { "(none)".into() } else { known.join(", ") } });
                }
            }
        }
        for name in &dropped {
            self.refuse_drop_read_by_views("view", name, &dropped)?;
        }
        self.views.retain(|v| !dropped.contains(&v.name));
        Ok(dropped)
    }

    /// Writes this catalog, then removes the files it lists as unreferenced (only confined
    /// paths with names flashscan generates), then writes it once more without them. A crash
    /// in between leaves them listed for the next writer. Call under the database lock.
    pub fn commit_and_sweep(&mut self, dir: &Path) -> Result<SweepReport, StorageError> {
        self.write_atomic(dir)?;
        let report = self.sweep(dir)?;
        if report.removed_count > 0 || report.missing_count > 0 {
            self.write_atomic(dir)?;
        }
        Ok(report)
    }

    /// Removes the unreferenced files (see `commit_and_sweep`); keeps listed those it could
    /// not remove, and drops from the list the refused ones (never ours to delete).
    fn sweep(&mut self, dir: &Path) -> Result<SweepReport, StorageError> {
        let roots = self.roots(dir)?;
        let catalog_path = Self::path(dir);
        let referenced: HashSet<String> =
            self.tables.values().flat_map(|t| t.files.iter().map(|f| f.path.clone()).chain(t.deleted_rows.iter().map(|d| d.path.clone()))).chain(self.indexes.iter().map(|i| i.file.clone())).collect();
        let mut report = SweepReport::default();
        let mut kept = Vec::new();
        for f in std::mem::take(&mut self.unreferenced_files) {
            if referenced.contains(&f) {
                continue;
            }
            match roots.remove_generated(&f, &|| "unreferenced file".to_string(), &catalog_path) {
                Ok(true) => report.removed_count += 1,
                Ok(false) => report.missing_count += 1,
                Err(StorageError::Io { .. }) => kept.push(f),
                Err(_) => report.refused_count += 1,
            }
        }
        self.unreferenced_files = kept;
        Ok(report)
    }

    /// Replaces `dir/catalog.json` atomically with this catalog.
    pub fn write_atomic(&self, dir: &Path) -> Result<(), StorageError> {
        let body = serde_json::to_vec(self).map_err(|e| StorageError::Worker(format!("serializing catalog: {e}")))?;
        let header = CatalogHeader {
            magic: CATALOG_MAGIC.to_string(),
            format_version: CATALOG_FORMAT_VERSION,
            body_bytes: body.len() as u64,
            body_crc32c: crc32c::crc32c(&body),
        };
        let mut bytes = serde_json::to_vec(&header).map_err(|e| StorageError::Worker(format!("serializing catalog: {e}")))?;
        bytes.push(b'\n');
        bytes.extend_from_slice(&body);

        crate::fs_safe::replace_file_atomic(dir, CATALOG_FILE_NAME, &bytes)
    }
}

/// Where JSON failed to parse, without the parser's message (which can quote the file's
/// strings): error messages never echo bytes of a file that may not be ours.
fn json_error_place(e: &serde_json::Error) -> String {
    let kind = match e.classify() {
        serde_json::error::Category::Io => "unreadable",
        serde_json::error::Category::Syntax => "not valid JSON",
        serde_json::error::Category::Data => "a field has the wrong type or is missing",
        serde_json::error::Category::Eof => "cut short",
    };
    format!("{kind} at line {} column {}", e.line(), e.column())
}

/// What a sweep of unreferenced files did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SweepReport {
    pub removed_count: usize,
    /// Listed but already gone (a crash after the remove, before the catalog rewrite).
    pub missing_count: usize,
    /// Listed but refused: not a name flashscan generates, or not a regular file.
    pub refused_count: usize,
}

/// What the JSON types alone do not rule out but the readers rely on: a column type Arrow
/// can build (a decimal of 1..=18 digits with its scale at most its precision; anything
/// else makes the scan's batches fail their own schema), and page and row totals that fit
/// a u64 (readers sum them).
fn check_table(table: &TableMeta) -> Result<(), String> {
    fn total(what: &str, mut counts: impl Iterator<Item = u64>) -> Result<(), String> {
        counts.try_fold(0u64, |sum, n| sum.checked_add(n)).map(drop).ok_or_else(|| format!("{what} add up past 2^64"))
    }
    total("partition page counts", table.partitions.iter().map(|p| p.page_count))?;
    total("partition row counts", table.partitions.iter().map(|p| p.row_count))?;
    total("row group row counts", table.partitions.iter().flat_map(|p| &p.row_groups).map(|g| g.row_count))?;
    total("run page counts", table.partitions.iter().flat_map(|p| &p.runs).map(|r| u64::from(r.page_count)))?;
    // Offsets and lengths from disk: checked arithmetic, and every run and row group inside
    // its file's recorded size, so no reader computes an end past 2^64 or sizes a buffer
    // from a length the file cannot hold (readers check the file's real length too).
    let file_sizes: BTreeMap<&str, u64> = table.files.iter().map(|f| (f.path.as_str(), f.size_bytes)).collect();
    for p in &table.partitions {
        for r in &p.runs {
            let end = u64::from(r.page_count).checked_mul(crate::PAGE_SIZE_BYTES as u64).and_then(|n| n.checked_add(r.offset_bytes));
            if end.is_none_or(|end| file_sizes.get(r.file.as_str()).is_some_and(|&size| end > size)) {
                return Err(format!("partition {}: a run at offset {} of {} pages ends past its file", p.index, r.offset_bytes, r.page_count));
            }
        }
        for g in &p.row_groups {
            let end = g.offset_bytes.checked_add(g.total_bytes);
            if g.metadata_bytes > g.total_bytes || end.is_none_or(|end| file_sizes.get(g.file.as_str()).is_some_and(|&size| end > size)) {
                return Err(format!("partition {}: the row group at offset {} ({} bytes, {} of metadata) does not fit its file", p.index, g.offset_bytes, g.total_bytes, g.metadata_bytes));
            }
        }
    }
    for column in &table.columns {
        if let ColumnType::Decimal { precision, scale } = column.column_type {
            if !(1..=DECIMAL_PRECISION_MAX).contains(&precision) || i16::from(scale) > i16::from(precision) {
                return Err(format!("column {:?} is decimal({precision}, {scale}): precision must be 1..={DECIMAL_PRECISION_MAX} and scale at most the precision", column.name));
            }
        }
        if let ColumnType::WideDecimal { .. } = column.column_type {
            column.column_type.check_parameters().map_err(|reason| format!("column {:?} is {reason}", column.name))?;
        }
    }
    Ok(())
}

/// Views: lower-case names, unique, none a table's name, at most `VIEW_COUNT_MAX`, each
/// with its columns. (What a view reads is not checked: a table dropped by an older
/// flashscan leaves the view in place, and its use fails naming it.)
fn check_views(catalog: &Catalog) -> Result<(), String> {
    if catalog.views.len() > VIEW_COUNT_MAX {
        return Err(format!("{} views, more than the {VIEW_COUNT_MAX} a catalog holds", catalog.views.len()));
    }
    let mut names: HashSet<&str> = HashSet::new();
    for v in &catalog.views {
        if v.name != v.name.to_ascii_lowercase() || v.name.is_empty() {
            return Err(format!("view name {:?} is not lower case", v.name));
        }
        if !names.insert(v.name.as_str()) {
            return Err(format!("view {:?} appears twice", v.name));
        }
        if catalog.tables.contains_key(&v.name) {
            return Err(format!("view {:?} has a table's name", v.name));
        }
        if v.columns.is_empty() || v.sql.trim().is_empty() {
            return Err(format!("view {:?} has no columns or no query", v.name));
        }
    }
    Ok(())
}

/// A host's catalog holds rows only in the partitions it owns: a partition of another
/// host with pages would be counted twice by a cluster query.
fn check_host(catalog: &Catalog, host: &crate::host_place::HostPlace) -> Result<(), String> {
    host.check()?;
    let slot = host.slot();
    for (name, table) in &catalog.tables {
        if let Some(p) = table.partitions.iter().find(|p| !slot.owns(p.index) && (p.page_count > 0 || p.row_count > 0)) {
            return Err(format!("table {name:?} has rows in partition {}, which host {slot} does not own", p.index));
        }
    }
    Ok(())
}

pub use crate::fs_safe::sync_dir;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::column::ColumnDef;

    fn table_with(column_type: ColumnType) -> TableMeta {
        TableMeta::heap_without_rows("t", vec![ColumnDef { name: "d".into(), column_type, nullable: true }])
    }

    /// Found by fuzz/catalog: partition page counts summing past u64::MAX overflowed in
    /// `TableMeta::page_count` (a panic with overflow checks, a wrong count without).
    #[test]
    fn totals_past_u64_are_corrupt() {
        let dir = tempfile::tempdir().unwrap();
        let partition = |page_count| crate::PartitionMeta { index: 0, row_count: 1, page_count, filegroup: 0, runs: vec![], row_groups: vec![] };
        let mut table = table_with(ColumnType::Int64);
        table.partitions = vec![partition(u64::MAX), partition(1)];
        let mut catalog = Catalog::default();
        catalog.tables.insert("t".into(), table.clone());
        catalog.write_atomic(dir.path()).unwrap();
        let err = Catalog::read(dir.path()).unwrap_err().to_string();
        assert!(err.contains("page counts"), "{err}");
        table.partitions[0].page_count = u64::MAX - 1;
        catalog.tables.insert("t".into(), table);
        catalog.write_atomic(dir.path()).unwrap();
        assert_eq!(Catalog::read(dir.path()).unwrap().tables["t"].page_count(), u64::MAX);
    }

    /// Found by fuzz/catalog: a checksummed catalog with decimal(0, 0) was accepted, and the
    /// first scan of the table panicked in `HeapDecoder::finish` (Arrow rebuilt the column
    /// as decimal(38, 10), which no longer matched the schema).
    #[test]
    fn decimal_types_arrow_cannot_build_are_corrupt() {
        let dir = tempfile::tempdir().unwrap();
        for (precision, scale) in [(0u8, 0i8), (19, 2), (40, 2), (5, 6)] {
            let mut catalog = Catalog::default();
            catalog.tables.insert("t".into(), table_with(ColumnType::Decimal { precision, scale }));
            catalog.write_atomic(dir.path()).unwrap();
            let err = Catalog::read(dir.path()).unwrap_err();
            assert!(matches!(err, StorageError::CatalogCorrupt { .. }), "decimal({precision}, {scale}): {err}");
        }
        for (precision, scale) in [(1u8, 0i8), (15, 2), (18, 18), (10, -2)] {
            let mut catalog = Catalog::default();
            catalog.tables.insert("t".into(), table_with(ColumnType::Decimal { precision, scale }));
            catalog.write_atomic(dir.path()).unwrap();
            let read = Catalog::read(dir.path()).unwrap();
            let mut decoder = crate::HeapDecoder::new(&read.tables["t"], &[0]);
            assert_eq!(decoder.finish().num_rows(), 0);
        }
    }

    fn view(name: &str, reads: &[&str], columns: &[&str]) -> ViewEntry {
        ViewEntry { name: name.into(), sql: "select 1".into(), columns: columns.iter().map(|c| c.to_string()).collect(), reads: reads.iter().map(|r| r.to_string()).collect() }
    }

    /// Views round-trip through the catalog file, share the tables' namespace, and a view or
    /// table another view reads is not dropped.
    #[test]
    fn views_are_kept_and_guard_what_they_read() {
        let dir = tempfile::tempdir().unwrap();
        let mut catalog = Catalog::default();
        catalog.tables.insert("t".into(), table_with(ColumnType::Int64));
        catalog.put_view(view("V1", &["t"], &["d"]), false).unwrap();
        catalog.put_view(view("v2", &["v1"], &["d", "e"]), false).unwrap();
        assert_eq!(catalog.views.iter().map(|v| v.name.as_str()).collect::<Vec<_>>(), ["v1", "v2"]);
        assert!(matches!(catalog.put_view(view("t", &[], &["a"]), true), Err(StorageError::RelationExists { kind: "table", .. })));
        assert!(matches!(catalog.put_view(view("v1", &["t"], &["d"]), false), Err(StorageError::RelationExists { kind: "view", .. })));
        // A replacement keeps the old columns (and may add some), and may not read itself.
        assert!(matches!(catalog.put_view(view("v1", &["t"], &["x"]), true), Err(StorageError::ViewColumnsChanged { .. })));
        assert!(matches!(catalog.put_view(view("v1", &["v2"], &["d", "f"]), true), Err(StorageError::ViewColumnsChanged { .. })));
        catalog.put_view(view("v1", &["t"], &["d", "f"]), true).unwrap();
        assert_eq!(catalog.view("v1").unwrap().columns, ["d", "f"]);
        catalog.write_atomic(dir.path()).unwrap();
        let read = Catalog::read(dir.path()).unwrap();
        assert_eq!(read.views, catalog.views);
        // Dropping what a view reads is refused, naming the view; dropping both together works.
        let err = catalog.refuse_drop_read_by_views("table", "t", &[]).unwrap_err();
        assert!(err.to_string().contains("view v1 reads it"), "{err}");
        assert!(matches!(catalog.clone().remove_views(&["v1".into()], false), Err(StorageError::DependentViews { .. })));
        assert!(matches!(catalog.clone().remove_views(&["t".into()], false), Err(StorageError::WrongObjectType { .. })));
        assert!(matches!(catalog.clone().remove_views(&["nope".into()], false), Err(StorageError::UnknownView { .. })));
        assert_eq!(catalog.clone().remove_views(&["nope".into()], true).unwrap(), Vec::<String>::new());
        assert_eq!(catalog.remove_views(&["v1".into(), "V2".into()], false).unwrap(), ["v1", "v2"]);
        assert!(catalog.views.is_empty());
    }

    /// A catalog written before views existed (no `views` key) opens with none; a view with
    /// a table's name is corrupt.
    #[test]
    fn catalogs_without_views_open_and_bad_views_are_corrupt() {
        let dir = tempfile::tempdir().unwrap();
        let mut catalog = Catalog::default();
        catalog.tables.insert("t".into(), table_with(ColumnType::Int64));
        catalog.write_atomic(dir.path()).unwrap();
        let bytes = std::fs::read(Catalog::path(dir.path())).unwrap();
        assert!(!String::from_utf8_lossy(&bytes).contains("\"views\""), "no views key when there are none");
        assert!(Catalog::read(dir.path()).unwrap().views.is_empty());
        catalog.views.push(view("t", &[], &["a"]));
        catalog.write_atomic(dir.path()).unwrap();
        assert!(matches!(Catalog::read(dir.path()), Err(StorageError::CatalogCorrupt { .. })));
    }

    /// ANALYZE's statistics survive a write and a read, and a catalog written before them
    /// (no `statistics` key) reads as "never analysed".
    #[test]
    fn table_statistics_are_kept_and_optional() {
        let dir = tempfile::tempdir().unwrap();
        let mut catalog = Catalog::default();
        catalog.tables.insert("t".into(), table_with(ColumnType::Int64));
        catalog.write_atomic(dir.path()).unwrap();
        assert!(!String::from_utf8_lossy(&std::fs::read(Catalog::path(dir.path())).unwrap()).contains("\"statistics\""));
        assert_eq!(Catalog::read(dir.path()).unwrap().tables["t"].statistics, None);
        let measured = crate::TableStatisticsMeta { row_count: 1_000, distinct_counts: vec![Some(977)] };
        catalog.tables.get_mut("t").unwrap().statistics = Some(measured.clone());
        catalog.write_atomic(dir.path()).unwrap();
        assert_eq!(Catalog::read(dir.path()).unwrap().tables["t"].statistics, Some(measured));
    }

    /// A catalog naming a table format this build does not know (a newer flashscan wrote
    /// it) is refused at read, in one line naming the table and the format.
    #[test]
    fn an_unknown_table_format_is_refused_at_read() {
        let dir = tempfile::tempdir().unwrap();
        let mut table = table_with(ColumnType::Int64);
        table.format = "heap_zebra".into();
        let mut catalog = Catalog::default();
        catalog.tables.insert("t".into(), table);
        catalog.write_atomic(dir.path()).unwrap();
        let err = Catalog::read(dir.path()).unwrap_err();
        assert!(matches!(&err, StorageError::UnknownTableFormat { table, format } if table == "t" && format == "heap_zebra"), "{err:?}");
        let line = err.to_string();
        assert!(line.contains("heap_zebra") && line.contains("newer flashscan"), "{line}");
        assert_eq!(line.lines().count(), 1);
        assert!(err.is_user_input());
    }
}
