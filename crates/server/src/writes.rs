//! Writes over the wire: INSERT (simple and extended protocol, with parameters), CREATE
//! and DROP TABLE, COPY FROM STDIN, and BEGIN…COMMIT over any tables — all through
//! the write path `flashscan sql` uses (`flashscan_write::WritePath`: rows encoded and
//! checked, logged, one durable commit, then visible in the table's delta).
//!
//! The server is the database's one writer: it takes the database lock and the log at
//! start (`FlashscanSession::take_writer`) and keeps them until it stops.
//!
//! **Group commit across connections, pipelined.** `WritePath::insert` is one transaction
//! that returns once its commit is durable (one log flush). Called once per statement,
//! every client's INSERT would wait for its own flush. So statements go to a queue served
//! by a few commit workers ([`COMMIT_WORKERS_DEFAULT`]): a worker takes every queued
//! statement (up to [`GROUP_ROWS_MAX`] rows), groups them by table and commits each group
//! as one transaction. While one worker's group waits for its flush, the next worker
//! already forms, encodes and logs the next group, whose commit record then rides the
//! log writer's next flush (the log batches every commit record appended while a flush is
//! in flight: its own group commit). With one worker, group k+1 could only start after
//! group k's flush returned and its rows were placed — encode, log and wait in series, one
//! group in flight (docs/benchmarks.md has the measurements: a little faster with 4). This
//! is the shape of PostgreSQL's WAL (backends insert their records concurrently, one
//! flush covers them all) and of SQL Server's log writer.
//!
//! **A small statement commits on its own connection's task** (`Committer::commit_on_task`).
//! While few statements commit at once (none queued, at most [`ON_TASK_MAX_DEFAULT`] on
//! tasks), a statement of at most [`INLINE_ROWS_MAX`] rows is encoded and logged by the
//! connection's task itself (the log's short lock, no blocking). If no log flush is in
//! flight it then leads one on its thread, as PostgreSQL's `XLogFlush` does: blocking the
//! thread outright while no query runs and another async worker is left, else under
//! `tokio::task::block_in_place` so a running query keeps every worker meanwhile
//! (`Committer::lead_flush`); at one client that is the whole commit, with no hand-off. If a flush is in flight it *awaits* the flush that will cover it
//! (`PendingCommit::durable`): no thread blocked and no hand-off to a commit worker and
//! back; the log's writer thread leads the next flush right after the one running and wakes
//! the tasks it made durable. At 8 clients this took the server's CPU per single-row INSERT
//! from 40–46 to 28–38 µs and its context switches from ~3 to ~1.5 per statement
//! (docs/server.md, ins9). Under many clients (a statement queued, or more than the bound on
//! tasks) statements go to the commit workers, which group them into one transaction each —
//! fewer commit records and the flush chain of a worker already running (without the
//! bound, 64 clients measured 0.46× the rows/s).
//!
//! This is the one rule since session 10. Session 9 kept two others beside it, chosen by
//! `FLASHSCAN_COMMIT_MODE` to compare them on one binary: `inline` (a statement with nobody
//! queued committed on its connection's thread under `block_in_place`, everything else
//! through the workers; at 8 clients "nobody queued" seldom held, so nearly every statement
//! crossed to a worker and back) and `task` (always on the task, the log's writer thread
//! leading every flush: at 8 clients 0.68× inline's rows/s in one loaded run, each flush
//! after an idle log waiting for the writer thread to wake). The measurements chose this
//! rule (docs/benchmarks.md, "INSERT over the wire, session 9"), so the other two and the
//! switch are gone; `flashscan serve` refuses to start while the variable is set
//! ([`COMMIT_MODE_ENV_REMOVED`]) rather than measure this rule under another name. The
//! automatic checkpoint a commit may start is left to a blocking thread.
//!
//! No statement is acknowledged before the flush that covers its rows — unless its connection
//! set `synchronous_commit = off` (synchronous_commit.rs: delayed durability); a statement's rows
//! are never split across transactions; each group is its own write-path transaction with
//! its own commit record, so groups never wait for each other's rows. If a combined
//! transaction fails on bad input (a row too large, a value out of range), nothing of it
//! was logged, and its statements are retried one by one so only the bad one fails.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::Relaxed, Ordering::SeqCst};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use arrow::record_batch::RecordBatch;
use flashscan_write::{Durability, WriteError, WritePath};
use pgwire::error::PgWireError;
use tokio::sync::oneshot;

use crate::error::{pg_error, sqlstate};

/// Rows one group transaction takes before it commits: large enough that 64 clients'
/// single-row statements share a flush, small enough that one transaction's log records
/// stay a few MiB.
pub const GROUP_ROWS_MAX: u64 = 100_000;
/// Commit workers: two keep one group forming and logging while another waits for its
/// flush (the pipelining); more add a group in flight per flush when groups form faster
/// than the log flushes, at a thread each. Four: 64 clients' single-row INSERTs measured
/// 1 / 4 / 16 workers at about 26k / 29k / 26k rows/s (docs/benchmarks.md, server3).
pub const COMMIT_WORKERS_DEFAULT: usize = 4;
/// A bound on `--commit-workers`: each worker is a thread, and past a few the log's one
/// flush at a time decides the pace anyway.
pub const COMMIT_WORKERS_MAX: usize = 64;
/// Rows a statement may have to commit on its connection's own task (`commit_on_task`):
/// a few rows encode in microseconds; a COPY or an INSERT … SELECT of many rows would hold
/// an async worker thread for its whole encoding, so those always go to the workers.
pub const INLINE_ROWS_MAX: u64 = 64;
/// Statements committing on tasks at once above which the next ones go to the workers.
pub const ON_TASK_MAX_DEFAULT: usize = 8;
/// The environment variable that overrides [`ON_TASK_MAX_DEFAULT`] (experiments).
pub const ON_TASK_MAX_ENV: &str = "FLASHSCAN_ON_TASK_MAX";
/// The environment variable that chose among session 9's three commit rules (`inline`,
/// `task`, `hybrid`). Removed in session 10, when `hybrid` became the only rule (see the
/// module comment); `flashscan serve` refuses to start while it is set, whatever its value,
/// so a script still setting it learns that it would measure something other than what it
/// asked for.
pub const COMMIT_MODE_ENV_REMOVED: &str = "FLASHSCAN_COMMIT_MODE";

/// `Err`: the one-line error `flashscan serve` exits with when [`COMMIT_MODE_ENV_REMOVED`]
/// is set. Read once at start.
pub fn refuse_removed_commit_mode() -> Result<(), String> {
    commit_mode_refusal(std::env::var_os(COMMIT_MODE_ENV_REMOVED).as_deref())
}

fn commit_mode_refusal(value: Option<&std::ffi::OsStr>) -> Result<(), String> {
    match value {
        None => Ok(()),
        Some(v) => Err(format!("{COMMIT_MODE_ENV_REMOVED}={v:?}: this switch was removed; hybrid is the only commit mode now (docs/server.md): unset it")),
    }
}

/// `FLASHSCAN_ON_TASK_MAX` (unset: [`ON_TASK_MAX_DEFAULT`]), or why its value is refused —
/// a typo must not silently measure the default (`flashscan serve` reads it once at start
/// and exits with this one-line error).
pub fn on_task_max_from_env() -> Result<usize, String> {
    on_task_max_of(std::env::var(ON_TASK_MAX_ENV))
}

fn on_task_max_of(value: Result<String, std::env::VarError>) -> Result<usize, String> {
    match value {
        Err(std::env::VarError::NotPresent) => Ok(ON_TASK_MAX_DEFAULT),
        Ok(v) => v.parse().map_err(|_| format!("{ON_TASK_MAX_ENV}={v:?}: expected a count of statements")),
        Err(e) => Err(format!("{ON_TASK_MAX_ENV}: {e}")),
    }
}

