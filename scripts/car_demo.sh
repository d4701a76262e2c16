#!/usr/bin/env bash
# Builds a car with four wheels with scenectl, drives it in a loop, and prints where the
# front-left wheel is in the world after each step, and which way it faces. Each step is one
# batch of partial sets: the car's translation and heading, and each wheel's spin about its
# axle; every part not given keeps its value, so the wheels stay where they are on the car. The
# position and rotation come from the parts of the wheel's world matrix (world_trs): the script
# does no matrix arithmetic.
#   scripts/car_demo.sh [STEPS]       (daemon address from SCENED_HOST / SCENED_PORT)
set -euo pipefail
ctl=${SCENECTL:-"$(dirname "$0")/../build/scenectl"}
steps=${1:-10}
world="car-demo-$$"

"$ctl" world.create world="$world" >/dev/null
car=$("$ctl" transform.create world="$world" name=car | jq -r .entity)
wheels=()
for wheel in fl:1.0,-0.5 fr:1.0,0.5 rl:-1.0,-0.5 rr:-1.0,0.5; do
  name=${wheel%%:*}
  xz=${wheel#*:}
  wheels+=("$("$ctl" transform.create world="$world" parent="$car" name="wheel_$name" \
    "t=[${xz%,*},0.3,${xz#*,}]" | jq -r .entity)")
done
wheel=$("$ctl" transform.find world="$world" path=car/wheel_fl | jq -r .entity)

# A rotation of angle a about the unit axis (x,y,z) is the quaternion
# [x sin(a/2), y sin(a/2), z sin(a/2), cos(a/2)].
quat() { # axis x y z, angle
  awk -v x="$1" -v y="$2" -v z="$3" -v a="$4" \
    'BEGIN { s = sin(a / 2); printf "[%.8f,%.8f,%.8f,%.8f]", x * s, y * s, z * s, cos(a / 2) }'
}

# Drive: each step moves the car 1 unit forward along x and turns it a little about y; the
# wheels roll half a radian about their axles (z).
for step in $(seq 1 "$steps"); do
  heading=$(quat 0 1 0 "$(awk -v s="$step" 'BEGIN { print s * 0.1 }')")
  spin=$(quat 0 0 1 "$(awk -v s="$step" 'BEGIN { print s * 0.5 }')")
  ops="{\"cmd\":\"transform.set_local\",\"entity\":$car,\"partial\":true,\"t\":[$step,0,0],\"r\":$heading}"
  for w in "${wheels[@]}"; do
    ops="$ops,{\"cmd\":\"transform.set_local\",\"entity\":$w,\"partial\":true,\"r\":$spin}"
  done
  "$ctl" batch world="$world" "ops=[$ops]" >/dev/null
  "$ctl" transform.get world="$world" entity="$wheel" trs=true |
    jq -c --argjson step "$step" '{step: $step, wheel_fl: .world_trs.t, wheel_fl_r: .world_trs.r}'
done

"$ctl" world.destroy world="$world" >/dev/null
for e in "$car" "${wheels[@]}"; do "$ctl" entity.destroy entity="$e" >/dev/null; done
