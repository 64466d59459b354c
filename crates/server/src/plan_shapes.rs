//! Statements planned once per shape: the logical plan of a statement kept under its text
//! with the literals taken out, and the next statement of that shape given its own
//! literals without being parsed or planned again (issue 32 item 3, issue 29's pgbench
//! target; docs/server.md, "The fixed cost of a statement").
//!
//! `pgbench` (and most ORMs' "simple" statements) send the same statement with other
//! numbers each time: `UPDATE pgbench_accounts SET abalance = abalance + -1234 WHERE aid =
//! 5678`. Parsing it and turning the syntax tree into a logical plan (DataFusion's
//! `SqlToRel`, with flashscan's rewrites) was 15 % of the server's CPU under pgbench TPC-B
//! (perf, docs/server.md). PostgreSQL plans such a statement in about 20 µs; it has no cache
//! for the simple protocol either, but its parser and analyzer are cheaper than ours.
//!
//! The shape of a statement ([`shape_of`]) is its text with each integer that fits an
//! `i64` (with its sign, where the minus is unary) and each plain string literal replaced
//! by a marker; anything this lexer is unsure of (comments, `$`, escape strings, a string
//! after a word such as `DATE '…'` or `LIKE '…'`, decimals) either stays in the key text or
//! makes the statement unshaped. DataFusion's planner turns such a literal into exactly one
//! `Expr::Literal` (an `Int64`, a `Utf8`) and looks at nothing but its type, so the plan of
//! another statement of the same shape is the kept plan with other literal values.
//!
//! That is trusted only where it was shown ([`ShapePlan::learn`]): the first statement of a
//! shape is planned as always; then its plan must hold each of its literals exactly once
//! (in the order found: a literal the planner consumed — `ORDER BY 1`, a type's `(10, 2)`,
//! a table function's argument — or one that equals another makes the shape unkept), and
//! the statement is planned a second time with other literal values (large distinct
//! numbers, marked strings), which must give exactly the kept plan with those values put
//! in (`LogicalPlan`'s equality: every node, expression and schema). A shape that fails is
//! remembered as not kept and planned every time.
//!
//! Kept only for plans that read or write flashscan tables and nothing else (queries,
//! INSERT, UPDATE, DELETE), no subquery: a catalog table's rows (`pg_stat_activity`) may be taken while planning.
//! Valid for the connection's settings and the server's catalog generation (any DDL), as
//! the planning state itself (`planning.rs`); a table's rows and pages are found by each
//! statement's snapshot when it is planned physically, never held by the logical plan.

use std::collections::HashMap;

use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::common::{Result, ScalarValue};
use datafusion::datasource::source_as_provider;
use datafusion::logical_expr::dml::InsertOp;
use datafusion::logical_expr::{Expr, LogicalPlan, WriteOp};
use flashscan_sql::table_provider::FlashscanTable;

/// Shapes kept per connection at most (learned and refused alike); when full, further
/// shapes are planned every time.
pub const SHAPES_MAX: usize = 128;
/// Statement texts longer than this are not shaped.
pub const SHAPE_TEXT_BYTES_MAX: usize = 4096;

/// A statement's text with its literals taken out, and the literals.
#[derive(Debug, Clone, PartialEq)]
pub struct Shape {
    pub key: String,
    pub literals: Vec<Literal>,
}

/// One literal taken out of a statement's text, as DataFusion's SQL planner reads it.
#[derive(Debug, Clone, PartialEq)]
pub enum Literal {
    /// An integer that fits an `i64`, its unary minus included (`parse_sql_number`).
    Int(i64),
    /// A single-quoted string, `''` read as `'`.
    Text(String),
}

