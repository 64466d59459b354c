#!/usr/bin/env python3
"""bench/tpch/first_touch.py: how fast this machine's kernel hands a process fresh memory,
with transparent huge pages (`madvise(MADV_HUGEPAGE)`, what mimalloc v3 asks for on its
arenas) and with 4 KB pages (what `flashscan sql` uses since it turns huge pages off).

Maps --mb of anonymous memory, touches one byte per 4 KB page (the kernel zeroes each page
on its first touch: 2 MB at a time with huge pages), and prints elapsed and system seconds
and the page faults, alternating the two kinds for --rounds. docs/benchmarks.md, Q16.

    python3 bench/tpch/first_touch.py --mb 400 --rounds 3
"""
import argparse, mmap, resource, time

PAGE_BYTES = 4096


def touch(huge, size_bytes):
    m = mmap.mmap(-1, size_bytes, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    if huge:
        m.madvise(mmap.MADV_HUGEPAGE)
    before, start = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    for offset in range(0, size_bytes, PAGE_BYTES):
        m[offset] = 1
    elapsed_s = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_SELF)
    m.close()
    return elapsed_s, after.ru_stime - before.ru_stime, after.ru_minflt - before.ru_minflt


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mb", type=int, default=400)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    for _ in range(a.rounds):
        for huge in (True, False):
            elapsed_s, system_s, faults = touch(huge, a.mb << 20)
            kind = "MADV_HUGEPAGE" if huge else "4 KB pages   "
            print(f"{kind}: {elapsed_s:.3f} s elapsed, {system_s:.3f} s system, {faults} faults, {a.mb / elapsed_s:.0f} MB/s")


if __name__ == "__main__":
    main()
