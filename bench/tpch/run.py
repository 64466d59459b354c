#!/usr/bin/env python3
"""bench/tpch: the 22 TPC-H queries, flashscan SQL vs DuckDB vs DataFusion, side by side.

- flashscan: `flashscan sql DB --file qNN.sql --json`, its own tables (loaded with
  `flashscan load`), timed by flashscan itself (`elapsed_s`: plan + run, no process start);
- DuckDB: its own database file, loaded from the same Parquet files;
- DataFusion (Python bindings): the same Parquet files read in place.

Same rows everywhere (tpchgen-cli and flashscan's loader are both bit-identical to dbgen), the
same query text (crates/sql/tests/tpch/qNN.sql), runs interleaved per query (flashscan,
DuckDB, DataFusion, flashscan, ...) so drift of the shared disk and CPU hits all alike;
medians and ratios (peer / flashscan: above 1 means flashscan is faster) printed.
Warm only: one untimed run of each first; all data fits in memory at SF 10 on a 24 GB machine.

    python3 bench/tpch/run.py --sf 10 --rounds 3            # the documented run
    python3 bench/tpch/run.py --sf 1 --rounds 1 --queries 1,6   # quick look

Needs: tpchgen-cli, `pip install duckdb datafusion`. Data sets are cached under --work
(default /root/flashscan-bench) and reused.
"""
import argparse, json, os, statistics, subprocess, sys, time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
QUERY_DIR = os.path.join(ROOT, "crates", "sql", "tests", "tpch")
TABLES = ["nation", "region", "part", "supplier", "partsupp", "customer", "orders", "lineitem"]


def sh(cmd, **kw):
    return subprocess.run(cmd, check=True, **kw)


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
    import duckdb
    path = os.path.join(work, f"duckdb-tpch-sf{sf}.db")
    if not os.path.exists(path):
        t = time.perf_counter()
        con = duckdb.connect(path)
        for table in TABLES:
            con.execute(f"CREATE TABLE {table} AS SELECT * FROM read_parquet('{parquet}/{table}.parquet')")
        con.close()
        print(f"duckdb load: {time.perf_counter() - t:.1f} s", flush=True)
    return path


def time_flashscan(fs, db, n):
    path = os.path.join(QUERY_DIR, f"q{n:02}.sql")
    out = subprocess.run([fs, "sql", db, "--file", path, "--json"], check=True, capture_output=True, text=True).stdout
    # One JSON answer per line, one per statement: the query files hold one statement.
    return json.loads(out.strip().splitlines()[-1])["elapsed_s"]


def time_duckdb(con, sql):
    t = time.perf_counter()
    con.execute(sql).fetchall()
    return time.perf_counter() - t


def time_datafusion(ctx, sql):
    t = time.perf_counter()
    ctx.sql(sql).collect()
    return time.perf_counter() - t


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sf", default="10")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--work", default="/root/flashscan-bench")
    ap.add_argument("--queries", default=",".join(str(i) for i in range(1, 23)))
    ap.add_argument("--format", default="columnstore",
                    help="flashscan storage format: heap, row, page, columnstore, columnstore_archive")
    ap.add_argument("--load-args", default="", help="extra flags for `flashscan load` (a storage format, partitions)")
    ap.add_argument("--skip-duckdb", action="store_true")
    ap.add_argument("--skip-datafusion", action="store_true")
    ap.add_argument("--markdown", help="also write the result table to this file")
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    fs = flashscan_bin()
    db = prepare_flashscan(fs, a.work, a.sf, a.load_args.split(), a.format)
    parquet = None if (a.skip_duckdb and a.skip_datafusion) else prepare_parquet(a.work, a.sf)
    duck = None
    if not a.skip_duckdb:
        import duckdb
        duck = duckdb.connect(prepare_duckdb(a.work, a.sf, parquet), read_only=True)
    df = None
    if not a.skip_datafusion:
        import datafusion
        df = datafusion.SessionContext()
        for table in TABLES:
            df.register_parquet(table, os.path.join(parquet, f"{table}.parquet"))

    rows = []
    for n in [int(q) for q in a.queries.split(",")]:
        sql = query_text(n)
        times = {"flashscan": [], "duckdb": [], "datafusion": []}
        # Warm-up, untimed: data in the page cache (and in DuckDB's buffer manager).
        time_flashscan(fs, db, n)
        if duck: time_duckdb(duck, sql)
        if df: time_datafusion(df, sql)
        for _ in range(a.rounds):
            times["flashscan"].append(time_flashscan(fs, db, n))
            if duck: times["duckdb"].append(time_duckdb(duck, sql))
            if df: times["datafusion"].append(time_datafusion(df, sql))
        med = {k: statistics.median(v) for k, v in times.items() if v}
        row = {"query": f"q{n:02}", **{f"{k}_s": v for k, v in med.items()}}
        for peer in ("duckdb", "datafusion"):
            if peer in med and med["flashscan"] > 0:
                row[f"{peer}_over_flashscan"] = med[peer] / med["flashscan"]
        rows.append(row)
        print(json.dumps(row), flush=True)

    header = "| query | flashscan s | DuckDB s | DataFusion/Parquet s | DuckDB / flashscan | DataFusion / flashscan |"
    lines = [f"TPC-H SF {a.sf}, flashscan format {a.format}, warm, median of {a.rounds} interleaved rounds", "", header, "|---|---|---|---|---|---|"]
    fmt = lambda v: f"{v:.3f}" if isinstance(v, float) else "-"
    for r in rows:
        lines.append(f"| {r['query']} | {fmt(r.get('flashscan_s'))} | {fmt(r.get('duckdb_s'))} | {fmt(r.get('datafusion_s'))} | "
                     f"{fmt(r.get('duckdb_over_flashscan'))} | {fmt(r.get('datafusion_over_flashscan'))} |")
    for peer in ("duckdb", "datafusion"):
        ratios = [r[f"{peer}_over_flashscan"] for r in rows if f"{peer}_over_flashscan" in r]
        if ratios:
            geo = statistics.geometric_mean(ratios)
            lines.append(f"\n{peer} / flashscan, geometric mean over {len(ratios)} queries: {geo:.2f}")
    text = "\n".join(lines)
    print(text)
    if a.markdown:
        with open(a.markdown, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    sys.exit(main())
