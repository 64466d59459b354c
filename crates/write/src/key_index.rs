//! SQL indexes of heap tables (CREATE INDEX, PRIMARY KEY, UNIQUE): per index, an ordered
//! map from key to the ids of the rows that hold it (`RowId`), kept in memory.
//!
//! - **Keys** are arrow's row format (`arrow::row`) of the key columns: bytes whose order is
//!   the key's order, for every orderable type (integers, decimals, floats, text, dates,
//!   timestamps), and a prefix of the key columns encodes as a byte prefix — so equality on
//!   the first columns of a composite key is a range of the map. Keys with NULL parts are
//!   entered too (a lookup of `a = 1` on an index of (a, b) must find the rows whose b is
//!   NULL), but never collide: UNIQUE lets any number of NULLs in (PostgreSQL's rule).
//! - **An accelerator, never the truth**: the index may hold ids of rows that are deleted,
//!   of versions a snapshot cannot see, or of a delta the rows have left. Every reader
//!   checks each id against its snapshot (`SnapshotTable::rows_by_ids`) and DataFusion
//!   evaluates the query's predicate again on what comes back. What must hold is the
//!   other direction: every row a snapshot sees is entered under the id that snapshot
//!   names it by. So entries are added when a commit's rows join the delta (before they
//!   become visible), a checkpoint adds each moved row's page id and keeps its delta id
//!   until the next checkpoint, and an index is only used for a snapshot of a delta it
//!   covers (`covers`): the current one, or the one before the last checkpoint.
//! - **Built when first used**, from the table's pages and its delta, with commits and
//!   checkpoints held off (`WritePath::key_indexes`). Nothing of it is on disk: a restart
//!   builds it again. Why not pages in the buffer pool yet: the pool's dirty-page writer
//!   has no caller (issue 28); until it does, a persistent tree would need its own
//!   logging and checkpoint, twice the work of moving both tables and indexes into the
//!   pool at once. The cost is the build: about the time of one scan of the key columns.
//! - **Uniqueness** is checked when rows are staged, under locks on the new key values
//!   (table_lock.rs, index_write.rs): the second of two concurrent inserters of one key
//!   waits for the first to commit or roll back, then fails or goes on (PostgreSQL's
//!   behaviour); inserters of different keys do not wait for each other.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;
use std::sync::{Arc, PoisonError, RwLock};

use arrow::array::ArrayRef;
use arrow::datatypes::{DataType, Field};
use arrow::record_batch::RecordBatch;
use arrow::row::{RowConverter, SortField};
use flashscan_storage::heap::header::PAGE_KIND_HEAP;
use flashscan_storage::heap::heap_page::HeapPageBuilder;
use flashscan_storage::{HeapDecoder, KeyIndexDef, PageId, StorageError, TableMeta, PAGE_SIZE_BYTES};

use crate::deleted::DeadForAll;
use crate::delta::TableDelta;
use crate::error::WriteError;
use crate::row_id::RowId;

/// Key columns an index takes at most (PostgreSQL allows 32).
pub const KEY_COLUMNS_MAX: usize = 32;

/// Pages decoded per batch while building an index from a table.
const BUILD_PAGES_PER_BATCH: usize = 256;

pub type Key = Box<[u8]>;

/// What a lookup asks of an index.
#[derive(Debug, Clone)]
pub enum KeyLookup {
    /// Full keys, or (`prefix`) every key starting with one of them.
    Keys { keys: Vec<Key>, prefix: bool },
    /// Every key between two bounds, in the keys' own (byte) order: a range of the first
    /// columns after an equality prefix (`a = 1 AND b > 5`, `a BETWEEN 3 AND 9`).
    Range { lower: std::ops::Bound<Key>, upper: std::ops::Bound<Key> },
}

impl KeyLookup {
    /// Whether `key` (a full key) is one this lookup asks for.
    pub fn matches(&self, key: &[u8]) -> bool {
        use std::ops::Bound;
        match self {
            KeyLookup::Keys { keys, prefix } => keys.iter().any(|want| if *prefix { key.starts_with(want) } else { key == &want[..] }),
            KeyLookup::Range { lower, upper } => {
                let above = match lower {
                    Bound::Included(l) => key >= &l[..],
                    Bound::Excluded(l) => key > &l[..],
                    Bound::Unbounded => true,
                };
                let below = match upper {
                    Bound::Included(u) => key <= &u[..],
                    Bound::Excluded(u) => key < &u[..],
                    Bound::Unbounded => true,
                };
                above && below
            }
        }
    }
}

