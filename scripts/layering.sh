#!/usr/bin/env bash
# The layering check of make test. Usage: layering.sh OBJ_DIR LAYER...
#
# What it holds the tree to:
# - the core (server/core, include/scn_core.h) includes nothing but cglm and the C library;
# - proto/ and client/ include no server header;
# - by the object files' symbols (nm): no server file calls a function defined in a file of a
#   later LAYER (the daemon's layers, lowest first, as the Makefile lists them; server/main.c is
#   above them all), and neither the core, proto nor client calls into the server, nor the core
#   into proto.
# OBJ_DIR is where the objects of the tree's sources are (build/obj), laid out like the sources.
# Prints each breach and exits 1 when there is one.
set -euo pipefail
obj=${1:?usage: layering.sh OBJ_DIR LAYER...}
shift
layers=("$@")
src=${LAYERING_SRC:-.} # the sources' root (the self-test points it elsewhere)
bad=0
breach() {
  echo "layering: $*" >&2
  bad=1
}

# ---- includes ---------------------------------------------------------------------------------
server_headers='#include *"(server\.h|(ops|store|net|stream|cmd|cluster|core)/|handlers\.h|conn\.h)'
for f in "$src"/proto/*.[ch] "$src"/client/*.[ch] "$src"/include/scn_client.h; do
  [ -e "$f" ] || continue
  if grep -nE "$server_headers" "$f" >/dev/null; then
    breach "$f includes a server header: $(grep -nE "$server_headers" "$f" | head -1)"
  fi
done
# The C library's headers, the compiler's, and cglm.
libc='^(cglm/.*|assert|complex|ctype|errno|fenv|float|inttypes|iso646|limits|locale|math|setjmp|signal|stdalign|stdarg|stdatomic|stdbool|stddef|stdint|stdio|stdlib|stdnoreturn|string|strings|tgmath|threads|time|uchar|wchar|wctype|unistd|fcntl|sys/[a-z_]+|[a-z]*mmintrin)\.h$'
for f in "$src"/server/core/*.[ch] "$src"/include/scn_core.h "$src"/include/scn_interest.h; do
  [ -e "$f" ] || continue
  while IFS= read -r line; do
    h=$(sed -E 's/#include *<([^>]*)>.*/\1/' <<<"$line")
    [[ "$h" =~ $libc ]] || breach "$f includes <$h>: the core may use cglm and the C library only"
  done < <(grep -E '^#include *<' "$f" || true)
  while IFS= read -r line; do
    h=$(sed -E 's/#include *"([^"]*)".*/\1/' <<<"$line")
    [[ "$h" == scn_core.h || "$h" == scn_interest.h || ( "$h" != */* && -e "$src/server/core/$h" ) ]] ||
      breach "$f includes \"$h\": the core includes only its own headers"
  done < <(grep -E '^#include *"' "$f" || true)
done

# ---- calls between files, from the objects' symbols ---------------------------------------------
# The rank of an object: core 0, proto 1, client 1, the server's layers 2.., main last.
rank_of() {
  local o=${1#"$obj"/}
  case "$o" in
  server/core/*) echo 0 ;;
  proto/* | client/*) echo 1 ;;
  server/main.o) echo 1000 ;;
  server/*)
    local d
    d=$(dirname "$o")
    for i in "${!layers[@]}"; do
      if [[ "$d" == "${layers[$i]}" ]]; then
        echo $((i + 2))
        return
      fi
    done
    echo "unknown"
    ;;
  *) echo "unknown" ;;
  esac
}

# The objects of the sources as they are (not of files since moved or deleted).
objects=()
while read -r c; do
  o="$obj/${c%.c}.o"
  [ -e "$o" ] || {
    echo "layering: $o is missing (build first)" >&2
    exit 1
  }
  objects+=("$o")
done < <(cd "$src" && find server proto client -name '*.c' 2>/dev/null | sort)
declare -A def_rank def_file
for o in "${objects[@]}"; do
  r=$(rank_of "$o")
  if [[ "$r" == unknown ]]; then
    breach "${o#"$obj"/} is in no layer: add its directory to SERVER_LAYERS in the Makefile"
    continue
  fi
  while read -r sym; do
    def_rank[$sym]=$r
    def_file[$sym]=${o#"$obj"/}
  done < <(nm --defined-only -g "$o" | awk '$2 ~ /^[TDBR]$/ {print $3}')
done
for o in "${objects[@]}"; do
  r=$(rank_of "$o")
  [[ "$r" == unknown ]] && continue
  while read -r sym; do
    d=${def_rank[$sym]:-}
    [ -n "$d" ] || continue # a library's (libuv, cJSON, libc)
    # client and proto share rank 1 but client code is not proto's to call
    caller=${o#"$obj"/}
    callee=${def_file[$sym]}
    if ((d > r)) || { [[ $caller == proto/* && $callee == client/* ]]; } ||
      { ((r < 2)) && ((d >= 2)); }; then
      breach "${caller%.o}.c calls $sym, defined in ${callee%.o}.c, a layer above it"
    fi
  done < <(nm --undefined-only -g "$o" | awk '{print $2}')
done
exit $bad