/// How often an idle commit worker checks whether the server is stopping.
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
            WriteError::Deadlock { .. } => sqlstate::DEADLOCK_DETECTED,
            WriteError::UniqueViolation { .. } | WriteError::DuplicateKeys { .. } => sqlstate::UNIQUE_VIOLATION,
            WriteError::SerializationFailure { .. } | WriteError::RowsChanged { .. } => sqlstate::SERIALIZATION_FAILURE,
            WriteError::LockTimeout { .. } => sqlstate::LOCK_NOT_AVAILABLE,
            WriteError::NoSuchSavepoint { .. } => sqlstate::INVALID_SAVEPOINT_SPECIFICATION,
            WriteError::UnknownSequence { .. } => sqlstate::UNDEFINED_TABLE,
            WriteError::SequenceInUse { .. } => sqlstate::DEPENDENT_OBJECTS_STILL_EXIST,
            WriteError::SequenceValueUndefined { .. } => sqlstate::OBJECT_NOT_IN_PREREQUISITE_STATE,
            WriteError::GeneratedAlways { .. } => sqlstate::GENERATED_ALWAYS,
            WriteError::NoConflictTarget { .. } => sqlstate::INVALID_COLUMN_REFERENCE,
            WriteError::IsolationAfterQuery => sqlstate::ACTIVE_SQL_TRANSACTION,
            WriteError::Storage(flashscan_storage::StorageError::UnknownTable { .. } | flashscan_storage::StorageError::UnknownView { .. }) => sqlstate::UNDEFINED_TABLE,
            WriteError::Storage(flashscan_storage::StorageError::RelationExists { .. }) => sqlstate::DUPLICATE_TABLE,
            WriteError::Storage(flashscan_storage::StorageError::UnknownColumn { .. }) => sqlstate::UNDEFINED_COLUMN,
            WriteError::DuplicateColumn { .. } => sqlstate::DUPLICATE_COLUMN,
            WriteError::Storage(flashscan_storage::StorageError::DependentViews { .. }) => sqlstate::DEPENDENT_OBJECTS_STILL_EXIST,
            WriteError::Storage(flashscan_storage::StorageError::WrongObjectType { .. }) => sqlstate::WRONG_OBJECT_TYPE,
            WriteError::Storage(flashscan_storage::StorageError::ViewColumnsChanged { .. }) => sqlstate::INVALID_TABLE_DEFINITION,
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
    /// Groups committed, one per table of what a worker took from the queue
    /// (statements_committed / this = the average group size).
    pub groups_committed: AtomicU64,
    /// Groups being committed now (formed, logging or waiting for their flush): above 1
    /// only when the pipelining works.
    pub groups_in_flight: AtomicUsize,
    /// Microseconds statements spent waiting for their commit, summed.
    pub commit_wait_us: AtomicU64,
    /// INSERT executions whose rows were made without DataFusion (`fast_insert.rs`).
    pub statements_fast_path: AtomicU64,
    /// Statements committed on their connection's own task (`commit_on_task`), not by a
    /// commit worker.
    pub statements_on_task: AtomicU64,
    /// Flushes led on a connection's thread by blocking it outright (no query running,
    /// see [`Committer::lead_flush`]); the others led there went through `run_blocking`
    /// (`block_in_place` on the server's multi-thread runtime).
    pub flush_leads_direct: AtomicU64,
    pub flush_leads_in_place: AtomicU64,
}

impl WriteCounters {
    /// A statement's end, counted the same way whichever path committed it (on its
    /// connection's task, by a commit worker, or as a BEGIN … COMMIT block): its wait
    /// since `waited`, and its rows once acknowledged or its failure. Transactions and
    /// groups are counted where they are formed (a worker's group holds many statements).
    pub fn record_statement(&self, result: &Result<u64, WriteFailure>, waited: std::time::Instant) {
        self.commit_wait_us.fetch_add(waited.elapsed().as_micros() as u64, Relaxed);
        match result {
            Ok(rows) => {
                self.statements_committed.fetch_add(1, Relaxed);
                self.rows_inserted.fetch_add(*rows, Relaxed);
            }
            Err(_) => {
                self.statements_failed.fetch_add(1, Relaxed);
            }
        }
    }
}

/// Why the committer could not start.
#[derive(Debug, thiserror::Error)]
#[error("none of the {workers} commit worker threads could be started ({source}): statements would wait forever; free resources (threads, memory) and start the server again")]
pub struct CommitterStartError {
    pub workers: usize,
    #[source]
    pub source: std::io::Error,
}

struct Request {
    table: String,
    batches: Vec<RecordBatch>,
    rows: u64,
    /// Its connection's `synchronous_commit` (a group is strict if any of its statements is).
    durability: Durability,
    reply: oneshot::Sender<Result<u64, WriteFailure>>,
}

/// The commit workers that call `WritePath::insert` (see the module comment).
pub struct Committer {
    write: Arc<WritePath>,
    sender: Mutex<Option<mpsc::Sender<Request>>>,
    stop: Arc<AtomicBool>,
    threads: Mutex<Vec<JoinHandle<()>>>,
    /// Statements committing on their connection's task now (`commit_on_task`); `stop`
    /// waits for none.
    on_task: OnTaskCount,
    /// The bound on `on_task` above which statements go to the workers
    /// ([`ON_TASK_MAX_DEFAULT`], `FLASHSCAN_ON_TASK_MAX`).
    on_task_max: usize,
    /// Commits on tasks leading a log flush on their connection's thread now (at most
    /// `leading_slots()`).
    leading_on_threads: AtomicUsize,
    /// Statements handed to the workers and not answered yet: while any is, a new
    /// statement joins them (grouping) rather than committing on its own task.
    queued: AtomicUsize,
    /// An automatic checkpoint handed to a blocking thread after a commit on a task has not
    /// finished yet: the commits meanwhile start no other (it is due until it is done).
    checkpoint_pending: Arc<AtomicBool>,
    /// The server's admission: whether a query runs now, which decides how a commit
    /// leading a flush blocks its thread ([`Committer::lead_flush`]). `None` (tests, a
    /// committer alone): always `block_in_place`.
    queries: Option<Arc<crate::admission::Admission>>,
    pub counters: Arc<WriteCounters>,
}

/// How many commits on tasks may lead a log flush on their connections' threads at once:
/// one fewer than the async worker threads, one on a runtime of one thread. Each holds an
/// OS thread for a flush (`Committer::lead_flush`); past the slots a commit awaits the
/// flush instead, which blocks no thread.
fn leading_slots() -> usize {
    match tokio::runtime::Handle::try_current() {
        Ok(h) => h.metrics().num_workers().saturating_sub(1).max(1),
        Err(_) => 1,
    }
}

impl Committer {
    /// [`COMMIT_WORKERS_DEFAULT`] workers.
    pub fn start(write: Arc<WritePath>) -> Result<Committer, CommitterStartError> {
        Committer::with_workers(write, COMMIT_WORKERS_DEFAULT)
    }

    /// `workers` commit workers (1 to [`COMMIT_WORKERS_MAX`]; 1 = one group in flight at a
    /// time, the committer before pipelining). A worker thread that cannot be started is
    /// left out (the others serve the queue); none at all is an error, since queued
    /// statements would then wait forever.
    pub fn with_workers(write: Arc<WritePath>, workers: usize) -> Result<Committer, CommitterStartError> {
        Committer::with_worker_threads(write, workers, None)
    }

