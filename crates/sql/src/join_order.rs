//! The order of a query's inner joins, chosen from estimated cardinalities: DataFusion 55
//! joins tables in the order the query names them (`FROM a, b, c` is `(a ⋈ b) ⋈ c`) and
//! only turns each join round afterwards (`JoinSelection`), so TPC-H Q5, Q7, Q8 and Q9 join
//! lineitem to orders (millions of rows) before the region, nation and date filters that
//! keep a fifth or a seventh of them have been applied.
//!
//! The rule, as DuckDB's join order optimizer does it (`src/optimizer/join_order/`): the
//! inner-join tree is flattened into its relations (the leaves: scans with their filters,
//! aggregates, outer and semi joins — anything that is not an inner join) and its
//! predicates; then the cheapest tree over them is searched, cost the sum of the estimated
//! rows of every join (C_out, DuckDB's cost model): exhaustively over the sets of relations
//! up to `EXHAUSTIVE_RELATIONS_MAX` relations (`exhaustive`, DPsub: TPC-H's trees have at
//! most 8), greedily beyond (`greedy`: the connected pair whose join has the fewest rows
//! first, as DuckDB's `SolveJoinOrderApproximately` in `plan_enumerator.cpp`). Only
//! relations an equality connects are joined: no cross products.
//!
//! Estimates, as DuckDB's cardinality estimator makes them: a relation's rows are its
//! table's (exact, from the provider's statistics) times the share its filters keep;
//! an equi-join keeps `|L|·|R| / max(ndv(l), ndv(r))` by its most selective key pair (only
//! one pair counts: TPC-H Q9's `(ps_partkey, ps_suppkey) = (l_partkey, l_suppkey)` are
//! correlated, and multiplying both selectivities underestimates by 2,500×). A column's
//! distinct count (ndv) is the statistics' when known, else `max − min + 1` for an integer
//! or date column with known bounds (an upper bound; exact for dense keys), else the
//! relation's rows (a key). Filters: `col = literal` keeps `1/ndv`; a range on a column of
//! known bounds keeps its share of `[min, max]`; anything else keeps
//! `FILTER_SELECTIVITY_UNKNOWN` as DataFusion's `FilterExec` assumes.
//!
//! A tree whose relations cannot all be estimated (a source without statistics) or whose
//! predicates do not connect it (a cross product) keeps its order. The reordered tree is
//! put under a projection with the original columns in their original order, so nothing
//! above it changes. The optimizer runs its rules up to three times; a tree already in the
//! chosen order is left as it is (`shape`), so later passes change nothing.
//!
//! Runs in the logical optimizer after `push_down_filter` (filters sit on their relations,
//! join predicates on the joins) and before `optimize_projections` (which prunes the new
//! tree's columns). Off by default (`SET flashscan.join_order = true` turns it on) until it
//! is measured to win (docs/benchmarks.md, "Join order from statistics"); same answers
//! either way. Keys implied by equivalence are added (`add_implied_keys`; not yet measured).

use std::collections::HashMap;
use std::sync::Arc;

use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::common::{Column, NullEquality, Result, ScalarValue};
use datafusion::datasource::source_as_provider;
use datafusion::logical_expr::expr::InList;
use datafusion::logical_expr::utils::{conjunction, split_conjunction};
use datafusion::logical_expr::{BinaryExpr, Expr, Join, JoinConstraint, JoinType, LogicalPlan, Operator, Projection};
use datafusion::optimizer::{ApplyOrder, OptimizerConfig, OptimizerRule};

/// What a filter conjunct keeps when nothing better is known: DataFusion's `FilterExec`
/// default (`FILTER_EXEC_DEFAULT_SELECTIVITY`) and DuckDB's `DEFAULT_SELECTIVITY`, 20 %.
pub const FILTER_SELECTIVITY_UNKNOWN: f64 = 0.2;

/// Relations a tree is ordered exhaustively up to (`exhaustive`: 3^n splits, 531,441 at
/// 12); a wider tree is ordered greedily (`greedy`), as DuckDB falls back to its greedy
/// enumerator past its own limit.
pub const EXHAUSTIVE_RELATIONS_MAX: usize = 12;

/// Relations a tree is reordered up to; a wider tree keeps its order (the relation sets are
/// bit masks of a `u64`, and the greedy search is quadratic per step).
pub const JOIN_RELATIONS_MAX: usize = 32;

/// See the module doc.
#[derive(Debug, Default)]
pub struct JoinOrder;

impl OptimizerRule for JoinOrder {
    fn name(&self) -> &str {
        "flashscan_join_order"
    }

    fn apply_order(&self) -> Option<ApplyOrder> {
        None
    }

    fn supports_rewrite(&self) -> bool {
        true
    }

    fn rewrite(&self, plan: LogicalPlan, config: &dyn OptimizerConfig) -> Result<Transformed<LogicalPlan>> {
        if !crate::settings::FlashscanSettings::of(&config.options()).join_order {
            return Ok(Transformed::no(plan));
        }
        reorder_all(plan)
    }
}

/// `ctx` with the rule right before `optimize_projections` (after `push_down_filter`).
pub fn register(ctx: datafusion::prelude::SessionContext) -> datafusion::prelude::SessionContext {
    crate::rule_order::with_logical_rule(ctx, Arc::new(JoinOrder), crate::rule_order::At::Before(&["optimize_projections"]))
}

