#!/bin/bash
# Per-transaction figures of flashscan serve under pgbench -M prepared, one row per transaction
# (inserts.py's script): server CPU per transaction split user/kernel, voluntary and involuntary
# context switches per transaction (summed over /proc/PID/task/*/status), pgbench's own CPU per
# transaction, and the committer's statements / commits / log flushes (issue 12, ins9).
# usage: [PORT=55541] [DATADIR=/dev/shm] [SERVE_ARGS=..] bench/concurrency/per_txn_inserts.sh BIN CLIENTS SECONDS OUTPREFIX [MODE]
#   MODE: plain | strace (strace -c -f of the server: system calls per transaction) |
#         perfstat | trace (perf trace -s: count and latency of the flush's and wake-ups' system calls) | perf ([FREQ=2000] [CG="--call-graph dwarf,16384"] perf record of the server)
#   DATADIR=/dev/shm puts the database on tmpfs: every flush instant, all other work the same
#   (the ceiling without the durable wait).
BIN=$1; N=$2; T=$3; OUT=$4; MODE=${5:-plain}; PORT=${PORT:-55541}
TMP=$(mktemp -d ${DATADIR:-/work/bench-data}/flashscan-per-txn.XXXXXX)
D=$TMP/db
$BIN init $D >/dev/null
$BIN serve $D --listen 127.0.0.1:$PORT --max-connections 200 --queue-timeout 3600 $SERVE_ARGS 2>$OUT.serve.log &
PID=$!
for i in $(seq 100); do psql -X -q -h 127.0.0.1 -p $PORT -U bench -d x -c "select 1" >/dev/null 2>&1 && break; sleep 0.1; done
psql -X -q -h 127.0.0.1 -p $PORT -U bench -d x -c "CREATE TABLE ins (id BIGINT NOT NULL, client INT NOT NULL, note TEXT)"
printf '\\set id random(1, 1000000000)\nINSERT INTO ins VALUES (:id, :client_id, '"'"'one row per transaction'"'"');\n' > $OUT.sql
J=$(( N < 4 ? N : 4 ))
pgbench -n -h 127.0.0.1 -p $PORT -U bench -M prepared -c $N -j $J -T 2 -f $OUT.sql x >/dev/null 2>&1 || true
cs() { cat /proc/$PID/task/*/status | awk '/^voluntary_ctxt/{v+=$2} /^nonvoluntary_ctxt/{n+=$2} END{print v, n}'; }
read V0 N0 < <(cs); read U0 S0 < <(awk '{print $14, $15}' /proc/$PID/stat)
case $MODE in
  strace) strace -c -f -p $PID -o $OUT.strace 2>/dev/null & SP=$! ;;
  perfstat) perf stat -e task-clock,context-switches,cpu-migrations,page-faults -p $PID -o $OUT.perfstat -- sleep $T & SP=$! ;;
  trace) perf trace -s -e fdatasync,pwrite64,futex,epoll_wait,sendto,recvfrom,write,read -p $PID -o $OUT.trace -- sleep $T >/dev/null 2>&1 & SP=$! ;;
  perf) perf record -e cpu-clock -F ${FREQ:-2000} ${CG:--g} -p $PID -o $OUT.perf.data -- sleep $T >/dev/null 2>&1 & SP=$! ;;
esac
/usr/bin/time -f "pgbench cpu %U user %S sys" pgbench -n -h 127.0.0.1 -p $PORT -U bench -M prepared -c $N -j $J -T $T -f $OUT.sql x > $OUT.pgbench 2>&1
read V1 N1 < <(cs); read U1 S1 < <(awk '{print $14, $15}' /proc/$PID/stat)
[ "$MODE" = strace ] && { kill -INT $SP; wait $SP; }
[ "$MODE" = perfstat -o "$MODE" = perf -o "$MODE" = trace ] && wait $SP
TX=$(awk '/actually processed/{print $NF}' $OUT.pgbench)
PG=$(awk '/pgbench cpu/{print $3+$5}' $OUT.pgbench)
python3 - <<PY
tx=$TX; T=$T
u=($U1-$U0)*1e4; s=($S1-$S0)*1e4  # ticks(10ms) -> us
print(f"clients $N: {tx/T:.0f} tps; server CPU/txn {(u+s)/tx:.1f} us (user {u/tx:.1f}, sys {s/tx:.1f}); vol cs/txn {($V1-$V0)/tx:.2f}, invol cs/txn {($N1-$N0)/tx:.2f}; pgbench CPU/txn {$PG*1e6/tx:.1f} us")
PY
psql -X -q -h 127.0.0.1 -p $PORT -U bench -d x -At -c "select statements_committed_total, commits_total, log_flushes_total from flashscan_stats_history order by sample_time desc limit 1" 2>/dev/null
# Commit wait per statement (append to acknowledged, the server's own clock) over the busy seconds,
# beside pgbench's round trip: what the flush costs each statement vs everything else.
psql -X -q -h 127.0.0.1 -p $PORT -U bench -d x -At -F ' ' -c "select 'commit wait us/stmt', round(1000*sum(wait_commit_ms)/sum(statements_committed), 1), 'stmts/flush', round(sum(statements_committed)::double/sum(log_flushes), 2), 'flush us', round(sum(log_flush_latency_us_avg*log_flushes)/sum(log_flushes), 1) from flashscan_stats_history where statements_committed > 100" 2>/dev/null
awk '/latency average/{print "pgbench round trip ms", $4}' $OUT.pgbench
kill -TERM $PID; wait $PID
rm -rf "$TMP"
