#!/usr/bin/env bash
# The module-state check of make layering. Usage: module-state.sh OBJ_DIR DIR...
#
# The objects of the sources in each DIR (OBJ_DIR laid out like the sources) define no writable
# variable outside a function's frame: no file-scope or function-scope static, no global, in
# .data, .bss, their thread-local forms or common. A module keeps its state in a struct reached
# from the server handle. Constant tables are fine: those holding pointers land in
# .data.rel.ro (which nm shows as d, though the loader makes it read-only), the others in
# .rodata. Prints each variable found and exits 1 when there is one.
set -euo pipefail
obj=${1:?usage: module-state.sh OBJ_DIR DIR...}
shift
bad=0
for dir in "$@"; do
  shopt -s nullglob
  objects=("$obj/$dir"/*.o)
  shopt -u nullglob
  if ((${#objects[@]} == 0)); then
    echo "module-state: no objects in $obj/$dir (build first)" >&2
    exit 1
  fi
  for o in "${objects[@]}"; do
    # objdump -t: ADDRESS, seven columns of flags (d: a section's symbol, f: a file's), SECTION,
    # SIZE, NAME
    while read -r section name; do
      echo "module-state: ${o#"$obj"/} keeps $name in $section: move it into the module's struct" >&2
      bad=1
    done < <(objdump -t "$o" | awk '
      /^[0-9a-f]+ / {
        flags = substr($0, length($1) + 2, 7)
        split(substr($0, length($1) + 10), f, /[ \t]+/)
        s = f[1]
        writable = s ~ /^\.(data|bss|tdata|tbss)($|\.)/ || s == "*COM*"
        if (writable && s !~ /^\.data\.rel\.ro($|\.)/ && flags !~ /[df]/)
          print s, f[length(f)]
      }')
  done
done
exit $bad
