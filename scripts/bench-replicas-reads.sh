#!/usr/bin/env bash
# Reads from followers (make bench runs it after bench-cluster.sh): a local etcd and three
# daemons, each with its own data directory and --replicas 2, so that both other daemons follow
# every group. scene-bench streams a world of 10,000 transforms moving and turning every tick
# (a root and 9,999 descendants, set on the owner once per tick) to 300 subscribers (b64
# frames):
#   - one daemon alone: every subscriber on the world's owner;
#   - the owner and its two followers sharing them (round-robin, hello with follower_reads).
# Printed: matrices per second received by all subscribers together, for each (medians of RUNS
# runs of SECONDS each), and their ratio; and each daemon's CPU over those runs (from /proc),
# which shows the fan-out's work leaving the owner. scene-bench reads every subscriber in one
# thread: where it is the limit (a small machine), the matrices/s of both are its own. Bounded:
# each run is limited to TIMEOUT seconds.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
RUNS=${RUNS:-3}
SECONDS_EACH=${SECONDS_EACH:-5}
SUBSCRIBERS=${SUBSCRIBERS:-300}
DESCENDANTS=${DESCENDANTS:-9999}
TIMEOUT=${TIMEOUT:-120}
command -v etcd >/dev/null || { echo "== follower reads benchmark skipped: etcd is not installed"; exit 0; }

. scripts/bench-cluster-lib.sh
bench_init bench-replicas-reads
bench_etcd r "$work/etcd" "$work/etcd.log"

declare -A port pid
for n in n0 n1 n2; do
  mkdir -p "$work/$n"
  bench_daemon "$work/$n.log" --listen 127.0.0.1:0 --http off --log-level "${LOG_LEVEL:-warn}" \
    --cluster "$etcd_url" --data "$work/$n" --node "$n" --lease-ttl 2 --replicas 2 --save-interval 0
  pid[$n]=$daemon_pid
  port[$n]=$daemon_port
done
bench_wait_nodes 3 "${port[n0]}" "${port[n1]}" "${port[n2]}" ||
  { echo "bench-replicas-reads: the daemons did not register" >&2; exit 1; }

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
# scene-bench stream with the world made and moved on n0 (its owner), more args: the median
# matrices/s and frames/s per subscriber of RUNS runs, and each daemon's CPU (cores busy, from
# /proc, over all the runs), "M F C0 C1 C2".
stream() {
  local t0 c0 c1 c2
  t0=$(date +%s%N)
  c0=$(cpu_ticks "${pid[n0]}") c1=$(cpu_ticks "${pid[n1]}") c2=$(cpu_ticks "${pid[n2]}")
  for _ in $(seq "$RUNS"); do
    timeout "$TIMEOUT" "$BUILD/scene-bench" -p "${port[n0]}" --json -t stream --b64 -S "$SUBSCRIBERS" \
      -K "$DESCENDANTS" --seconds "$SECONDS_EACH" "$@" |
      python3 -c 'import json,sys; r=json.loads(sys.stdin.read()); print(r["matrices/s"], r["frames/s"])'
  done >"$work/runs"
  awk -v t0="$t0" -v t1="$(date +%s%N)" -v hz="$(getconf CLK_TCK)" \
    -v a="$(($(cpu_ticks "${pid[n0]}") - c0))" -v b="$(($(cpu_ticks "${pid[n1]}") - c1))" \
    -v c="$(($(cpu_ticks "${pid[n2]}") - c2))" -v m="$(cut -d' ' -f1 "$work/runs" | median)" \
    -v f="$(cut -d' ' -f2 "$work/runs" | median)" 'BEGIN {
    s = (t1 - t0) / 1e9; printf "%s %s %.2f %.2f %.2f\n", m, f, a / hz / s, b / hz / s, c / hz / s }'
}

echo "== follower reads: $((DESCENDANTS + 1)) transforms moving every tick streamed to $SUBSCRIBERS subscribers"
echo "   (b64 frames; 3 daemons with --replicas 2; medians of $RUNS runs of $SECONDS_EACH s; $(nproc) cores shared"
echo "   by the daemons and the reader)"
read -r am af a0 a1 a2 < <(stream)
read -r sm sf s0 s1 s2 < <(stream --follower-reads \
  --daemons "127.0.0.1:${port[n0]},127.0.0.1:${port[n1]},127.0.0.1:${port[n2]}")
awk -v am="$am" -v af="$af" -v sm="$sm" -v sf="$sf" -v s="$SUBSCRIBERS" 'BEGIN {
  printf "one daemon alone (the owner, %d subscribers)      %12.0f matrices/s  %5.1f frames/s per subscriber\n", s, am, af
  printf "owner + two followers (%d each, follower_reads)   %12.0f matrices/s  %5.1f frames/s per subscriber  (x%.2f)\n", s / 3, sm, sf, sm / am }'
echo "   CPU, cores busy (owner, follower, follower): alone $a0 $a1 $a2; shared $s0 $s1 $s2"