/// Every inner-join tree of `plan` reordered, outermost first; the relations of a
/// reordered tree are searched for trees of their own.
fn reorder_all(plan: LogicalPlan) -> Result<Transformed<LogicalPlan>> {
    plan.transform_down(|node| {
        if !is_inner_join(&node) {
            return Ok(Transformed::no(node));
        }
        match reorder_tree(&node)? {
            // The tree's relations were searched by `reorder_tree` already.
            Some(new) => Ok(Transformed::new(new.data, new.transformed, TreeNodeRecursion::Jump)),
            None => Ok(Transformed::no(node)),
        }
    })
}

fn is_inner_join(plan: &LogicalPlan) -> bool {
    matches!(plan, LogicalPlan::Join(j) if j.join_type == JoinType::Inner
        && j.join_constraint == JoinConstraint::On
        && j.null_equality == NullEquality::NullEqualsNothing
        && !j.null_aware)
}

/// An inner-join tree flattened: its relations and its predicates (the joins' equalities
/// and filters, and filters between the joins), and its shape as the query gave it.
#[derive(Default)]
struct Flattened {
    relations: Vec<LogicalPlan>,
    predicates: Vec<Expr>,
}

impl Flattened {
    /// Adds `plan`'s relations and predicates; returns its shape (`shape_of`'s notation).
    fn add(&mut self, plan: &LogicalPlan) -> String {
        match plan {
            LogicalPlan::Join(j) if is_inner_join(plan) => {
                let left = self.add(&j.left);
                let right = self.add(&j.right);
                self.predicates.extend(j.on.iter().map(|(l, r)| l.clone().eq(r.clone())));
                if let Some(f) = &j.filter {
                    self.predicates.extend(split_conjunction(f).into_iter().cloned());
                }
                format!("({left} {right})")
            }
            // Columns pruned between joins (`optimize_projections`): the rebuilt tree hands on
            // every column, the projection on top keeps the tree's own.
            LogicalPlan::Projection(p) if is_inner_join(&p.input) && p.expr.iter().all(|e| matches!(e, Expr::Column(_))) => self.add(&p.input),
            LogicalPlan::Filter(f) if is_inner_join(&f.input) => {
                self.predicates.extend(split_conjunction(&f.predicate).into_iter().cloned());
                self.add(&f.input)
            }
            _ => {
                self.relations.push(plan.clone());
                (self.relations.len() - 1).to_string()
            }
        }
    }
}

/// A part of the tree being built: a relation, or relations joined.
struct Part {
    plan: LogicalPlan,
    estimate: Estimate,
    /// The relations it holds, bit `i` for `Flattened::relations[i]`.
    relations: u64,
    shape: String,
}

/// `root` reordered (its relations searched for trees of their own), or None when it
/// keeps its order: fewer than three relations, or more than `JOIN_RELATIONS_MAX`, a
/// relation that cannot be estimated, a predicate on columns no relation (or several)
/// has, or relations no equality connects.
fn reorder_tree(root: &LogicalPlan) -> Result<Option<Transformed<LogicalPlan>>> {
    let mut flat = Flattened::default();
    let shape = flat.add(root);
    let count = flat.relations.len();
    if !(3..=JOIN_RELATIONS_MAX).contains(&count) {
        return Ok(None);
    }
    let mut relations_changed = false;
    let mut parts = Vec::with_capacity(count);
    for (i, relation) in flat.relations.into_iter().enumerate() {
        let relation = reorder_all(relation)?;
        relations_changed |= relation.transformed;
        let Some(estimate) = estimate(&relation.data) else { return Ok(None) };
        parts.push(Part { plan: relation.data, estimate, relations: 1 << i, shape: i.to_string() });
    }
    let mut predicates = Vec::with_capacity(flat.predicates.len());
    for p in flat.predicates {
        let Some(relations) = relations_of(&p, &parts) else { return Ok(None) };
        // An equality between columns (or expressions) of disjoint relations: a join key.
        let sides = match &p {
            Expr::BinaryExpr(BinaryExpr { left, op: Operator::Eq, right }) => match (relations_of(left, &parts), relations_of(right, &parts)) {
                (Some(l), Some(r)) if l != 0 && r != 0 && l & r == 0 => Some((l, r)),
                _ => None,
            },
            _ => None,
        };
        predicates.push(Predicate { expr: p, relations, sides, used: false, implied: false });
    }
    add_implied_keys(&mut predicates);
    let joined = if count <= EXHAUSTIVE_RELATIONS_MAX { exhaustive(parts, &mut predicates)? } else { greedy(parts, &mut predicates)? };
    let Some(joined) = joined else { return Ok(None) };
    if joined.shape == shape && !relations_changed {
        return Ok(Some(Transformed::no(root.clone())));
    }
    debug_assert!(predicates.iter().all(|p| p.used), "every predicate is applied once");
    // The original columns, in their order, as everything above the tree expects them.
    let columns = root.schema().columns().into_iter().map(Expr::Column).collect();
    let projected = LogicalPlan::Projection(Projection::try_new(columns, Arc::new(joined.plan))?);
    Ok(Some(Transformed::yes(projected)))
}

struct Predicate {
    expr: Expr,
    /// The relations it reads.
    relations: u64,
    /// For a join key `l = r`: the relations `l` reads and those `r` reads.
    sides: Option<(u64, u64)>,
    used: bool,
    /// Implied by other keys (`add_implied_keys`): a join key, never a filter.
    implied: bool,
}