/// The smallest byte string greater than every string that starts with `prefix` (`None`
/// when there is none: `prefix` is all 0xFF). Arrow's row format is prefix-free per
/// column, so "every key whose first columns are P" is `[enc(P), successor(enc(P)))`.
pub fn prefix_successor(prefix: &[u8]) -> Option<Key> {
    let mut out = prefix.to_vec();
    while let Some(last) = out.pop() {
        if last < u8::MAX {
            out.push(last + 1);
            return Some(out.into_boxed_slice());
        }
    }
    None
}

#[derive(Debug, Default)]
struct Entries {
    built: bool,
    map: BTreeMap<Key, Vec<u64>>,
    /// The deltas (`TableDelta::id`) whose row ids the entries hold: the one the index was
    /// built on or last moved to, and the one before the last checkpoint.
    deltas: [Option<u64>; 2],
}

/// One SQL index of a table (see the module comment).
pub struct KeyIndex {
    def: KeyIndexDef,
    /// Positions of the key columns in the table.
    columns: Vec<usize>,
    fields: Vec<Field>,
    /// The converter of the first `i + 1` key columns.
    converters: Vec<RowConverter>,
    entries: RwLock<Entries>,
}

impl std::fmt::Debug for KeyIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "KeyIndex({} on {:?}, unique: {})", self.def.name, self.def.columns, self.def.unique)
    }
}

/// Whether a column of this type can be part of an index key.
pub fn indexable(data_type: &DataType) -> bool {
    RowConverter::supports_fields(&[SortField::new(data_type.clone())]) && !matches!(data_type, DataType::Null)
}

