#!/usr/bin/env python3
"""bench/inserts over the wire: pgbench's one-row INSERT of seed 001's row into flashscan
serve and PostgreSQL 15, the same client and script, mode (a) (`synchronous_commit = off`,
set for every connection by PGOPTIONS='-c synchronous_commit=off', the startup packet's
options) or (c) (`on`: durable before acknowledged), interleaved, medians of rounds.

    python3 bench/inserts/wire.py --flashscan BIN [--clients 2,8,64,256] [--modes a,c]
                                  [--seconds 5] [--rounds 5] [--work /work/bench-data/inserts-wire]
                                  [--primary-key]

Setup: `apt-get install -y postgresql` (15: /usr/lib/postgresql/15/bin) as root; PostgreSQL
runs on loopback as the postgres user with bench/concurrency/run.py's configuration
(fsync on, wal_sync_method fdatasync, as its defaults). Both servers are started and
stopped here. Table: the article's, a plain heap (c1 BIGINT, c2 TIMESTAMP, c3 VARCHAR(111),
c4 INT, c5 INT, c6 BIGINT); pgbench has no per-client counter, so each transaction's key is
client × 10^10 + a random number below 10^10 (the session's range; no primary key here, so a
repeat would not fail). `--primary-key`: c1 is the table's PRIMARY KEY on both servers (the
article's table has its key), and each key is client × 10^16 + a random number below 10^16 (a
repeat, which would fail the client, has odds of about 5 × 10^-7 per client per step). Per step: pgbench -n -M prepared -c C -j min(C, 4) -T S -f script,
rows/s = transactions / pgbench's own elapsed, rows counted in the table afterwards as a
check; server CPU (the server process and its children, /proc) per row; commit latency
p50/p99 from pgbench's per-transaction log (-l, the whole round trip); rows per flush:
flashscan's log flush counter (flashscan_stats_history), PostgreSQL's pg_stat_wal.wal_sync.
"""

import argparse
import glob
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "concurrency"))
import run as servers  # noqa: E402  (the concurrency bench's server helpers)

FS_PORT = 55463
FS_HTTP = 55493
C3 = ("c3-" + "x" * 111)[:111]
# The key is computed by pgbench, not in the INSERT: a statement of parameters and literals
# only takes the server's prepared fast path (crates/server fast_insert.rs), as the
# article's stored procedure binds its values.
SCRIPT = ("\\set i random(1, 9999999999)\n\\set c1 :client_id * 10000000000 + :i\n\\set c5 :i %% 1000\n"
          "INSERT INTO bench_inserts VALUES (:c1, '2025-01-01 00:00:00', '%s', :client_id, :c5, :i);\n" % C3)
SCRIPT_PK = ("\\set i random(1, 9999999999999999)\n\\set c1 :client_id * 10000000000000000 + :i\n\\set c5 :i %% 1000\n"
             "INSERT INTO bench_inserts VALUES (:c1, '2025-01-01 00:00:00', '%s', :client_id, :c5, :i);\n" % C3)
TABLE_PK = "CREATE TABLE bench_inserts (c1 BIGINT PRIMARY KEY, c2 TIMESTAMP NOT NULL, c3 VARCHAR(111) NOT NULL, c4 INT NOT NULL, c5 INT NOT NULL, c6 BIGINT NOT NULL)"
TABLE = "CREATE TABLE bench_inserts (c1 BIGINT NOT NULL, c2 TIMESTAMP NOT NULL, c3 VARCHAR(111) NOT NULL, c4 INT NOT NULL, c5 INT NOT NULL, c6 BIGINT NOT NULL)"


def pct(values, q):
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))] if s else float("nan")


def flushes(system, port):
    try:
        if system == "postgres":
            return int(servers.psql(port, "select wal_sync from pg_stat_wal").strip())
        out = servers.psql(port, "select log_flushes_total from flashscan_stats_history order by sample_time desc limit 1", user="bench").strip()
        return int(out)
    except (subprocess.CalledProcessError, ValueError):
        return None


def count(system, port):
    return int(servers.psql(port, "select count(*) from bench_inserts", user="postgres" if system == "postgres" else "bench").strip())