    /// [`Committer::with_workers`] with a bound on statements committing on tasks at once
    /// other than [`ON_TASK_MAX_DEFAULT`] (`flashscan serve`: `FLASHSCAN_ON_TASK_MAX`).
    pub fn with_on_task_max(write: Arc<WritePath>, workers: usize, on_task_max: usize) -> Result<Committer, CommitterStartError> {
        let mut committer = Committer::with_workers(write, workers)?;
        committer.on_task_max = on_task_max;
        Ok(committer)
    }

    /// Tells the committer whether queries run (the server's admission): while none does,
    /// a commit leading a log flush blocks its async worker outright instead of handing
    /// it over ([`Committer::lead_flush`]).
    pub fn watching_queries(mut self, admission: Arc<crate::admission::Admission>) -> Committer {
        self.queries = Some(admission);
        self
    }

    /// [`Committer::with_workers`] with each worker's stack size (`None`: the default);
    /// tests provoke a failed thread start with an impossible one.
    fn with_worker_threads(write: Arc<WritePath>, workers: usize, stack_size_bytes: Option<usize>) -> Result<Committer, CommitterStartError> {
        let (sender, receiver) = mpsc::channel::<Request>();
        // Workers take turns at the queue: the one holding it forms the next group, the
        // others are committing theirs.
        let receiver = Arc::new(Mutex::new(receiver));
        let stop = Arc::new(AtomicBool::new(false));
        let counters = Arc::new(WriteCounters::default());
        let mut threads = Vec::new();
        let workers = workers.clamp(1, COMMIT_WORKERS_MAX);
        let mut last_error = None;
        for i in 0..workers {
            let (r, s, c, w) = (receiver.clone(), stop.clone(), counters.clone(), write.clone());
            let mut builder = std::thread::Builder::new().name(format!("flashscan-commit-{i}"));
            if let Some(bytes) = stack_size_bytes {
                builder = builder.stack_size(bytes);
            }
            match builder.spawn(move || committer_loop(&w, &r, &s, &c)) {
                Ok(t) => threads.push(t),
                Err(e) => last_error = Some(e),
            }
        }
        if threads.is_empty() {
            let source = last_error.unwrap_or_else(|| std::io::Error::other("no thread started"));
            return Err(CommitterStartError { workers, source });
        }
        Ok(Committer {
            write,
            sender: Mutex::new(Some(sender)),
            stop,
            threads: Mutex::new(threads),
            on_task: OnTaskCount::default(),
            on_task_max: ON_TASK_MAX_DEFAULT,
            leading_on_threads: AtomicUsize::new(0),
            queued: AtomicUsize::new(0),
            checkpoint_pending: Arc::new(AtomicBool::new(false)),
            queries: None,
            counters,
        })
    }

    /// One of the `leading_slots()` for a commit that blocks its thread; false if all are taken.
    fn take_leading_slot(&self) -> bool {
        if self.leading_on_threads.fetch_add(1, Relaxed) >= leading_slots() {
            self.leading_on_threads.fetch_sub(1, Relaxed);
            return false;
        }
        true
    }

    /// Commits a small statement on the connection's own task (see the module comment);
    /// `None`: it goes to the workers (too many rows, too many statements committing,
    /// stopping, or its commit would block).
    async fn commit_on_task(&self, table: &str, batches: &[RecordBatch], rows: u64, durability: Durability) -> Option<Result<u64, WriteFailure>> {
        if rows > INLINE_ROWS_MAX {
            return None;
        }
        // Counted until this commit ends, also when its future is dropped: `stop` waits.
        let _active = self.on_task.enter(&self.stop)?;
        // Many statements at once: the workers group them (one transaction, and the flush
        // chain of a worker thread that is already running), see the module comment.
        if self.queued.load(Relaxed) != 0 || self.on_task.active() > self.on_task_max {
            return None;
        }
        // Cheap (the state mutex): staging below must not block the runtime either. A
        // table with a unique index goes to the workers: its staging may wait for another
        // transaction's key lock, and the workers' grouping of queued statements into one
        // transaction was measured faster for it than committing each on its task, even
        // with key-grain locks (session 26, docs/benchmarks.md: `bench/inserts/wire.py
        // --primary-key`, 64 clients, 37,536 against 26,425 rows/s delayed, 30,492 against
        // 28,792 durable).
        if self.write.commit_would_block(0).unwrap_or(true) || self.write.has_unique_index(table) {
            return None;
        }
        let waited = std::time::Instant::now();
        let mut txn = flashscan_write::Transaction::new();
        // Delayed: `durable()` below resolves at once, the log writer flushes later.
        txn.set_durability(durability);
        let result = match self.write.stage_insert(&mut txn, table, batches) {
            Err(e) => Err(WriteFailure::of(&e)),
            Ok(_) => match self.write.try_begin_commit(txn) {
                // Would block: nothing was logged, the workers commit it.
                Ok(Err(_txn)) => return None,
                Err(e) => Err(WriteFailure::of(&e)),
                Ok(Ok(pending)) => {
                    self.counters.statements_waiting.fetch_add(1, Relaxed);
                    self.counters.groups_in_flight.fetch_add(1, Relaxed);
                    let _counted = Uncount([&self.counters.statements_waiting, &self.counters.groups_in_flight]);
                    if pending.would_lead_flush() && self.take_leading_slot() {
                        // No flush in flight: lead it on this thread (no hand-off to the
                        // log's writer thread and back), blocking it for about one
                        // fdatasync (`lead_flush` says how).
                        let r = self.lead_flush(|| pending.wait());
                        self.leading_on_threads.fetch_sub(1, Relaxed);
                        r.map_err(|e| WriteFailure::of(&e))
                    } else {
                        pending.durable().await.map_err(|e| WriteFailure::of(&e))
                    }
                }
            },
        };
        self.finish_own_commit(result, waited)
    }

    /// Runs a log flush this commit leads on its connection's async worker thread, which
    /// it blocks for about one fdatasync.
    ///
    /// While no query runs (the server's admission is idle) and the runtime has another
    /// async worker, it blocks the thread outright, as a PostgreSQL backend does in
    /// `XLogFlush`: at most `leading_slots()` = workers − 1 commits do so at once, so a
    /// worker is always left for the other connections, and there is nothing else to run.
    /// Otherwise `block_in_place`: the runtime hands this worker's queue to another
    /// thread meanwhile, so a running query keeps every worker (and a runtime of one
    /// worker is never stalled). The hand-off is not free: it wakes a thread of the
    /// blocking pool for every flush and takes the worker back after it — at one client
    /// two more context switches per statement and ~40 µs of CPU, a third of the round trip
    /// (docs/server.md, "Leading the flush without the hand-off", session 10).
    fn lead_flush<T>(&self, f: impl FnOnce() -> T) -> T {
        let queries_idle = self.queries.as_ref().is_some_and(|a| a.idle());
        let outright = tokio::runtime::Handle::try_current().is_ok_and(|h| {
            h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread && blocks_outright(h.metrics().num_workers(), queries_idle)
        });
        if outright {
            self.counters.flush_leads_direct.fetch_add(1, Relaxed);
            f()
        } else {
            self.counters.flush_leads_in_place.fetch_add(1, Relaxed);
            run_blocking(f)
        }
    }

    /// The end of a statement committed on its connection's task (its own write-path
    /// transaction): counted, and the checkpoint it made due started.
    fn finish_own_commit(&self, result: Result<u64, WriteFailure>, waited: std::time::Instant) -> Option<Result<u64, WriteFailure>> {
        if result.is_ok() {
            self.counters.statements_on_task.fetch_add(1, Relaxed);
            self.counters.groups_committed.fetch_add(1, Relaxed);
            self.counters.transactions_committed.fetch_add(1, Relaxed);
            self.start_checkpoint_if_due();
        }
        self.counters.record_statement(&result, waited);
        Some(result)
    }

