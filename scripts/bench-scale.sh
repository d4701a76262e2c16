#!/usr/bin/env bash
# The write path at scale (make bench runs it): for N = 1, 2, 4 ... up to half the cores,
#   - N cluster daemons sharing one data directory (one etcd),
#   - N standalone daemons, each with its own --data,
#   - N Redis servers with appendonly yes and appendfsync everysec,
# every server pinned to a core of its own (taskset) with its own load generator pinned to
# another: scene-bench set_b64 then get against each daemon, redis-benchmark SET then GET
# against each Redis, 50 connections x 16 pipelined, all of a setup's generators at once. The
# three setups take turns RUNS times (medians), so that each meets about the same load on a
# shared machine. Printed per N and setup: the aggregate rate, the per-daemon efficiency
# against N = 1 (aggregate / (N x the N = 1 aggregate)) and the p99 of the slowest generator;
# then a cluster daemon against a standalone one with the same flags (targets: rate at least
# 0.9x, p99 at most 1.2x).
#
# Environment: BUILD (build), RUNS (3), SCALE_REQUESTS (per generator and run, 2000000: a few
# seconds, so that the once-a-second fsyncs fall inside every run), FSYNC (everysec),
# MAX_DAEMONS (the largest N; default half the cores), RUN_TIMEOUT (seconds a generator may
# take, 120), SCALE_SETUPS (of "cluster standalone redis", default all three; the cluster needs
# etcd and curl, Redis its server, cli and benchmark). Only 127.0.0.1; the script stops exactly
# the processes it started (by pid), on failure too.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
RUNS=${RUNS:-3}
REQUESTS=${SCALE_REQUESTS:-2000000}
FSYNC=${FSYNC:-everysec}
RUN_TIMEOUT=${RUN_TIMEOUT:-120}
cores=$(nproc)
half=$((cores / 2))
((half >= 1)) || half=1
MAX_DAEMONS=${MAX_DAEMONS:-$half}

SETUPS=${SCALE_SETUPS:-cluster standalone redis}
have_etcd=0
[[ " $SETUPS " == *" cluster "* ]] && command -v etcd >/dev/null && command -v curl >/dev/null &&
  have_etcd=1
have_redis=0
[[ " $SETUPS " == *" redis "* ]] && command -v redis-server >/dev/null &&
  command -v redis-benchmark >/dev/null && command -v redis-cli >/dev/null && have_redis=1

work=$(mktemp -d)
[[ -n "${KEEP:-}" ]] && echo "bench-scale: work in $work" >&2
pids=() # every process started here, servers and load generators alike

