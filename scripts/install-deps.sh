#!/usr/bin/env bash
# Installs the Debian packages scened builds and tests with, when any is missing.
# Called by make; safe to run by hand. Needs root (or sudo) only when something is missing.
set -euo pipefail

packages=(gcc make pkg-config libuv1-dev libcjson-dev libcglm-dev libcunit1-dev libedit-dev
  libhttp-parser-dev
  libwslay-dev nettle-dev    # WebSocket framing; SHA-1 and base64 for the handshake
  libcurl4-openssl-dev       # the cluster's HTTP client of etcd's JSON gateway (multi interface)
  etcd-server etcd-client    # the cluster's coordinator: the tests start a real etcd
  libssl-dev openssl         # TLS on both ports and in the clients; certificates in the tests
  chromium chromium-driver   # the staging view's browser test (headless)
  prometheus # promtool: the tests check /metrics with it
  clang      # libFuzzer for make fuzz
  python3 jq # the Python client's self-test and the shell example run in the tests
  python3-venv python3-setuptools python3-pytest # make test-python: the package installed offline
  valgrind   # make valgrind
  redis-server redis-tools # make bench measures Redis beside the daemon in the same run
  mono-mcs mono-runtime libnewtonsoft-json-cil-dev # the C# client's tests (client/csharp)
)


missing=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$p")
done
# Node.js and npm build the staging view (three.js from the npm registry) and run tests/web.
# A machine may have them from elsewhere than Debian: only the commands matter.
command -v node >/dev/null || missing+=(nodejs)
command -v npm >/dev/null || missing+=(npm)
((${#missing[@]} == 0)) && exit 0

echo "installing: ${missing[*]}" >&2
sudo=""
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null || { echo "need root to install: ${missing[*]}" >&2; exit 1; }
  sudo="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
# A stale or empty package list finds nothing: refresh it once, then install.
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
