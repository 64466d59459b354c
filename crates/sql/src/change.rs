//! UPDATE and DELETE, for every front end (`flashscan sql`'s session and the server).
//!
//! A statement changes rows in three steps, each with the write path's API:
//! 1. **Lock** (`WritePath::lock_for_change`, by the caller, who knows how to block): the
//!    table's change lock, held until the transaction ends, so no other transaction
//!    changes the table meanwhile.
//! 2. **Read** ([`read_changes`]): a snapshot of now is attached, and DataFusion plans the
//!    statement as it plans any UPDATE or DELETE (`LogicalPlan::Dml`: a scan of the table,
//!    the WHERE filter, for UPDATE a projection of every column's new value). The scan of
//!    the target table is swapped for the same table with its row id column
//!    (`FlashscanTable::with_row_ids`), and the plan runs like a query: the row ids of the
//!    rows to change and, for UPDATE, their new values. Subqueries and expressions come
//!    from DataFusion's planner unchanged (its 55 refuses `UPDATE … FROM`; should a later
//!    one plan it, a row matched twice changes once, below).
//! 3. **Stage** (`WritePath::stage_delete`, and `stage_insert` for the new versions): in
//!    the caller's transaction; an autocommit statement commits it at once.
//!
//! An UPDATE writes a new version of each row (a delete and an insert, one log record
//! each), as PostgreSQL does; the old version stays in its page for older snapshots and is
//! skipped by newer ones.

use std::collections::HashSet;
use std::sync::Arc;

use arrow::array::{Array, UInt64Array};
use arrow::datatypes::{FieldRef, Schema};
use arrow::record_batch::RecordBatch;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{Column, DFSchema, ParamValues, TableReference};
use datafusion::datasource::{provider_as_source, source_as_provider};
use datafusion::execution::session_state::SessionState;
use datafusion::logical_expr::{Expr, LogicalPlan, LogicalPlanBuilder, Projection, TableScanBuilder, WriteOp};
use datafusion::prelude::DataFrame;
use datafusion::sql::parser::Statement as DFStatement;
use datafusion::sql::sqlparser::ast::{FromTable, Statement as SqlStatement, TableFactor};
use flashscan_write::own_writes::OwnChanges;
use flashscan_write::{ReadSnapshot, Transaction, WritePath};

use crate::error::SqlError;
use crate::table_provider::{FlashscanTable, ROW_ID_COLUMN};

/// The kind of change `plan` is, if it is an UPDATE or DELETE.
pub fn change_kind(plan: &LogicalPlan) -> Option<ChangeKind> {
    match plan {
        LogicalPlan::Dml(d) if d.op == WriteOp::Update => Some(ChangeKind::Update),
        LogicalPlan::Dml(d) if d.op == WriteOp::Delete => Some(ChangeKind::Delete),
        _ => None,
    }
}

/// UPDATE or DELETE, with the PostgreSQL command tag it answers with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangeKind {
    Update,
    Delete,
}

impl ChangeKind {
    pub fn tag(self) -> &'static str {
        match self {
            ChangeKind::Update => "UPDATE",
            ChangeKind::Delete => "DELETE",
        }
    }
}

/// The table an UPDATE or DELETE changes, if `statement` is one (the name as written, the
/// last part of a qualified one). Forms flashscan does not support are refused here, with
/// what to do, before anything is locked.
pub fn change_target(statement: &DFStatement) -> Result<Option<(ChangeKind, String)>, SqlError> {
    let DFStatement::Statement(s) = statement else { return Ok(None) };
    let relation_name = |factor: &TableFactor| -> Result<String, SqlError> {
        match factor {
            TableFactor::Table { name, .. } => Ok(name.0.last().map(|p| p.to_string()).unwrap_or_default().trim_matches('"').to_string()),
            _ => Err(SqlError::Plan("UPDATE and DELETE change a table named directly: give its name".into())),
        }
    };
    match s.as_ref() {
        SqlStatement::Update(update) => {
            if !update.table.joins.is_empty() {
                return Err(SqlError::Plan("UPDATE of a join is not supported: UPDATE one table, with the others in FROM".into()));
            }
            // PostgreSQL refuses `SET x = 1, x = 2` (SQLite lets the last win): no value a
            // client wrote is silently dropped.
            let mut assigned = std::collections::HashSet::new();
            for a in &update.assignments {
                // The column as PostgreSQL folds it: unquoted names to lower case.
                let written = a.target.to_string();
                let last = written.rsplit('.').next().unwrap_or(&written);
                let name = match last.strip_prefix('"').and_then(|q| q.strip_suffix('"')) {
                    Some(quoted) => quoted.to_string(),
                    None => last.to_ascii_lowercase(),
                };
                if !assigned.insert(name.clone()) {
                    return Err(SqlError::Plan(format!("multiple assignments to same column \"{name}\": assign each column once")));
                }
            }
            Ok(Some((ChangeKind::Update, relation_name(&update.table.relation)?)))
        }
        SqlStatement::Delete(delete) => {
            if delete.using.is_some() {
                return Err(SqlError::Plan("DELETE … USING is not supported yet: use WHERE … IN (SELECT …) or WHERE EXISTS (SELECT …)".into()));
            }
            let tables = match &delete.from {
                FromTable::WithFromKeyword(t) | FromTable::WithoutKeyword(t) => t,
            };
            match tables.as_slice() {
                [one] if one.joins.is_empty() => Ok(Some((ChangeKind::Delete, relation_name(&one.relation)?))),
                _ => Err(SqlError::Plan("DELETE from several tables is not supported: DELETE from one table, with the others in a subquery".into())),
            }
        }
        SqlStatement::Merge(_) => Err(SqlError::Plan("MERGE is not supported yet: use UPDATE and INSERT … SELECT in one transaction".into())),
        _ => Ok(None),
    }
}