impl Literal {
    fn to_scalar(&self, as_type: &ScalarValue) -> Option<ScalarValue> {
        match (self, as_type) {
            (Literal::Int(n), ScalarValue::Int64(_)) => Some(ScalarValue::Int64(Some(*n))),
            (Literal::Text(s), ScalarValue::Utf8(_)) => Some(ScalarValue::Utf8(Some(s.clone()))),
            (Literal::Text(s), ScalarValue::Utf8View(_)) => Some(ScalarValue::Utf8View(Some(s.clone()))),
            (Literal::Text(s), ScalarValue::LargeUtf8(_)) => Some(ScalarValue::LargeUtf8(Some(s.clone()))),
            _ => None,
        }
    }

    /// The same kind of literal, a value no client is likely to write (the second
    /// planning of `learn`): numbers beyond any `INT`, strings with a control character.
    fn probe(&self, i: usize) -> Literal {
        match self {
            Literal::Int(_) => Literal::Int(7_919_000_000_000 + i as i64),
            Literal::Text(_) => Literal::Text(format!("\u{1}shape probe {i}")),
        }
    }

    fn to_sql(&self) -> String {
        match self {
            Literal::Int(n) => n.to_string(),
            Literal::Text(s) => format!("'{}'", s.replace('\'', "''")),
        }
    }
}

/// The marker of a literal in a shape's key (NUL never appears in a statement's text: the
/// protocol ends its strings with it).
const INT_MARK: &str = "\u{0}i";
const TEXT_MARK: &str = "\u{0}s";