impl KeyIndex {
    /// Checks `def` against `table` (columns exist, at most `KEY_COLUMNS_MAX`, orderable,
    /// none twice); the index starts unbuilt.
    pub fn new(table: &TableMeta, def: KeyIndexDef) -> Result<KeyIndex, WriteError> {
        if def.columns.is_empty() || def.columns.len() > KEY_COLUMNS_MAX {
            return Err(WriteError::InvalidArgument(format!("index {}: a key has 1 to {KEY_COLUMNS_MAX} columns, got {}", def.name, def.columns.len())));
        }
        let schema = table.arrow_schema();
        let mut columns = Vec::with_capacity(def.columns.len());
        let mut fields = Vec::with_capacity(def.columns.len());
        for name in &def.columns {
            let i = table.column_index(name)?;
            if columns.contains(&i) {
                return Err(WriteError::InvalidArgument(format!("index {}: column {name} appears twice in the key", def.name)));
            }
            let field = schema.field(i).clone();
            if !indexable(field.data_type()) {
                return Err(WriteError::NotSupported(format!("index {}: column {name} of type {} cannot be an index key: index columns of orderable types", def.name, field.data_type())));
            }
            columns.push(i);
            fields.push(field);
        }
        let converters = (1..=fields.len())
            .map(|n| RowConverter::new(fields[..n].iter().map(|f| SortField::new(f.data_type().clone())).collect()))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| WriteError::InvalidArgument(format!("index {}: {e}", def.name)))?;
        Ok(KeyIndex { def, columns, fields, converters, entries: RwLock::new(Entries::default()) })
    }

    pub fn def(&self) -> &KeyIndexDef {
        &self.def
    }

    pub fn name(&self) -> &str {
        &self.def.name
    }

    pub fn is_unique(&self) -> bool {
        self.def.unique
    }

    /// Positions of the key columns in the table.
    pub fn columns(&self) -> &[usize] {
        &self.columns
    }

    /// The key columns' fields (the types a lookup's constants are cast to).
    pub fn fields(&self) -> &[Field] {
        &self.fields
    }

    pub fn is_built(&self) -> bool {
        self.read().built
    }

    /// Entries (key, row id) held, dead ones included.
    pub fn entry_count(&self) -> u64 {
        self.read().map.values().map(|v| v.len() as u64).sum()
    }

    /// Whether the index holds the ids a snapshot of delta `delta_id` names its rows by.
    pub fn covers(&self, delta_id: u64) -> bool {
        let e = self.read();
        e.built && e.deltas.contains(&Some(delta_id))
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Entries> {
        // Every change is a map insert or a whole swap under the lock.
        self.entries.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Entries> {
        self.entries.write().unwrap_or_else(PoisonError::into_inner)
    }

    /// The keys of `columns` (the first `columns.len()` key columns, in key order), one per
    /// row, NULL parts included.
    pub fn keys_of(&self, columns: &[ArrayRef]) -> Result<Vec<Key>, WriteError> {
        let n = columns.len();
        assert!(n >= 1 && n <= self.converters.len(), "a key prefix of 1 to {} columns", self.converters.len());
        let rows = self.converters[n - 1].convert_columns(columns).map_err(|e| WriteError::InvalidArgument(format!("index {}: encoding keys: {e}", self.def.name)))?;
        let row_count = columns[0].len();
        Ok((0..row_count).map(|i| Box::from(rows.row(i).as_ref())).collect())
    }

    /// The keys of `columns` that can collide in a unique index: `None` for a row with a
    /// NULL part.
    pub fn unique_keys_of(&self, columns: &[ArrayRef]) -> Result<Vec<Option<Key>>, WriteError> {
        let keys = self.keys_of(columns)?;
        Ok(keys.into_iter().enumerate().map(|(i, k)| if columns.iter().any(|c| c.is_null(i)) { None } else { Some(k) }).collect())
    }

    /// Whether a full key has a NULL part (it never collides).
    pub fn key_has_null(&self, key: &[u8]) -> bool {
        let converter = &self.converters[self.converters.len() - 1];
        match converter.convert_rows([converter.parser().parse(key)]) {
            Ok(columns) => columns.iter().any(|c| c.is_null(0)),
            Err(_) => false,
        }
    }

    /// The keys of rows in the page row encoding of `table`, and the decoded key columns
    /// (for messages).
    pub fn keys_of_rows<'r>(&self, table: &TableMeta, rows: impl IntoIterator<Item = &'r [u8]>) -> Result<(Vec<Key>, RecordBatch), WriteError> {
        let batch = decode_rows(table, &self.columns, rows)?;
        Ok((self.keys_of(batch.columns())?, batch))
    }

    /// The first key (in key order) that passes `test` with its row ids.
    pub fn first_key_with(&self, test: impl Fn(&[u8], &[u64]) -> bool) -> Option<Key> {
        self.read().map.iter().find(|(k, ids)| test(k, ids)).map(|(k, _)| k.clone())
    }

    /// A full key as PostgreSQL shows it in a violation: `(a, b)=(1, x)`.
    pub fn key_text_of(&self, key: &[u8]) -> String {
        let converter = &self.converters[self.converters.len() - 1];
        let parser = converter.parser();
        match converter.convert_rows([parser.parse(key)]) {
            Ok(columns) => key_text(self, &columns, 0),
            Err(_) => format!("({})", self.def.columns.join(", ")),
        }
    }

    /// Row ids entered under `key`.
    pub fn ids_of(&self, key: &[u8]) -> Vec<u64> {
        self.read().map.get(key).cloned().unwrap_or_default()
    }

    /// Row ids of every key in `keys` (full keys), or of every key starting with one of
    /// them (`prefix`: fewer columns than the key).
    pub fn candidates(&self, keys: &[Key], prefix: bool) -> Vec<u64> {
        let e = self.read();
        let mut out = Vec::new();
        for k in keys {
            if prefix {
                for (_, ids) in e.map.range::<[u8], _>((std::ops::Bound::Included(&k[..]), std::ops::Bound::Unbounded)).take_while(|(key, _)| key.starts_with(k)) {
                    out.extend_from_slice(ids);
                }
            } else if let Some(ids) = e.map.get(&k[..]) {
                out.extend_from_slice(ids);
            }
        }
        out
    }

    /// Row ids of every key `lookup` asks for; `None` when there are more than `ids_max`
    /// (the caller scans instead).
    pub fn candidates_of(&self, lookup: &KeyLookup, ids_max: usize) -> Option<Vec<u64>> {
        match lookup {
            KeyLookup::Keys { keys, prefix } => Some(self.candidates(keys, *prefix)),
            KeyLookup::Range { lower, upper } => {
                use std::ops::Bound;
                fn as_slice(b: &Bound<Key>) -> Bound<&[u8]> {
                    match b {
                        Bound::Included(k) => Bound::Included(&k[..]),
                        Bound::Excluded(k) => Bound::Excluded(&k[..]),
                        Bound::Unbounded => Bound::Unbounded,
                    }
                }
                let (lower, upper) = (as_slice(lower), as_slice(upper));
                // An empty or inverted range finds nothing (BTreeMap::range would panic).
                if let (Bound::Included(l) | Bound::Excluded(l), Bound::Included(u) | Bound::Excluded(u)) = (lower, upper) {
                    if l > u || (l == u && !matches!((lower, upper), (Bound::Included(_), Bound::Included(_)))) {
                        return Some(Vec::new());
                    }
                }
                let e = self.read();
                let mut out = Vec::new();
                for (_, ids) in e.map.range::<[u8], _>((lower, upper)) {
                    out.extend_from_slice(ids);
                    if out.len() > ids_max {
                        return None;
                    }
                }
                Some(out)
            }
        }
    }

    /// At most `limit` keys between `lower` and `upper`, in ascending or descending order
    /// (an ordered lookup's next chunk: the caller moves the bound past the last one).
    pub fn keys_between(&self, lower: std::ops::Bound<&[u8]>, upper: std::ops::Bound<&[u8]>, ascending: bool, limit: usize) -> Vec<Key> {
        use std::ops::Bound;
        if let (Bound::Included(l) | Bound::Excluded(l), Bound::Included(u) | Bound::Excluded(u)) = (lower, upper) {
            if l > u || (l == u && !matches!((lower, upper), (Bound::Included(_), Bound::Included(_)))) {
                return Vec::new();
            }
        }
        let e = self.read();
        let range = e.map.range::<[u8], _>((lower, upper));
        if ascending {
            range.take(limit).map(|(k, _)| k.clone()).collect()
        } else {
            range.rev().take(limit).map(|(k, _)| k.clone()).collect()
        }
    }

    /// The key of a NULL in the first key column: every key whose first column is NULL
    /// starts with it, and sorts before every other (NULLs first, arrow's default).
    pub fn null_first_column_key(&self) -> Result<Key, WriteError> {
        let column = arrow::array::new_null_array(self.fields[0].data_type(), 1);
        Ok(self.keys_of(&[column])?.remove(0))
    }

    /// Enters rows of a commit (their keys and ids) into a built index; an unbuilt one
    /// takes nothing (its build reads them from the delta).
    pub fn insert_all(&self, entries: impl IntoIterator<Item = (Key, u64)>) {
        let mut e = self.write();
        if !e.built {
            return;
        }
        for (key, id) in entries {
            e.map.entry(key).or_default().push(id);
        }
    }

    /// After a checkpoint moved `moved` (delta row id → page row id) of delta `old` into
    /// pages and began delta `new`: each moved row is entered under its page id too; ids of
    /// deltas before `old` are dropped (no snapshot the index covers names them), and so
    /// are rows `dead` in `old` (deleted for every snapshot of `old`, hence of `new`: what
    /// an UPDATE-heavy table would otherwise pile up under its hot keys, each dead id one
    /// more visibility check per lookup — pgbench's accounts grew 5.6 → 8.8 ms of CPU per
    /// transaction over one run before this).
    pub fn after_checkpoint(&self, moved: &HashMap<u64, u64>, old: u64, new: u64, dead: &DeadForAll<'_>) {
        let mut e = self.write();
        if !e.built {
            return;
        }
        if e.deltas[0] != Some(old) {
            // Built on a delta the checkpoint did not write: cannot happen while the
            // checkpoint holds the state; start over rather than guess.
            *e = Entries::default();
            return;
        }
        for ids in e.map.values_mut() {
            let mut added = Vec::new();
            ids.retain(|id| {
                if dead.contains(*id) {
                    return false;
                }
                let row = RowId(*id);
                if !row.is_delta() {
                    return true;
                }
                match moved.get(id) {
                    Some(page_id) => {
                        added.push(*page_id);
                        true
                    }
                    None => false,
                }
            });
            ids.extend(added.into_iter().filter(|id| !dead.contains(*id)));
        }
        e.map.retain(|_, ids| !ids.is_empty());
        e.deltas = [Some(new), Some(old)];
    }

    /// Fills the index from `table`'s pages and `delta`'s rows, the caller holding off
    /// commits and checkpoints. Dead rows are entered too (readers check).
    pub(crate) fn build(&self, table: &TableMeta, db_dir: &Path, delta: &TableDelta) -> Result<(), WriteError> {
        let mut map: BTreeMap<Key, Vec<u64>> = BTreeMap::new();
        // Rows deleted for every snapshot of `delta` are left out (readers never see them);
        // rows deleted since are entered (older snapshots still see them; readers check).
        let dead = delta.deleted().dead_for_all();
        let mut add = |keys: Vec<Key>, ids: &[u64]| {
            debug_assert_eq!(keys.len(), ids.len());
            for (k, id) in keys.into_iter().zip(ids) {
                if !dead.contains(*id) {
                    map.entry(k).or_default().push(*id);
                }
            }
        };
        // The pages, a batch of pages at a time.
        let mut decoder = HeapDecoder::try_new(table, &self.columns)?;
        let mut ids: Vec<u64> = Vec::new();
        let runs: Vec<&flashscan_storage::PageRun> = table.partitions.iter().flat_map(|p| &p.runs).collect();
        let paths = runs.iter().map(|r| db_dir.join(&r.file));
        if let Some(mut reader) = flashscan_storage::page_path::FileReader::open_distinct(paths)? {
            for run in runs {
                let path = db_dir.join(&run.file);
                let file_index = reader.file_index(&path)?;
                let length = run.page_count as u64 * PAGE_SIZE_BYTES as u64;
                let mut failed: Option<WriteError> = None;
                let read = reader.for_each_extent(file_index, run.offset_bytes, length, PAGE_SIZE_BYTES as u64, &mut |offset, chunk| {
                    let first = (offset - run.offset_bytes) / PAGE_SIZE_BYTES as u64;
                    for (p, page) in chunk.chunks_exact(PAGE_SIZE_BYTES).enumerate() {
                        let page_id = PageId(run.first_page_id + first + p as u64);
                        let rows = decoder.push_page(page, page_id.0, &path, offset + (p * PAGE_SIZE_BYTES) as u64)?;
                        for slot in 0..rows {
                            let id = RowId::in_page(page_id, slot).ok_or_else(|| StorageError::InvalidArgument(format!("page {:#x} slot {slot} has no row id", page_id.0)))?;
                            ids.push(id.0);
                        }
                        if decoder.rows_buffered() >= BUILD_PAGES_PER_BATCH * 64 {
                            let batch = decoder.finish();
                            match self.keys_of(batch.columns()) {
                                Ok(keys) => add(keys, &ids),
                                Err(e) => {
                                    failed = Some(e);
                                    return Err(StorageError::InvalidArgument("index build stopped".into()));
                                }
                            }
                            ids.clear();
                        }
                    }
                    Ok(())
                });
                if let Err(e) = read {
                    return Err(failed.take().unwrap_or(WriteError::Storage(e)));
                }
            }
        }
        if decoder.rows_buffered() > 0 {
            let batch = decoder.finish();
            add(self.keys_of(batch.columns())?, &ids);
        }
        // The delta's rows, every partition.
        for partition in 0..delta.partition_count() {
            let (rows, lsns) = delta.rows_and_lsns(partition);
            if rows.is_empty() {
                continue;
            }
            let (keys, _) = self.keys_of_rows(table, rows.iter().map(|r| r.as_slice()))?;
            let ids: Vec<u64> = lsns.iter().map(|l| RowId::in_delta(*l).0).collect();
            add(keys, &ids);
        }
        drop(dead);
        let mut e = self.write();
        *e = Entries { built: true, map, deltas: [Some(delta.id()), None] };
        Ok(())
    }
}

