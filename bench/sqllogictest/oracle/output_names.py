output = "crates/server/tests/slt/flashscan/output_names.slt"
header = """# Repeated output names, which PostgreSQL allows and DataFusion 55 refuses ("Projections
# require unique expression names"): crates/sql/src/output_names.rs. Expected answers:
# PostgreSQL 15 (bench/sqllogictest/oracle.py oracle/output_names.py), never flashscan."""
setup = ["CREATE TABLE t1(a INTEGER, b INTEGER)",
 "INSERT INTO t1 VALUES (1, 10), (2, 20), (2, NULL), (NULL, 40)",
 "CREATE TABLE t2(x INTEGER)",
 "INSERT INTO t2 VALUES (5), (7)"]
cases = [
 ("two aliases alike", "II", "SELECT a AS c, b AS c FROM t1"),
 ("one column twice", "II", "SELECT a, a FROM t1"),
 ("one expression twice", "II", "SELECT a + 1, a + 1 FROM t1"),
 ("a qualified and an unqualified column of one name", "II", "SELECT t1.a, a FROM t1"),
 ("two subqueries (DataFusion names both (<subquery>))", "III", "SELECT a, (SELECT count(*) FROM t2), (SELECT max(x) FROM t2) FROM t1"),
 ("two correlated subqueries", "III", "SELECT a, (SELECT count(*) FROM t2 WHERE t2.x > t1.a), (SELECT count(*) FROM t2 WHERE t2.x < t1.b) FROM t1"),
 ("ordered by position and by a column", "III", "SELECT a AS c, b AS c, a FROM t1 WHERE a IS NOT NULL ORDER BY 1 DESC, b"),
 ("DISTINCT", "II", "SELECT DISTINCT a, a FROM t1"),
 ("with an aggregate", "II", "SELECT count(*), count(*) FROM t1"),
 ("an alias that repeats a column's name (the SQLite corpus's random/ files)", "II", "SELECT DISTINCT - b AS a, a AS a FROM t1"),
 ("the same through a table alias", "II", "SELECT b / 2 AS a, cor0.a AS a FROM t1 cor0"),
]
