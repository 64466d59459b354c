#!/usr/bin/env python3
"""bench/compression: flashscan's storage formats vs DuckDB on TPC-H lineitem, side by side.

For each format (heap "none", "page", "columnstore", "columnstore_archive", optionally
"row"), flashscan holds a copy of lineitem made by `flashscan rebuild … --into
lineitem__FORMAT` (kept and reused), and scans it with a built-in query; DuckDB runs the
same SQL on its own database of the same rows. Fair by construction: the same thread count
(`--threads` for flashscan, `SET threads` for DuckDB); both timed in process (flashscan's
own `elapsed_s`, DuckDB's query around `execute`), CPU seconds beside elapsed; runs
interleaved (every flashscan format and binary and DuckDB once a round, in a seeded shuffled
order each round: common.round_order); cold = page
cache dropped before each run of either (O_DIRECT for flashscan, a new connection for
DuckDB); warm = the files in the page cache for both (one untimed run first), each timed run
with the engine's own cache empty (flashscan is a new process, DuckDB a new connection).
Medians and the ratio flashscan time / DuckDB time are printed: <= 1.0 means flashscan is
as fast or faster. `--flashscan-before` times a second binary (the base commit) beside.

    python3 bench/compression/run.py --sf 10 --rounds 5                      # the documented run
    python3 bench/compression/run.py --sf 1 --rounds 1 --formats columnstore  # quick look
    python3 bench/compression/run.py --sf 10 --formats columnstore --queries sum4,q1 \
        --flashscan-db DIR/flashscan-tpch-sf10-columnstore --duckdb-db DIR/duckdb-tpch-sf10.db  # bench/tpch's data

Data sets live under --work (default /var/tmp/flashscan-bench), shared with bench/scan.
"""
import argparse, json, os, resource, statistics, subprocess, sys, time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "scan"))
sys.path.insert(0, os.path.join(HERE, ".."))
from common import add_run_args, cpu_s, round_order  # noqa: E402
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


def time_flashscan(fs, db, table, query, cold, threads, env=None):
    """One run as its own process; its in-process `elapsed_s` and `cpu_s` (scan threads)."""
    if cold:
        drop_caches()
    args = [fs, "scan", db, table, "--query", query, "--json", "--threads", str(threads), "--cold" if cold else "--warm"]
    report = json.loads(subprocess.run(args, check=True, capture_output=True, text=True, env=env).stdout)
    return report["elapsed_s"], report["cpu_s"]


