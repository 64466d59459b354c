#!/usr/bin/env python3
"""SQL conformance side by side: sqllogictest files against flashscan serve and against
PostgreSQL 15, each file on a fresh database of each, with the runner of the CI test
(crates/server/tests/slt/runner.rs, built as the example `sqllogictest`): the same parser,
driver and value formatting for both, the driver calling itself `postgresql` so the
corpus's `skipif postgresql` / `onlyif postgresql` records apply to both alike.

    python3 bench/sqllogictest/run.py crates/server/tests/slt/sqlite
    python3 bench/sqllogictest/run.py --flashscan /work/target/release/flashscan DIR_OR_FILE...
    python3 bench/sqllogictest/run.py --skip-postgres --reasons 40 DIR

Printed: per file and in total, the records passed / failed / skipped by each engine and the
pass rate (passed / (passed + failed)); the records PostgreSQL passes and flashscan fails;
flashscan's failures by reason (the server's message with numbers and names replaced),
most frequent first, with an example each. --json FILE keeps every failure.

flashscan: `flashscan init` makes a database per file, `flashscan serve` serves it on
--fs-port, stopped after the file. PostgreSQL: a throwaway cluster under --work (initdb as
user postgres, trust on loopback), a database per file (CREATE DATABASE / DROP DATABASE).
The corpus of the SQLite project (select1-5, evidence/, index/, random/) is at
sqlite.org/sqllogictest; crates/server/tests/slt/sqlite holds a part of it.
"""

import argparse
import collections
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
PG_BIN = "/usr/lib/postgresql/15/bin"
TARGET = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))


def as_postgres(cmd):
    return ["su", "postgres", "-c", cmd] if os.geteuid() == 0 else ["bash", "-c", cmd]


def corpus_files(paths):
    files = []
    for p in paths:
        if os.path.isfile(p):
            files.append(p)
            continue
        if not os.path.isdir(p):
            sys.exit(f"run.py: {p} is neither a file nor a directory")
        for d, _, names in os.walk(p):
            files.extend(os.path.join(d, n) for n in names if n.endswith((".test", ".slt")))
    return sorted(files)


def build_runner():
    """The example `sqllogictest` (debug build: the runner's own speed does not matter),
    built with the workspace's flags so it reuses the test build."""
    subprocess.run(["cargo", "build", "-q", "--workspace", "--all-features", "--example", "sqllogictest"], cwd=ROOT, check=True)
    return os.path.join(TARGET, "debug", "examples", "sqllogictest")


def run_runner(runner, connection, path, timeout_s):
    env = dict(os.environ, FLASHSCAN_SLT_TIMEOUT_S=str(timeout_s))
    out = subprocess.run([runner, connection, path], capture_output=True, text=True, env=env)
    lines = [l for l in out.stdout.splitlines() if l.startswith("{")]
    if out.returncode != 0 or len(lines) != 1:
        return {"file": path, "passed": 0, "failed": 1, "skipped": 0,
                "failures": [{"line": 0, "reason": f"runner failed (exit {out.returncode}): {out.stderr.strip()[-200:]}", "sql": ""}]}
    return json.loads(lines[0])


class Postgres:
    def __init__(self, work, port):
        self.data = os.path.join(work, "pgdata")
        self.port = port
        shutil.rmtree(self.data, ignore_errors=True)
        os.makedirs(self.data)
        if os.geteuid() == 0:
            shutil.chown(work, "postgres")
            shutil.chown(self.data, "postgres")
        subprocess.run(as_postgres(f"{PG_BIN}/initdb -D {self.data} -A trust -U postgres >/dev/null"), check=True)
        subprocess.run(as_postgres(f"{PG_BIN}/pg_ctl -D {self.data} -o '-p {port} -k /tmp' -l {self.data}/log -w start >/dev/null"), check=True)

    def psql(self, sql):
        subprocess.run(["psql", "-X", "-q", "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres", "-d", "postgres", "-c", sql],
                       check=True, capture_output=True)

    def run(self, runner, path, number, timeout_s):
        db = f"slt{number}"
        self.psql(f"DROP DATABASE IF EXISTS {db}")
        self.psql(f"CREATE DATABASE {db}")
        try:
            return run_runner(runner, f"host=127.0.0.1 port={self.port} user=postgres dbname={db}", path, timeout_s)
        finally:
            self.psql(f"DROP DATABASE IF EXISTS {db}")

    def stop(self):
        subprocess.run(as_postgres(f"{PG_BIN}/pg_ctl -D {self.data} -w -m fast stop >/dev/null"))


