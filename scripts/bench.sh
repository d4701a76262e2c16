#!/usr/bin/env bash
# The benchmarks behind `make bench`: the transform core against its limit, then the daemon
# under scene-bench, side by side with Redis where redis-server and redis-benchmark exist.
# Figures are medians of RUNS runs (default 3); the machine is small and noisy.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
RUNS=${RUNS:-3}
N=${N:-300000}

echo "== transform core (bench-core)"
"$BUILD/bench-core"

echo
echo "== request decoding in user space, no sockets (bench-decode)"
DECODE_OUT=$(mktemp)
"$BUILD/bench-decode" | tee "$DECODE_OUT"

log=$(mktemp)
runs_out=$(mktemp)
redis_dir=$(mktemp -d)
cleanup() {
  [[ -n "${scened_pid:-}" ]] && kill "$scened_pid" 2>/dev/null && wait "$scened_pid" 2>/dev/null
  [[ -n "${redis_pid:-}" ]] && kill "$redis_pid" 2>/dev/null && wait "$redis_pid" 2>/dev/null
  rm -rf "$log" "$runs_out" "$redis_dir" "$DECODE_OUT"
}
trap cleanup EXIT

"$BUILD/scened" --listen 127.0.0.1:0 --log-level warn 2>"$log" &
scened_pid=$!
for _ in $(seq 100); do grep -q 'listening on' "$log" && break; sleep 0.05; done
port=$(grep -o 'listening on 127.0.0.1:[0-9]*' "$log" | head -1 | cut -d: -f2)
[[ -n "$port" ]] || { echo "scened did not start"; cat "$log"; exit 1; }

# median VALUE of field F (ops/s, matrices/s, p50_ms, ...) over RUNS runs of scene-bench ARGS
median_of() {
  local field=$1
  shift
  for _ in $(seq "$RUNS"); do
    "$BUILD/scene-bench" -p "$port" --json "$@" | grep -o "\"$field\":[0-9.]*" | cut -d: -f2
  done | sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'
}

# user and system CPU seconds the daemon has used so far
daemon_cpu() { awk -v hz="$(getconf CLK_TCK)" '{printf "%.3f %.3f", $14 / hz, $15 / hz}' "/proc/$scened_pid/stat"; }
# daemon CPU per request, in microseconds, over $RUNS runs of N requests since $1 $2: the text
# in $cpu_text, the user figure alone in $cpu_user_us
cpu_per_request() {
  read -r u1 s1 <<<"$(daemon_cpu)"
  cpu_user_us=$(awk -v u0="$1" -v u1="$u1" -v n="$((RUNS * N))" 'BEGIN { printf "%.2f", (u1 - u0) * 1e6 / n }')
  cpu_text=$(awk -v u0="$1" -v s0="$2" -v u1="$u1" -v s1="$s1" -v n="$((RUNS * N))" \
    'BEGIN { printf "daemon CPU per request: user %.2f us, system %.2f us", (u1 - u0) * 1e6 / n, (s1 - s0) * 1e6 / n }')
}

echo
echo "== daemon: transform.set_local, 50 connections x 16 pipelined (medians of $RUNS runs)"
read -r u0 s0 <<<"$(daemon_cpu)"
trs=$(median_of ops/s -c 50 -P 16 -n "$N" -t set_local)
cpu_per_request "$u0" "$s0"
trs_cpu=$cpu_text
read -r u0 s0 <<<"$(daemon_cpu)"
mat=$(median_of ops/s -c 50 -P 16 -n "$N" -t set_matrix)
cpu_per_request "$u0" "$s0"
mat_cpu=$cpu_text
mat_user=$cpu_user_us
printf 'set_local t/r/s     %10.0f ops/s  (%s)\n' "$trs" "$trs_cpu"
printf 'set_local matrix    %10.0f ops/s  (%s)\n' "$mat" "$mat_cpu"
# The matrix request's user CPU split: cJSON's parse of the line (bench-decode, same lines) and
# the rest, which is the daemon's own.
cjson_ns=$(grep -o 'set_local_matrix.*cjson_parse_ns=[0-9]*' "$DECODE_OUT" | grep -o '[0-9]*$')
awk -v u="$mat_user" -v c="$cjson_ns" 'BEGIN {
  printf "set_local matrix: daemon user CPU %.2f us per request, of which cJSON parse %.2f us, the daemon own %.2f us\n", u, c / 1000, u - c / 1000 }'
