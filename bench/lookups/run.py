#!/usr/bin/env python3
"""Cold random key lookups with prefetch against fio's 8 KB random read, same files, same
queue depth, interleaved (fio, flashscan, fio, flashscan, ...); reports the median ratio of
flashscan's reads/s to fio's IOPS per rows-per-query, and CPU µs per 8 KB read for both.

Usage: bench/lookups/run.py DB [--flashscan PATH] [--rounds 5] [--depth 32] [--rows 1000,3000,10000]

DB/bench_costs must hold the synthetic `lookup` table and its `by_id` index: the script
creates them with `flashscan bench costs DB --scan-pages 16 --lookup-rows N` when missing.
Cold means O_DIRECT on both sides: flashscan reads every heap page from the device (its
index nodes stay in memory), fio reads random 8 KB blocks of the same heap file.
Targets (issue 6): at 1,000 rows per query and above, >= 0.9 of fio's IOPS; CPU per 8 KB
read under 5 µs.
"""
import argparse, glob, json, os, statistics, subprocess, sys


def sh(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{r.stderr}")
    return r.stdout


def fio(path, depth, seconds):
    out = sh(["fio", "--name=lookup", f"--filename={path}", "--rw=randread", "--bs=8k", "--direct=1",
              "--ioengine=io_uring", f"--iodepth={depth}", "--time_based", f"--runtime={seconds}",
              "--output-format=json", "--readonly"])
    job = json.loads(out)["jobs"][0]
    ios = job["read"]["total_ios"]
    runtime_s = job["job_runtime"] / 1000.0
    cpu_us = (job["usr_cpu"] + job["sys_cpu"]) / 100.0 * runtime_s * 1e6
    return job["read"]["iops"], cpu_us / max(ios, 1)


def flashscan(exe, db, rows, depth, seed):
    out = sh([exe, "lookup", db, "lookup", "--index", "by_id", "--random", str(rows), "--seed", str(seed),
              "--cold", "--depth", str(depth), "--prefetch-from", "25", "--show", "0", "--json"])
    s = json.loads(out)
    return s["derived"]["reads_per_s"], s["derived"]["cpu_us_per_read"], s["stats"]["mode"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("db")
    ap.add_argument("--flashscan", default="target/release/flashscan")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--depth", type=int, default=32)
    ap.add_argument("--rows", default="1000,3000,10000")
    ap.add_argument("--lookup-rows", type=int, default=1_000_000)
    ap.add_argument("--fio-seconds", type=int, default=3)
    a = ap.parse_args()
    bench_db = os.path.join(a.db, "bench_costs")
    heaps = glob.glob(os.path.join(bench_db, "lookup_g*.heap"))
    if not heaps:
        sh([a.flashscan, "bench", "costs", a.db, "--scan-pages", "16", "--lookup-rows", str(a.lookup_rows),
            "--lookup-rows-target", "100"])
        heaps = glob.glob(os.path.join(bench_db, "lookup_g*.heap"))
    heap = max(heaps, key=os.path.getmtime)
    print(f"file {heap} ({os.path.getsize(heap) / 1e6:.0f} MB), depth {a.depth}, {a.rounds} rounds, cold = O_DIRECT")
    print(f"{'rows/query':>10} {'fio IOPS':>10} {'flashscan reads/s':>18} {'ratio':>7} {'fio µs/read':>12} {'flashscan µs/read':>18}")
    for rows in [int(r) for r in a.rows.split(",")]:
        ratios, f_iops, s_rps, f_cpu, s_cpu = [], [], [], [], []
        for r in range(a.rounds):
            iops, fcpu = fio(heap, a.depth, a.fio_seconds)
            rps, scpu, mode = flashscan(a.flashscan, bench_db, rows, a.depth, 1000 + r)
            assert mode == "prefetch", mode
            ratios.append(rps / iops); f_iops.append(iops); s_rps.append(rps); f_cpu.append(fcpu); s_cpu.append(scpu)
        print(f"{rows:>10} {statistics.median(f_iops):>10.0f} {statistics.median(s_rps):>18.0f} "
              f"{statistics.median(ratios):>7.2f} {statistics.median(f_cpu):>12.2f} {statistics.median(s_cpu):>18.2f}")


if __name__ == "__main__":
    main()
