#!/bin/sh
# Group-commit micro-benchmark of crates/wal: N threads each append one small insert record
# and commit it (wait until durable), for SECONDS, on real segment files in DIR.
# Rounds are interleaved over the thread counts (1 8 64 1 8 64 …); prints one line per run
# (or JSON with JSON=1), then medians per thread count.
#   DIR=/work/bench-data RUN_SECONDS=5 ROUNDS=3 THREADS="1 8 64" bench/wal_commits/run.sh
set -eu
DIR=${DIR:-/work/bench-data}
SECONDS_PER_RUN=${RUN_SECONDS:-5}
ROUNDS=${ROUNDS:-3}
THREADS=${THREADS:-"1 8 64"}
ROW_BYTES=${ROW_BYTES:-64}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-/work/target}
mkdir -p "$DIR"
cargo build --release -q -p flashscan-wal --example commit_bench
BIN=$CARGO_TARGET_DIR/release/examples/commit_bench
OUT=$(mktemp)
r=0
while [ $r -lt "$ROUNDS" ]; do
  for t in $THREADS; do
    "$BIN" "$DIR" "$t" "$SECONDS_PER_RUN" "$ROW_BYTES" --json | tee -a "$OUT"
  done
  r=$((r + 1))
done
python3 - "$OUT" <<'PY'
import json, statistics, sys
runs = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
by = {}
for r in runs:
    by.setdefault(r["threads"], []).append(r)
print("medians over %d rounds" % (len(runs) // max(1, len(by))))
print("threads  commits/s  commits/flush  p50_us  p99_us  cpu_us/commit  log_bytes/commit")
for t, rs in sorted(by.items()):
    m = lambda f: statistics.median(f(r) for r in rs)
    print("%7d  %9.0f  %13.2f  %6.0f  %6.0f  %13.1f  %16.0f" % (t, m(lambda r: r["commits_per_s"]), m(lambda r: r["commits_per_flush"]),
          m(lambda r: r["commit_latency_us"]["p50"]), m(lambda r: r["commit_latency_us"]["p99"]), m(lambda r: r["cpu_us_per_commit"]),
          m(lambda r: r["log_bytes_per_commit"])))
PY
rm -f "$OUT"