/// The SQL indexes of one table, shared by its successive deltas (a checkpoint hands them
/// on, translated; TRUNCATE empties them).
#[derive(Debug, Default)]
pub struct TableIndexes {
    list: RwLock<Vec<Arc<KeyIndex>>>,
    /// Declarations that do not fit the table (only a damaged catalog holds one: DDL
    /// checks them), with why: every write of the table and every build is refused.
    broken: Vec<String>,
}

impl TableIndexes {
    /// The indexes `table` declares, unbuilt.
    pub fn of(table: &TableMeta) -> TableIndexes {
        let mut list = Vec::new();
        let mut broken = Vec::new();
        for d in &table.indexes {
            match KeyIndex::new(table, d.clone()) {
                Ok(i) => list.push(Arc::new(i)),
                Err(e) => broken.push(format!("index {} of table {}: {e}", d.name, table.name)),
            }
        }
        TableIndexes { list: RwLock::new(list), broken }
    }

    /// Refuses a table whose catalog declares an index that does not fit it.
    pub fn refuse_broken(&self) -> Result<(), WriteError> {
        match self.broken.first() {
            None => Ok(()),
            Some(why) => Err(WriteError::NotSupported(format!("{why}: the catalog declares an index the table cannot have; drop the index (DROP INDEX) and create it again"))),
        }
    }

