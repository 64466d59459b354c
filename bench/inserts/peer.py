#!/usr/bin/env python3
"""One peer run of bench/inserts: N threads, each with its own connection, insert one row
per transaction into bench_inserts for S seconds; prints one JSON line.

    peer.py sqlite|duckdb|duckdb_appender DBFILE THREADS SECONDS

The table has flashscan's bench shape: (id BIGINT NOT NULL, thread INT NOT NULL, amount
DOUBLE NOT NULL, note VARCHAR NOT NULL), a 16-character note.
- sqlite: WAL journal, synchronous=FULL (every commit durable), one connection per thread,
  autocommit INSERT (one statement = one transaction), busy timeout 60 s.
- duckdb: one database, a cursor (its own connection) per thread, autocommit INSERT with
  parameters (one row per transaction; DuckDB syncs its WAL at each commit).
- duckdb_appender: the same, each row through DuckDB's appender (`cursor.append`, a
  one-row DataFrame per call = one transaction).
Timing: threads start together (a barrier); the window ends when the last thread has
seen S seconds pass and finished its commit. Commit latency is the call that commits,
Python included.
"""
import json
import sys
import threading
import time

CREATE = "CREATE TABLE bench_inserts (id BIGINT NOT NULL, thread INT NOT NULL, amount DOUBLE NOT NULL, note VARCHAR NOT NULL)"


def percentile(sorted_values, q):
    if not sorted_values:
        return 0.0
    i = min(len(sorted_values) - 1, int(q * len(sorted_values)))
    return sorted_values[i]


def main():
    system, path, threads, seconds = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
    if system == "sqlite":
        import sqlite3

        def connect():
            c = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=60)
            c.execute("PRAGMA journal_mode=WAL")
            c.execute("PRAGMA synchronous=FULL")
            return c

        setup = connect()
        setup.execute(CREATE)
        conns = [connect() for _ in range(threads)]
    elif system in ("duckdb", "duckdb_appender"):
        import duckdb

        setup = duckdb.connect(path)
        setup.execute(CREATE)
        conns = [setup.cursor() for _ in range(threads)]
    else:
        sys.exit("system: sqlite, duckdb or duckdb_appender")
    if system == "duckdb_appender":
        import pandas as pd

    barrier = threading.Barrier(threads + 1)
    results = [None] * threads
    errors = []

    def worker(t):
        c = conns[t]
        lat = []
        n = 0
        try:
            barrier.wait()
            start = time.perf_counter()
            while time.perf_counter() - start < seconds:
                rid = (t << 40) | n
                row = (rid, t, (rid % 100000) / 100.0, "note-%011d" % (rid % 100000000000))
                t0 = time.perf_counter_ns()
                if system == "duckdb_appender":
                    c.append("bench_inserts", pd.DataFrame({"id": [row[0]], "thread": [row[1]], "amount": [row[2]], "note": [row[3]]}))
                else:
                    c.execute("INSERT INTO bench_inserts VALUES (?, ?, ?, ?)", row)
                lat.append(time.perf_counter_ns() - t0)
                n += 1
        except Exception as e:  # reported, and the run fails
            errors.append("%s: %s" % (type(e).__name__, e))
        results[t] = (n, lat)

    ts = [threading.Thread(target=worker, args=(t,)) for t in range(threads)]
    for th in ts:
        th.start()
    barrier.wait()
    t0 = time.perf_counter()
    for th in ts:
        th.join()
    elapsed = time.perf_counter() - t0
    if errors:
        sys.exit("peer %s failed: %s" % (system, errors[0]))
    lat = sorted(x for r in results for x in r[1])
    commits = sum(r[0] for r in results)
    for c in conns:
        c.close()
    setup.close()
    print(json.dumps({"system": system, "threads": threads, "elapsed_s": elapsed, "commits": commits,
                      "commit_latency_us": {"p50": percentile(lat, 0.5) / 1000.0, "p99": percentile(lat, 0.99) / 1000.0}}))


if __name__ == "__main__":
    main()
