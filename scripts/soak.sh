#!/usr/bin/env bash
# The soak test behind `make soak`: one scened on ephemeral ports under a mixed load for
# SOAK_MINUTES minutes (default 3): scene-bench set_local, get and batch loops plus a few stream
# subscriber loops in the background. Every SOAK_INTERVAL seconds (default 10) it samples the
# daemon's resident memory and the latency of a short one-client probe, one line per sample.
# The summary gives the RSS trend (first against last third, least-squares slope) and the
# latency ranges. Exits non-zero when RSS grew by more than SOAK_GROWTH_PCT percent plus
# SOAK_GROWTH_MIB MiB between the first and the last third (default 20% + 16 MiB), when the
# daemon died or did not exit 0 on SIGTERM, or when a load run failed.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
MINUTES=${SOAK_MINUTES:-3}
INTERVAL=${SOAK_INTERVAL:-10}
GROWTH_PCT=${SOAK_GROWTH_PCT:-20}
GROWTH_MIB=${SOAK_GROWTH_MIB:-16}
SCENED="$BUILD/scened"
BENCH="$BUILD/scene-bench"

for bin in "$SCENED" "$BENCH"; do
  [[ -x "$bin" ]] || { echo "soak: $bin is missing (run make)" >&2; exit 2; }
done
[[ "$MINUTES" =~ ^[0-9]+([.][0-9]+)?$ ]] || { echo "soak: SOAK_MINUTES must be a number" >&2; exit 2; }

work=$(mktemp -d)
log="$work/scened.log"
pids=()
scened_pid=""

# Each loop ends its running scene-bench when told to stop (its TERM trap).
stop_loops() {
  local p
  for p in "${pids[@]}"; do
    kill -TERM "$p" 2>/dev/null || true
  done
  for p in "${pids[@]}"; do
    wait "$p" 2>/dev/null || true
  done
  pids=()
}

# shellcheck disable=SC2317 # called by the trap
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  stop_loops
  if [[ -n "$scened_pid" ]] && kill -0 "$scened_pid" 2>/dev/null; then
    kill -TERM "$scened_pid" 2>/dev/null || true
    for _ in $(seq 100); do kill -0 "$scened_pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$scened_pid" 2>/dev/null || true
    wait "$scened_pid" 2>/dev/null || true
  fi
  rm -rf "$work"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

"$SCENED" --listen 127.0.0.1:0 --http 127.0.0.1:0 --log-level warn 2>"$log" &
scened_pid=$!
for _ in $(seq 200); do
  grep -q 'listening on' "$log" && grep -q 'http on' "$log" && break
  kill -0 "$scened_pid" 2>/dev/null || break
  sleep 0.05
done
port=$(grep -o 'listening on 127\.0\.0\.1:[0-9]*' "$log" | head -1 | cut -d: -f2 || true)
http_port=$(grep -o 'http on 127\.0\.0\.1:[0-9]*' "$log" | head -1 | cut -d: -f2 || true)
if [[ -z "$port" || -z "$http_port" ]]; then
  echo "soak: scened did not start" >&2
  cat "$log" >&2
  exit 1
fi

total_s=$(awk -v m="$MINUTES" 'BEGIN { printf "%d", m * 60 + 0.5 }')
start=$(date +%s)
end=$((start + total_s))
load_end=$((end + INTERVAL + 60)) # the load outlasts the last sample; it is stopped after it
echo "== soak: scened pid $scened_pid on 127.0.0.1:$port (metrics :$http_port), $MINUTES min," \
  "sample every ${INTERVAL}s"

# A load loop: runs scene-bench ARGS again and again until the end; failed runs are counted
# in its own file. Each run is bounded by -n or --seconds, and by timeout; on TERM the loop
# ends the run in progress (timeout passes the signal on) and leaves.
load_loop() {
  local name=$1
  shift
  local runs=0 fails=0 child="" rc
  trap '[[ -n "$child" ]] && kill -TERM "$child" 2>/dev/null; exit 0' TERM
  while (($(date +%s) < load_end)); do
    timeout 120 "$BENCH" -p "$port" "$@" >"$work/$name.out" 2>&1 &
    child=$!
    rc=0
    wait "$child" || rc=$?
    child=""
    if ((rc == 0)); then
      if grep -q 'ERRORS' "$work/$name.out"; then fails=$((fails + 1)); fi
    else
      fails=$((fails + 1))
      echo "soak: $name run failed ($rc): $(tail -1 "$work/$name.out")" >&2
    fi
    runs=$((runs + 1))
    echo "$runs $fails" >"$work/$name.count"
  done
}

load_loop set_local -c 4 -P 8 -n 40000 -t set_local &
pids+=($!)
load_loop get -c 4 -P 8 -n 40000 -t get &
pids+=($!)
load_loop batch -c 2 -P 4 -n 4000 -t batch &
pids+=($!)
for i in 1 2 3; do
  load_loop "stream$i" -t stream -S 2 -K 2000 --seconds 15 &
  pids+=($!)
done

rss_kib() {
  local v
  v=$(awk '/^VmRSS:/ { print $2 }' "/proc/$scened_pid/status" 2>/dev/null || true)
  if [[ -z "$v" ]]; then # no /proc: the daemon's own figure from /metrics
    v=$(metric scened_resident_memory_bytes | awk '{ printf "%d", $1 / 1024 }')
  fi
  echo "${v:-0}"
}

