//! Writes over the wire: INSERT (simple and extended protocol, with parameters), CREATE
//! and DROP TABLE, COPY FROM STDIN, and BEGIN…COMMIT over any tables — all through
//! the write path `flashscan sql` uses (`flashscan_write::WritePath`: rows encoded and
//! checked, logged, one durable commit, then visible in the table's delta).
//!
//! The server is the database's one writer: it takes the database lock and the log at
//! start (`FlashscanSession::take_writer`) and keeps them until it stops.
//!
//! **Group commit across connections.** `WritePath::insert` is one transaction that
//! returns once its commit is durable (one log flush), and the write path runs one at a
//! time. Called once per statement, every client's INSERT would wait for its own flush.
//! So statements go to one committer thread: while it waits for a flush, new statements
//! queue; the next transaction takes every queued statement of a table (up to
//! [`GROUP_ROWS_MAX`]) and commits them together, with one flush. No statement is
//! acknowledged before the flush that covers its rows; a statement's rows are never split
//! across transactions. If a combined transaction fails on bad input (a row too large, a
//! value out of range), nothing of it was logged, and its statements are retried one by
//! one so only the bad one fails.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use arrow::record_batch::RecordBatch;
use flashscan_write::{WriteError, WritePath};
use pgwire::error::PgWireError;
use tokio::sync::oneshot;

use crate::error::{pg_error, sqlstate};

/// Rows one group transaction takes before it commits: large enough that 64 clients'
/// single-row statements share a flush, small enough that one transaction's log records
/// stay a few MiB.
pub const GROUP_ROWS_MAX: u64 = 100_000;
/// How often the idle committer checks whether the server is stopping.
const COMMITTER_POLL: Duration = Duration::from_millis(100);

/// Why a write failed, with the SQLSTATE the client gets.
#[derive(Debug, Clone)]
pub struct WriteFailure {
    pub code: &'static str,
    pub message: String,
}

impl WriteFailure {
    pub fn of(e: &WriteError) -> WriteFailure {
        let message = flashscan_sql::error::one_line(&e.to_string());
        let lower = message.to_ascii_lowercase();
        let code = match e {
            WriteError::NotSupported(_) => sqlstate::FEATURE_NOT_SUPPORTED,
            WriteError::Storage(flashscan_storage::StorageError::UnknownTable { .. }) => sqlstate::UNDEFINED_TABLE,
            _ if lower.contains("null") && lower.contains("not null") => sqlstate::NOT_NULL_VIOLATION,
            _ if e.is_user_input() => sqlstate::DATA_EXCEPTION,
            _ => sqlstate::IO_ERROR,
        };
        WriteFailure { code, message }
    }

    pub fn to_pg(&self) -> PgWireError {
        pg_error(self.code, self.message.clone())
    }
}

/// What the sampler shows about writes.
#[derive(Debug, Default)]
pub struct WriteCounters {
    /// Statements (INSERT, COPY, COMMIT of a block) acknowledged after their flush.
    pub statements_committed: AtomicU64,
    pub rows_inserted: AtomicU64,
    /// Write-path transactions (each one durable commit): several statements share one.
    pub transactions_committed: AtomicU64,
    pub statements_failed: AtomicU64,
    /// Statements waiting for their commit now.
    pub statements_waiting: AtomicUsize,
    /// Microseconds statements spent waiting for their commit, summed.
    pub commit_wait_us: AtomicU64,
    /// INSERT executions whose rows were made without DataFusion (`fast_insert.rs`).
    pub statements_fast_path: AtomicU64,
}

struct Request {
    table: String,
    batches: Vec<RecordBatch>,
    rows: u64,
    reply: oneshot::Sender<Result<u64, WriteFailure>>,
}

/// The one thread that calls `WritePath::insert` (see the module comment).
pub struct Committer {
    write: Arc<WritePath>,
    sender: Mutex<Option<mpsc::Sender<Request>>>,
    stop: Arc<AtomicBool>,
    thread: Mutex<Option<JoinHandle<()>>>,
    pub counters: Arc<WriteCounters>,
}

impl Committer {
    pub fn start(write: Arc<WritePath>) -> Committer {
        let (sender, receiver) = mpsc::channel::<Request>();
        let stop = Arc::new(AtomicBool::new(false));
        let counters = Arc::new(WriteCounters::default());
        let (s, c, w) = (stop.clone(), counters.clone(), write.clone());
        let thread = std::thread::Builder::new().name("flashscan-committer".into()).spawn(move || committer_loop(&w, &receiver, &s, &c)).ok();
        Committer { write, sender: Mutex::new(Some(sender)), stop, thread: Mutex::new(thread), counters }
    }

