//! Parameters (`$1`, `$2` …) bound into a planned statement: what every execution of a
//! prepared statement does (issue 32 item 3, issue 29's point-read target).
//!
//! DataFusion's `LogicalPlan::with_param_values` infers placeholder types in every
//! expression of every node, then computes every node's schema again — for a statement
//! planned at Parse whose placeholders are typed already. Profiled on `flashscan serve`
//! under prepared key lookups (`SELECT * FROM t WHERE id = $1`), it was 10 % of the
//! server's CPU (docs/benchmarks.md, session 21). [`bind_parameters`] does the same
//! substitution and keeps every schema as it is, which holds when nothing a schema is made
//! of changes: each value has its placeholder's type (so every expression keeps its type),
//! and each rewritten expression keeps its name (restored by an alias, as DataFusion does).
//! Any other case — an untyped placeholder, a value of another type, a subquery (whose
//! plan a node walk does not enter), a `PREPARE` node — is left to DataFusion's own.

use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{ParamValues, Result};
use datafusion::logical_expr::expr::Placeholder;
use datafusion::logical_expr::expr_rewriter::NamePreserver;
use datafusion::logical_expr::{Expr, LogicalPlan};

/// `plan` with `values` put in place of its placeholders, its schemas unchanged; `None`
/// when that cannot be shown (see the module comment): the caller binds with
/// `with_param_values` then, which also reports a missing value.
pub fn bind_parameters(plan: &LogicalPlan, values: &ParamValues) -> Option<LogicalPlan> {
    if matches!(plan, LogicalPlan::Statement(_)) {
        return None;
    }
    let mut fits = true;
    let bound = plan
        .clone()
        .transform_up(|node| {
            if !fits {
                return Ok(Transformed::no(node));
            }
            let names = NamePreserver::new(&node);
            node.map_expressions(|e| {
                let mut placeholders = false;
                e.apply(|x| {
                    match x {
                        Expr::Placeholder(_) => placeholders = true,
                        Expr::ScalarSubquery(_) | Expr::InSubquery(_) | Expr::Exists(_) | Expr::SetComparison(_) => fits = false,
                        _ => {}
                    }
                    Ok(datafusion::common::tree_node::TreeNodeRecursion::Continue)
                })?;
                if !placeholders || !fits {
                    return Ok(Transformed::no(e));
                }
                let saved = names.save(&e);
                let replaced = e.transform_up(|x| match x {
                    Expr::Placeholder(Placeholder { id, field }) => {
                        let Ok(value) = values.get_placeholders_with_values(&id) else {
                            fits = false;
                            return Ok(Transformed::no(Expr::Placeholder(Placeholder { id, field })));
                        };
                        let (value, metadata) = value.into_inner();
                        if field.as_ref().map(|f| f.data_type()) != Some(&value.data_type()) {
                            fits = false;
                        }
                        Ok(Transformed::yes(Expr::Literal(value, metadata)))
                    }
                    other => Ok(Transformed::no(other)),
                })?;
                Ok(replaced.update_data(|e| saved.restore(e)))
            })
        })
        .ok()?;
    fits.then_some(bound.data)
}

/// `plan` with `values` bound: by [`bind_parameters`] when it can, else by DataFusion.
pub fn bind(plan: &LogicalPlan, values: ParamValues) -> Result<LogicalPlan> {
    match bind_parameters(plan, &values) {
        Some(bound) => Ok(bound),
        None => plan.clone().with_param_values(values),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::common::ScalarValue;
    use datafusion::prelude::SessionContext;

    async fn context() -> SessionContext {
        let ctx = SessionContext::new();
        ctx.sql("CREATE TABLE t (id BIGINT, name VARCHAR, v BIGINT) AS VALUES (1, 'a', 10), (2, 'b', 20)").await.unwrap();
        ctx
    }

    /// The plan bound here equals DataFusion's binding of it, node for node and schema for
    /// schema, for statements of each kind a client prepares.
    #[tokio::test]
    async fn binding_equals_datafusions() {
        let ctx = context().await;
        let cases: [(&str, Vec<ScalarValue>); 6] = [
            ("SELECT * FROM t WHERE id = $1", vec![ScalarValue::Int64(Some(2))]),
            ("SELECT name, v + $2 AS w FROM t WHERE id = $1", vec![ScalarValue::Int64(Some(1)), ScalarValue::Int64(Some(5))]),
            ("SELECT v + $1 FROM t", vec![ScalarValue::Int64(Some(3))]),
            ("SELECT id FROM t WHERE name = $1 ORDER BY id LIMIT 2", vec![ScalarValue::Utf8View(Some("b".into()))]),
            ("SELECT count(*) FROM t WHERE v > $1 GROUP BY name", vec![ScalarValue::Int64(Some(10))]),
            ("SELECT * FROM t WHERE id = $1", vec![ScalarValue::Int64(None)]),
        ];
        for (sql, values) in cases {
            let plan = ctx.state().create_logical_plan(sql).await.unwrap();
            let values = ParamValues::from(values);
            let ours = bind_parameters(&plan, &values).unwrap_or_else(|| panic!("not bound: {sql}"));
            let theirs = plan.clone().with_param_values(values).unwrap();
            assert_eq!(ours, theirs, "{sql}");
            assert_eq!(ours.schema(), theirs.schema(), "{sql}");
        }
    }

    /// A value of another type than its placeholder's, a missing value or a subquery: left
    /// to DataFusion (which casts, reports, or enters the subquery).
    #[tokio::test]
    async fn what_cannot_be_shown_is_left_to_datafusion() {
        let ctx = context().await;
        let plan = ctx.state().create_logical_plan("SELECT * FROM t WHERE id = $1").await.unwrap();
        assert!(bind_parameters(&plan, &ParamValues::from(vec![ScalarValue::Int32(Some(1))])).is_none());
        assert!(bind_parameters(&plan, &ParamValues::from(Vec::<ScalarValue>::new())).is_none());
        let plan = ctx.state().create_logical_plan("SELECT * FROM t WHERE id IN (SELECT id FROM t WHERE v = $1)").await.unwrap();
        assert!(bind_parameters(&plan, &ParamValues::from(vec![ScalarValue::Int64(Some(10))])).is_none());
    }
}
