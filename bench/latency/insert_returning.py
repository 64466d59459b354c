#!/usr/bin/env python3
"""What an ORM's INSERT costs: one-row `INSERT … RETURNING id` into a SERIAL table, and an
upsert (`INSERT … ON CONFLICT (k) DO UPDATE … RETURNING`), flashscan and PostgreSQL side by
side, interleaved per round.

  python3 bench/latency/insert_returning.py \\
      --flashscan 'host=127.0.0.1 port=5544 user=x dbname=flashscan' --flashscan-pid PID \\
      --postgres 'host=/tmp port=5499 user=postgres dbname=postgres' \\
      --statements 2000 --rounds 5

Per kind: the median over rounds of elapsed µs per statement (client side, one connection,
psycopg's prepared statements — the extended protocol, planned once — autocommit, so each
statement is one durable commit on both sides) and of the server's CPU µs per statement
(/proc utime + stime: the flashscan process given by --flashscan-pid, and the PostgreSQL
backend of the connection); then flashscan / PostgreSQL. Warm: the tables are made at the
start and grow through the run; the upsert's keys cycle over 1,000 rows (most statements
update).
"""
import argparse
import time

import psycopg

from server_cpu import cpu_s, interleaved, ratio_table, server_arguments



def setup(dsn):
    c = psycopg.connect(dsn, autocommit=True)
    c.execute("DROP TABLE IF EXISTS orm_items")
    c.execute("DROP TABLE IF EXISTS orm_counts")
    c.execute("CREATE TABLE orm_items (id SERIAL PRIMARY KEY, name VARCHAR(40) NOT NULL, qty INT NOT NULL DEFAULT 5)")
    c.execute("CREATE TABLE orm_counts (k INT PRIMARY KEY, n BIGINT NOT NULL)")
    return c


KINDS = {
    "insert_returning": ("INSERT INTO orm_items (name) VALUES (%s) RETURNING id", lambda i: (f"item{i}",)),
    "upsert_returning": ("INSERT INTO orm_counts AS c (k, n) VALUES (%s, 1) ON CONFLICT (k) DO UPDATE SET n = c.n + EXCLUDED.n RETURNING n", lambda i: (i % 1000,)),
}


def run(conn, pid, kind, n, start):
    sql, params = KINDS[kind]
    cpu0, t0 = cpu_s(pid), time.perf_counter()
    with conn.cursor() as cur:
        for i in range(start, start + n):
            cur.execute(sql, params(i), prepare=True)
            cur.fetchone()
    return (time.perf_counter() - t0) * 1e6 / n, (cpu_s(pid) - cpu0) * 1e6 / n


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    server_arguments(ap)
    ap.add_argument("--statements", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    fs = setup(args.flashscan)
    pg = setup(args.postgres)
    pg_pid = pg.execute("SELECT pg_backend_pid()").fetchone()[0]
    sides = {"flashscan": (fs, args.flashscan_pid), "postgres": (pg, pg_pid)}
    results = interleaved(sides, list(KINDS), args.rounds, lambda side, kind, r: run(*sides[side], kind, args.statements, r * args.statements), "")
    ratio_table(results, list(KINDS), "statement")

if __name__ == "__main__":
    main()