    /// After a commit on a task: the automatic checkpoint it made due, on a blocking thread
    /// (seconds of page writes, never a connection's thread), one at a time. Its failure is
    /// kept by the write path (`auto_checkpoint_stats`).
    fn start_checkpoint_if_due(&self) {
        if !self.write.checkpoint_is_due() || self.checkpoint_pending.swap(true, Relaxed) {
            return;
        }
        let (write, pending) = (self.write.clone(), self.checkpoint_pending.clone());
        let checkpoint = move || {
            let _ = write.checkpoint_if_due();
            pending.store(false, Relaxed);
        };
        match tokio::runtime::Handle::try_current() {
            Ok(h) => drop(h.spawn_blocking(checkpoint)),
            Err(_) => checkpoint(),
        }
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
        self.counters.statements_waiting.fetch_sub(1, Relaxed);
        if result.is_ok() {
            self.counters.transactions_committed.fetch_add(1, Relaxed);
        }
        self.counters.record_statement(&result, waited);
        result
    }

    /// Commits `batches` into `table` as one statement; returns its rows once durable.
    pub async fn insert(&self, table: &str, batches: Vec<RecordBatch>) -> Result<u64, WriteFailure> {
        self.insert_as(table, batches, Durability::Strict).await
    }

    /// [`Committer::insert`] acknowledged as `durability` says (the connection's
    /// `synchronous_commit`: delayed returns before the flush).
    pub async fn insert_as(&self, table: &str, batches: Vec<RecordBatch>, durability: Durability) -> Result<u64, WriteFailure> {
        let rows: u64 = batches.iter().map(|b| b.num_rows() as u64).sum();
        if let Some(result) = self.commit_on_task(table, &batches, rows, durability).await {
            return result;
        }
        let (reply, answer) = oneshot::channel();
        let stopped = || WriteFailure { code: sqlstate::ADMIN_SHUTDOWN, message: "the server is shutting down: the statement was not committed".into() };
        // Counted before it is queued, so a statement arriving meanwhile queues too rather
        // than committing on its own task (`commit_on_task`); uncounted when this ends,
        // also when the connection goes away while it waits (the future dropped).
        let _waiting = Waiting::count(&self.queued, &self.counters.statements_waiting);
        let queued = match self.sender.lock() {
            Ok(sender) => match sender.as_ref() {
                Some(sender) => sender.send(Request { table: table.to_string(), batches, rows, durability, reply }).is_ok(),
                None => false,
            },
            Err(_) => false,
        };
        if !queued {
            return Err(stopped());
        }
        let waited = std::time::Instant::now();
        let result = answer.await.unwrap_or_else(|_| Err(stopped()));
        self.counters.record_statement(&result, waited);
        result
    }

    /// Takes no more statements, commits those queued, and ends the workers.
    pub fn stop(&self) {
        if let Ok(mut s) = self.sender.lock() {
            s.take();
        }
        self.stop.store(true, SeqCst);
        // Statements committing on their connections' tasks finish first (each was either
        // counted before it saw the flag, or sees it and goes to the closed queue: refused).
        // Woken by the last one to end, no polling (`OnTaskCount` says why none is missed).
        self.on_task.wait_for_none(&self.stop);
        let threads = self.threads.lock().map(|mut t| std::mem::take(&mut *t)).unwrap_or_default();
        for t in threads {
            let _ = t.join();
        }
    }
}

/// The statements committing on their connections' tasks now, and `stop`'s wait for none.
///
/// The count is an atomic, not a `Mutex<usize>`: every commit on a task enters and leaves it
/// and the bound reads it, and a mutex there would be one more lock every connection takes
/// twice per statement. Only `stop` sleeps (on `ended_changed`), and a commit takes the
/// mutex only to wake it: when it leaves as the last one while the committer stops.
///
/// Why `stop` neither misses a commit nor sleeps through the last one's end. The flag
/// (`stop`) and the count are both read and written SeqCst, so these operations fall into
/// one total order consistent with each thread's program order: `stop` stores the flag (S)
/// and then loads the count (C); a commit increments the count (I) and then loads the flag
/// (F1) in `enter`, and when it ends decrements the count (D) and then loads the flag (F2)
/// in `OnTask::drop`.
/// - Entering: if F1 reads false, F1 precedes S, so I precedes C: `stop` counts this commit
///   and waits for it. If F1 reads true, the commit is refused (its D follows at once).
/// - Leaving: if F2 reads false, F2 precedes S, so D precedes C: `stop` does not count this
///   commit, nothing to wake. If F2 reads true and D took the count to zero, the commit
///   takes `ended` before it notifies. `stop` holds `ended` from its load of the count until
///   `Condvar::wait` releases it atomically with going to sleep, so the notification comes
///   either before that load (which then reads the count after D: zero, unless a refused
///   commit is in between, whose own D is such a D again) or while `stop` sleeps (and wakes
///   it). Every move of the count to zero after S is such a D, so the last commit to end
///   wakes `stop`.
#[derive(Default)]
struct OnTaskCount {
    active: AtomicUsize,
    /// Held by `stop` from its check of `active` until it sleeps; taken by the last commit
    /// to end while stopping, to wake it.
    ended: Mutex<()>,
    ended_changed: Condvar,
}

impl OnTaskCount {
    /// Commits on tasks now (a hint for the bound: it moves as commits enter and end).
    fn active(&self) -> usize {
        self.active.load(Relaxed)
    }

    /// Counts a commit on a task until the returned guard drops (also when the commit's
    /// future is dropped); `None` once `stop` is set.
    fn enter<'a>(&'a self, stop: &'a AtomicBool) -> Option<OnTask<'a>> {
        self.active.fetch_add(1, SeqCst);
        let entered = OnTask { count: self, stop };
        if stop.load(SeqCst) {
            return None;
        }
        Some(entered)
    }

    /// Returns once no commit is on a task; called after `stop` was set (no new one stays).
    fn wait_for_none(&self, stop: &AtomicBool) {
        debug_assert!(stop.load(SeqCst), "wait_for_none before stop: commits may keep entering");
        // Nothing panics while holding `ended`, and it guards no data: a poisoned lock is fine.
        let mut ended = self.ended.lock().unwrap_or_else(|p| p.into_inner());
        while self.active.load(SeqCst) != 0 {
            ended = self.ended_changed.wait(ended).unwrap_or_else(|p| p.into_inner());
        }
    }
}

/// A commit counted in [`OnTaskCount`] while it runs.
struct OnTask<'a> {
    count: &'a OnTaskCount,
    stop: &'a AtomicBool,
}

impl Drop for OnTask<'_> {
    fn drop(&mut self) {
        let before = self.count.active.fetch_sub(1, SeqCst);
        debug_assert!(before > 0, "a commit on a task left the count twice");
        if before == 1 && self.stop.load(SeqCst) {
            let _ended = self.count.ended.lock().unwrap_or_else(|p| p.into_inner());
            self.count.ended_changed.notify_all();
        }
    }
}

/// Counts left when a commit on a task ends or its future is dropped.
struct Uncount<'a>([&'a AtomicUsize; 2]);

impl Drop for Uncount<'_> {
    fn drop(&mut self) {
        for c in self.0 {
            c.fetch_sub(1, Relaxed);
        }
    }
}

/// Two counts a queued statement is in while it waits, left when it ends or is dropped.
struct Waiting<'a>([&'a AtomicUsize; 2]);

