#!/usr/bin/env bash
# The C# client's tests: builds client/csharp/Runtime with Mono's mcs (C# 7.2, against System,
# System.Core, System.Numerics and Newtonsoft.Json only, as the package promises), then this
# directory's test program with the package's sample and a UnityEngine stub, and runs it. The
# program starts its daemons, etcd and certificates itself on loopback ports; it runs under
# `timeout` in a process group of its own, which is ended on the way out, so nothing it started
# outlives it. Usage: tests/csharp/run.sh [TEST-NAME-SUBSTRING]
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
OUT=$BUILD/csharp
NEWTONSOFT=${NEWTONSOFT:-/usr/lib/cli/Newtonsoft.Json-5.0/Newtonsoft.Json.dll}
for tool in mcs mono; do
  command -v "$tool" >/dev/null || { echo "tests/csharp: $tool is not installed (scripts/install-deps.sh)" >&2; exit 1; }
done
[[ -f "$NEWTONSOFT" ]] || { echo "tests/csharp: no $NEWTONSOFT (libnewtonsoft-json-cil-dev)" >&2; exit 1; }

mkdir -p "$OUT"
mcs=(mcs -noconfig -langversion:7.2 -warnaserror -nologo)
refs=(-r:System.dll -r:System.Core.dll -r:System.Numerics.dll "-r:$NEWTONSOFT")
"${mcs[@]}" -target:library "-out:$OUT/Scened.dll" "${refs[@]}" client/csharp/Runtime/*.cs
cp "$NEWTONSOFT" "$OUT/"
"${mcs[@]}" -target:exe "-out:$OUT/scened-tests.exe" "${refs[@]}" "-r:$OUT/Scened.dll" \
  tests/csharp/*.cs "client/csharp/Samples~/WorldMirror/"*.cs

export SCENED_BIN=${SCENED_BIN:-$PWD/$BUILD/scened} SCENECTL_BIN=${SCENECTL_BIN:-$PWD/$BUILD/scenectl}
export SCENED_REPO=$PWD
timeout -k 10 "${CSHARP_TEST_TIMEOUT:-900}" mono --debug "$OUT/scened-tests.exe" "$@" &
pid=$!
trap 'kill -TERM -- "-$pid" 2>/dev/null || true' EXIT INT TERM
wait "$pid"
