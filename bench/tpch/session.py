#!/usr/bin/env python3
"""bench/tpch/session.py: the 22 TPC-H queries in a long-lived session on both sides —
`flashscan serve` with one psycopg connection against one DuckDB connection (issue 32's
"SF 1 warm, a long-lived session on both sides").

run.py starts a process per query (flashscan) and a connection per query (DuckDB); a user of
either engine keeps a session open, where what counts is the per-query cost: planning,
operator setup, thread hand-offs. Here both sides are timed alike, on the client: the wall
clock around `execute` + `fetchall` (flashscan's rows cross a socket; DuckDB's are made into
Python objects in this process — both hand the client Python rows). CPU beside it: the
flashscan server's CPU (/proc/PID/stat) plus this process's for psycopg; DuckDB's is this
process's (getrusage), where it runs. Same threads for both (`--threads`: DuckDB `SET
threads`; flashscan uses the cores, so other values are refused). Warm, the same for both:
every query run once untimed on each engine first, files in the page cache, the session's
caches kept (that is what a session is). Rounds interleave the engines per query in a
seeded shuffled order (common.round_order); medians and ratios (DuckDB / flashscan: above 1
means flashscan is faster) and the geometric mean.

    python3 bench/tpch/session.py --flashscan BIN --db /tmp/tpch/fs-sf1 \
        --duckdb /tmp/tpch/duck-sf1.db --parquet /tmp/tpch/parquet --rounds 5

--db: a flashscan database with the eight tables (`flashscan load DB --sf 1 --tables …`,
then `flashscan rebuild DB T --compression columnstore` for each); --parquet: the same rows
as Parquet (`flashscan sql DB "COPY (SELECT * FROM t) TO 'DIR/t.parquet'"`), from which the
DuckDB file is made once. --before BIN runs a second flashscan server on the same database
files interleaved (a copy of --db, since a server owns its database).
"""
import argparse, math, os, random, resource, shutil, statistics, subprocess, sys, time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
QUERY_DIR = os.path.join(ROOT, "crates", "sql", "tests", "tpch")
TABLES = ["nation", "region", "part", "supplier", "partsupp", "customer", "orders", "lineitem"]
sys.path.insert(0, os.path.join(HERE, ".."))
import common  # noqa: E402

servers = common.load_by_path("concurrency_run", os.path.join(HERE, "..", "concurrency", "run.py"))
FS_PORT, FS_HTTP = 55440, 55450


def query_text(n):
    with open(os.path.join(QUERY_DIR, f"q{n:02}.sql")) as f:
        return f.read()


