#!/usr/bin/env python3
"""Many clients at once: flashscan serve (column store) vs PostgreSQL 15 (heap), same rows,
same client (pgbench with custom scripts, prepared protocol), interleaved per step.

    python3 bench/concurrency/run.py                      # SF 1, clients 1,10,50,100
    python3 bench/concurrency/run.py --clients 1,10 --duration 10 --workloads q6
    python3 bench/concurrency/run.py --clients 10,100 --workloads q6 --skip-postgres \
        --flashscan BIN --serve-args="--max-active-queries 2"   # flashscan alone, quicker

For each client count and workload (TPC-H Q1, Q6, Q14 and a mix of the three) it runs
flashscan then PostgreSQL for --duration seconds each (pgbench -T: queries in flight at the
end finish and count), and reports queries/s, p50/p95/p99 latency (pgbench's per-query log),
CPU seconds of the server process beside elapsed, and a per-second timeline as an SVG
chart. A headless Chromium screenshot of flashscan's live dashboard is taken during the
last flashscan step. Results: bench/concurrency/results/ (summary.md, timeline.svg,
dashboard.png, raw JSON).

Data: `flashscan load --sf SF --tables lineitem,part`, lineitem rebuilt as a column store;
PostgreSQL gets the very same rows by COPY from flashscan serve (COPY ... TO STDOUT piped
into COPY ... FROM STDIN), then VACUUM ANALYZE. PostgreSQL runs on loopback as the postgres
user with its data under --work; both servers are started and stopped by this script.
"""

import argparse
import glob
import json
import math
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
HERE = os.path.dirname(os.path.abspath(__file__))
TPCH = os.path.join(ROOT, "crates", "sql", "tests", "tpch")
PG_BIN = "/usr/lib/postgresql/15/bin"
PG_PORT = 55432
FS_PORT = 55433
FS_HTTP = 55480
WORKLOADS = {
    "q1": [("q01.sql", 1)],
    "q6": [("q06.sql", 1)],
    "q14": [("q14.sql", 1)],
    # Short and long queries together: is anyone starved?
    "mix": [("q01.sql", 1), ("q06.sql", 4), ("q14.sql", 2)],
}


def sh(cmd, **kw):
    return subprocess.run(cmd, shell=isinstance(cmd, str), check=True, **kw)


def as_postgres(cmd):
    return ["su", "postgres", "-c", cmd] if os.geteuid() == 0 else ["bash", "-c", cmd]


def flashscan_bin(profile):
    args = ["cargo", "build", "-q", "-p", "flashscan-cli", "--features", "sql"]
    if profile == "release":
        args.append("--release")
    sh(args, cwd=ROOT)
    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
    return os.path.join(target, "release" if profile == "release" else "debug", "flashscan")


def psql(port, sql, host="127.0.0.1", user="postgres", capture=True):
    return subprocess.run(["psql", "-X", "-h", host, "-p", str(port), "-U", user, "-d", "postgres", "-Atc", sql],
                          check=True, capture_output=capture, text=True).stdout


class Flashscan:
    def __init__(self, fs, db, max_connections, extra_args=(), port=FS_PORT, http_port=FS_HTTP):
        self.fs, self.db, self.max_connections, self.proc = fs, db, max_connections, None
        self.extra_args = list(extra_args)
        # Another port pair lets a second server (a "before" binary for an A/B) run beside.
        self.port, self.http_port = port, http_port

    def start(self):
        self.proc = subprocess.Popen([self.fs, "serve", self.db, "--listen", f"127.0.0.1:{self.port}",
                                      "--http", f"127.0.0.1:{self.http_port}", "--max-connections", str(self.max_connections),
                                      # PostgreSQL queues every client without a limit: so must
                                      # flashscan here, or its 30 s queue timeout (53000) ends
                                      # pgbench at 50+ clients of Q1.
                                      "--queue-timeout", "3600"] + self.extra_args,
                                     stderr=subprocess.PIPE, text=True)
        for _ in range(600):
            try:
                psql(self.port, "select 1", user="bench")
                return
            except subprocess.CalledProcessError:
                time.sleep(0.1)
        sys.exit("flashscan serve did not start")

    def stop(self):
        if self.proc:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(timeout=60)
            self.proc = None

    def pid(self):
        return self.proc.pid


