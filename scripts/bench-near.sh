#!/usr/bin/env bash
# Subscriptions by distance (make bench runs it): scene-bench -t near starts a daemon with
# --interest grid, measures it without bands and with bands, then one with --interest naive
# under the same workload, and stops both; RUNS such runs (default 3), of which the medians are
# printed: the daemon's interest work and CPU per tick, the tick rate and the rate at which the
# moves were applied (a daemon busy with its ticks can leave them waiting), frames/s and
# bytes/s per subscriber, matrices/s, memory per subscriber, and the ratio of the naive
# daemon's interest work per tick to the grid's (target >= 10).
#
# Environment: BUILD (build), RUNS (3), NEAR_TRANSFORMS (100000) and NEAR_SUBSCRIBERS (1000):
# the issue's sizes; NEAR_SECONDS (5) measured per phase; NEAR_FORM (json, or b64);
# NEAR_TIMEOUT (300) seconds a run may take. A run takes about 30 s at the issue's sizes on 2
# cores. Every daemon is started and stopped by scene-bench (it stops them when it ends, and
# they end with it).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
RUNS=${RUNS:-3}
TRANSFORMS=${NEAR_TRANSFORMS:-100000}
SUBSCRIBERS=${NEAR_SUBSCRIBERS:-1000}
SECONDS_EACH=${NEAR_SECONDS:-5}
FORM=${NEAR_FORM:-json}
TIMEOUT=${NEAR_TIMEOUT:-300}

out=$(mktemp)
trap 'rm -f "$out"' EXIT

form_flag=()
[[ $FORM == b64 ]] && form_flag=(--b64)
echo "== interest: subscriptions by distance (scene-bench -t near --naive), medians of $RUNS runs"
echo "   $TRANSFORMS transforms over a square, 10% moving every tick, $SUBSCRIBERS subscribers each"
echo "   following a moving entity (radius: 1% of the square), $FORM frames, $SECONDS_EACH s per"
echo "   phase; a daemon with --interest grid (without bands, then with bands), then one with"
echo "   --interest naive (NEAR_TRANSFORMS, NEAR_SUBSCRIBERS, NEAR_SECONDS, NEAR_FORM)"
for run in $(seq "$RUNS"); do
  timeout "$TIMEOUT" "$BUILD/scene-bench" -t near --scened "$BUILD/scened" --naive --json \
    --transforms "$TRANSFORMS" -S "$SUBSCRIBERS" --seconds "$SECONDS_EACH" "${form_flag[@]}" >>"$out" ||
    echo "   (run $run failed or ran past ${TIMEOUT}s)"
done

median() { sort -g | awk '{v[NR]=$1} END {print (NR ? v[int((NR+1)/2)] : "nan")}'; }
# FIELD's median over the runs' lines of daemon KIND (grid, naive) with BANDS (true, false),
# or of the summary lines when KIND is summary
field() {
  local select
  if [[ $1 == summary ]]; then select='"test":"near_summary"'; else select="\"interest\":\"$1\",\"bands\":$2,"; fi
  grep -F "$select" "$out" | grep -o "\"$3\":[-0-9.e+]*" | cut -d: -f2 | median || true
}

if ! grep -q near_summary "$out"; then
  echo "   (no run finished)"
  exit 0
fi
for kind in "grid false" "grid true" "naive false"; do
  read -r k b <<<"$kind"
  [[ $b == true ]] && label="$k, bands [r/4 60 Hz, r 10 Hz]" || label="$k, no bands"
  awk -v l="$label" -v i="$(field "$k" "$b" interest_ms_per_tick)" -v c="$(field "$k" "$b" cpu_ms_per_tick)" \
    -v n="$(field "$k" "$b" candidates_per_tick)" -v t="$(field "$k" "$b" ticks/s)" \
    -v mv="$(field "$k" "$b" moves/s)" -v dt="$(field "$k" "$b" daemon_ticks/s)" \
    -v f="$(field "$k" "$b" frames/s)" -v m="$(field "$k" "$b" matrices/s)" \
    -v by="$(field "$k" "$b" bytes/s)" -v mem="$(field "$k" "$b" memory_bytes_per_subscription)" \
    -v rss="$(field "$k" "$b" rss_bytes_per_subscriber)" 'BEGIN {
      printf "near %s: interest work %.3f ms/tick (%.0f candidates/tick), daemon CPU %.2f ms/tick, %.1f ticks/s in the frames (the daemon counts %.1f), moves applied at %.1f ticks/s\n", l, i, n, c, t, dt, mv
      printf "    %.1f frames/s per subscriber, %.0f matrices/s, %.1f KB/s per subscriber; %.0f bytes of interest state per subscription, RSS %+.1f KB per subscriber\n", f, m, by / 1e3, mem, rss / 1e3 }'
done
awk -v b="$(field summary - 'bytes_with_bands/without')" -v r="$(field summary - 'naive/grid_interest_ms')" \
  -v c="$(field summary - 'naive/grid_cpu_ms')" -v i="$(field grid false interest_ms_per_tick)" \
  -v t="$(field grid false ticks/s)" -v cpu="$(field grid false cpu_ms_per_tick)" \
  -v mv="$(field grid false moves/s)" -v applied="$(grep -c '"moves_applied":true' "$out")" \
  -v runs="$(grep -c near_summary "$out")" 'BEGIN {
    printf "bytes per subscriber per second with bands / without = %.2f\n", b
    verdict = (2 * applied < runs ? "not judged, the moves were not all applied in most runs" : r >= 10 ? "met" : "SHORT")
    printf "naive / grid interest work per tick = %.1f (target >= 10: %s); daemon CPU per tick %.1f\n", r, verdict, c
    ok = t >= 0.98 * 60 && mv >= 0.98 * 60 && cpu <= 1000 / 60 && i <= 2
    printf "60 Hz on one core with interest work <= 2 ms/tick: %s (%.1f ticks/s, moves applied at %.1f ticks/s, daemon CPU %.2f ms/tick, interest %.3f ms/tick)\n", (ok ? "met" : "SHORT"), t, mv, cpu, i }'
