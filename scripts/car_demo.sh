#!/usr/bin/env bash
# Builds a car with four wheels with scenectl and drives it round a circle, paced at a tick
# rate: the car goes forward along its heading (its local +x) while the heading turns, and its
# wheels roll about their axles. Each step is one batch: partial sets of the car's translation
# and heading and of each wheel's spin (every part not given keeps its value, so the wheels stay
# where they are on the car), then reads of the car and of its front-left wheel, whose world
# position and rotation are printed as one JSON line per step (the parts of the world matrices,
# world_trs: the script does no matrix arithmetic). On exit, and on Ctrl-C, the car's world is
# destroyed with its entities ("entities": true), so nothing is left behind.
#   scripts/car_demo.sh [STEPS] [--hz HZ] [--speed UNITS_PER_S] [--turn RADIANS_PER_S]
#     STEPS  steps to drive (default 0: until interrupted); HZ steps per second (default 30);
#     speed 4, turn 0.5: a circle of radius 8 in about 12.6 s.
#   The daemon's address comes from SCENED_HOST / SCENED_PORT; scenectl from SCENECTL.
set -euo pipefail
ctl=${SCENECTL:-"$(dirname "$0")/../build/scenectl"}
steps=0 hz=30 speed=4 turn=0.5
while (($#)); do
  case $1 in
  --hz) hz=$2 && shift ;;
  --speed) speed=$2 && shift ;;
  --turn) turn=$2 && shift ;;
  --steps) steps=$2 && shift ;;
  [0-9]*) steps=$1 ;;
  *)
    echo "usage: $0 [STEPS] [--hz HZ] [--speed UNITS_PER_S] [--turn RADIANS_PER_S]" >&2
    exit 2
    ;;
  esac
  shift
done
world="car-demo-$$"
made=""

# The world goes with everything in it, however the script ends; jq's last lines are out first.
finish() {
  status=$?
  trap - EXIT INT TERM
  [[ -n $made ]] && "$ctl" world.destroy world="$world" entities=true >/dev/null || true
  if [[ -n ${out:-} ]]; then
    exec {out}>&-
    wait "$jq_pid" || true
  fi
  exit "$status"
}
trap finish EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

"$ctl" world.create world="$world" >/dev/null
made=yes
car=$("$ctl" transform.create world="$world" name=car | jq -r .entity)
wheels=()
for wheel in fl:1.0,-0.5 fr:1.0,0.5 rl:-1.0,-0.5 rr:-1.0,0.5; do
  name=${wheel%%:*}
  xz=${wheel#*:}
  wheels+=("$("$ctl" transform.create world="$world" parent="$car" name="wheel_$name" \
    "t=[${xz%,*},0.3,${xz#*,}]" | jq -r .entity)")
done

# One jq for the whole drive: each batch's answer becomes a line with its step number.
exec {out}> >(jq -nc --unbuffered 'foreach inputs as $r (0; . + 1;
  {step: ., car: $r.results[5].world_trs.t, car_r: $r.results[5].world_trs.r,
   wheel_fl: $r.results[6].world_trs.t, wheel_fl_r: $r.results[6].world_trs.r})')
jq_pid=$!

# Step k's batch, at time k / hz: on the circle x = R sin(a), z = R (cos(a) - 1) with
# R = speed / turn and heading a = turn * t, the car's velocity (cos a, 0, -sin a) is its local
# +x turned by a about y, the quaternion [0, sin(a/2), 0, cos(a/2)]; the wheels (radius 0.3)
# roll forward, about -z.
ops() {
  awk -v k="$1" -v hz="$hz" -v v="$speed" -v w="$turn" -v car="$car" -v wheels="${wheels[*]}" \
    -v probe="${wheels[0]}" 'BEGIN {
      t = k / hz; a = w * t
      if (w == 0) { x = v * t; z = 0 } else { x = v / w * sin(a); z = v / w * (cos(a) - 1) }
      spin = -v * t / 0.3
      printf "[{\"cmd\":\"transform.set_local\",\"entity\":%s,\"partial\":true,", car
      printf "\"t\":[%.6f,0,%.6f],\"r\":[0,%.8f,0,%.8f]}", x, z, sin(a / 2), cos(a / 2)
      n = split(wheels, ws, " ")
      for (i = 1; i <= n; i++)
        printf ",{\"cmd\":\"transform.set_local\",\"entity\":%s,\"partial\":true,\"r\":[0,0,%.8f,%.8f]}",
          ws[i], sin(spin / 2), cos(spin / 2)
      printf ",{\"cmd\":\"transform.get\",\"entity\":%s,\"trs\":true}", car
      printf ",{\"cmd\":\"transform.get\",\"entity\":%s,\"trs\":true}]\n", probe
    }'
}

# Microseconds on a clock that does not fork (bash 5), else date's.
now_us() {
  if [[ -n ${EPOCHREALTIME:-} ]]; then
    echo "${EPOCHREALTIME/[.,]/}"
  else
    date +%s%6N
  fi
}

# Paced against the start, not step by step, so that the rate does not drift.
period_us=$(awk -v hz="$hz" 'BEGIN { printf "%d", 1e6 / hz }')
start=$(now_us)
for ((k = 1; steps == 0 || k <= steps; k++)); do
  "$ctl" batch world="$world" "ops=$(ops "$k")" >&"$out"
  wait_us=$((start + k * period_us - $(now_us)))
  if ((wait_us > 0)); then
    sleep "$(printf '%d.%06d' $((wait_us / 1000000)) $((wait_us % 1000000)))"
  fi
done
