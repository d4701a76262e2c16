#!/usr/bin/env bash
# Shows that the layering check catches what it is for: in a scratch tree it must pass a
# well-layered set of files and fail each kind of breach (a low layer calling a higher one,
# proto calling the server, proto or the core including a server header, the core including
# libuv). Usage: layering-selftest.sh CC
set -euo pipefail
cc=${1:-cc}
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# A tiny tree: ops/low.c, cmd/high.c, proto/p.c, server/core/c.c, with objects in $tmp/obj.
tree() {
  rm -rf "$tmp/src" "$tmp/obj"
  mkdir -p "$tmp/src/server/ops" "$tmp/src/server/cmd" "$tmp/src/proto" "$tmp/src/server/core"
  printf 'int low_fn(void) { return 1; }\n' >"$tmp/src/server/ops/low.c"
  printf 'int low_fn(void);\nint high_fn(void) { return low_fn(); }\n' >"$tmp/src/server/cmd/high.c"
  printf '#include <string.h>\nint proto_fn(void) { return (int)strlen("x"); }\n' >"$tmp/src/proto/p.c"
  printf '#include <stdlib.h>\nint core_fn(void) { return abs(-1); }\n' >"$tmp/src/server/core/c.c"
}
build() {
  for f in $(cd "$tmp/src" && find . -name '*.c'); do
    mkdir -p "$tmp/obj/$(dirname "$f")"
    "$cc" -c -o "$tmp/obj/${f%.c}.o" "$tmp/src/$f"
  done
}
check() { # expect (0: pass, 1: fail), what
  local out rc=0
  out=$(cd "$tmp/src" && LAYERING_SRC="$tmp/src" "$here/layering.sh" "$tmp/obj" server/ops server/cmd 2>&1) || rc=$?
  if { [ "$1" = 0 ] && [ "$rc" != 0 ]; } || { [ "$1" = 1 ] && [ "$rc" = 0 ]; }; then
    echo "layering self-test: $2: expected $([ "$1" = 0 ] && echo pass || echo failure), got exit $rc" >&2
    echo "$out" >&2
    exit 1
  fi
}

tree && build && check 0 "a well-layered tree"
tree && printf 'int high_fn(void);\nint low_fn(void) { return high_fn(); }\n' >"$tmp/src/server/ops/low.c" &&
  printf 'int high_fn(void) { return 2; }\n' >"$tmp/src/server/cmd/high.c" && build &&
  check 1 "ops calling cmd"
tree && printf 'int low_fn(void);\nint proto_fn(void) { return low_fn(); }\n' >"$tmp/src/proto/p.c" && build &&
  check 1 "proto calling the server"
tree && printf '#include "server.h"\nint proto_fn(void) { return 0; }\n' >"$tmp/src/proto/p.c" &&
  touch "$tmp/src/proto/server.h" && build && check 1 "proto including a server header"
tree && printf '#include <uv.h>\nint core_fn(void) { return 0; }\n' >"$tmp/src/server/core/c.c" &&
  build && check 1 "the core including libuv"
tree && mkdir -p "$tmp/src/server/elsewhere" && printf 'int x_fn(void) { return 0; }\n' >"$tmp/src/server/elsewhere/x.c" &&
  build && check 1 "a server directory in no layer"
echo "layering self-test: every kind of breach is caught"
