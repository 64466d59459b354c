#!/usr/bin/env python3
"""bench/tpch: the 22 TPC-H queries, flashscan SQL vs DuckDB vs DataFusion, side by side.

- flashscan: `flashscan sql DB --file qNN.sql --json`, its own tables (loaded with
  `flashscan load`), timed by flashscan itself (`elapsed_s`: plan + run, no process start);
- DuckDB: its own database file, loaded from the same Parquet files;
- DataFusion (Python bindings): the same Parquet files read in place.

Same rows everywhere (tpchgen-cli and flashscan's loader are both bit-identical to dbgen), the
same query text (crates/sql/tests/tpch/qNN.sql), runs interleaved per query (flashscan,
DuckDB, DataFusion, in a seeded shuffled order each round) so drift of the shared disk and CPU hits all alike;
medians and ratios (peer / flashscan: above 1 means flashscan is faster) printed.
Fair by construction (issue 13): the same thread count for all three (`--threads`, default
the machine's cores: DuckDB `SET threads`, DataFusion `target_partitions`; flashscan uses the
cores, so other values are refused); warm means the same for all three: the files are in
the page cache (one untimed run of each first) and nothing else is kept between runs (a new
DuckDB connection and a new DataFusion context per run, as flashscan starts a new process);
CPU seconds beside elapsed (DuckDB, DataFusion: this process's getrusage around the query;
flashscan: the child process's, start-up included); medians of `--rounds` (default 5).

    python3 bench/tpch/run.py --sf 1 --rounds 5 --work /work/bench-data/speed/tpch
    python3 bench/tpch/run.py --sf 1 --rounds 1 --queries 1,6   # quick look

Needs: tpchgen-cli, `pip install duckdb datafusion`. Data sets are cached under --work
(default /root/flashscan-bench) and reused.
"""
import argparse, json, os, resource, statistics, subprocess, sys, time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
QUERY_DIR = os.path.join(ROOT, "crates", "sql", "tests", "tpch")
TABLES = ["nation", "region", "part", "supplier", "partsupp", "customer", "orders", "lineitem"]
sys.path.insert(0, os.path.join(HERE, ".."))
from common import add_run_args, cpu_s, prepare_duckdb as duckdb_from_parquet, round_order, sh  # noqa: E402


def query_text(n):
    with open(os.path.join(QUERY_DIR, f"q{n:02}.sql")) as f:
        return f.read()


def flashscan_bin():
    target = os.environ.get("CARGO_TARGET_DIR", "/root/.cache/flashscan-sql-target")
    sh(["cargo", "build", "--release", "-q", "-p", "flashscan-cli", "--features", "sql"], cwd=ROOT,
       env=dict(os.environ, CARGO_TARGET_DIR=target))
    return os.path.join(target, "release", "flashscan")


def prepare_parquet(work, sf):
    out = os.path.join(work, f"tpch-parquet-sf{sf}")
    if not all(os.path.exists(os.path.join(out, f"{t}.parquet")) for t in TABLES):
        os.makedirs(out, exist_ok=True)
        sh(["tpchgen-cli", "parquet", "-s", str(sf), "--output-dir", out])
    return out


def prepare_flashscan(fs, work, sf, extra, storage_format):
    """Loads the eight tables (heap pages), then rebuilds each in place into `storage_format`
    unless it is `heap`. A rebuild commits atomically, so a run killed half way resumes."""
    db = os.path.join(work, f"flashscan-tpch-sf{sf}-{storage_format}")
    if not os.path.exists(os.path.join(db, "catalog.json")):
        t = time.perf_counter()
        sh([fs, "load", db, "--sf", str(sf), "--tables", ",".join(TABLES)] + extra)
        print(f"flashscan load: {time.perf_counter() - t:.1f} s", flush=True)
    if storage_format != "heap":
        with open(os.path.join(db, "catalog.json")) as f:
            # A header line (magic, body size, checksum), then the body (docs/formats.md).
            catalog = json.loads(f.read().split("\n", 1)[1])
        for table in TABLES:
            if catalog["tables"][table]["format"] != storage_format:
                t = time.perf_counter()
                sh([fs, "rebuild", db, table, "--compression", storage_format], stdout=subprocess.DEVNULL)
                print(f"flashscan rebuild {table} -> {storage_format}: {time.perf_counter() - t:.1f} s", flush=True)
    return db


def prepare_duckdb(work, sf, parquet):
    return duckdb_from_parquet(os.path.join(work, f"duckdb-tpch-sf{sf}.db"), {t: f"{parquet}/{t}.parquet" for t in TABLES})


def time_flashscan(fs, db, n):
    """(elapsed_s, cpu_s): flashscan's own elapsed time; the CPU of the whole process."""
    path = os.path.join(QUERY_DIR, f"q{n:02}.sql")
    c = cpu_s(resource.RUSAGE_CHILDREN)
    out = subprocess.run([fs, "sql", db, "--file", path, "--json"], check=True, capture_output=True, text=True).stdout
    cpu = cpu_s(resource.RUSAGE_CHILDREN) - c
    # One JSON answer per line, one per statement: the query files hold one statement.
    return json.loads(out.strip().splitlines()[-1])["elapsed_s"], cpu


def time_duckdb(path, threads, sql):
    import duckdb
    con = duckdb.connect(path, read_only=True, config={"threads": threads})
    con.execute("SET enable_progress_bar = false")
    c, t = cpu_s(resource.RUSAGE_SELF), time.perf_counter()
    con.execute(sql).fetchall()
    elapsed, cpu = time.perf_counter() - t, cpu_s(resource.RUSAGE_SELF) - c
    con.close()
    return elapsed, cpu