# One value from /metrics over bash's /dev/tcp (no curl needed).
metric() {
  local name=$1
  exec 9<>"/dev/tcp/127.0.0.1/$http_port" || return 0
  printf 'GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' >&9
  timeout 5 cat <&9 | awk -v n="$name" '$1 == n { print $2; exit }'
  exec 9<&- 9>&-
}

samples="$work/samples"
: >"$samples"
# entities: scene-bench's stream test destroys its world but not its entities, so the daemon
# legitimately holds more of them (a few bytes each) as the soak goes on.
printf '%8s %12s %10s %10s %10s %8s %10s\n' "t_s" "rss_kib" "p50_ms" "p99_ms" "p999_ms" "conns" \
  "entities"
next=$((start + INTERVAL))
died=0
while :; do
  now=$(date +%s)
  ((now >= end + 1)) && break
  if ((next > now)); then sleep $((next - now)); fi
  next=$((next + INTERVAL))
  if ! kill -0 "$scened_pid" 2>/dev/null; then
    died=1
    echo "soak: scened died" >&2
    break
  fi
  probe=$(timeout 60 "$BENCH" -p "$port" -c 1 -P 1 -n 2000 -t get --json 2>/dev/null || true)
  p50=$(grep -o '"p50_ms":[0-9.]*' <<<"$probe" | cut -d: -f2 || true)
  p99=$(grep -o '"p99_ms":[0-9.]*' <<<"$probe" | cut -d: -f2 || true)
  p999=$(grep -o '"p999_ms":[0-9.]*' <<<"$probe" | cut -d: -f2 || true)
  rss=$(rss_kib)
  conns=$(metric scened_connections || true)
  entities=$(metric scened_entities || true)
  t=$(($(date +%s) - start))
  printf '%8d %12d %10s %10s %10s %8s %10s\n' "$t" "$rss" "${p50:--}" "${p99:--}" "${p999:--}" \
    "${conns:--}" "${entities:--}"
  echo "$t $rss ${p50:-nan} ${p99:-nan} ${entities:-nan}" >>"$samples"
  (($(date +%s) >= end)) && break
done

stop_loops
runs=0
fails=0
for f in "$work"/*.count; do
  [[ -f "$f" ]] || continue
  read -r r fl <"$f"
  runs=$((runs + r))
  fails=$((fails + fl))
done

status=0
if ((died == 0)); then
  kill -TERM "$scened_pid"
  set +e
  wait "$scened_pid"
  status=$?
  set -e
  scened_pid=""
fi

echo
echo "== summary"
summary=$(awk -v pct="$GROWTH_PCT" -v mib="$GROWTH_MIB" '
  { t[NR] = $1; r[NR] = $2; p50[NR] = $3; p99[NR] = $4; ent[NR] = $5 }
  END {
    n = NR
    if (n < 3) { print "verdict=short"; printf "samples: %d (too few for a trend)\n", n; exit }
    k = int(n / 3)
    for (i = 1; i <= k; i++) first += r[i]
    for (i = n - k + 1; i <= n; i++) last += r[i]
    first /= k; last /= k
    for (i = 1; i <= n; i++) { sx += t[i] / 60; sy += r[i] }
    mx = sx / n; my = sy / n
    for (i = 1; i <= n; i++) { dx = t[i] / 60 - mx; sxx += dx * dx; sxy += dx * (r[i] - my) }
    slope = sxx > 0 ? sxy / sxx : 0
    lo50 = lo99 = 1e300; hi50 = hi99 = -1
    for (i = 1; i <= n; i++) {
      if (p50[i] != "nan") { if (p50[i] < lo50) lo50 = p50[i]; if (p50[i] > hi50) hi50 = p50[i] }
      if (p99[i] != "nan") { if (p99[i] < lo99) lo99 = p99[i]; if (p99[i] > hi99) hi99 = p99[i] }
    }
    limit = first * (1 + pct / 100) + mib * 1024
    printf "samples: %d over %d s\n", n, t[n]
    printf "rss: first third %.0f KiB, last third %.0f KiB (%+.1f%%), slope %+.1f KiB/min; limit %.0f KiB\n",
      first, last, (last - first) * 100 / first, slope, limit
    if (ent[1] != "nan" && ent[n] != "nan") printf "entities alive: %d at the first sample, %d at the last\n", ent[1], ent[n]
    if (hi50 >= 0) printf "latency (get probe, 1 client): p50 %.3f..%.3f ms, p99 %.3f..%.3f ms\n", lo50, hi50, lo99, hi99
    print (last > limit ? "verdict=grew" : "verdict=ok")
  }' "$samples")
grep -v '^verdict=' <<<"$summary"
echo "load runs: $runs, failed: $fails"

rc=0
if grep -q '^verdict=grew' <<<"$summary"; then
  echo "FAIL: resident memory grew by more than ${GROWTH_PCT}% + ${GROWTH_MIB} MiB"
  rc=1
fi
if ((died)); then
  echo "FAIL: scened died; log:"
  tail -20 "$log"
  rc=1
elif ((status != 0)); then
  echo "FAIL: scened exited $status on SIGTERM"
  rc=1
else
  echo "scened exited 0 on SIGTERM"
fi
if ((fails > 0)); then
  echo "FAIL: $fails load runs failed"
  rc=1
fi
if grep -q '^verdict=short' <<<"$summary"; then
  echo "FAIL: too few samples for a trend (SOAK_MINUTES too small?)"
  rc=1
fi
((rc == 0)) && echo "PASS"
exit "$rc"