impl<'a> Waiting<'a> {
    fn count(a: &'a AtomicUsize, b: &'a AtomicUsize) -> Waiting<'a> {
        a.fetch_add(1, Relaxed);
        b.fetch_add(1, Relaxed);
        Waiting([a, b])
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        for c in self.0 {
            c.fetch_sub(1, Relaxed);
        }
    }
}

/// The next group: every statement queued now (at least one, waited for), by table in
/// arrival order. `None` when the worker should end (the queue closed and empty, or idle
/// while the server stops).
fn next_group(receiver: &Mutex<mpsc::Receiver<Request>>, stop: &AtomicBool) -> Option<BTreeMap<String, Vec<Request>>> {
    // A poisoned queue lock means a worker panicked while holding it: the queue itself is
    // intact (mpsc), so the others go on.
    let queue = receiver.lock().unwrap_or_else(|p| p.into_inner());
    let first = loop {
        match queue.recv_timeout(COMMITTER_POLL) {
            Ok(r) => break r,
            Err(RecvTimeoutError::Timeout) if stop.load(Relaxed) => return None,
            Err(RecvTimeoutError::Timeout) => continue,
            Err(RecvTimeoutError::Disconnected) => return None,
        }
    };
    let mut rows = first.rows;
    let mut by_table: BTreeMap<String, Vec<Request>> = BTreeMap::new();
    by_table.entry(first.table.clone()).or_default().push(first);
    while rows < GROUP_ROWS_MAX {
        match queue.try_recv() {
            Ok(r) => {
                rows += r.rows;
                by_table.entry(r.table.clone()).or_default().push(r);
            }
            Err(_) => break,
        }
    }
    Some(by_table)
}

fn committer_loop(write: &WritePath, receiver: &Mutex<mpsc::Receiver<Request>>, stop: &AtomicBool, counters: &WriteCounters) {
    // The queue lock is released before the group commits: the next worker forms the next
    // group while this one logs and waits for its flush.
    while let Some(by_table) = next_group(receiver, stop) {
        counters.groups_in_flight.fetch_add(1, Relaxed);
        for (table, requests) in by_table {
            counters.groups_committed.fetch_add(1, Relaxed);
            commit_group(write, &table, requests, counters);
        }
        counters.groups_in_flight.fetch_sub(1, Relaxed);
    }
}

