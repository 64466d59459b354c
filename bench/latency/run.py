#!/usr/bin/env python3
"""The fixed cost of one statement over the wire: flashscan serve vs PostgreSQL 15, one
client connection (psycopg 3), round trips back to back, interleaved per round.

    python3 bench/latency/run.py --flashscan /work/target/release/flashscan
    python3 bench/latency/run.py --flashscan NEW --flashscan-before OLD     # an A/B
    python3 bench/latency/run.py --flashscan BIN --skip-postgres --trips 20000 --cases select1

Cases (each a statement a client sends thousands of times):
- select1           `SELECT 1` (psycopg sends it with the simple query protocol);
- select1_prepared  the same, prepared once (Parse), then Bind/Describe/Execute/Sync each time;
- by_key            `SELECT * FROM t WHERE id = $1`, a random key of a 10,000-row table,
                    unprepared (Parse/Bind/Describe/Execute/Sync each time: psycopg's
                    automatic preparing is turned off for it);
- by_key_prepared   the same, prepared once.
- by_range_prepared `SELECT * FROM t WHERE id BETWEEN $1 AND $2`, 100 consecutive keys
                    from a random one, prepared once (an index range on both sides; a
                    flashscan from before session 22 scans the table for it).
- newest_prepared   `SELECT * FROM t ORDER BY id DESC LIMIT 10`, prepared once (the
                    primary key read backwards on both sides; before session 22 flashscan
                    scanned the table and sorted).

For each case and round, each server (in a shuffled order per round: bench/common.py's
round_order) gets --warmup round trips, then --trips timed ones. Printed per server: the
round trip's p50 and p99 in µs (client wall clock), and the server's CPU µs per statement:
utime + stime from /proc/PID/stat before and after the timed trips, divided by the trips —
for PostgreSQL the connection's backend process (the postmaster and its background
processes are not counted), for flashscan the whole process (it is one process: its
one-second sampler is counted too). The client's own CPU µs per trip (psycopg + Python) is
printed too: the harness's share of every round trip, the same for both servers.
Medians over rounds, and flashscan / PostgreSQL.

Data: table t (id BIGINT, name TEXT, v BIGINT), ids 1..--rows, id the primary key on both
sides (a flashscan from before SQL keys refuses it and scans: said when it happens).
flashscan: a database made by `flashscan init`, the rows sent with COPY FROM STDIN, then the server stopped (its
checkpoint writes them into pages) and started again. PostgreSQL: a throwaway cluster
under --work (initdb, run as user postgres, default fsync settings), the same rows, id the
primary key (how a user makes a table that is read by key), VACUUM ANALYZE.
"""

import argparse
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import time

import psycopg

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
import common  # noqa: E402


# bench/concurrency/run.py starts and stops both servers (loaded by path: this file is run.py too).
servers = common.load_by_path("concurrency_run", os.path.join(HERE, "..", "concurrency", "run.py"))

PG_PORT = 55442
FS_PORT = 55443
FS_HTTP = 55490
CASES = ["select1", "select1_prepared", "by_key", "by_key_prepared", "by_range_prepared", "newest_prepared"]
NEWEST_ROWS = 10
RANGE_ROWS = 100
TABLE_SQL = "id BIGINT NOT NULL, name TEXT, v BIGINT"


def connect(port, postgres):
    # PostgreSQL knows only its superuser here (trust on loopback); flashscan takes any name.
    conn = psycopg.connect(host="127.0.0.1", port=port, user="postgres" if postgres else "bench", dbname="postgres", autocommit=True)
    # Only the *_prepared cases prepare (`prepare=True`), the others pass `prepare=False`
    # (never). Not `prepare_threshold = None`: psycopg then ignores `prepare=True` too, and
    # the *_prepared cases of the first runs (docs/benchmarks.md) were not prepared at all.
    conn.prepare_threshold = 1_000_000
    return conn


def statement_of(case, rows, rng):
    """The SQL, its parameters and whether to prepare, for one round trip of `case`."""
    if case == "select1":
        return "SELECT 1", None, False
    if case == "select1_prepared":
        return "SELECT 1", None, True
    if case == "newest_prepared":
        return f"SELECT * FROM t ORDER BY id DESC LIMIT {NEWEST_ROWS}", None, True
    if case == "by_range_prepared":
        first = rng.randrange(1, rows - RANGE_ROWS + 2)
        return "SELECT * FROM t WHERE id BETWEEN %s AND %s", (first, first + RANGE_ROWS - 1), True
    key = (rng.randrange(1, rows + 1),)
    return "SELECT * FROM t WHERE id = %s", key, case == "by_key_prepared"


