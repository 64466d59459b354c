#!/usr/bin/env python3
"""Two flashscan builds side by side on one cursor loop: the server CPU of a 1 M-row
result through psycopg's named cursor, before and after a change.

    python3 bench/cursors/ab.py --before OLD_BIN --flashscan NEW_BIN --db DB [--itersize 2000] [--rounds 10]

DB: a flashscan database with table t (bench/cursors/run.py leaves one at
/tmp/flashscan-bench-cursors/fs). Each build serves its own copy of it (both up at once,
ports 55471/55472); after one warm-up iteration each, every round iterates the whole
`SELECT * FROM t` once on each server in a shuffled order (DECLARE, FETCH FORWARD N …,
CLOSE in a transaction). Printed: medians of wall time (client clock) and server CPU
(utime + stime of the server process from /proc, 10 ms ticks), and after / before.
"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time

import psycopg

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
import common  # noqa: E402


def cpu_s(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--before", required=True)
    ap.add_argument("--flashscan", required=True)
    ap.add_argument("--db", required=True)
    ap.add_argument("--itersize", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=10)
    a = ap.parse_args()
    builds = {"before": a.before, "after": a.flashscan}
    ports = {"before": 55471, "after": 55472}
    procs = {}
    try:
        for k, binary in builds.items():
            copy = f"/tmp/flashscan-cursor-ab-{k}"
            shutil.rmtree(copy, ignore_errors=True)
            shutil.copytree(a.db, copy, ignore=shutil.ignore_patterns("serve.json"))
            procs[k] = subprocess.Popen([binary, "serve", copy, "--listen", f"127.0.0.1:{ports[k]}"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(3)
        conns = {k: psycopg.connect(f"host=127.0.0.1 port={ports[k]} user=flashscan dbname=flashscan") for k in builds}

        def once(k):
            conn, t0, c0 = conns[k], time.time(), cpu_s(procs[k].pid)
            with conn.transaction():
                cur = conn.cursor(name="c")
                cur.itersize = a.itersize
                cur.execute("SELECT * FROM t")
                rows = sum(1 for _ in cur)
                cur.close()
            return time.time() - t0, cpu_s(procs[k].pid) - c0, rows

        for k in builds:
            once(k)
        results = {k: [] for k in builds}
        for r in range(a.rounds):
            for k in common.round_order(builds, r):
                results[k].append(once(k))
        med = {k: (statistics.median(r[0] for r in v), statistics.median(r[1] for r in v), v[0][2]) for k, v in results.items()}
        for k, (wall, cpu, rows) in med.items():
            print(f"{k}: {rows} rows, wall {wall:.3f} s, server CPU {cpu:.2f} s (medians of {a.rounds})")
        print(f"after / before: wall {med['after'][0] / med['before'][0]:.3f}, CPU {med['after'][1] / med['before'][1]:.3f}")
    finally:
        for p in procs.values():
            p.terminate()
            p.wait(timeout=30)


if __name__ == "__main__":
    main()