/// What one UPDATE or DELETE read: the ids of the rows it changes and, for UPDATE, their
/// new versions (the table's columns, in order).
#[derive(Debug)]
pub struct RowChanges {
    pub row_ids: Vec<u64>,
    pub new_rows: Vec<RecordBatch>,
    /// UPDATE: per table column, whether the statement assigns it (an unassigned column's
    /// new value is its old one: a key it does not assign needs no uniqueness check).
    pub assigned: Vec<bool>,
    /// DELETE … RETURNING: the rows it removes (the table's columns, in order).
    pub old_rows: Vec<RecordBatch>,
}

/// Plans `statement` on `state` with a snapshot of now attached (the caller holds the
/// table's change lock) and runs its read (see the module comment). `params`: the
/// extended protocol's values for `$n`.
pub async fn read_changes(write: &WritePath, own: Option<&OwnChanges>, mut state: SessionState, statement: DFStatement, params: Option<ParamValues>) -> Result<(RowChanges, Arc<ReadSnapshot>), SqlError> {
    let mut plan = state.statement_to_plan(statement).await?;
    if let Some(params) = params {
        plan = crate::parameters::bind(&plan, params)?;
    }
    read_plan_changes(write, own, &mut state, plan).await
}

/// [`read_changes`] of a statement planned already (the server plans at Parse, binds at
/// Execute): a logical plan holds no rows, so the snapshot attached now is the one read.
/// `state` is lent, not copied (a copy of a planning state is its function registries'
/// hash maps: 2.6 % of the server's CPU under pgbench): the snapshot is attached to it and
/// stays there, as every statement's lease replaces it. `own`: the open transaction's own
/// changes, which the statement reads (and may change again) as PostgreSQL's do
/// (`flashscan_write::own_writes`).
pub async fn read_plan_changes(write: &WritePath, own: Option<&OwnChanges>, state: &mut SessionState, plan: LogicalPlan) -> Result<(RowChanges, Arc<ReadSnapshot>), SqlError> {
    read_plan_changes_keeping(write, own, state, plan, false).await
}

