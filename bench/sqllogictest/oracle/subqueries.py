header = """# Subqueries in a SELECT list and WHERE clause that DataFusion 55 does not decorrelate by
# itself (crates/sql/src/subquery_by_domain.rs). Expected answers: PostgreSQL 15
# (bench/sqllogictest/oracle.py oracle/subqueries.py), never flashscan.
"""
setup = ["CREATE TABLE t1(a INTEGER, b INTEGER, c INTEGER)",
 "INSERT INTO t1 VALUES (1, 10, 100), (2, 20, NULL), (3, NULL, 300), (3, NULL, 300), (4, 40, 400), (NULL, 50, 500)",
 "CREATE TABLE t2(x INTEGER, y INTEGER)",
 "INSERT INTO t2 VALUES (1, 5), (2, 15), (2, 25), (NULL, 35), (4, NULL)"]
cases = [
 ("a correlated count over a non-equal correlation; duplicate outer rows keep their multiplicity", "II", "SELECT a, (SELECT count(*) FROM t1 AS x WHERE x.b < t1.b) FROM t1"),
 ("two correlated columns", "II", "SELECT a, (SELECT count(*) FROM t1 AS x WHERE x.c > t1.c AND x.b < t1.b) FROM t1"),
 ("sum over no rows is NULL, count is 0", "II", "SELECT a, (SELECT sum(y) FROM t2 WHERE t2.x < t1.a) FROM t1"),
 ("a correlation under OR", "II", "SELECT a, (SELECT max(y) FROM t2 WHERE t2.x = t1.a OR t2.y > t1.b) FROM t1"),
 ("inside CASE, an average", "IT", "SELECT a, CASE WHEN b > (SELECT avg(b) FROM t1 AS x WHERE x.a <> t1.a) THEN 'over' ELSE 'not' END FROM t1"),
 ("in WHERE", "II", "SELECT a, b FROM t1 WHERE (SELECT count(*) FROM t2 WHERE t2.x <= t1.a) >= 3"),
 ("EXISTS in a SELECT list", "IT", "SELECT a, EXISTS (SELECT 1 FROM t2 WHERE t2.x > t1.a) FROM t1"),
 ("NOT EXISTS in a SELECT list", "IT", "SELECT a, NOT EXISTS (SELECT 1 FROM t2 WHERE t2.y < t1.b) FROM t1"),
 ("IN with a NULL in the set: true, NULL, never false", "IT", "SELECT a, a IN (SELECT x FROM t2) FROM t1"),
 ("NOT IN without NULLs in the set", "IT", "SELECT a, a NOT IN (SELECT x FROM t2 WHERE x IS NOT NULL) FROM t1"),
 ("a correlated IN", "IT", "SELECT a, b IN (SELECT y FROM t2 WHERE t2.x < t1.a) FROM t1"),
 ("two subqueries in one expression", "II", "SELECT a, (SELECT count(*) FROM t2 WHERE t2.x < t1.a) + (SELECT count(*) FROM t2 WHERE t2.x > t1.a) FROM t1"),
 ("under an aggregate of the outer query", "II", "SELECT count(*), sum((SELECT count(*) FROM t1 AS x WHERE x.b < t1.b)) FROM t1"),
 ("the SQLite corpus's shape, with a HAVING-free average beside it", "IIR", "SELECT a, (SELECT count(*) FROM t1 AS x WHERE x.c > t1.c AND x.a < t1.a), (SELECT avg(c) FROM t1) FROM t1"),
]
output = "crates/server/tests/slt/flashscan/subqueries.slt"
