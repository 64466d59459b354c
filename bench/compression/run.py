#!/usr/bin/env python3
"""bench/compression: flashscan's storage formats vs DuckDB on TPC-H lineitem, side by side.

For each format (heap "none", "page", "columnstore", "columnstore_archive", optionally
"row"), flashscan holds a copy of lineitem made by `flashscan rebuild … --into
lineitem__FORMAT` (kept and reused), and scans it with a built-in query; DuckDB runs the
same SQL on its own database of the same rows. Runs are interleaved (every flashscan
format, then DuckDB, round after round), cold (page cache dropped; O_DIRECT for flashscan,
a new connection for DuckDB) and warm (one untimed run first). Medians and the ratio
flashscan time / DuckDB time are printed: <= 1.0 means flashscan is as fast or faster.

    python3 bench/compression/run.py --sf 10 --rounds 3                      # the documented run
    python3 bench/compression/run.py --sf 1 --rounds 1 --formats columnstore  # quick look

Data sets live under --work (default /var/tmp/flashscan-bench), shared with bench/scan.
"""
import argparse, json, os, statistics, subprocess, sys, time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "scan"))
from run import QUERIES, drop_caches, flashscan_bin, prepare_duckdb, prepare_flashscan, prepare_parquet, print_markdown_table, time_duckdb  # noqa: E402


def ensure_copy(fs, db, fmt):
    """The copy of lineitem in `fmt`, rebuilt only when missing."""
    if fmt == "none":
        return "lineitem"  # the loaded table is the heap
    table = f"lineitem__{fmt}"
    listing = subprocess.run([fs, "partitions", db, table, "--json"], capture_output=True, text=True)
    if listing.returncode != 0:
        t = time.perf_counter()
        subprocess.run([fs, "rebuild", db, "lineitem", "--compression", fmt, "--into", table], check=True)
        print(f"rebuild {fmt}: {time.perf_counter() - t:.1f} s", flush=True)
    return table


def table_bytes(fs, db, table):
    out = subprocess.run([fs, "partitions", db, table, "--json"], check=True, capture_output=True, text=True).stdout
    return json.loads(out)["size_bytes"]


def time_flashscan(fs, db, table, query, cold):
    if cold:
        drop_caches()
    args = [fs, "scan", db, table, "--query", query, "--json", "--cold" if cold else "--warm"]
    report = json.loads(subprocess.run(args, check=True, capture_output=True, text=True).stdout)
    return report["elapsed_s"], report


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sf", default="10")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--work", default="/var/tmp/flashscan-bench")
    ap.add_argument("--formats", default="none,page,columnstore,columnstore_archive")
    ap.add_argument("--queries", default="sum4,q1,count11")
    ap.add_argument("--modes", default="cold,warm")
    ap.add_argument("--markdown", help="also write the result table to this file")
    ap.add_argument("--flashscan", help="use this flashscan binary instead of building one")
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    fs = a.flashscan or flashscan_bin()
    db = prepare_flashscan(fs, a.work, a.sf)
    duck = prepare_duckdb(a.work, a.sf, prepare_parquet(a.work, a.sf))
    formats = a.formats.split(",")
    tables = {f: ensure_copy(fs, db, f) for f in formats}
    sizes = {f: table_bytes(fs, db, t) for f, t in tables.items()}
    print("sizes (MB): " + ", ".join(f"{f} {b / 1e6:.0f}" for f, b in sizes.items()) + f", duckdb file {os.path.getsize(duck) / 1e6:.0f}")
    rows = []
    for mode in a.modes.split(","):
        cold = mode == "cold"
        for q in a.queries.split(","):
            times = {f: [] for f in formats}
            times["duckdb"] = []
            state = {}
            if not cold:
                for f in formats:
                    time_flashscan(fs, db, tables[f], q, False)
                time_duckdb(duck, QUERIES[q], False, state)
            for _ in range(a.rounds):
                for f in formats:
                    times[f].append(time_flashscan(fs, db, tables[f], q, cold)[0])
                times["duckdb"].append(time_duckdb(duck, QUERIES[q], cold, state))
            med = {k: statistics.median(v) for k, v in times.items()}
            for f in formats:
                row = [q, mode, f, f"{sizes[f] / 1e6:.0f}", f"{med[f]:.3f}", f"{med['duckdb']:.3f}", f"{med[f] / med['duckdb']:.2f}"]
                rows.append(row)
                print(" | ".join(row), flush=True)
    header = ["query", "mode", "format", "size MB", "flashscan s", "duckdb s", "flashscan/duckdb"]
    title = f"TPC-H lineitem SF {a.sf}, medians of {a.rounds} interleaved rounds (flashscan/duckdb <= 1.0: flashscan as fast or faster)"
    print_markdown_table(title, header, rows, a.markdown)


if __name__ == "__main__":
    main()
