#!/usr/bin/env python3
"""bench/scan: flashscan vs DuckDB vs PostgreSQL scanning TPC-H lineitem, side by side.

Same rows everywhere (tpchgen-cli and flashscan's loader are both bit-identical to dbgen),
runs interleaved (each engine once a round, in a seeded shuffled order each round:
common.round_order) so drift of the shared disk hits all three alike, medians and ratios
printed. Cold = page cache dropped
(`sync; echo 3 > /proc/sys/vm/drop_caches`, root) and, for PostgreSQL, the server restarted
(shared buffers emptied), for DuckDB a new connection. Warm = one untimed run first.

    python3 bench/scan/run.py --sf 10 --rounds 3          # the documented run
    python3 bench/scan/run.py --sf 1 --rounds 1 --skip-postgres   # quick look

Data sets are cached under --work (default /var/tmp/flashscan-bench, readable by the postgres user) and reused.
"""
import argparse, json, os, shutil, statistics, subprocess, sys, time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(HERE, ".."))
import common  # noqa: E402
from common import print_markdown_table, round_order, sh  # noqa: E402,F401 (bench/compression imports them from here)

# The built-in queries and the SQL the peers run for them. Keep in step with
# crates/exec/src/queries/ (the same definitions, checked against the same oracle).
QUERIES = {
    "count": "SELECT COUNT(*) FROM lineitem",
    "count11": "SELECT COUNT(l_orderkey), COUNT(l_partkey), COUNT(l_suppkey), COUNT(l_linenumber), "
               "COUNT(l_quantity), COUNT(l_extendedprice), COUNT(l_discount), COUNT(l_tax), "
               "COUNT(l_returnflag), COUNT(l_linestatus), COUNT(l_shipdate) FROM lineitem",
    "sum4": "SELECT SUM(l_quantity), SUM(l_extendedprice), SUM(l_discount), SUM(l_tax) FROM lineitem",
    "needle": "SELECT COUNT(*) FROM lineitem WHERE l_comment LIKE '%needle%'",
    "q1": """SELECT l_returnflag, l_linestatus, SUM(l_quantity) AS sum_qty,
  SUM(l_extendedprice) AS sum_base_price, SUM(l_extendedprice * (1 - l_discount)) AS sum_disc_price,
  SUM(l_extendedprice * (1 - l_discount) * (1 + l_tax)) AS sum_charge, AVG(l_quantity) AS avg_qty,
  AVG(l_extendedprice) AS avg_price, AVG(l_discount) AS avg_disc, COUNT(*) AS count_order
FROM lineitem WHERE l_shipdate <= DATE '1998-12-01' - INTERVAL '90' DAY
GROUP BY l_returnflag, l_linestatus ORDER BY l_returnflag, l_linestatus""",
}

PG_PORT = 5439


def drop_caches():
    if os.geteuid() != 0:
        sys.exit("bench/scan: cold runs need root to drop the page cache")
    sh("sync; echo 3 > /proc/sys/vm/drop_caches")


def flashscan_bin():
    sh(["cargo", "build", "--release", "-q", "-p", "flashscan-cli"], cwd=ROOT)
    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
    return os.path.join(target, "release", "flashscan")


def prepare_parquet(work, sf):
    out = os.path.join(work, f"parquet-sf{sf}")
    if not os.path.exists(os.path.join(out, "lineitem.parquet")):
        os.makedirs(out, exist_ok=True)
        sh(["tpchgen-cli", "parquet", "-s", str(sf), "--tables", "lineitem", "--output-dir", out])
    return os.path.join(out, "lineitem.parquet")


def prepare_flashscan(fs, work, sf):
    db = os.path.join(work, f"flashscan-sf{sf}")
    if not os.path.exists(os.path.join(db, "catalog.json")):
        t = time.perf_counter()
        sh([fs, "load", db, "--sf", str(sf), "--tables", "lineitem"])
        print(f"flashscan load: {time.perf_counter() - t:.1f} s")
    return db


def prepare_duckdb(work, sf, parquet):
    return common.prepare_duckdb(os.path.join(work, f"duckdb-sf{sf}.db"), {"lineitem": parquet})


