//! ALTER TABLE's changes of columns and names: ADD COLUMN, DROP COLUMN, ALTER COLUMN …
//! TYPE / SET NOT NULL / DROP NOT NULL, RENAME COLUMN, ALTER COLUMN SET / DROP DEFAULT, and
//! RENAME TO.
//!
//! Every change holds the table exclusively (the change lock in `Table` mode: transactions
//! that change its rows end first, new ones wait) and the state with no commit in flight,
//! and checkpoints first, so no row of the table is outside its pages. Then:
//! - **ADD / DROP COLUMN and ALTER COLUMN … TYPE / NOT NULL rewrite the table** (`flashscan_storage::rebuild_table_locked`
//!   with a `Reshape`): the live rows are copied into new files with the new columns, and
//!   one atomic catalog commit switches to them, with a new table id (so a transaction that
//!   staged rows in the old shape fails at its commit, nothing written, instead of logging
//!   rows of the wrong shape). O(rows), as PostgreSQL's ADD COLUMN with a volatile default
//!   and SQL Server's offline ALTER; a metadata-only add (PostgreSQL 11's `attmissingval`)
//!   would need every decoder to read pages of older shapes — not built.
//! - **RENAME, SET / DROP DEFAULT change only the catalog**: one atomic commit; the pages,
//!   the table id and the row ids stay (a rename's files keep their names: the catalog
//!   holds their paths).
//!
//! After the commit the table's delta is replaced by one made from the new catalog entry
//! (a snapshot decodes with its delta's table meta); its SQL indexes are built again when
//! next used. A table that views read is refused (a view keeps its query's text, which
//! names columns and tables), as are tables with `flashscan index create` indexes (their
//! row locators would not survive a rewrite): say what to drop first.

use std::sync::Arc;

use arrow::array::ArrayRef;
use flashscan_storage::{Catalog, ColumnDef, ColumnDefaultMeta, ColumnType, RebuildOptions, Reshape, SequenceMeta, StorageError, TableMeta};

use crate::checkpoint::CheckpointOptions;
use crate::delta::TableDelta;
use crate::error::WriteError;
use crate::insert::Transaction;
use crate::table_lock::LockMode;
use crate::write_path::{key_of, meta_of, StateGuard, WritePath};

/// One ALTER TABLE change.
pub enum Alteration<'a> {
    /// ADD COLUMN: the new column, its default, and the values the existing rows get.
    AddColumn { column: ColumnDef, default: Option<ColumnDefaultMeta>, if_not_exists: bool, fill: ColumnFill<'a> },
    DropColumn { column: String, if_exists: bool },
    RenameColumn { from: String, to: String },
    /// SET DEFAULT (`Some`) or DROP DEFAULT (`None`).
    SetDefault { column: String, default: Option<ColumnDefaultMeta> },
    /// ALTER COLUMN … TYPE (`column_type`), SET NOT NULL (`nullable: Some(false)`), DROP NOT
    /// NULL (`Some(true)`): a rewrite, every value converted or checked.
    ChangeColumn { column: String, column_type: Option<ColumnType>, nullable: Option<bool> },
    RenameTable { to: String },
}

impl std::fmt::Debug for Alteration<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Alteration::AddColumn { column, .. } => write!(f, "AddColumn({})", column.name),
            Alteration::DropColumn { column, .. } => write!(f, "DropColumn({column})"),
            Alteration::RenameColumn { from, to } => write!(f, "RenameColumn({from} -> {to})"),
            Alteration::SetDefault { column, default } => write!(f, "SetDefault({column}, {:?})", default.as_ref().map(|d| &d.sql)),
            Alteration::ChangeColumn { column, column_type, nullable } => write!(f, "ChangeColumn({column}, {column_type:?}, {nullable:?})"),
            Alteration::RenameTable { to } => write!(f, "RenameTable({to})"),
        }
    }
}