def time_datafusion(parquet, threads, sql):
    import datafusion
    ctx = datafusion.SessionContext(datafusion.SessionConfig().with_target_partitions(threads))
    for table in TABLES:
        ctx.register_parquet(table, os.path.join(parquet, f"{table}.parquet"))
    c, t = cpu_s(resource.RUSAGE_SELF), time.perf_counter()
    ctx.sql(sql).collect()
    return time.perf_counter() - t, cpu_s(resource.RUSAGE_SELF) - c


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_run_args(ap, rounds=5, work="/root/flashscan-bench", threads_help="threads for every engine (flashscan uses the cores)")
    ap.add_argument("--flashscan", help="a built flashscan binary (default: cargo build --release)")
    ap.add_argument("--flashscan-before", help="another flashscan binary (say, before a change), run interleaved on the same tables")
    ap.add_argument("--queries", default=",".join(str(i) for i in range(1, 23)))
    ap.add_argument("--format", default="columnstore",
                    help="flashscan storage format: heap, row, page, columnstore, columnstore_archive")
    ap.add_argument("--load-args", default="", help="extra flags for `flashscan load` (a storage format, partitions)")
    ap.add_argument("--skip-duckdb", action="store_true")
    ap.add_argument("--skip-datafusion", action="store_true")
    ap.add_argument("--markdown", help="also write the result table to this file")
    a = ap.parse_args()
    if a.threads != os.cpu_count():
        sys.exit(f"--threads {a.threads}: flashscan sql runs on all {os.cpu_count()} cores; give the peers the same")
    os.makedirs(a.work, exist_ok=True)
    fs = a.flashscan or flashscan_bin()
    db = prepare_flashscan(fs, a.work, a.sf, a.load_args.split(), a.format)
    parquet = None if (a.skip_duckdb and a.skip_datafusion) else prepare_parquet(a.work, a.sf)
    duck = None if a.skip_duckdb else prepare_duckdb(a.work, a.sf, parquet)
    df = not a.skip_datafusion

    rows = []
    for n in [int(q) for q in a.queries.split(",")]:
        sql = query_text(n)
        times = {"flashscan": [], "flashscan_before": [], "duckdb": [], "datafusion": []}
        # Warm-up, untimed: the files in the page cache (nothing else survives a run).
        runs = [("flashscan", lambda: time_flashscan(fs, db, n))]
        if a.flashscan_before: runs.append(("flashscan_before", lambda: time_flashscan(a.flashscan_before, db, n)))
        if duck: runs.append(("duckdb", lambda: time_duckdb(duck, a.threads, sql)))
        if df: runs.append(("datafusion", lambda: time_datafusion(parquet, a.threads, sql)))
        for _, run in runs:
            run()
        # A seeded shuffle of the order every round (common.round_order says why).
        for r in range(a.rounds):
            for name, run in round_order(runs, n * 1000 + r):
                times[name].append(run())
        med = {k: statistics.median(e for e, _ in v) for k, v in times.items() if v}
        med_cpu = {k: statistics.median(c for _, c in v) for k, v in times.items() if v}
        row = {"query": f"q{n:02}", **{f"{k}_s": v for k, v in med.items()}, **{f"{k}_cpu_s": v for k, v in med_cpu.items()}}
        for peer in ("flashscan_before", "duckdb", "datafusion"):
            if peer in med and med["flashscan"] > 0:
                row[f"{peer}_over_flashscan"] = med[peer] / med["flashscan"]
        rows.append(row)
        print(json.dumps(row), flush=True)

    before = bool(a.flashscan_before)
    header = ("| query | flashscan s (CPU) | " + ("before s (CPU) | " if before else "") + "DuckDB s (CPU) | DataFusion/Parquet s (CPU) | "
              + ("before / flashscan | " if before else "") + "DuckDB / flashscan | DataFusion / flashscan |")
    lines = [f"TPC-H SF {a.sf}, flashscan format {a.format}, warm, {a.threads} threads each, median of {a.rounds} interleaved rounds", "", header,
             "|---" * header.count(" | ") + "|---|"]
    fmt = lambda v: f"{v:.3f}" if isinstance(v, float) else "-"
    both = lambda r, k: f"{fmt(r.get(k + '_s'))} ({fmt(r.get(k + '_cpu_s'))})" if k + "_s" in r else "-"
    for r in rows:
        lines.append(f"| {r['query']} | {both(r, 'flashscan')} | " + (f"{both(r, 'flashscan_before')} | " if before else "")
                     + f"{both(r, 'duckdb')} | {both(r, 'datafusion')} | " + (f"{fmt(r.get('flashscan_before_over_flashscan'))} | " if before else "")
                     + f"{fmt(r.get('duckdb_over_flashscan'))} | {fmt(r.get('datafusion_over_flashscan'))} |")
    for peer in ("flashscan_before", "duckdb", "datafusion"):
        ratios = [r[f"{peer}_over_flashscan"] for r in rows if f"{peer}_over_flashscan" in r]
        if ratios:
            geo = statistics.geometric_mean(ratios)
            slower = [r["query"] for r in rows if r.get(f"{peer}_over_flashscan", 2) < 1]
            lines.append(f"\n{peer} / flashscan, geometric mean over {len(ratios)} queries: {geo:.2f} "
                         f"(flashscan takes {1 / geo:.2f}x {peer}'s time); {peer} faster on {len(slower)}: {', '.join(slower) or 'none'}")
            cpu = [r[f"{peer}_cpu_s"] / r["flashscan_cpu_s"] for r in rows if r.get(f"{peer}_cpu_s") and r.get("flashscan_cpu_s")]
            if cpu:
                lines.append(f"{peer} / flashscan CPU seconds, geometric mean: {statistics.geometric_mean(cpu):.2f}")
    text = "\n".join(lines)
    print(text)
    if a.markdown:
        with open(a.markdown, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    sys.exit(main())