/// The shape of `sql` (see the module comment), or `None` when this lexer does not read it
/// with certainty.
pub fn shape_of(sql: &str) -> Option<Shape> {
    if sql.len() > SHAPE_TEXT_BYTES_MAX || sql.contains('\u{0}') {
        return None;
    }
    #[derive(Clone, Copy, PartialEq)]
    enum Prev {
        /// Start of text, an operator, `(`, `,`: a `-` after it is unary.
        Operator,
        /// A word, number, quoted name, string or `)`: a `-` after it is binary, a string
        /// after a word may be typed by it (`DATE '…'`, `LIKE '…'`).
        Word,
        Value,
    }
    let bytes = sql.as_bytes();
    let mut key = String::with_capacity(sql.len());
    let mut literals = Vec::new();
    let mut prev = Prev::Operator;
    // The key ends with a minus read as unary (only spaces skipped since).
    let mut unary_minus = false;
    // The last token was a string: another right after it is one string in PostgreSQL's
    // grammar (across a newline), or an error.
    let mut last_string = false;
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        let was_unary_minus = std::mem::take(&mut unary_minus);
        let was_string = std::mem::take(&mut last_string);
        match c {
            b' ' | b'\t' | b'\n' | b'\r' => {
                last_string = was_string;
                // Runs of white space are one space: the same statement typed twice keys once.
                if !key.ends_with(' ') && !key.is_empty() {
                    key.push(' ');
                }
                i += 1;
            }
            b'a'..=b'z' | b'A'..=b'Z' | b'_' => {
                let start = i;
                while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                    i += 1;
                }
                // A prefixed string (E'…', B'…', X'…', N'…', U&'…') is not read here.
                if i < bytes.len() && (bytes[i] == b'\'' || bytes[i] == b'&') {
                    return None;
                }
                key.push_str(&sql[start..i]);
                prev = Prev::Word;
            }
            b'"' => {
                let start = i;
                i += 1;
                loop {
                    match bytes.get(i) {
                        None => return None,
                        Some(b'"') if bytes.get(i + 1) == Some(&b'"') => i += 2,
                        Some(b'"') => {
                            i += 1;
                            break;
                        }
                        Some(_) => i += 1,
                    }
                }
                key.push_str(&sql[start..i]);
                prev = Prev::Word;
            }
            b'\'' => {
                if was_string {
                    return None;
                }
                last_string = true;
                let start = i;
                i += 1;
                let mut text = String::new();
                let mut run = i;
                loop {
                    match bytes.get(i) {
                        None => return None,
                        Some(b'\'') if bytes.get(i + 1) == Some(&b'\'') => {
                            text.push_str(&sql[run..=i]);
                            i += 2;
                            run = i;
                        }
                        Some(b'\'') => {
                            text.push_str(&sql[run..i]);
                            i += 1;
                            break;
                        }
                        Some(_) => i += 1,
                    }
                }
                if prev == Prev::Word || text.contains('\\') {
                    key.push_str(&sql[start..i]);
                } else {
                    key.push_str(TEXT_MARK);
                    literals.push(Literal::Text(text));
                }
                prev = Prev::Value;
            }
            b'0'..=b'9' => {
                let start = i;
                while i < bytes.len() && bytes[i].is_ascii_digit() {
                    i += 1;
                }
                // `1.5`, `1e5`, `0x1F`, `1_000`, `5abc`: not an integer literal read here.
                if i < bytes.len() && (bytes[i] == b'.' || bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                    return None;
                }
                // The sign written just before it, when it is a unary minus (the planner
                // folds it into the literal).
                let signed = was_unary_minus;
                let digits = &sql[start..i];
                let value = if signed { format!("-{digits}").parse::<i64>() } else { digits.parse::<i64>() };
                match value {
                    Ok(n) => {
                        if signed {
                            key.pop();
                        }
                        key.push_str(INT_MARK);
                        literals.push(Literal::Int(n));
                    }
                    // Beyond i64: planned as UInt64 or a decimal; kept in the key.
                    Err(_) => key.push_str(digits),
                }
                prev = Prev::Value;
            }
            // A parameter (`$1`) stays in the key: the extended protocol's unnamed statements
            // send the same text each time. Dollar quoting (`$$…$$`, `$tag$`) is not read.
            b'$' => {
                let start = i;
                i += 1;
                while i < bytes.len() && bytes[i].is_ascii_digit() {
                    i += 1;
                }
                if i == start + 1 || (i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_' || bytes[i] == b'$')) {
                    return None;
                }
                key.push_str(&sql[start..i]);
                prev = Prev::Value;
            }
            b'-' if bytes.get(i + 1) == Some(&b'-') => return None,
            b'/' if bytes.get(i + 1) == Some(&b'*') => return None,
            b'.' if bytes.get(i + 1).is_some_and(|b| b.is_ascii_digit()) => return None,
            b'-' => {
                // Spaces between a unary minus and its number are dropped (the planner
                // folds `- 5` as `-5`), so the sign sits right before the digits.
                let unary = prev == Prev::Operator;
                // `- -1` must not become `--1` in the key (a comment once printed).
                if key.ends_with('-') {
                    key.push(' ');
                }
                key.push('-');
                i += 1;
                if unary {
                    while i < bytes.len() && bytes[i].is_ascii_whitespace() {
                        i += 1;
                    }
                }
                prev = Prev::Operator;
                unary_minus = unary;
                continue;
            }
            b')' | b']' => {
                key.push(c as char);
                prev = Prev::Value;
                i += 1;
            }
            c if c.is_ascii() => {
                key.push(c as char);
                prev = Prev::Operator;
                i += 1;
            }
            _ => {
                // Non-ASCII outside strings and quoted names: copied (an identifier).
                let ch = sql[i..].chars().next()?;
                key.push(ch);
                prev = Prev::Word;
                i += ch.len_utf8();
            }
        }
    }
    while key.ends_with(' ') || key.ends_with(';') {
        key.pop();
    }
    Some(Shape { key, literals })
}

/// How a statement of one shape is planned.
#[derive(Debug, Clone)]
pub enum ShapeEntry {
    Learned(ShapePlan),
    /// Planned every time (see the module comment for why a shape is refused).
    Refused,
}

/// Why a shape was not learned from one statement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotLearned {
    /// The shape does not plan the same with other literals: planned every time.
    Shape,
    /// This statement's literals cannot be told apart in its plan: the next statement of
    /// the shape is tried.
    Statement,
}

/// A shape's logical plan, and where each of its literals sits in it.
#[derive(Debug, Clone)]
pub struct ShapePlan {
    plan: LogicalPlan,
    /// Per literal of the shape, in order: its occurrence (`map_literals`' count) in `plan`,
    /// and the value found there (its type is the one given to the next statement's).
    slots: Vec<(usize, ScalarValue)>,
}

