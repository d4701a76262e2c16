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

work=$(mktemp -d)
[[ -n "${KEEP:-}" ]] && echo "bench-cluster: work in $work" >&2
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  [[ -n "${KEEP:-}" ]] || rm -rf "$work"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
now_ms() { date +%s%3N; }

eport=$(free_port)
epeer=$(free_port)
etcd --name b --data-dir "$work/etcd" --listen-client-urls "http://127.0.0.1:$eport" \
  --advertise-client-urls "http://127.0.0.1:$eport" --listen-peer-urls "http://127.0.0.1:$epeer" \
  --initial-advertise-peer-urls "http://127.0.0.1:$epeer" --initial-cluster "b=http://127.0.0.1:$epeer" \
  --heartbeat-interval 10 --election-timeout 100 >"$work/etcd.log" 2>&1 &
pids+=($!)
for _ in $(seq 200); do curl -sf "http://127.0.0.1:$eport/health" >/dev/null 2>&1 && break; sleep 0.05; done

declare -A port pid
start() { # $1 node name
  local log="$work/$1.$(date +%s%N).log"
  "$BUILD/scened" --listen 127.0.0.1:0 --http off --log-level ${LOG_LEVEL:-warn} --cluster "http://127.0.0.1:$eport" \
    --data "$work/data" --node "$1" --lease-ttl "$TTL" --save-interval 0 2>"$log" &
  pid[$1]=$!
  pids+=($!)
  for _ in $(seq 200); do grep -q 'listening on' "$log" && break; sleep 0.05; done
  port[$1]=$(grep -o 'listening on 127.0.0.1:[0-9]*' "$log" | head -1 | cut -d: -f2)
}
ctl() { "$BUILD/scenectl" --port "${port[$1]}" "${@:2}"; }
wait_nodes() { # every daemon knows $1 live nodes
  for _ in $(seq 400); do
    local all=1
    for n in "${!port[@]}"; do
      [[ $(ctl "$n" cluster.nodes 2>/dev/null | grep -o '"node"' | wc -l) -eq $1 ]] || all=0
    done
    ((all)) && return 0
    sleep 0.05
  done
  echo "bench-cluster: the daemons did not register" >&2
  exit 1
}
median() { sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }

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
