//! Server-side cursors: `DECLARE`, `FETCH`, `MOVE`, `CLOSE`, one connection's.
//!
//! A cursor is a running query left open between statements. DECLARE admits and starts its
//! plan like any query (`handler.rs`: a query slot, its own memory pool, the plan on the
//! query runtime) and keeps the running stream; each FETCH pulls the batches it needs and
//! keeps the rows of the last batch it did not send — nothing beyond that is computed
//! ahead (the query runtime's channel holds `BATCHES_IN_FLIGHT` batches). While its query
//! has rows left, an open cursor holds its query slot (one of `--max-active-queries`), its
//! share of the scan buffer budget and its memory pool; when the query ends (its last row
//! fetched, or CLOSE) they are freed. A connection keeps at most
//! [`CURSORS_OPEN_PER_CONNECTION_MAX`] cursors.
//!
//! Transactions, as PostgreSQL: DECLARE without HOLD is refused outside BEGIN … COMMIT
//! (25P01), and such a cursor closes when the block ends. A WITH HOLD cursor survives
//! COMMIT: its remaining rows are materialised at COMMIT (at DECLARE outside a block), held
//! in the connection's memory — at most [`HELD_CURSOR_BYTES_MAX`] for all its held cursors
//! together, beyond which COMMIT fails and the block is rolled back — and its slot is freed.
//! ROLLBACK (or an error in the block) closes every cursor declared in the block.
//! Cursors move forward only: SCROLL, backward and absolute fetches are refused
//! (`statement.rs`).

use std::collections::{BTreeMap, VecDeque};

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use pgwire::error::{PgWireError, PgWireResult};

use crate::error::pg_error;
use crate::handler::{Outcome, Running};

/// Cursors one connection may keep open at once. Each one still reading holds a query slot,
/// so `--max-active-queries` bounds them server-wide as well.
pub const CURSORS_OPEN_PER_CONNECTION_MAX: usize = 16;
/// The bytes of rows a connection's WITH HOLD cursors may hold in memory after COMMIT
/// (Arrow's in-memory size of the batches, all held cursors together).
pub const HELD_CURSOR_BYTES_MAX: usize = 256 << 20;

/// SQLSTATEs of cursor errors (PostgreSQL's appendix A).
pub mod cursor_sqlstate {
    pub const INVALID_CURSOR_NAME: &str = "34000";
    pub const DUPLICATE_CURSOR: &str = "42P03";
    pub const NO_ACTIVE_SQL_TRANSACTION: &str = "25P01";
    pub const PROGRAM_LIMIT_EXCEEDED: &str = "54000";
    pub const INVALID_CURSOR_STATE: &str = "24000";
}

/// Where a cursor's rows come from.
enum Rows {
    /// The query, still running: batches are pulled as FETCH asks.
    Streaming(Box<Running>),
    /// WITH HOLD after COMMIT: the rows left, materialised; their bytes.
    Held { batches: VecDeque<RecordBatch>, bytes: usize },
    /// No rows left (the query ended, or failed).
    Done,
}

/// One open cursor.
pub struct Cursor {
    pub schema: SchemaRef,
    /// The DECLARE statement, as `pg_cursors.statement` shows it.
    pub statement: String,
    /// When it was declared (`pg_cursors.creation_time`), µs since the Unix epoch.
    pub created_unix_us: i64,
    /// `DECLARE … BINARY`: rows in binary over the simple protocol.
    pub binary: bool,
    pub hold: bool,
    /// Declared in the transaction block still open: closed when it ends, unless held.
    pub in_block: bool,
    rows: Rows,
    /// The rows of the last batch not yet fetched: the batch and the offset of the next row.
    pending: Option<(RecordBatch, usize)>,
}

impl std::fmt::Debug for Cursor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cursor").field("hold", &self.hold).field("in_block", &self.in_block).finish_non_exhaustive()
    }
}

