#!/usr/bin/env python3
"""How the log should make a flush durable on this disk: sequential writes of SIZE bytes into
a preallocated, zero-filled file (as a recycled log segment is), each made durable by
  direct+fdatasync  O_DIRECT write, then fdatasync (crates/wal's flush before server6)
  direct+dsync      O_DIRECT|O_DSYNC write (one syscall; FUA where the device has it)
  buffered+fdatasync  page-cache write, then fdatasync (PostgreSQL's default wal_sync_method)
Rounds interleave the methods (the shared VM's flush latency moves within minutes); prints
per method and size the median over rounds of each run's mean and p99 latency in µs.
  python3 bench/wal_commits/dsync_vs_fdatasync.py --dir /work/bench-data/NAME --sizes 4096,8192,16384 --writes 1000 --rounds 5
"""
import argparse, mmap, os, statistics, time

FILE_BYTES = 16 << 20  # one log segment


def run(path, method, size, writes):
    flags = os.O_WRONLY
    if method != "buffered+fdatasync":
        flags |= os.O_DIRECT
    if method == "direct+dsync":
        flags |= os.O_DSYNC
    fd = os.open(path, flags)
    buf = mmap.mmap(-1, size)  # page-aligned, as O_DIRECT needs
    buf.write(b"\x5a" * size)
    lat = []
    off = 0
    try:
        for _ in range(writes):
            t = time.perf_counter_ns()
            os.pwritev(fd, [buf], off)
            if method != "direct+dsync":
                os.fdatasync(fd)
            lat.append((time.perf_counter_ns() - t) / 1000)
            off = (off + size) % FILE_BYTES
    finally:
        os.close(fd)
    lat.sort()
    return statistics.mean(lat), lat[int(len(lat) * 0.99)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    ap.add_argument("--sizes", default="4096,8192,16384")
    ap.add_argument("--writes", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()
    os.makedirs(a.dir, exist_ok=True)
    path = os.path.join(a.dir, "dsync-probe-%d" % os.getpid())
    with open(path, "wb") as f:
        f.write(b"\0" * FILE_BYTES)
        f.flush()
        os.fsync(f.fileno())
    methods = ["direct+fdatasync", "direct+dsync", "buffered+fdatasync"]
    sizes = [int(s) for s in a.sizes.split(",")]
    res = {}
    try:
        for r in range(a.rounds):
            for size in sizes:
                for m in methods:
                    mean, p99 = run(path, m, size, a.writes)
                    res.setdefault((m, size), []).append((mean, p99))
                    print("round %d %-19s %6d B  mean %7.1f µs  p99 %7.1f µs" % (r + 1, m, size, mean, p99), flush=True)
    finally:
        os.unlink(path)
    print("medians over %d rounds (load %s)" % (a.rounds, open("/proc/loadavg").read().split()[0]))
    for size in sizes:
        base = statistics.median(x[0] for x in res[(methods[0], size)])
        for m in methods:
            means = [x[0] for x in res[(m, size)]]
            p99s = [x[1] for x in res[(m, size)]]
            print("%-19s %6d B  mean %7.1f µs  p99 %7.1f µs  mean ÷ direct+fdatasync %.2f" % (m, size, statistics.median(means), statistics.median(p99s), statistics.median(means) / base))


if __name__ == "__main__":
    main()
