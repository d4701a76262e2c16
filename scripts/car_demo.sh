#!/usr/bin/env bash
# Builds a car with four wheels with scenectl, drives it in a loop, and prints where the
# front-left wheel is in the world after each step (jq picks the translation out of the
# column-major matrix: elements 12, 13, 14).
#   scripts/car_demo.sh [STEPS]       (daemon address from SCENED_HOST / SCENED_PORT)
set -euo pipefail
ctl=${SCENECTL:-"$(dirname "$0")/../build/scenectl"}
steps=${1:-10}
world="car-demo-$$"

"$ctl" world.create world="$world" >/dev/null
car=$("$ctl" transform.create world="$world" name=car | jq -r .entity)
for wheel in fl:1.0,-0.5 fr:1.0,0.5 rl:-1.0,-0.5 rr:-1.0,0.5; do
  name=${wheel%%:*}
  xz=${wheel#*:}
  "$ctl" transform.create world="$world" parent="$car" name="wheel_$name" "t=[${xz%,*},0.3,${xz#*,}]" >/dev/null
done
wheel=$("$ctl" transform.find world="$world" path=car/wheel_fl | jq -r .entity)

# Drive: each step moves the car 1 unit forward along x and turns it a little about y.
for step in $(seq 1 "$steps"); do
  angle=$(awk -v s="$step" 'BEGIN { printf "%.6f", s * 0.1 }')
  qy=$(awk -v a="$angle" 'BEGIN { printf "%.8f", sin(a / 2) }')
  qw=$(awk -v a="$angle" 'BEGIN { printf "%.8f", cos(a / 2) }')
  "$ctl" transform.set_local world="$world" entity="$car" "t=[$step,0,0]" "r=[0,$qy,0,$qw]" >/dev/null
  "$ctl" transform.get world="$world" entity="$wheel" |
    jq -c --argjson step "$step" '{step: $step, wheel_fl: [.world[12], .world[13], .world[14]]}'
done

"$ctl" world.destroy world="$world" >/dev/null
"$ctl" entity.destroy entity="$car" >/dev/null
