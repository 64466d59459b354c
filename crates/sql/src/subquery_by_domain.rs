//! Subqueries DataFusion 55 leaves in a plan, decorrelated over their domain.
//!
//! DataFusion turns a correlated subquery into a join only when the correlation is an
//! equality it can pull above the subquery's aggregate, and EXISTS / IN only in a WHERE
//! clause. What it leaves reaches the physical planner and fails ("Physical plan does not
//! support logical expression ScalarSubquery"): `SELECT (SELECT count(*) FROM t1 AS x WHERE
//! x.b < t1.b) FROM t1`, `SELECT EXISTS (…) FROM t1`, `SELECT a IN (SELECT …) FROM t1` —
//! all of which PostgreSQL runs.
//!
//! This rule runs right after DataFusion's `scalar_subquery_to_join` and rewrites what is
//! left in a projection or a filter the general way (Neumann and Kemper, "Unnesting
//! Arbitrary Queries", 2015): the subquery is evaluated once per distinct value of the
//! outer columns it reads (its *domain*), as one grouped query, and joined back.
//!
//! ```text
//! Projection: …, (SELECT agg FROM S WHERE p(S, outer.c)) …      Projection: …, sq.value …
//!   I                                                      =>     Left join I.c = sq.d (NULL = NULL)
//!                                                                   I
//!                                                                   sq: Aggregate group by d: agg FILTER (mark)
//!                                                                         Left join D, S on p(S, d)
//!                                                                           D: SELECT DISTINCT c AS d FROM I
//!                                                                           S + a marker column (true)
//! ```
//!
//! Each domain row keeps exactly one output row (the left join keeps a domain value no row
//! of S matches, and the aggregates see the marker: `count(*)` there is 0, `sum` NULL), so
//! every row of I finds exactly one partner and keeps its multiplicity. EXISTS is the count
//! of matching rows above 0; `e IN (SELECT v …)` counts the rows equal to `e` and the rows
//! where `v` is NULL, to answer true, false or NULL as SQL's three-valued IN does.
//!
//! What it does not take (left as it was, so DataFusion's own error stands): a scalar
//! subquery that is not one aggregate row (no GROUP BY), a correlation inside an aggregate,
//! limit, window or outer join of the subquery, a subquery nested in the subquery, and
//! outer columns of a query further out.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::common::{Column, DFSchema, NullEquality, Result, ScalarValue, TableReference};
use datafusion::functions_aggregate::expr_fn::count;
use datafusion::logical_expr::expr::{AggregateFunction, Exists, InSubquery};
use datafusion::logical_expr::utils::{conjunction, split_conjunction};
use datafusion::logical_expr::{
    Aggregate, Distinct, Expr, ExprSchemable, Filter, Join, JoinConstraint, JoinType, LogicalPlan, LogicalPlanBuilder, Projection, Subquery,
    SubqueryAlias,
};
use datafusion::logical_expr::{lit, when};
use datafusion::optimizer::{ApplyOrder, OptimizerConfig, OptimizerRule};

/// The rule (see the module comment).
#[derive(Debug, Default)]
pub struct SubqueryByDomain;

/// Names made by this rule carry a number unique in the process, so two rewrites in one
/// plan (or a rewrite of a rewritten plan) never share a column name.
static REWRITE_NUMBER: AtomicUsize = AtomicUsize::new(0);

impl OptimizerRule for SubqueryByDomain {
    fn name(&self) -> &str {
        "flashscan_subquery_by_domain"
    }

    fn apply_order(&self) -> Option<ApplyOrder> {
        Some(ApplyOrder::TopDown)
    }

    fn supports_rewrite(&self) -> bool {
        true
    }

    fn rewrite(&self, plan: LogicalPlan, _config: &dyn OptimizerConfig) -> Result<Transformed<LogicalPlan>> {
        match &plan {
            LogicalPlan::Projection(p) if p.expr.iter().any(has_subquery) => match rewrite_projection(p)? {
                Some(new) => Ok(Transformed::yes(new)),
                None => Ok(Transformed::no(plan)),
            },
            LogicalPlan::Aggregate(a) if a.aggr_expr.iter().chain(&a.group_expr).any(has_subquery) => match rewrite_aggregate(a)? {
                Some(new) => Ok(Transformed::yes(new)),
                None => Ok(Transformed::no(plan)),
            },
            LogicalPlan::Filter(f) if has_subquery(&f.predicate) => match rewrite_filter(f)? {
                Some(new) => Ok(Transformed::yes(new)),
                None => Ok(Transformed::no(plan)),
            },
            _ => Ok(Transformed::no(plan)),
        }
    }
}