fn commit_group(write: &WritePath, table: &str, requests: Vec<Request>, counters: &WriteCounters) {
    let all: Vec<RecordBatch> = requests.iter().flat_map(|r| r.batches.iter().cloned()).collect();
    // Strict if any statement asks for it: a delayed one acknowledged after the flush
    // loses nothing, a strict one acknowledged before it would break its promise.
    let durability = if requests.iter().any(|r| r.durability == Durability::Strict) { Durability::Strict } else { Durability::Delayed };
    match write.insert_as(table, &all, durability) {
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
                let result = write.insert_as(table, &r.batches, r.durability);
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
    /// A statement failed inside the block: everything until COMMIT/ROLLBACK is refused,
    /// but ROLLBACK TO a savepoint, which makes the block open again (the transaction is
    /// kept for that).
    Failed { txn: flashscan_write::Transaction, statements: u64 },
}

impl Transaction {
    pub fn in_block(&self) -> bool {
        !matches!(self, Transaction::Idle)
    }

    /// The block failed (a statement inside it failed): see `Transaction::Failed`.
    pub fn fail(&mut self) {
        *self = match std::mem::take(self) {
            Transaction::Open { txn, statements } => Transaction::Failed { txn, statements },
            // Idle, or failed already: as it was.
            other => other,
        };
    }

    pub fn is_failed(&self) -> bool {
        matches!(self, Transaction::Failed { .. })
    }

    /// SAVEPOINT, RELEASE and ROLLBACK TO (`Command::Savepoint` …): `what` runs on the
    /// block's transaction. ROLLBACK TO makes a failed block open again once it succeeds.
    pub fn savepoints(&mut self, command: &str, what: impl FnOnce(&mut flashscan_write::Transaction) -> Result<(), WriteError>) -> Result<(), PgWireError> {
        let reopens = command == "ROLLBACK TO SAVEPOINT";
        match std::mem::take(self) {
            Transaction::Idle => Err(pg_error(sqlstate::NO_ACTIVE_SQL_TRANSACTION, format!("{command} can only be used in transaction blocks: BEGIN first"))),
            Transaction::Open { mut txn, statements } => {
                let done = what(&mut txn);
                *self = Transaction::Open { txn, statements };
                done.map_err(|e| WriteFailure::of(&e).to_pg())
            }
            Transaction::Failed { mut txn, statements } if reopens => match what(&mut txn) {
                Ok(()) => {
                    *self = Transaction::Open { txn, statements };
                    Ok(())
                }
                Err(e) => {
                    *self = Transaction::Failed { txn, statements };
                    Err(WriteFailure::of(&e).to_pg())
                }
            },
            failed @ Transaction::Failed { .. } => {
                *self = failed;
                Err(pg_error(sqlstate::IN_FAILED_TRANSACTION, "current transaction is aborted, commands ignored until end of transaction block"))
            }
        }
    }

    /// What the open block's next statement reads besides the committed rows of now
    /// (`flashscan_write::own_writes`): its own changes, and under REPEATABLE READ its
    /// snapshot (taken here by its first statement). `None` outside a block, or before a
    /// READ COMMITTED block staged anything.
    pub fn own_changes(&mut self, write: Option<&WritePath>) -> Result<Option<Arc<flashscan_write::own_writes::OwnChanges>>, PgWireError> {
        match self {
            Transaction::Open { txn, .. } => {
                if let Some(w) = write {
                    txn.pin_snapshot(w).map_err(|e| WriteFailure::of(&e).to_pg())?;
                }
                Ok(txn.own_changes())
            }
            _ => Ok(None),
        }
    }

    /// A new open block at `isolation`.
    pub fn begin(isolation: flashscan_write::Isolation) -> Transaction {
        let mut txn = flashscan_write::Transaction::new();
        // A new transaction has taken no snapshot: any level is taken.
        let _ = txn.set_isolation(isolation);
        Transaction::Open { txn, statements: 0 }
    }

    /// The isolation level of the open (or failed) block.
    pub fn isolation(&self) -> Option<flashscan_write::Isolation> {
        match self {
            Transaction::Open { txn, .. } | Transaction::Failed { txn, .. } => Some(txn.isolation()),
            Transaction::Idle => None,
        }
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

/// Whether a commit leading a flush may block its async worker outright: another worker
/// is left for the other connections, and no query runs that would want every worker.
fn blocks_outright(async_workers: usize, queries_idle: bool) -> bool {
    async_workers >= 2 && queries_idle
}

/// Runs `f` on this thread, telling a multi-thread runtime first (`block_in_place`) so the
/// thread's other tasks are not stuck behind it; elsewhere it just runs.
/// Runs `step` on the caller's task with `txn` asked not to wait; only when a lock would
/// make it wait (`WriteError::WouldWait`: nothing staged) is it run again by
/// `run_blocking`, allowed to wait. Most UPDATEs and DELETEs meet no held lock, and moving
/// the worker's other tasks to another thread for each of their steps cost more than the
/// steps (`Transaction::set_no_wait`).
pub(crate) fn without_waiting_first<T, E: WouldWait>(txn: &mut flashscan_write::Transaction, mut step: impl FnMut(&mut flashscan_write::Transaction) -> Result<T, E>) -> Result<T, E> {
    txn.set_no_wait(true);
    let first = step(txn);
    txn.set_no_wait(false);
    match first {
        Err(e) if e.would_wait() => run_blocking(|| step(txn)),
        other => other,
    }
}

/// An error that may be `WriteError::WouldWait`.
pub(crate) trait WouldWait {
    fn would_wait(&self) -> bool;
}

impl WouldWait for WriteError {
    fn would_wait(&self) -> bool {
        matches!(self, WriteError::WouldWait { .. })
    }
}

impl WouldWait for flashscan_sql::SqlError {
    fn would_wait(&self) -> bool {
        matches!(self, flashscan_sql::SqlError::Write(e) if e.would_wait())
    }
}

pub(crate) fn run_blocking<T>(f: impl FnOnce() -> T) -> T {
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

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use arrow::array::{Array, Int64Array};
    use arrow::datatypes::{DataType, Field, Schema};
    use flashscan_storage::column::{ColumnDef, ColumnType};
    use flashscan_write::{init_database, InitOptions, NewTable};

    use super::*;

    fn writer(dir: &std::path::Path) -> Arc<WritePath> {
        let db = dir.join("db");
        init_database(&db, &InitOptions::default()).expect("init");
        let write = WritePath::open_writer(&db, "committer test").expect("writer");
        let id = ColumnDef { name: "id".into(), column_type: ColumnType::Int64, nullable: false };
        write.create_table(NewTable { name: "t".into(), columns: vec![id], partition_count: Some(2), partition_by: None, if_not_exists: false, indexes: Vec::new(), ..Default::default() }).expect("create");
        Arc::new(write)
    }

    fn one_row(id: i64) -> Vec<RecordBatch> {
        let schema = Arc::new(Schema::new(vec![Field::new("id", DataType::Int64, false)]));
        vec![RecordBatch::try_new(schema, vec![Arc::new(Int64Array::from(vec![id]))]).expect("batch")]
    }

    /// The ids in table t of the database in `dir`, read back by a fresh reader: the log
    /// replayed, independent of the writer that committed them.
    fn durable_ids(dir: &std::path::Path) -> Vec<i64> {
        let read = WritePath::open(&dir.join("db")).expect("open");
        let table = read.catalog().expect("catalog").tables["t"].clone();
        let delta = read.delta("t").expect("delta");
        let mut ids = Vec::new();
        for p in 0..delta.partition_count() {
            if let Some(b) = delta.decode(&table, p, &[0]).expect("decode") {
                let a = b.column(0).as_any().downcast_ref::<Int64Array>().expect("int64");
                ids.extend((0..a.len()).map(|i| a.value(i)));
            }
        }
        ids.sort_unstable();
        ids
    }

    /// The removed switch refuses every value, the former modes' names and the winner's
    /// included, with one line that names the variable and says what is left; unset, the
    /// server starts. (`tests/writes.rs` checks that `flashscan serve` exits with it.)
    #[test]
    fn the_removed_commit_mode_switch_refuses_every_value() {
        assert_eq!(commit_mode_refusal(None), Ok(()));
        for value in ["inline", "task", "hybrid", "", "hybird"] {
            let refusal = commit_mode_refusal(Some(std::ffi::OsStr::new(value))).expect_err(value);
            assert!(refusal.starts_with(&format!("FLASHSCAN_COMMIT_MODE={value:?}: ")), "{refusal}");
            assert!(refusal.contains("removed") && refusal.contains("hybrid is the only commit mode"), "{refusal}");
            assert!(!refusal.contains('\n'), "one line: {refusal}");
        }
    }

    /// `FLASHSCAN_ON_TASK_MAX`: unset the default, a count taken, anything else refused with
    /// one line naming the variable (a typo must not silently measure the default).
    #[test]
    fn on_task_max_takes_a_count_and_refuses_anything_else() {
        assert_eq!(on_task_max_of(Err(std::env::VarError::NotPresent)), Ok(ON_TASK_MAX_DEFAULT));
        assert_eq!(on_task_max_of(Ok("3".into())), Ok(3));
        assert_eq!(on_task_max_of(Ok("0".into())), Ok(0), "0: every statement to the workers");
        for bad in ["", "eight", "-1", "8 ", "1e3"] {
            let refusal = on_task_max_of(Ok(bad.into())).expect_err(bad);
            assert!(refusal.starts_with("FLASHSCAN_ON_TASK_MAX="), "{refusal}");
            assert!(!refusal.contains('\n'), "one line: {refusal}");
        }
        let not_unicode = std::env::VarError::NotUnicode(std::ffi::OsString::from("x"));
        assert!(on_task_max_of(Err(not_unicode)).expect_err("not unicode").starts_with("FLASHSCAN_ON_TASK_MAX: "));
    }

    /// `OnTaskCount::wait_for_none` as `stop` calls it (the flag set first), on a thread of
    /// its own that is not joined: if the wait never ends, the test fails on its timeout
    /// rather than hanging. Sends the instant it returned.
    fn stop_on_a_thread(count: &Arc<OnTaskCount>, stop: &Arc<AtomicBool>) -> mpsc::Receiver<std::time::Instant> {
        let (count, stop) = (count.clone(), stop.clone());
        let (ended_tx, ended_rx) = mpsc::channel();
        std::thread::spawn(move || {
            stop.store(true, SeqCst);
            count.wait_for_none(&stop);
            let _ = ended_tx.send(std::time::Instant::now());
        });
        ended_rx
    }

    /// `stop`'s wait for the commits on tasks: it waits while one is counted (a commit
    /// refused after the flag, counted and uncounted meanwhile, and the end of all but the
    /// last do not end it early) and returns once the last one ends — woken, not polled.
    #[test]
    fn the_wait_for_commits_on_tasks_ends_with_the_last_one() {
        let (count, stop) = (Arc::new(OnTaskCount::default()), Arc::new(AtomicBool::new(false)));
        let first = count.enter(&stop).expect("before stop");
        let second = count.enter(&stop).expect("before stop");
        let ended = stop_on_a_thread(&count, &stop);
        while !stop.load(SeqCst) {
            std::thread::yield_now();
        }
        assert!(count.enter(&stop).is_none(), "refused after stop");
        drop(first);
        assert_eq!(ended.recv_timeout(Duration::from_millis(100)), Err(RecvTimeoutError::Timeout), "one commit is still on its task");
        let last_ended = std::time::Instant::now();
        drop(second);
        let woken = ended.recv_timeout(Duration::from_secs(10)).expect("the wait ends with the last commit");
        eprintln!("woken {:?} after the last commit ended", woken.saturating_duration_since(last_ended));
        assert_eq!(count.active(), 0);
    }

    /// Threads entering and leaving while `stop` comes, many times over: the wait always
    /// ends (a lost wake-up would leave it asleep: the timeout fails the test), and once it
    /// has, no commit is counted and none enters any more.
    #[test]
    fn the_wait_for_commits_on_tasks_misses_no_wake_up() {
        const ROUNDS: usize = 300;
        const THREADS: usize = 4;
        for round in 0..ROUNDS {
            let (count, stop) = (Arc::new(OnTaskCount::default()), Arc::new(AtomicBool::new(false)));
            std::thread::scope(|scope| {
                for _ in 0..THREADS {
                    scope.spawn(|| {
                        while let Some(active) = count.enter(&stop) {
                            std::hint::spin_loop();
                            drop(active);
                        }
                    });
                }
                // Let the threads get going (longer in later rounds), then stop while they
                // enter and leave.
                for _ in 0..(round % 50) * 20 {
                    std::hint::spin_loop();
                }
                let ended = stop_on_a_thread(&count, &stop);
                if ended.recv_timeout(Duration::from_secs(10)).is_err() {
                    panic!("round {round}: the wait never ended ({} counted)", count.active());
                }
                assert!(count.enter(&stop).is_none(), "round {round}: entered after stop returned");
            });
            assert_eq!(count.active(), 0, "round {round}");
        }
    }

    /// `clients` connections at once, each inserting ids `c * 1000 + i` for `i` in
    /// `0..each`, one row a statement; returns once all are acknowledged.
    async fn insert_from_clients(committer: &Arc<Committer>, clients: i64, each: i64) {
        let mut tasks = Vec::new();
        for c in 0..clients {
            let committer = committer.clone();
            tasks.push(tokio::spawn(async move {
                for i in 0..each {
                    assert_eq!(committer.insert("t", one_row(c * 1000 + i)).await.expect("insert"), 1);
                }
            }));
        }
        for t in tasks {
            t.await.expect("client");
        }
    }

    /// Many connections' single-row statements, 8 and 48 connections (through 1 and 4
    /// workers), on a runtime of two async workers (the server's on this machine): every
    /// statement acknowledged exactly once, every acknowledged row durable exactly once (no
    /// row of a group lost or doubled when groups commit side by side, or when commits on
    /// tasks share flushes), no more transactions than statements, flushes shared. 8
    /// connections are within the bound on tasks: every statement commits on its task, none
    /// reaches the workers. (Session 9's `every_commit_mode_commits_every_statement_once`
    /// also ran the removed `inline` and `task` rules.)
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn every_statement_commits_once_on_tasks_or_through_workers() {
        for (workers, clients) in [(4, 8), (1, 48), (4, 48)] {
            let dir = tempfile::tempdir().expect("tempdir");
            let write = writer(dir.path());
            let committer = Arc::new(Committer::with_workers(write.clone(), workers).expect("committer"));
            const EACH: i64 = 25;
            insert_from_clients(&committer, clients, EACH).await;
            let counters = &committer.counters;
            let case = format!("{workers} worker(s), {clients} connections");
            let statements = counters.statements_committed.load(Relaxed);
            assert_eq!(statements, (clients * EACH) as u64, "{case}");
            assert_eq!(counters.rows_inserted.load(Relaxed), statements);
            assert_eq!(counters.statements_failed.load(Relaxed), 0);
            assert_eq!(counters.statements_waiting.load(Relaxed), 0, "{case}");
            let transactions = counters.transactions_committed.load(Relaxed);
            assert!(transactions >= 1 && transactions <= statements, "{transactions} transactions for {statements} statements");
            let on_tasks = counters.statements_on_task.load(Relaxed);
            assert!(on_tasks <= statements, "{case}: {on_tasks} on tasks of {statements}");
            let wal = write.wal_stats().expect("writer");
            eprintln!("{case}: {statements} statements in {transactions} transactions, {on_tasks} on their tasks, {} flushes", wal.flushes_count);
            if clients == 8 {
                assert_eq!(on_tasks, statements, "8 connections are within the bound: all on their tasks");
            }
            assert!(wal.flushes_count < statements, "{case}: no flush shared: {wal:?}");
            // A worker answers its group's statements before it counts the group finished,
            // so the count is read once the workers have ended (stop joins them).
            committer.stop();
            assert_eq!(counters.groups_in_flight.load(Relaxed), 0, "every group finished");
            drop(committer);
            drop(write);
            let expected: Vec<i64> = (0..clients).flat_map(|c| (0..EACH).map(move |i| c * 1000 + i)).collect();
            assert_eq!(durable_ids(dir.path()), expected, "{case}");
        }
    }

    /// One connection alone: every statement commits on its own task, leading its flush on
    /// its thread (no worker hand-off), each durable when acknowledged, read back by a
    /// fresh reader.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_lone_connection_commits_on_its_own_thread() {
        let dir = tempfile::tempdir().expect("tempdir");
        let write = writer(dir.path());
        let committer = Committer::with_workers(write.clone(), 4).expect("committer");
        for i in 0..200 {
            assert_eq!(committer.insert("t", one_row(i)).await.expect("insert"), 1);
        }
        let c = &committer.counters;
        assert_eq!(c.statements_committed.load(Relaxed), 200);
        assert_eq!(c.statements_on_task.load(Relaxed), 200, "nobody else committing: all on the connection's task");
        assert_eq!(c.statements_waiting.load(Relaxed), 0);
        assert_eq!(c.groups_in_flight.load(Relaxed), 0);
        // A bad statement alone fails alone, with the write path's error.
        let wrong = Arc::new(Schema::new(vec![Field::new("id", DataType::Int64, true)]));
        let null = RecordBatch::try_new(wrong, vec![Arc::new(Int64Array::from(vec![None::<i64>]))]).expect("batch");
        let failure = committer.insert("t", vec![null]).await.expect_err("NULL into NOT NULL");
        assert_eq!(failure.code, sqlstate::NOT_NULL_VIOLATION, "{}", failure.message);
        committer.stop();
        // After stop, nothing commits on its own task either.
        let refused = committer.insert("t", one_row(1_000)).await.expect_err("stopped");
        assert_eq!(refused.code, sqlstate::ADMIN_SHUTDOWN);
        drop(committer);
        drop(write);
        assert_eq!(durable_ids(dir.path()), (0..200).collect::<Vec<i64>>());
    }

    /// A task that ticks every 1 ms until `done`: the turns another task (a read query's, a
    /// timer) gets while connections commit.
    fn spawn_ticker() -> (Arc<AtomicU64>, Arc<AtomicBool>, tokio::task::JoinHandle<()>) {
        let ticks = Arc::new(AtomicU64::new(0));
        let done = Arc::new(AtomicBool::new(false));
        let (t, d) = (ticks.clone(), done.clone());
        let handle = tokio::spawn(async move {
            while !d.load(Relaxed) {
                tokio::time::sleep(Duration::from_millis(1)).await;
                t.fetch_add(1, Relaxed);
            }
        });
        (ticks, done, handle)
    }

    /// Commits that lead their flush block their thread for it, but not the runtime: on a
    /// runtime of ONE async worker, a connection committing back to back (every statement on
    /// its task, leading an idle log's flush on its thread, so it never yields between
    /// statements) leaves a concurrent task — a read query's, a timer — its turns all along.
    /// Before `block_in_place`, that task got none until the committing loop ended
    /// (measured with session 6's inline commit: 0 turns in 300 ms). Then four connections
    /// at once (leading, awaiting a flush and queued mixed) do the same. Every acknowledged
    /// row is durable.
    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn commits_leading_the_flush_leave_the_runtime_to_other_tasks() {
        const COMMITTING: Duration = Duration::from_millis(300);
        let dir = tempfile::tempdir().expect("tempdir");
        let write = writer(dir.path());
        let committer = Arc::new(Committer::with_workers(write.clone(), 2).expect("committer"));
        let (ticks, done, reader) = spawn_ticker();
        // The reader ticks once before the commits start: it is running.
        while ticks.load(Relaxed) == 0 {
            tokio::task::yield_now().await;
        }
        // One connection alone, then four at once.
        let mut acked = Vec::new();
        for first in [0i64, 1] {
            let mut writers = Vec::new();
            for c in if first == 0 { 0..1 } else { 1..5 } {
                let (committer, ticks) = (committer.clone(), ticks.clone());
                writers.push(tokio::spawn(async move {
                    let (start, ticks_before) = (std::time::Instant::now(), ticks.load(Relaxed));
                    let mut acked = Vec::new();
                    while start.elapsed() < COMMITTING {
                        let id = c * 1_000_000 + acked.len() as i64;
                        assert_eq!(committer.insert("t", one_row(id)).await.expect("insert"), 1);
                        acked.push(id);
                    }
                    (acked, ticks.load(Relaxed) - ticks_before)
                }));
            }
            for w in writers {
                let (ids, ticks_meanwhile) = w.await.expect("writer");
                // ~300 turns of 1 ms are possible; a loaded machine still gives dozens.
                assert!(ticks_meanwhile >= 10, "the other task ran {ticks_meanwhile} times during {COMMITTING:?} of commits");
                if first == 0 {
                    let on_task = committer.counters.statements_on_task.load(Relaxed);
                    assert_eq!(on_task, ids.len() as u64, "alone, every statement commits on its task");
                    eprintln!("alone: {} statements, all on the task, {ticks_meanwhile} reader turns", ids.len());
                }
                acked.extend(ids);
            }
        }
        done.store(true, Relaxed);
        reader.await.expect("reader");
        eprintln!("{} statements, {} on their tasks", acked.len(), committer.counters.statements_on_task.load(Relaxed));
        committer.stop();
        drop(committer);
        drop(write);
        acked.sort_unstable();
        assert_eq!(durable_ids(dir.path()), acked);
    }

    #[test]
    fn a_leading_commit_blocks_its_worker_outright_only_with_another_worker_and_no_query() {
        assert!(blocks_outright(2, true));
        assert!(blocks_outright(8, true));
        assert!(!blocks_outright(1, true), "the one worker would stall every connection");
        assert!(!blocks_outright(2, false), "a running query keeps every worker");
        assert!(!blocks_outright(0, true));
    }

    /// With no query running, a commit leading its flush blocks its worker outright; the
    /// runtime's other worker keeps a concurrent task ticking all along. Once a query runs
    /// (the admission's count), the same commits go through `block_in_place`. Every
    /// acknowledged row is durable.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn leading_commits_block_outright_only_while_no_query_runs() {
        const COMMITTING: Duration = Duration::from_millis(200);
        let dir = tempfile::tempdir().expect("tempdir");
        let write = writer(dir.path());
        let admission = crate::admission::Admission::new(10, 2, Duration::from_secs(1), 64 << 20, 16 << 20);
        let committer = Arc::new(Committer::with_workers(write.clone(), 2).expect("committer").watching_queries(admission.clone()));
        let (ticks, done, ticker) = spawn_ticker();
        let mut acked = Vec::new();
        for query_running in [false, true] {
            if query_running {
                admission.counters.queries_running.fetch_add(1, Relaxed);
            }
            let (direct_before, in_place_before) =
                (committer.counters.flush_leads_direct.load(Relaxed), committer.counters.flush_leads_in_place.load(Relaxed));
            let (c, t) = (committer.clone(), ticks.clone());
            let base = if query_running { 1_000_000 } else { 0 };
            let (ids, ticks_meanwhile) = tokio::spawn(async move {
                let (start, ticks_before) = (std::time::Instant::now(), t.load(Relaxed));
                let mut ids = Vec::new();
                while start.elapsed() < COMMITTING {
                    let id = base + ids.len() as i64;
                    assert_eq!(c.insert("t", one_row(id)).await.expect("insert"), 1);
                    ids.push(id);
                }
                (ids, t.load(Relaxed) - ticks_before)
            })
            .await
            .expect("writer");
            let direct = committer.counters.flush_leads_direct.load(Relaxed) - direct_before;
            let in_place = committer.counters.flush_leads_in_place.load(Relaxed) - in_place_before;
            eprintln!("query running {query_running}: {} statements, {direct} flushes led outright, {in_place} in place, {ticks_meanwhile} ticks", ids.len());
            assert!(!ids.is_empty());
            if query_running {
                assert_eq!(direct, 0, "a query runs: no worker is blocked outright");
                assert!(in_place > 0, "alone, the connection leads its flushes");
            } else {
                assert_eq!(in_place, 0, "no query: every flush led outright");
                assert!(direct > 0, "alone, the connection leads its flushes");
            }
            // ~200 turns of 1 ms are possible; a loaded machine still gives a few.
            assert!(ticks_meanwhile >= 5, "the other task ran {ticks_meanwhile} times during {COMMITTING:?} of commits");
            acked.extend(ids);
        }
        done.store(true, Relaxed);
        ticker.await.expect("ticker");
        committer.stop();
        drop(committer);
        drop(write);
        acked.sort_unstable();
        assert_eq!(durable_ids(dir.path()), acked);
    }

    /// `stop` while connections commit on their tasks: it waits for the commits under way;
    /// each statement is acknowledged (and durable) or refused with 57P01 (and absent).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn stop_waits_for_commits_on_tasks() {
        let dir = tempfile::tempdir().expect("tempdir");
        let write = writer(dir.path());
        let committer = Arc::new(Committer::with_workers(write.clone(), 2).expect("committer"));
        stop_while_streaming(dir.path(), write, committer, 6, 300, |c| assert!(c.counters.statements_on_task.load(Relaxed) > 0, "commits on tasks happened")).await;
    }

    /// `clients` connections insert back to back until refused; once `acked_before_stop`
    /// statements are acknowledged the committer stops. Then every acknowledged row is
    /// durable exactly once and no refused one is there.
    async fn stop_while_streaming(dir: &std::path::Path, write: Arc<WritePath>, committer: Arc<Committer>, clients: i64, acked_before_stop: usize, check: impl FnOnce(&Committer)) {
        let acked = Arc::new(Mutex::new(Vec::<i64>::new()));
        let mut tasks = Vec::new();
        for c in 0..clients {
            let (committer, acked) = (committer.clone(), acked.clone());
            tasks.push(tokio::spawn(async move {
                for i in 0.. {
                    match committer.insert("t", one_row(c * 1_000_000 + i)).await {
                        Ok(n) => {
                            assert_eq!(n, 1);
                            acked.lock().expect("acked").push(c * 1_000_000 + i);
                        }
                        Err(e) => {
                            assert_eq!(e.code, sqlstate::ADMIN_SHUTDOWN, "{}", e.message);
                            return;
                        }
                    }
                }
            }));
        }
        while acked.lock().expect("acked").len() < acked_before_stop {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let stopping = committer.clone();
        tokio::task::spawn_blocking(move || stopping.stop()).await.expect("stop");
        for t in tasks {
            t.await.expect("client");
        }
        check(&committer);
        drop(committer);
        drop(write);
        let acked: BTreeSet<i64> = acked.lock().expect("acked").iter().copied().collect();
        let found = durable_ids(dir);
        assert_eq!(found.len(), acked.len(), "no row twice, none unacknowledged");
        assert_eq!(found.into_iter().collect::<BTreeSet<_>>(), acked);
    }

    /// A committer whose worker threads cannot start is an error, not a server whose
    /// queued statements wait forever. Provoked for real: a stack no thread can get.
    #[test]
    fn no_commit_worker_started_is_an_error() {
        let dir = tempfile::tempdir().expect("tempdir");
        let write = writer(dir.path());
        let Err(e) = Committer::with_worker_threads(write.clone(), 3, Some(usize::MAX / 2)) else {
            panic!("a committer without a worker thread started");
        };
        assert_eq!(e.workers, 3);
        assert!(e.to_string().contains("none of the 3 commit worker threads could be started"), "{e}");
        // The same write path then takes a working committer.
        let committer = Committer::with_worker_threads(write, 1, None).expect("one worker");
        committer.stop();
    }

    /// `stop` while statements stream in: each statement is either acknowledged (and then
    /// durable) or refused with 57P01 (and then absent) — none is lost between the queue
    /// and the workers, none committed without its answer.
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn stop_commits_what_was_queued_and_refuses_the_rest() {
        let dir = tempfile::tempdir().expect("tempdir");
        let write = writer(dir.path());
        let committer = Arc::new(Committer::with_workers(write.clone(), 4).expect("committer"));
        stop_while_streaming(dir.path(), write, committer, 32, 500, |_| ()).await;
    }
}
