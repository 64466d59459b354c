#!/usr/bin/env python3
"""Two questions about the log's flush on this disk (issue 12, server7):

1. Do flushes overlap? K threads each write the log's next 4 KiB block (O_DIRECT, one
   shared, sequential offset as the log writes it) into a preallocated zero-filled 16 MiB
   file and fdatasync it, as K flushes in flight at once would. If the device (or the
   host behind the virtio disk) serves two cache flushes at once, flushes/s grows with K
   at about the same latency; if it serializes them, flushes/s stays and latency grows.
2. Does creating a segment beside the log hurt its flushes? One flusher as above, alone
   and while another thread creates a new zero-filled 16 MiB file + fsync (what the log's
   segment preparer does) every --create-every seconds — at 8 clients the log seals a 4 KiB
   block per flush, ~5,000 flushes/s, i.e. a new segment every ~0.8 s.

Rounds interleave the cases; prints per case the median over rounds of flushes/s, mean,
p50 and p99 latency in µs.
  python3 bench/wal_commits/overlap_probe.py --dir /work/bench-data/NAME --seconds 3 --rounds 3
"""
import argparse, mmap, os, statistics, threading, time

FILE_BYTES = 16 << 20  # one log segment
BLOCK = 4096


def zero_file(path):
    with open(path, "wb") as f:
        f.write(b"\0" * FILE_BYTES)
        f.flush()
        os.fsync(f.fileno())


def flushers(path, threads, seconds, creator_dir=None, create_every=0.8):
    fd = os.open(path, os.O_WRONLY | os.O_DIRECT)
    lock = threading.Lock()
    state = {"off": BLOCK}
    stop = time.perf_counter() + seconds
    lats = [[] for _ in range(threads)]

    def worker(i):
        buf = mmap.mmap(-1, BLOCK)
        buf.write(b"\x5a" * BLOCK)
        out = lats[i]
        while True:
            t = time.perf_counter_ns()
            if t / 1e9 > stop:
                return
            with lock:
                off = state["off"]
                state["off"] = off + BLOCK if off + BLOCK < FILE_BYTES else BLOCK
                # The log writes its blocks in order: the write happens under the lock,
                # the fdatasync outside it (a second flush may start meanwhile).
                os.pwritev(fd, [buf], off)
            os.fdatasync(fd)
            out.append((time.perf_counter_ns() - t) / 1000)

    created = [0]

    def creator():
        n = 0
        while time.perf_counter() < stop:
            p = os.path.join(creator_dir, "seg-%d-%d" % (os.getpid(), n))
            zero_file(p)
            dfd = os.open(creator_dir, os.O_RDONLY)
            os.fsync(dfd)
            os.close(dfd)
            os.unlink(p)
            n += 1
            created[0] += 1
            time.sleep(create_every)

    ts = [threading.Thread(target=worker, args=(i,)) for i in range(threads)]
    if creator_dir:
        ts.append(threading.Thread(target=creator))
    t0 = time.perf_counter()
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    elapsed = time.perf_counter() - t0
    os.close(fd)
    all_ = sorted(x for l in lats for x in l)
    return len(all_) / elapsed, statistics.mean(all_), all_[len(all_) // 2], all_[int(len(all_) * 0.99)], created[0]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    ap.add_argument("--seconds", type=float, default=3)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", default="1,2,3,4")
    ap.add_argument("--create-every", type=float, default=0.8)
    a = ap.parse_args()
    os.makedirs(a.dir, exist_ok=True)
    path = os.path.join(a.dir, "overlap-probe-%d" % os.getpid())
    zero_file(path)
    cases = [("flushers=%s" % k, int(k), False) for k in a.threads.split(",")] + [("1 flusher + segment creation", 1, True)]
    res = {}
    try:
        for r in range(a.rounds):
            for name, k, create in cases:
                rate, mean, p50, p99, made = flushers(path, k, a.seconds, a.dir if create else None, a.create_every)
                res.setdefault(name, []).append((rate, mean, p50, p99))
                extra = " (%d segments created)" % made if create else ""
                print("round %d %-30s %7.0f flushes/s  mean %6.1f  p50 %6.1f  p99 %7.1f µs%s" % (r + 1, name, rate, mean, p50, p99, extra), flush=True)
    finally:
        os.unlink(path)
    print("medians over %d rounds (load %s)" % (a.rounds, open("/proc/loadavg").read().split()[0]))
    for name, _, _ in cases:
        v = res[name]
        print("%-30s %7.0f flushes/s  mean %6.1f  p50 %6.1f  p99 %7.1f µs" % (
            name, *(statistics.median(x[i] for x in v) for i in range(4))))


if __name__ == "__main__":
    main()