/// `ctx` with [`SubqueryByDomain`] right after DataFusion's `scalar_subquery_to_join` (so
/// the rest of the pass — join predicates, filter and projection pushdown — works on its
/// output), or last if that rule is not there.
pub fn register(ctx: datafusion::prelude::SessionContext) -> datafusion::prelude::SessionContext {
    crate::rule_order::with_logical_rule(ctx, Arc::new(SubqueryByDomain), crate::rule_order::At::After("scalar_subquery_to_join"))
}

fn has_subquery(expr: &Expr) -> bool {
    expr.exists(|e| Ok(matches!(e, Expr::ScalarSubquery(_) | Expr::Exists(_) | Expr::InSubquery(_)))).unwrap_or(false)
}

/// The subquery expressions of `exprs`, each once, outermost only.
fn subqueries_of<'a>(exprs: impl IntoIterator<Item = &'a Expr>) -> Vec<Expr> {
    let mut found: Vec<Expr> = Vec::new();
    for e in exprs {
        let _ = e.apply(|e| {
            if matches!(e, Expr::ScalarSubquery(_) | Expr::Exists(_) | Expr::InSubquery(_)) {
                if !found.contains(e) {
                    found.push(e.clone());
                }
                return Ok(TreeNodeRecursion::Jump);
            }
            Ok(TreeNodeRecursion::Continue)
        });
    }
    found
}

/// One subquery made a join partner: `right` joins the outer input on `keys` (outer
/// expression, right column; NULL matches NULL) and `value` (over `right`) replaces it.
struct Decorrelated {
    right: LogicalPlan,
    keys: Vec<(Expr, Expr)>,
    value: Expr,
}

/// `input` left-joined with every partner, and each subquery's replacement; None when one
/// of them is not taken.
fn join_partners(input: &Arc<LogicalPlan>, subqueries: &[Expr]) -> Result<Option<(LogicalPlan, Vec<(Expr, Expr)>)>> {
    let mut joined = input.as_ref().clone();
    let mut replacements = Vec::new();
    for s in subqueries {
        let Some(d) = decorrelate(input, s)? else { return Ok(None) };
        let filter = if d.keys.is_empty() { Some(lit(true)) } else { None };
        joined = LogicalPlan::Join(Join::try_new(
            Arc::new(joined),
            Arc::new(d.right),
            d.keys,
            filter,
            JoinType::Left,
            JoinConstraint::On,
            NullEquality::NullEqualsNull,
            false,
        )?);
        replacements.push((s.clone(), d.value));
    }
    Ok(Some((joined, replacements)))
}

fn replace(expr: &Expr, replacements: &[(Expr, Expr)]) -> Result<Expr> {
    expr.clone()
        .transform_down(|e| match replacements.iter().find(|(s, _)| *s == e) {
            Some((_, v)) => Ok(Transformed::new(v.clone(), true, TreeNodeRecursion::Jump)),
            None => Ok(Transformed::no(e)),
        })
        .map(|t| t.data)
}

fn rewrite_projection(p: &Projection) -> Result<Option<LogicalPlan>> {
    let subqueries = subqueries_of(&p.expr);
    let Some((joined, replacements)) = join_partners(&p.input, &subqueries)? else { return Ok(None) };
    let mut exprs = Vec::with_capacity(p.expr.len());
    for (i, e) in p.expr.iter().enumerate() {
        let new = replace(e, &replacements)?;
        let (qualifier, field) = p.schema.qualified_field(i);
        // The output keeps its name (the parents refer to it, the client sees it).
        let named = if new.schema_name().to_string() == *field.name() && qualifier.is_none() {
            new
        } else {
            new.alias_qualified(qualifier.cloned(), field.name())
        };
        exprs.push(named);
    }
    Ok(Some(LogicalPlan::Projection(Projection::try_new(exprs, Arc::new(joined))?)))
}