def time_duckdb_fair(path, sql, cold, threads):
    """DuckDB timed like flashscan: in process, one query, a new connection each run (so its
    own buffer pool starts empty, as flashscan's does), `SET threads` equal to flashscan's;
    cold drops the page cache first. Process CPU (all DuckDB threads) beside elapsed."""
    import duckdb
    if cold:
        drop_caches()
    con = duckdb.connect(path, read_only=True)
    con.execute(f"SET threads = {threads}")
    cpu0, t = cpu_s(resource.RUSAGE_SELF), time.perf_counter()
    con.execute(sql).fetchall()
    elapsed, cpu = time.perf_counter() - t, cpu_s(resource.RUSAGE_SELF) - cpu0
    con.close()
    return elapsed, cpu


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_run_args(ap, rounds=5, work="/var/tmp/flashscan-bench", threads_help="flashscan --threads and DuckDB SET threads")
    ap.add_argument("--formats", default="none,page,columnstore,columnstore_archive")
    ap.add_argument("--queries", default="sum4,q1,count11")
    ap.add_argument("--modes", default="cold,warm")
    ap.add_argument("--markdown", help="also write the result table to this file")
    ap.add_argument("--flashscan", help="use this flashscan binary instead of building one")
    ap.add_argument("--flashscan-before", help="also time this flashscan binary (e.g. the base commit's) on the same tables")
    ap.add_argument("--whole-column", action="store_true",
                    help="also time --flashscan with FLASHSCAN_VECTOR_KERNELS=0 (the whole-column decode path)")
    ap.add_argument("--flashscan-db",
                    help="time the table `lineitem` of this existing database as it is (e.g. the SF 10 column store "
                         "bench/tpch made) instead of copies loaded and rebuilt under --work; needs --duckdb-db; "
                         "--formats then only names it")
    ap.add_argument("--duckdb-db", help="with --flashscan-db: the DuckDB file holding the same lineitem rows")
    a = ap.parse_args()
    fs = a.flashscan or flashscan_bin()
    if a.flashscan_db:
        if not a.duckdb_db:
            ap.error("--flashscan-db needs --duckdb-db (the same rows in DuckDB)")
        db, duck = a.flashscan_db, a.duckdb_db
        formats = [a.formats.split(",")[0]]
        tables = {formats[0]: "lineitem"}
    else:
        os.makedirs(a.work, exist_ok=True)
        db = prepare_flashscan(fs, a.work, a.sf)
        duck = prepare_duckdb(a.work, a.sf, prepare_parquet(a.work, a.sf))
        formats = a.formats.split(",")
        tables = {f: ensure_copy(fs, db, f) for f in formats}
    sizes = {f: table_bytes(fs, db, t) for f, t in tables.items()}
    print("sizes (MB): " + ", ".join(f"{f} {b / 1e6:.0f}" for f, b in sizes.items()) + f", duckdb file {os.path.getsize(duck) / 1e6:.0f}")
    # Every series, timed round-robin: (label, binary, environment).
    series = [("", fs, None)]
    if a.whole_column:
        series.append((" (whole-column)", fs, dict(os.environ, FLASHSCAN_VECTOR_KERNELS="0")))
    if a.flashscan_before:
        series.append((" (before)", a.flashscan_before, None))
    rows = []
    for mode_index, mode in enumerate(a.modes.split(",")):
        cold = mode == "cold"
        for query_index, q in enumerate(a.queries.split(",")):
            runs = {(f, label): [] for f in formats for label, _, _ in series}
            duck_runs = []
            if not cold:
                # Warm = the files in the page cache for both; each timed run then starts
                # with the engine's own caches empty (a new process / a new connection).
                for f in formats:
                    for _, binary, env in series:
                        time_flashscan(binary, db, tables[f], q, False, a.threads, env)
                time_duckdb_fair(duck, QUERIES[q], False, a.threads)
            timed = [(runs[(f, label)], lambda f=f, binary=binary, env=env: time_flashscan(binary, db, tables[f], q, cold, a.threads, env))
                     for f in formats for label, binary, env in series]
            timed.append((duck_runs, lambda: time_duckdb_fair(duck, QUERIES[q], cold, a.threads)))
            for r in range(a.rounds):
                for results, run in round_order(timed, (mode_index * 100 + query_index) * 1000 + r):
                    results.append(run())
            duck_s = statistics.median(r[0] for r in duck_runs)
            duck_cpu = statistics.median(r[1] for r in duck_runs)
            for (f, label), values in runs.items():
                med = statistics.median(r[0] for r in values)
                cpu = statistics.median(r[1] for r in values)
                row = [q, mode, f + label, f"{sizes[f] / 1e6:.0f}", f"{med:.3f}", f"{cpu:.3f}", f"{duck_s:.3f}", f"{duck_cpu:.3f}", f"{med / duck_s:.2f}"]
                rows.append(row)
                print(" | ".join(row), flush=True)
    header = ["query", "mode", "format", "size MB", "flashscan s", "flashscan CPU s", "duckdb s", "duckdb CPU s", "flashscan/duckdb"]
    title = (f"TPC-H lineitem SF {a.sf}, {a.threads} threads each, medians of {a.rounds} interleaved rounds "
             f"(flashscan/duckdb <= 1.0: flashscan as fast or faster)")
    print_markdown_table(title, header, rows, a.markdown)


if __name__ == "__main__":
    main()