def rows_expected(case):
    return {"by_range_prepared": RANGE_ROWS, "newest_prepared": NEWEST_ROWS}.get(case, 1)


def proc_cpu_s(pid):
    """utime + stime of one process (all its threads, live and exited), in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure(conn, server_pid, case, trips, warmup, rows, seed):
    rng = random.Random(seed)
    for _ in range(warmup):
        sql, params, prepare = statement_of(case, rows, rng)
        got = conn.execute(sql, params, prepare=prepare).fetchall()
        assert len(got) == rows_expected(case), (case, len(got))
    # psycopg's own record of what it prepared (a private attribute: a check, not an API).
    if case.endswith("_prepared"):
        assert len(getattr(conn, "_prepared")._names) > 0, f"{case}: psycopg prepared nothing"
    else:
        assert prepare is False, case
    # The statements first, so the timed loop does nothing but send them.
    statements = [statement_of(case, rows, rng) for _ in range(trips)]
    took_ns = [0] * trips
    cpu0 = proc_cpu_s(server_pid)
    client0 = common.cpu_s(resource.RUSAGE_SELF)
    for i, (sql, params, prepare) in enumerate(statements):
        t = time.perf_counter_ns()
        conn.execute(sql, params, prepare=prepare).fetchall()
        took_ns[i] = time.perf_counter_ns() - t
    client = common.cpu_s(resource.RUSAGE_SELF) - client0
    cpu = proc_cpu_s(server_pid) - cpu0
    took_ns.sort()
    return {
        "p50_us": took_ns[len(took_ns) // 2] / 1e3,
        "p99_us": took_ns[min(len(took_ns) - 1, int(len(took_ns) * 0.99))] / 1e3,
        "server_cpu_us": cpu * 1e6 / trips,
        "client_cpu_us": client * 1e6 / trips,
    }


def load_rows(conn, rows):
    with conn.cursor() as cur:
        with cur.copy("COPY t (id, name, v) FROM STDIN") as copy:
            for i in range(1, rows + 1):
                copy.write_row((i, f"name-{i}", i * 7 % 1000))


class Postgres:
    """A throwaway PostgreSQL 15 cluster under `work`, its settings the defaults but the port."""

    def __init__(self, work):
        self.data = os.path.join(work, "pg15")

    def init(self, rows):
        fresh = not os.path.exists(os.path.join(self.data, "PG_VERSION"))
        if fresh:
            os.makedirs(self.data, exist_ok=True)
            if os.geteuid() == 0:
                shutil.chown(self.data, "postgres")
            servers.sh(servers.as_postgres(f"{servers.PG_BIN}/initdb -D {self.data} -A trust -U postgres >/dev/null"))
            with open(os.path.join(self.data, "postgresql.auto.conf"), "w") as f:
                f.write("listen_addresses = '127.0.0.1'\njit = off\n")
        self.start()
        conn = connect(PG_PORT, True)
        count = conn.execute("select count(*) from pg_tables where tablename = 't'").fetchone()[0]
        if count == 0 or conn.execute("select count(*) from t").fetchone()[0] != rows:
            conn.execute("DROP TABLE IF EXISTS t")
            conn.execute(f"CREATE TABLE t ({TABLE_SQL}, PRIMARY KEY (id))")
            load_rows(conn, rows)
            conn.execute("VACUUM ANALYZE t")
        conn.close()

    def start(self):
        servers.sh(servers.as_postgres(f"{servers.PG_BIN}/pg_ctl -D {self.data} -o '-p {PG_PORT} -k /tmp' -l {self.data}/log -w start"),
                   stdout=subprocess.DEVNULL)

    def stop(self):
        subprocess.run(servers.as_postgres(f"{servers.PG_BIN}/pg_ctl -D {self.data} -w -m fast stop"),
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def flashscan_server(binary, work, name, port, http_port, rows):
    """A fresh database with table t for `binary`, served on `port` (started)."""
    db = os.path.join(work, name)
    shutil.rmtree(db, ignore_errors=True)
    servers.sh([binary, "init", db], stdout=subprocess.DEVNULL)
    server = servers.Flashscan(binary, db, 10, port=port, http_port=http_port)
    server.start()
    conn = connect(port, False)
    try:
        # As PostgreSQL's: id the primary key, which by_key then reads through.
        conn.execute(f"CREATE TABLE t ({TABLE_SQL}, PRIMARY KEY (id))")
    except psycopg.Error as e:
        # A flashscan from before SQL keys (issue 29) refuses them: its table scans.
        print(f"{name}: no primary key ({str(e).splitlines()[0]}): by_key scans the table", flush=True)
        conn.execute(f"CREATE TABLE t ({TABLE_SQL})")
    load_rows(conn, rows)
    conn.close()
    # Stopping checkpoints: the rows are then read from pages, as a table's usually are.
    server.stop()
    server.start()
    return server


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--flashscan", required=True, help="a release flashscan binary")
    ap.add_argument("--flashscan-before", help="a second flashscan binary measured beside --flashscan (an A/B)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--trips", type=int, default=2000, help="timed round trips per case, server and round")
    ap.add_argument("--warmup", type=int, default=200)
    ap.add_argument("--rows", type=int, default=10_000)
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--work", default="/tmp/flashscan-latency")
    ap.add_argument("--skip-postgres", action="store_true")
    a = ap.parse_args()
    cases = a.cases.split(",")
    unknown = [c for c in cases if c not in CASES]
    if unknown:
        sys.exit(f"unknown cases {unknown}: use {CASES}")
    os.makedirs(a.work, exist_ok=True)
    if os.geteuid() == 0:
        shutil.chown(a.work, "postgres")

    started = {}
    pg = None
    try:
        started["flashscan"] = flashscan_server(a.flashscan, a.work, "flashscan", FS_PORT, FS_HTTP, a.rows)
        if a.flashscan_before:
            started["before"] = flashscan_server(a.flashscan_before, a.work, "flashscan-before", FS_PORT + 1, FS_HTTP + 1, a.rows)
        if not a.skip_postgres:
            pg = Postgres(a.work)
            pg.init(a.rows)
        conns, pids = {}, {}
        for name, server in started.items():
            conns[name] = connect(server.port, False)
            pids[name] = server.pid()
        if pg:
            conns["postgres"] = connect(PG_PORT, True)
            pids["postgres"] = conns["postgres"].execute("select pg_backend_pid()").fetchone()[0]
        names = list(conns)
        results = {(c, n): [] for c in cases for n in names}
        print(f"{a.trips} round trips per case, server and round; {a.rounds} rounds; t has {a.rows} rows", flush=True)
        for r in range(a.rounds):
            for case in cases:
                for name in common.round_order(names, f"{case}-{r}"):
                    res = measure(conns[name], pids[name], case, a.trips, a.warmup, a.rows, seed=r)
                    results[(case, name)].append(res)
                    print(f"round {r + 1} {case:17} {name:10} p50 {res['p50_us']:7.1f} µs  p99 {res['p99_us']:7.1f} µs  "
                          f"server CPU {res['server_cpu_us']:6.1f} µs/stmt  client CPU {res['client_cpu_us']:5.1f} µs", flush=True)
    finally:
        for server in started.values():
            server.stop()
        if pg:
            pg.stop()

    keys = ["p50_us", "p99_us", "server_cpu_us", "client_cpu_us"]
    header = ["case", "server"] + keys
    rows = []
    med = {}
    for case in cases:
        for name in names:
            med[(case, name)] = {k: statistics.median(x[k] for x in results[(case, name)]) for k in keys}
            rows.append([case, name] + [f"{med[(case, name)][k]:.1f}" for k in keys])
        for name in names:
            if name != "postgres" and "postgres" in names:
                rows.append([case, f"{name} / postgres"] + [f"{med[(case, name)][k] / med[(case, 'postgres')][k]:.2f}" for k in keys])
        if "before" in names:
            rows.append([case, "flashscan / before"] + [f"{med[(case, 'flashscan')][k] / med[(case, 'before')][k]:.2f}" for k in keys])
    common.print_markdown_table(f"medians of {a.rounds} rounds, {a.trips} round trips each (µs)", header, rows)


if __name__ == "__main__":
    main()
