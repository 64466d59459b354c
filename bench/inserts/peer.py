#!/usr/bin/env python3
"""One peer run of bench/inserts: N threads, each with its own connection, insert the
article's rows (seed 001: c1 BIGINT key, c2 TIMESTAMP, c3 CHAR(111), c4 INT, c5 INT,
c6 BIGINT; session s appends keys s * 10^10 + i) for S seconds; prints one JSON line.

    peer.py sqlite|duckdb_appender DBFILE THREADS SECONDS MODE PK

MODE (issue 31):
- a: one row per transaction, delayed durability. SQLite: WAL, synchronous=OFF (a commit
  is not fsynced at all; the OS writes the WAL later: weaker than flashscan's 10 ms bound).
- b: 1,000 one-row INSERT statements per transaction, durable. SQLite: WAL,
  synchronous=FULL, BEGIN, the prepared INSERT executed 1,000 times, COMMIT. DuckDB: its
  appender (`cursor.append` of a 1,000-row DataFrame = one transaction; DuckDB syncs its
  WAL at commit).
- c: one row per transaction, durable. SQLite: WAL, synchronous=FULL, autocommit.
PK: 1 makes c1 the PRIMARY KEY (SQLite: a rowid table with a unique index on c1, as
"c1 BIGINT PRIMARY KEY" is not a rowid alias; DuckDB: an ART index), 0 a plain heap.
Timing: threads start together (a barrier); the window ends when the last thread has
seen S seconds pass and finished its commit. Commit latency is the call that commits,
Python included; the peers' CPU per row includes the Python interpreter building each row.
"""
import datetime
import json
import sys
import threading
import time

KEY_RANGE = 10_000_000_000
C3 = ("c3-" + "x" * 111)[:111]
EPOCH_2025 = datetime.datetime(2025, 1, 1)


def create(pk):
    return ("CREATE TABLE bench_inserts (c1 BIGINT NOT NULL%s, c2 TIMESTAMP NOT NULL, c3 VARCHAR(111) NOT NULL, "
            "c4 INT NOT NULL, c5 INT NOT NULL, c6 BIGINT NOT NULL)" % (" PRIMARY KEY" if pk else ""))


def row(session, i):
    key = session * KEY_RANGE + i
    return (key, EPOCH_2025 + datetime.timedelta(microseconds=i), C3, session, key % 1000, key)


def percentile(sorted_values, q):
    if not sorted_values:
        return 0.0
    return sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))]


def main():
    system, path, threads, seconds, mode, pk = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), sys.argv[5], sys.argv[6] == "1"
    statements = 1000 if mode == "b" else 1
    if system == "sqlite":
        import sqlite3
        sqlite3.register_adapter(datetime.datetime, lambda d: d.isoformat(" "))

        def connect():
            c = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=600)
            c.execute("PRAGMA journal_mode=WAL")
            c.execute("PRAGMA synchronous=%s" % ("OFF" if mode == "a" else "FULL"))
            return c

        setup = connect()
        setup.execute(create(pk))
        conns = [connect() for _ in range(threads)]
    elif system == "duckdb_appender":
        if mode != "b":
            sys.exit("duckdb_appender runs mode b only")
        import duckdb
        import pandas as pd

        setup = duckdb.connect(path)
        setup.execute(create(pk))
        conns = [setup.cursor() for _ in range(threads)]
    else:
        sys.exit("system: sqlite or duckdb_appender")

    barrier = threading.Barrier(threads + 1)
    results = [None] * threads
    errors = []
    insert = "INSERT INTO bench_inserts VALUES (?, ?, ?, ?, ?, ?)"

    def worker(t):
        c = conns[t]
        session = t + 1
        lat = []
        n = 0
        try:
            barrier.wait()
            start = time.perf_counter()
            while time.perf_counter() - start < seconds:
                if system == "duckdb_appender":
                    rows = [row(session, n + k) for k in range(statements)]
                    df = pd.DataFrame(rows, columns=["c1", "c2", "c3", "c4", "c5", "c6"])
                    t0 = time.perf_counter_ns()
                    c.append("bench_inserts", df)
                elif statements == 1:
                    r = row(session, n)
                    t0 = time.perf_counter_ns()
                    c.execute(insert, r)
                else:
                    c.execute("BEGIN")
                    for k in range(statements):
                        c.execute(insert, row(session, n + k))
                    t0 = time.perf_counter_ns()
                    c.execute("COMMIT")
                lat.append(time.perf_counter_ns() - t0)
                n += statements
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
    rows = sum(r[0] for r in results)
    for c in conns:
        c.close()
    setup.close()
    print(json.dumps({"system": system, "threads": threads, "mode": mode, "primary_key": pk, "elapsed_s": elapsed, "rows_committed": rows,
                      "commits": len(lat), "commit_latency_us": {"p50": percentile(lat, 0.5) / 1000.0, "p99": percentile(lat, 0.99) / 1000.0}}))


if __name__ == "__main__":
    main()