/// The values ADD COLUMN gives the rows a table has.
pub enum ColumnFill<'a> {
    /// `fill(n)`: the values of `n` rows (the default computed once, NULLs, or a volatile
    /// default computed per row by the caller).
    Values(&'a (dyn Fn(usize) -> Result<ArrayRef, StorageError> + Sync)),
    /// A new sequence the column owns (SERIAL, GENERATED … AS IDENTITY): the rows are
    /// numbered from it, as PostgreSQL numbers them, and it goes on from the last value.
    Sequence { name: String, meta: SequenceMeta },
}

/// What an ALTER TABLE did, for its status line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AlterOutcome {
    Done(String),
    /// IF [NOT] EXISTS found nothing to do.
    Skipped(String),
}

impl WritePath {
    /// Runs one ALTER TABLE change on `table_name` (see the module comment).
    pub fn alter_table(&self, table_name: &str, alteration: Alteration) -> Result<AlterOutcome, WriteError> {
        let key = {
            let st = self.lock_state_shared()?;
            Self::require_writer(&st)?;
            key_of(&st.catalog, table_name).ok_or_else(|| Self::no_table(&st.catalog, table_name))?
        };
        let mut lock = Transaction::new();
        self.take_change_lock(&mut lock, &key, LockMode::Table)?;
        let mut st = self.lock_state()?;
        self.refuse_cluster_host(&st, "ALTER TABLE")?;
        let Some(table) = st.catalog.tables.get(&key).cloned() else { return Err(WriteError::InvalidArgument(format!("table {key} was dropped meanwhile"))) };
        let outcome = match alteration {
            Alteration::AddColumn { column, default, if_not_exists, fill } => {
                if let Some(c) = table.columns.iter().find(|c| c.name.eq_ignore_ascii_case(&column.name)) {
                    if if_not_exists {
                        return Ok(AlterOutcome::Skipped(format!("column \"{}\" of relation \"{key}\" already exists, skipping", c.name)));
                    }
                    return Err(WriteError::DuplicateColumn { table: key, column: c.name.clone() });
                }
                if table.columns.len() >= u16::MAX as usize {
                    return Err(WriteError::InvalidArgument(format!("table {key} has {} columns, the most a table can have", table.columns.len())));
                }
                self.refuse_rewrite(&st.catalog, &table, "ADD COLUMN")?;
                let name = column.name.clone();
                let data_type = column.column_type.arrow_type();
                let mut columns = table.columns.clone();
                columns.push(column);
                let mut sources: Vec<Option<usize>> = (0..table.columns.len()).map(Some).collect();
                sources.push(None);
                let default = default.map(|d| ColumnDefaultMeta { column: name.clone(), ..d });
                let change = move |t: &mut TableMeta| {
                    t.column_defaults.extend(default.clone());
                };
                match fill {
                    ColumnFill::Values(fill) => {
                        let fill_all = |n: usize| fill(n).map(|a| vec![a]);
                        self.rewrite(&mut st, &key, Reshape { columns, sources, fill: &fill_all }, &change, &|_| {})?;
                    }
                    ColumnFill::Sequence { name: sequence, meta } => {
                        let c = &st.catalog;
                        if c.sequences.contains_key(&sequence) || c.tables.contains_key(&sequence) || c.view(&sequence).is_some() {
                            return Err(StorageError::RelationExists { name: sequence, kind: "relation", hint: "" }.into());
                        }
                        let numbering = SequenceNumbering::new(&sequence, &meta);
                        let fill_all = |n: usize| numbering.next(n, &data_type).map(|a| vec![a]);
                        let add_sequence = |c: &mut Catalog| {
                            let reserved_through = numbering.last();
                            c.sequences.insert(sequence.clone(), SequenceMeta { reserved_through, owned_by: Some(key.clone()), ..meta.clone() });
                        };
                        self.sequences.forget(std::slice::from_ref(&sequence));
                        self.rewrite(&mut st, &key, Reshape { columns, sources, fill: &fill_all }, &change, &add_sequence)?;
                        self.sequences.forget(std::slice::from_ref(&sequence));
                    }
                }
                AlterOutcome::Done(format!("added column {name} to {key}"))
            }
            Alteration::DropColumn { column, if_exists } => {
                let Ok(i) = table.column_index(&column) else {
                    if if_exists {
                        return Ok(AlterOutcome::Skipped(format!("column \"{column}\" of relation \"{key}\" does not exist, skipping")));
                    }
                    return Err(StorageError::UnknownColumn { table: key, column, known: table.columns.iter().map(|c| c.name.as_str()).collect::<Vec<_>>().join(", ") }.into());
                };
                let name = table.columns[i].name.clone();
                if table.columns.len() == 1 {
                    return Err(WriteError::NotSupported(format!("cannot drop column {name}, the only column of table {key}: DROP TABLE {key} instead")));
                }
                if table.partition_by.eq_ignore_ascii_case(&name) {
                    return Err(WriteError::NotSupported(format!(
                        "cannot drop column {name} of table {key}: the table's rows are hash partitioned on it; copy the other columns into a new table (CREATE TABLE … AS SELECT) instead"
                    )));
                }
                self.refuse_rewrite(&st.catalog, &table, "DROP COLUMN")?;
                let columns: Vec<ColumnDef> = table.columns.iter().enumerate().filter(|&(j, _)| j != i).map(|(_, c)| c.clone()).collect();
                let sources: Vec<Option<usize>> = (0..table.columns.len()).filter(|&j| j != i).map(Some).collect();
                let no_fill = |_: usize| Ok(Vec::new());
                // As PostgreSQL: the indexes and constraints over the column go with it, and
                // so does the sequence its SERIAL or identity default owns.
                let owned_sequence = table.column_defaults.iter().find(|d| d.column.eq_ignore_ascii_case(&name)).and_then(|d| d.sequence.clone());
                let dropped = name.clone();
                let change = move |t: &mut TableMeta| {
                    t.column_defaults.retain(|d| !d.column.eq_ignore_ascii_case(&dropped));
                    t.indexes.retain(|ix| !ix.columns.iter().any(|c| c.eq_ignore_ascii_case(&dropped)));
                };
                let sequences: Vec<String> = owned_sequence.into_iter().collect();
                self.sequences.forget(&sequences);
                let drop_sequences = |c: &mut Catalog| c.sequences.retain(|name, _| !sequences.contains(name));
                self.rewrite(&mut st, &key, Reshape { columns, sources, fill: &no_fill }, &change, &drop_sequences)?;
                AlterOutcome::Done(format!("dropped column {name} of {key}"))
            }
            Alteration::RenameColumn { from, to } => {
                let i = table.column_index(&from)?;
                let old = table.columns[i].name.clone();
                if let Some(c) = table.columns.iter().find(|c| c.name.eq_ignore_ascii_case(&to) && !c.name.eq_ignore_ascii_case(&old)) {
                    return Err(WriteError::DuplicateColumn { table: key, column: c.name.clone() });
                }
                refuse_read_by_views(&st.catalog, &key, "RENAME COLUMN")?;
                let mut next = table.clone();
                next.columns[i].name = to.clone();
                let renamed = |c: &mut String| {
                    if c.eq_ignore_ascii_case(&old) {
                        *c = to.clone();
                    }
                };
                renamed(&mut next.partition_by);
                for d in &mut next.column_defaults {
                    renamed(&mut d.column);
                }
                for ix in &mut next.indexes {
                    ix.columns.iter_mut().for_each(renamed);
                }
                // Measured under the old name; ANALYZE measures them again.
                next.statistics = None;
                self.replace_meta(&mut st, &key, next, None)?;
                AlterOutcome::Done(format!("renamed column {old} of {key} to {to}"))
            }
            Alteration::SetDefault { column, default } => {
                let i = table.column_index(&column)?;
                let name = table.columns[i].name.clone();
                let current = table.column_defaults.iter().find(|d| d.column.eq_ignore_ascii_case(&name));
                if current.is_some_and(|d| d.identity) {
                    return Err(WriteError::NotSupported(format!(
                        "column \"{name}\" of relation \"{key}\" is an identity column: its values come from its sequence; ALTER … DROP IDENTITY is not supported yet"
                    )));
                }
                let mut next = table.clone();
                // The sequence a SERIAL column owns stays (PostgreSQL keeps it too, owned by the column).
                next.column_defaults.retain(|d| !d.column.eq_ignore_ascii_case(&name));
                let what = match default {
                    Some(d) => {
                        let what = format!("default of {key}.{name} set to {}", d.sql);
                        let sequence = current.and_then(|c| c.sequence.clone());
                        next.column_defaults.push(ColumnDefaultMeta { column: name.clone(), sequence, ..d });
                        what
                    }
                    // A SERIAL column's sequence stays, owned by the table (DROP TABLE drops it).
                    None if current.is_some() => format!("default of {key}.{name} dropped"),
                    None => format!("{key}.{name} had no default"),
                };
                self.replace_meta(&mut st, &key, next, None)?;
                AlterOutcome::Done(what)
            }
            Alteration::ChangeColumn { column, column_type, nullable } => {
                let i = table.column_index(&column)?;
                let mut changed = table.columns[i].clone();
                let name = changed.name.clone();
                if let Some(t) = column_type {
                    if t != changed.column_type && table.partition_by.eq_ignore_ascii_case(&name) {
                        return Err(WriteError::NotSupported(format!(
                            "cannot change the type of column {name} of table {key}: the table's rows are hash partitioned on it; copy the table into a new one (CREATE TABLE, INSERT INTO … SELECT) instead"
                        )));
                    }
                    changed.column_type = t;
                }
                if let Some(n) = nullable {
                    if n && table.indexes.iter().any(|ix| ix.primary && ix.columns.iter().any(|c| c.eq_ignore_ascii_case(&name))) {
                        return Err(WriteError::InvalidArgument(format!("column \"{name}\" is in a primary key: it stays NOT NULL")));
                    }
                    changed.nullable = n;
                }
                if changed == table.columns[i] {
                    return Ok(AlterOutcome::Done(format!("column {name} of {key} unchanged")));
                }
                self.refuse_rewrite(&st.catalog, &table, "ALTER COLUMN")?;
                let mut columns = table.columns.clone();
                columns[i] = changed;
                // Every index over the column must still fit it (an orderable type).
                let mut shaped = table.clone();
                shaped.columns = columns.clone();
                for ix in &table.indexes {
                    crate::key_index::KeyIndex::new(&shaped, ix.clone())?;
                }
                let sources: Vec<Option<usize>> = (0..table.columns.len()).map(Some).collect();
                let no_fill = |_: usize| Ok(Vec::new());
                self.rewrite(&mut st, &key, Reshape { columns, sources, fill: &no_fill }, &|_| {}, &|_| {})?;
                AlterOutcome::Done(format!("column {name} of {key} changed"))
            }
            Alteration::RenameTable { to } => {
                let to = to.to_ascii_lowercase();
                if !flashscan_storage::load::valid_table_name(&to) {
                    return Err(WriteError::InvalidArgument(format!("table name {to:?}: use letters, digits and _")));
                }
                if to == key {
                    return Ok(AlterOutcome::Done(format!("table {key} keeps its name")));
                }
                let c = &st.catalog;
                let taken = c.tables.contains_key(&to) || c.view(&to).is_some() || c.sequences.contains_key(&to) || c.tables.values().any(|t| t.indexes.iter().any(|i| i.name == to));
                if taken {
                    return Err(StorageError::RelationExists { name: to, kind: "relation", hint: "" }.into());
                }
                refuse_read_by_views(c, &key, "RENAME TO")?;
                refuse_file_indexes(c, &key, "RENAME TO")?;
                let mut next = table.clone();
                next.name = to.clone();
                self.replace_meta(&mut st, &key, next, Some(&to))?;
                AlterOutcome::Done(format!("renamed table {key} to {to}"))
            }
        };
        drop(st);
        drop(lock);
        Ok(outcome)
    }

