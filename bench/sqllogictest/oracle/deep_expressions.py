output = "crates/server/tests/slt/flashscan/deep_expressions.slt"
header = """# Deeply nested expressions, which DataFusion's parser stops at 50 levels by default
# ("recursion limit exceeded"); flashscan takes flashscan_sql::SQL_NESTING_DEPTH_MAX levels
# on threads of SQL_THREAD_STACK_BYTES of stack. Expected answers: PostgreSQL 15
# (bench/sqllogictest/oracle.py oracle/deep_expressions.py), never flashscan."""
setup = ["CREATE TABLE t1(a INTEGER, b INTEGER)",
 "INSERT INTO t1 VALUES (1, 10), (2, 20), (3, NULL), (NULL, 40), (5, 3)"]


def predicate(depth):
    e = "a > 0"
    for i in range(depth):
        e = f"({e} {'AND' if i % 2 else 'OR'} b <> {i})"
    return e


def arithmetic(depth):
    e = "a"
    for i in range(depth):
        e = f"({e} + {i % 3})"
    return e


cases = [
 ("34 levels, as in the SQLite corpus's index/ files", "I", f"SELECT count(*) FROM t1 WHERE {predicate(34)}"),
 ("100 levels of AND/OR", "II", f"SELECT a, b FROM t1 WHERE {predicate(100)}"),
 ("200 levels of AND/OR", "I", f"SELECT count(*) FROM t1 WHERE {predicate(200)}"),
 ("200 levels of arithmetic in a select list", "I", f"SELECT {arithmetic(200)} FROM t1"),
 ("a deep predicate inside a correlated subquery", "II", f"SELECT a, (SELECT count(*) FROM t1 AS x WHERE x.a < t1.a AND {predicate(60).replace('a >', 'x.a >').replace('b <>', 'x.b <>')}) FROM t1"),
]
