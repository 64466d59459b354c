#!/usr/bin/env python3
"""The heap's built-in queries cold, against the raw device rate, for two flashscan binaries
side by side (issue 13 item 7: every built-in heap query >= 0.95 of the device cold).

Each run is `flashscan scan DB TABLE --query Q --cold --check --json`: the page cache
dropped (as root), then a raw read of the scan's own chunks, the scan, a raw read again; the
efficiency is the scan's MB/s over the mean of the two raw passes, so each ratio is measured
in its own run, beside its own device rate. The binaries run interleaved, in a seeded
shuffled order every round (common.round_order), and the table shows medians over the
rounds: efficiency, elapsed seconds, CPU seconds (the process's user + system during the
scan, from the report), CPU µs per page, and the raw MB/s measured beside each.

  python3 bench/heap_scan/run.py --db DB [--table lineitem] --base OLD --new NEW
      [--queries count,count11,sum4,needle,q1] [--rounds 5] [--threads N] [--json-out F]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import common  # noqa: E402


def scan(binary, db, table, query, threads):
    args = [binary, "scan", db, table, "--query", query, "--cold", "--check", "--json"]
    if threads:
        args += ["--threads", str(threads)]
    out = subprocess.run(args, check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--db", required=True)
    p.add_argument("--table", default="lineitem")
    p.add_argument("--base", required=True, help="the binary to compare against")
    p.add_argument("--new", required=True, help="the binary under test")
    p.add_argument("--queries", default="count,count11,sum4,needle,q1")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--threads", type=int, default=None, help="scan threads (default: flashscan's, one per core)")
    p.add_argument("--json-out", default=None)
    a = p.parse_args()
    queries = [q for q in a.queries.split(",") if q]
    binaries = {"base": a.base, "new": a.new}
    runs = {(q, who): [] for q in queries for who in binaries}
    answers = {}
    for r in range(a.rounds):
        for q in queries:
            for who in common.round_order(binaries, f"{q}/{r}"):
                j = scan(binaries[who], a.db, a.table, q, a.threads)
                runs[(q, who)].append({k: j.get(k) for k in ("elapsed_s", "cpu_s", "mb_per_s", "raw_mb_per_s", "efficiency", "cpu_us_per_page", "verdict")})
                answers.setdefault(q, {})[who] = j["result"]
                print(f"round {r + 1} {q} {who}: efficiency {j['efficiency']:.2f}, {j['elapsed_s']:.3f} s, CPU {j['cpu_s']:.3f} s, raw {j['raw_mb_per_s']:.0f} MB/s", file=sys.stderr, flush=True)
    med = lambda q, who, k: statistics.median(x[k] for x in runs[(q, who)])
    rows = []
    for q in queries:
        same = answers[q]["base"] == answers[q]["new"]
        rows.append([
            q,
            f"{med(q, 'base', 'efficiency'):.2f}",
            f"**{med(q, 'new', 'efficiency'):.2f}**",
            f"{med(q, 'base', 'elapsed_s'):.3f}",
            f"{med(q, 'new', 'elapsed_s'):.3f}",
            f"{med(q, 'base', 'cpu_s'):.3f}",
            f"{med(q, 'new', 'cpu_s'):.3f}",
            f"{med(q, 'base', 'cpu_us_per_page'):.2f}",
            f"{med(q, 'new', 'cpu_us_per_page'):.2f}",
            f"{med(q, 'base', 'raw_mb_per_s'):.0f} / {med(q, 'new', 'raw_mb_per_s'):.0f}",
            "yes" if same else "**NO**",
        ])
    header = ["query", "efficiency base", "efficiency new", "elapsed s base", "elapsed s new", "CPU s base", "CPU s new",
              "CPU µs/page base", "CPU µs/page new", "raw MB/s beside (base / new)", "same answer"]
    common.print_markdown_table(f"Heap scans cold, medians of {a.rounds} interleaved rounds", header, rows)
    if a.json_out:
        with open(a.json_out, "w") as f:
            json.dump({f"{q}/{who}": v for (q, who), v in runs.items()}, f, indent=1)


if __name__ == "__main__":
    main()