/// Keys implied by equivalence: `a = b` and `b = c` between plain columns make `a = c` a
/// join key too, as DuckDB's query graph has it (TPC-H Q5's `c_nationkey = n_nationkey`
/// from `c_nationkey = s_nationkey` and `s_nationkey = n_nationkey`, which lets customer join
/// the one-region nations before orders and lineitem). Sound for inner joins (the keys are
/// equal, hence not NULL, in every row out); columns compared without a cast share a type.
fn add_implied_keys(predicates: &mut Vec<Predicate>) {
    // Classes of columns with their relations; a tree has a handful of keys.
    let mut classes: Vec<Vec<(Column, u64)>> = Vec::new();
    for p in predicates.iter() {
        let (Some((l, r)), Expr::BinaryExpr(BinaryExpr { left, right, .. })) = (p.sides, &p.expr) else { continue };
        let (Expr::Column(a), Expr::Column(b)) = (left.as_ref(), right.as_ref()) else { continue };
        let class_of = |c: &Column, classes: &[Vec<(Column, u64)>]| classes.iter().position(|k| k.iter().any(|(x, _)| x == c));
        match (class_of(a, &classes), class_of(b, &classes)) {
            (Some(i), Some(j)) if i == j => {}
            (Some(i), Some(j)) => {
                let moved = classes.remove(i.max(j));
                classes[i.min(j)].extend(moved);
            }
            (Some(i), None) => classes[i].push((b.clone(), r)),
            (None, Some(j)) => classes[j].push((a.clone(), l)),
            (None, None) => classes.push(vec![(a.clone(), l), (b.clone(), r)]),
        }
    }
    let stated = |predicates: &[Predicate], a: &Column, b: &Column| {
        predicates.iter().any(|p| match &p.expr {
            Expr::BinaryExpr(BinaryExpr { left, op: Operator::Eq, right }) => matches!((left.as_ref(), right.as_ref()), (Expr::Column(x), Expr::Column(y)) if (x == a && y == b) || (x == b && y == a)),
            _ => false,
        })
    };
    for class in classes {
        for (i, (a, ra)) in class.iter().enumerate() {
            for (b, rb) in &class[i + 1..] {
                if ra & rb == 0 && !stated(predicates.as_slice(), a, b) {
                    predicates.push(Predicate { expr: Expr::Column(a.clone()).eq(Expr::Column(b.clone())), relations: ra | rb, sides: Some((*ra, *rb)), used: false, implied: true });
                }
            }
        }
    }
}

/// The relations whose columns `expr` reads; None if a column belongs to none or several.
fn relations_of(expr: &Expr, parts: &[Part]) -> Option<u64> {
    let mut mask = 0u64;
    for column in expr.column_refs() {
        let mut owners = parts.iter().filter(|p| p.plan.schema().has_column(column));
        let owner = owners.next()?;
        if owners.next().is_some() {
            return None;
        }
        mask |= owner.relations;
    }
    Some(mask)
}

/// Greedy operator ordering: joins the connected pair with the fewest estimated rows
/// until one part is left. None when no equality connects the parts left.
fn greedy(mut parts: Vec<Part>, predicates: &mut [Predicate]) -> Result<Option<Part>> {
    while parts.len() > 1 {
        let mut best: Option<(usize, usize, f64)> = None;
        for i in 0..parts.len() {
            for j in i + 1..parts.len() {
                let (a, b) = (&parts[i], &parts[j]);
                let Some(rows) = join_rows(&a.estimate, a.relations, &b.estimate, b.relations, predicates) else { continue };
                if best.is_none_or(|(_, _, r)| rows < r) {
                    best = Some((i, j, rows));
                }
            }
        }
        let Some((i, j, rows)) = best else { return Ok(None) };
        let right = parts.remove(j);
        let left = parts.remove(i);
        parts.insert(i, join(left, right, rows, predicates)?);
    }
    Ok(parts.pop())
}

/// The best plan found for one set of relations.
struct Best {
    /// The sum of the estimated rows of every join in it (DuckDB's and the textbook C_out).
    cost: f64,
    estimate: Estimate,
    /// The two sets joined last; None for one relation.
    split: Option<(u64, u64)>,
}

/// Dynamic programming over the sets of relations (DPsub): the cheapest plan of every
/// connected set from the cheapest of two disjoint, connected subsets, cost the sum of
/// intermediate rows — which sees what greedy cannot, that a small join now can lead to a
/// large one next (TPC-H Q5: region ⋈ nation ⋈ supplier is the smallest first step, but
/// then only lineitem connects cheaply). 3^n splits: `EXHAUSTIVE_RELATIONS_MAX` bounds n.
/// None when the relations are not connected.
fn exhaustive(parts: Vec<Part>, predicates: &mut [Predicate]) -> Result<Option<Part>> {
    let count = parts.len();
    debug_assert!((1..=EXHAUSTIVE_RELATIONS_MAX).contains(&count));
    let full: u64 = (1u64 << count) - 1;
    let mut best: HashMap<u64, Best> = parts.iter().map(|p| (p.relations, Best { cost: 0.0, estimate: p.estimate.clone(), split: None })).collect();
    // Every proper subset of a set is a smaller number: numeric order visits subsets first.
    for set in 1..=full {
        if set.count_ones() < 2 {
            continue;
        }
        let mut chosen: Option<Best> = None;
        let mut first = (set - 1) & set;
        while first > 0 {
            let second = set ^ first;
            if first < second {
                if let (Some(a), Some(b)) = (best.get(&first), best.get(&second)) {
                    if let Some(rows) = join_rows(&a.estimate, first, &b.estimate, second, predicates) {
                        let cost = a.cost + b.cost + rows;
                        if chosen.as_ref().is_none_or(|c| cost < c.cost) {
                            let keys = equalities(first, second, predicates);
                            chosen = Some(Best { cost, estimate: a.estimate.joined(&b.estimate, rows, &keys), split: Some((first, second)) });
                        }
                    }
                }
            }
            first = (first - 1) & set;
        }
        if let Some(c) = chosen {
            best.insert(set, c);
        }
    }
    if !best.contains_key(&full) {
        return Ok(None);
    }
    let mut parts: Vec<Option<Part>> = parts.into_iter().map(Some).collect();
    build(full, &best, &mut parts, predicates).map(Some)
}

