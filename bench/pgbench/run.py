#!/usr/bin/env python3
"""pgbench's TPC-B (three UPDATEs, a SELECT and an INSERT per transaction) against
flashscan serve and PostgreSQL 15, the same clients, interleaved per round.

    python3 bench/pgbench/run.py --flashscan /work/target/release/flashscan
    python3 bench/pgbench/run.py --flashscan BIN --scale 1 --clients 1,4 --seconds 10 --rounds 5
    python3 bench/pgbench/run.py --flashscan NEW --flashscan-before OLD   # before/after, interleaved

Setup: PostgreSQL gets `pgbench -i -s SCALE` (its default steps `dtgvp`: drop, create the
four tables, generate the rows client-side — TRUNCATE, INSERT … SELECT, COPY FROM STDIN —,
VACUUM, primary keys). flashscan gets `pgbench -i -I dtgp -s SCALE` (--flashscan-steps): the
same without VACUUM, which flashscan refuses (it has no dead tuples to reclaim that way);
its primary keys are enforced and its UPDATEs and SELECTs find their row through them
(issue 29). `--flashscan-steps dtg` measures it without keys (scans of the account's hash
partition).

Each round runs every (server, clients) pair once, in a shuffled order (bench/common.py's
round_order), for --seconds: `pgbench -n -M simple -c C -j min(C, 2) -T S` with the
built-in script. Printed per pair: transactions/s (pgbench's own count, excluding
connection time), mean latency, and the server's CPU ms per transaction (utime + stime of
the server process and its children, from /proc, before and after: for PostgreSQL its
backends; flashscan is one process). Medians over rounds, and flashscan / PostgreSQL.
Durability: both commit durably (PostgreSQL's default synchronous_commit = on, fsync on;
flashscan's commits wait for their log flush). Warm: both servers keep the tables in
memory (scale 1 is 13 MB); the first round is a warmup and not counted.
"""

import argparse
import os
import re
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
import common  # noqa: E402


servers = common.load_by_path("concurrency_run", os.path.join(HERE, "..", "concurrency", "run.py"))

FS_PORT = 55453
FS_HTTP = 55491


def pgbench(port, user, args, timeout_s):
    cmd = [f"{servers.PG_BIN}/pgbench", "-h", "127.0.0.1", "-p", str(port), "-U", user] + args + ["postgres"]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)


def run_round(name, port, user, pid, clients, seconds):
    before = servers.process_figures(pid)
    out = pgbench(port, user, ["-n", "-M", "simple", "-c", str(clients), "-j", str(min(clients, 2)), "-T", str(seconds)], seconds * 10 + 120)
    after = servers.process_figures(pid)
    if out.returncode != 0:
        sys.exit(f"{name}: pgbench failed ({out.returncode}):\n{out.stderr[-2000:]}")
    tps = float(re.search(r"tps = ([0-9.]+)", out.stdout).group(1))
    latency = float(re.search(r"latency average = ([0-9.]+) ms", out.stdout).group(1))
    done = int(re.search(r"number of transactions actually processed: (\d+)", out.stdout).group(1))
    failed = re.search(r"number of failed transactions: (\d+)", out.stdout)
    cpu_ms = (after["cpu_s"] - before["cpu_s"]) * 1000 / max(done, 1)
    return {"tps": tps, "latency_ms": latency, "cpu_ms_per_txn": cpu_ms, "failed": int(failed.group(1)) if failed else 0, "transactions": done}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--flashscan", required=True)
    ap.add_argument("--work", default="/tmp/pgbench-bench")
    ap.add_argument("--scale", type=int, default=1)
    ap.add_argument("--clients", default="1,4")
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--flashscan-steps", default="dtgp", help="pgbench -i steps for flashscan (dtgp: with primary keys; dtg: without)")
    ap.add_argument("--flashscan-before", help="an earlier flashscan build, run the same way beside (its own database and port, in the same interleaved rounds): before/after")
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    clients = [int(c) for c in a.clients.split(",")]

    pg = servers.Postgres(a.work, max(clients) + 10)
    pg.init()
    pg.start()
    db = os.path.join(a.work, "flashscan-db")
    if os.path.exists(db):
        subprocess.run(["rm", "-rf", db], check=True)
    flashscans = [("flashscan", a.flashscan, db, FS_PORT, FS_HTTP)]
    if a.flashscan_before:
        flashscans.append(("before", a.flashscan_before, db + "-before", FS_PORT + 1, FS_HTTP + 1))
    started = []
    systems = []
    try:
        for name, binary, path, port, http in flashscans:
            if os.path.exists(path):
                subprocess.run(["rm", "-rf", path], check=True)
            servers.sh([binary, "init", path], stdout=subprocess.DEVNULL)
            fs = servers.Flashscan(binary, path, max(clients) + 10, port=port, http_port=http)
            fs.start()
            started.append(fs)
            init = pgbench(port, "bench", ["-i", "-I", a.flashscan_steps, "-s", str(a.scale)], 3600)
            if init.returncode != 0:
                sys.exit(f"{name}: pgbench -i failed:\n{init.stderr[-3000:]}")
            systems.append((name, port, "bench", fs.pid))
        init = pgbench(servers.PG_PORT, "postgres", ["-i", "-s", str(a.scale)], 3600)
        if init.returncode != 0:
            sys.exit(f"postgres: pgbench -i failed:\n{init.stderr[-3000:]}")
        systems.append(("postgres", servers.PG_PORT, "postgres", pg.pid))
        runs = [(s, c) for s in systems for c in clients]
        results = {}
        for r in range(a.rounds + 1):
            for (name, port, user, pid), c in common.round_order(runs, seed=r):
                figures = run_round(name, port, user, pid(), c, a.seconds)
                if r > 0:
                    results.setdefault((name, c), []).append(figures)
                print(f"round {r}{' (warmup)' if r == 0 else ''} {name} c={c}: {figures['tps']:.0f} tps, {figures['latency_ms']:.2f} ms, {figures['cpu_ms_per_txn']:.3f} CPU ms/txn, {figures['failed']} failed", flush=True)
    finally:
        for fs in started:
            fs.stop()
        pg.stop()
    med = lambda name, c, k: statistics.median(f[k] for f in results[(name, c)])  # noqa: E731
    rows = []
    for c in clients:
        f_tps, p_tps = med("flashscan", c, "tps"), med("postgres", c, "tps")
        f_cpu, p_cpu = med("flashscan", c, "cpu_ms_per_txn"), med("postgres", c, "cpu_ms_per_txn")
        row = [str(c), f"{f_tps:.0f}", f"{p_tps:.0f}", f"{f_tps / p_tps:.2f}", f"{f_cpu:.3f}", f"{p_cpu:.3f}", f"{f_cpu / p_cpu:.2f}"]
        if a.flashscan_before:
            b_tps, b_cpu = med("before", c, "tps"), med("before", c, "cpu_ms_per_txn")
            row += [f"{b_tps:.0f}", f"{b_cpu:.3f}", f"{f_tps / b_tps:.2f}"]
        rows.append(row)
    header = ["clients", "flashscan tps", "PostgreSQL tps", "tps ratio", "flashscan CPU ms/txn", "PostgreSQL CPU ms/txn", "CPU ratio"]
    if a.flashscan_before:
        header += ["before tps", "before CPU ms/txn", "tps after/before"]
    common.print_markdown_table(
        f"pgbench TPC-B, scale {a.scale}, {a.seconds} s x {a.rounds} rounds (medians; PostgreSQL -i steps dtgvp, flashscan {a.flashscan_steps})",
        header,
        rows,
    )


if __name__ == "__main__":
    main()
