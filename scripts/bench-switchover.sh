#!/usr/bin/env bash
# The switchover benchmark (make bench runs it after the cluster's): a local etcd and three
# daemons, each with its own data directory and --replicas 1. A group of BIG transforms
# (1,000,000 by default) is made on one daemon; once its follower is in sync, world.move hands
# it to the follower, timed from sending world.move to its ok (scenectl's start included). The
# old owner follows from the copy it kept, so once it is in sync again the group moves back:
# RUNS switchovers in all, their median printed (target: at most 200 ms).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
RUNS=${RUNS:-3}
BIG=${BIG:-1000000}
TTL=${TTL:-10} # the lease plays no part in a switchover: long, for a loaded machine
command -v etcd >/dev/null || { echo "== switchover benchmark skipped: etcd is not installed"; exit 0; }

. scripts/bench-cluster-lib.sh
bench_init bench-switchover
bench_etcd s "$work/etcd" "$work/etcd.log"

declare -A port
start() { # $1 node name
  bench_daemon "$work/$1.log" --listen 127.0.0.1:0 --http off --log-level "${LOG_LEVEL:-warn}" \
    --cluster "$etcd_url" --data "$work/$1" --node "$1" --lease-ttl "$TTL" \
    --save-interval 0 --replicas 1 --replica-timeout "${REPLICA_TIMEOUT:-5000}"
  port[$1]=$daemon_port
}
ctl() { "$BUILD/scenectl" --port "${port[$1]}" "${@:2}"; }
for n in a b c; do start "$n"; done
bench_wait_nodes 3 "${port[a]}" || true

# "OWNER FOLLOWER" once OWNER ($1) records a follower of big.main in sync, as OWNER lists it.
insync() {
  ctl "$1" world.list cluster=true 2>/dev/null | python3 -c '
import json, sys
for w in json.load(sys.stdin).get("worlds", []):
    if w["name"] == "big.main" and w.get("node") == sys.argv[1] and w.get("insync"):
        print(w["node"], w["insync"][0])' "$1"
}
wait_insync() { # $1: the owner
  for _ in $(seq 6000); do
    local s
    s=$(insync "$1")
    if [[ -n "$s" ]]; then
      echo "$s"
      return
    fi
    sleep 0.05
  done
  echo "bench-switchover: no follower of big.main came in sync on $1" >&2
  exit 1
}

echo "== switchover: world.move of a group of $BIG transforms to its in-sync follower (--replicas 1)"
t0=$(now_ms)
"$BUILD/scene-bench" -p "${port[a]}" -t fill --world big.main -K "$BIG"
s=$(wait_insync a)
read -r owner follower <<<"$s"
printf 'the follower %s in sync %d ms after the fill began\n' "$follower" $(($(now_ms) - t0))
times=()
for i in $(seq "$RUNS"); do
  t0=$(now_ms)
  ctl "$owner" world.move world=big.main to="$follower" >/dev/null
  took=$(($(now_ms) - t0))
  times+=("$took")
  printf 'switchover %d: %s -> %s in %d ms\n' "$i" "$owner" "$follower" "$took"
  out=$(ctl "$follower" transform.find world=big.main path=x 2>&1 || true)
  [[ "$out" == *"no transform at path"* ]] ||
    { echo "bench-switchover: the new owner does not serve big.main: $out" >&2; exit 1; }
  if ((i < RUNS)); then
    s=$(wait_insync "$follower")
    read -r owner follower <<<"$s"
  fi
done
printf 'switchover of %d transforms: median %d ms of %d (target <= 200 ms)\n' "$BIG" \
  "$(printf '%s\n' "${times[@]}" | median)" "$RUNS"
