#!/usr/bin/env bash
# Replicas' catch-up benchmark (make bench runs it after the cluster's): a local etcd and two
# daemons, each with a data directory of its own and --replicas 1.
#   - a follower that missed the whole group: daemon a fills a group of CATCHUP_N transforms
#     (default 1,000,000) alone, then b starts with an empty directory and is chosen as its
#     follower; the owner's backlog does not reach back to the group's first record, so b gets
#     a whole copy (the snapshot stream) and installs it. Printed: the copy written by the
#     owner (its loop pauses that long), the copy received and installed, b's start until it
#     is in the in-sync set, and transforms per second of the copy.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
CATCHUP_N=${CATCHUP_N:-1000000}
TTL=${TTL:-2}
LIMIT_S=${LIMIT_S:-300} # the whole catch-up must end within this
command -v etcd >/dev/null || { echo "== replicas benchmark skipped: etcd is not installed"; exit 0; }

. scripts/bench-cluster-lib.sh
bench_init bench-catchup
bench_etcd b "$work/etcd" "$work/etcd.log"

declare -A port log
start() { # $1 node name
  log[$1]="$work/$1.log"
  mkdir -p "$work/data-$1"
  bench_daemon "${log[$1]}" --listen 127.0.0.1:0 --http off --log-level info --cluster "$etcd_url" \
    --data "$work/data-$1" --node "$1" --lease-ttl "$TTL" --save-interval 0 --fsync everysec \
    --replicas 1 --durability async
  port[$1]=$daemon_port
}
ctl() { "$BUILD/scenectl" --port "${port[$1]}" "${@:2}"; }
field() { # $1 log, $2 message, $3 field: the field's value in the last line with the message
  grep "$2" "$1" | tail -1 | grep -o " $3=[0-9.]*" | cut -d= -f2
}

start a
for _ in $(seq 200); do ctl a cluster.nodes >/dev/null 2>&1 && break; sleep 0.05; done
echo "== replicas: catch-up of a follower that missed a whole group of $CATCHUP_N transforms"
"$BUILD/scene-bench" -p "${port[a]}" -t fill --world big.main -K "$CATCHUP_N"
t0=$(now_ms)
start b
insync=""
for _ in $(seq $((LIMIT_S * 20))); do
  if ctl a world.list cluster=true 2>/dev/null | grep -q '"insync":\["b"\]'; then
    insync=$(($(now_ms) - t0))
    break
  fi
  sleep 0.05
done
[[ -n "$insync" ]] || { echo "bench-replicas: b did not catch up within $LIMIT_S s" >&2; exit 1; }
written=$(field "${log[a]}" "a whole copy for a follower" ms)
bytes=$(field "${log[a]}" "a whole copy for a follower" snapshot_bytes)
received=$(field "${log[b]}" "a whole copy received" ms)
installed=$(field "${log[b]}" "a whole copy of the group installed" ms)
[[ -n "$written" && -n "$received" ]] || { echo "bench-replicas: no whole copy was sent" >&2; exit 1; }
awk -v n="$CATCHUP_N" -v w="$written" -v r="$received" -v i="$installed" -v s="$insync" -v b="$bytes" 'BEGIN {
  printf "copy written by the owner   %8.0f ms (%.1f MB; the owner serves nothing meanwhile)\n", w, b / 1e6
  printf "copy received and installed %8.0f ms (of which the install %.0f ms)\n", r, i
  printf "follower start to in sync   %8.0f ms\n", s
  printf "catch-up rate               %8.0f transforms/s (copy written, sent and installed)\n", n / ((w + r) / 1000)
}'
