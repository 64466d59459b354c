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
import statistics
import time

import psycopg

from server_cpu import cpu_s



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
    ap.add_argument("--flashscan", required=True)
    ap.add_argument("--flashscan-pid", type=int, required=True)
    ap.add_argument("--postgres", required=True)
    ap.add_argument("--statements", default="500,2000,4000")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    sizes = [int(s) for s in args.statements.split(",")]
    fs = setup(args.flashscan)
    pg = setup(args.postgres)
    pg_pid = pg.execute("SELECT pg_backend_pid()").fetchone()[0]
    sides = {"flashscan": (fs, args.flashscan_pid), "postgres": (pg, pg_pid)}
    results = {(side, n): [] for side in sides for n in sizes}
    for r in range(args.rounds):
        for n in sizes:
            order = list(sides) if r % 2 == 0 else list(reversed(sides))
            for side in order:
                conn, pid = sides[side]
                results[(side, n)].append(block(conn, pid, n))
                print(f"round {r} {side} n={n}: {results[(side, n)][-1][0]:.0f} us/statement elapsed, {results[(side, n)][-1][1]:.0f} us CPU", flush=True)
    print("\n| statements in the block | flashscan µs/statement | PostgreSQL µs/statement | ratio | flashscan CPU µs | PostgreSQL CPU µs | CPU ratio |")
    print("|---|---|---|---|---|---|---|")
    for n in sizes:
        f = [statistics.median(x) for x in zip(*results[("flashscan", n)])]
        p = [statistics.median(x) for x in zip(*results[("postgres", n)])]
        print(f"| {n} | {f[0]:.0f} | {p[0]:.0f} | {f[0] / p[0]:.2f} | {f[1]:.0f} | {p[1]:.0f} | {f[1] / p[1]:.2f} |")


if __name__ == "__main__":
    main()
