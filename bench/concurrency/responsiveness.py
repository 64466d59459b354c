#!/usr/bin/env python3
"""Is the server still there while CPU-bound queries hold every core? flashscan serve vs
PostgreSQL 15 on the same rows (the data of bench/concurrency/run.py), interleaved per round.

    python3 bench/concurrency/responsiveness.py --work /work/bench-data/lead/grid \\
        --flashscan target/release/flashscan --rounds 5

Each round, for each server: HEAVY connections start a CPU-bound nested-loop join that
runs for many seconds on both servers (a self-join of part with a predicate no index or
hash can serve). After --settle seconds, one more connection sends `select 1` back to back
for --window seconds: its round trips (p50, p99, max) say how long a small query waits
behind the heavy ones. Then every heavy query is canceled (the protocol's cancel request,
psycopg's Connection.cancel) and the time from the cancel to the query's error is taken.
A round trip of `select 1` with no heavy query running is the baseline. CPU seconds of the
server process (and its children) over the round are printed beside.

Both servers get the same clients, the same queries, the same number of heavy queries
(default 2 = the cores), and PostgreSQL its settings from run.py (parallel workers allowed,
as flashscan's scan uses both cores). Timing: in this client process, wall clock.
Medians over rounds are printed with the ratio flashscan / PostgreSQL.
"""

import argparse
import os
import statistics
import sys
import threading
import time

import psycopg

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run  # noqa: E402  (the concurrency bench's server helpers)

HEAVY_SQL = ("select count(*) from part a, part b "
             "where a.p_partkey + b.p_partkey < 0 and a.p_partkey <= {n} and b.p_partkey <= {n}")


def percentile(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def connect(port, user):
    # PostgreSQL knows only its superuser here (trust on loopback); flashscan takes any name.
    return psycopg.connect(host="127.0.0.1", port=port, user=user if port == run.FS_PORT else "postgres", dbname="postgres", autocommit=True)


class Heavy(threading.Thread):
    def __init__(self, port, sql):
        super().__init__(daemon=True)
        self.conn = connect(port, "heavy")
        self.sql, self.ended_at, self.error = sql, None, None

    def run(self):
        try:
            self.conn.execute(self.sql).fetchall()
        except Exception as e:  # the cancel ends it with 57014
            self.error = getattr(e, "sqlstate", None) or type(e).__name__
        self.ended_at = time.monotonic()


def round_trips(conn, seconds):
    out, end = [], time.monotonic() + seconds
    while time.monotonic() < end:
        t = time.monotonic()
        conn.execute("select 1").fetchall()
        out.append(time.monotonic() - t)
    return out


def one_round(port, pid, a):
    probe = connect(port, "probe")
    base = round_trips(probe, 1.0)
    cpu0 = run.process_figures(pid)["cpu_s"]
    heavies = [Heavy(port, HEAVY_SQL.format(n=a.rows)) for _ in range(a.heavy)]
    for h in heavies:
        h.start()
    time.sleep(a.settle)
    loaded = round_trips(probe, a.window)
    ran_through = sum(1 for h in heavies if h.ended_at is not None)
    canceled_at = time.monotonic()
    for h in heavies:
        h.conn.cancel()
    for h in heavies:
        h.join(timeout=120)
    cancel_s = [h.ended_at - canceled_at for h in heavies if h.ended_at and h.ended_at >= canceled_at]
    cpu = run.process_figures(pid)["cpu_s"] - cpu0
    for h in heavies:
        h.conn.close()
    probe.close()
    return {
        "base_p50_ms": statistics.median(base) * 1e3,
        "p50_ms": statistics.median(loaded) * 1e3,
        "p99_ms": percentile(loaded, 99) * 1e3,
        "max_ms": max(loaded) * 1e3,
        "round_trips": len(loaded),
        "cancel_max_ms": max(cancel_s) * 1e3 if cancel_s else float("nan"),
        "ended_before_cancel": ran_through,
        "errors": sorted({str(h.error) for h in heavies}),
        "cpu_s": cpu,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--work", required=True, help="run.py's --work: flashscan-sf1 and pg15 under it")
    ap.add_argument("--flashscan", required=True)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--heavy", type=int, default=2, help="heavy queries at once (default: the cores)")
    ap.add_argument("--rows", type=int, default=100_000, help="part rows per side of the heavy join")
    ap.add_argument("--settle", type=float, default=1.0, help="seconds between the heavy queries' start and the probe")
    ap.add_argument("--window", type=float, default=3.0, help="seconds of select 1 round trips under load")
    ap.add_argument("--skip-postgres", action="store_true")
    a = ap.parse_args()

    fs = run.Flashscan(a.flashscan, os.path.join(a.work, "flashscan-sf1"), 20)
    pg = None if a.skip_postgres else run.Postgres(a.work, 20)
    if pg:
        pg.init()
    results = {"flashscan": [], "postgres": []}
    for r in range(a.rounds):
        for name, server in (("flashscan", fs), ("postgres", pg)):
            if server is None:
                continue
            server.start()
            try:
                port = run.FS_PORT if name == "flashscan" else run.PG_PORT
                res = one_round(port, server.pid(), a)
            finally:
                server.stop()
            results[name].append(res)
            print(f"round {r + 1} {name:9}: select 1 p50 {res['p50_ms']:8.2f} ms  p99 {res['p99_ms']:8.2f}  "
                  f"max {res['max_ms']:8.1f}  (idle {res['base_p50_ms']:.3f})  n {res['round_trips']:6}  "
                  f"cancel {res['cancel_max_ms']:8.1f} ms  ended early {res['ended_before_cancel']}  "
                  f"{res['errors']}  cpu {res['cpu_s']:.1f} s", flush=True)
    keys = ["base_p50_ms", "p50_ms", "p99_ms", "max_ms", "cancel_max_ms", "cpu_s"]
    print(f"\nmedians of {a.rounds} rounds, {a.heavy} heavy queries, {a.window:.0f} s window:")
    print("| | " + " | ".join(keys) + " |")
    print("|---" * (len(keys) + 1) + "|")
    med = {}
    for name, rs in results.items():
        if rs:
            med[name] = {k: statistics.median(x[k] for x in rs) for k in keys}
            print(f"| {name} | " + " | ".join(f"{med[name][k]:.2f}" for k in keys) + " |")
    if len(med) == 2:
        print("| flashscan / postgres | " + " | ".join(
            f"{med['flashscan'][k] / med['postgres'][k]:.2f}" if med['postgres'][k] else "-" for k in keys) + " |")


if __name__ == "__main__":
    main()
