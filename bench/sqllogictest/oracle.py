#!/usr/bin/env python3
"""Writes a .slt file of flashscan's own (crates/server/tests/slt/flashscan/) with the
answers PostgreSQL 15 gives: the expected results of those files come from PostgreSQL,
never from flashscan.

    python3 bench/sqllogictest/oracle.py --port 5432 bench/sqllogictest/oracle/subqueries.py

A case file (Python) sets `output` (a path under the repository), `header` (comment lines),
`setup` (statements) and `cases` ((comment, type letters, query) triples). Each query runs
on the PostgreSQL at --port (user postgres, on a fresh database `slt_oracle`); its rows are
formatted as the runner formats them (crates/server/tests/slt/runner.rs: I, R as %.3f, T)
and sorted, and the record is written as `query TYPES rowsort`.
"""
import argparse, os, subprocess

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=55442)
    ap.add_argument("case_files", nargs="+")
    args = ap.parse_args()

    def psql(sql, db="slt_oracle", rows=False):
        cmd = ["psql", "-X", "-h", "127.0.0.1", "-p", str(args.port), "-U", "postgres", "-d", db, "-v", "ON_ERROR_STOP=1"]
        if rows:
            cmd += ["-At", "-F", "\t", "-P", "null=NULL"]
        out = subprocess.run(cmd + ["-c", sql], capture_output=True, text=True, check=True).stdout
        return [l.split("\t") for l in out.splitlines()]

    def fmt(v, t):
        if v == "NULL":
            return "NULL"
        if t == "I":
            return {"t": "1", "f": "0"}.get(v) or str(int(float(v)))
        if t == "R":
            return "%.3f" % float(v)
        return v if v != "" else "(empty)"

    for case_file in args.case_files:
        spec = {}
        exec(open(case_file).read(), spec)
        psql("DROP DATABASE IF EXISTS slt_oracle", db="postgres")
        psql("CREATE DATABASE slt_oracle", db="postgres")
        for s in spec["setup"]:
            psql(s)
        with open(os.path.join(ROOT, spec["output"]), "w") as f:
            f.write(spec["header"] + "\n")
            for s in spec["setup"]:
                f.write(f"statement ok\n{s}\n\n")
            for comment, types, sql in spec["cases"]:
                rows = sorted([fmt(v, t) for v, t in zip(r, types)] for r in psql(sql, rows=True))
                f.write(f"# {comment}\nquery {types} rowsort\n{sql}\n----\n")
                f.write("".join(" ".join(r) + "\n" for r in rows) + "\n")
        psql("DROP DATABASE IF EXISTS slt_oracle", db="postgres")
        print(f"wrote {spec['output']}")


if __name__ == "__main__":
    main()
