#!/usr/bin/env python3
"""bench/tpch/operators.py: one TPC-H query's joins and aggregates side by side, flashscan
against DataFusion-Python on the same Parquet files, operator by operator.

Runs `EXPLAIN ANALYZE` of the query alternately in `flashscan sql` (a new process each
round, as run.py times it) and in DataFusion-Python (a new context each round,
`target_partitions` = 2 like flashscan on two cores), and prints, per engine, the median
`elapsed_compute` of each AggregateExec and HashJoinExec in plan order (top first) and the
median process CPU of the flashscan runs (user and system).

`elapsed_compute` is wall time inside the operator: an operator that runs while the scan's
decode threads run beside DataFusion's workers (flashscan) or while other processes run
counts the time it waited for a core. Compare within one run, and read the CPU beside it.

    python3 bench/tpch/operators.py --query 16 --rounds 7 --sf 10 \\
        --flashscan /work/bench-bin/q16/flashscan --db /work/bench-data/sf10/flashscan-tpch-sf10-columnstore \\
        --parquet /work/bench-data/sf10/tpch-parquet-sf10 [--env MIMALLOC_ALLOW_THP=1]
"""
import argparse, os, re, resource, statistics, subprocess

HERE = os.path.dirname(os.path.abspath(__file__))
QUERY_DIR = os.path.join(HERE, "..", "..", "crates", "sql", "tests", "tpch")
TABLES = ["nation", "region", "part", "supplier", "partsupp", "customer", "orders", "lineitem"]
MS_PER_UNIT = {"ns": 1e-6, "µs": 1e-3, "ms": 1.0, "s": 1e3}


def operators(plan_text):
    """(name, elapsed_compute ms) of each aggregate and join of an EXPLAIN ANALYZE, top first."""
    out = []
    for line in plan_text.splitlines():
        node = re.match(r"\s*(\w+Exec)(: mode=\w+)?", line)
        elapsed = re.search(r"elapsed_compute=([\d.]+)(ns|µs|ms|s)\b", line)
        if node and elapsed and ("Aggregate" in node.group(1) or "Join" in node.group(1)):
            name = node.group(1).removesuffix("Exec") + (node.group(2) or "").replace(": mode=", " ")
            out.append((name, float(elapsed.group(1)) * MS_PER_UNIT[elapsed.group(2)]))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--query", type=int, required=True)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--flashscan", required=True, help="flashscan binary")
    ap.add_argument("--db", required=True, help="flashscan database (column store)")
    ap.add_argument("--parquet", required=True, help="directory of the eight tables' Parquet files")
    ap.add_argument("--env", action="append", default=[], help="NAME=VALUE for the flashscan runs (repeatable)")
    a = ap.parse_args()
    import datafusion

    with open(os.path.join(QUERY_DIR, f"q{a.query:02}.sql")) as f:
        sql = "\n".join(line for line in f if not line.startswith("--"))
    env = dict(os.environ, **dict(e.split("=", 1) for e in a.env))
    runs = {"flashscan": [], "datafusion": []}
    cpu = []
    for _ in range(a.rounds):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        text = subprocess.run([a.flashscan, "sql", a.db, "EXPLAIN ANALYZE " + sql], check=True, capture_output=True, text=True, env=env).stdout
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu.append((after.ru_utime - before.ru_utime, after.ru_stime - before.ru_stime))
        runs["flashscan"].append(operators(text))
        ctx = datafusion.SessionContext(datafusion.SessionConfig().with_target_partitions(2))
        for table in TABLES:
            ctx.register_parquet(table, os.path.join(a.parquet, f"{table}.parquet"))
        batches = ctx.sql("EXPLAIN ANALYZE " + sql).collect()
        runs["datafusion"].append(operators("\n".join(v for b in batches for v in b.column(1).to_pylist())))
    for engine, plans in runs.items():
        names = [n for n, _ in plans[0]]
        medians = [f"{n} {statistics.median(p[i][1] for p in plans if len(p) > i):.1f}" for i, n in enumerate(names)]
        print(f"{engine} (median ms of {a.rounds}): " + " | ".join(medians))
    print(f"flashscan process CPU (median of {a.rounds}): user {statistics.median(u for u, _ in cpu):.2f} s, "
          f"system {statistics.median(s for _, s in cpu):.2f} s")


if __name__ == "__main__":
    main()
