#!/usr/bin/env python3
"""INSERT over the wire, one row per transaction: flashscan serve vs PostgreSQL 15, the same
client (pgbench, prepared protocol, a custom script), durable commits on both sides.

    python3 bench/concurrency/inserts.py --flashscan /path/to/release/flashscan
    python3 bench/concurrency/inserts.py --clients 8,64 --duration 10 --rounds 5
    python3 bench/concurrency/inserts.py --flashscan NEW --flashscan-before OLD   # an A/B

With --flashscan-before, a second flashscan server (the other binary, its own database,
the next port) runs beside the first and every step runs on it too, right before the
new binary's: before, flashscan, PostgreSQL per client count and round. The summary then
gives both binaries' figures and, per client count, the median over rounds of new ÷ before
and of each ÷ PostgreSQL in the same round (the machine's load moves within minutes;
ratios of neighbouring steps mean more than absolute rows/s).

Each step runs pgbench for --duration seconds against one server, then the other
(interleaved, A B A B ...), for every client count and round; the figures are medians
over the rounds. rows/s = transactions pgbench completed / elapsed (each transaction is
one INSERT of one row, acknowledged only after its commit is durable on both systems:
flashscan's log flush, PostgreSQL's synchronous_commit = on with fsync = on — its
defaults, written into its configuration so nothing else decides). The rows are counted
in both tables after each step as a check. CPU seconds of each server process (and its
children) are reported beside elapsed.

Both databases live under --work, on the same file system. PostgreSQL runs on loopback as
the postgres user; both servers are started and stopped by this script. flashscan's dashboard
is screenshotted with headless Chromium during the last flashscan step
(results/inserts-dashboard.png).

Results: bench/concurrency/results/inserts.md and inserts.json.
"""

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import run  # noqa: E402  (the concurrency bench's server helpers)

SCRIPT = "\\set id random(1, 1000000000)\nINSERT INTO ins VALUES (:id, :client_id, 'one row per transaction');\n"
TABLE = "id BIGINT NOT NULL, client INT NOT NULL, note TEXT"


def pgbench(port, user, clients, duration, script_path):
    args = [f"{run.PG_BIN}/pgbench", "-n", "-h", "127.0.0.1", "-p", str(port), "-U", user, "-M", "prepared",
            "-c", str(clients), "-j", str(min(clients, 4)), "-T", str(duration), "-f", script_path]
    env = dict(os.environ, PGDATABASE="postgres")
    t0 = time.time()
    r = subprocess.run(args, capture_output=True, text=True, env=env)
    elapsed = time.time() - t0
    if r.returncode != 0:
        raise RuntimeError(f"pgbench failed ({r.returncode}): {r.stderr[-2000:]}")
    done = re.search(r"number of transactions actually processed: (\d+)", r.stdout)
    lat = re.search(r"latency average = ([\d.]+) ms", r.stdout)
    tps = re.search(r"tps = ([\d.]+) \(without initial connection time\)", r.stdout)
    return {
        "transactions": int(done.group(1)) if done else 0,
        "latency_ms_avg": float(lat.group(1)) if lat else float("nan"),
        "tps": float(tps.group(1)) if tps else float("nan"),
        "elapsed_s": elapsed,
    }


def count(port, user):
    return int(run.psql(port, "select count(*) from ins", user=user).strip())


def commit_totals(port):
    """flashscan's own counters, cumulative: statements acknowledged, write-path commits
    (groups) and log flushes, from the newest one-second sample; None if the server has
    no such columns (an older binary)."""
    try:
        out = run.psql(port, "select statements_committed_total, commits_total, log_flushes_total "
                       "from flashscan_stats_history order by sample_time desc limit 1", user="bench").strip()
        return [int(x) for x in out.split("|")]
    except (subprocess.CalledProcessError, ValueError):
        return None