class Flashscan:
    def __init__(self, binary, work, port):
        self.binary, self.work, self.port = binary, work, port

    def run(self, runner, path, number, timeout_s):
        db = os.path.join(self.work, f"fs{number}")
        shutil.rmtree(db, ignore_errors=True)
        subprocess.run([self.binary, "init", db], check=True, capture_output=True)
        log = open(os.path.join(self.work, "serve.log"), "w")
        server = subprocess.Popen([self.binary, "serve", db, "--listen", f"127.0.0.1:{self.port}"], stderr=subprocess.PIPE, stdout=log, text=True)
        try:
            started = time.time()
            for line in server.stderr:
                log.write(line)
                if "listening on" in line:
                    break
                if time.time() - started > 60:
                    raise RuntimeError("flashscan serve did not start in 60 s")
            else:
                raise RuntimeError(f"flashscan serve exited: see {log.name}")
            return run_runner(runner, f"host=127.0.0.1 port={self.port} user=slt dbname=flashscan", path, timeout_s)
        finally:
            server.send_signal(signal.SIGINT)
            try:
                server.wait(timeout=60)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()
            log.close()
            shutil.rmtree(db, ignore_errors=True)


def totals(results):
    t = collections.Counter()
    for r in results:
        t["passed"] += r["passed"]
        t["failed"] += r["failed"]
        t["skipped"] += r["skipped"]
    run = t["passed"] + t["failed"]
    t["percent"] = 100.0 * t["passed"] / run if run else 0.0
    return t


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("paths", nargs="+", help="sqllogictest files or directories (.test, .slt)")
    default_bin = os.path.join(TARGET, "release", "flashscan")
    if not os.path.exists(default_bin):
        default_bin = os.path.join(TARGET, "debug", "flashscan")
    ap.add_argument("--flashscan", default=default_bin, help=f"the flashscan binary [{default_bin}]")
    ap.add_argument("--runner", help="the sqllogictest example binary [built here]")
    ap.add_argument("--skip-postgres", action="store_true")
    ap.add_argument("--skip-flashscan", action="store_true")
    ap.add_argument("--work", default=None, help="a scratch directory [a temporary one]")
    ap.add_argument("--pg-port", type=int, default=55442)
    ap.add_argument("--fs-port", type=int, default=55443)
    ap.add_argument("--timeout", type=int, default=60, help="seconds per record before it fails as timed out")
    ap.add_argument("--reasons", type=int, default=20, help="flashscan's top failure reasons to print")
    ap.add_argument("--json", help="write every result (failures included) to this file")
    args = ap.parse_args()

    files = corpus_files(args.paths)
    if not files:
        sys.exit("run.py: no .test or .slt files under the paths given")
    runner = args.runner or build_runner()
    work = args.work or tempfile.mkdtemp(prefix="slt-bench-")
    os.makedirs(work, exist_ok=True)
    engines = {}
    if not args.skip_flashscan:
        if not os.path.exists(args.flashscan):
            sys.exit(f"run.py: no flashscan binary at {args.flashscan}: build it (cargo build --release -p flashscan-cli) or pass --flashscan")
        engines["flashscan"] = Flashscan(args.flashscan, work, args.fs_port)
    if not args.skip_postgres:
        if not os.path.exists(os.path.join(PG_BIN, "initdb")):
            sys.exit(f"run.py: PostgreSQL 15 is not installed at {PG_BIN}: apt-get install postgresql-15, or pass --skip-postgres")
        engines["postgresql"] = Postgres(work, args.pg_port)
    results = {name: [] for name in engines}
    started = time.time()
    try:
        for number, path in enumerate(files):
            cells = []
            for name, engine in engines.items():
                r = engine.run(runner, path, number, args.timeout)
                r["file"] = os.path.relpath(path, ROOT)
                results[name].append(r)
                cells.append(f"{name} {r['passed']:>5}/{r['passed'] + r['failed']:<5}")
            print(f"[{number + 1}/{len(files)} {time.time() - started:6.0f} s] {'  '.join(cells)}  {os.path.relpath(path, ROOT)}", flush=True)
    finally:
        if "postgresql" in engines:
            engines["postgresql"].stop()

    print(f"\n{len(files)} files, {time.time() - started:.0f} s; pass rate = passed / (passed + failed), skipped = left out by skipif/onlyif for postgresql\n")
    print("| engine | passed | failed | skipped | pass rate |")
    print("|---|---:|---:|---:|---:|")
    for name in results:
        t = totals(results[name])
        print(f"| {name} | {t['passed']} | {t['failed']} | {t['skipped']} | {t['percent']:.2f} % |")
    if "flashscan" in results and "postgresql" in results:
        pg_failed = {(r["file"], f["line"]) for r in results["postgresql"] for f in r["failures"]}
        fs_only = [(r["file"], f) for r in results["flashscan"] for f in r["failures"] if (r["file"], f["line"]) not in pg_failed]
        print(f"\nrecords PostgreSQL passes and flashscan fails: {len(fs_only)}")
    if "flashscan" in results:
        by_reason = collections.Counter()
        example = {}
        for r in results["flashscan"]:
            for f in r["failures"]:
                by_reason[f["reason"]] += 1
                example.setdefault(f["reason"], f"{r['file']}:{f['line']} {' '.join(f['sql'].split())[:100]}")
        print(f"\nflashscan's failures by reason (top {args.reasons} of {len(by_reason)}):")
        for reason, n in by_reason.most_common(args.reasons):
            print(f"{n:>7}  {reason}\n         e.g. {example[reason]}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    if not args.work:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
