#!/usr/bin/env python3
"""Medians of IOPS and CPU µs per I/O per job for fio and flashscan, and their ratios.

fio's CPU per I/O: (usr_cpu + sys_cpu) % × job_runtime / total I/Os, summed over its jobs
(numjobs > 1 gives one entry per job: no group_reporting, so nothing is averaged away).
flashscan's: `cpu_us_per_io` from its JSON (process user + system time / I/Os, warm-up
excluded). Usage: summarize.py RESULTS_DIR JOB...
"""
import glob
import json
import statistics
import sys


def fio_figures(path):
    with open(path) as f:
        data = json.load(f)
    iops = 0.0
    ios = 0
    cpu_us = 0.0
    for job in data["jobs"]:
        runtime_ms = job["job_runtime"]
        job_ios = job["read"]["total_ios"] + job["write"]["total_ios"]
        iops += job["read"]["iops"] + job["write"]["iops"]
        ios += job_ios
        cpu_us += (job["usr_cpu"] + job["sys_cpu"]) / 100.0 * runtime_ms * 1000.0
    return iops, (cpu_us / ios if ios else float("nan"))


def flashscan_figures(path):
    with open(path) as f:
        data = json.load(f)
    return data["iops"], data["cpu_us_per_io"]


def main():
    out, jobs = sys.argv[1], sys.argv[2:]
    rows = []
    for job in jobs:
        fio = [fio_figures(p) for p in sorted(glob.glob(f"{out}/{job}.fio.*.json"))]
        fs = [flashscan_figures(p) for p in sorted(glob.glob(f"{out}/{job}.flashscan.*.json"))]
        if not fio or not fs:
            continue
        fio_iops = statistics.median(x[0] for x in fio)
        fio_cpu = statistics.median(x[1] for x in fio)
        fs_iops = statistics.median(x[0] for x in fs)
        fs_cpu = statistics.median(x[1] for x in fs)
        # Ratio of medians, and median of the per-round ratios (pairs run side by side).
        pair_ratios = [b[0] / a[0] for a, b in zip(fio, fs) if a[0] > 0]
        rows.append((job, len(fs), fio_iops, fs_iops, statistics.median(pair_ratios), fio_cpu, fs_cpu, fs_cpu / fio_cpu))
    print("| job | rounds | fio IOPS | flashscan IOPS | IOPS ratio (flashscan/fio, median of pairs) | fio CPU µs/IO | flashscan CPU µs/IO | CPU/IO ratio |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for job, n, fi, si, r, fc, sc, cr in rows:
        print(f"| {job} | {n} | {fi:,.0f} | {si:,.0f} | {r:.3f} | {fc:.2f} | {sc:.2f} | {cr:.3f} |")


if __name__ == "__main__":
    main()