def pg_wal_syncs(port):
    """PostgreSQL's WAL syncs (fdatasync of the WAL) since its statistics began: its log
    flushes, to set statements per flush beside flashscan's (pg_stat_wal, PostgreSQL 14+)."""
    try:
        return int(run.psql(port, "select wal_sync from pg_stat_wal").strip())
    except (subprocess.CalledProcessError, ValueError):
        return None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--clients", default="1,8,64")
    ap.add_argument("--duration", type=int, default=10, help="seconds per step and system")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--work", default="/work/bench-data/inserts")
    ap.add_argument("--profile", default="release", choices=["release", "debug"])
    ap.add_argument("--out", default=os.path.join(HERE, "results"))
    ap.add_argument("--flashscan", help="a flashscan binary (default: build one)")
    ap.add_argument("--serve-args", default="", help="more arguments for flashscan serve, e.g. '--commit-workers 1'")
    ap.add_argument("--flashscan-before", help="a second flashscan binary run beside --flashscan, step by step (an A/B)")
    a = ap.parse_args()
    clients = [int(c) for c in a.clients.split(",")]
    os.makedirs(a.work, exist_ok=True)
    os.makedirs(a.out, exist_ok=True)
    if os.geteuid() == 0:
        shutil.chown(a.work, "postgres")
    fs = a.flashscan or run.flashscan_bin(a.profile)
    max_conn = max(clients) + 10

    # A fresh flashscan database that takes writes.
    db = os.path.join(a.work, "flashscan-inserts")
    shutil.rmtree(db, ignore_errors=True)
    run.sh([fs, "init", db], stdout=subprocess.DEVNULL)
    flash = run.Flashscan(fs, db, max_conn, a.serve_args.split())
    before = None
    if a.flashscan_before:
        db_before = os.path.join(a.work, "flashscan-inserts-before")
        shutil.rmtree(db_before, ignore_errors=True)
        run.sh([a.flashscan_before, "init", db_before], stdout=subprocess.DEVNULL)
        before = run.Flashscan(a.flashscan_before, db_before, max_conn, a.serve_args.split(), port=run.FS_PORT + 1, http_port=run.FS_HTTP + 1)
    servers = {"flashscan": flash}
    if before:
        servers = {"before": before, "flashscan": flash}

    pg = run.Postgres(a.work, max_conn)
    pg.init()
    with open(os.path.join(pg.data, "postgresql.auto.conf"), "a") as f:
        f.write("fsync = on\nsynchronous_commit = on\nwal_sync_method = fdatasync\n")
    pg.start()
    script = tempfile.NamedTemporaryFile("w", suffix=".sql", delete=False)
    script.write(SCRIPT)
    script.close()
    os.chmod(script.name, 0o644)
    results = []
    shot = False
    try:
        run.psql(run.PG_PORT, f"DROP TABLE IF EXISTS ins; CREATE TABLE ins ({TABLE})")
        for server in servers.values():
            server.start()
            run.psql(server.port, f"CREATE TABLE ins ({TABLE})", user="bench")
        for rnd in range(a.rounds):
            for n in clients:
                for system in list(servers) + ["postgresql"]:
                    if system in servers:
                        port, user, pid = servers[system].port, "bench", servers[system].pid
                    else:
                        port, user, pid = run.PG_PORT, "postgres", pg.pid
                    rows_before = count(port, user)
                    totals0 = commit_totals(port) if system in servers else None
                    syncs0 = pg_wal_syncs(port) if system == "postgresql" else None
                    cpu0 = run.process_figures(pid())["cpu_s"]
                    last = rnd == a.rounds - 1 and n == clients[-1] and system == "flashscan"
                    shooter = None
                    if last:
                        def take():
                            nonlocal shot
                            shot = run.screenshot(os.path.join(a.out, "inserts-dashboard.png"))
                        shooter = threading.Timer(a.duration * 0.5, take)
                        shooter.start()
                    r = pgbench(port, user, n, a.duration, script.name)
                    if shooter:
                        shooter.join()
                    cpu = run.process_figures(pid())["cpu_s"] - cpu0
                    rows = count(port, user) - rows_before
                    if rows != r["transactions"]:
                        raise RuntimeError(f"{system}: pgbench counted {r['transactions']} transactions, the table gained {rows} rows")
                    r.update(system=system, clients=n, round=rnd, rows=rows, rows_per_s=rows / r["elapsed_s"], server_cpu_s=cpu,
                             server_cpu_us_per_row=cpu * 1e6 / rows if rows else float("nan"))
                    if totals0:
                        time.sleep(1.2)  # the sampler's next second holds the step's last commits
                        totals1 = commit_totals(port)
                        if totals1:
                            statements, commits, flushes = (b - a_ for a_, b in zip(totals0, totals1))
                            r.update(statements_per_commit=statements / commits if commits else float("nan"),
                                     statements_per_flush=statements / flushes if flushes else float("nan"),
                                     log_flushes_per_s=flushes / r["elapsed_s"])
                    if syncs0 is not None:
                        syncs1 = pg_wal_syncs(port)
                        if syncs1 is not None and syncs1 > syncs0:
                            r.update(statements_per_flush=rows / (syncs1 - syncs0), log_flushes_per_s=(syncs1 - syncs0) / r["elapsed_s"])
                    results.append(r)
                    extra = ""
                    if "statements_per_commit" in r:
                        extra = (f", {r['statements_per_commit']:.1f} statements per commit, {r['statements_per_flush']:.1f} per log flush, "
                                 f"{r['log_flushes_per_s']:.0f} flushes/s")
                    elif "statements_per_flush" in r:
                        extra = f", {r['statements_per_flush']:.1f} statements per WAL sync, {r['log_flushes_per_s']:.0f} syncs/s"
                    print(f"round {rnd} {n:>3} clients {system:>10}: {r['rows_per_s']:9.1f} rows/s (pgbench tps {r['tps']:.1f}, "
                          f"latency avg {r['latency_ms_avg']:.2f} ms, {rows} rows in {r['elapsed_s']:.1f} s, server CPU {cpu:.1f} s, "
                          f"{r['server_cpu_us_per_row']:.0f} us/row{extra})", flush=True)
    finally:
        for server in servers.values():
            server.stop()
        pg.stop()
        os.unlink(script.name)
    with open(os.path.join(a.out, "inserts.json"), "w") as f:
        json.dump({"duration_s": a.duration, "profile": a.profile, "results": results}, f, indent=1)
    lines = [f"# bench/concurrency/inserts.py: one row per transaction over the wire, {a.duration} s per step, "
             f"{a.rounds} rounds interleaved, medians, flashscan {a.profile} build", "",
             "| clients | flashscan rows/s | PostgreSQL rows/s | ratio fs/pg | latency avg ms fs / pg | server CPU s fs / pg | server CPU us/row fs / pg | fs statements per commit / per log flush | pg statements per WAL sync |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for n in clients:
        f_ = [r for r in results if r["clients"] == n and r["system"] == "flashscan"]
        p_ = [r for r in results if r["clients"] == n and r["system"] == "postgresql"]
        def med(rs, k):
            v = [r[k] for r in rs if k in r]
            return statistics.median(v) if v else float("nan")
        lines.append(f"| {n} | {med(f_, 'rows_per_s'):.0f} | {med(p_, 'rows_per_s'):.0f} | "
                     f"{med(f_, 'rows_per_s') / med(p_, 'rows_per_s'):.2f} | {med(f_, 'latency_ms_avg'):.2f} / {med(p_, 'latency_ms_avg'):.2f} | "
                     f"{med(f_, 'server_cpu_s'):.1f} / {med(p_, 'server_cpu_s'):.1f} | "
                     f"{med(f_, 'server_cpu_us_per_row'):.0f} / {med(p_, 'server_cpu_us_per_row'):.0f} | "
                     f"{med(f_, 'statements_per_commit'):.1f} / {med(f_, 'statements_per_flush'):.1f} | {med(p_, 'statements_per_flush'):.1f} |")
    if before:
        def per_round(n, num, den):
            ratios = []
            for rnd in range(a.rounds):
                x = [r["rows_per_s"] for r in results if r["clients"] == n and r["round"] == rnd and r["system"] == num]
                y = [r["rows_per_s"] for r in results if r["clients"] == n and r["round"] == rnd and r["system"] == den]
                if x and y and y[0]:
                    ratios.append(x[0] / y[0])
            return ratios
        lines += ["", f"A/B: before = {a.flashscan_before}, new = {fs}; ratios are medians over rounds of the same round's steps", "",
                  "| clients | before rows/s | new rows/s | PostgreSQL rows/s | new ÷ before | before ÷ pg | new ÷ pg | CPU us/row before / new | statements per flush before / new |",
                  "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
        for n in clients:
            b_ = [r for r in results if r["clients"] == n and r["system"] == "before"]
            f_ = [r for r in results if r["clients"] == n and r["system"] == "flashscan"]
            p_ = [r for r in results if r["clients"] == n and r["system"] == "postgresql"]
            def med(rs, k):
                v = [r[k] for r in rs if k in r]
                return statistics.median(v) if v else float("nan")
            def mr(v):
                return f"{statistics.median(v):.2f} ({', '.join(f'{x:.2f}' for x in v)})" if v else "nan"
            lines.append(f"| {n} | {med(b_, 'rows_per_s'):.0f} | {med(f_, 'rows_per_s'):.0f} | {med(p_, 'rows_per_s'):.0f} | "
                         f"{mr(per_round(n, 'flashscan', 'before'))} | {mr(per_round(n, 'before', 'postgresql'))} | {mr(per_round(n, 'flashscan', 'postgresql'))} | "
                         f"{med(b_, 'server_cpu_us_per_row'):.0f} / {med(f_, 'server_cpu_us_per_row'):.0f} | "
                         f"{med(b_, 'statements_per_flush'):.1f} / {med(f_, 'statements_per_flush'):.1f} |")
    lines += ["", "Target (issue 12): flashscan >= 2x PostgreSQL's rows/s at 8 and 64 clients, both durable "
              "(PostgreSQL: fsync = on, synchronous_commit = on).",
              "Command: python3 bench/concurrency/inserts.py " + " ".join(sys.argv[1:])]
    if shot:
        lines.append("inserts-dashboard.png: flashscan's live dashboard (headless Chromium) during the last flashscan step.")
    with open(os.path.join(a.out, "inserts.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
