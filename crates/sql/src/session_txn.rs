//! `BEGIN … COMMIT` across statements and `COPY t FROM 'file'`, for a [`FlashscanSession`].
//!
//! A transaction lives in the session: INSERT and COPY FROM inside it are planned and run
//! as usual, but their rows are only validated and staged
//! (`flashscan_write::WritePath::stage_insert`); COMMIT logs them all with one commit
//! record and returns once that is durable (`commit_transaction`), so the block is all or
//! nothing. ROLLBACK discards what was staged (nothing was logged). An error inside the
//! block aborts the transaction: later statements are refused until COMMIT or ROLLBACK
//! ends it, and neither writes anything. Reads inside the block see committed rows (not
//! the block's own). CREATE/DROP TABLE inside a block are refused (they commit on their
//! own). The same API serves any front end: `begin_transaction`, `commit_transaction`,
//! `rollback_transaction`, `end_of_input`.

use std::sync::Arc;
use std::time::Instant;

use datafusion::logical_expr::dml::InsertOp;
use datafusion::logical_expr::{LogicalPlan, WriteOp};
use datafusion::sql::parser::{DFParserBuilder, Statement as DFStatement};
use datafusion::sql::sqlparser::ast::{CopySource, CopyTarget, Statement as SqlStatement};
use datafusion::sql::sqlparser::keywords::Keyword;
use datafusion::sql::sqlparser::parser::Parser;
use datafusion::sql::sqlparser::tokenizer::Token;
use flashscan_write::{Isolation, Transaction};

use super::{status_output, FlashscanSession, QueryOutput};
use crate::copy_from::{read_for_table, CopyFromSpec};
use crate::error::SqlError;

/// Where a session's transaction stands.
#[derive(Default)]
pub(crate) enum TxnState {
    /// Each statement is its own transaction.
    #[default]
    Idle,
    /// After BEGIN: rows staged, nothing logged.
    Open { txn: Transaction, statements: usize },
    /// A statement inside the block failed: nothing of it will be written, unless ROLLBACK
    /// TO a savepoint opens the block again (the transaction is kept for that).
    Aborted { cause: String, txn: Transaction, statements: usize },
}

/// Tokens looked at to tell `COPY t FROM` from `COPY t TO` (a table name and a column list).
const COPY_LOOKAHEAD_TOKENS_MAX: usize = 256;

enum CopyKind {
    /// Not a COPY … FROM: DataFusion's parser reads it.
    Other,
    From,
    FromStdin,
}

fn copy_kind(parser: &Parser) -> CopyKind {
    let is_keyword = |t: &Token, k: Keyword| matches!(t, Token::Word(w) if w.keyword == k);
    if !is_keyword(&parser.peek_nth_token(0).token, Keyword::COPY) || parser.peek_nth_token(1).token == Token::LParen {
        return CopyKind::Other;
    }
    for i in 1..COPY_LOOKAHEAD_TOKENS_MAX {
        let t = parser.peek_nth_token(i).token;
        if is_keyword(&t, Keyword::FROM) {
            return if is_keyword(&parser.peek_nth_token(i + 1).token, Keyword::STDIN) { CopyKind::FromStdin } else { CopyKind::From };
        }
        if is_keyword(&t, Keyword::TO) || t == Token::EOF || t == Token::SemiColon {
            break;
        }
    }
    CopyKind::Other
}

/// The statements of `sql`, parsed as `DFParser::parse_sql` does, except `COPY t FROM …`,
/// which DataFusion's parser only knows as COPY TO: that one goes to sqlparser's parser.
pub fn parse_statements(sql: &str) -> Result<Vec<DFStatement>, SqlError> {
    let mut p = DFParserBuilder::new(sql).with_recursion_limit(crate::SQL_NESTING_DEPTH_MAX).build().map_err(SqlError::from)?;
    let mut out = Vec::new();
    let mut expecting_delimiter = false;
    loop {
        while p.parser.consume_token(&Token::SemiColon) {
            expecting_delimiter = false;
        }
        if p.parser.peek_token() == Token::EOF {
            break;
        }
        if expecting_delimiter {
            return Err(SqlError::Syntax(format!("expected ';' before {}", p.parser.peek_token())));
        }
        let statement = match copy_kind(&p.parser) {
            CopyKind::Other => p.parse_statement().map_err(SqlError::from)?,
            CopyKind::FromStdin => {
                return Err(SqlError::InvalidArgument("COPY … FROM STDIN: give a file path here (COPY t FROM 'file.csv'); STDIN is for the wire protocol".into()))
            }
            CopyKind::From => DFStatement::Statement(Box::new(p.parser.parse_statement().map_err(|e| SqlError::Syntax(e.to_string()))?)),
        };
        out.push(statement);
        expecting_delimiter = true;
    }
    Ok(out)
}