/// The plan `best` holds for `set`, built bottom up.
fn build(set: u64, best: &HashMap<u64, Best>, parts: &mut [Option<Part>], predicates: &mut [Predicate]) -> Result<Part> {
    let missing = || datafusion::error::DataFusionError::Internal(format!("join order: no plan for relations {set:b}"));
    let chosen = best.get(&set).ok_or_else(missing)?;
    match chosen.split {
        None => parts.get_mut(set.trailing_zeros() as usize).and_then(Option::take).ok_or_else(missing),
        Some((first, second)) => {
            let (a, b) = (build(first, best, parts, predicates)?, build(second, best, parts, predicates)?);
            join(a, b, chosen.estimate.rows, predicates)
        }
    }
}

/// The join keys not yet applied between the relations `a` and those `b`, oriented
/// (`a`'s side, `b`'s side).
fn equalities(a: u64, b: u64, predicates: &[Predicate]) -> Vec<(&Expr, &Expr)> {
    predicates
        .iter()
        .filter(|p| !p.used)
        .filter_map(|p| {
            let (l, r) = p.sides?;
            let Expr::BinaryExpr(BinaryExpr { left, right, .. }) = &p.expr else { return None };
            if l & !a == 0 && r & !b == 0 {
                Some((left.as_ref(), right.as_ref()))
            } else if l & !b == 0 && r & !a == 0 {
                Some((right.as_ref(), left.as_ref()))
            } else {
                None
            }
        })
        .collect()
}

/// The rows the join of relations `a` (estimated `ea`) and `b` is estimated to have;
/// None unless a join key connects them.
fn join_rows(ea: &Estimate, a: u64, eb: &Estimate, b: u64, predicates: &[Predicate]) -> Option<f64> {
    let keys = equalities(a, b, predicates);
    // The most selective key pair only (module doc: keys of one join are correlated).
    let distinct_max = keys.iter().map(|(l, r)| ea.distinct(l).max(eb.distinct(r))).reduce(f64::max)?;
    Some((ea.rows * eb.rows / distinct_max.max(1.0)).max(1.0))
}

/// `a ⋈ b` on every predicate not yet applied that reads only their columns: equalities
/// across the two as the hash join's keys, the rest as its filter. The part with fewer
/// estimated rows is the left (DataFusion builds its hash table on the left input).
fn join(a: Part, b: Part, rows: f64, predicates: &mut [Predicate]) -> Result<Part> {
    let (left, right) = if b.estimate.rows < a.estimate.rows { (b, a) } else { (a, b) };
    let both = left.relations | right.relations;
    let keys = equalities(left.relations, right.relations, predicates);
    let estimate = left.estimate.joined(&right.estimate, rows, &keys);
    let on: Vec<(Expr, Expr)> = keys.iter().map(|(l, r)| ((*l).clone(), (*r).clone())).collect();
    let key_sides = |p: &Predicate| p.sides.is_some_and(|(l, r)| (l & !left.relations == 0 && r & !right.relations == 0) || (l & !right.relations == 0 && r & !left.relations == 0));
    let mut filters = Vec::new();
    for p in predicates.iter_mut().filter(|p| !p.used && p.relations & both == p.relations) {
        p.used = true;
        if !key_sides(p) && !p.implied {
            filters.push(p.expr.clone());
        }
    }
    let join = Join::try_new(Arc::new(left.plan), Arc::new(right.plan), on, conjunction(filters), JoinType::Inner, JoinConstraint::On, NullEquality::NullEqualsNothing, false)?;
    Ok(Part { plan: LogicalPlan::Join(join), estimate, relations: both, shape: format!("({} {})", left.shape, right.shape) })
}

/// What is known of one column of a relation.
#[derive(Debug, Clone, Default)]
struct ColumnEstimate {
    distinct: Option<f64>,
    /// Bounds as numbers (integers, dates, decimals' unscaled values, floats).
    min: Option<f64>,
    max: Option<f64>,
}

/// A relation's estimated rows and what is known of its columns.
#[derive(Debug, Clone, Default)]
struct Estimate {
    rows: f64,
    columns: HashMap<Column, ColumnEstimate>,
}

impl Estimate {
    /// Distinct values of `expr` (a column): known, else the rows (as for a key).
    fn distinct(&self, expr: &Expr) -> f64 {
        let known = match expr {
            Expr::Column(c) => self.columns.get(c).and_then(|c| c.distinct),
            _ => None,
        };
        known.unwrap_or(self.rows).min(self.rows).max(1.0)
    }

