#!/usr/bin/env bash
# Two builds of the daemon side by side on the same load, alternately, so that a change is
# measured against what came before it in one run of a noisy machine: set_local (t/r/s) and
# set_local (matrix), 50 connections x 16 pipelined, N requests, with the daemon's user CPU
# per request. Prints each round and the medians.
# Usage: scripts/bench-compare.sh OLD_SCENED NEW_SCENED [ROUNDS]  (SCENE_BENCH, N from the
# environment; defaults build/scene-bench and 300000)
set -euo pipefail
old=${1:?usage: bench-compare.sh OLD_SCENED NEW_SCENED [ROUNDS]}
new=${2:?usage: bench-compare.sh OLD_SCENED NEW_SCENED [ROUNDS]}
rounds=${3:-4}
bench=${SCENE_BENCH:-build/scene-bench}
N=${N:-300000}
out=$(mktemp -d)
pid=""
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$out"' EXIT

# one run of test $2 on daemon $1: "ops/s user_us"
run() {
  local log="$out/log"
  "$1" --listen 127.0.0.1:0 --http off --log-level warn 2>"$log" &
  pid=$!
  for _ in $(seq 200); do grep -q 'listening on' "$log" && break; sleep 0.05; done
  local port
  port=$(grep -o 'listening on 127.0.0.1:[0-9]*' "$log" | head -1 | cut -d: -f2)
  "$bench" -p "$port" -c 50 -P 16 -n 50000 -t "$2" >/dev/null # warm-up, and the world
  local u0 u1 rate
  u0=$(awk '{print $14}' "/proc/$pid/stat")
  rate=$("$bench" -p "$port" --json -c 50 -P 16 -n "$N" -t "$2" | grep -o '"ops/s":[0-9.]*' | cut -d: -f2)
  u1=$(awk '{print $14}' "/proc/$pid/stat")
  kill "$pid"
  wait "$pid" 2>/dev/null || true
  pid=""
  awk -v r="$rate" -v d="$((u1 - u0))" -v hz="$(getconf CLK_TCK)" -v n="$N" \
    'BEGIN { printf "%.0f %.3f\n", r, d / hz * 1e6 / n }'
}

for t in set_local set_matrix; do
  : >"$out/old.$t"
  : >"$out/new.$t"
done
for r in $(seq "$rounds"); do
  for t in set_local set_matrix; do
    # alternate which goes first
    if ((r % 2)); then order="old new"; else order="new old"; fi
    for which in $order; do
      bin=$old
      [ "$which" = new ] && bin=$new
      res=$(run "$bin" "$t")
      echo "$res" >>"$out/$which.$t"
      printf 'round %d %-10s %-3s %9.0f ops/s  user %.3f us/request\n' "$r" "$t" "$which" $res
    done
  done
done
median() { sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
echo
for t in set_local set_matrix; do
  for which in old new; do
    rate=$(cut -d' ' -f1 "$out/$which.$t" | median)
    user=$(cut -d' ' -f2 "$out/$which.$t" | median)
    printf 'median %-10s %-3s %9.0f ops/s  user %.3f us/request\n' "$t" "$which" "$rate" "$user"
  done
done