# Stops one process started here: TERM, up to 5 s to go, then KILL.
stop_pid() {
  local p=$1
  kill "$p" 2>/dev/null || return 0
  for _ in $(seq 100); do
    kill -0 "$p" 2>/dev/null || break
    sleep 0.05
  done
  kill -9 "$p" 2>/dev/null || true
  wait "$p" 2>/dev/null || true
}
cleanup() {
  local p
  for p in "${pids[@]}"; do stop_pid "$p"; done
  pids=()
  [[ -n "${KEEP:-}" ]] || rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

fail() {
  echo "bench-scale: $*" >&2
  exit 1
}
# a port nothing listens on, below the ephemeral range that clients' sockets take theirs from
# (tried at random, 200 tries at most)
read -r ephemeral_low _ </proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || ephemeral_low=32768
((ephemeral_low > 11000)) || ephemeral_low=32768
free_port() {
  local p
  for _ in $(seq 200); do
    p=$((10000 + RANDOM % (ephemeral_low - 10000)))
    (: <"/dev/tcp/127.0.0.1/$p") 2>/dev/null || { echo "$p"; return 0; }
  done
  fail "no free port found"
}
median() { sort -g | awk '{v[NR]=$1} END {print (NR ? v[int((NR+1)/2)] : 0)}'; }

# Cores: server i on 2i, its load generator on 2i+1 (on one core, both on core 0).
server_core() { echo $(((2 * $1) % cores)); }
load_core() { echo $(((2 * $1 + 1) % cores)); }

counts=()
for ((d = 1; d <= MAX_DAEMONS; d *= 2)); do counts+=("$d"); done
echo "== the write path at scale: set_b64 and get, 50 connections x 16 pipelined, --fsync $FSYNC"
echo "   ($cores cores; N = ${counts[*]}; medians of $RUNS runs of $REQUESTS requests per generator)"
if ((MAX_DAEMONS == 1 && cores < 4)); then
  echo "   N = 1 only: this machine has $cores cores, and every daemon and its load generator"
  echo "   take one of their own (N goes up to half the cores)"
fi
((cores >= 2)) || echo "   one core: the daemon and its load generator share it"

# ---- etcd, shared by the cluster daemons of every N ----------------------------------------
eport=""
if ((have_etcd)); then
  eport=$(free_port)
  epeer=$(free_port)
  etcd --name scale --data-dir "$work/etcd" --listen-client-urls "http://127.0.0.1:$eport" \
    --advertise-client-urls "http://127.0.0.1:$eport" --listen-peer-urls "http://127.0.0.1:$epeer" \
    --initial-advertise-peer-urls "http://127.0.0.1:$epeer" \
    --initial-cluster "scale=http://127.0.0.1:$epeer" >"$work/etcd.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 200); do curl -sf "http://127.0.0.1:$eport/health" >/dev/null 2>&1 && break; sleep 0.05; done
  curl -sf "http://127.0.0.1:$eport/health" >/dev/null 2>&1 || fail "etcd did not start (see $work/etcd.log)"
else
  echo "   (cluster daemons skipped: etcd or curl is not installed)"
fi
((have_redis)) || echo "   (Redis skipped: redis-server, redis-cli or redis-benchmark is not installed)"

declare -A port # "setup.i" -> port
# start_daemon SETUP I ARGS...: a scened pinned to server_core I; its port in port[SETUP.I]
start_daemon() {
  local setup=$1 i=$2 log
  log="$work/$1.$2.$(date +%s%N).log"
  shift 2
  taskset -c "$(server_core "$i")" "$BUILD/scened" --listen 127.0.0.1:0 --http off \
    --log-level warn --fsync "$FSYNC" --save-interval 0 "$@" 2>"$log" &
  pids+=($!)
  for _ in $(seq 200); do grep -qs 'listening on' "$log" && break; sleep 0.05; done
  port[$setup.$i]=$(grep -os 'listening on 127.0.0.1:[0-9]*' "$log" | head -1 | cut -d: -f2 || true)
  [[ -n "${port[$setup.$i]}" ]] || fail "scened ($setup $i) did not start: $(cat "$log")"
}
start_redis() { # I: a Redis pinned to server_core I, appendonly, its port in port[redis.I]
  local i=$1 dir p pid
  dir="$work/data.redis.$1.$(date +%s%N)"
  mkdir -p "$dir"
  for _ in 1 2 3; do # a port taken between the probe and the bind: another one
    p=$(free_port)
    taskset -c "$(server_core "$i")" redis-server --port "$p" --bind 127.0.0.1 --dir "$dir" \
      --save '' --appendonly yes --appendfsync "$FSYNC" >"$dir/log" 2>&1 &
    pid=$!
    pids+=("$pid")
    for _ in $(seq 200); do
      redis-cli -p "$p" ping >/dev/null 2>&1 && break
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.05
    done
    if redis-cli -p "$p" ping >/dev/null 2>&1; then
      port[redis.$i]=$p
      return 0
    fi
  done
  fail "redis-server $i did not start: $(cat "$dir/log")"
}
# every cluster daemon of this round registered: cluster.nodes on the first lists n nodes
wait_cluster() {
  local n=$1
  for _ in $(seq 400); do
    [[ $("$BUILD/scenectl" --port "${port[cluster.0]}" cluster.nodes 2>/dev/null |
      grep -o '"node"' | wc -l) -ge $n ]] && return 0
    sleep 0.05
  done
  fail "the cluster daemons did not register"
}
stop_servers() { # every process started so far except etcd (the first when there is one)
  local keep=0 p
  ((have_etcd)) && keep=1
  for p in "${pids[@]:$keep}"; do stop_pid "$p"; done
  pids=("${pids[@]:0:$keep}")
}

# load SETUP N: SETUP's N load generators at once, each pinned; every one appends lines
# "SETUP TEST ops/s p99_ms" to $work/round
load() {
  local setup=$1 n=$2 i out lp=() p
  for ((i = 0; i < n; i++)); do
    out="$work/out.$setup.$i"
    if [[ $setup == redis ]]; then
      timeout "$RUN_TIMEOUT" taskset -c "$(load_core "$i")" redis-benchmark -p "${port[redis.$i]}" \
        -c 50 -P 16 -n "$REQUESTS" -t set,get --csv >"$out" 2>&1 &
    else
      timeout "$RUN_TIMEOUT" taskset -c "$(load_core "$i")" "$BUILD/scene-bench" \
        -p "${port[$setup.$i]}" --json -c 50 -P 16 -n "$REQUESTS" -t set_b64,get >"$out" 2>&1 &
    fi
    lp+=($!)
    pids+=($!)
  done
  for p in "${lp[@]}"; do wait "$p" || fail "a load generator of $setup failed: $(cat "$work"/out."$setup".*)"; done
  pids=("${pids[@]:0:${#pids[@]}-${#lp[@]}}")
  local figures
  for ((i = 0; i < n; i++)); do
    out="$work/out.$setup.$i"
    if [[ $setup == redis ]]; then
      figures=$(awk -F'"' -v s="$setup" '$2 == "SET" || $2 == "GET" {
        print s, ($2 == "SET" ? "set" : "get"), $4, $14 }' "$out")
    else
      # a test with errors counts as no rate at all
      figures=$(grep -s '"test":' "$out" | awk -v s="$setup" '{
        match($0, /"test":"[a-z_0-9]+"/); t = substr($0, RSTART + 8, RLENGTH - 9)
        match($0, /"ops\/s":[0-9.]+/); r = substr($0, RSTART + 8, RLENGTH - 8)
        match($0, /"p99_ms":[0-9.]+/); q = substr($0, RSTART + 9, RLENGTH - 9)
        match($0, /"errors":[0-9]+/); e = substr($0, RSTART + 9, RLENGTH - 9)
        print s, (t == "set_b64" ? "set" : t), (e + 0 > 0 ? 0 : r), q }' || true)
    fi
    [[ $(wc -l <<<"$figures") -eq 2 ]] || fail "no figures from $setup $i: $(cat "$out")"
    echo "$figures" >>"$work/round"
  done
}

declare -A one_rate # "setup.test" -> the N = 1 aggregate
results="$work/results"
: >"$results"
for n in "${counts[@]}"; do
  setups=()
  cores_s="" cores_l=""
  for ((i = 0; i < n; i++)); do
    cores_s="$cores_s$(server_core "$i") " cores_l="$cores_l$(load_core "$i") "
  done
  if ((have_etcd)); then
    setups+=(cluster)
    for ((i = 0; i < n; i++)); do
      start_daemon cluster "$i" --cluster "http://127.0.0.1:$eport" --data "$work/data.cluster.$n" \
        --node "n$n-$i"
    done
    wait_cluster "$n"
  fi
  setups+=(standalone)
  for ((i = 0; i < n; i++)); do start_daemon standalone "$i" --data "$work/data.standalone.$n.$i"; done
  if ((have_redis)); then
    setups+=(redis)
    for ((i = 0; i < n; i++)); do start_redis "$i"; done
  fi
  : >"$work/all.$n"
  for _ in $(seq "$RUNS"); do
    for s in "${setups[@]}"; do
      : >"$work/round"
      load "$s" "$n"
      # the round's aggregate rate and its slowest generator's p99, per test
      awk '{ r[$1" "$2] += $3; if ($4 > q[$1" "$2]) q[$1" "$2] = $4 } END {
        for (k in r) print k, r[k], q[k] }' "$work/round" >>"$work/all.$n"
    done
  done
  stop_servers
  rm -rf "$work"/data.* # the journals can be large
  echo
  echo "-- N = $n: servers on cores ${cores_s% }, load generators on cores ${cores_l% }"
  printf '   %-34s %12s %6s %8s   %12s %6s %8s\n' setup "set ops/s" eff "p99 ms" "get ops/s" eff "p99 ms"
  for s in "${setups[@]}"; do
    line=""
    for t in set get; do
      rate=$(awk -v k="$s $t" '$1" "$2 == k { print $3 }' "$work/all.$n" | median)
      p99=$(awk -v k="$s $t" '$1" "$2 == k { print $4 }' "$work/all.$n" | median)
      ((n == 1)) && one_rate[$s.$t]=$rate
      eff=$(awk -v r="$rate" -v o="${one_rate[$s.$t]:-0}" -v n="$n" 'BEGIN { printf "%.2f", (o > 0 ? r / (n * o) : 0) }')
      line="$line $(printf '%12.0f %6s %8.3f' "$rate" "$eff" "$p99")  "
      echo "$n $s $t $rate $p99" >>"$results"
    done
    case $s in
      cluster) name="cluster, one shared --data" ;;
      standalone) name="standalone, --data each" ;;
      redis) name="redis, appendfsync $FSYNC (SET/GET)" ;;
    esac
    printf '   %-34s%s\n' "$name" "$line"
  done
  if ((have_etcd)); then
    awk -v n="$n" '$1 == n && $3 == "set" { r[$2] = $4; q[$2] = $5 } END {
      rr = r["cluster"] / r["standalone"]; qq = q["cluster"] / q["standalone"]
      printf "   cluster / standalone set_b64: rate x%.2f (target >= 0.9: %s), p99 x%.2f (target <= 1.2: %s)\n",
        rr, (rr >= 0.9 ? "met" : "SHORT"), qq, (qq <= 1.2 ? "met" : "SHORT") }' "$results"
  fi
done
if ((${counts[-1]} >= 4)); then
  # at N = cores/2 on a machine of 8 cores or more: every setup's per-daemon efficiency
  awk -v n="${counts[-1]}" -v oc="${one_rate[cluster.set]:-0}" -v os="${one_rate[standalone.set]:-0}" \
    -v orr="${one_rate[redis.set]:-0}" '$1 == n && $3 == "set" {
      o = ($2 == "cluster" ? oc : $2 == "standalone" ? os : orr); e[$2] = (o > 0 ? $4 / (n * o) : 0) }
    END {
      printf "per-daemon efficiency of set at N = %d: cluster %.2f, standalone %.2f, redis %.2f\n", n, e["cluster"], e["standalone"], e["redis"]
      if ("cluster" in e)
        printf "cluster: target >= 0.9 and >= redis: %s\n", ((e["cluster"] >= 0.9 && e["cluster"] >= e["redis"]) ? "met" : "SHORT") }' "$results"
fi