fn count_output(statement: String, rows: u64, started: Instant) -> Result<QueryOutput, SqlError> {
    let schema = std::sync::Arc::new(arrow::datatypes::Schema::new(vec![arrow::datatypes::Field::new("count", arrow::datatypes::DataType::UInt64, false)]));
    let column: arrow::array::ArrayRef = std::sync::Arc::new(arrow::array::UInt64Array::from(vec![rows]));
    let batch = arrow::record_batch::RecordBatch::try_new(schema.clone(), vec![column]).map_err(|e| SqlError::Internal(e.to_string()))?;
    Ok(QueryOutput { statement, schema, batches: vec![batch], elapsed_s: started.elapsed().as_secs_f64(), scans: Default::default(), warnings: Vec::new() })
}

/// The isolation level `modes` ask for: READ COMMITTED (READ UNCOMMITTED is READ
/// COMMITTED, as in PostgreSQL) or REPEATABLE READ; SERIALIZABLE is refused until flashscan
/// provides it (never run as something weaker). `None`: no level named.
fn isolation_of(modes: &[datafusion::sql::sqlparser::ast::TransactionMode]) -> Result<Option<Isolation>, SqlError> {
    use datafusion::sql::sqlparser::ast::{TransactionIsolationLevel as Level, TransactionMode};
    let mut asked = None;
    for mode in modes {
        if let TransactionMode::IsolationLevel(level) = mode {
            asked = Some(match level {
                Level::ReadCommitted | Level::ReadUncommitted => Isolation::ReadCommitted,
                Level::RepeatableRead => Isolation::RepeatableRead,
                other => {
                    return Err(SqlError::Plan(format!(
                        "isolation level {other} is not supported yet: flashscan runs READ COMMITTED (PostgreSQL's default) or REPEATABLE READ; ask for one of those"
                    )))
                }
            });
        }
    }
    Ok(asked)
}

/// A savepoint's name as PostgreSQL reads an identifier: as written when quoted, else in
/// lower case.
fn identifier(name: &datafusion::sql::sqlparser::ast::Ident) -> String {
    match name.quote_style {
        Some(_) => name.value.clone(),
        None => name.value.to_lowercase(),
    }
}

fn poisoned() -> SqlError {
    SqlError::Internal("the session's transaction lock was poisoned".into())
}