/// [`read_plan_changes`], and with `old_rows` a DELETE reads the rows it removes too (for
/// RETURNING: `RowChanges::old_rows`).
pub async fn read_plan_changes_keeping(write: &WritePath, own: Option<&OwnChanges>, state: &mut SessionState, plan: LogicalPlan, old_rows: bool) -> Result<(RowChanges, Arc<ReadSnapshot>), SqlError> {
    let snapshot = Arc::new(write.read_snapshot_own(own)?);
    state.config_mut().set_extension(snapshot.clone());
    let LogicalPlan::Dml(dml) = plan else { return Err(SqlError::Internal("UPDATE or DELETE did not plan as a change of a table".into())) };
    let kind = match dml.op {
        WriteOp::Update => ChangeKind::Update,
        WriteOp::Delete => ChangeKind::Delete,
        other => return Err(SqlError::Internal(format!("{other} planned where UPDATE or DELETE was expected"))),
    };
    let provider = source_as_provider(&dml.target)?;
    let Some(table) = provider.downcast_ref::<FlashscanTable>() else {
        return Err(SqlError::Plan(format!("{} of {}: not a flashscan table (a catalog view); only tables take UPDATE and DELETE", kind.tag(), dml.table_name)));
    };
    let with_ids = provider_as_source(Arc::new(table.with_row_ids()));
    let mut swapped = 0usize;
    let mut swap_scan = |plan: LogicalPlan| -> Result<LogicalPlan, SqlError> {
        let swapped_plan = plan
            .transform_up(|node| match node {
                LogicalPlan::TableScan(scan) if scan.table_name == dml.table_name => {
                    swapped += 1;
                    let scan = TableScanBuilder::new(scan.table_name, with_ids.clone()).with_filters(scan.filters).with_fetch(scan.fetch).build()?;
                    Ok(Transformed::yes(LogicalPlan::TableScan(scan)))
                }
                other => Ok(Transformed::yes(other.recompute_schema()?)),
            })?
            .data;
        Ok(swapped_plan)
    };
    let row_id_of = |plan: &LogicalPlan| -> Result<(Expr, (Option<TableReference>, FieldRef)), SqlError> {
        let (qualifier, field) = plan
            .schema()
            .qualified_field_with_unqualified_name(ROW_ID_COLUMN)
            .map_err(|_| SqlError::Plan(format!("{} of {}: this form of the statement is not supported yet", kind.tag(), dml.table_name)))?;
        Ok((Expr::Column(Column::new(qualifier.cloned(), ROW_ID_COLUMN)), (qualifier.cloned(), Arc::clone(field))))
    };
    let mut assigned = Vec::new();
    let read = match (kind, Arc::unwrap_or_clone(dml.input)) {
        (ChangeKind::Update, LogicalPlan::Projection(p)) => {
            let fields = table.table().columns.iter().map(|c| c.name.as_str());
            assigned = p.expr.iter().zip(fields).map(|(e, name)| !matches!(unalias(e), Expr::Column(c) if c.name.eq_ignore_ascii_case(name))).collect();
            // Only the nodes below the projection see the row id column; the projection's
            // schema is its own with the row id in front (computing it again from the
            // expressions was 5 % of the server's CPU under pgbench).
            let input = swap_scan(Arc::unwrap_or_clone(p.input))?;
            let (id, id_field) = row_id_of(&input)?;
            let fields = std::iter::once(id_field).chain(p.schema.iter().map(|(q, f)| (q.cloned(), f.clone()))).collect();
            let schema = DFSchema::new_with_metadata(fields, p.schema.metadata().clone())?;
            let mut exprs = vec![id];
            exprs.extend(p.expr);
            LogicalPlan::Projection(Projection::try_new_with_schema(exprs, Arc::new(input), Arc::new(schema))?)
        }
        (ChangeKind::Update, _) => return Err(SqlError::Internal("UPDATE planned without its projection of new values".into())),
        (ChangeKind::Delete, input) => {
            let input = swap_scan(input)?;
            let (id, _) = row_id_of(&input)?;
            let mut exprs = vec![id];
            if old_rows {
                exprs.extend(table.table().columns.iter().map(|c| Expr::Column(Column::new(Some(dml.table_name.clone()), c.name.as_str()))));
            }
            LogicalPlanBuilder::from(input).project(exprs)?.build()?
        }
    };
    if swapped != 1 {
        return Err(SqlError::Plan(format!("{} of {}: the table appears {swapped} times in the statement's FROM; name it once (use a subquery for the other)", kind.tag(), dml.table_name)));
    }
    let batches = match crate::point_plan::plan(state, &read).await {
        // A point statement's answer is in its plan: taken, not executed (no task context
        // to make).
        Some(point) => match point.downcast_ref::<crate::index_scan::IndexLookupExec>().and_then(|l| l.answer()) {
            Some(answer) => vec![answer.clone()],
            None => datafusion::physical_plan::collect(point, state.task_ctx()).await?,
        },
        None => DataFrame::new(state.clone(), read).collect().await?,
    };
    let mut changes = changes_of(kind, batches, &table.table().arrow_schema(), old_rows)?;
    changes.assigned = assigned;
    Ok((changes, snapshot))
}

/// `e` without the aliases around it.
fn unalias(e: &Expr) -> &Expr {
    match e {
        Expr::Alias(a) => unalias(&a.expr),
        other => other,
    }
}