/// A subquery in an aggregate's arguments or its GROUP BY: the partners join its input, and
/// each expression keeps its output name.
fn rewrite_aggregate(a: &Aggregate) -> Result<Option<LogicalPlan>> {
    if a.group_expr.iter().any(|e| matches!(e, Expr::GroupingSet(_))) {
        return Ok(None);
    }
    let subqueries = subqueries_of(a.group_expr.iter().chain(&a.aggr_expr));
    let Some((joined, replacements)) = join_partners(&a.input, &subqueries)? else { return Ok(None) };
    let keep_name = |i: usize, e: &Expr| -> Result<Expr> {
        let new = replace(e, &replacements)?;
        let (qualifier, field) = a.schema.qualified_field(i);
        Ok(if new.schema_name().to_string() == *field.name() && qualifier.is_none() { new } else { new.alias_qualified(qualifier.cloned(), field.name()) })
    };
    let group = a.group_expr.iter().enumerate().map(|(i, e)| keep_name(i, e)).collect::<Result<Vec<_>>>()?;
    let aggregates = a.aggr_expr.iter().enumerate().map(|(i, e)| keep_name(a.group_expr.len() + i, e)).collect::<Result<Vec<_>>>()?;
    Ok(Some(LogicalPlan::Aggregate(Aggregate::try_new(Arc::new(joined), group, aggregates)?)))
}

fn rewrite_filter(f: &Filter) -> Result<Option<LogicalPlan>> {
    let subqueries = subqueries_of([&f.predicate]);
    let Some((joined, replacements)) = join_partners(&f.input, &subqueries)? else { return Ok(None) };
    let predicate = replace(&f.predicate, &replacements)?;
    let filtered = LogicalPlan::Filter(Filter::try_new(predicate, Arc::new(joined))?);
    // Back to the filter's own columns: the partners' columns end here.
    let columns: Vec<Expr> = f.input.schema().columns().into_iter().map(Expr::Column).collect();
    Ok(Some(LogicalPlanBuilder::from(filtered).project(columns)?.build()?))
}

/// What a subquery is asked for.
enum Kind {
    Scalar,
    Exists { negated: bool },
    In { left: Expr, negated: bool },
}

fn decorrelate(input: &Arc<LogicalPlan>, subquery_expr: &Expr) -> Result<Option<Decorrelated>> {
    let (subquery, kind): (&Subquery, Kind) = match subquery_expr {
        Expr::ScalarSubquery(s) => (s, Kind::Scalar),
        Expr::Exists(Exists { subquery, negated }) => (subquery, Kind::Exists { negated: *negated }),
        Expr::InSubquery(InSubquery { expr, subquery, negated }) => (subquery, Kind::In { left: expr.as_ref().clone(), negated: *negated }),
        _ => return Ok(None),
    };
    let plan = subquery.subquery.as_ref();
    let Some(outer_columns) = outer_columns_of(plan)? else { return Ok(None) };
    if outer_columns.iter().any(|c| !input.schema().has_column(c)) {
        // An outer column of a query further out: not this join's to give.
        return Ok(None);
    }
    let number = REWRITE_NUMBER.fetch_add(1, Ordering::Relaxed);
    let alias = format!("__sq{number}");
    let mark = format!("__sq{number}_mark");
    let domain_alias = format!("{alias}_domain");

    // The domain: the distinct values of the outer columns (and of IN's left side).
    let mut domain_exprs: Vec<Expr> = outer_columns.iter().enumerate().map(|(k, c)| Expr::Column(c.clone()).alias(format!("__d{k}"))).collect();
    let mut outer_keys: Vec<Expr> = outer_columns.iter().cloned().map(Expr::Column).collect();
    if let Kind::In { left, .. } = &kind {
        domain_exprs.push(left.clone().alias("__din"));
        outer_keys.push(left.clone());
    }
    let domain_column = |name: &str| Expr::Column(Column::new(Some(TableReference::bare(domain_alias.as_str())), name));
    let domain_columns: Vec<Expr> = (0..domain_exprs.len())
        .map(|k| if matches!(kind, Kind::In { .. }) && k == domain_exprs.len() - 1 { domain_column("__din") } else { domain_column(&format!("__d{k}")) })
        .collect();
    let domain = if domain_exprs.is_empty() {
        None
    } else {
        let projected = LogicalPlan::Projection(Projection::try_new(domain_exprs, input.clone())?);
        let distinct = LogicalPlan::Distinct(Distinct::All(Arc::new(projected)));
        Some(LogicalPlan::SubqueryAlias(SubqueryAlias::try_new(Arc::new(distinct), domain_alias.as_str())?))
    };
    let to_domain = |e: Expr| -> Result<Expr> {
        e.transform(|e| match &e {
            Expr::OuterReferenceColumn(_, c) => match outer_columns.iter().position(|o| o == c) {
                Some(k) => Ok(Transformed::yes(domain_column(&format!("__d{k}")))),
                None => Ok(Transformed::no(e)),
            },
            _ => Ok(Transformed::no(e)),
        })
        .map(|t| t.data)
    };

    let grouped = match kind {
        Kind::Scalar => scalar_aggregate(plan, domain, &domain_columns, &mark, &to_domain)?,
        Kind::Exists { negated } => exists_count(plan, domain, &domain_columns, &mark, &to_domain)?.map(|(p, counted)| {
            let value = if negated { counted.eq(lit(0i64)) } else { counted.gt(lit(0i64)) };
            (p, value)
        }),
        Kind::In { negated, .. } => in_counts(plan, domain, &domain_columns, &mark, &to_domain, negated)?,
    };
    let Some((grouped, value_over_grouped)) = grouped else { return Ok(None) };
    // The partner under one name: its columns requalified by `alias`.
    let right = LogicalPlan::SubqueryAlias(SubqueryAlias::try_new(Arc::new(grouped), alias.as_str())?);
    let requalify = |e: Expr| -> Result<Expr> {
        e.transform(|e| match &e {
            Expr::Column(c) => Ok(Transformed::yes(Expr::Column(Column::new(Some(TableReference::bare(alias.as_str())), c.name.clone())))),
            _ => Ok(Transformed::no(e)),
        })
        .map(|t| t.data)
    };
    let keys = outer_keys.into_iter().zip(domain_columns.iter().cloned()).map(|(o, d)| Ok((o, requalify(d)?))).collect::<Result<Vec<_>>>()?;
    Ok(Some(Decorrelated { right, keys, value: requalify(value_over_grouped)? }))
}

/// The outer columns a subquery reads, each once; None when it holds a subquery of its
/// own that reads outer columns (not taken).
fn outer_columns_of(plan: &LogicalPlan) -> Result<Option<Vec<Column>>> {
    let mut columns: Vec<Column> = Vec::new();
    let mut nested = false;
    plan.apply(|node| {
        node.apply_expressions(|e| {
            e.apply(|e| {
                match e {
                    Expr::OuterReferenceColumn(_, c) => {
                        if !columns.contains(c) {
                            columns.push(c.clone());
                        }
                    }
                    Expr::ScalarSubquery(s) | Expr::Exists(Exists { subquery: s, .. }) | Expr::InSubquery(InSubquery { subquery: s, .. }) => {
                        if !s.outer_ref_columns.is_empty() {
                            nested = true;
                        }
                    }
                    _ => {}
                }
                Ok(TreeNodeRecursion::Continue)
            })
        })
    })?;
    Ok((!nested).then_some(columns))
}

fn has_outer_reference(plan: &LogicalPlan) -> Result<bool> {
    let mut found = false;
    plan.apply(|node| {
        node.apply_expressions(|e| {
            if e.exists(|e| Ok(matches!(e, Expr::OuterReferenceColumn(..))))? {
                found = true;
                return Ok(TreeNodeRecursion::Stop);
            }
            Ok(TreeNodeRecursion::Continue)
        })
    })?;
    Ok(found)
}