    fn no_table(catalog: &Catalog, name: &str) -> WriteError {
        if catalog.view(name).is_some() {
            return WriteError::NotSupported(format!("{name} is a view: ALTER VIEW is not supported; CREATE OR REPLACE VIEW {name} AS … changes it"));
        }
        StorageError::UnknownTable { name: name.to_string(), known: catalog.tables.keys().cloned().collect::<Vec<_>>().join(", ") }.into()
    }

    /// What a rewrite cannot carry along.
    fn refuse_rewrite(&self, catalog: &Catalog, table: &TableMeta, what: &str) -> Result<(), WriteError> {
        refuse_read_by_views(catalog, &table.name, what)?;
        refuse_file_indexes(catalog, &table.name, what)?;
        if !table.indexes.is_empty() && table.is_column_store() {
            return Err(WriteError::NotSupported(format!("{what} on table {}: a column store table with SQL indexes cannot be rewritten: drop the indexes first", table.name)));
        }
        Ok(())
    }

    /// Checkpoints, then copies the table with `reshape`'s columns; the catalog commit that
    /// switches to the copy also applies `change` to the table and `change_catalog` to the
    /// catalog (sequences added or dropped), and gives the table a new id.
    fn rewrite(&self, st: &mut StateGuard, key: &str, reshape: Reshape, change: &(dyn Fn(&mut TableMeta) + Sync), change_catalog: &(dyn Fn(&mut Catalog) + Sync)) -> Result<(), WriteError> {
        self.checkpoint_locked(st, &CheckpointOptions::default())?;
        let table = st.catalog.tables.get(key).cloned().ok_or_else(|| WriteError::InvalidArgument(format!("table {key} was dropped meanwhile")))?;
        let target = table.table_format()?;
        let db_dir = self.db_dir().to_path_buf();
        let catalog_change = |c: &mut Catalog| -> Result<(), StorageError> {
            let t = c.tables.get_mut(key).ok_or_else(|| StorageError::Worker(format!("table {key} left the catalog during its rewrite")))?;
            change(t);
            // Measured on the old columns; ANALYZE measures them again.
            t.statistics = None;
            let meta = c.write.as_mut().ok_or_else(|| StorageError::Worker("the catalog lost its write-ahead log during a rewrite".into()))?;
            let id = meta.next_table_id;
            meta.next_table_id = id.checked_add(1).ok_or_else(|| StorageError::InvalidArgument("the database has used all 2^32 table ids".into()))?;
            meta.table_ids.insert(key.to_string(), id);
            change_catalog(c);
            Ok(())
        };
        let options = RebuildOptions { reshape: Some(reshape), catalog_change: Some(&catalog_change), ..RebuildOptions::default() };
        let rebuilt = flashscan_storage::rebuild_table_locked(&db_dir, key, target, &options);
        // The rebuild commits the catalog itself (its intent, its sweep, the switch): the
        // state takes what is on disk now, whether it failed or not.
        let on_disk = Catalog::read(&db_dir);
        if let Err(e) = rebuilt {
            if let Ok(c) = on_disk {
                st.catalog = c;
            }
            return Err(e.into());
        }
        st.catalog = on_disk?;
        let table = st.catalog.tables.get(key).cloned().ok_or_else(|| WriteError::InvalidArgument(format!("table {key} was dropped meanwhile")))?;
        // New row ids: nothing of the old delta (moved rows, row locks) carries over.
        st.deltas.insert(key.to_string(), Arc::new(TableDelta::open(&table, &db_dir)?));
        Ok(())
    }

