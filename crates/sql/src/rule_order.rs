//! Where flashscan's optimizer rules go among DataFusion's: each rule's module says where
//! (`At`) and why, and registers itself through `with_physical_rule` / `with_logical_rule`.

use std::sync::Arc;

use datafusion::execution::session_state::SessionStateBuilder;
use datafusion::optimizer::OptimizerRule;
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::prelude::SessionContext;

/// A place in a list of rules, by the names of DataFusion's rules around it.
#[derive(Debug, Clone, Copy)]
pub enum At {
    /// Right before the first rule with one of these names (at the end when none is there).
    Before(&'static [&'static str]),
    /// Right after the rule with this name (at the end when it is not there).
    After(&'static str),
    End,
}

impl At {
    fn index(self, names: &[&str]) -> usize {
        let found = match self {
            At::Before(before) => names.iter().position(|n| before.contains(n)),
            At::After(after) => names.iter().position(|n| *n == after).map(|i| i + 1),
            At::End => None,
        };
        found.unwrap_or(names.len())
    }
}

/// `ctx` with the physical optimizer rule `rule` inserted `at`.
pub fn with_physical_rule(ctx: SessionContext, rule: Arc<dyn PhysicalOptimizerRule + Send + Sync>, at: At) -> SessionContext {
    let state = ctx.state();
    let mut rules = state.physical_optimizers().to_vec();
    let names: Vec<&str> = rules.iter().map(|r| r.name()).collect();
    let index = at.index(&names);
    rules.insert(index, rule);
    SessionContext::new_with_state(SessionStateBuilder::new_from_existing(state).with_physical_optimizer_rules(rules).build())
}

/// `ctx` with the logical optimizer rule `rule` inserted `at`.
pub fn with_logical_rule(ctx: SessionContext, rule: Arc<dyn OptimizerRule + Send + Sync>, at: At) -> SessionContext {
    let state = ctx.state();
    let mut rules = state.optimizers().to_vec();
    let names: Vec<&str> = rules.iter().map(|r| r.name()).collect();
    let index = at.index(&names);
    rules.insert(index, rule);
    SessionContext::new_with_state(SessionStateBuilder::new_from_existing(state).with_optimizer_rules(rules).build())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn places_are_found_by_name_and_default_to_the_end() {
        let names = ["a", "b", "c"];
        assert_eq!(At::Before(&["b", "c"]).index(&names), 1);
        assert_eq!(At::Before(&["z"]).index(&names), 3);
        assert_eq!(At::After("a").index(&names), 1);
        assert_eq!(At::After("c").index(&names), 3);
        assert_eq!(At::After("z").index(&names), 3);
        assert_eq!(At::End.index(&names), 3);
    }
}