    /// The write path the committer commits through (BEGIN … COMMIT stages into it).
    pub fn write_path(&self) -> &WritePath {
        &self.write
    }

    /// COMMIT of a BEGIN … COMMIT block: one write-path transaction over every table it
    /// staged, durable when this returns (the log's group commit shares its flush with
    /// the committer's). Counted as one statement.
    pub async fn commit_transaction(&self, txn: flashscan_write::Transaction) -> Result<u64, WriteFailure> {
        if self.sender.lock().map(|s| s.is_none()).unwrap_or(true) {
            return Err(WriteFailure { code: sqlstate::ADMIN_SHUTDOWN, message: "the server is shutting down: the transaction was not committed".into() });
        }
        self.counters.statements_waiting.fetch_add(1, Relaxed);
        let waited = std::time::Instant::now();
        let write = self.write.clone();
        let result = tokio::task::spawn_blocking(move || write.commit_transaction(txn))
            .await
            .map_err(|e| WriteFailure { code: sqlstate::INTERNAL_ERROR, message: format!("the commit thread failed: {e}") })
            .and_then(|r| r.map_err(|e| WriteFailure::of(&e)));
        self.counters.commit_wait_us.fetch_add(waited.elapsed().as_micros() as u64, Relaxed);
        self.counters.statements_waiting.fetch_sub(1, Relaxed);
        match &result {
            Ok(n) => {
                self.counters.statements_committed.fetch_add(1, Relaxed);
                self.counters.transactions_committed.fetch_add(1, Relaxed);
                self.counters.rows_inserted.fetch_add(*n, Relaxed);
            }
            Err(_) => {
                self.counters.statements_failed.fetch_add(1, Relaxed);
            }
        }
        result
    }

    /// Commits `batches` into `table` as one statement; returns its rows once durable.
    pub async fn insert(&self, table: &str, batches: Vec<RecordBatch>) -> Result<u64, WriteFailure> {
        let rows: u64 = batches.iter().map(|b| b.num_rows() as u64).sum();
        let (reply, answer) = oneshot::channel();
        let stopped = || WriteFailure { code: sqlstate::ADMIN_SHUTDOWN, message: "the server is shutting down: the statement was not committed".into() };
        {
            let sender = self.sender.lock().map_err(|_| stopped())?;
            let Some(sender) = sender.as_ref() else { return Err(stopped()) };
            sender.send(Request { table: table.to_string(), batches, rows, reply }).map_err(|_| stopped())?;
        }
        self.counters.statements_waiting.fetch_add(1, Relaxed);
        let waited = std::time::Instant::now();
        let result = answer.await.unwrap_or_else(|_| Err(stopped()));
        self.counters.commit_wait_us.fetch_add(waited.elapsed().as_micros() as u64, Relaxed);
        self.counters.statements_waiting.fetch_sub(1, Relaxed);
        match &result {
            Ok(n) => {
                self.counters.statements_committed.fetch_add(1, Relaxed);
                self.counters.rows_inserted.fetch_add(*n, Relaxed);
            }
            Err(_) => {
                self.counters.statements_failed.fetch_add(1, Relaxed);
            }
        }
        result
    }

    /// Takes no more statements, commits those queued, and ends the thread.
    pub fn stop(&self) {
        if let Ok(mut s) = self.sender.lock() {
            s.take();
        }
        self.stop.store(true, Relaxed);
        let thread = self.thread.lock().ok().and_then(|mut t| t.take());
        if let Some(t) = thread {
            let _ = t.join();
        }
    }
}

fn committer_loop(write: &WritePath, receiver: &mpsc::Receiver<Request>, stop: &AtomicBool, counters: &WriteCounters) {
    loop {
        let first = match receiver.recv_timeout(COMMITTER_POLL) {
            Ok(r) => r,
            Err(RecvTimeoutError::Timeout) if stop.load(Relaxed) => return,
            Err(RecvTimeoutError::Timeout) => continue,
            Err(RecvTimeoutError::Disconnected) => return,
        };
        // Everything that queued while the last flush ran, by table, in arrival order.
        let mut rows = first.rows;
        let mut by_table: BTreeMap<String, Vec<Request>> = BTreeMap::new();
        by_table.entry(first.table.clone()).or_default().push(first);
        while rows < GROUP_ROWS_MAX {
            match receiver.try_recv() {
                Ok(r) => {
                    rows += r.rows;
                    by_table.entry(r.table.clone()).or_default().push(r);
                }
                Err(_) => break,
            }
        }
        for (table, requests) in by_table {
            commit_group(write, &table, requests, counters);
        }
    }
}