    /// Commits `table` (the catalog's entry for `key`, changed; under `new_key` when it is
    /// renamed) in one atomic catalog commit, after a checkpoint, and gives it a delta made
    /// from the new entry that keeps the old one's deleted rows and row ids.
    fn replace_meta(&self, st: &mut StateGuard, key: &str, table: TableMeta, new_key: Option<&str>) -> Result<(), WriteError> {
        self.checkpoint_locked(st, &CheckpointOptions::default())?;
        let mut next = st.catalog.clone();
        let current = next.tables.remove(key).ok_or_else(|| WriteError::InvalidArgument(format!("table {key} was dropped meanwhile")))?;
        // The checkpoint may have added pages and a deleted rows file: keep them.
        let table = TableMeta { name: table.name, columns: table.columns, partition_by: table.partition_by, column_defaults: table.column_defaults, indexes: table.indexes, statistics: table.statistics, ..current };
        let to = new_key.unwrap_or(key).to_string();
        if let Some(new_key) = new_key {
            let mut meta = meta_of(&next, self.db_dir())?;
            if let Some(id) = meta.table_ids.remove(key) {
                meta.table_ids.insert(new_key.to_string(), id);
            }
            next.write = Some(meta);
            for s in next.sequences.values_mut() {
                if s.owned_by.as_deref() == Some(key) {
                    s.owned_by = Some(new_key.to_string());
                }
            }
        }
        next.tables.insert(to.clone(), table.clone());
        next.generation += 1;
        next.write_atomic(self.db_dir())?;
        st.catalog = next;
        let previous = st.deltas.remove(key);
        let delta = match previous {
            Some(previous) => TableDelta::reopened(&table, &previous),
            None => TableDelta::open(&table, self.db_dir())?,
        };
        st.deltas.insert(to, Arc::new(delta));
        Ok(())
    }
}

