#!/usr/bin/env bash
# fio vs `flashscan io`, engine for engine (io_uring), O_DIRECT, on the same file,
# interleaved A B A B, medians and ratios only (the machines are small and noisy).
#
#   bench/io_vs_fio/run.sh                     # 3 rounds, 5 s per run, 2G file in /work/io_vs_fio
#   ROUNDS=5 DURATION=10 DIR=/root/bench SIZE=4G bench/io_vs_fio/run.sh
#   JOBS="rr8k_qd1 rr8k_qd32" bench/io_vs_fio/run.sh   # a subset
#   JOBS="sync_w4k_qd1 sync_w16k_qd4 fsync_w8k_qd1 series_rr8k_qd32" DIR=/work/bench-data bench/io_vs_fio/run.sh
#
# Log-write jobs (sync_*): every write durable before the next counts. flashscan `--sync`
# opens the file O_DSYNC; fio gets `--sync=dsync` (the same flag) or, for fsync_*, `--fsync=1`
# (an fsync after each write: another mechanism for the same promise, as pg_test_fsync
# compares them). Per-second series (series_*): flashscan `--status-interval 1` against
# fio's `--write_iops_log` averaged per second (`--log_avg_msec=1000`); summarize.py
# compares the medians and the spread of the two series.
#
# Environment: DIR (not tmpfs: O_DIRECT), SIZE, DURATION (s), RAMP (s, both tools), ROUNDS,
# JOBS, FLASHSCAN (a prebuilt binary; otherwise `cargo build --release -p flashscan-cli`),
# FIO_OPTS (extra fio options, e.g. "--fixedbufs --registerfiles"), OUT (raw results dir).
set -euo pipefail

repo="$(cd "$(dirname "$0")/../.." && pwd)"
DIR="${DIR:-/work/io_vs_fio}"
SIZE="${SIZE:-2G}"
DURATION="${DURATION:-5}"
RAMP="${RAMP:-1}"
ROUNDS="${ROUNDS:-3}"
FIO_OPTS="${FIO_OPTS:-}"
OUT="${OUT:-$DIR/results-$(date +%Y%m%d-%H%M%S)}"
ALL_JOBS="rr8k_qd1 rr8k_qd32 rr8k_qd128 rr256k_qd8_t2 sr1m_qd16 rw8k_qd32 mix70_8k_qd32 sync_w4k_qd1 sync_w16k_qd4 fsync_w8k_qd1 series_rr8k_qd32"
JOBS="${JOBS:-$ALL_JOBS}"

if ! command -v fio >/dev/null; then
    echo "fio is missing: installing it (apt-get)" >&2
    apt-get update -qq && apt-get install -y -qq fio >/dev/null
fi
if [[ -z "${FLASHSCAN:-}" ]]; then
    (cd "$repo" && cargo build --release -q -p flashscan-cli)
    FLASHSCAN="${CARGO_TARGET_DIR:-$repo/target}/release/flashscan"
fi
mkdir -p "$DIR" "$OUT"
file="$DIR/flashscan-io.dat"

# flashscan creates (or reuses) the file: incompressible data, marked as its own, so both
# tools may write to it. fio gets the same path and size.
"$FLASHSCAN" io "$DIR" --size "$SIZE" -d 100ms --warmup 0 >/dev/null
size_bytes=$(stat -c %s "$file")

# name -> "fio options | flashscan options"
job_args() {
    case "$1" in
        rr8k_qd1)      echo "--rw=randread --bs=8k --iodepth=1 --numjobs=1|-f random --rw read -b 8K -o 1 -t 1" ;;
        rr8k_qd32)     echo "--rw=randread --bs=8k --iodepth=32 --numjobs=1|-f random --rw read -b 8K -o 32 -t 1" ;;
        rr8k_qd128)    echo "--rw=randread --bs=8k --iodepth=128 --numjobs=1|-f random --rw read -b 8K -o 128 -t 1" ;;
        rr256k_qd8_t2) echo "--rw=randread --bs=256k --iodepth=8 --numjobs=2|-f random --rw read -b 256K -o 8 -t 2" ;;
        sr1m_qd16)     echo "--rw=read --bs=1m --iodepth=16 --numjobs=1|-f seq --rw read -b 1M -o 16 -t 1" ;;
        rw8k_qd32)     echo "--rw=randwrite --bs=8k --iodepth=32 --numjobs=1|-f random --rw write -b 8K -o 32 -t 1" ;;
        mix70_8k_qd32) echo "--rw=randrw --rwmixread=70 --bs=8k --iodepth=32 --numjobs=1|-f random --rw mix --write-pct 30 -b 8K -o 32 -t 1" ;;
        sync_w4k_qd1)  echo "--rw=write --bs=4k --iodepth=1 --numjobs=1 --sync=dsync|-f seq --rw write -b 4K -o 1 -t 1 --sync" ;;
        sync_w16k_qd4) echo "--rw=write --bs=16k --iodepth=4 --numjobs=1 --sync=dsync|-f seq --rw write -b 16K -o 4 -t 1 --sync" ;;
        fsync_w8k_qd1) echo "--rw=write --bs=8k --iodepth=1 --numjobs=1 --fsync=1|-f seq --rw write -b 8K -o 1 -t 1 --sync" ;;
        series_rr8k_qd32) echo "--rw=randread --bs=8k --iodepth=32 --numjobs=1 --write_iops_log=@LOG@ --log_avg_msec=1000|-f random --rw read -b 8K -o 32 -t 1 --status-interval 1" ;;
        *) echo "unknown job $1 (known: $ALL_JOBS)" >&2; exit 2 ;;
    esac
}

run_fio() { # job round
    local args="${2%%|*}"
    args="${args//@LOG@/$OUT/$1.fio.$3}"
    # shellcheck disable=SC2086
    fio --name="$1" --filename="$file" --size="$size_bytes" --ioengine=io_uring --direct=1 \
        --time_based --runtime="$DURATION" --ramp_time="$RAMP" --randrepeat=0 --norandommap \
        $args $FIO_OPTS --output-format=json >"$OUT/$1.fio.$3.json"
}

run_flashscan() { # job args round
    local args="${2##*|}"
    # shellcheck disable=SC2086
    "$FLASHSCAN" io "$file" --engine uring $args -d "$DURATION" --warmup "$RAMP" --json >"$OUT/$1.flashscan.$3.json"
}

echo "fio $(fio --version) vs $FLASHSCAN; file $file ($size_bytes bytes); $ROUNDS rounds of ${DURATION}s (+${RAMP}s ramp); raw results in $OUT" >&2
for round in $(seq 1 "$ROUNDS"); do
    for job in $JOBS; do
        args="$(job_args "$job")"
        echo "round $round/$ROUNDS: $job" >&2
        run_fio "$job" "$args" "$round"
        run_flashscan "$job" "$args" "$round"
    done
done

python3 "$repo/bench/io_vs_fio/summarize.py" "$OUT" $JOBS