    pub fn all(&self) -> Vec<Arc<KeyIndex>> {
        self.list.read().unwrap_or_else(PoisonError::into_inner).clone()
    }

    pub fn is_empty(&self) -> bool {
        self.list.read().unwrap_or_else(PoisonError::into_inner).is_empty()
    }

    pub fn has_unique(&self) -> bool {
        self.list.read().unwrap_or_else(PoisonError::into_inner).iter().any(|i| i.is_unique())
    }

    pub(crate) fn add(&self, index: Arc<KeyIndex>) {
        self.list.write().unwrap_or_else(PoisonError::into_inner).push(index);
    }

    pub(crate) fn remove(&self, name: &str) {
        self.list.write().unwrap_or_else(PoisonError::into_inner).retain(|i| !i.name().eq_ignore_ascii_case(name));
    }
}

/// Rows in the page row encoding of `table`, decoded (projected) with the decoder scans
/// use, through heap pages built in memory.
pub fn decode_rows<'r>(table: &TableMeta, projection: &[usize], rows: impl IntoIterator<Item = &'r [u8]>) -> Result<RecordBatch, WriteError> {
    thread_local! {
        /// One page builder per thread, kept between calls: every INSERT into a keyed table
        /// decodes its new rows' keys here, often one row, and a new zeroed 8 KB page per
        /// call (and its copy) cost more than the decode.
        static BUILDER: std::cell::RefCell<HeapPageBuilder> = std::cell::RefCell::new(HeapPageBuilder::with_kind(1, PAGE_KIND_HEAP));
    }
    let rows = rows.into_iter();
    // Sized for the rows given (often one), not for a scan's batches.
    let mut decoder = HeapDecoder::try_with_capacity(table, projection, rows.size_hint().0.min(8192))?;
    let column_count = table.columns.len() as u16;
    let path = Path::new("(rows in memory)");
    BUILDER.with(|cell| {
        let mut builder = cell.borrow_mut();
        builder.reset_for(column_count, PAGE_KIND_HEAP);
        // Built here, never written: no checksum to make or check.
        let push = |builder: &mut HeapPageBuilder, decoder: &mut HeapDecoder| -> Result<(), WriteError> {
            decoder.push_built_page(builder.built_page(), path)?;
            builder.clear();
            Ok(())
        };
        for row in rows {
            if !builder.try_append(row) {
                if builder.is_empty() {
                    return Err(WriteError::InvalidArgument(format!("a row of {} bytes for table {} is larger than a page", row.len(), table.name)));
                }
                push(&mut builder, &mut decoder)?;
                let fitted = builder.try_append(row);
                debug_assert!(fitted, "a row that fits no empty page was refused above");
            }
        }
        if !builder.is_empty() {
            push(&mut builder, &mut decoder)?;
        }
        Ok(decoder.finish())
    })
}