impl FlashscanSession {
    fn txn_state(&self) -> Result<std::sync::MutexGuard<'_, TxnState>, SqlError> {
        self.txn.lock().map_err(|_| poisoned())
    }

    /// True between BEGIN and COMMIT/ROLLBACK (also after an error inside the block).
    pub fn in_transaction(&self) -> bool {
        self.txn.lock().map(|t| !matches!(*t, TxnState::Idle)).unwrap_or(false)
    }

    /// BEGIN: takes the database lock (a second writer fails here, not at COMMIT).
    pub fn begin_transaction(&self) -> Result<(), SqlError> {
        self.begin_transaction_at(Isolation::ReadCommitted)
    }

    /// BEGIN ISOLATION LEVEL `isolation`.
    pub fn begin_transaction_at(&self, isolation: Isolation) -> Result<(), SqlError> {
        self.ensure_writer()?;
        let mut st = self.txn_state()?;
        if !matches!(*st, TxnState::Idle) {
            return Err(SqlError::Plan("BEGIN inside a transaction: COMMIT or ROLLBACK the open one first (transactions do not nest)".into()));
        }
        let mut txn = Transaction::new();
        txn.set_isolation(isolation)?;
        *st = TxnState::Open { txn, statements: 0 };
        Ok(())
    }

    /// SET TRANSACTION ISOLATION LEVEL inside an open block, before its first query.
    fn set_isolation(&self, isolation: Isolation) -> Result<(), SqlError> {
        match &mut *self.txn_state()? {
            TxnState::Open { txn, .. } => Ok(txn.set_isolation(isolation)?),
            _ => Err(SqlError::Plan("SET TRANSACTION can only be used inside BEGIN … COMMIT: BEGIN ISOLATION LEVEL … instead".into())),
        }
    }

    /// COMMIT: every staged row logged, one commit record, durable before this returns.
    /// Returns the rows committed. After an error inside the block this writes nothing and
    /// says so (an error).
    pub async fn commit_transaction(&self) -> Result<u64, SqlError> {
        let taken = std::mem::take(&mut *self.txn_state()?);
        let txn = match taken {
            TxnState::Idle => return Ok(0),
            TxnState::Aborted { cause, .. } => {
                return Err(SqlError::Plan(format!("COMMIT: the transaction was aborted by an earlier error ({cause}); it is rolled back, nothing of it was written")))
            }
            TxnState::Open { txn, .. } => txn,
        };
        let w = self.ensure_writer()?.clone();
        // The commit waits for the log flush: off the async workers.
        let committed = tokio::task::spawn_blocking(move || w.commit_transaction(txn))
            .await
            .map_err(|e| SqlError::Internal(format!("the commit thread failed: {e}")))?;
        committed.map_err(|e| SqlError::Plan(format!("COMMIT failed: {e}; nothing of the transaction was written")))
    }

    /// ROLLBACK: discards the open (or aborted) transaction. Returns the rows discarded.
    pub fn rollback_transaction(&self) -> Result<u64, SqlError> {
        match std::mem::take(&mut *self.txn_state()?) {
            TxnState::Open { txn, .. } => Ok(txn.rollback()),
            TxnState::Idle | TxnState::Aborted { .. } => Ok(0),
        }
    }

    /// The input ended (a file, the shell, a connection): an open transaction is rolled
    /// back. Returns what to tell the user, if there was one.
    pub fn end_of_input(&self) -> Option<String> {
        let taken = std::mem::take(&mut *self.txn.lock().ok()?);
        match taken {
            TxnState::Idle => None,
            TxnState::Open { txn, statements } => Some(format!(
                "the input ended inside BEGIN … without COMMIT: the transaction ({statements} statements, {} rows) is rolled back, nothing of it was written",
                txn.rollback()
            )),
            TxnState::Aborted { cause, .. } => Some(format!("the input ended inside a transaction aborted by an error ({cause}): rolled back, nothing of it was written")),
        }
    }

    /// SAVEPOINT, RELEASE and ROLLBACK TO: `what` runs on the block's transaction (the write
    /// crate keeps what each savepoint undoes). ROLLBACK TO opens an aborted block again.
    fn savepoints(&self, command: &str, what: impl FnOnce(&mut Transaction) -> Result<(), flashscan_write::WriteError>) -> Result<(), SqlError> {
        let mut st = self.txn_state()?;
        match std::mem::take(&mut *st) {
            TxnState::Idle => Err(SqlError::Plan(format!("{command} can only be used inside BEGIN … COMMIT: BEGIN first"))),
            TxnState::Open { mut txn, statements } => {
                let done = what(&mut txn);
                *st = TxnState::Open { txn, statements };
                Ok(done?)
            }
            TxnState::Aborted { cause, mut txn, statements } if command == "ROLLBACK TO SAVEPOINT" => match what(&mut txn) {
                Ok(()) => {
                    *st = TxnState::Open { txn, statements };
                    Ok(())
                }
                Err(e) => {
                    *st = TxnState::Aborted { cause, txn, statements };
                    Err(e.into())
                }
            },
            aborted @ TxnState::Aborted { .. } => {
                *st = aborted;
                Err(SqlError::Plan(format!("{command}: the transaction was aborted by an earlier error: ROLLBACK, or ROLLBACK TO a savepoint, first")))
            }
        }
    }

    /// An error of a statement inside an open block aborts the block (and says so).
    pub(super) fn abort_on_error(&self, error: SqlError) -> SqlError {
        let Ok(mut st) = self.txn.lock() else { return error };
        match std::mem::take(&mut *st) {
            TxnState::Open { txn, statements } => {
                *st = TxnState::Aborted { cause: error.to_string(), txn, statements };
                SqlError::TransactionAborted { cause: Box::new(error) }
            }
            other => {
                // Idle or aborted already: as it was.
                *st = other;
                error
            }
        }
    }

    /// BEGIN, COMMIT, ROLLBACK, and the refusal of anything else in an aborted block.
    /// `None`: not for the transaction machinery.
    pub(super) async fn transaction_control(&self, statement: &DFStatement) -> Option<Result<QueryOutput, SqlError>> {
        let started = Instant::now();
        let text = statement.to_string();
        let control = match statement {
            DFStatement::Statement(s) => match s.as_ref() {
                SqlStatement::StartTransaction { modes, .. } => Some(isolation_of(modes).and_then(|level| {
                    self.begin_transaction_at(level.unwrap_or_default())?;
                    let status = level.map_or("BEGIN".to_string(), |l| format!("BEGIN ({})", l.name().to_uppercase()));
                    status_output(text.clone(), status, started)
                })),
                SqlStatement::Set(datafusion::sql::sqlparser::ast::Set::SetTransaction { modes, .. }) => Some(isolation_of(modes).and_then(|level| match level {
                    Some(level) => self.set_isolation(level).and_then(|()| status_output(text.clone(), format!("SET TRANSACTION ({})", level.name().to_uppercase()), started)),
                    None => status_output(text.clone(), "SET TRANSACTION".into(), started),
                })),
                SqlStatement::Commit { .. } => {
                    let was_open = self.in_transaction();
                    Some(match self.commit_transaction().await {
                        Ok(rows) if was_open => status_output(text.clone(), format!("COMMIT: {rows} rows"), started),
                        Ok(_) => status_output(text.clone(), "COMMIT: no transaction in progress (each statement before it committed on its own)".into(), started),
                        Err(e) => Err(e),
                    })
                }
                SqlStatement::Rollback { savepoint: Some(name), .. } => Some(self.savepoints("ROLLBACK TO SAVEPOINT", |t| t.rollback_to_savepoint(&identifier(name))).and_then(|()| status_output(text.clone(), "ROLLBACK TO SAVEPOINT".into(), started))),
                SqlStatement::Rollback { .. } => {
                    let was_open = self.in_transaction();
                    Some(self.rollback_transaction().and_then(|rows| {
                        let status = if was_open { format!("ROLLBACK: {rows} staged rows discarded, nothing written") } else { "ROLLBACK: no transaction in progress".into() };
                        status_output(text.clone(), status, started)
                    }))
                }
                SqlStatement::Savepoint { name } => Some(
                    self.savepoints("SAVEPOINT", |t| {
                        t.savepoint(&identifier(name));
                        Ok(())
                    })
                    .and_then(|()| status_output(text.clone(), "SAVEPOINT".into(), started)),
                ),
                SqlStatement::ReleaseSavepoint { name } => Some(self.savepoints("RELEASE SAVEPOINT", |t| t.release_savepoint(&identifier(name))).and_then(|()| status_output(text.clone(), "RELEASE".into(), started))),
                _ => None,
            },
            _ => None,
        };
        if control.is_some() {
            return control;
        }
        match &*self.txn.lock().ok()? {
            TxnState::Aborted { cause, .. } => Some(Err(SqlError::Plan(format!(
                "the transaction was aborted by an earlier error ({cause}): statements are refused until ROLLBACK (or COMMIT, which writes nothing) ends it"
            )))),
            TxnState::Open { .. } | TxnState::Idle => None,
        }
    }

    /// The warning a DDL statement run inside an open block gets: it commits as it runs
    /// (`ddl_in_block_warning`). `None` outside a block and for anything but DDL.
    pub(super) fn ddl_in_block(&self, statement: &DFStatement) -> Option<String> {
        let DFStatement::Statement(s) = statement else { return None };
        let tag = match s.as_ref() {
            SqlStatement::CreateTable(_) => "CREATE TABLE",
            SqlStatement::Drop { object_type, .. } => match object_type {
                datafusion::sql::sqlparser::ast::ObjectType::Table => "DROP TABLE",
                datafusion::sql::sqlparser::ast::ObjectType::Index => "DROP INDEX",
                datafusion::sql::sqlparser::ast::ObjectType::Sequence => "DROP SEQUENCE",
                _ => return None,
            },
            SqlStatement::CreateIndex(_) => "CREATE INDEX",
            SqlStatement::AlterTable(_) => "ALTER TABLE",
            SqlStatement::Truncate(_) => "TRUNCATE TABLE",
            _ => return None,
        };
        matches!(*self.txn.lock().ok()?, TxnState::Open { .. }).then(|| ddl_in_block_warning(tag))
    }

    /// What the open block's next statement reads besides the committed rows of now: its
    /// own changes and, REPEATABLE READ, its snapshot (taken by its first statement);
    /// `None` outside a block.
    pub(crate) fn own_changes(&self) -> Result<Option<Arc<flashscan_write::own_writes::OwnChanges>>, SqlError> {
        Ok(match &mut *self.txn_state()? {
            TxnState::Open { txn, .. } => {
                txn.pin_snapshot(&self.write)?;
                txn.own_changes()
            }
            _ => None,
        })
    }

    /// Counts a statement into the open block (for the end-of-input message).
    fn staged_statement(st: &mut TxnState) -> Option<&mut Transaction> {
        match st {
            TxnState::Open { txn, statements } => {
                *statements += 1;
                Some(txn)
            }
            _ => None,
        }
    }

    /// INSERT inside BEGIN … COMMIT: DataFusion plans it as for any INSERT (VALUES or
    /// SELECT, every column cast to the table's type); the rows its source produces are
    /// staged, not written. `Ok(None)`: no transaction is open (the caller runs it).
    pub(super) async fn insert_in_transaction(&self, statement: DFStatement) -> Result<Option<QueryOutput>, SqlError> {
        if !matches!(*self.txn_state()?, TxnState::Open { .. }) {
            return Ok(None);
        }
        let started = Instant::now();
        let text = statement.to_string();
        let w = self.ensure_writer()?.clone();
        let state = self.statement_state()?;
        let plan = state.statement_to_plan(statement).await?;
        let LogicalPlan::Dml(dml) = plan else {
            return Err(SqlError::Internal("INSERT did not plan as an insert".into()));
        };
        if !matches!(dml.op, WriteOp::Insert(InsertOp::Append)) {
            return Err(SqlError::Plan(format!("{}: only INSERT INTO (append) is supported", dml.op)));
        }
        let table = dml.table_name.table().to_string();
        let frame = self.frame_of(state, dml.input.as_ref().clone()).await?;
        let batches = frame.collect().await?;
        let mut st = self.txn_state()?;
        let Some(txn) = Self::staged_statement(&mut st) else {
            return Err(SqlError::Plan("the transaction ended while the INSERT ran".into()));
        };
        let rows = w.stage_insert(txn, &table, &batches)?;
        count_output(text, rows, started).map(Some)
    }

    /// UPDATE or DELETE (change.rs): staged into the open block, or a transaction of its
    /// own committed before this returns. Answers the rows changed.
    pub(super) async fn run_change(&self, statement: DFStatement, table: String) -> Result<QueryOutput, SqlError> {
        let started = Instant::now();
        let text = statement.to_string();
        let w = self.ensure_writer()?.clone();
        // The block's transaction leaves the session while the statement runs (the
        // session's lock is not held across an await) and comes back after it.
        let (mut txn, statements) = match std::mem::take(&mut *self.txn_state()?) {
            TxnState::Open { txn, statements } => (txn, Some(statements)),
            TxnState::Idle => (Transaction::new(), None),
            aborted @ TxnState::Aborted { .. } => {
                *self.txn_state()? = aborted;
                return Err(SqlError::Plan("the transaction was aborted by an earlier error: ROLLBACK first".into()));
            }
        };
        self.scan_log.take();
        let staged = async {
            // One session: its own transaction is the only one that can hold the lock.
            w.lock_for_change(&mut txn, &table)?;
            // The block's own changes, read by the statement (the same for every read of it:
            // a read again stages nothing before it), and its REPEATABLE READ snapshot.
            txn.pin_snapshot(&w)?;
            let own = txn.own_changes();
            let read = || crate::change::read_changes(&w, own.as_deref(), self.ctx.state(), statement.clone(), None);
            crate::change::read_and_stage(read, |snapshot, changes| crate::change::stage_changes(&w, &mut txn, &table, snapshot, changes)).await.map(|(rows, _)| rows)
        }
        .await;
        let scans = self.scan_log.take();
        let rows = match statements {
            Some(statements) => {
                *self.txn_state()? = TxnState::Open { txn, statements: statements + 1 };
                staged?
            }
            None => {
                let rows = staged?;
                // The commit waits for the log flush: off the async workers.
                tokio::task::spawn_blocking(move || w.commit_transaction(txn)).await.map_err(|e| SqlError::Internal(format!("the commit thread failed: {e}")))??;
                rows
            }
        };
        let mut output = count_output(text, rows, started)?;
        output.scans = scans;
        Ok(output)
    }

    /// `COPY t FROM 'file'`: one transaction of its own, or staged into the open one.
    pub(super) async fn copy_from(&self, statement: &SqlStatement) -> Result<QueryOutput, SqlError> {
        let SqlStatement::Copy { source, to: false, target, options, legacy_options, .. } = statement else {
            return Err(SqlError::Internal("not a COPY FROM".into()));
        };
        let started = Instant::now();
        let text = statement.to_string();
        let CopySource::Table { table_name, columns } = source else {
            return Err(SqlError::Plan("COPY FROM needs a table (COPY t FROM 'file')".into()));
        };
        if !columns.is_empty() {
            return Err(SqlError::Plan("COPY t (columns) FROM: a column list is not supported; the file's columns map to all of the table's, in order".into()));
        }
        let CopyTarget::File { filename } = target else {
            return Err(SqlError::InvalidArgument("COPY FROM STDIN/PROGRAM: give a file path (COPY t FROM 'file.csv')".into()));
        };
        let spec = CopyFromSpec::new(filename, options, legacy_options)?;
        let w = self.ensure_writer()?.clone();
        let name = table_name.0.last().map(|p| p.to_string()).unwrap_or_default().trim_matches('"').to_string();
        let catalog = w.catalog()?;
        let table = catalog.tables.values().find(|t| t.name.eq_ignore_ascii_case(&name)).cloned().ok_or_else(|| {
            let known: Vec<&str> = catalog.tables.keys().map(String::as_str).collect();
            SqlError::Plan(format!("COPY {name} FROM: no such table; tables in {}: {}", self.db_dir.display(), if known.is_empty() { "(none)".into() } else { known.join(", ") }))
        })?;
        // Reading and decoding is blocking work: off the async workers, as the commit.
        let table_name = table.name.clone();
        let batches = tokio::task::spawn_blocking(move || read_for_table(&spec, &table))
            .await
            .map_err(|e| SqlError::Internal(format!("the COPY reader thread failed: {e}")))??;
        {
            let mut st = self.txn_state()?;
            if let Some(txn) = Self::staged_statement(&mut st) {
                let rows = w.stage_insert(txn, &table_name, &batches)?;
                return count_output(text, rows, started);
            }
        }
        let rows = tokio::task::spawn_blocking(move || w.insert(&table_name, &batches))
            .await
            .map_err(|e| SqlError::Internal(format!("the COPY commit thread failed: {e}")))??;
        count_output(text, rows, started)
    }
}

/// What a client is told when DDL runs inside BEGIN … COMMIT: it commits as it runs
/// (flashscan's DDL is not transactional; refusing it would break every client that runs
/// CREATE TABLE in its default transaction: psycopg, SQLAlchemy's `create_all`, pandas'
/// `to_sql`, pgbench -i's TRUNCATE), so a ROLLBACK that keeps it is never a silent
/// surprise. The server sends it as a WARNING notice, `flashscan sql` prints it.
pub fn ddl_in_block_warning(tag: &str) -> String {
    format!("{tag} inside a transaction block was committed as it ran: a ROLLBACK of the block does not undo it (DDL is not transactional in flashscan)")
}