/// Calls `f` with each literal of `plan` in one fixed order (nodes bottom-up, each node's
/// expressions in order, each expression top-down), replacing those for which it returns
/// a value; a node whose expressions changed gets its schema computed again (its output
/// names may hold the literal), and so does every node after it. A projection whose changed
/// expressions are all aliased keeps its schema: its names are the aliases and a literal of
/// the same type gives the same types.
fn map_literals(plan: LogicalPlan, f: &mut dyn FnMut(usize, &ScalarValue) -> Option<ScalarValue>) -> Result<LogicalPlan> {
    let mut seen = 0usize;
    let mut schemas_changed = false;
    let out = plan.transform_up(|node| {
        let mut changed_unaliased = false;
        let mapped = node.map_expressions(|e| {
            let aliased = matches!(e, Expr::Alias(_));
            let t = e.transform_down(|x| match x {
                Expr::Literal(value, meta) => {
                    let n = seen;
                    seen += 1;
                    match f(n, &value) {
                        Some(v) => Ok(Transformed::yes(Expr::Literal(v, meta))),
                        None => Ok(Transformed::no(Expr::Literal(value, meta))),
                    }
                }
                other => Ok(Transformed::no(other)),
            })?;
            if t.transformed && !aliased {
                changed_unaliased = true;
            }
            Ok(t)
        })?;
        let keeps_schema = match &mapped.data {
            LogicalPlan::Projection(_) => !changed_unaliased,
            // A filter's schema is its input's.
            LogicalPlan::Filter(_) => true,
            _ => !mapped.transformed,
        };
        if schemas_changed || !keeps_schema {
            schemas_changed = true;
            return Ok(Transformed::yes(mapped.data.recompute_schema()?));
        }
        Ok(mapped)
    })?;
    Ok(out.data)
}

/// Whether a plan may be kept by shape: it reads or writes flashscan tables only (at least
/// one), and has no subquery.
fn keepable(plan: &LogicalPlan) -> bool {
    let mut tables = 0usize;
    let mut ok = true;
    let _ = plan.apply(|node| {
        match node {
            LogicalPlan::TableScan(scan) => {
                if source_as_provider(&scan.source).ok().is_some_and(|p| p.downcast_ref::<FlashscanTable>().is_some()) {
                    tables += 1;
                } else {
                    ok = false;
                }
            }
            LogicalPlan::Subquery(_)
            | LogicalPlan::Extension(_)
            | LogicalPlan::Statement(_)
            | LogicalPlan::Ddl(_)
            | LogicalPlan::Copy(_)
            | LogicalPlan::DescribeTable(_)
            | LogicalPlan::Explain(_)
            | LogicalPlan::Analyze(_) => ok = false,
            // INSERT, UPDATE, DELETE of a flashscan table (pgbench's history INSERT was
            // parsed and planned every time; its rows then take the fast path).
            LogicalPlan::Dml(d) => {
                let writes = matches!(d.op, WriteOp::Update | WriteOp::Delete | WriteOp::Insert(InsertOp::Append));
                if writes && source_as_provider(&d.target).ok().is_some_and(|p| p.downcast_ref::<FlashscanTable>().is_some()) {
                    tables += 1;
                } else {
                    ok = false;
                }
            }
            _ => {}
        }
        let _ = node.apply_expressions(|e| {
            // A parameter (`$1`) is kept as planned: bound later, as in a fresh plan.
            if e.exists(|x| Ok(matches!(x, Expr::ScalarSubquery(_) | Expr::InSubquery(_) | Expr::Exists(_) | Expr::SetComparison(_) | Expr::OuterReferenceColumn(..))))
                .unwrap_or(true)
            {
                ok = false;
            }
            Ok(TreeNodeRecursion::Continue)
        });
        Ok(if ok { TreeNodeRecursion::Continue } else { TreeNodeRecursion::Stop })
    });
    ok && tables > 0
}

