#!/bin/sh
# Group-commit micro-benchmark of crates/wal: N threads each append one small insert record
# and commit it (wait until durable), for SECONDS, on real segment files in DIR.
# The peer: dd writing 4 KiB blocks with O_DIRECT|O_DSYNC over a file in the same directory,
# i.e. the device's durable 4 KiB writes per second at one thread — the ceiling of a
# one-committer log without batching, measured in the same round because the shared
# machine's flush latency moves by 30x within minutes.
# Rounds are interleaved (dd, 1, 8, 64 threads, dd, 1, …); prints one JSON line per run,
# then medians per thread count.
#   DIR=/work/bench-data RUN_SECONDS=5 ROUNDS=3 THREADS="1 8 64" bench/wal_commits/run.sh
set -eu
DIR=${DIR:-/work/bench-data}
SECONDS_PER_RUN=${RUN_SECONDS:-5}
ROUNDS=${ROUNDS:-3}
THREADS=${THREADS:-"1 8 64"}
ROW_BYTES=${ROW_BYTES:-64}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-/work/target}
mkdir -p "$DIR"
if [ -z "${BIN:-}" ]; then
  cargo build --release -q -p flashscan-wal --example commit_bench
  BIN=$CARGO_TARGET_DIR/release/examples/commit_bench
fi
OUT=$(mktemp)
DDFILE="$DIR/dd-dsync-$$"
dd if=/dev/zero of="$DDFILE" bs=1M count=8 status=none
r=0
while [ $r -lt "$ROUNDS" ]; do
  n=$((SECONDS_PER_RUN * 200))
  dd if=/dev/zero of="$DDFILE" bs=4k count=$n oflag=direct,dsync conv=notrunc 2>&1 | \
    awk -v n=$n '/copied/ {for (i = 1; i <= NF; i++) if ($i == "s,") s = $(i-1); printf "{\"peer\":\"dd_o_dsync_4k\",\"writes_per_s\":%.0f}\n", n / s}' | tee -a "$OUT"
  for t in $THREADS; do
    "$BIN" "$DIR" "$t" "$SECONDS_PER_RUN" "$ROW_BYTES" --json | tee -a "$OUT"
  done
  r=$((r + 1))
done
python3 - "$OUT" <<'PY'
import json, statistics, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
# Each run divided by the dd figure of its own round: the ratio survives the device's swings.
dd = None
for r in lines:
    if "peer" in r:
        dd = r["writes_per_s"]
    elif dd:
        r["vs_dd"] = r["commits_per_s"] / dd
runs = [r for r in lines if "threads" in r]
peer = [r["writes_per_s"] for r in lines if "peer" in r]
if peer:
    print("peer: dd 4 KiB O_DIRECT|O_DSYNC writes/s, median %.0f (rounds: %s)" % (statistics.median(peer), ", ".join("%.0f" % p for p in peer)))
by = {}
for r in runs:
    by.setdefault(r["threads"], []).append(r)
print("medians over %d rounds" % (len(runs) // max(1, len(by))))
print("threads  commits/s  commits/flush  p50_us  p99_us  cpu_us/commit  log_bytes/commit  commits/s ÷ dd writes/s (same round)")
for t, rs in sorted(by.items()):
    m = lambda f: statistics.median(f(r) for r in rs)
    print("%7d  %9.0f  %13.2f  %6.0f  %6.0f  %13.1f  %16.0f" % (t, m(lambda r: r["commits_per_s"]), m(lambda r: r["commits_per_flush"]),
          m(lambda r: r["commit_latency_us"]["p50"]), m(lambda r: r["commit_latency_us"]["p99"]), m(lambda r: r["cpu_us_per_commit"]),
          m(lambda r: r["log_bytes_per_commit"])), " ", ", ".join("%.2f" % r["vs_dd"] for r in rs if "vs_dd" in r))
PY
rm -f "$OUT" "$DDFILE"
