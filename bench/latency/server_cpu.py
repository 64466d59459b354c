"""A server process's CPU time, for the latency scripts beside this file: utime + stime
from /proc/PID/stat, in seconds."""
import os

TICKS = os.sysconf("SC_CLK_TCK")


def cpu_s(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def server_arguments(ap):
    """The servers a latency script measures: flashscan's DSN and process id (its CPU is
    the whole process's), PostgreSQL's DSN (its CPU is the connection's backend's)."""
    ap.add_argument("--flashscan", required=True)
    ap.add_argument("--flashscan-pid", type=int, required=True)
    ap.add_argument("--postgres", required=True)


def interleaved(sides, cases, rounds, measure, label):
    """Runs `measure(side, case, round)` → (elapsed µs, CPU µs) for every side and case,
    `rounds` times, the sides' order reversed every other round; prints each result and
    returns them by (side, case)."""
    results = {(side, case): [] for side in sides for case in cases}
    for r in range(rounds):
        for case in cases:
            order = list(sides) if r % 2 == 0 else list(reversed(sides))
            for side in order:
                e, c = measure(side, case, r)
                results[(side, case)].append((e, c))
                print(f"round {r} {side} {label}{case}: {e:.0f} us/statement elapsed, {c:.0f} us CPU", flush=True)
    return results


def ratio_table(results, cases, case_title):
    """Medians over rounds, flashscan beside PostgreSQL, as a Markdown table with ratios."""
    import statistics

    print(f"\n| {case_title} | flashscan µs | PostgreSQL µs | ratio | flashscan CPU µs | PostgreSQL CPU µs | CPU ratio |")
    print("|---|---|---|---|---|---|---|")
    for case in cases:
        f = [statistics.median(x) for x in zip(*results[("flashscan", case)])]
        p = [statistics.median(x) for x in zip(*results[("postgres", case)])]
        print(f"| {case} | {f[0]:.0f} | {p[0]:.0f} | {f[0] / p[0]:.2f} | {f[1]:.0f} | {p[1]:.0f} | {f[1] / p[1]:.2f} |")