    /// The estimate after a filter that keeps `share` of the rows.
    fn filtered(mut self, share: f64) -> Estimate {
        self.rows = (self.rows * share.clamp(0.0, 1.0)).max(1.0);
        let rows = self.rows;
        for c in self.columns.values_mut() {
            c.distinct = c.distinct.map(|d| d.min(rows));
        }
        self
    }

    /// The estimate of a join with `other` of `rows` rows on `keys` (this side's, the
    /// other's): a key's two columns keep the smaller distinct count.
    fn joined(&self, other: &Estimate, rows: f64, keys: &[(&Expr, &Expr)]) -> Estimate {
        let mut columns = self.columns.clone();
        columns.extend(other.columns.iter().map(|(k, v)| (k.clone(), v.clone())));
        for (l, r) in keys {
            let distinct = self.distinct(l).min(other.distinct(r));
            for e in [l, r] {
                if let Expr::Column(c) = e {
                    columns.entry(c.clone()).or_default().distinct = Some(distinct);
                }
            }
        }
        Estimate { rows, columns }.filtered(1.0)
    }

    /// The same columns under the names of `to` (by position), as an alias or a projection
    /// of columns renames them.
    fn renamed(&self, from: &LogicalPlan, to: &LogicalPlan) -> Estimate {
        let columns = from.schema().columns().into_iter().zip(to.schema().columns()).filter_map(|(f, t)| Some((t, self.columns.get(&f)?.clone()))).collect();
        Estimate { rows: self.rows, columns }
    }
}

/// `plan`'s estimated rows and columns; None when it cannot be estimated.
fn estimate(plan: &LogicalPlan) -> Option<Estimate> {
    match plan {
        LogicalPlan::TableScan(scan) => {
            let base = scan_estimate(scan)?;
            let share = selectivity_all(scan.filters.iter(), &base);
            let mut e = base.filtered(share);
            if let Some(fetch) = scan.fetch {
                e.rows = e.rows.min(fetch as f64);
            }
            Some(e)
        }
        LogicalPlan::Filter(f) => {
            // A filter the scan takes Inexact is both in the scan and above it: count it once.
            if let LogicalPlan::TableScan(scan) = f.input.as_ref() {
                let base = scan_estimate(scan)?;
                let mut conjuncts: Vec<&Expr> = scan.filters.iter().collect();
                for c in split_conjunction(&f.predicate) {
                    if !conjuncts.contains(&c) {
                        conjuncts.push(c);
                    }
                }
                let share = selectivity_all(conjuncts.into_iter(), &base);
                return Some(base.filtered(share));
            }
            let input = estimate(&f.input)?;
            let share = selectivity_all(split_conjunction(&f.predicate).into_iter(), &input);
            Some(input.filtered(share))
        }
        LogicalPlan::SubqueryAlias(a) => Some(estimate(&a.input)?.renamed(&a.input, plan)),
        LogicalPlan::Projection(p) => {
            let input = estimate(&p.input)?;
            let mut columns = HashMap::new();
            for (e, out) in p.expr.iter().zip(plan.schema().columns()) {
                let inner = match e {
                    Expr::Column(c) => Some(c),
                    Expr::Alias(a) => match a.expr.as_ref() {
                        Expr::Column(c) => Some(c),
                        _ => None,
                    },
                    _ => None,
                };
                if let Some(c) = inner.and_then(|c| input.columns.get(c)) {
                    columns.insert(out, c.clone());
                }
            }
            Some(Estimate { rows: input.rows, columns })
        }
        LogicalPlan::Aggregate(a) => {
            let input = estimate(&a.input)?;
            if a.group_expr.is_empty() {
                return Some(Estimate { rows: 1.0, columns: HashMap::new() });
            }
            // Groups: at most the product of the group columns' distinct counts.
            let groups = a.group_expr.iter().map(|g| input.distinct(g)).product::<f64>().min(input.rows);
            let mut columns = HashMap::new();
            for (g, out) in a.group_expr.iter().zip(plan.schema().columns()) {
                if let Expr::Column(c) = g {
                    if let Some(c) = input.columns.get(c) {
                        columns.insert(out, c.clone());
                    }
                }
            }
            Some(Estimate { rows: groups.max(1.0), columns }.filtered(1.0))
        }
        LogicalPlan::Distinct(_) | LogicalPlan::Sort(_) | LogicalPlan::Window(_) | LogicalPlan::Repartition(_) => {
            let input = plan.inputs().into_iter().next()?;
            Some(estimate(input)?.renamed(input, plan))
        }
        LogicalPlan::Limit(l) => {
            let mut e = estimate(&l.input)?;
            if let Ok(datafusion::logical_expr::logical_plan::FetchType::Literal(Some(n))) = l.get_fetch_type() {
                e.rows = e.rows.min(n as f64).max(1.0);
            }
            Some(e)
        }
        LogicalPlan::Join(j) => {
            let (l, r) = (estimate(&j.left)?, estimate(&j.right)?);
            match j.join_type {
                // At most the left's rows; every left row for LEFT.
                JoinType::LeftSemi | JoinType::LeftAnti | JoinType::LeftMark => Some(l.renamed(&j.left, plan)),
                JoinType::RightSemi | JoinType::RightAnti | JoinType::RightMark => Some(r.renamed(&j.right, plan)),
                _ => {
                    let distinct = j.on.iter().map(|(a, b)| l.distinct(a).max(r.distinct(b))).fold(1.0, f64::max);
                    let mut rows = l.rows * r.rows / distinct;
                    if matches!(j.join_type, JoinType::Left | JoinType::Full) {
                        rows = rows.max(l.rows);
                    }
                    if matches!(j.join_type, JoinType::Right | JoinType::Full) {
                        rows = rows.max(r.rows);
                    }
                    Some(l.joined(&r, rows.max(1.0), &[]))
                }
            }
        }
        LogicalPlan::Union(u) => {
            let rows = u.inputs.iter().map(|i| estimate(i).map(|e| e.rows)).sum::<Option<f64>>()?;
            Some(Estimate { rows, columns: HashMap::new() })
        }
        LogicalPlan::EmptyRelation(_) => Some(Estimate { rows: 1.0, columns: HashMap::new() }),
        LogicalPlan::Values(v) => Some(Estimate { rows: v.values.len().max(1) as f64, columns: HashMap::new() }),
        _ => None,
    }
}

