#!/usr/bin/env python3
"""A large result through psycopg 3's server-side cursor: flashscan serve vs PostgreSQL 15,
side by side, interleaved per round — the server's time and the server's memory.

    python3 bench/cursors/run.py --flashscan /work/target/release/flashscan
    python3 bench/cursors/run.py --flashscan BIN --rows 1000000 --itersizes 100,2000,20000 --rounds 3
    python3 bench/cursors/run.py --flashscan BIN --skip-postgres
    python3 bench/cursors/run.py --flashscan BIN --client pandas --itersizes 2000,20000

Data: table t (id BIGINT, name TEXT, v BIGINT), ids 1..--rows, sent with COPY FROM STDIN
(bench/latency/run.py's loader). flashscan: a database made by `flashscan init`, the server
stopped once after the load (its checkpoint writes the rows into pages) and started again.
PostgreSQL: a throwaway cluster under --work (initdb, run as user postgres, default
settings), the same rows, VACUUM ANALYZE.

Cases, per itersize: `conn.cursor(name="c")` over `SELECT * FROM t` in a transaction,
iterated to its end with `cursor.itersize = N` (DECLARE, then FETCH FORWARD N until a short
batch, CLOSE) — what psycopg and pandas' chunked `read_sql` over SQLAlchemy's
`stream_results` send. Per case and server (a shuffled order per round: bench/common.py's
round_order): the wall time of the whole iteration (client clock), the server's CPU seconds
(utime + stime from /proc/PID/stat: flashscan's whole process, PostgreSQL's connection
backend), and the server's peak resident memory above its resident memory just before the
case: the kernel's high-water mark (VmHWM in /proc/PID/status) reset before the case by
writing 5 to /proc/PID/clear_refs (root only; without it the column says "n/a").
Medians over rounds, and flashscan / PostgreSQL.
"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time

import psycopg

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
import common  # noqa: E402


# The latency benchmark's servers and loader (loaded by path: each script is run.py).
latency = common.load_by_path("latency_run", os.path.join(HERE, "..", "latency", "run.py"))
# Ports of their own, so this runs beside bench/latency.
PG_PORT = latency.PG_PORT = 55462
FS_PORT = 55463
FS_HTTP = 55492


def proc_cpu_s(pid):
    return latency.proc_cpu_s(pid)


def rss_kib(pid, field):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def reset_peak(pid):
    """Resets VmHWM to the current RSS; False where the kernel or permissions refuse."""
    try:
        with open(f"/proc/{pid}/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def iterate(conn, itersize):
    if not isinstance(conn, psycopg.Connection):
        # pandas over a SQLAlchemy connection, in chunks of `itersize` rows.
        import pandas
        import sqlalchemy

        rows = sum(len(chunk) for chunk in pandas.read_sql(sqlalchemy.text("SELECT * FROM t"), conn, chunksize=itersize))
        conn.commit()
        return rows
    rows = 0
    with conn.transaction():
        with conn.cursor(name="c") as cur:
            cur.itersize = itersize
            cur.execute("SELECT * FROM t")
            for _ in cur:
                rows += 1
    return rows


def connect(client, port, user):
    if client == "psycopg":
        return psycopg.connect(host="127.0.0.1", port=port, user=user, dbname="postgres")
    import sqlalchemy

    return sqlalchemy.create_engine(f"postgresql+psycopg://{user}@127.0.0.1:{port}/postgres").connect()


def backend_pid(conn):
    """The PostgreSQL backend serving `conn` (its CPU is the server's)."""
    if isinstance(conn, psycopg.Connection):
        with conn.transaction():
            return conn.execute("select pg_backend_pid()").fetchone()[0]
    pid = conn.exec_driver_sql("select pg_backend_pid()").scalar_one()
    conn.commit()
    return pid


def measure(conn, pid, itersize, expected_rows):
    before_kib = rss_kib(pid, "VmRSS")
    peak_known = reset_peak(pid)
    cpu0 = proc_cpu_s(pid)
    t0 = time.perf_counter()
    rows = iterate(conn, itersize)
    wall_s = time.perf_counter() - t0
    cpu_s = proc_cpu_s(pid) - cpu0
    peak_kib = rss_kib(pid, "VmHWM") if peak_known else None
    if rows != expected_rows:
        sys.exit(f"itersize {itersize}: {rows} rows, expected {expected_rows}")
    return {"wall_s": wall_s, "cpu_s": cpu_s, "peak_mib": None if peak_kib is None else max(0, peak_kib - before_kib) / 1024}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--flashscan", required=True, help="the flashscan binary")
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--itersizes", default="100,2000,20000")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--work", default="/tmp/flashscan-bench-cursors")
    ap.add_argument("--skip-postgres", action="store_true")
    ap.add_argument("--out", help="write the Markdown table here too")
    ap.add_argument("--client", choices=["psycopg", "pandas"], default="psycopg", help="psycopg's named cursor, or pandas.read_sql(chunksize=itersize) over SQLAlchemy")
    a = ap.parse_args()
    itersizes = [int(s) for s in a.itersizes.split(",")]
    os.makedirs(a.work, exist_ok=True)
    if os.geteuid() == 0:
        shutil.chown(a.work, "postgres")
    servers, conns, pids = {}, {}, {}
    try:
        servers["flashscan"] = latency.flashscan_server(a.flashscan, a.work, "fs", FS_PORT, FS_HTTP, a.rows)
        conns["flashscan"] = connect(a.client, FS_PORT, "bench")
        pids["flashscan"] = servers["flashscan"].pid()
        if not a.skip_postgres:
            pg = latency.Postgres(a.work)
            pg.init(a.rows)
            servers["postgres"] = pg
            conns["postgres"] = connect(a.client, PG_PORT, "postgres")
            pids["postgres"] = backend_pid(conns["postgres"])
        names = list(conns)
        results = {}
        for r in range(a.rounds):
            for itersize in itersizes:
                for name in common.round_order(names, seed=r * 1000 + itersize):
                    m = measure(conns[name], pids[name], itersize, a.rows)
                    results.setdefault((itersize, name), []).append(m)
                    peak = "n/a" if m["peak_mib"] is None else f"{m['peak_mib']:.1f}"
                    print(f"round {r} itersize {itersize} {name}: {m['wall_s']:.2f} s wall, {m['cpu_s']:.2f} s server CPU, +{peak} MiB peak RSS", flush=True)
        rows = []
        med = {}
        for itersize in itersizes:
            for name in names:
                ms = results[(itersize, name)]
                med[(itersize, name)] = {k: (None if any(m[k] is None for m in ms) else statistics.median(m[k] for m in ms)) for k in ms[0]}
                m = med[(itersize, name)]
                rows.append([str(itersize), name, f"{m['wall_s']:.2f}", f"{m['cpu_s']:.2f}", "n/a" if m["peak_mib"] is None else f"{m['peak_mib']:.1f}"])
            if "postgres" in names:
                f, p = med[(itersize, "flashscan")], med[(itersize, "postgres")]
                ratio = lambda k: "n/a" if f[k] is None or not p[k] else f"{f[k] / p[k]:.2f}"
                rows.append([str(itersize), "flashscan / postgres", ratio("wall_s"), ratio("cpu_s"), ratio("peak_mib")])
        common.print_markdown_table(
            f"{a.rows} rows through {'a named cursor' if a.client == 'psycopg' else 'pandas.read_sql(chunksize)'}, medians of {a.rounds} rounds",
            ["itersize", "server", "wall s", "server CPU s", "peak RSS above start, MiB"],
            rows,
            a.out,
        )
    finally:
        for c in conns.values():
            c.close()
        for s in servers.values():
            s.stop()


if __name__ == "__main__":
    main()
