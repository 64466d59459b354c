#!/usr/bin/env python3
"""Where a log flush's time goes on a busy machine: one thread writes the log's next 4 KiB
block (O_DIRECT) and fdatasyncs it, 300 times, and reads its own run-queue wait
(/proc/self/task/TID/schedstat, field 2) around each fdatasync: time the thread was
runnable (its I/O done) but waiting for a CPU. On an idle machine the wait is ~0 and the
fdatasync ~0.1 ms; beside CPU-bound processes (builds) the fdatasync "took" milliseconds,
nearly all of it run-queue wait (docs/benchmarks.md, server7).
  python3 bench/wal_commits/flush_runqueue.py --dir /work/bench-data/NAME
"""
import argparse, mmap, os, statistics, threading, time

ap = argparse.ArgumentParser()
ap.add_argument("--dir", required=True)
ap.add_argument("--writes", type=int, default=300)
a = ap.parse_args()
os.makedirs(a.dir, exist_ok=True)
p = os.path.join(a.dir, "flush-runqueue-%d" % os.getpid())
with open(p, "wb") as f:
    f.write(b"\0" * (16 << 20))
    f.flush()
    os.fsync(f.fileno())
fd = os.open(p, os.O_WRONLY | os.O_DIRECT)
buf = mmap.mmap(-1, 4096)
buf.write(b"\x5a" * 4096)
stat = "/proc/self/task/%d/schedstat" % threading.get_native_id()


def runqueue_ns():
    with open(stat) as f:
        return int(f.read().split()[1])


sync_us, wait_us = [], []
try:
    for i in range(a.writes):
        os.pwritev(fd, [buf], 4096 * (i + 1))
        r0 = runqueue_ns()
        t0 = time.perf_counter_ns()
        os.fdatasync(fd)
        t1 = time.perf_counter_ns()
        r1 = runqueue_ns()
        sync_us.append((t1 - t0) / 1000)
        wait_us.append((r1 - r0) / 1000)
finally:
    os.close(fd)
    os.unlink(p)
sync_us.sort()
wait_us.sort()
n = len(sync_us)
print("fdatasync p50 %.0f mean %.0f µs | run-queue wait during it p50 %.0f mean %.0f µs (load %s)" % (
    sync_us[n // 2], statistics.mean(sync_us), wait_us[n // 2], statistics.mean(wait_us), open("/proc/loadavg").read().split()[0]))