/// `plan` with every conjunct that reads an outer column taken out of its filters, and
/// those conjuncts (over `plan`'s columns); None where a correlation cannot move up
/// unchanged (below an aggregate, a limit, an outer join, or a column that does not reach
/// the top).
fn pull_correlated(plan: &LogicalPlan) -> Result<Option<(LogicalPlan, Vec<Expr>)>> {
    if !has_outer_reference(plan)? {
        return Ok(Some((plan.clone(), Vec::new())));
    }
    match plan {
        LogicalPlan::Filter(f) => {
            let (correlated, rest): (Vec<&Expr>, Vec<&Expr>) =
                split_conjunction(&f.predicate).into_iter().partition(|e| e.exists(|e| Ok(matches!(e, Expr::OuterReferenceColumn(..)))).unwrap_or(true));
            let Some((input, mut below)) = pull_correlated(&f.input)? else { return Ok(None) };
            let input = match conjunction(rest.into_iter().cloned()) {
                Some(p) => LogicalPlan::Filter(Filter::try_new(p, Arc::new(input))?),
                None => input,
            };
            below.extend(correlated.into_iter().cloned());
            Ok(Some((input, below)))
        }
        LogicalPlan::SubqueryAlias(a) => {
            let Some((input, below)) = pull_correlated(&a.input)? else { return Ok(None) };
            if !below.is_empty() {
                // The conjuncts name the columns by the qualifier under the alias.
                return Ok(None);
            }
            Ok(Some((LogicalPlan::SubqueryAlias(SubqueryAlias::try_new(Arc::new(input), a.alias.clone())?), below)))
        }
        LogicalPlan::Projection(p) => {
            let Some((input, below)) = pull_correlated(&p.input)? else { return Ok(None) };
            // Each column a conjunct reads must pass through the projection as it is.
            for e in &below {
                for c in e.column_refs() {
                    if !p.expr.iter().any(|x| matches!(x, Expr::Column(pc) if pc == c)) {
                        return Ok(None);
                    }
                }
            }
            if p.expr.iter().any(|e| e.exists(|e| Ok(matches!(e, Expr::OuterReferenceColumn(..)))).unwrap_or(true)) {
                return Ok(None);
            }
            Ok(Some((LogicalPlan::Projection(Projection::try_new(p.expr.clone(), Arc::new(input))?), below)))
        }
        LogicalPlan::Join(j) if j.join_type == JoinType::Inner => {
            if j.on.iter().any(|(l, r)| has_outer(l) || has_outer(r)) || j.filter.as_ref().is_some_and(has_outer) {
                return Ok(None);
            }
            let Some((left, mut below)) = pull_correlated(&j.left)? else { return Ok(None) };
            let Some((right, right_below)) = pull_correlated(&j.right)? else { return Ok(None) };
            below.extend(right_below);
            let join = Join::try_new(Arc::new(left), Arc::new(right), j.on.clone(), j.filter.clone(), j.join_type, j.join_constraint, j.null_equality, j.null_aware)?;
            Ok(Some((LogicalPlan::Join(join), below)))
        }
        _ => Ok(None),
    }
}

fn has_outer(e: &Expr) -> bool {
    e.exists(|e| Ok(matches!(e, Expr::OuterReferenceColumn(..)))).unwrap_or(true)
}

/// `domain LEFT JOIN (input + marker) ON correlated` (the domain given), or the input
/// with its marker alone (an uncorrelated subquery).
fn join_domain(domain: Option<LogicalPlan>, input: LogicalPlan, extra: Vec<Expr>, correlated: Vec<Expr>, mark: &str) -> Result<LogicalPlan> {
    let mut exprs: Vec<Expr> = input.schema().columns().into_iter().map(Expr::Column).collect();
    exprs.extend(extra);
    exprs.push(lit(true).alias(mark));
    let marked = LogicalPlan::Projection(Projection::try_new(exprs, Arc::new(input))?);
    match domain {
        None => Ok(marked),
        Some(domain) => {
            let filter = conjunction(correlated).unwrap_or_else(|| lit(true));
            Ok(LogicalPlan::Join(Join::try_new(
                Arc::new(domain),
                Arc::new(marked),
                Vec::new(),
                Some(filter),
                JoinType::Left,
                JoinConstraint::On,
                NullEquality::NullEqualsNothing,
                false,
            )?))
        }
    }
}

fn mark_column(mark: &str) -> Expr {
    Expr::Column(Column::new_unqualified(mark))
}