class Postgres:
    def __init__(self, work, sf):
        self.data = os.path.join(work, f"pg-sf{sf}")
        self.sf = sf
        self.user = "postgres"

    def _as_pg(self, cmd):
        return ["su", self.user, "-c", cmd] if os.geteuid() == 0 else ["bash", "-c", cmd]

    def start(self):
        sh(self._as_pg(f"pg_ctl -D {self.data} -o '-p {PG_PORT} -k /tmp' -l {self.data}/log -w start"), stdout=subprocess.DEVNULL)

    def stop(self):
        subprocess.run(self._as_pg(f"pg_ctl -D {self.data} -w stop"), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def psql(self, sql):
        return subprocess.run(["psql", "-h", "/tmp", "-p", str(PG_PORT), "-U", self.user, "-d", "postgres", "-Atc", sql],
                              check=True, capture_output=True, text=True).stdout

    def prepare(self, work):
        if os.geteuid() == 0:
            subprocess.run(["useradd", "-m", self.user], stderr=subprocess.DEVNULL)
        if not os.path.exists(os.path.join(self.data, "PG_VERSION")):
            os.makedirs(self.data, exist_ok=True)
            if os.geteuid() == 0:
                shutil.chown(self.data, self.user, self.user)
                shutil.chown(work, self.user, self.user)
            sh(self._as_pg(f"initdb -D {self.data} -U {self.user} >/dev/null"))
            with open(os.path.join(self.data, "postgresql.conf"), "a") as f:
                f.write("shared_buffers = 4GB\nmax_parallel_workers_per_gather = 2\nwork_mem = 256MB\n"
                        "effective_io_concurrency = 32\njit = off\n")
            self.start()
            csv = os.path.join(work, f"csv-sf{self.sf}")
            sh(["tpchgen-cli", "csv", "-s", str(self.sf), "--tables", "lineitem", "--output-dir", csv])
            if os.geteuid() == 0:
                sh(["chown", "-R", f"{self.user}:{self.user}", csv])
            self.psql("""CREATE TABLE lineitem (l_orderkey BIGINT, l_partkey BIGINT, l_suppkey BIGINT,
              l_linenumber INT, l_quantity DECIMAL(15,2), l_extendedprice DECIMAL(15,2), l_discount DECIMAL(15,2),
              l_tax DECIMAL(15,2), l_returnflag CHAR(1), l_linestatus CHAR(1), l_shipdate DATE, l_commitdate DATE,
              l_receiptdate DATE, l_shipinstruct CHAR(25), l_shipmode CHAR(10), l_comment VARCHAR(44))""")
            t = time.perf_counter()
            self.psql(f"COPY lineitem FROM '{csv}/lineitem.csv' WITH (FORMAT csv, HEADER true)")
            self.psql("VACUUM ANALYZE lineitem")
            print(f"postgres load (COPY + VACUUM): {time.perf_counter() - t:.1f} s")
            shutil.rmtree(csv)
        else:
            self.start()


def time_flashscan(fs, db, query, cold):
    args = [fs, "scan", db, "lineitem", "--query", query, "--json", "--cold" if cold else "--warm"]
    if cold:
        drop_caches()
    out = subprocess.run(args, check=True, capture_output=True, text=True).stdout
    return json.loads(out)["elapsed_s"]


def time_duckdb(path, sql, cold, state):
    import duckdb
    if cold or state.get("con") is None:
        if state.get("con") is not None:
            state["con"].close()
        if cold:
            drop_caches()
        state["con"] = duckdb.connect(path, read_only=True)
    t = time.perf_counter()
    state["con"].execute(sql).fetchall()
    return time.perf_counter() - t


def time_postgres(pg, sql, cold):
    if cold:
        pg.stop()
        drop_caches()
        pg.start()
    t = time.perf_counter()
    pg.psql(sql)
    return time.perf_counter() - t


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    common.add_run_args(ap, rounds=3, work="/var/tmp/flashscan-bench")
    ap.add_argument("--queries", default=",".join(QUERIES))
    ap.add_argument("--modes", default="cold,warm")
    ap.add_argument("--skip-postgres", action="store_true")
    ap.add_argument("--skip-duckdb", action="store_true")
    ap.add_argument("--markdown", help="also write the result table to this file")
    ap.add_argument("--flashscan", help="use this flashscan binary instead of building one")
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    fs = a.flashscan or flashscan_bin()
    db = prepare_flashscan(fs, a.work, a.sf)
    duck = None if a.skip_duckdb else prepare_duckdb(a.work, a.sf, prepare_parquet(a.work, a.sf))
    pg = None
    if not a.skip_postgres:
        pg = Postgres(a.work, a.sf)
        pg.prepare(a.work)
    rows = []
    try:
        for mode_index, mode in enumerate(a.modes.split(",")):
            cold = mode == "cold"
            for query_index, q in enumerate(a.queries.split(",")):
                sql = QUERIES[q]
                times = {"flashscan": [], "duckdb": [], "postgres": []}
                state = {}
                if not cold:  # warm-up, untimed
                    time_flashscan(fs, db, q, False)
                    if duck: time_duckdb(duck, sql, False, state)
                    if pg: time_postgres(pg, sql, False)
                timed = [("flashscan", lambda: time_flashscan(fs, db, q, cold))]
                if duck: timed.append(("duckdb", lambda: time_duckdb(duck, sql, cold, state)))
                if pg: timed.append(("postgres", lambda: time_postgres(pg, sql, cold)))
                for r in range(a.rounds):
                    for name, run in round_order(timed, (mode_index * 100 + query_index) * 1000 + r):
                        times[name].append(run())
                med = {k: statistics.median(v) for k, v in times.items() if v}
                row = [q, mode, f"{med['flashscan']:.3f}"]
                for peer in ("duckdb", "postgres"):
                    row += [f"{med[peer]:.3f}", f"{med[peer] / med['flashscan']:.2f}x"] if peer in med else ["-", "-"]
                rows.append(row)
                print(" | ".join(row), flush=True)
    finally:
        if pg:
            pg.stop()
    header = ["query", "mode", "flashscan s", "duckdb s", "duckdb/flashscan", "postgres s", "postgres/flashscan"]
    print_markdown_table(f"TPC-H lineitem SF {a.sf}, medians of {a.rounds} interleaved rounds (ratio > 1: flashscan faster)", header, rows, a.markdown)


if __name__ == "__main__":
    main()
