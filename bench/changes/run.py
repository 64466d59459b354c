#!/usr/bin/env python3
"""Bulk UPDATE and DELETE (issue 28's target): about 15 % of TPC-H lineitem changed by one
statement, durable, on flashscan's heap beside PostgreSQL 15's heap and on flashscan's
column store beside DuckDB's own file.

    python3 bench/changes/run.py --flashscan BIN [--sf 1] [--rounds 5] [--work DIR]

The statements, run one after the other on a fresh copy of the table in every round:

    UPDATE lineitem SET l_discount = l_discount + 0.01 WHERE l_shipdate < DATE '1993-01-01'
    DELETE FROM lineitem WHERE l_shipdate < DATE '1993-01-01'

How each side is run and timed, the same way for all:
- Copies: every round starts from a copy of a loaded table (flashscan: the database
  directory copied; PostgreSQL: CREATE DATABASE … TEMPLATE; DuckDB: the file copied), so
  no round sees another's changes.
- Warm, defined the same for all: one `SELECT count(*), sum(l_discount) FROM lineitem`
  runs before the timed statements (the table's pages in memory as that scan leaves them).
- Timed: the statement from send to its answer, over one connection in autocommit, so
  each returns only once its commit is durable (flashscan: the log flushed; PostgreSQL:
  synchronous_commit = on; DuckDB: its WAL written and synced at commit). No checkpoint
  inside the timing on any side: flashscan checkpoints only past its thresholds (1 GiB of
  delta or log, 5 minutes), PostgreSQL runs with max_wal_size = 20GB and
  checkpoint_timeout = 1h, DuckDB with checkpoint_threshold = 100GB.
- Threads: flashscan serves with its defaults (2 execution partitions on this 2-core
  machine), DuckDB with threads = 2; PostgreSQL runs UPDATE/DELETE in one backend (it has
  no parallel DML) — said in the output, not hidden.
- CPU beside elapsed: the server process's (and its children's) user+system CPU from /proc
  for flashscan and PostgreSQL; this process's for DuckDB (in process).
- Answers checked: after each statement every engine must hold the same count(*) and
  sum(l_discount) (DuckDB's and PostgreSQL's as the oracle for flashscan's).
Rounds are interleaved in a seeded shuffled order (common.round_order); medians and ratios
are printed (flashscan / peer: below 1 is faster).
"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
import common  # noqa: E402

servers = common.load_by_path("concurrency_run", os.path.join(HERE, "..", "concurrency", "run.py"))

FS_PORT = 55463
FS_HTTP = 55492
STATEMENTS = [
    ("update", "UPDATE lineitem SET l_discount = l_discount + 0.01 WHERE l_shipdate < DATE '1993-01-01'"),
    ("delete", "DELETE FROM lineitem WHERE l_shipdate < DATE '1993-01-01'"),
]
WARM = "SELECT count(*), sum(l_discount) FROM lineitem"
CHECK = "SELECT count(*), sum(l_discount) FROM lineitem"


def prepare(a):
    """The loaded copies every round starts from: flashscan heap and column store, the
    Parquet file DuckDB's table is made from, PostgreSQL's template database."""
    heap = os.path.join(a.work, f"fs-heap-sf{a.sf}")
    cs = os.path.join(a.work, f"fs-cs-sf{a.sf}")
    parquet = os.path.join(a.work, f"lineitem-sf{a.sf}.parquet")
    if not os.path.exists(os.path.join(heap, "catalog.json")):
        common.sh([a.flashscan, "load", heap, "--sf", a.sf, "--tables", "lineitem"])
    if not os.path.exists(os.path.join(cs, "catalog.json")):
        common.sh(["cp", "-a", heap, cs])
        common.sh([a.flashscan, "rebuild", cs, "lineitem", "--compression", "columnstore"])
    if not os.path.exists(parquet):
        common.sh([a.flashscan, "sql", heap, f"COPY lineitem TO '{parquet}'"], stdout=subprocess.DEVNULL)
    duck = common.prepare_duckdb(os.path.join(a.work, f"duck-sf{a.sf}.duckdb"), {"lineitem": parquet})
    pg = servers.Postgres(a.work, 20)
    pg.init()
    with open(os.path.join(pg.data, "postgresql.auto.conf"), "a") as f:
        f.write("max_wal_size = 20GB\ncheckpoint_timeout = 1h\n")
    pg.start()
    if servers.psql(servers.PG_PORT, "select count(*) from pg_database where datname = 'tpl'").strip() != "1":
        servers.psql(servers.PG_PORT, "CREATE DATABASE tpl")
        cols = servers.PG_SCHEMA["lineitem"]
        run_pg("tpl", f"CREATE TABLE lineitem ({cols})")
        fs = servers.Flashscan(a.flashscan, heap, 10, port=FS_PORT, http_port=FS_HTTP)
        fs.start()
        try:
            out = subprocess.Popen(["psql", "-X", "-h", "127.0.0.1", "-p", str(FS_PORT), "-U", "bench", "-d", "x", "-c", "COPY lineitem TO STDOUT"], stdout=subprocess.PIPE)
            common.sh(["psql", "-X", "-h", "127.0.0.1", "-p", str(servers.PG_PORT), "-U", "postgres", "-d", "tpl", "-c", "COPY lineitem FROM STDIN"], stdin=out.stdout, stdout=subprocess.DEVNULL)
            if out.wait() != 0:
                sys.exit("COPY lineitem from flashscan failed")
        finally:
            fs.stop()
        run_pg("tpl", "VACUUM ANALYZE lineitem")
    return heap, cs, duck, pg


def run_pg(db, sql):
    return subprocess.run(["psql", "-X", "-h", "127.0.0.1", "-p", str(servers.PG_PORT), "-U", "postgres", "-d", db, "-Atc", sql], check=True, capture_output=True, text=True).stdout


def timed_over_the_wire(port, user, dbname, pid):
    """Warm, then each statement timed (elapsed, server CPU); the check's answer."""
    import psycopg
    with psycopg.connect(host="127.0.0.1", port=port, user=user, dbname=dbname, autocommit=True) as c:
        c.execute(WARM).fetchall()
        figures = {}
        for name, sql in STATEMENTS:
            before = servers.process_figures(pid)
            t = time.perf_counter()
            cur = c.execute(sql)
            elapsed = time.perf_counter() - t
            after = servers.process_figures(pid)
            figures[name] = {"s": elapsed, "cpu_s": after["cpu_s"] - before["cpu_s"], "rows": cur.rowcount}
            check = c.execute(CHECK).fetchone()
            figures[name]["after"] = (int(check[0]), round(float(check[1]), 2))
    return figures, tuple(figures[n]["after"] for n, _ in STATEMENTS)


