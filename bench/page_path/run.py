#!/usr/bin/env python3
"""Scans before and after a change to the page path, interleaved (A B A B ...).

Runs two flashscan binaries on the same database: the heap scan with the top-speed check
(`scan DB lineitem --cold --check`) and the column store scans (`--query sum4` and
`--query q1` on a column store copy, cold and warm), for `--rounds` rounds, alternating
which binary goes first each round. Prints medians of elapsed seconds and CPU seconds
(from `--json`) and the after/before ratios.

  python3 bench/page_path/run.py --before B --after A --db DB [--heap lineitem]
      [--cs lineitem_cs] [--rounds 5] [--threads N]
"""
import argparse
import json
import statistics
import subprocess
import sys


def run(binary, args):
    out = subprocess.run([binary, *args, "--json"], check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--before", required=True)
    p.add_argument("--after", required=True)
    p.add_argument("--db", required=True)
    p.add_argument("--heap", default="lineitem")
    p.add_argument("--cs", default="lineitem_cs")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--threads", type=int, default=None)
    a = p.parse_args()
    extra = ["--threads", str(a.threads)] if a.threads else []
    cases = [
        ("heap count --cold --check", [a.db, a.heap, "--cold", "--check", *extra]),
        ("cs sum4 --cold", [a.db, a.cs, "--query", "sum4", "--cold", *extra]),
        ("cs sum4 --warm", [a.db, a.cs, "--query", "sum4", "--warm", *extra]),
        ("cs q1 --cold", [a.db, a.cs, "--query", "q1", "--cold", *extra]),
        ("cs q1 --warm", [a.db, a.cs, "--query", "q1", "--warm", *extra]),
    ]
    results = {(name, who): [] for name, _ in cases for who in ("before", "after")}
    answers = {}
    for r in range(a.rounds):
        for name, args in cases:
            order = [("before", a.before), ("after", a.after)]
            if r % 2 == 1:
                order.reverse()
            for who, binary in order:
                j = run(binary, ["scan", *args])
                results[(name, who)].append((j["elapsed_s"], j["cpu_s"], j.get("mb_per_s"), j.get("efficiency")))
                answers.setdefault(name, {})[who] = j["result"]
        print(f"round {r + 1}/{a.rounds} done", file=sys.stderr)
    print("Medians, and in brackets the fastest round (on a shared machine the minimum is the")
    print("figure least disturbed by other work).")
    print()
    print(f"| case | before elapsed s | after elapsed s | after/before | before CPU s | after CPU s | after/before CPU | same answer |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for name, _ in cases:
        b = results[(name, "before")]
        f = results[(name, "after")]
        be, fe = statistics.median(x[0] for x in b), statistics.median(x[0] for x in f)
        bc, fc = statistics.median(x[1] for x in b), statistics.median(x[1] for x in f)
        same = answers[name]["before"] == answers[name]["after"]
        bem, fem = min(x[0] for x in b), min(x[0] for x in f)
        bcm, fcm = min(x[1] for x in b), min(x[1] for x in f)
        print(
            f"| {name} | {be:.3f} ({bem:.3f}) | {fe:.3f} ({fem:.3f}) | {fe / be:.3f} ({fem / bem:.3f}) "
            f"| {bc:.3f} ({bcm:.3f}) | {fc:.3f} ({fcm:.3f}) | {fc / bc:.3f} ({fcm / bcm:.3f}) | {same} |"
        )
    print()
    print("raw per round (elapsed_s, cpu_s, mb_per_s, efficiency):")
    for k, v in results.items():
        print(k, v)


if __name__ == "__main__":
    main()