impl Cursor {
    pub(crate) fn streaming(schema: SchemaRef, statement: String, running: Running, binary: bool, hold: bool, in_block: bool) -> Cursor {
        let created_unix_us = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_micros() as i64).unwrap_or(0);
        Cursor { schema, statement, created_unix_us, binary, hold, in_block, rows: Rows::Streaming(Box::new(running)), pending: None }
    }

    /// Up to `max_rows` (at least 1) next rows: a slice of one batch; `None` at the end.
    /// Only the rest of the batch sliced stays buffered.
    pub(crate) async fn next_rows(&mut self, max_rows: u64) -> Option<PgWireResult<RecordBatch>> {
        debug_assert!(max_rows > 0);
        loop {
            if let Some((batch, offset)) = self.pending.take() {
                let left = batch.num_rows() - offset;
                let take = left.min(usize::try_from(max_rows).unwrap_or(usize::MAX));
                let rows = batch.slice(offset, take);
                if take < left {
                    self.pending = Some((batch, offset + take));
                }
                return Some(Ok(rows));
            }
            let next = match &mut self.rows {
                Rows::Done => return None,
                Rows::Held { batches, bytes } => {
                    let b = batches.pop_front();
                    if let Some(b) = &b {
                        *bytes = bytes.saturating_sub(b.get_array_memory_size());
                    }
                    b.map(Ok::<RecordBatch, PgWireError>)
                }
                Rows::Streaming(running) => match running.next_batch().await {
                    None => {
                        running.finish(Outcome::Done);
                        None
                    }
                    Some(Err(e)) => {
                        running.finish(if running.cancel.is_canceled() || crate::handler::is_cancel_error(&e) { Outcome::Canceled } else { Outcome::Failed });
                        self.rows = Rows::Done;
                        return Some(Err(e));
                    }
                    Some(Ok(b)) => Some(Ok(b)),
                },
            };
            match next {
                None => {
                    // The query ended: its slot and memory are freed now, the cursor stays
                    // open (FETCH answers no rows) until CLOSE.
                    self.rows = Rows::Done;
                    return None;
                }
                Some(Ok(b)) if b.num_rows() > 0 => self.pending = Some((b, 0)),
                Some(_) => {}
            }
        }
    }

    /// A new statement (FETCH or MOVE) reads the cursor: its cancel, timeout and start
    /// are that statement's.
    pub(crate) fn start_statement(&mut self, backend: &crate::startup::Backend) {
        if let Rows::Streaming(running) = &mut self.rows {
            running.restart_for_statement(backend);
        }
    }

    /// Closed by the client (CLOSE, the end of its block, DISCARD ALL): a query stopped
    /// before its end is counted completed, not canceled — it gave what was asked. (Dropped
    /// otherwise — the connection gone — it counts as canceled, as a query does.)
    fn close(mut self: Box<Self>) {
        if let Rows::Streaming(running) = &mut self.rows {
            running.finish(Outcome::Done);
        }
    }

    /// Bytes this cursor holds after COMMIT (WITH HOLD); 0 while it streams.
    pub fn held_bytes(&self) -> usize {
        let pending = self.pending.as_ref().map(|(b, _)| b.get_array_memory_size()).unwrap_or(0);
        match &self.rows {
            Rows::Held { bytes, .. } => bytes + pending,
            _ => 0,
        }
    }

    /// WITH HOLD at COMMIT (or at DECLARE outside a block): the rows left computed and kept,
    /// the query's slot freed. Fails when the rows would take the connection past
    /// `bytes_free` (the rest of `HELD_CURSOR_BYTES_MAX`), or the query fails.
    pub(crate) async fn materialise(&mut self, name: &str, bytes_free: usize) -> PgWireResult<()> {
        let Rows::Streaming(running) = &mut self.rows else { return Ok(()) };
        let mut batches = VecDeque::new();
        let mut bytes = self.pending.as_ref().map(|(b, _)| b.get_array_memory_size()).unwrap_or(0);
        loop {
            match running.next_batch().await {
                None => break,
                Some(Ok(b)) => {
                    bytes += b.get_array_memory_size();
                    if bytes > bytes_free {
                        running.finish(Outcome::Failed);
                        self.rows = Rows::Done;
                        return Err(pg_error(
                            cursor_sqlstate::PROGRAM_LIMIT_EXCEEDED,
                            format!(
                                "WITH HOLD cursor \"{name}\": its rows would hold more than {} MiB of this connection's memory after COMMIT: fetch it inside the transaction (DECLARE without HOLD in BEGIN … COMMIT), or narrow the query",
                                HELD_CURSOR_BYTES_MAX >> 20
                            ),
                        ));
                    }
                    if b.num_rows() > 0 {
                        batches.push_back(b);
                    }
                }
                Some(Err(e)) => {
                    running.finish(Outcome::Failed);
                    self.rows = Rows::Done;
                    return Err(e);
                }
            }
        }
        running.finish(Outcome::Done);
        self.rows = Rows::Held { batches, bytes };
        self.in_block = false;
        Ok(())
    }
}

/// A connection's cursors by name. A cursor a FETCH is streaming from is out of the map
/// meanwhile (`InUse`) and put back when the FETCH's rows are sent.
#[derive(Default)]
pub struct Cursors {
    open: BTreeMap<String, Slot>,
}

enum Slot {
    Ready(Box<Cursor>),
    InUse,
}

impl Slot {
    fn close(self) {
        if let Slot::Ready(c) = self {
            c.close();
        }
    }
}

