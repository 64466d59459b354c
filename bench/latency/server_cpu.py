"""A server process's CPU time, for the latency scripts beside this file: utime + stime
from /proc/PID/stat, in seconds."""
import os

TICKS = os.sysconf("SC_CLK_TCK")


def cpu_s(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS
