#!/usr/bin/env python3
"""One-row UPDATEs by key inside one long BEGIN … COMMIT block: does a statement's cost grow
with the block? flashscan and PostgreSQL side by side, interleaved per round.

Each statement of a block reads the block's own changes (a transaction reads its own
writes); this measures what that costs as the block grows, against PostgreSQL, whose cost
per statement does not depend on the block's length.

  python3 bench/latency/long_block.py \\
      --flashscan 'host=127.0.0.1 port=55434 user=x dbname=flashscan' --flashscan-pid PID \\
      --postgres 'host=127.0.0.1 port=5499 user=postgres dbname=postgres' \\
      --statements 500,2000,4000 --rounds 3

Per block length: the median over rounds of elapsed µs per statement (client side, one
connection, simple protocol, a new statement text each time) and of the server's CPU µs per
statement (/proc utime + stime: the flashscan process given by --flashscan-pid, and the
PostgreSQL backend of the connection, found by pg_backend_pid()); then flashscan /
PostgreSQL. Warm: a 10,000-row keyed table in memory on both; each block updates rows
1..N once each and commits (durably, both sides).
"""
import argparse
import time

import psycopg

from server_cpu import cpu_s, interleaved, ratio_table, server_arguments



def setup(dsn):
    c = psycopg.connect(dsn, autocommit=True)
    c.execute("DROP TABLE IF EXISTS long_block")
    c.execute("CREATE TABLE long_block (k bigint PRIMARY KEY, v bigint NOT NULL, pad text)")
    c.execute("INSERT INTO long_block SELECT x, 0, repeat('x', 100) FROM generate_series(1, 10000) AS g(x)")
    return c


def block(conn, pid, n):
    """(elapsed µs, server CPU µs) per statement of one block of n UPDATEs."""
    cpu0, t0 = cpu_s(pid), time.perf_counter()
    conn.execute("BEGIN")
    for i in range(n):
        conn.execute(f"UPDATE long_block SET v = v + 1 WHERE k = {i + 1}", prepare=False)
    conn.execute("COMMIT")
    return (time.perf_counter() - t0) * 1e6 / n, (cpu_s(pid) - cpu0) * 1e6 / n


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    server_arguments(ap)
    ap.add_argument("--statements", default="500,2000,4000")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    sizes = [int(s) for s in args.statements.split(",")]
    fs = setup(args.flashscan)
    pg = setup(args.postgres)
    pg_pid = pg.execute("SELECT pg_backend_pid()").fetchone()[0]
    sides = {"flashscan": (fs, args.flashscan_pid), "postgres": (pg, pg_pid)}
    results = interleaved(sides, sizes, args.rounds, lambda side, n, r: block(*sides[side], n), "n=")
    ratio_table(results, sizes, "statements in the block")

if __name__ == "__main__":
    main()