impl std::fmt::Debug for Cursors {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cursors").field("names", &self.open.keys().collect::<Vec<_>>()).finish()
    }
}

pub fn no_such_cursor(name: &str) -> PgWireError {
    pg_error(cursor_sqlstate::INVALID_CURSOR_NAME, format!("cursor \"{name}\" does not exist"))
}

impl Cursors {
    /// Refuses a DECLARE of `name` before its query starts: a name in use, or too many open.
    pub fn check_new(&self, name: &str) -> PgWireResult<()> {
        if self.open.contains_key(name) {
            return Err(pg_error(cursor_sqlstate::DUPLICATE_CURSOR, format!("cursor \"{name}\" already exists")));
        }
        if self.open.len() >= CURSORS_OPEN_PER_CONNECTION_MAX {
            return Err(pg_error(
                cursor_sqlstate::PROGRAM_LIMIT_EXCEEDED,
                format!("this connection has {CURSORS_OPEN_PER_CONNECTION_MAX} cursors open, the most it may: CLOSE one first"),
            ));
        }
        Ok(())
    }

    pub fn insert(&mut self, name: String, cursor: Box<Cursor>) -> PgWireResult<()> {
        self.check_new(&name)?;
        self.open.insert(name, Slot::Ready(cursor));
        Ok(())
    }

    /// Takes `name` out for a FETCH or MOVE (marked in use until `put_back`).
    pub fn take(&mut self, name: &str) -> PgWireResult<Box<Cursor>> {
        match self.open.get_mut(name) {
            None => Err(no_such_cursor(name)),
            Some(Slot::InUse) => Err(pg_error(
                cursor_sqlstate::INVALID_CURSOR_STATE,
                format!("cursor \"{name}\" is in use by a FETCH whose rows were not all read (a portal suspended by a row limit): close that portal or finish it first"),
            )),
            Some(slot) => match std::mem::replace(slot, Slot::InUse) {
                Slot::Ready(c) => Ok(c),
                Slot::InUse => Err(no_such_cursor(name)),
            },
        }
    }

    /// Back after a FETCH; dropped if it was closed meanwhile (CLOSE, end of the block).
    pub fn put_back(&mut self, name: &str, cursor: Box<Cursor>) {
        if let Some(slot) = self.open.get_mut(name) {
            if matches!(slot, Slot::InUse) {
                *slot = Slot::Ready(cursor);
            }
        }
    }

    /// The columns of `name`, for Describe (psycopg describes a cursor as a portal).
    pub fn schema_of(&self, name: &str) -> Option<SchemaRef> {
        match self.open.get(name)? {
            Slot::Ready(c) => Some(c.schema.clone()),
            Slot::InUse => None,
        }
    }

    pub fn close(&mut self, name: &str) -> PgWireResult<()> {
        match self.open.remove(name) {
            Some(slot) => {
                slot.close();
                Ok(())
            }
            None => Err(no_such_cursor(name)),
        }
    }

    pub fn close_all(&mut self) {
        for (_, slot) in std::mem::take(&mut self.open) {
            slot.close();
        }
    }

    /// The transaction block ended without COMMIT (ROLLBACK, or a statement failed in it):
    /// every cursor declared in it closes.
    pub fn close_declared_in_block(&mut self) {
        let names: Vec<String> = self.open.iter().filter(|(_, s)| matches!(s, Slot::Ready(c) if c.in_block)).map(|(n, _)| n.clone()).collect();
        for name in names {
            if let Some(slot) = self.open.remove(&name) {
                slot.close();
            }
        }
    }

    /// At COMMIT: cursors without HOLD declared in the block close; the WITH HOLD ones
    /// declared in it are returned, to be materialised (then `insert`ed again).
    pub fn take_for_commit(&mut self) -> Vec<(String, Box<Cursor>)> {
        let mut held = Vec::new();
        let names: Vec<String> = self.open.iter().filter(|(_, s)| matches!(s, Slot::Ready(c) if c.in_block)).map(|(n, _)| n.clone()).collect();
        for name in names {
            if let Some(Slot::Ready(c)) = self.open.remove(&name) {
                if c.hold {
                    held.push((name, c));
                } else {
                    c.close();
                }
            }
        }
        held
    }

    /// Bytes the held cursors hold now.
    pub fn held_bytes(&self) -> usize {
        self.open.values().map(|s| if let Slot::Ready(c) = s { c.held_bytes() } else { 0 }).sum()
    }