def proc_cpu_s(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class FlashscanSession:
    def __init__(self, name, binary, db, port, http_port):
        import psycopg
        self.name = name
        self.server = servers.Flashscan(binary, db, 4, port=port, http_port=http_port)
        self.server.start()
        self.conn = psycopg.connect(f"host=127.0.0.1 port={port} user=bench dbname=postgres", autocommit=True)

    def run(self, sql):
        c0, s0, t = common.cpu_s(resource.RUSAGE_SELF), proc_cpu_s(self.server.pid()), time.perf_counter()
        with self.conn.cursor() as cur:
            cur.execute(sql)
            rows = cur.fetchall()
        elapsed = time.perf_counter() - t
        cpu = common.cpu_s(resource.RUSAGE_SELF) - c0 + proc_cpu_s(self.server.pid()) - s0
        return elapsed, cpu, len(rows)

    def close(self):
        self.conn.close()
        self.server.stop()


class DuckdbSession:
    def __init__(self, path, threads):
        import duckdb
        self.name = "duckdb"
        self.conn = duckdb.connect(path, read_only=True, config={"threads": threads})
        self.conn.execute("SET enable_progress_bar = false")

    def run(self, sql):
        c0, t = common.cpu_s(resource.RUSAGE_SELF), time.perf_counter()
        rows = self.conn.execute(sql).fetchall()
        return time.perf_counter() - t, common.cpu_s(resource.RUSAGE_SELF) - c0, len(rows)

    def close(self):
        self.conn.close()


def geomean(xs):
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--flashscan", required=True)
    ap.add_argument("--before", help="a second flashscan binary, run interleaved on a copy of --db")
    ap.add_argument("--db", required=True)
    ap.add_argument("--duckdb", required=True, help="DuckDB file (made from --parquet if missing)")
    ap.add_argument("--parquet", required=True)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--queries", default=",".join(str(i) for i in range(1, 23)))
    ap.add_argument("--setting", action="append", default=[], help="a SET statement sent to --flashscan's session first (repeatable)")
    ap.add_argument("--markdown")
    a = ap.parse_args()
    if a.threads != os.cpu_count():
        sys.exit(f"--threads {a.threads}: flashscan uses the machine's {os.cpu_count()} cores; use that")
    queries = [int(q) for q in a.queries.split(",")]
    common.prepare_duckdb(a.duckdb, {t: os.path.join(a.parquet, f"{t}.parquet") for t in TABLES})
    sessions = []
    results = {}
    try:
        for port in (FS_PORT, FS_PORT + 1):
            # A server left from an earlier run would answer in the new one's place.
            if subprocess.run(["psql", "-X", "-h", "127.0.0.1", "-p", str(port), "-U", "bench", "-d", "postgres", "-Atc", "select 1"],
                              capture_output=True).returncode == 0:
                sys.exit(f"port {port} is taken by another server: stop it first")
        sessions.append(FlashscanSession("flashscan", a.flashscan, a.db, FS_PORT, FS_HTTP))
        for s in a.setting:
            sessions[0].conn.execute(s)
        if a.before:
            copy = a.db.rstrip("/") + "-before"
            if not os.path.exists(copy):
                shutil.copytree(a.db, copy)
            sessions.append(FlashscanSession("before", a.before, copy, FS_PORT + 1, FS_HTTP + 1))
        sessions.append(DuckdbSession(a.duckdb, a.threads))
        results = {(s.name, q): [] for s in sessions for q in queries}
        for q in queries:  # warm: one untimed run of each, rows counted alike
            counts = {s.name: s.run(query_text(q))[2] for s in sessions}
            if len(set(counts.values())) != 1:
                sys.exit(f"q{q:02}: row counts differ {counts}")
        for r in range(a.rounds):
            for q in common.round_order(queries, r * 1000 + 7):
                for s in common.round_order(sessions, r * 100 + q):
                    results[(s.name, q)].append(s.run(query_text(q))[:2])
            print(f"round {r + 1}/{a.rounds} done", flush=True)
    finally:
        for s in sessions:
            s.close()
    med = {k: (statistics.median(e for e, _ in v), statistics.median(c for _, c in v)) for k, v in results.items()}
    names = [s.name for s in sessions]
    header = ["query"] + [f"{n} s (CPU s)" for n in names] + ["duckdb / flashscan"] + (["before / flashscan"] if a.before else [])
    rows, ratios, before_ratios = [], [], []
    for q in queries:
        fs = med[("flashscan", q)][0]
        ratio = med[("duckdb", q)][0] / fs
        ratios.append(ratio)
        row = [f"q{q:02}"] + [f"{med[(n, q)][0]:.4f} ({med[(n, q)][1]:.3f})" for n in names] + [f"{ratio:.2f}"]
        if a.before:
            before_ratios.append(med[("before", q)][0] / fs)
            row.append(f"{before_ratios[-1]:.2f}")
        rows.append(row)
    common.print_markdown_table(f"TPC-H, long-lived sessions, warm, {a.threads} threads each, medians of {a.rounds} interleaved rounds",
                                header, rows, a.markdown)
    print(f"geometric mean duckdb / flashscan: {geomean(ratios):.3f} (flashscan takes {1 / geomean(ratios):.2f}x DuckDB's time); "
          f"worst: q{queries[ratios.index(min(ratios))]:02} at {1 / min(ratios):.2f}x")
    if a.before:
        print(f"geometric mean before / flashscan: {geomean(before_ratios):.3f}")


if __name__ == "__main__":
    main()
