#!/usr/bin/env python3
"""bench/tpch/setting_sweep.py: one TPC-H query per value of one SQL setting, in-process.

`flashscan sql DB --file F --json` with `SET NAME = VALUE;` first, then the query `--runs`
times; flashscan's own `elapsed_s` (plan + run) of the last `--runs - 1` (the first warms),
over `--repeats` processes per value, interleaved by value; the median per value. For
settings a server takes only at start (DataFusion's), where bench/tpch/ab.py cannot set them.

    python3 bench/tpch/setting_sweep.py --flashscan BIN --db /tmp/tpch/fs-sf1 \\
        --setting datafusion.optimizer.hash_join_inlist_pushdown_max_distinct_values \\
        --values 150,4096,16384,65536 --queries 17,14,4,8
"""
import argparse, json, os, statistics, subprocess, tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
QUERY_DIR = os.path.join(HERE, "..", "..", "crates", "sql", "tests", "tpch")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--flashscan", required=True)
    ap.add_argument("--db", required=True)
    ap.add_argument("--setting", required=True)
    ap.add_argument("--values", required=True)
    ap.add_argument("--queries", default=",".join(str(i) for i in range(1, 23)))
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--repeats", type=int, default=2)
    a = ap.parse_args()
    values = a.values.split(",")
    with tempfile.TemporaryDirectory() as tmp:
        for q in (int(x) for x in a.queries.split(",")):
            text = open(os.path.join(QUERY_DIR, f"q{q:02}.sql")).read().strip().rstrip(";") + ";\n"
            times = {v: [] for v in values}
            for _ in range(a.repeats):
                for v in values:
                    path = os.path.join(tmp, "q.sql")
                    with open(path, "w") as f:
                        f.write(f"SET {a.setting} = {v};\n" + text * a.runs)
                    out = subprocess.run([a.flashscan, "sql", a.db, "--file", path, "--json"], check=True, capture_output=True, text=True).stdout
                    elapsed = [json.loads(line)["elapsed_s"] for line in out.strip().splitlines() if '"elapsed_s"' in line]
                    times[v].extend(elapsed[-(a.runs - 1):])
            print(f"q{q:02} " + "  ".join(f"{v}: {statistics.median(times[v]) * 1000:.0f} ms" for v in values), flush=True)


if __name__ == "__main__":
    main()