    /// Each open cursor's `pg_cursors` row: name, statement, holdable, binary, created.
    fn rows(&self) -> Vec<(String, String, bool, bool, i64)> {
        self.open
            .iter()
            .filter_map(|(name, slot)| match slot {
                Slot::Ready(c) => Some((name.clone(), c.statement.clone(), c.hold, c.binary, c.created_unix_us)),
                // In use by a FETCH of this very connection: not while it lists them.
                Slot::InUse => None,
            })
            .collect()
    }

    pub fn len(&self) -> usize {
        self.open.len()
    }

    pub fn is_empty(&self) -> bool {
        self.open.is_empty()
    }
}

/// Every connection's cursor list by backend pid: what `pg_catalog.pg_cursors` reads for
/// the connection a query runs for (`pg_catalog::Connection`). A list goes when its
/// connection does (the entry is weak and pruned when lists are added).
#[derive(Default)]
pub struct CursorLists {
    by_pid: std::sync::Mutex<std::collections::HashMap<i32, std::sync::Weak<std::sync::Mutex<Cursors>>>>,
}

impl std::fmt::Debug for CursorLists {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CursorLists").finish_non_exhaustive()
    }
}

impl CursorLists {
    /// A new connection's (empty) list.
    pub fn add(&self, pid: i32) -> std::sync::Arc<std::sync::Mutex<Cursors>> {
        let list = std::sync::Arc::new(std::sync::Mutex::new(Cursors::default()));
        let mut by_pid = self.by_pid.lock().unwrap_or_else(|p| p.into_inner());
        by_pid.retain(|_, w| w.strong_count() > 0);
        by_pid.insert(pid, std::sync::Arc::downgrade(&list));
        list
    }

    /// The `pg_cursors` rows of connection `pid`.
    fn rows_of(&self, pid: i32) -> Vec<(String, String, bool, bool, i64)> {
        let list = self.by_pid.lock().unwrap_or_else(|p| p.into_inner()).get(&pid).and_then(|w| w.upgrade());
        list.map(|l| l.lock().unwrap_or_else(|p| p.into_inner()).rows()).unwrap_or_default()
    }
}

/// `pg_catalog.pg_cursors`: the cursors of the connection that asks, as PostgreSQL shows
/// them (psycopg reads it before closing a named cursor it did not declare itself).
#[derive(Debug)]
pub struct CursorsTable {
    lists: std::sync::Arc<CursorLists>,
    schema: SchemaRef,
}

impl CursorsTable {
    pub fn new(lists: std::sync::Arc<CursorLists>) -> CursorsTable {
        use arrow::datatypes::{DataType, Field, Schema, TimeUnit};
        let schema = std::sync::Arc::new(Schema::new(vec![
            Field::new("name", DataType::Utf8, false),
            Field::new("statement", DataType::Utf8, false),
            Field::new("is_holdable", DataType::Boolean, false),
            Field::new("is_binary", DataType::Boolean, false),
            Field::new("is_scrollable", DataType::Boolean, false),
            Field::new("creation_time", DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())), false),
        ]));
        CursorsTable { lists, schema }
    }
}

#[async_trait::async_trait]
impl datafusion::catalog::TableProvider for CursorsTable {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn table_type(&self) -> datafusion::logical_expr::TableType {
        datafusion::logical_expr::TableType::View
    }

    async fn scan(
        &self,
        state: &dyn datafusion::catalog::Session,
        projection: Option<&Vec<usize>>,
        _filters: &[datafusion::logical_expr::Expr],
        _limit: Option<usize>,
    ) -> datafusion::error::Result<std::sync::Arc<dyn datafusion::physical_plan::ExecutionPlan>> {
        use arrow::array::{BooleanArray, StringArray, TimestampMicrosecondArray};
        // A query planned outside any connection (no pid) sees no cursors.
        let pid = state.config_options().extensions.get::<crate::pg_catalog::Connection>().map(|c| c.backend_pid);
        let rows = pid.map(|p| self.lists.rows_of(p)).unwrap_or_default();
        let columns: Vec<arrow::array::ArrayRef> = vec![
            std::sync::Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.0.as_str()))),
            std::sync::Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.1.as_str()))),
            std::sync::Arc::new(BooleanArray::from_iter(rows.iter().map(|r| Some(r.2)))),
            std::sync::Arc::new(BooleanArray::from_iter(rows.iter().map(|r| Some(r.3)))),
            std::sync::Arc::new(BooleanArray::from(vec![false; rows.len()])),
            std::sync::Arc::new(TimestampMicrosecondArray::from_iter_values(rows.iter().map(|r| r.4)).with_timezone("UTC")),
        ];
        let batch = RecordBatch::try_new(self.schema.clone(), columns)?;
        Ok(datafusion::datasource::memory::MemorySourceConfig::try_new_exec(&[vec![batch]], self.schema.clone(), projection.cloned())?)
    }
}
