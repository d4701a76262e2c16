#!/usr/bin/env bash
# The cluster's benchmarks (make bench runs them after the others): a local etcd and two or
# three daemons sharing a temporary data directory.
#   - takeover: kill -9 of the owner of a group of 1,000,000 transforms until its world answers
#     on another daemon (target: TTL + 1 s);
#   - world.move of that group (target: at most 1 s);
#   - set_local through a client that follows MOVED once, against direct connections (equal
#     within noise);
#   - the aggregate set_local rate of two daemons, each owning half the worlds, against one
#     daemon, from the same load generator.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
RUNS=${RUNS:-3}
N=${N:-300000}
BIG=${BIG:-1000000}
TTL=${TTL:-2}
command -v etcd >/dev/null || { echo "== cluster benchmarks skipped: etcd is not installed"; exit 0; }

. scripts/bench-cluster-lib.sh
bench_init bench-cluster
bench_etcd b "$work/etcd" "$work/etcd.log"

declare -A port pid
start() { # $1 node name
  bench_daemon "$work/$1.$(date +%s%N).log" --listen 127.0.0.1:0 --http off --log-level ${LOG_LEVEL:-warn} \
    --cluster "$etcd_url" --data "$work/data" --node "$1" --lease-ttl "$TTL" --save-interval 0
  pid[$1]=$daemon_pid
  port[$1]=$daemon_port
}
ctl() { "$BUILD/scenectl" --port "${port[$1]}" "${@:2}"; }
wait_nodes() { # every daemon knows $1 live nodes
  bench_wait_nodes "$1" "${port[@]}" || { echo "bench-cluster: the daemons did not register" >&2; exit 1; }
}

start a
start b
wait_nodes 2

echo "== cluster: a group of $BIG transforms (lease TTL $TTL s)"
"$BUILD/scene-bench" -p "${port[a]}" -t fill --world big.main -K "$BIG"
# Answers once a daemon other than $1 serves big.main: prints the milliseconds since $2.
served_elsewhere() {
  while :; do
    for n in "${!port[@]}"; do
      [[ "$n" == "$1" ]] && continue
      local out
      out=$("$BUILD/scenectl" --port "${port[$n]}" transform.find world=big.main path=x 2>&1 || true)
      if [[ "$out" == *"no transform at path"* ]]; then
        echo $(($(now_ms) - $2))
        return
      fi
    done
    sleep 0.01
  done
}
t0=$(now_ms)
moved=$(ctl a world.move world=big.main to=b >/dev/null && echo $(($(now_ms) - t0)))
printf 'world.move of %d transforms: %d ms (target <= 1000 ms)\n' "$BIG" "$moved"
kill -9 "${pid[b]}"
t0=$(now_ms)
took=$(served_elsewhere b "$t0")
printf 'kill -9 of the owner: served by another daemon after %d ms (target <= TTL + 1 s = %d ms)\n' \
  "$took" $((TTL * 1000 + 1000))
start b
wait_nodes 2

echo
echo "== cluster: set_local through a client that follows MOVED once, against direct (medians of $RUNS)"
rate() { # scene-bench args: median ops/s
  for _ in $(seq "$RUNS"); do
    "$BUILD/scene-bench" --json -c 50 -P 16 -n "$N" -t set_local "$@" 2>/dev/null |
      grep -o '"ops/s":[0-9.]*' | cut -d: -f2
  done | median
}
direct=$(rate -p "${port[b]}" --place b)
via=$(rate -p "${port[a]}" --place b)
awk -v d="$direct" -v v="$via" 'BEGIN {
  printf "direct to the owner   %10.0f ops/s\nfollowing MOVED once  %10.0f ops/s  (ratio %.3f; target: equal within noise)\n", d, v, v / d }'

echo
echo "== cluster: two daemons each owning half the worlds, against one daemon (medians of $RUNS)"
one=$(rate -p "${port[a]}" --daemons "127.0.0.1:${port[a]}")
two=$(rate --daemons "127.0.0.1:${port[a]},127.0.0.1:${port[b]}")
awk -v o="$one" -v t="$two" -v c="$(nproc)" 'BEGIN {
  printf "one daemon            %10.0f ops/s\ntwo daemons           %10.0f ops/s  (x%.2f on %d cores, the load generator on the same cores)\n", o, t, t / o, c }'