/// The row ids (first column) and new rows (the rest) a change's read returned. A row
/// matched more than once (UPDATE … FROM a join) changes once, with its first new values,
/// as PostgreSQL does.
fn changes_of(kind: ChangeKind, batches: Vec<RecordBatch>, table_schema: &Arc<Schema>, old_rows: bool) -> Result<RowChanges, SqlError> {
    let mut seen = HashSet::new();
    let mut row_ids = Vec::new();
    let mut new_rows = Vec::new();
    let mut removed = Vec::new();
    for b in batches {
        let ids = b.column(0).as_any().downcast_ref::<UInt64Array>().ok_or_else(|| SqlError::Internal("the row id column is not UInt64".into()))?;
        let keep: Vec<bool> = ids.iter().map(|id| id.is_some_and(|id| seen.insert(id))).collect();
        row_ids.extend(ids.iter().flatten().filter(|_| true).zip(keep.iter()).filter(|(_, k)| **k).map(|(id, _)| id));
        if kind == ChangeKind::Update || old_rows {
            // As the table stores them: a column store's scan hands strings on as views.
            // Nullability may differ (an expression's result is nullable even where the
            // column is NOT NULL): the rows are checked when they are staged.
            let relaxed = Arc::new(Schema::new(table_schema.fields().iter().map(|f| f.as_ref().clone().with_nullable(true)).collect::<Vec<_>>()));
            let columns = b
                .project(&(1..b.num_columns()).collect::<Vec<_>>())
                .and_then(|values| crate::reader::batch_as(&relaxed, &values))
                .map_err(|e| SqlError::Plan(format!("UPDATE: the new values do not fit the table's columns: {e}")))?
                .columns()
                .to_vec();
            let values = RecordBatch::try_new(table_schema.clone(), columns.clone()).or_else(|_| RecordBatch::try_new(relaxed, columns));
            let values = values.map_err(|e| SqlError::Plan(format!("UPDATE: the new values do not fit the table's columns: {e}")))?;
            let values = if keep.iter().all(|k| *k) { values } else { arrow::compute::filter_record_batch(&values, &arrow::array::BooleanArray::from(keep)).map_err(|e| SqlError::Internal(e.to_string()))? };
            if values.num_rows() > 0 {
                match kind {
                    ChangeKind::Update => new_rows.push(values),
                    ChangeKind::Delete => removed.push(values),
                }
            }
        }
    }
    Ok(RowChanges { row_ids, new_rows, assigned: Vec::new(), old_rows: removed })
}

/// How many times one statement reads again because rows it read were changed by commits
/// before it locked them (`WriteError::RowsChanged`); each time another transaction
/// committed, so this bounds a statement starved by a stream of writers of its rows.
pub const STATEMENT_RESTARTS_MAX: usize = 100;

/// One UPDATE or DELETE: `read` (a fresh snapshot each call) then `stage`, read again
/// while `stage` finds rows changed since the read (READ COMMITTED's re-check,
/// crates/write table_lock.rs). Returns the rows changed and what the read that was staged
/// read (for RETURNING).
pub async fn read_and_stage<R, Fut>(mut read: R, mut stage: impl FnMut(&ReadSnapshot, &RowChanges) -> Result<u64, SqlError>) -> Result<(u64, RowChanges), SqlError>
where
    R: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<(RowChanges, Arc<ReadSnapshot>), SqlError>>,
{
    let mut restarts = 0;
    loop {
        let (changes, snapshot) = read().await?;
        match stage(&snapshot, &changes) {
            Err(SqlError::Write(flashscan_write::WriteError::RowsChanged { .. })) if restarts < STATEMENT_RESTARTS_MAX => restarts += 1,
            Ok(rows) => return Ok((rows, changes)),
            Err(e) => return Err(e),
        }
    }
}

/// Stages what `read_changes` read into `txn`: the old rows deleted, the new versions
/// inserted. Returns the rows changed (PostgreSQL's `UPDATE n` / `DELETE n`).
pub fn stage_changes(write: &WritePath, txn: &mut Transaction, table: &str, snapshot: &ReadSnapshot, changes: &RowChanges) -> Result<u64, SqlError> {
    let Some(view) = snapshot.table(table) else {
        return Err(SqlError::Plan(format!("table {table}: not a table that takes UPDATE and DELETE (a column store?)")));
    };
    let steps = txn.staged_steps();
    let staged = (|| {
        let deleted = write.stage_delete(txn, table, view, &changes.row_ids)?;
        if !changes.new_rows.is_empty() {
            let inserted = write.stage_new_versions(txn, table, &changes.new_rows, &changes.assigned)?;
            debug_assert_eq!(inserted, deleted, "one new version per row updated");
        }
        Ok::<u64, flashscan_write::WriteError>(deleted)
    })();
    // A transaction that asked not to wait is staged again from the start where it may.
    if let Err(flashscan_write::WriteError::WouldWait { .. }) = &staged {
        txn.unstage_to(steps);
    }
    Ok(staged?)
}