/// The key values of row `i` of `batch` as PostgreSQL shows them in a violation:
/// `(a, b)=(1, x)`.
pub fn key_text(index: &KeyIndex, columns: &[ArrayRef], i: usize) -> String {
    let options = arrow::util::display::FormatOptions::default().with_null("NULL");
    let values: Vec<String> = columns
        .iter()
        .map(|c| arrow::util::display::ArrayFormatter::try_new(c.as_ref(), &options).map(|f| f.value(i).to_string()).unwrap_or_else(|_| "?".into()))
        .collect();
    format!("({})=({})", index.def().columns.join(", "), values.join(", "))
}

/// Keys seen twice among `keys` (the first repeat's position), skipping NULL keys.
pub(crate) fn first_repeat(keys: &[Option<Key>]) -> Option<usize> {
    let mut seen: HashSet<&[u8]> = HashSet::with_capacity(keys.len());
    keys.iter().position(|k| k.as_deref().is_some_and(|k| !seen.insert(k)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Int64Array, StringArray};
    use flashscan_storage::{ColumnDef, ColumnType};
    use crate::deleted::DeletedRows;

    fn table() -> TableMeta {
        TableMeta::heap_without_rows(
            "t",
            vec![
                ColumnDef { name: "a".into(), column_type: ColumnType::Int64, nullable: true },
                ColumnDef { name: "b".into(), column_type: ColumnType::Utf8, nullable: true },
            ],
        )
    }

    fn index(columns: &[&str]) -> KeyIndex {
        KeyIndex::new(&table(), KeyIndexDef { name: "i".into(), columns: columns.iter().map(|c| c.to_string()).collect(), unique: true, primary: false, constraint: false }).unwrap()
    }

    #[test]
    fn key_order_is_value_order_and_a_prefix_is_a_byte_prefix() {
        let i = index(&["a", "b"]);
        let a: ArrayRef = Arc::new(Int64Array::from(vec![Some(-5), Some(3), Some(3), None]));
        let b: ArrayRef = Arc::new(StringArray::from(vec![Some("z"), Some("a"), Some("b"), Some("c")]));
        let unique = i.unique_keys_of(&[a.clone(), b.clone()]).unwrap();
        assert!(unique[3].is_none() && unique[0].is_some(), "a NULL part never collides");
        let keys = i.keys_of(&[a.clone(), b]).unwrap();
        assert!(i.key_has_null(&keys[3]) && !i.key_has_null(&keys[0]));
        assert!(keys[0] < keys[1] && keys[1] < keys[2]);
        let prefix = i.keys_of(&[a]).unwrap();
        assert!(keys[1].starts_with(&prefix[1]));
        assert!(keys[2].starts_with(&prefix[1]));
        assert!(!keys[0].starts_with(&prefix[1]));
    }

    #[test]
    fn a_checkpoint_adds_page_ids_and_drops_ids_of_older_deltas() {
        let i = index(&["a"]);
        {
            let mut e = i.write();
            *e = Entries { built: true, map: BTreeMap::new(), deltas: [Some(1), None] };
        }
        let key: Key = Box::from(&b"k"[..]);
        let d1 = RowId::in_delta(100).0;
        i.insert_all([(key.clone(), d1)]);
        let page = RowId::in_page(PageId::new(1, 2), 3).unwrap().0;
        let none = DeletedRows::default();
        i.after_checkpoint(&HashMap::from([(d1, page)]), 1, 2, &none.dead_for_all());
        assert_eq!(i.ids_of(&key), vec![d1, page]);
        assert!(i.covers(1) && i.covers(2) && !i.covers(3));
        i.after_checkpoint(&HashMap::new(), 2, 3, &none.dead_for_all());
        assert_eq!(i.ids_of(&key), vec![page], "the delta id is dropped one checkpoint later");
        assert!(!i.covers(1));
    }

    #[test]
    fn a_checkpoint_drops_rows_dead_for_every_snapshot() {
        let i = index(&["a"]);
        {
            let mut e = i.write();
            *e = Entries { built: true, map: BTreeMap::new(), deltas: [Some(1), None] };
        }
        let key: Key = Box::from(&b"k"[..]);
        let old_version = RowId::in_page(PageId::new(1, 2), 3).unwrap().0;
        let new_version = RowId::in_delta(100).0;
        i.insert_all([(key.clone(), old_version), (key.clone(), new_version)]);
        // An UPDATE deleted the old version at sequence 5: snapshots before it still see it.
        let deleted = DeletedRows::default();
        deleted.add(&[RowId(old_version)], 5);
        let moved_to = RowId::in_page(PageId::new(1, 2), 4).unwrap().0;
        i.after_checkpoint(&HashMap::from([(new_version, moved_to)]), 1, 2, &deleted.dead_for_all());
        assert_eq!(i.ids_of(&key), vec![old_version, new_version, moved_to], "a snapshot of delta 1 before sequence 5 still reads the old version");
        // The next delta holds the deletion for every snapshot: the next checkpoint drops it.
        let carried = deleted.translated(&HashMap::new());
        i.after_checkpoint(&HashMap::new(), 2, 3, &carried.dead_for_all());
        assert_eq!(i.ids_of(&key), vec![moved_to]);
    }

    proptest::proptest! {
        /// The key codec keeps the order of (a, b) values, and a key's first column is a
        /// byte prefix of it: what equality and prefix lookups rely on.
        #[test]
        fn keys_order_as_their_values(rows in proptest::collection::vec((proptest::num::i64::ANY, "[a-c]{0,3}"), 2..40)) {
            let i = index(&["a", "b"]);
            let a: ArrayRef = Arc::new(Int64Array::from(rows.iter().map(|r| r.0).collect::<Vec<_>>()));
            let b: ArrayRef = Arc::new(StringArray::from(rows.iter().map(|r| r.1.as_str()).collect::<Vec<_>>()));
            let keys: Vec<Key> = i.keys_of(&[a.clone(), b]).unwrap();
            let prefixes: Vec<Key> = i.keys_of(&[a]).unwrap();
            for x in 0..rows.len() {
                proptest::prop_assert!(keys[x].starts_with(&prefixes[x]));
                for y in 0..rows.len() {
                    proptest::prop_assert_eq!(keys[x].cmp(&keys[y]), (rows[x].0, &rows[x].1).cmp(&(rows[y].0, &rows[y].1)));
                }
            }
        }
    }

    #[test]
    fn repeats_skip_nulls() {
        let k = |s: &str| Some(Box::from(s.as_bytes()));
        assert_eq!(first_repeat(&[k("a"), None, None, k("b")]), None);
        assert_eq!(first_repeat(&[k("a"), k("b"), k("a")]), Some(2));
    }
}

#[cfg(test)]
mod range_properties {
    use super::*;
    use arrow::array::Int64Array;
    use flashscan_storage::{ColumnDef, ColumnType};
    use proptest::prelude::*;

    proptest! {
        /// Every string that starts with `p` sorts before `prefix_successor(p)`, and every
        /// string from it on does not start with `p`.
        #[test]
        fn the_successor_bounds_exactly_the_strings_with_the_prefix(p in proptest::collection::vec(any::<u8>(), 0..6), rest in proptest::collection::vec(any::<u8>(), 0..6), other in proptest::collection::vec(any::<u8>(), 0..10)) {
            let with: Vec<u8> = p.iter().chain(&rest).copied().collect();
            match prefix_successor(&p) {
                Some(s) => {
                    prop_assert!(with.as_slice() < &s[..]);
                    if other.as_slice() >= &s[..] {
                        prop_assert!(!other.starts_with(&p));
                    }
                }
                None => prop_assert!(p.iter().all(|b| *b == u8::MAX)),
            }
        }

        /// A range lookup built from the keys of (a, b) values finds exactly the rows whose
        /// a equals the prefix and whose b lies in the range, as comparing the values says.
        #[test]
        fn a_key_range_is_the_value_range(rows in proptest::collection::vec((0i64..4, proptest::option::of(-5i64..5)), 1..40), a in 0i64..4, lo in -6i64..6, hi in -6i64..6) {
            let table = TableMeta::heap_without_rows(
                "t",
                vec![
                    ColumnDef { name: "a".into(), column_type: ColumnType::Int64, nullable: false },
                    ColumnDef { name: "b".into(), column_type: ColumnType::Int64, nullable: true },
                ],
            );
            let index = KeyIndex::new(&table, KeyIndexDef { name: "i".into(), columns: vec!["a".into(), "b".into()], unique: false, primary: false, constraint: false }).unwrap();
            let key = |a: i64, b: Option<i64>| -> Key {
                let columns: Vec<ArrayRef> = vec![Arc::new(Int64Array::from(vec![a])), Arc::new(Int64Array::from(vec![b]))];
                index.keys_of(&columns).unwrap().remove(0)
            };
            // b > lo AND b <= hi, as index_scan builds it.
            let lower = std::ops::Bound::Included(prefix_successor(&key(a, Some(lo))).unwrap());
            let upper = prefix_successor(&key(a, Some(hi))).map_or(std::ops::Bound::Unbounded, std::ops::Bound::Excluded);
            let lookup = KeyLookup::Range { lower, upper };
            for (ra, rb) in &rows {
                let want = *ra == a && rb.is_some_and(|b| b > lo && b <= hi);
                prop_assert_eq!(lookup.matches(&key(*ra, *rb)), want, "row ({}, {:?})", ra, rb);
            }
        }
    }
}
