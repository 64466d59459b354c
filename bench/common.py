"""What the peer benchmarks under bench/ share: loading another benchmark's script, running a command, CPU seconds of this
process or its children, a DuckDB database loaded once from Parquet files, the flags every
side-by-side run takes (scale factor, rounds, threads, work directory), the order of the
runs in a round and the Markdown result table.

A script imports it with
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    import common
"""
import importlib.util, os, random, resource, subprocess, time


def load_by_path(name, path):
    """Another benchmark's script as a module (each is named run.py, so not by import)."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def sh(cmd, **kw):
    """Runs `cmd` (a list, or a string for the shell), failing on a non-zero exit."""
    return subprocess.run(cmd, shell=isinstance(cmd, str), check=True, **kw)


def cpu_s(who):
    """User + system CPU seconds so far of `who` (resource.RUSAGE_SELF or RUSAGE_CHILDREN)."""
    r = resource.getrusage(who)
    return r.ru_utime + r.ru_stime


def prepare_duckdb(path, parquet_by_table):
    """The DuckDB database at `path`, made once (kept and reused) with one table per entry
    of `parquet_by_table` (name -> Parquet file) copied in; prints the load time."""
    import duckdb
    if not os.path.exists(path):
        t = time.perf_counter()
        con = duckdb.connect(path)
        for table, parquet in parquet_by_table.items():
            con.execute(f"CREATE TABLE {table} AS SELECT * FROM read_parquet('{parquet}')")
        con.close()
        print(f"duckdb load: {time.perf_counter() - t:.1f} s", flush=True)
    return path


def add_run_args(ap, rounds, work, threads_help=None):
    """The flags of every side-by-side run: --sf, --rounds (medians of interleaved rounds),
    --threads (the same for every engine; only where `threads_help` says how each takes
    it), --work (where data sets are cached)."""
    ap.add_argument("--sf", default="10")
    ap.add_argument("--rounds", type=int, default=rounds)
    if threads_help:
        ap.add_argument("--threads", type=int, default=os.cpu_count(), help=threads_help)
    ap.add_argument("--work", default=work)


def print_markdown_table(title, header, rows, path=None):
    """Prints the results as a Markdown table under `title`, and writes it to `path` if given."""
    table = "| " + " | ".join(header) + " |\n|" + "---|" * len(header) + "\n" + "".join("| " + " | ".join(r) + " |\n" for r in rows)
    print(f"\n{title}\n")
    print(table)
    if path:
        with open(path, "w") as f:
            f.write(table)


def round_order(runs, seed):
    """`runs` in a shuffled order for one round, seeded (by the query and the round, say) so
    a rerun repeats it. Every side-by-side bench shuffles each round: a process started
    right after another engine's run pays the kernel's zeroing of the pages that run freed
    (an A/A run of one flashscan binary against itself in fixed order gave the slot after
    DataFusion 1.25-1.4x the time, docs/benchmarks.md), and a fixed order or a rotation
    hands that cost to the same engine every round."""
    order = list(runs)
    random.Random(seed).shuffle(order)
    return order
