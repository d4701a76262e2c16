#!/usr/bin/env bash
# The C# client (client/csharp) under Mono, beside scene-bench in the same run: pipelined
# transform.set_local calls with a base64 matrix from one connection (SetLocalAsync, and the
# same through CallAsync with a JObject), against scene-bench -c 1 -t set_b64 at the same
# pipeline depths, run alternately (medians of RUNS runs); then frames of 10,000 transforms
# decoded into a subscription's mirror, b64, packed and json (frames/s, and the heap's growth
# per frame). Needs mcs and mono (scripts/install-deps.sh); tests/csharp/run.sh builds the
# library.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
RUNS=${RUNS:-3}
CS_N=${CS_N:-300000}
CS_PIPELINES=${CS_PIPELINES:-64 256}
OUT=$BUILD/csharp
NEWTONSOFT=${NEWTONSOFT:-/usr/lib/cli/Newtonsoft.Json-5.0/Newtonsoft.Json.dll}
if ! command -v mcs >/dev/null || ! command -v mono >/dev/null || [[ ! -f "$NEWTONSOFT" ]]; then
  echo "(C# client benchmark skipped: mcs, mono or Newtonsoft.Json is missing; scripts/install-deps.sh installs them)"
  exit 0
fi
mkdir -p "$OUT"
mcs=(mcs -noconfig -langversion:7.2 -warnaserror -nologo -r:System.dll -r:System.Core.dll -r:System.Numerics.dll "-r:$NEWTONSOFT")
"${mcs[@]}" -target:library "-out:$OUT/Scened.dll" client/csharp/Runtime/*.cs
"${mcs[@]}" -target:exe "-out:$OUT/scened-bench.exe" "-r:$OUT/Scened.dll" tests/csharp/bench/Bench.cs
cp "$NEWTONSOFT" "$OUT/"

log=$(mktemp)
runs=$(mktemp)
"$BUILD/scened" --listen 127.0.0.1:0 --http off --log-level warn 2>"$log" &
pid=$!
trap 'kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; rm -f "$log" "$runs"' EXIT
for _ in $(seq 100); do grep -q 'listening on' "$log" && break; sleep 0.05; done
port=$(grep -o 'listening on 127.0.0.1:[0-9]*' "$log" | head -1 | cut -d: -f2)
[[ -n "$port" ]] || { echo "scened did not start"; cat "$log"; exit 1; }

ops() { grep -o '"ops/s":[0-9.]*' | cut -d: -f2; }
median() { sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }

echo "== C# client under Mono ($(mono --version | head -1 | grep -o 'version [0-9.]*')): set_local with matrix_b64 from one"
echo "   connection, against scene-bench -c 1 -t set_b64, run alternately (medians of $RUNS runs, $CS_N calls)"
for p in $CS_PIPELINES; do
  : >"$runs"
  for _ in $(seq "$RUNS"); do
    echo "c $("$BUILD/scene-bench" -p "$port" --json -c 1 -P "$p" -n "$CS_N" -t set_b64 | ops)" >>"$runs"
    echo "s $(mono "$OUT/scened-bench.exe" set_b64 --port "$port" --requests "$CS_N" --pipeline "$p" | ops)" >>"$runs"
    echo "j $(mono "$OUT/scened-bench.exe" set_b64_jobject --port "$port" --requests "$CS_N" --pipeline "$p" | ops)" >>"$runs"
  done
  c=$(awk '$1 == "c" { print $2 }' "$runs" | median)
  s=$(awk '$1 == "s" { print $2 }' "$runs" | median)
  j=$(awk '$1 == "j" { print $2 }' "$runs" | median)
  printf 'pipeline %-4s scene-bench %9.0f calls/s   C# SetLocalAsync %9.0f (%.2f x; target >= 0.5: %s)   C# CallAsync+JObject %9.0f (%.2f x)\n' \
    "$p" "$c" "$s" "$(awk -v a="$s" -v b="$c" 'BEGIN { print a / b }')" \
    "$(awk -v a="$s" -v b="$c" 'BEGIN { print (a / b >= 0.5 ? "met" : "SHORT") }')" "$j" "$(awk -v a="$j" -v b="$c" 'BEGIN { print a / b }')"
done

echo
echo "== C# client: frames of 10,000 changed transforms applied to a subscription's mirror (in process,"
echo "   lines captured from the daemon; heap growth per frame with no collection during the run)"
mono "$OUT/scened-bench.exe" decode --port "$port" --seconds 2 | while read -r line; do
  echo "$line" | awk -F'[:,}]' '{
    for (i = 1; i < NF; i++) { gsub(/"/, "", $i); v[$i] = $(i + 1) }
    gsub(/"/, "", v["form"])
    printf "%-6s %7.1f frames/s  %10.0f matrices/s  (%7d bytes a frame; heap growth %s bytes a frame, %s collections)\n",
      v["form"], v["frames/s"], v["matrices/s"], v["frame_bytes"], v["heap_growth_per_frame"], v["gen0_collections"] }'
done