fn commit_group(write: &WritePath, table: &str, requests: Vec<Request>, counters: &WriteCounters) {
    let all: Vec<RecordBatch> = requests.iter().flat_map(|r| r.batches.iter().cloned()).collect();
    match write.insert(table, &all) {
        Ok(_) => {
            counters.transactions_committed.fetch_add(1, Relaxed);
            for r in requests {
                let _ = r.reply.send(Ok(r.rows));
            }
        }
        // Bad input fails before anything is logged: each statement alone, so only the
        // statement with the bad row fails.
        Err(e) if requests.len() > 1 && e.is_user_input() => {
            for r in requests {
                let result = write.insert(table, &r.batches);
                if result.is_ok() {
                    counters.transactions_committed.fetch_add(1, Relaxed);
                }
                let _ = r.reply.send(result.map(|_| r.rows).map_err(|e| WriteFailure::of(&e)));
            }
        }
        Err(e) => {
            let failure = WriteFailure::of(&e);
            for r in requests {
                let _ = r.reply.send(Err(failure.clone()));
            }
        }
    }
}

/// A connection's explicit transaction (`BEGIN` … `COMMIT`), on the write crate's
/// transaction (`flashscan_write::Transaction`, the one `flashscan sql`'s session uses):
/// each INSERT and COPY inside the block is validated and staged at once (its errors come
/// with the statement, as in PostgreSQL), nothing is logged; COMMIT logs every staged row of
/// every table with one commit record and answers once that is durable — all tables or
/// none. ROLLBACK drops what was staged. An error inside the block aborts it (25P02 for
/// every later statement until ROLLBACK; COMMIT of an aborted block answers ROLLBACK).
#[derive(Debug, Default)]
pub enum Transaction {
    #[default]
    Idle,
    Open { txn: flashscan_write::Transaction, statements: u64 },
    /// A statement failed inside the block: everything until COMMIT/ROLLBACK is refused.
    Failed,
}

impl Transaction {
    pub fn in_block(&self) -> bool {
        !matches!(self, Transaction::Idle)
    }

    /// A new open block.
    pub fn begin() -> Transaction {
        Transaction::Open { txn: flashscan_write::Transaction::new(), statements: 0 }
    }

    /// Stages a statement's rows into `table` (validated and encoded now, logged at COMMIT).
    /// On error the block keeps what it had (the caller marks it failed).
    pub fn add(&mut self, write: &WritePath, table: &str, rows: &[RecordBatch]) -> Result<u64, PgWireError> {
        match self {
            Transaction::Open { txn, statements } => {
                // Staging validates and encodes every row and may wait for the commit gate (a
                // checkpoint making room, a log being reopened): blocking work, so the runtime
                // is told and moves this thread's other connections elsewhere meanwhile.
                let staged = run_blocking(|| write.stage_insert(txn, table, rows)).map_err(|e| WriteFailure::of(&e).to_pg())?;
                *statements += 1;
                Ok(staged)
            }
            _ => Err(pg_error(sqlstate::INTERNAL_ERROR, "no open transaction")),
        }
    }
}

/// Runs `f` on this thread, telling a multi-thread runtime first (`block_in_place`) so the
/// thread's other tasks are not stuck behind it; elsewhere it just runs.
fn run_blocking<T>(f: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::try_current() {
        Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => tokio::task::block_in_place(f),
        _ => f(),
    }
}

/// A COPY FROM STDIN in progress on one connection.
#[derive(Debug)]
pub struct CopyIn {
    pub options: crate::statement::CopyFromOptions,
    pub schema: arrow::datatypes::SchemaRef,
    pub targets: Vec<usize>,
    pub data: Vec<u8>,
    /// Set when the data grew past `COPY_BYTES_MAX`: the rest is read and dropped, and
    /// the COPY fails at its end (the protocol has no way to stop the client earlier).
    pub too_large: bool,
}