def step(system, port, user, pid, clients, seconds, mode, script_path):
    logdir = tempfile.mkdtemp(prefix="wire-inserts-")
    env = dict(os.environ, PGDATABASE="postgres", PGOPTIONS="-c synchronous_commit=%s" % ("off" if mode == "a" else "on"))
    rows_before, flushes_before = count(system, port), flushes(system, port)
    before = servers.process_figures(pid)
    args = [f"{servers.PG_BIN}/pgbench", "-n", "-h", "127.0.0.1", "-p", str(port), "-U", user, "-M", "prepared", "-c", str(clients),
            "-j", str(min(clients, 4)), "-T", str(seconds), "-f", script_path, "-l", "--log-prefix", os.path.join(logdir, "log")]
    r = subprocess.run(args, capture_output=True, text=True, env=env, cwd=logdir, timeout=seconds * 10 + 120)
    after = servers.process_figures(pid)
    if r.returncode != 0:
        sys.exit(f"{system}: pgbench failed ({r.returncode}): {r.stderr[-2000:]}")
    # flashscan samples its counters once a second: let the last sample land.
    time.sleep(1.2 if system == "flashscan" else 0)
    rows = count(system, port) - rows_before
    flushed = flushes(system, port)
    lat_us = []
    for path in glob.glob(os.path.join(logdir, "log*")):
        with open(path) as f:
            lat_us += [int(line.split()[2]) for line in f if len(line.split()) >= 6]
    subprocess.run(["rm", "-rf", logdir])
    done = len(lat_us)
    if rows != done:
        sys.exit(f"{system}: pgbench logged {done} transactions, the table gained {rows} rows")
    import re
    elapsed = done / float(re.search(r"tps = ([0-9.]+)", r.stdout).group(1)) if done else float("nan")
    cpu = after["cpu_s"] - before["cpu_s"]
    return {"system": system, "mode": mode, "clients": clients, "rows": rows, "rows_per_s": rows / elapsed, "server_cpu_us_per_row": cpu * 1e6 / max(rows, 1),
            "p50_us": pct(lat_us, 0.5), "p99_us": pct(lat_us, 0.99),
            "rows_per_flush": rows / (flushed - flushes_before) if flushed is not None and flushes_before is not None and flushed > flushes_before else float("nan")}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--flashscan", required=True)
    ap.add_argument("--work", default="/work/bench-data/inserts-wire")
    ap.add_argument("--clients", default="2,8,64,256")
    ap.add_argument("--modes", default="a,c")
    ap.add_argument("--seconds", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--keep", action="store_true", help="keep both databases under --work after the run (removed by default)")
    ap.add_argument("--primary-key", action="store_true", help="c1 as the PRIMARY KEY on both servers, random keys in each client's range")
    a = ap.parse_args()
    table, script_text = (TABLE_PK, SCRIPT_PK) if a.primary_key else (TABLE, SCRIPT)
    os.makedirs(a.work, exist_ok=True)
    clients = [int(c) for c in a.clients.split(",")]
    modes = a.modes.split(",")
    script = os.path.join(a.work, "insert.sql")
    with open(script, "w") as f:
        f.write(script_text)
    pg = servers.Postgres(a.work, max(clients) + 10)
    pg.init()
    pg.start()
    db = os.path.join(a.work, "flashscan-db")
    subprocess.run(["rm", "-rf", db], check=True)
    servers.sh([a.flashscan, "init", db], stdout=subprocess.DEVNULL)
    fs = servers.Flashscan(a.flashscan, db, max(clients) + 10, port=FS_PORT, http_port=FS_HTTP)
    fs.start()
    results = []
    try:
        servers.psql(servers.PG_PORT, "DROP TABLE IF EXISTS bench_inserts; " + table)
        servers.psql(FS_PORT, table, user="bench")
        # flashscan's counters are sampled once a second: the first step needs a sample before it.
        time.sleep(1.5)
        systems = [("flashscan", FS_PORT, "bench", fs.pid), ("postgres", servers.PG_PORT, "postgres", pg.pid)]
        for rnd in range(a.rounds):
            for mode in modes:
                for c in clients:
                    for name, port, user, pid in systems:
                        r = step(name, port, user, pid(), c, a.seconds, mode, script)
                        r["round"] = rnd
                        results.append(r)
                        print(r, flush=True)
    finally:
        fs.stop()
        pg.stop()
        # Both databases hold every row the run inserted (GBs at 64 clients): gone unless kept.
        if not a.keep:
            for d in (db, pg.data):
                subprocess.run(["rm", "-rf", d])
    med = lambda rs, k: statistics.median(x[k] for x in rs)  # noqa: E731
    print(f"\nmedians over {a.rounds} rounds, {a.seconds} s per step, pgbench -M prepared one-row INSERT" + (", c1 PRIMARY KEY" if a.primary_key else ", no key"))
    print("%-4s %7s %-10s %10s %12s %9s %9s %10s %9s" % ("mode", "clients", "system", "rows/s", "cpu_us/row", "p50_us", "p99_us", "rows/flush", "fs ÷ pg"))
    for mode in modes:
        for c in clients:
            fs_r = [x for x in results if x["system"] == "flashscan" and x["mode"] == mode and x["clients"] == c]
            pg_r = [x for x in results if x["system"] == "postgres" and x["mode"] == mode and x["clients"] == c]
            for name, rs in (("flashscan", fs_r), ("postgres", pg_r)):
                ratio = "%.2f" % (med(fs_r, "rows_per_s") / med(pg_r, "rows_per_s")) if name == "flashscan" else ""
                print("%-4s %7d %-10s %10.0f %12.1f %9.0f %9.0f %10.1f %9s" % (mode, c, name, med(rs, "rows_per_s"), med(rs, "server_cpu_us_per_row"), med(rs, "p50_us"), med(rs, "p99_us"), med(rs, "rows_per_flush"), ratio))


if __name__ == "__main__":
    main()