/// `(SELECT agg … FROM … WHERE p(outer))`: one aggregate row without GROUP BY, under
/// projections and filters (HAVING). Returns the grouped plan (the domain columns beside
/// the subquery's output) and the value over it.
fn scalar_aggregate(
    plan: &LogicalPlan,
    domain: Option<LogicalPlan>,
    domain_columns: &[Expr],
    mark: &str,
    to_domain: &dyn Fn(Expr) -> Result<Expr>,
) -> Result<Option<(LogicalPlan, Expr)>> {
    // The nodes above the aggregate, top first.
    let mut above: Vec<&LogicalPlan> = Vec::new();
    let mut node = plan;
    let aggregate = loop {
        match node {
            LogicalPlan::Aggregate(a) => break a,
            LogicalPlan::Projection(p) => {
                above.push(node);
                node = &p.input;
            }
            LogicalPlan::Filter(f) => {
                above.push(node);
                node = &f.input;
            }
            // One row per domain value: an order changes nothing, a limit of at least one
            // row from the start neither.
            LogicalPlan::Sort(s) => node = &s.input,
            LogicalPlan::Limit(l) if l.skip.is_none() && l.fetch.as_ref().is_some_and(|f| matches!(f.as_ref(), Expr::Literal(ScalarValue::Int64(Some(n)), _) if *n >= 1)) => node = &l.input,
            _ => return Ok(None),
        }
    };
    if !aggregate.group_expr.is_empty() || aggregate.aggr_expr.is_empty() {
        return Ok(None);
    }
    let Some(LogicalPlan::Projection(top)) = above.first() else { return Ok(None) };
    if top.expr.len() != 1 {
        return Ok(None);
    }
    let Some((input, correlated)) = pull_correlated(&aggregate.input)? else { return Ok(None) };
    if has_outer_reference(&input)? {
        return Ok(None);
    }
    let correlated = correlated.into_iter().map(to_domain).collect::<Result<Vec<_>>>()?;
    let joined = join_domain(domain, input, Vec::new(), correlated, mark)?;
    // Each aggregate sees only the rows that matched (the marker is NULL on the row the left
    // join adds for a domain value nothing matched), under its old name.
    let mut aggr_exprs = Vec::with_capacity(aggregate.aggr_expr.len());
    for (i, e) in aggregate.aggr_expr.iter().enumerate() {
        let name = aggregate.schema.field(aggregate.group_expr.len() + i).name().clone();
        let inner = match e {
            Expr::Alias(a) => a.expr.as_ref().clone(),
            other => other.clone(),
        };
        let Expr::AggregateFunction(mut f) = inner else { return Ok(None) };
        let matched = mark_column(mark).is_not_null();
        f.params.filter = Some(Box::new(match f.params.filter.take() {
            Some(old) => old.as_ref().clone().and(matched),
            None => matched,
        }));
        aggr_exprs.push(Expr::AggregateFunction(AggregateFunction { func: f.func, params: f.params }).alias(name));
    }
    let mut rebuilt = LogicalPlan::Aggregate(Aggregate::try_new(Arc::new(joined), domain_columns.to_vec(), aggr_exprs)?);
    // The nodes above, bottom first, each passing the domain columns up.
    let domain_names: Vec<Expr> = domain_columns.iter().map(|d| Ok(Expr::Column(column_in(rebuilt.schema(), d)?))).collect::<Result<_>>()?;
    for node in above.iter().rev() {
        rebuilt = match node {
            LogicalPlan::Projection(p) => {
                let mut exprs = p.expr.iter().cloned().map(to_domain).collect::<Result<Vec<_>>>()?;
                exprs.extend(domain_names.iter().cloned());
                LogicalPlan::Projection(Projection::try_new(exprs, Arc::new(rebuilt))?)
            }
            LogicalPlan::Filter(f) => LogicalPlan::Filter(Filter::try_new(to_domain(f.predicate.clone())?, Arc::new(rebuilt))?),
            _ => return Ok(None),
        };
    }
    let value = Expr::Column(Column::new_unqualified(rebuilt.schema().field(0).name()));
    Ok(Some((rebuilt, value)))
}

/// The column `d` (a domain column) as `schema` names it after a grouping.
fn column_in(schema: &DFSchema, d: &Expr) -> Result<Column> {
    let Expr::Column(c) = d else { return Err(datafusion::error::DataFusionError::Internal("a domain column is a column".into())) };
    let (qualifier, field) = schema.qualified_field_with_name(c.relation.as_ref(), &c.name)?;
    Ok(Column::new(qualifier.cloned(), field.name()))
}