/// A table scan's rows and columns before its filters, from the provider's statistics.
fn scan_estimate(scan: &datafusion::logical_expr::TableScan) -> Option<Estimate> {
    let provider = source_as_provider(&scan.source).ok()?;
    let statistics = provider.statistics()?;
    let rows = *statistics.num_rows.get_value()? as f64;
    let mut columns = HashMap::new();
    for (i, column) in scan.projected_schema.columns().into_iter().enumerate() {
        let source_index = scan.projection.as_ref().map_or(Some(i), |p| p.get(i).copied())?;
        let Some(s) = statistics.column_statistics.get(source_index) else { continue };
        let (min, max) = (s.min_value.get_value().and_then(number_of), s.max_value.get_value().and_then(number_of));
        let distinct = s.distinct_count.get_value().map(|&d| d as f64).or_else(|| {
            // Bounds of an integer or date column bound its distinct values.
            let integral = matches!(s.min_value.get_value(), Some(v) if v.data_type().is_integer() || matches!(v, ScalarValue::Date32(_) | ScalarValue::Date64(_)));
            match (integral, min, max) {
                (true, Some(lo), Some(hi)) => Some(hi - lo + 1.0),
                _ => None,
            }
        });
        columns.insert(column, ColumnEstimate { distinct: distinct.map(|d| d.min(rows)), min, max });
    }
    Some(Estimate { rows, columns })
}

/// A bound as a number; None for strings and other types without an order to interpolate.
fn number_of(value: &ScalarValue) -> Option<f64> {
    Some(match value {
        ScalarValue::Int8(Some(v)) => *v as f64,
        ScalarValue::Int16(Some(v)) => *v as f64,
        ScalarValue::Int32(Some(v)) => *v as f64,
        ScalarValue::Int64(Some(v)) => *v as f64,
        ScalarValue::UInt8(Some(v)) => *v as f64,
        ScalarValue::UInt16(Some(v)) => *v as f64,
        ScalarValue::UInt32(Some(v)) => *v as f64,
        ScalarValue::UInt64(Some(v)) => *v as f64,
        ScalarValue::Float32(Some(v)) => *v as f64,
        ScalarValue::Float64(Some(v)) => *v,
        ScalarValue::Date32(Some(v)) => *v as f64,
        ScalarValue::Date64(Some(v)) => *v as f64,
        // Unscaled: a column's bounds and a literal compared with it share the scale.
        ScalarValue::Decimal128(Some(v), _, _) => *v as f64,
        ScalarValue::TimestampSecond(Some(v), _) | ScalarValue::TimestampMillisecond(Some(v), _) | ScalarValue::TimestampMicrosecond(Some(v), _) | ScalarValue::TimestampNanosecond(Some(v), _) => *v as f64,
        _ => return None,
    })
}

/// The share of rows all of `conjuncts` keep, taken as independent.
fn selectivity_all<'e>(conjuncts: impl Iterator<Item = &'e Expr>, estimate: &Estimate) -> f64 {
    conjuncts.map(|c| selectivity(c, estimate)).product()
}

/// The column `expr` reads, through casts.
fn column_of(expr: &Expr) -> Option<&Column> {
    match expr {
        Expr::Column(c) => Some(c),
        Expr::Cast(c) => column_of(&c.expr),
        Expr::TryCast(c) => column_of(&c.expr),
        _ => None,
    }
}

fn literal_of(expr: &Expr) -> Option<&ScalarValue> {
    match expr {
        Expr::Literal(v, _) => Some(v),
        Expr::Cast(c) => literal_of(&c.expr),
        _ => None,
    }
}

