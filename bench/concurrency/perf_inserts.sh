#!/bin/bash
# perf profile of flashscan serve under pgbench -M prepared, N clients, one row per transaction (issue 12, server7).
# usage: [PERF=1] [FREQ=400] [CG="--call-graph dwarf,16384"] bench/concurrency/perf_inserts.sh BIN CLIENTS SECONDS OUTPREFIX
# then: perf script -i OUTPREFIX.perf.data | python3 bench/concurrency/fold_stacks.py REGEX DEPTH
set -e
BIN=$1; N=$2; T=$3; OUT=$4
TMP=$(mktemp -d "${TMPDIR:-/tmp}/flashscan-perf-inserts.XXXXXX")
D=$TMP/db
$BIN init $D >/dev/null
$BIN serve $D --listen 127.0.0.1:55533 --max-connections 200 --queue-timeout 3600 2>$OUT.serve.log &
PID=$!
for i in $(seq 50); do psql -X -q -h 127.0.0.1 -p 55533 -U bench -d x -c "select 1" >/dev/null 2>&1 && break; sleep 0.1; done
psql -X -q -h 127.0.0.1 -p 55533 -U bench -d x -c "CREATE TABLE ins (id BIGINT NOT NULL, client INT NOT NULL, note TEXT)"
printf '\\set id random(1, 1000000000)\nINSERT INTO ins VALUES (:id, :client_id, '"'"'one row per transaction'"'"');\n' > $OUT.sql
pgbench -n -h 127.0.0.1 -p 55533 -U bench -M prepared -c $N -j $(( N < 4 ? N : 4 )) -T 2 -f $OUT.sql x >/dev/null 2>&1 || true
if [ -n "$PERF" ]; then
  perf record -e cpu-clock -F ${FREQ:-2000} ${CG:--g} -p $PID -o $OUT.perf.data -- sleep $T >/dev/null 2>&1 &
  PP=$!
fi
C0=$(awk '{print $14+$15}' /proc/$PID/stat)
/usr/bin/time -f "pgbench cpu %U user %S sys" pgbench -n -h 127.0.0.1 -p 55533 -U bench -M prepared -c $N -j $(( N < 4 ? N : 4 )) -T $T -f $OUT.sql x 2>&1 | grep -E "tps|latency average|processed|pgbench cpu"
C1=$(awk '{print $14+$15}' /proc/$PID/stat)
[ -n "$PERF" ] && wait $PP || true
echo "server CPU ticks: $((C1-C0))"
ls $D/wal | wc -l
kill -TERM $PID; wait $PID || true
rm -rf "$TMP"