/// The subquery without what cannot change whether it has rows: its select list, order
/// and DISTINCT (a LIMIT of at least one row too).
fn rows_of(plan: &LogicalPlan) -> &LogicalPlan {
    match plan {
        LogicalPlan::Projection(p) if !p.expr.iter().any(has_outer) => rows_of(&p.input),
        LogicalPlan::Sort(s) => rows_of(&s.input),
        LogicalPlan::Distinct(Distinct::All(input)) => rows_of(input),
        LogicalPlan::Limit(l) if l.skip.is_none() && l.fetch.as_ref().is_some_and(|f| matches!(f.as_ref(), Expr::Literal(ScalarValue::Int64(Some(n)), _) if *n >= 1)) => {
            rows_of(&l.input)
        }
        other => other,
    }
}

/// EXISTS: the number of rows matching each domain value, and that count over the grouped plan.
fn exists_count(
    plan: &LogicalPlan,
    domain: Option<LogicalPlan>,
    domain_columns: &[Expr],
    mark: &str,
    to_domain: &dyn Fn(Expr) -> Result<Expr>,
) -> Result<Option<(LogicalPlan, Expr)>> {
    let Some((input, correlated)) = pull_correlated(rows_of(plan))? else { return Ok(None) };
    if has_outer_reference(&input)? {
        return Ok(None);
    }
    let correlated = correlated.into_iter().map(to_domain).collect::<Result<Vec<_>>>()?;
    let joined = join_domain(domain, input, Vec::new(), correlated, mark)?;
    let counted = LogicalPlan::Aggregate(Aggregate::try_new(Arc::new(joined), domain_columns.to_vec(), vec![count(mark_column(mark)).alias("__count")])?);
    Ok(Some((counted, Expr::Column(Column::new_unqualified("__count")))))
}

/// `left IN (SELECT v …)`: per domain value (the outer columns and `left`), the rows, the
/// rows with `v = left` and those with `v` NULL; true if one equals, false if there are
/// none, NULL if `left` or some `v` is NULL, else false.
fn in_counts(
    plan: &LogicalPlan,
    domain: Option<LogicalPlan>,
    domain_columns: &[Expr],
    mark: &str,
    to_domain: &dyn Fn(Expr) -> Result<Expr>,
    negated: bool,
) -> Result<Option<(LogicalPlan, Expr)>> {
    let mut node = plan;
    while let LogicalPlan::Sort(s) = node {
        node = &s.input;
    }
    if let LogicalPlan::Distinct(Distinct::All(input)) = node {
        node = input;
    }
    let LogicalPlan::Projection(p) = node else { return Ok(None) };
    if p.expr.len() != 1 || has_outer(&p.expr[0]) {
        return Ok(None);
    }
    let Some((input, correlated)) = pull_correlated(&p.input)? else { return Ok(None) };
    if has_outer_reference(&input)? {
        return Ok(None);
    }
    let correlated = correlated.into_iter().map(to_domain).collect::<Result<Vec<_>>>()?;
    let value_type = p.expr[0].get_type(p.input.schema())?;
    let joined = join_domain(domain, input, vec![p.expr[0].clone().alias("__v")], correlated, mark)?;
    let Some(left) = domain_columns.last().cloned() else { return Ok(None) };
    let left_type = left.get_type(joined.schema())?;
    let left_cmp = if left_type == value_type { left.clone() } else { left.clone().cast_to(&value_type, joined.schema())? };
    let v = Expr::Column(Column::new_unqualified("__v"));
    let counting = |filter: Expr| {
        let Expr::AggregateFunction(mut f) = count(mark_column(mark)) else { unreachable!("count() is an aggregate function") };
        f.params.filter = Some(Box::new(filter));
        Expr::AggregateFunction(f)
    };
    let aggregates = vec![
        count(mark_column(mark)).alias("__rows"),
        counting(left_cmp.eq(v.clone())).alias("__equal"),
        counting(v.is_null()).alias("__null"),
    ];
    let grouped = LogicalPlan::Aggregate(Aggregate::try_new(Arc::new(joined), domain_columns.to_vec(), aggregates)?);
    let left_out = Expr::Column(column_in(grouped.schema(), &left)?);
    let col = |n: &str| Expr::Column(Column::new_unqualified(n));
    let found = when(col("__equal").gt(lit(0i64)), lit(true))
        .when(col("__rows").eq(lit(0i64)), lit(false))
        .when(left_out.is_null().or(col("__null").gt(lit(0i64))), lit(ScalarValue::Boolean(None)))
        .otherwise(lit(false))?;
    Ok(Some((grouped, if negated { !found } else { found })))
}