/// The share of rows `expr` keeps (module doc).
fn selectivity(expr: &Expr, estimate: &Estimate) -> f64 {
    let share = match expr {
        Expr::BinaryExpr(BinaryExpr { left, op, right }) => match op {
            Operator::And => selectivity(left, estimate) * selectivity(right, estimate),
            Operator::Or => {
                let (a, b) = (selectivity(left, estimate), selectivity(right, estimate));
                a + b - a * b
            }
            Operator::Eq | Operator::NotEq => {
                let equal = match (column_of(left), column_of(right), literal_of(left), literal_of(right)) {
                    (Some(c), _, _, Some(_)) | (_, Some(c), Some(_), _) => 1.0 / estimate.distinct(&Expr::Column(c.clone())),
                    _ => FILTER_SELECTIVITY_UNKNOWN,
                };
                if *op == Operator::Eq { equal } else { 1.0 - equal }
            }
            Operator::Lt | Operator::LtEq | Operator::Gt | Operator::GtEq => match (column_of(left), literal_of(right), literal_of(left), column_of(right)) {
                (Some(c), Some(v), _, _) => range_share(estimate, c, *op, v),
                (_, _, Some(v), Some(c)) => range_share(estimate, c, op.swap().unwrap_or(*op), v),
                _ => None,
            }
            .unwrap_or(FILTER_SELECTIVITY_UNKNOWN),
            _ => FILTER_SELECTIVITY_UNKNOWN,
        },
        Expr::Between(b) => {
            let share = match (column_of(&b.expr), literal_of(&b.low), literal_of(&b.high)) {
                (Some(c), Some(lo), Some(hi)) => match (range_share(estimate, c, Operator::GtEq, lo), range_share(estimate, c, Operator::LtEq, hi)) {
                    (Some(a), Some(z)) => (a + z - 1.0).max(0.0),
                    _ => FILTER_SELECTIVITY_UNKNOWN,
                },
                _ => FILTER_SELECTIVITY_UNKNOWN,
            };
            if b.negated { 1.0 - share } else { share }
        }
        Expr::InList(InList { expr, list, negated }) => {
            let share = match column_of(expr) {
                Some(c) => list.len() as f64 / estimate.distinct(&Expr::Column(c.clone())),
                None => FILTER_SELECTIVITY_UNKNOWN,
            }
            .min(1.0);
            if *negated { 1.0 - share } else { share }
        }
        Expr::Not(e) => 1.0 - selectivity(e, estimate),
        Expr::IsNotNull(_) => 1.0,
        _ => FILTER_SELECTIVITY_UNKNOWN,
    };
    share.clamp(0.0, 1.0)
}

/// The share of `[min, max]` of `column` that `column op value` keeps; None without bounds.
fn range_share(estimate: &Estimate, column: &Column, op: Operator, value: &ScalarValue) -> Option<f64> {
    let c = estimate.columns.get(column)?;
    let (lo, hi, v) = (c.min?, c.max?, number_of(value)?);
    if hi <= lo {
        return None;
    }
    let below = ((v - lo) / (hi - lo)).clamp(0.0, 1.0);
    Some(match op {
        Operator::Lt | Operator::LtEq => below,
        _ => 1.0 - below,
    })
}

#[cfg(test)]
mod tests {
    use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
    use datafusion::catalog::{Session, TableProvider};
    use datafusion::common::stats::Precision;
    use datafusion::common::{ColumnStatistics, Statistics};
    use datafusion::datasource::provider_as_source;
    use datafusion::logical_expr::{col, lit, LogicalPlanBuilder, TableType};
    use datafusion::optimizer::OptimizerContext;
    use datafusion::physical_plan::ExecutionPlan;

    use super::*;

    /// A table that reports its rows and its key's bounds (nothing is scanned here).
    #[derive(Debug)]
    struct Counted {
        schema: SchemaRef,
        rows: usize,
        /// (min, max) per column.
        bounds: Vec<(i64, i64)>,
    }

    #[async_trait::async_trait]
    impl TableProvider for Counted {
        fn schema(&self) -> SchemaRef {
            self.schema.clone()
        }

        fn table_type(&self) -> TableType {
            TableType::Base
        }

        async fn scan(&self, _: &dyn Session, _: Option<&Vec<usize>>, _: &[Expr], _: Option<usize>) -> Result<Arc<dyn ExecutionPlan>> {
            Err(datafusion::error::DataFusionError::Internal("not scanned in this test".into()))
        }

        fn statistics(&self) -> Option<Statistics> {
            let mut s = Statistics::new_unknown(&self.schema).with_num_rows(Precision::Exact(self.rows));
            s.column_statistics = self
                .bounds
                .iter()
                .map(|&(lo, hi)| ColumnStatistics { min_value: Precision::Exact(ScalarValue::Int64(Some(lo))), max_value: Precision::Exact(ScalarValue::Int64(Some(hi))), ..ColumnStatistics::new_unknown() })
                .collect();
            Some(s)
        }
    }

    fn table(name: &str, columns: &[&str], rows: usize, bounds: &[(i64, i64)]) -> LogicalPlanBuilder {
        let schema = Arc::new(Schema::new(columns.iter().map(|c| Field::new(*c, DataType::Int64, false)).collect::<Vec<_>>()));
        let provider = Arc::new(Counted { schema, rows, bounds: bounds.to_vec() });
        LogicalPlanBuilder::scan(name, provider_as_source(provider), None).unwrap_or_else(|e| panic!("{e}"))
    }

    /// The relations in the order the joins take them, innermost first: `((a b) c)`.
    fn order(plan: &LogicalPlan) -> String {
        match plan {
            LogicalPlan::Join(j) => format!("({} {})", order(&j.left), order(&j.right)),
            LogicalPlan::TableScan(s) => s.table_name.to_string(),
            other => other.inputs().into_iter().map(order).collect::<Vec<_>>().join(" "),
        }
    }

    /// A fact table of 100,000 rows, a dimension of 10 keys and one of 1,000 keys filtered
    /// to one: `FROM fact, small, filtered` joins fact to small first as written; the
    /// rule joins the filtered dimension first (100 rows out instead of 100,000).
    fn star() -> LogicalPlan {
        let fact = table("fact", &["f_small", "f_filtered"], 100_000, &[(0, 9), (0, 999)]);
        let small = table("small", &["s_key"], 10, &[(0, 9)]).build().unwrap_or_else(|e| panic!("{e}"));
        let filtered = table("filtered", &["d_key", "d_tag"], 1_000, &[(0, 999), (0, 999)]).filter(col("d_tag").eq(lit(7i64))).and_then(|b| b.build()).unwrap_or_else(|e| panic!("{e}"));
        fact.join_on(small, JoinType::Inner, [col("f_small").eq(col("s_key"))])
            .and_then(|b| b.join_on(filtered, JoinType::Inner, [col("f_filtered").eq(col("d_key"))]))
            .and_then(|b| b.build())
            .unwrap_or_else(|e| panic!("{e}"))
    }

