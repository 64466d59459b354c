#!/usr/bin/env python3
"""One flashscan binary, one heap query, cold with --check, at several fixed read-ahead depths:
the scan's MB/s against the raw passes beside it, and the reads it really kept in flight
(Little's law: per file, reads x average latency, over the scan's elapsed time), with the
waits and the load average. What docs/scan.md "Read-ahead depth" was measured with.

  python3 bench/heap_scan/depths.py BINARY DB QUERY 4,8,16,32,64 [THREADS] [extra scan flags…]
"""
import json
import os
import subprocess
import sys


def main():
    binary, db, query = sys.argv[1], sys.argv[2], sys.argv[3]
    depths = [int(x) for x in sys.argv[4].split(",")]
    threads = sys.argv[5] if len(sys.argv) > 5 else None
    extra = sys.argv[6:]
    for d in depths:
        args = [binary, "scan", db, "lineitem", "--query", query, "--cold", "--check", "--json", "--depth", str(d)] + extra
        if threads:
            args += ["--threads", threads]
        j = json.loads(subprocess.run(args, check=True, capture_output=True, text=True).stdout)
        elapsed = j["elapsed_s"]
        in_flight = sum(f["reads_count"] * f["read_latency_us_avg"] / 1e6 for f in j["files"]) / elapsed
        reads = max(1, sum(f["reads_count"] for f in j["files"]))
        latency_us = sum(f["reads_count"] * f["read_latency_us_avg"] for f in j["files"]) / reads
        w = j["waits"]
        print(f"{query} depth {d:3d} threads {j['threads']}: scan {j['mb_per_s']:6.0f} MB/s, raw {j['raw_mb_per_s_before']:6.0f} / "
              f"{j['raw_mb_per_s_after']:6.0f}, efficiency {j['efficiency']:.2f}, in flight {in_flight:5.1f}, latency {latency_us:6.0f} µs, "
              f"{j['read_ios_count']} reads of {j['read_io_size_bytes_avg'] / 1024:.0f} KiB, CPU {j['cpu_s']:.3f} s in {elapsed:.3f} s, "
              f"waits io {w['io_s']:.3f} decode {w['decode_s']:.3f} query {w['query_s']:.3f} | load {os.getloadavg()[0]:.1f}", flush=True)


if __name__ == "__main__":
    main()