class Postgres:
    def __init__(self, work, max_connections):
        self.data = os.path.join(work, "pg15")
        self.max_connections = max_connections

    def init(self):
        if not os.path.exists(os.path.join(self.data, "PG_VERSION")):
            os.makedirs(self.data, exist_ok=True)
            if os.geteuid() == 0:
                shutil.chown(self.data, "postgres")
            sh(as_postgres(f"{PG_BIN}/initdb -D {self.data} -A trust -U postgres >/dev/null"))
        conf = os.path.join(self.data, "postgresql.auto.conf")
        with open(conf, "w") as f:
            f.write(postgres_conf(self.max_connections))
        if os.geteuid() == 0:
            shutil.chown(conf, "postgres")

    def start(self):
        sh(as_postgres(f"{PG_BIN}/pg_ctl -D {self.data} -o '-p {PG_PORT} -k /tmp' -l {self.data}/log -w start"),
           stdout=subprocess.DEVNULL)

    def stop(self):
        subprocess.run(as_postgres(f"{PG_BIN}/pg_ctl -D {self.data} -w -m fast stop"),
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def pid(self):
        with open(os.path.join(self.data, "postmaster.pid")) as f:
            return int(f.readline())


# PostgreSQL's settings for the run, and why (docs/server.md repeats them):
# - max_parallel_workers_per_gather = 2 at every client count (PostgreSQL's own default
#   pool of 8 parallel workers, max_worker_processes = 8): one query may use both of the
#   machine's 2 cores, as flashscan's scan does (2 partitions, 2 threads). The same
#   setting as every earlier run of this bench, so the figures compare.
# - max_connections = DSM_CONNECTION_FACTOR x (clients + 10): PostgreSQL sizes its table of
#   dynamic shared memory segments by max_connections (64 + 5 per backend slot in PG 15).
#   Every parallel query creates segments (its parallel context, a parallel hash join's
#   shared hash table grows in more) even when no worker is free to join it, and at 100
#   clients of Q14 the table ran out: "ERROR: too many dynamic shared memory segments",
#   which ended pgbench (server2's run). More slots cost a few bytes of shared memory each
#   and change nothing else; pgbench still opens only `clients` connections.
DSM_CONNECTION_FACTOR = 4


def postgres_conf(max_connections):
    return (f"max_connections = {max_connections * DSM_CONNECTION_FACTOR}\nshared_buffers = 4GB\nwork_mem = 64MB\n"
            "max_worker_processes = 8\nmax_parallel_workers = 8\nmax_parallel_workers_per_gather = 2\n"
            "jit = off\nlisten_addresses = '127.0.0.1'\n")


def process_figures(pid):
    """CPU seconds (user+system), minor and major page faults and context switches
    (voluntary + involuntary) of a process and its children (PostgreSQL backends are
    children; flashscan is one process): the work a server did, which noise from other
    processes on the machine changes far less than it changes queries per second."""
    tick = os.sysconf("SC_CLK_TCK")
    cpu = faults = major = switches = 0
    pids = [pid]
    try:
        out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout.split()
        pids += [int(p) for p in out]
    except Exception:
        pass
    for p in pids:
        try:
            with open(f"/proc/{p}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            # After the command: state(0) ppid pgrp session tty tpgid flags minflt(7)
            # cminflt majflt(9) cmajflt utime(11) stime cutime cstime(14).
            cpu += (int(fields[11]) + int(fields[12]) + int(fields[13]) + int(fields[14])) / tick
            faults += int(fields[7]) + int(fields[8])
            major += int(fields[9]) + int(fields[10])
            # Per thread (a process's own status counts its main thread only); threads
            # that exited during the step take theirs with them, so this is a lower bound.
            for status in glob.glob(f"/proc/{p}/task/*/status"):
                with open(status) as f:
                    for line in f:
                        if line.startswith(("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")):
                            switches += int(line.split()[1])
        except (OSError, ValueError, IndexError):
            pass
    return {"cpu_s": cpu, "minor_faults": faults, "major_faults": major, "context_switches": switches}


PG_SCHEMA = {
    "lineitem": """l_orderkey BIGINT, l_partkey BIGINT, l_suppkey BIGINT, l_linenumber INT,
        l_quantity DECIMAL(15,2), l_extendedprice DECIMAL(15,2), l_discount DECIMAL(15,2), l_tax DECIMAL(15,2),
        l_returnflag TEXT, l_linestatus TEXT, l_shipdate DATE, l_commitdate DATE, l_receiptdate DATE,
        l_shipinstruct TEXT, l_shipmode TEXT, l_comment TEXT""",
    "part": """p_partkey BIGINT, p_name TEXT, p_mfgr TEXT, p_brand TEXT, p_type TEXT, p_size INT,
        p_container TEXT, p_retailprice DECIMAL(15,2), p_comment TEXT""",
}


def prepare(fs, work, sf, pg, max_connections, serve_args=()):
    db = os.path.join(work, f"flashscan-sf{sf}")
    if not os.path.exists(os.path.join(db, "catalog.json")):
        sh([fs, "load", db, "--sf", str(sf), "--tables", "lineitem,part"])
        sh([fs, "rebuild", db, "lineitem", "--compression", "columnstore"])
    flash = Flashscan(fs, db, max_connections, serve_args)
    if pg is None:
        return flash, "(PostgreSQL skipped)"
    pg.init()
    pg.start()
    loaded = psql(PG_PORT, "select count(*) from pg_tables where tablename in ('lineitem','part')").strip()
    if loaded != "2":
        flash.start()
        try:
            for table, cols in PG_SCHEMA.items():
                psql(PG_PORT, f"DROP TABLE IF EXISTS {table}; CREATE TABLE {table} ({cols})")
                t = time.perf_counter()
                out = subprocess.Popen(["psql", "-X", "-h", "127.0.0.1", "-p", str(FS_PORT), "-U", "bench", "-d", "x",
                                        "-c", f"COPY {table} TO STDOUT"], stdout=subprocess.PIPE)
                sh(["psql", "-X", "-h", "127.0.0.1", "-p", str(PG_PORT), "-U", "postgres", "-d", "postgres",
                    "-c", f"COPY {table} FROM STDIN"], stdin=out.stdout, stdout=subprocess.DEVNULL)
                if out.wait() != 0:
                    sys.exit(f"COPY {table} from flashscan failed")
                print(f"{table}: copied flashscan -> PostgreSQL in {time.perf_counter() - t:.1f} s", flush=True)
            psql(PG_PORT, "VACUUM ANALYZE")
        finally:
            flash.stop()
    counts_pg = psql(PG_PORT, "select (select count(*) from lineitem) || ' ' || (select count(*) from part)").strip()
    return flash, counts_pg


# A step whose pgbench runs this long past --duration is stopped and recorded as failed.
STEP_OVERRUN_S_MAX = 1200


def pgbench(port, user, scripts, clients, duration, logdir):
    args = [f"{PG_BIN}/pgbench", "-n", "-h", "127.0.0.1", "-p", str(port), "-U", user, "-M", "prepared",
            "-c", str(clients), "-j", str(min(clients, 4)), "-T", str(duration), "-l", "--log-prefix",
            os.path.join(logdir, "log")]
    for name, weight in scripts:
        args += ["-f", f"{os.path.join(TPCH, name)}@{weight}"]
    env = dict(os.environ, PGDATABASE="postgres")
    # pgbench -T lets the queries in flight finish: a step may outlast --duration by a
    # query's latency (minutes for PostgreSQL's Q1 at 100 clients), never by this much.
    r = subprocess.run(args, capture_output=True, text=True, env=env, cwd=logdir, timeout=duration + STEP_OVERRUN_S_MAX)
    if r.returncode != 0:
        raise RuntimeError(f"pgbench failed ({r.returncode}): {r.stderr[-2000:]}")
    return r.stdout + r.stderr


def read_logs(logdir):
    """Per query: (end time in s since epoch, latency in ms)."""
    out = []
    for path in glob.glob(os.path.join(logdir, "log*")):
        with open(path) as f:
            for line in f:
                p = line.split()
                # client_id transaction_no time_us script_no time_epoch time_us
                if len(p) >= 6 and p[2].isdigit():
                    lat_ms = int(p[2]) / 1000.0
                    end = int(p[4]) + int(p[5]) / 1e6
                    out.append((end, lat_ms))
    return out


def pct(values, q):
    if not values:
        return float("nan")
    s = sorted(values)
    return s[min(len(s) - 1, int(math.ceil(q * len(s))) - 1)]


def measure(system, name, port, user, pid_of, scripts, clients, duration):
    logdir = tempfile.mkdtemp(prefix=f"bench-{name}-")
    before = process_figures(pid_of())
    t0 = time.time()
    pgbench(port, user, scripts, clients, duration, logdir)
    elapsed = time.time() - t0
    after = process_figures(pid_of())
    cpu = after["cpu_s"] - before["cpu_s"]
    rows = read_logs(logdir)
    shutil.rmtree(logdir)
    lat = [r[1] for r in rows]
    timeline = {}
    for end, _ in rows:
        sec = int(end - t0)
        timeline[sec] = timeline.get(sec, 0) + 1
    return {
        "system": system, "queries": len(rows), "elapsed_s": elapsed, "qps": len(rows) / elapsed if elapsed else 0,
        "p50_ms": pct(lat, 0.50), "p95_ms": pct(lat, 0.95), "p99_ms": pct(lat, 0.99), "server_cpu_s": cpu,
        # Per query: what the server spent, and the cores it got (CPU s / elapsed s).
        "server_cpu_ms_per_query": cpu * 1000 / len(rows) if rows else float("nan"),
        "server_cores_busy": cpu / elapsed if elapsed else float("nan"),
        "minor_faults_per_query": (after["minor_faults"] - before["minor_faults"]) / len(rows) if rows else float("nan"),
        "context_switches_per_query_approx": (after["context_switches"] - before["context_switches"]) / len(rows) if rows else float("nan"),
        "timeline": [timeline.get(s, 0) for s in range(int(elapsed) + 1)],
    }


def screenshot(out_png):
    chrome = shutil.which("chromium") or shutil.which("chromium-browser")
    if not chrome:
        print("no chromium: dashboard screenshot skipped (apt-get install -y chromium)")
        return False
    profile = tempfile.mkdtemp(prefix="chromium-profile-")
    try:
        subprocess.run([chrome, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                        "--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={profile}",
                        "--window-size=1400,1000", "--virtual-time-budget=3000", f"--screenshot={out_png}",
                        f"http://127.0.0.1:{FS_HTTP}/"], check=True, capture_output=True, timeout=120)
        return os.path.exists(out_png)
    finally:
        shutil.rmtree(profile, ignore_errors=True)


def timeline_svg(results, path):
    """Queries completed per second, flashscan vs PostgreSQL, one panel per workload at the
    largest client count."""
    panels = [r for r in results if r["clients"] == max(x["clients"] for x in results)]
    workloads = sorted({r["workload"] for r in panels})
    W, H, pad = 520, 200, 40
    svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W * 2}" height="{H * ((len(workloads) + 1) // 2)}" font-family="sans-serif" font-size="11">']
    for i, wl in enumerate(workloads):
        ox, oy = (i % 2) * W, (i // 2) * H
        pair = {r["system"]: r for r in panels if r["workload"] == wl}
        series = [(s, pair[s]["timeline"], c) for s, c in (("flashscan", "#1f77b4"), ("postgresql", "#d62728")) if s in pair]
        n = max((len(t) for _, t, _ in series), default=1)
        m = max((max(t) if t else 0 for _, t, _ in series), default=1) or 1
        clients = panels[0]["clients"]
        svg.append(f'<text x="{ox + pad}" y="{oy + 14}">{wl}, {clients} clients: queries completed per second</text>')
        svg.append(f'<line x1="{ox + pad}" y1="{oy + H - 25}" x2="{ox + W - 10}" y2="{oy + H - 25}" stroke="#999"/>')
        svg.append(f'<line x1="{ox + pad}" y1="{oy + 20}" x2="{ox + pad}" y2="{oy + H - 25}" stroke="#999"/>')
        svg.append(f'<text x="{ox + 2}" y="{oy + 28}">{m}</text><text x="{ox + 2}" y="{oy + H - 25}">0</text>')
        svg.append(f'<text x="{ox + W - 60}" y="{oy + H - 10}">{n - 1} s</text>')
        for j, (s, t, c) in enumerate(series):
            pts = " ".join(f"{ox + pad + (W - pad - 10) * k / max(n - 1, 1):.1f},{oy + H - 25 - (H - 45) * v / m:.1f}" for k, v in enumerate(t))
            svg.append(f'<polyline fill="none" stroke="{c}" stroke-width="1.5" points="{pts}"/>')
            svg.append(f'<text x="{ox + W - 140}" y="{oy + 30 + 14 * j}" fill="{c}">{s}</text>')
    svg.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(svg))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sf", type=float, default=1)
    ap.add_argument("--clients", default="1,10,50,100")
    ap.add_argument("--workloads", default="q6,q1,q14,mix")
    ap.add_argument("--duration", type=int, default=20, help="seconds per step and system")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--work", default="/work/bench-data")
    ap.add_argument("--profile", default="release", choices=["release", "debug"])
    ap.add_argument("--out", default=os.path.join(HERE, "results"))
    ap.add_argument("--flashscan", help="a flashscan binary built with --features sql (default: build one)")
    ap.add_argument("--prepare-only", action="store_true", help="load both databases, then stop")
    ap.add_argument("--skip-postgres", action="store_true",
                    help="flashscan alone (no PostgreSQL loaded or run): for quick looks at flashscan's own "
                         "scaling; the summary then has no PostgreSQL columns to compare")
    ap.add_argument("--serve-args", default="", help="more arguments for flashscan serve, given with =: --serve-args=\"--max-active-queries 2\"")
    a = ap.parse_args()
    clients = [int(c) for c in a.clients.split(",")]
    workloads = a.workloads.split(",")
    os.makedirs(a.work, exist_ok=True)
    os.makedirs(a.out, exist_ok=True)
    if os.geteuid() == 0:
        shutil.chown(a.work, "postgres")
    max_conn = max(clients) + 10
    fs = a.flashscan or flashscan_bin(a.profile)
    pg = None if a.skip_postgres else Postgres(a.work, max_conn)
    flash, counts = prepare(fs, a.work, a.sf, pg, max_conn, a.serve_args.split())
    print(f"PostgreSQL rows (lineitem part): {counts}", flush=True)
    if a.prepare_only:
        if pg:
            pg.stop()
        return
    systems = ("flashscan",) if a.skip_postgres else ("flashscan", "postgresql")
    flash.start()
    results = []
    shot = False

    def save():
        # After every step: an interrupted run keeps what it measured.
        with open(os.path.join(a.out, "results.json"), "w") as f:
            json.dump({"sf": a.sf, "duration_s": a.duration, "profile": a.profile, "rounds": a.rounds,
                       "command": "python3 bench/concurrency/run.py " + " ".join(sys.argv[1:]), "results": results}, f, indent=1)

    try:
        for rnd in range(a.rounds):
            for n in clients:
                for wl in workloads:
                    scripts = WORKLOADS[wl]
                    for system in systems:
                        try:
                            if system == "flashscan":
                                r = measure(system, wl, FS_PORT, "bench", flash.pid, scripts, n, a.duration)
                            else:
                                r = measure(system, wl, PG_PORT, "postgres", pg.pid, scripts, n, a.duration)
                        except (RuntimeError, subprocess.TimeoutExpired) as e:
                            # One failed step (pgbench aborted, a server error) is recorded and
                            # the run goes on; the summary says which steps failed.
                            r = {"system": system, "failed": " ".join(str(e).split())[-600:]}
                            print(f"round {rnd} {wl:>4} {n:>3} clients {system:>10}: FAILED: {r['failed']}", flush=True)
                            if system == "flashscan" and flash.proc.poll() is not None:
                                flash.start()
                        r.update(workload=wl, clients=n, round=rnd)
                        results.append(r)
                        save()
                        if "failed" not in r:
                            print(f"round {rnd} {wl:>4} {n:>3} clients {system:>10}: {r['qps']:8.2f} q/s  "
                                  f"p50 {r['p50_ms']:9.1f} ms  p95 {r['p95_ms']:9.1f}  p99 {r['p99_ms']:9.1f}  "
                                  f"({r['queries']} queries in {r['elapsed_s']:.1f} s, server CPU {r['server_cpu_s']:.1f} s = "
                                  f"{r['server_cpu_ms_per_query']:.1f} ms/query on {r['server_cores_busy']:.2f} cores, "
                                  f"{r['minor_faults_per_query']:.0f} faults/query, "
                                  f"{r['context_switches_per_query_approx']:.0f} switches/query)", flush=True)
        shot = screenshot(os.path.join(a.out, "dashboard.png"))
    finally:
        flash.stop()
        if pg:
            pg.stop()
        save()
        ok = [r for r in results if "failed" not in r]
        if ok:
            timeline_svg(ok, os.path.join(a.out, "timeline.svg"))
        write_summary(results, a, os.path.join(a.out, "summary.md"), shot)


def write_summary(results, a, path, shot):
    """Medians over the rounds that completed (their count is in the table), the failed
    steps listed, and the issue's three targets checked."""
    lines = [f"# bench/concurrency: SF {a.sf}, {a.duration} s per step, {a.rounds} round(s) asked, flashscan {a.profile} build", "",
             "Command: python3 bench/concurrency/run.py " + " ".join(sys.argv[1:]), "",
             "| workload | clients | rounds fs / pg | flashscan q/s | PostgreSQL q/s | flashscan p50 / p95 / p99 ms | PostgreSQL p50 / p95 / p99 ms | p50 ratio fs/pg | fs p99/p50 | CPU s fs / pg | fs CPU ms/query | fs cores busy | fs faults/query |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]

    def med(rs, k):
        v = [r[k] for r in rs if k in r and not math.isnan(r[k])]
        return statistics.median(v) if v else float("nan")

    def of(wl, n, system):
        return [r for r in results if r["workload"] == wl and r["clients"] == n and r["system"] == system and "failed" not in r]

    keys = sorted({(r["workload"], r["clients"]) for r in results}, key=lambda k: (k[0], k[1]))
    for wl, n in keys:
        f, p = of(wl, n, "flashscan"), of(wl, n, "postgresql")
        lines.append(f"| {wl} | {n} | {len(f)} / {len(p)} | {med(f, 'qps'):.2f} | {med(p, 'qps'):.2f} | "
                     f"{med(f, 'p50_ms'):.0f} / {med(f, 'p95_ms'):.0f} / {med(f, 'p99_ms'):.0f} | "
                     f"{med(p, 'p50_ms'):.0f} / {med(p, 'p95_ms'):.0f} / {med(p, 'p99_ms'):.0f} | "
                     f"{med(f, 'p50_ms') / med(p, 'p50_ms'):.3f} | {med(f, 'p99_ms') / med(f, 'p50_ms'):.2f} | "
                     f"{med(f, 'server_cpu_s'):.0f} / {med(p, 'server_cpu_s'):.0f} | "
                     f"{med(f, 'server_cpu_ms_per_query'):.1f} | {med(f, 'server_cores_busy'):.2f} | "
                     f"{med(f, 'minor_faults_per_query'):.0f} |")
    failed = [r for r in results if "failed" in r]
    if failed:
        lines += ["", "Failed steps (recorded, the run went on):"]
        lines += [f"- round {r['round']} {r['workload']} {r['clients']} clients {r['system']}: {r['failed'][-300:]}" for r in failed]
    lines += ["", "Targets (issue 12): at 100 clients flashscan q/s >= 0.9 x its 10-client q/s, p99/p50 <= 3, "
              "p50 <= 1/5 of PostgreSQL's at every client count.", ""]
    verdict = lambda ok: "met" if ok else "MISSED"
    for wl in sorted({k[0] for k in keys}):
        f10, f100 = med(of(wl, 10, "flashscan"), "qps"), med(of(wl, 100, "flashscan"), "qps")
        if not math.isnan(f10) and not math.isnan(f100):
            # Each round's own ratio too: 10 and 100 clients of one round ran minutes apart,
            # so their ratio shows how much the machine's load moved under them.
            per_round = []
            for rnd in sorted({r["round"] for r in of(wl, 100, "flashscan")}):
                a10 = [r["qps"] for r in of(wl, 10, "flashscan") if r["round"] == rnd]
                a100 = [r["qps"] for r in of(wl, 100, "flashscan") if r["round"] == rnd]
                if a10 and a100 and a10[0]:
                    per_round.append(f"{a100[0] / a10[0]:.2f}")
            lines.append(f"- {wl}: 100-client / 10-client q/s = {f100 / f10:.2f} ({verdict(f100 / f10 >= 0.9)}); "
                         f"per round {', '.join(per_round)}")
    most = max((k[1] for k in keys), default=0)
    for wl, n in keys:
        f, p = of(wl, n, "flashscan"), of(wl, n, "postgresql")
        tail = med(f, "p99_ms") / med(f, "p50_ms")
        ratio = med(f, "p50_ms") / med(p, "p50_ms")
        parts = []
        # p99/p50 <= 3 is the target at the largest client count (nobody starved there).
        if not math.isnan(tail) and n == most:
            parts.append(f"p99/p50 {tail:.2f} ({verdict(tail <= 3)})")
        if not math.isnan(ratio):
            parts.append(f"p50 fs/pg {ratio:.3f} ({verdict(ratio <= 0.2)})")
        if parts:
            lines.append(f"- {wl} at {n} clients: " + ", ".join(parts))
    lines += ["", "timeline.svg: queries completed per second at the largest client count (last round)."]
    if shot:
        lines.append("dashboard.png: flashscan's live dashboard (headless Chromium) after the last step.")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