echo
echo "== daemon: partial set_local (the rotation alone) against a whole t/r/s set_local,"
echo "   50 connections x 16 pipelined, run alternately (medians of $RUNS runs)"
# Alternating runs meet the same load on this shared machine. Each run leaves a line
# "TEST ops/s user_s system_s" (the daemon's CPU during it) in $runs_out.
one_run() {
  local u0 s0 u1 s1 rate
  read -r u0 s0 <<<"$(daemon_cpu)"
  rate=$("$BUILD/scene-bench" -p "$port" --json -c 50 -P 16 -n "$N" -t "$1" |
    grep -o '"ops/s":[0-9.]*' | cut -d: -f2)
  read -r u1 s1 <<<"$(daemon_cpu)"
  echo "$1 $rate $(awk -v u0="$u0" -v s0="$s0" -v u1="$u1" -v s1="$s1" \
    'BEGIN { printf "%.3f %.3f", u1 - u0, s1 - s0 }')" >>"$runs_out"
}
for _ in $(seq "$RUNS"); do
  one_run set_local
  one_run set_partial
done
median_run() { awk -v t="$1" '$1 == t { print $2 }' "$runs_out" | sort -g |
  awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
cpu_run() { awk -v t="$1" -v n="$((RUNS * N))" '$1 == t { u += $3; s += $4 } END {
  printf "daemon CPU per request: user %.2f us, system %.2f us", u * 1e6 / n, s * 1e6 / n }' "$runs_out"; }
full=$(median_run set_local)
part=$(median_run set_partial)
printf 'set_local t/r/s     %10.0f ops/s  (%s)\n' "$full" "$(cpu_run set_local)"
printf 'set_local partial r %10.0f ops/s  (%s)\n' "$part" "$(cpu_run set_partial)"
awk -v p="$part" -v f="$full" 'BEGIN { printf "partial / t/r/s = %.2f (target >= 0.9)\n", p / f }'

echo
echo "== daemon: one client, no pipelining (medians of $RUNS runs)"
p50=$(median_of p50_ms -c 1 -P 1 -n 20000 -t set_matrix)
p99=$(median_of p99_ms -c 1 -P 1 -n 20000 -t set_matrix)
printf 'set_local matrix    p50=%s ms  p99=%s ms\n' "$p50" "$p99"

echo
echo "== rewind: a world that keeps 600 ticks against one that keeps none (medians of $RUNS runs)"
# set_local alternately without and with history; then one client's get now and at a past tick
for _ in $(seq "$RUNS"); do
  "$BUILD/scene-bench" -p "$port" --json -c 50 -P 16 -n "$N" -t set_local |
    grep -o '"ops/s":[0-9.]*' | cut -d: -f2 >>"$log.nohist"
  "$BUILD/scene-bench" -p "$port" --json -c 50 -P 16 -n "$N" -t set_local --history 600 |
    grep -o '"ops/s":[0-9.]*' | cut -d: -f2 >>"$log.hist"
done
med() { sort -g "$1" | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
nohist=$(med "$log.nohist")
hist=$(med "$log.hist")
rm -f "$log.nohist" "$log.hist"
printf 'set_local, no history  %10.0f ops/s\n' "$nohist"
printf 'set_local, history 600 %10.0f ops/s  (%.2f of no history; target >= 1/1.2 = 0.83)\n' "$hist" \
  "$(awk -v a="$hist" -v b="$nohist" 'BEGIN { print a / b }')"
g50=$(median_of p50_ms -c 1 -P 1 -n 20000 -t get --history 600)
g99=$(median_of p99_ms -c 1 -P 1 -n 20000 -t get --history 600)
p50=$(median_of p50_ms -c 1 -P 1 -n 20000 -t get_past --history 600)
p99=$(median_of p99_ms -c 1 -P 1 -n 20000 -t get_past --history 600)
printf 'transform.get now           p50=%s ms p99=%s ms\n' "$g50" "$g99"
printf 'transform.get at past ticks p50=%s ms p99=%s ms  (p50 %.2f x now; target <= 1.5)\n' \
  "$p50" "$p99" "$(awk -v a="$p50" -v b="$g50" 'BEGIN { print a / b }')"

echo
echo "== streaming: a root with 10,000 descendants moving every tick"
for s in 1 10 100; do
  "$BUILD/scene-bench" -p "$port" -t stream -S "$s" -K 10000 --seconds 3
done

echo
echo "== durability: matrix set_local with a journal, per fsync policy (medians of $RUNS runs)"
start_data_daemon() { # $1 fsync policy; sets data_pid and data_port
  data_dir=$(mktemp -d)
  data_log="$data_dir.log"
  "$BUILD/scened" --listen 127.0.0.1:0 --http off --log-level warn --data "$data_dir" \
    --fsync "$1" --save-interval 0 2>"$data_log" &
  data_pid=$!
  for _ in $(seq 100); do grep -q 'listening on' "$data_log" && break; sleep 0.05; done
  data_port=$(grep -o 'listening on 127.0.0.1:[0-9]*' "$data_log" | head -1 | cut -d: -f2)
}
stop_data_daemon() {
  kill "$data_pid" 2>/dev/null && wait "$data_pid" 2>/dev/null || true
  rm -rf "$data_dir" "$data_log"
}
for policy in always everysec no; do
  start_data_daemon "$policy"
  rate=$(for _ in $(seq "$RUNS"); do
    "$BUILD/scene-bench" -p "$data_port" --json -c 50 -P 16 -n "$N" -t set_matrix |
      grep -o '"ops/s":[0-9.]*' | cut -d: -f2
  done | sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}')
  printf 'fsync %-9s %10.0f ops/s\n' "$policy" "$rate"
  stop_data_daemon
done
echo
echo "== durability: snapshot of ${SNAPSHOT_N:=1000000} transforms while another client pings"
start_data_daemon everysec
"$BUILD/scene-bench" -p "$data_port" -t snapshot -K "$SNAPSHOT_N"
stop_data_daemon

echo
if command -v redis-server >/dev/null && command -v redis-benchmark >/dev/null; then
  echo "== Redis, same concurrency and pipelining (medians of $RUNS runs)"

  rport=$((20000 + RANDOM % 20000))
  redis-server --port "$rport" --bind 127.0.0.1 --save '' --appendonly no >/dev/null 2>&1 &
  redis_pid=$!
  for _ in $(seq 100); do redis-cli -p "$rport" ping >/dev/null 2>&1 && break; sleep 0.05; done
  rb() {
    for _ in $(seq "$RUNS"); do
      redis-benchmark -p "$rport" -c 50 -P 16 -n "$N" -q "$@" | tr '\r' '\n' |
        grep -o '[0-9.]* requests per second' | tail -1 | cut -d' ' -f1
    done | sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'
  }
  set_rate=$(rb -t set)
  fields=""
  for i in $(seq 16); do fields="$fields f$i v$i"; done
  # shellcheck disable=SC2086
  hset_rate=$(rb hset bench:h:__rand_int__ $fields)
  printf 'redis SET           %10.0f ops/s\n' "$set_rate"
  printf 'redis HSET 16 fields %9.0f ops/s\n' "$hset_rate"
  echo
  awk -v m="$mat" -v s="$set_rate" -v h="$hset_rate" 'BEGIN {
    printf "matrix set_local / redis HSET-16 = %.2f (target >= 3)\n", m / h
    printf "matrix set_local / redis SET     = %.2f (target >= 1)\n", m / s }'
  # The parse of one matrix request by cJSON, with nothing else, bounds what one core can do.
  ceiling=$(grep -o 'set_local_matrix.*cjson_alone_max_per_core=[0-9]*' "$DECODE_OUT" | grep -o '[0-9]*$')
  awk -v c="$ceiling" -v s="$set_rate" 'BEGIN {
    printf "cJSON parse alone, one core: %.0f matrix requests/s = %.2f x redis SET\n", c, c / s }'
else
  echo "== Redis comparison skipped: redis-server or redis-benchmark is not installed"
fi

echo
BUILD="$BUILD" RUNS="$RUNS" N="$N" scripts/bench-cluster.sh
