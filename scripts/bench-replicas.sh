#!/usr/bin/env bash
# The replicas' write benchmark (make bench runs it after bench-cluster.sh): set_b64 with -c 50
# -P 16 against the owner of the test's world, on three clusters side by side, each of three
# daemons with data directories of their own and an etcd of its own:
#   none   --replicas 0 (no follower: the cost of the cluster alone),
#   sync   --replicas 1 --durability sync (each ok waits for the follower's ack),
#   async  --replicas 1 --durability async (the follower catches up).
# The runs take turns (none, sync, async, none, ...) so that the machine's noise falls on all
# three alike; medians of RUNS. Targets: sync at least 0.7x of none, async at least 0.9x.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
RUNS=${RUNS:-3}
N=${N:-300000}
TTL=${TTL:-5}
FSYNC=${FSYNC:-everysec}
command -v etcd >/dev/null || { echo "== replicas benchmark skipped: etcd is not installed"; exit 0; }

work=$(mktemp -d)
[[ -n "${KEEP:-}" ]] && echo "bench-replicas: work in $work" >&2
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  [[ -n "${KEEP:-}" ]] || rm -rf "$work"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
median() { sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }

declare -A port http etcd_url dpid ticks
start_etcd() { # $1 cluster
  local c=$1 eport epeer
  eport=$(free_port)
  epeer=$(free_port)
  etcd --name "$c" --data-dir "$work/$c/etcd" --listen-client-urls "http://127.0.0.1:$eport" \
    --advertise-client-urls "http://127.0.0.1:$eport" --listen-peer-urls "http://127.0.0.1:$epeer" \
    --initial-advertise-peer-urls "http://127.0.0.1:$epeer" \
    --initial-cluster "$c=http://127.0.0.1:$epeer" \
    --heartbeat-interval 10 --election-timeout 100 >"$work/$c/etcd.log" 2>&1 &
  pids+=($!)
  etcd_url[$c]="http://127.0.0.1:$eport"
  for _ in $(seq 200); do curl -sf "${etcd_url[$c]}/health" >/dev/null 2>&1 && return; sleep 0.05; done
  echo "bench-replicas: etcd of $c did not start" >&2
  exit 1
}
start_daemon() { # $1 cluster, $2 node, then flags
  local c=$1 n=$2 log
  log="$work/$c/$n.log"
  mkdir -p "$work/$c/data-$n"
  "$BUILD/scened" --listen 127.0.0.1:0 --http 127.0.0.1:0 --log-level "${LOG_LEVEL:-warn}" \
    --cluster "${etcd_url[$c]}" --data "$work/$c/data-$n" --node "$n" --lease-ttl "$TTL" \
    --save-interval 0 --fsync "$FSYNC" "${@:3}" 2>"$log" &
  pids+=($!)
  dpid[$c.$n]=$!
  for _ in $(seq 200); do grep -q 'listening on' "$log" && break; sleep 0.05; done
  port[$c.$n]=$(grep -o 'listening on 127.0.0.1:[0-9]*' "$log" | head -1 | cut -d: -f2)
  http[$c.$n]=$(grep -o 'http on 127.0.0.1:[0-9]*' "$log" | head -1 | cut -d: -f2)
}
wait_nodes() { # $1 cluster: each daemon knows the three
  for _ in $(seq 400); do
    local all=1
    for n in a b c; do
      [[ $("$BUILD/scenectl" --port "${port[$1.$n]}" cluster.nodes 2>/dev/null |
        grep -o '"node"' | wc -l) -eq 3 ]] || all=0
    done
    ((all)) && return 0
    sleep 0.05
  done
  echo "bench-replicas: the daemons of $1 did not register" >&2
  exit 1
}

# The CPU a daemon used so far, in clock ticks (user + system).
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

declare -A flags=([none]="--replicas 0" [sync]="--replicas 1 --durability sync"
  [async]="--replicas 1 --durability async")
kinds=(none sync async)
for c in "${kinds[@]}"; do
  mkdir -p "$work/$c"
  start_etcd "$c"
  # shellcheck disable=SC2086
  for n in a b c; do start_daemon "$c" "$n" ${flags[$c]}; done
done
for c in "${kinds[@]}"; do wait_nodes "$c"; done

echo "== replicas: set_b64 -c 50 -P 16 on the owner, none against sync against async (--fsync $FSYNC, medians of $RUNS)"
for _ in $(seq "$RUNS"); do
  for c in "${kinds[@]}"; do
    wait_in=()
    [[ "$c" != none ]] && wait_in=(--insync)
    for n in a b c; do ticks[$c.$n]=$((${ticks[$c.$n]:-0} - $(cpu_ticks "${dpid[$c.$n]}"))); done
    "$BUILD/scene-bench" --json -c 50 -P 16 -n "$N" -t set_b64 -p "${port[$c.a]}" --place a "${wait_in[@]}" \
      2>/dev/null | grep -o '"ops/s":[0-9.]*' | cut -d: -f2 >>"$work/$c.rates"
    for n in a b c; do ticks[$c.$n]=$((${ticks[$c.$n]} + $(cpu_ticks "${dpid[$c.$n]}"))); done
  done
done
for c in "${kinds[@]}"; do
  [[ -s "$work/$c.rates" ]] || { echo "bench-replicas: no figure for $c" >&2; exit 1; }
done
none=$(median <"$work/none.rates")
sync=$(median <"$work/sync.rates")
async=$(median <"$work/async.rates")
awk -v n="$none" -v s="$sync" -v a="$async" 'BEGIN {
  printf "no replicas           %10.0f ops/s\n", n
  printf "--replicas 1 sync     %10.0f ops/s  (x%.2f; target >= 0.7)\n", s, s / n
  printf "--replicas 1 async    %10.0f ops/s  (x%.2f; target >= 0.9)\n", a, a / n }'
# The CPU each cluster's daemons used per 300k writes (clock ticks, user + system, averaged over
# the runs): a (the owner) and the most busy of b and c (the follower; the other one idles).
for c in "${kinds[@]}"; do
  f=$((ticks[$c.b] > ticks[$c.c] ? ticks[$c.b] : ticks[$c.c]))
  awk -v c="$c" -v a="${ticks[$c.a]}" -v f="$f" -v n="$((N * RUNS))" 'BEGIN {
    printf "%-6s CPU per 300k writes: owner %5.1f ticks, follower %5.1f\n", c, a * 300000 / n,
      f * 300000 / n }'
done
# How many sync writes went without waiting (no follower in sync yet, e.g. while the new
# world's group was getting its follower): the sync figure is only meaningful when few did.
metric() { curl -sf "http://127.0.0.1:${http[$1]}/metrics" | awk -v m="$2" '$1 == m {print $2}'; }
printf 'sync: %s of the writes answered without a follower in sync (scened_replica_alone_total)\n' \
  "$(metric sync.a scened_replica_alone_total)"