def flashscan_round(a, base, r, label):
    db = os.path.join(a.work, f"round-{label}")
    shutil.rmtree(db, ignore_errors=True)
    common.sh(["cp", "-a", base, db])
    fs = servers.Flashscan(a.flashscan, db, 10, port=FS_PORT, http_port=FS_HTTP)
    fs.start()
    try:
        return timed_over_the_wire(FS_PORT, "bench", "x", fs.pid())
    finally:
        fs.stop()
        shutil.rmtree(db, ignore_errors=True)


def postgres_round(pg):
    servers.psql(servers.PG_PORT, "DROP DATABASE IF EXISTS r")
    servers.psql(servers.PG_PORT, "CREATE DATABASE r TEMPLATE tpl")
    try:
        return timed_over_the_wire(servers.PG_PORT, "postgres", "r", pg.pid())
    finally:
        servers.psql(servers.PG_PORT, "DROP DATABASE IF EXISTS r")


def duckdb_round(a, base):
    import duckdb
    path = os.path.join(a.work, "round.duckdb")
    for p in (path, path + ".wal"):
        if os.path.exists(p):
            os.remove(p)
    shutil.copyfile(base, path)
    con = duckdb.connect(path)
    try:
        con.execute("SET threads = 2")
        con.execute("SET checkpoint_threshold = '100GB'")
        con.execute(WARM).fetchall()
        figures = {}
        for name, sql in STATEMENTS:
            cpu = common.cpu_s(common.resource.RUSAGE_SELF)
            t = time.perf_counter()
            rows = con.execute(sql).fetchall()
            elapsed = time.perf_counter() - t
            figures[name] = {"s": elapsed, "cpu_s": common.cpu_s(common.resource.RUSAGE_SELF) - cpu, "rows": rows[0][0] if rows else -1}
            check = con.execute(CHECK).fetchone()
            figures[name]["after"] = (int(check[0]), round(float(check[1]), 2))
    finally:
        con.close()
        for p in (path, path + ".wal"):
            if os.path.exists(p):
                os.remove(p)
    return figures, tuple(figures[n]["after"] for n, _ in STATEMENTS)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--flashscan", required=True)
    common.add_run_args(ap, rounds=5, work="/tmp/changes-bench")  # PostgreSQL runs as user postgres: not under /root
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    heap, cs, duck, pg = prepare(a)
    runs = {
        "flashscan heap": lambda r: flashscan_round(a, heap, r, "heap"),
        "PostgreSQL heap": lambda r: postgres_round(pg),
        "flashscan column store": lambda r: flashscan_round(a, cs, r, "cs"),
        "DuckDB": lambda r: duckdb_round(a, duck),
    }
    results = {}
    answers = {}
    try:
        for r in range(a.rounds):
            for name in common.round_order(runs, seed=r):
                figures, check = runs[name](r)
                results.setdefault(name, []).append(figures)
                answers.setdefault(name, set()).add(check)
                print(f"round {r} {name}: " + ", ".join(f"{k} {v['s']:.2f} s ({v['cpu_s']:.2f} CPU s, {v['rows']} rows)" for k, v in figures.items()) + f"; count, sum after each: {check}", flush=True)
    finally:
        pg.stop()
    distinct = {c for s in answers.values() for c in s}
    if len(distinct) != 1:
        sys.exit(f"the engines disagree after the statements: {answers}")
    med = lambda name, stmt, k: statistics.median(f[stmt][k] for f in results[name])  # noqa: E731
    rows = []
    for stmt, _ in STATEMENTS:
        for fs, peer in [("flashscan heap", "PostgreSQL heap"), ("flashscan column store", "DuckDB")]:
            f_s, p_s, f_c, p_c = med(fs, stmt, "s"), med(peer, stmt, "s"), med(fs, stmt, "cpu_s"), med(peer, stmt, "cpu_s")
            rows.append([stmt, f"{fs} / {peer}", f"{f_s:.2f}", f"{p_s:.2f}", f"{f_s / p_s:.2f}", f"{f_c:.2f}", f"{p_c:.2f}", f"{f_c / p_c:.2f}"])
    common.print_markdown_table(
        f"Bulk UPDATE/DELETE of lineitem, SF {a.sf}, warm, durable, {a.rounds} interleaved rounds (medians; rows changed: {results['DuckDB'][0]['update']['rows']} / {results['DuckDB'][0]['delete']['rows']}; PostgreSQL in one backend, flashscan and DuckDB on 2 threads)",
        ["statement", "flashscan / peer", "flashscan s", "peer s", "time ratio", "flashscan CPU s", "peer CPU s", "CPU ratio"],
        rows,
    )


if __name__ == "__main__":
    main()
