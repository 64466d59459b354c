#!/usr/bin/env python3
"""Medians of IOPS and CPU µs per I/O per job for fio and flashscan, and their ratios.

fio's CPU per I/O: (usr_cpu + sys_cpu) % × job_runtime / total I/Os, summed over its jobs
(numjobs > 1 gives one entry per job: no group_reporting, so nothing is averaged away).
flashscan's: `cpu_us_per_io` from its JSON (process user + system time / I/Os, warm-up
excluded). Usage: summarize.py RESULTS_DIR JOB...

Per-second series (jobs whose fio run wrote an IOPS log, `JOB.fio.ROUND_iops.1.log`):
fio's one-second averages against flashscan's `intervals` (`--status-interval 1`), per
round the median and the coefficient of variation of each series; the table shows their
medians over rounds.
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


def fio_series(path):
    """Per-second IOPS from fio's averaged IOPS log: `msec, value, direction, bs, offset`."""
    values = []
    with open(path) as f:
        for line in f:
            parts = [p.strip() for p in line.split(",")]
            if len(parts) >= 2:
                values.append(float(parts[1]))
    return values


def flashscan_series(path):
    with open(path) as f:
        data = json.load(f)
    # A last partial interval (shorter than a second) is left out, as fio's log does.
    return [i["iops"] for i in data.get("intervals", []) if i["duration_s"] > 0.999]


def cv(values):
    if len(values) < 2:
        return float("nan")
    return statistics.pstdev(values) / statistics.mean(values)


def series_rows(out, jobs):
    rows = []
    for job in jobs:
        logs = sorted(glob.glob(f"{out}/{job}.fio.*_iops.1.log"))
        if not logs:
            continue
        fio_medians, fs_medians, fio_cvs, fs_cvs, counts = [], [], [], [], []
        for log in logs:
            round_ = log.split(".fio.")[1].split("_iops")[0]
            fs_path = f"{out}/{job}.flashscan.{round_}.json"
            fio_s, fs_s = fio_series(log), flashscan_series(fs_path)
            if not fio_s or not fs_s:
                continue
            fio_medians.append(statistics.median(fio_s))
            fs_medians.append(statistics.median(fs_s))
            fio_cvs.append(cv(fio_s))
            fs_cvs.append(cv(fs_s))
            counts.append((len(fio_s), len(fs_s)))
        if fio_medians:
            ratios = [b / a for a, b in zip(fio_medians, fs_medians) if a > 0]
            rows.append((job, len(fio_medians), counts[0], statistics.median(fio_medians), statistics.median(fs_medians),
                         statistics.median(ratios), statistics.median(fio_cvs), statistics.median(fs_cvs)))
    return rows


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
    series = series_rows(out, jobs)
    if series:
        print()
        print("| per-second series | rounds | samples (fio, flashscan) | fio median IOPS/s | flashscan median IOPS/s | ratio (median of rounds) | fio CV | flashscan CV |")
        print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
        for job, n, c, fm, sm, r, fcv, scv in series:
            print(f"| {job} | {n} | {c[0]}, {c[1]} | {fm:,.0f} | {sm:,.0f} | {r:.3f} | {fcv:.3f} | {scv:.3f} |")


if __name__ == "__main__":
    main()