/// The values ADD COLUMN … SERIAL gives the existing rows: its new sequence's first ones,
/// handed out a batch at a time (from several threads for a column store).
struct SequenceNumbering {
    name: String,
    increment: i64,
    max_value: i64,
    start: i64,
    /// Values handed out so far.
    taken: std::sync::atomic::AtomicI64,
}

impl SequenceNumbering {
    fn new(name: &str, meta: &SequenceMeta) -> SequenceNumbering {
        SequenceNumbering { name: name.to_string(), increment: meta.increment, max_value: meta.max_value, start: meta.start, taken: std::sync::atomic::AtomicI64::new(0) }
    }

    /// The next `n` values, as `data_type` (the column's integer type).
    fn next(&self, n: usize, data_type: &arrow::datatypes::DataType) -> Result<ArrayRef, StorageError> {
        let n = i64::try_from(n).map_err(|_| StorageError::InvalidArgument("too many rows".into()))?;
        let first_index = self.taken.fetch_add(n, std::sync::atomic::Ordering::Relaxed);
        let value = |i: i64| i.checked_mul(self.increment).and_then(|d| self.start.checked_add(d)).filter(|v| *v <= self.max_value);
        let too_many = || StorageError::InvalidArgument(format!("nextval: reached maximum value of sequence \"{}\" ({}) numbering the table's rows", self.name, self.max_value));
        let mut values = Vec::with_capacity(n as usize);
        for i in first_index..first_index + n {
            values.push(value(i).ok_or_else(too_many)?);
        }
        let array: ArrayRef = std::sync::Arc::new(arrow::array::Int64Array::from(values));
        let options = arrow::compute::CastOptions { safe: false, ..Default::default() };
        arrow::compute::cast_with_options(&array, data_type, &options).map_err(|e| StorageError::InvalidArgument(format!("sequence \"{}\" values as {data_type}: {e}", self.name)))
    }

    /// The last value handed out, if any.
    fn last(&self) -> Option<i64> {
        let taken = self.taken.load(std::sync::atomic::Ordering::Relaxed);
        (taken > 0).then(|| self.start + (taken - 1) * self.increment)
    }
}

fn refuse_read_by_views(catalog: &Catalog, table: &str, what: &str) -> Result<(), WriteError> {
    let views = catalog.views_reading(table);
    if views.is_empty() {
        return Ok(());
    }
    Err(WriteError::NotSupported(format!(
        "{what} on table {table}: views read it ({}), and a view keeps its query's text: DROP VIEW them, ALTER the table, then CREATE them again",
        views.join(", ")
    )))
}

fn refuse_file_indexes(catalog: &Catalog, table: &str, what: &str) -> Result<(), WriteError> {
    let names: Vec<&str> = catalog.indexes_on(table).map(|i| i.name.as_str()).collect();
    if names.is_empty() {
        return Ok(());
    }
    Err(WriteError::NotSupported(format!(
        "{what} on table {table}: it has indexes made by `flashscan index create` ({}), whose row locators would not follow: `flashscan index drop` them first, then create them again",
        names.join(", ")
    )))
}