    /// `plan` with its join predicates as DataFusion's optimizer leaves them (equi keys).
    fn as_optimized(plan: LogicalPlan) -> LogicalPlan {
        let optimizer = datafusion::optimizer::Optimizer::with_rules(vec![Arc::new(datafusion::optimizer::extract_equijoin_predicate::ExtractEquijoinPredicate::new())]);
        optimizer.optimize(plan, &OptimizerContext::new(), |_, _| {}).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn the_join_that_keeps_fewest_rows_goes_first() {
        let plan = as_optimized(star());
        assert_eq!(order(&plan), "((fact small) filtered)");
        let reordered = reorder_all(plan.clone()).unwrap_or_else(|e| panic!("{e}"));
        assert!(reordered.transformed);
        // filtered (1 row estimated) ⋈ fact first, then small.
        assert_eq!(order(&reordered.data), "(small (filtered fact))", "{}", reordered.data.display_indent());
        // The columns above the tree are the original ones, in their order.
        assert_eq!(reordered.data.schema().as_ref(), plan.schema().as_ref());
        // A tree already in the chosen order is left as it is (the optimizer's later passes).
        let again = reorder_all(reordered.data.clone()).unwrap_or_else(|e| panic!("{e}"));
        assert!(!again.transformed, "{}", again.data.display_indent());
    }

    #[test]
    fn a_tree_that_cannot_be_estimated_or_is_not_connected_keeps_its_order() {
        // Two relations: JoinSelection's business.
        let two = as_optimized(table("a", &["x"], 10, &[(0, 9)]).join_on(table("b", &["y"], 5, &[(0, 4)]).build().unwrap_or_else(|e| panic!("{e}")), JoinType::Inner, [col("x").eq(col("y"))]).and_then(|b| b.build()).unwrap_or_else(|e| panic!("{e}")));
        assert!(!reorder_all(two).unwrap_or_else(|e| panic!("{e}")).transformed);
        // A cross product in the tree.
        let a = table("a", &["x"], 10, &[(0, 9)]);
        let b = table("b", &["y"], 5, &[(0, 4)]).build().unwrap_or_else(|e| panic!("{e}"));
        let c = table("c", &["z"], 7, &[(0, 6)]).build().unwrap_or_else(|e| panic!("{e}"));
        let cross = as_optimized(a.cross_join(b).and_then(|p| p.join_on(c, JoinType::Inner, [col("x").eq(col("z"))])).and_then(|p| p.build()).unwrap_or_else(|e| panic!("{e}")));
        assert!(!reorder_all(cross).unwrap_or_else(|e| panic!("{e}")).transformed);
    }

    #[test]
    fn equal_keys_imply_a_key_between_the_ends() {
        let key = |a: &str, ra: u64, b: &str, rb: u64| Predicate { expr: col(a).eq(col(b)), relations: ra | rb, sides: Some((ra, rb)), used: false, implied: false };
        // c = s, s = n (Q5): c = n is implied; nothing is implied within one relation or twice.
        let mut predicates = vec![key("c_nationkey", 1, "s_nationkey", 2), key("s_nationkey", 2, "n_nationkey", 4), key("l_suppkey", 8, "s_suppkey", 2)];
        add_implied_keys(&mut predicates);
        let implied: Vec<String> = predicates.iter().filter(|p| p.implied).map(|p| format!("{} {:?}", p.expr, p.sides)).collect();
        assert_eq!(implied, vec!["c_nationkey = n_nationkey Some((1, 4))".to_string()]);
        add_implied_keys(&mut predicates);
        assert_eq!(predicates.iter().filter(|p| p.implied).count(), 1, "an implied key is not implied again");
    }

    #[test]
    fn filters_keep_their_estimated_share() {
        let mut e = Estimate { rows: 1_000.0, columns: HashMap::new() };
        e.columns.insert(Column::from_name("k"), ColumnEstimate { distinct: Some(50.0), min: Some(0.0), max: Some(100.0) });
        let close = |a: f64, b: f64| (a - b).abs() < 1e-9;
        assert!(close(selectivity(&col("k").eq(lit(3i64)), &e), 1.0 / 50.0));
        assert!(close(selectivity(&col("k").lt(lit(25i64)), &e), 0.25));
        assert!(close(selectivity(&lit(25i64).lt(col("k")), &e), 0.75));
        assert!(close(selectivity(&col("k").between(lit(10i64), lit(20i64)), &e), 0.1));
        assert!(close(selectivity(&col("k").in_list(vec![lit(1i64), lit(2i64)], false), &e), 2.0 / 50.0));
        // Unknown column: DataFusion's default.
        assert!(close(selectivity(&col("other").lt(lit(1i64)), &e), FILTER_SELECTIVITY_UNKNOWN));
        assert!(close(selectivity(&col("k").eq(lit(1i64)).or(col("k").eq(lit(2i64))), &e), 0.02 + 0.02 - 0.0004));
    }
}