impl ShapePlan {
    /// The kept plan with `literals` (the next statement's, same shape) put in; `None` if
    /// one does not fit its slot's type (planned normally then).
    pub fn bind(&self, literals: &[Literal]) -> Option<Result<LogicalPlan>> {
        if literals.len() != self.slots.len() {
            return None;
        }
        let mut at: Vec<(usize, ScalarValue)> = Vec::with_capacity(literals.len());
        for (literal, (occurrence, found)) in literals.iter().zip(&self.slots) {
            at.push((*occurrence, literal.to_scalar(found)?));
        }
        at.sort_by_key(|(o, _)| *o);
        let mut next = 0usize;
        Some(map_literals(self.plan.clone(), &mut |n, _| {
            if at.get(next).is_some_and(|(o, _)| *o == n) {
                next += 1;
                Some(at[next - 1].1.clone())
            } else {
                None
            }
        }))
    }

    /// Learns `shape` from `plan`, the plan of the statement it was read from, checked
    /// against `plan_again`: the planning of the shape's text with other literals (see the
    /// module comment).
    pub async fn learn<F, Fut>(shape: &Shape, plan: &LogicalPlan, plan_again: F) -> Result<ShapePlan, NotLearned>
    where
        F: FnOnce(String) -> Fut,
        Fut: std::future::Future<Output = Option<LogicalPlan>>,
    {
        if !keepable(plan) {
            return Err(NotLearned::Shape);
        }
        // Every literal of the plan, in map_literals' order.
        let mut found: Vec<ScalarValue> = Vec::new();
        map_literals(plan.clone(), &mut |_, v| {
            found.push(v.clone());
            None
        })
        .map_err(|_| NotLearned::Shape)?;
        let mut slots = Vec::with_capacity(shape.literals.len());
        for literal in &shape.literals {
            let mut at = found.iter().enumerate().filter(|(_, v)| literal.to_scalar(v).as_ref() == Some(*v));
            // Not in the plan: the planner consumed it (`ORDER BY 1`, `DECIMAL(10, 2)`).
            let (occurrence, value) = at.next().ok_or(NotLearned::Shape)?;
            // Twice: two literals of this statement are equal, or equal one the planner
            // made (`count(*)` counts `1`); another statement of the shape may tell.
            if at.next().is_some() {
                return Err(NotLearned::Statement);
            }
            slots.push((occurrence, value.clone()));
        }
        let mut occurrences: Vec<usize> = slots.iter().map(|(o, _)| *o).collect();
        occurrences.sort_unstable();
        occurrences.dedup();
        if occurrences.len() != slots.len() {
            return Err(NotLearned::Statement);
        }
        let learned = ShapePlan { plan: plan.clone(), slots };
        let probes: Vec<Literal> = shape.literals.iter().enumerate().map(|(i, l)| l.probe(i)).collect();
        let probed = learned.bind(&probes).and_then(|p| p.ok()).ok_or(NotLearned::Shape)?;
        let again = plan_again(text_of(&shape.key, &probes).ok_or(NotLearned::Shape)?).await.ok_or(NotLearned::Shape)?;
        if again != probed {
            return Err(NotLearned::Shape);
        }
        Ok(learned)
    }
}

/// The statement text of `key` with `literals` put at its markers.
pub fn text_of(key: &str, literals: &[Literal]) -> Option<String> {
    let mut out = String::with_capacity(key.len() + 16 * literals.len());
    let mut rest = key;
    let mut literals = literals.iter();
    while let Some(at) = rest.find('\u{0}') {
        out.push_str(&rest[..at]);
        let mark = rest.get(at..at + 2)?;
        debug_assert!(mark.len() == 2, "markers are NUL and one ASCII letter");
        let literal = literals.next()?;
        match (mark, literal) {
            (INT_MARK, Literal::Int(_)) | (TEXT_MARK, Literal::Text(_)) => {
                let sql = literal.to_sql();
                // `- -5` read as `-` and -5 must not print as `--5`, a comment.
                if out.ends_with('-') && sql.starts_with('-') {
                    out.push(' ');
                }
                out.push_str(&sql);
            }
            _ => return None,
        }
        rest = &rest[at + 2..];
    }
    out.push_str(rest);
    literals.next().is_none().then_some(out)
}

