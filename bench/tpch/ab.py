#!/usr/bin/env python3
"""bench/tpch/ab.py: two flashscan builds side by side over the wire, per query file.

Each build serves its own copy of one database (`--db` and `--db-before`, same rows: a
server owns its database), one psycopg connection each; every query file is run once on
each (warm), then `--rounds` times each in a shuffled order per round; the medians of the
client's wall clock around execute + fetchall and their ratio (before / after: above 1
means the new build is faster) are printed. For an A/B of one change on a few queries,
where bench/tpch/session.py (22 queries and DuckDB) is the full picture.

    python3 bench/tpch/ab.py --flashscan NEW --before OLD --db /tmp/tpch/fs-sf1 \\
        --db-before /tmp/tpch/fs-sf1-before crates/sql/tests/tpch/q06.sql q.sql …
"""
import argparse, os, random, statistics, subprocess, sys, time

PORTS = ((55440, 55450), (55441, 55451))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--flashscan", required=True)
    ap.add_argument("--before", required=True)
    ap.add_argument("--db", required=True)
    ap.add_argument("--db-before", required=True, help="a copy of --db for the other server")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("files", nargs="+", help="SQL files, one query each")
    a = ap.parse_args()
    import psycopg
    for port, _ in PORTS:
        if subprocess.run(["psql", "-X", "-h", "127.0.0.1", "-p", str(port), "-U", "bench", "-d", "postgres", "-Atc", "select 1"], capture_output=True).returncode == 0:
            sys.exit(f"port {port} is taken by another server: stop it first")
    procs = [subprocess.Popen([binary, "serve", db, "--listen", f"127.0.0.1:{port}", "--http", f"127.0.0.1:{http}"], stderr=subprocess.DEVNULL)
             for binary, db, (port, http) in zip((a.flashscan, a.before), (a.db, a.db_before), PORTS)]
    try:
        conns = []
        for port, _ in PORTS:
            for _ in range(100):
                try:
                    conns.append(psycopg.connect(f"host=127.0.0.1 port={port} user=bench dbname=postgres", autocommit=True))
                    break
                except psycopg.OperationalError:
                    time.sleep(0.1)
            else:
                sys.exit(f"the server on port {port} did not start")
        for path in a.files:
            query = open(path).read()
            times = [[], []]
            for c in conns:
                c.execute(query).fetchall()
            for r in range(a.rounds):
                for i in random.Random(r).sample([0, 1], 2):
                    t = time.perf_counter()
                    conns[i].execute(query).fetchall()
                    times[i].append(time.perf_counter() - t)
            new, old = statistics.median(times[0]) * 1000, statistics.median(times[1]) * 1000
            print(f"{os.path.basename(path)}: flashscan {new:.1f} ms, before {old:.1f} ms, before / flashscan {old / new:.2f}", flush=True)
    finally:
        for p in procs:
            p.terminate()
            p.wait(timeout=60)


if __name__ == "__main__":
    main()
