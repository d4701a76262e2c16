#!/usr/bin/env bash
# Takeover of a group of 1,000,000 transforms (make bench runs it with the replicas'
# benchmarks), from kill -9 of its owner until another daemon answers a read of its world, in
# the same run:
#   - with replicas: three daemons, each on a data directory of its own, --replicas 1 (sync);
#     the in-sync follower serves the group from its copy (target: TTL + 0.5 s, no load);
#   - with a shared data directory (--replicas 0): two daemons, the other loads the group from
#     the directory (the cluster's takeover of bench-cluster.sh).
# The takeover's parts are read from the new owner's log: when it claimed the group, and how
# long the promotion from its copy (or the load from disk) took.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
BIG=${BIG:-1000000}
TTL=${TTL:-2}
command -v etcd >/dev/null || { echo "== takeover benchmarks skipped: etcd is not installed"; exit 0; }

. scripts/bench-cluster-lib.sh
bench_init bench-takeover

declare -A port pid logf
start_etcd() { # $1: a name for its directory
  bench_etcd b "$work/etcd-$1" "$work/etcd-$1.log"
}
start() { # $1 node name, $2 data directory, then more flags
  logf[$1]="$work/$1.$(date +%s%N).log"
  mkdir -p "$2"
  bench_daemon "${logf[$1]}" --listen 127.0.0.1:0 --http off --log-level info --cluster "$etcd_url" \
    --data "$2" --node "$1" --lease-ttl "$TTL" --save-interval 0 "${@:3}"
  pid[$1]=$daemon_pid
  port[$1]=$daemon_port
}
ctl() { "$BUILD/scenectl" --port "${port[$1]}" "${@:2}"; }
wait_nodes() { # every daemon knows $1 live nodes
  bench_wait_nodes "$1" "${port[@]}" || { echo "bench-takeover: the daemons did not register" >&2; exit 1; }
}
stop_all() {
  for n in "${!pid[@]}"; do kill -9 "${pid[$n]}" 2>/dev/null || true; done
  kill "$etcd_pid" 2>/dev/null || true
  wait 2>/dev/null || true
  port=() pid=() logf=()
}
# Once a daemon other than $1 serves big.main: its name and the milliseconds since $2 ("- -"
# after 60 s without).
served_elsewhere() {
  while (($(now_ms) - $2 < 60000)); do
    for n in "${!port[@]}"; do
      [[ "$n" == "$1" ]] && continue
      local out
      out=$("$BUILD/scenectl" --port "${port[$n]}" transform.find world=big.main path=x 2>&1 || true)
      if [[ "$out" == *"no transform at path"* ]]; then
        echo "$n $(($(now_ms) - $2))"
        return
      fi
    done
    sleep 0.01
  done
  echo "- -"
}

wait_insync() { # until a's group big has its follower in the in-sync set (60 s at most)
  for _ in $(seq 600); do
    ctl a world.list cluster=true 2>/dev/null | grep -q '"insync":\["' && return 0
    sleep 0.1
  done
  return 1
}

echo "== takeover of a group of $BIG transforms from kill -9 until another daemon answers (lease TTL $TTL s)"

# With replicas: the owner a, its follower in sync, then kill -9 of a.
start_etcd replicas
for n in a b c; do start "$n" "$work/own-$n" --replicas 1 --durability sync; done
wait_nodes 3
# The group first, with its follower in sync, then its transforms (a follower that starts after
# the owner's backlog moved past its first record would need a whole copy of the group).
ctl a world.create world=big.first >/dev/null
wait_insync
"$BUILD/scene-bench" -p "${port[a]}" -t fill --world big.main -K "$BIG" --place a
if ! wait_insync; then # (the follower has applied every record)
  echo "bench-takeover: the follower is not in the in-sync set; no takeover to measure" >&2
  exit 1
fi
kill -9 "${pid[a]}"
t0=$(now_ms)
wait "${pid[a]}" 2>/dev/null || true # (reaped here, so that bash does not report it)
read -r _ took < <(served_elsewhere a "$t0")
[[ "$took" != "-" ]] || { echo "bench-takeover: no daemon served the group within 60 s" >&2; exit 1; }
promoted=$(grep -hF 'group promoted from its copy' "${logf[b]}" "${logf[c]}" | tail -1)
who=$(grep -o 'new=[a-z]*' <<<"$(grep -hF 'group owner changed' "${logf[b]}" | grep -F 'group=big ' | tail -1)" | cut -d= -f2)
printf 'replicas (own directories, --replicas 1): %s serves it after %d ms (target <= TTL + 0.5 s = %d ms); promoting its copy took %s ms (%s)\n' \
  "${who:-?}" "$took" $((TTL * 1000 + 500)) "$(grep -o ' ms=[0-9.]*' <<<"$promoted" | cut -d= -f2)" \
  "$(grep -o 'start=[a-z]*' <<<"$promoted")"
replicas_took=$took
stop_all

# With a shared data directory: the owner a, then kill -9 of a; b loads the group.
start_etcd shared
for n in a b; do start "$n" "$work/shared"; done
wait_nodes 2
"$BUILD/scene-bench" -p "${port[a]}" -t fill --world big.main -K "$BIG" --place a
kill -9 "${pid[a]}"
t0=$(now_ms)
wait "${pid[a]}" 2>/dev/null || true # (reaped here, so that bash does not report it)
read -r who took < <(served_elsewhere a "$t0")
[[ "$took" != "-" ]] || { echo "bench-takeover: no daemon served the group within 60 s" >&2; exit 1; }
load=$(grep -F 'group loaded' "${logf[b]}" | grep -F 'group=big ' | tail -1 | grep -o ' ms=[0-9.]*' | cut -d= -f2 || true)
printf 'shared directory (--replicas 0):          b serves it after %d ms (loading it took %s ms)\n' \
  "$took" "${load:-?}"
awk -v r="$replicas_took" -v s="$took" 'BEGIN { printf "replicas against the shared directory: %.2fx the time\n", r / s }'
stop_all