/// A connection's shapes (valid for one settings and generation: `planning.rs` clears them
/// with the planning state).
#[derive(Default, Debug)]
pub struct Shapes {
    by_key: HashMap<String, ShapeEntry>,
}

impl Shapes {
    pub fn get(&self, key: &str) -> Option<&ShapeEntry> {
        self.by_key.get(key)
    }

    /// Keeps `entry` for `key` if there is room.
    pub fn keep(&mut self, key: &str, entry: ShapeEntry) {
        if self.by_key.len() < SHAPES_MAX || self.by_key.contains_key(key) {
            self.by_key.insert(key.to_string(), entry);
        }
    }

    pub fn clear(&mut self) {
        self.by_key.clear();
    }

    pub fn len(&self) -> usize {
        self.by_key.len()
    }

    /// No room for another shape: a statement of a shape not kept is planned once, not
    /// learned (learning plans it twice).
    pub fn is_full(&self) -> bool {
        self.by_key.len() >= SHAPES_MAX
    }

    pub fn is_empty(&self) -> bool {
        self.by_key.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shape of `sql`, its markers shown as `$i` and `$s`.
    fn shape(sql: &str) -> (String, Vec<Literal>) {
        let s = shape_of(sql).unwrap_or_else(|| panic!("{sql}: not shaped"));
        (s.key.replace(INT_MARK, "$i").replace(TEXT_MARK, "$s"), s.literals)
    }

    #[test]
    fn pgbench_statements_take_their_numbers_out() {
        let (key, literals) = shape("UPDATE pgbench_accounts SET abalance = abalance + -1234 WHERE aid = 5678;");
        assert_eq!(key, "UPDATE pgbench_accounts SET abalance = abalance + $i WHERE aid = $i");
        assert_eq!(literals, vec![Literal::Int(-1234), Literal::Int(5678)]);
        let (key2, _) = shape("UPDATE pgbench_accounts SET abalance = abalance + 17 WHERE aid = 1;");
        assert_eq!(key, key2, "one shape whatever the sign");
        assert_eq!(shape("SELECT abalance FROM pgbench_accounts WHERE aid = 42").0, "SELECT abalance FROM pgbench_accounts WHERE aid = $i");
    }

    #[test]
    fn a_minus_after_a_value_is_an_operator() {
        assert_eq!(shape("SELECT a -1 FROM t").1, vec![Literal::Int(1)]);
        assert_eq!(shape("SELECT a - - 1 FROM t"), ("SELECT a - $i FROM t".to_string(), vec![Literal::Int(-1)]));
        assert_eq!(shape("SELECT (1) - 2").1, vec![Literal::Int(1), Literal::Int(2)]);
        assert_eq!(shape("SELECT x FROM t WHERE k = -9223372036854775808").1, vec![Literal::Int(i64::MIN)]);
    }

    #[test]
    fn strings_after_a_word_and_numbers_beyond_i64_stay_in_the_key() {
        let (key, literals) = shape("SELECT k FROM t WHERE d = DATE '2020-01-01' AND s = 'it''s' AND s LIKE 'a%'");
        assert_eq!(key, "SELECT k FROM t WHERE d = DATE '2020-01-01' AND s = $s AND s LIKE 'a%'");
        assert_eq!(literals, vec![Literal::Text("it's".into())]);
        assert_eq!(shape("SELECT k FROM t WHERE k = 9223372036854775808"), ("SELECT k FROM t WHERE k = 9223372036854775808".to_string(), vec![]));
        assert_eq!(shape("SELECT \"a 'b'\" FROM t WHERE x = 'c'").0, "SELECT \"a 'b'\" FROM t WHERE x = $s");
    }

    #[test]
    fn what_the_lexer_cannot_read_surely_is_not_shaped() {
        for sql in [
            "SELECT 1.5",
            "SELECT .5",
            "SELECT 1e5",
            "SELECT $$a$$",
            "SELECT $tag$a$tag$",
            "SELECT $ 1",
            "SELECT 'a\u{0}'",
            "SELECT E'a\\n'",
            "SELECT x FROM t -- note",
            "SELECT /* note */ x FROM t",
            "SELECT x FROM t WHERE s = 'a' 'b'",
            "SELECT x FROM t WHERE s = 'unterminated",
            "SELECT 1_000",
            "SELECT 0x1F",
        ] {
            assert_eq!(shape_of(sql), None, "{sql}");
        }
    }

    #[test]
    fn a_shape_prints_back_with_other_literals() {
        let Shape { key, literals } = shape_of("UPDATE t SET s = 'a''b' WHERE k IN (-1,  2) AND j = $1").expect("shaped");
        assert_eq!(text_of(&key, &literals).as_deref(), Some("UPDATE t SET s = 'a''b' WHERE k IN (-1, 2) AND j = $1"));
        let probes: Vec<Literal> = literals.iter().enumerate().map(|(i, l)| l.probe(i)).collect();
        let again = shape_of(&text_of(&key, &probes).expect("text")).expect("shaped");
        assert_eq!(again.key, key);
        assert_eq!(again.literals, probes);
        assert_eq!(text_of(&key, &literals[..1]), None, "one literal per marker");
    }

    #[test]
    fn parameters_stay_in_the_key() {
        assert_eq!(shape("SELECT * FROM t WHERE id = $1 AND v > 5"), ("SELECT * FROM t WHERE id = $1 AND v > $i".to_string(), vec![Literal::Int(5)]));
        assert_eq!(shape("SELECT $12-1").1, vec![Literal::Int(1)], "a minus after a parameter is an operator");
    }
}

#[cfg(test)]
mod properties {
    use proptest::prelude::*;

    use super::*;

    /// One token of a statement the lexer should read: words, quoted names, operators,
    /// integers (some negative, some beyond i64), strings with quotes inside.
    fn token() -> impl Strategy<Value = String> {
        prop_oneof![
            prop::sample::select(vec!["SELECT", "a", "t.k", "FROM", "WHERE", "AND", "IN", "LIMIT", "x_1"]).prop_map(str::to_string),
            "[a-z ]{0,6}".prop_map(|s| format!("\"{s}\"")),
            prop::sample::select(vec!["=", "+", "-", "*", "(", ")", ",", "<", ">=", "||", "::", ";", "$1", "$12"]).prop_map(str::to_string),
            any::<i64>().prop_map(|n| n.to_string()),
            (0u64..u64::MAX).prop_map(|n| format!("{n}0")),
            "[a-z' %é]{0,8}".prop_map(|s| format!("'{}'", s.replace('\'', "''"))),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(20_000))]

        /// A shape prints back to a text of the same shape with the same literals (the
        /// probe planning of `learn` relies on it), and has one literal per marker.
        #[test]
        fn a_shape_prints_back_to_itself(tokens in prop::collection::vec(token(), 0..16), spaces in prop::collection::vec(0usize..3, 16)) {
            let sql: String = tokens.iter().zip(spaces.iter().cycle()).map(|(t, s)| format!("{}{t}", " ".repeat(*s))).collect();
            if let Some(shape) = shape_of(&sql) {
                prop_assert_eq!(shape.key.matches('\u{0}').count(), shape.literals.len());
                let text = text_of(&shape.key, &shape.literals).expect("one literal per marker");
                let again = shape_of(&text).expect("a printed shape is read");
                prop_assert_eq!(&again.key, &shape.key, "text {:?} from {:?}", text, sql);
                prop_assert_eq!(&again.literals, &shape.literals);
            }
        }
    }
}
