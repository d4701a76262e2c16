#!/usr/bin/env bash
# An example cluster on one machine: a local etcd and three daemons, each with a data directory
# of its own ($DATA/node0, node1, node2) and --replicas $REPLICAS (1 by default): every group is
# kept live by its owner and a follower on another daemon, which takes it over from memory when
# the owner dies. REPLICAS=0 runs the shared-directory mode instead (the three share $DATA).
# Ctrl-C (or SIGTERM, or SIGHUP) stops them all: the daemons first, each waited for by its pid
# (each saves its groups and revokes its lease, which needs etcd), then etcd.
#
#   scripts/cluster.sh            (make cluster does the same after building)
#   BASE_PORT=7878 ETCD_PORT=2379 DATA=build/cluster-data TTL=5 REPLICAS=1 scripts/cluster.sh
#
# Node n listens on BASE_PORT + 2n (protocol) and BASE_PORT + 2n + 1 (HTTP); etcd on ETCD_PORT
# (clients) and ETCD_PORT + 1 (peers). A start that fails (a port in use, a process that
# exits) prints what that process said and exits 1, having stopped the rest.
set -euo pipefail
# --help: the comment above; anything else is a mistake (the settings are environment variables).
if (($#)); then
  if [ "$1" = -h ] || [ "$1" = --help ]; then
    sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"
    exit 0
  fi
  echo "cluster.sh: no arguments (settings are environment variables; --help says which)" >&2
  exit 2
fi
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
BASE_PORT=${BASE_PORT:-7878}
ETCD_PORT=${ETCD_PORT:-2379}
DATA=${DATA:-build/cluster-data}
TTL=${TTL:-5}
REPLICAS=${REPLICAS:-1}
RUN=${RUN:-build/cluster-run}
START_SECONDS=${START_SECONDS:-30}
[[ $REPLICAS =~ ^[0-2]$ ]] || { echo "cluster.sh: REPLICAS must be a number (0 to 2), not \"$REPLICAS\"" >&2; exit 1; }
mkdir -p "$DATA" "$RUN"
# With replicas each daemon has its own directory; without, the three share one.
data_of() {
  if ((REPLICAS > 0)); then echo "$DATA/node$1"; else echo "$DATA"; fi
}
command -v etcd >/dev/null || { echo "cluster.sh: etcd is not installed (scripts/install-deps.sh)" >&2; exit 1; }
command -v setsid >/dev/null || { echo "cluster.sh: setsid is not installed (util-linux)" >&2; exit 1; }

etcd_pid=
daemon_pids=()
stopping=

# Waits until the child pid has exited (a signal interrupts wait; the loop waits again).
reap() {
  while kill -0 "$1" 2>/dev/null; do wait "$1" 2>/dev/null || true; done
}

# The daemons, then etcd. A second Ctrl-C while the daemons release makes them exit at once.
stop() {
  [ -n "$stopping" ] && return
  stopping=1
  trap 'kill -TERM "${daemon_pids[@]}" 2>/dev/null || true' INT TERM HUP
  local pid
  for pid in "${daemon_pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${daemon_pids[@]}"; do reap "$pid"; done
  if [ -n "$etcd_pid" ]; then
    kill -TERM "$etcd_pid" 2>/dev/null || true
    reap "$etcd_pid"
  fi
}
# A deliberate stop: nothing went wrong.
on_signal() {
  stop
  exit 0
}
trap on_signal INT TERM HUP
trap stop EXIT

# A process of the start exited: what it said last, and the start fails (EXIT stops the rest).
start_failed() {
  echo "cluster.sh: $1 exited while starting (its log: $2):" >&2
  tail -n 5 "$2" | sed 's/^/  /' >&2
  exit 1
}

# Waits (START_SECONDS at most) until `check` succeeds, failing the start as soon as the
# process pid exits: a port another program answers on is never taken for this one's.
wait_started() {
  local name=$1 pid=$2 log=$3 check=$4
  local deadline=$((SECONDS + START_SECONDS))
  while ! $check; do
    kill -0 "$pid" 2>/dev/null || start_failed "$name" "$log"
    if ((SECONDS >= deadline)); then
      echo "cluster.sh: $name did not start within $START_SECONDS s (its log: $log)" >&2
      exit 1
    fi
    sleep 0.1
  done
}

# Each log is emptied here, not by the child's redirection: a line of an earlier run read before
# the child truncates the file would name an address this start does not own.
: >"$RUN/etcd.log"
# Each child in a session of its own: a Ctrl-C at the terminal reaches only this script, which
# stops them in order (a daemon given a second signal exits without releasing its groups).
setsid etcd --name local --data-dir "$RUN/etcd" \
  --listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
  --listen-peer-urls "http://127.0.0.1:$((ETCD_PORT + 1))" \
  --initial-advertise-peer-urls "http://127.0.0.1:$((ETCD_PORT + 1))" \
  --initial-cluster "local=http://127.0.0.1:$((ETCD_PORT + 1))" \
  --heartbeat-interval 50 --election-timeout 500 >>"$RUN/etcd.log" 2>&1 &
etcd_pid=$!
# This etcd serves its port (etcd 3.4 and 3.5 say so differently) and answers.
etcd_ready() {
  grep -Eq "serving (insecure client requests on |client traffic insecurely.*\"address\":\")127\.0\.0\.1:$ETCD_PORT\b" \
    "$RUN/etcd.log" && curl -sf --max-time 2 "http://127.0.0.1:$ETCD_PORT/health" >/dev/null 2>&1
}
wait_started etcd "$etcd_pid" "$RUN/etcd.log" etcd_ready

# Each daemon's staging view may open the others' /ws (a world is opened on its owner).
origins=""
for n in 0 1 2; do origins+="${origins:+,}http://127.0.0.1:$((BASE_PORT + 2 * n + 1))"; done
for n in 0 1 2; do
  port=$((BASE_PORT + 2 * n))
  : >"$RUN/node$n.log"
  mkdir -p "$(data_of $n)"
  setsid "$BUILD/scened" --listen "127.0.0.1:$port" --http "127.0.0.1:$((port + 1))" \
    --cluster "http://127.0.0.1:$ETCD_PORT" --node "node$n" --data "$(data_of $n)" --lease-ttl "$TTL" \
    --replicas "$REPLICAS" --ws-origins "$origins" >>"$RUN/node$n.log" 2>&1 &
  daemon_pids+=($!)
done

# The address a daemon logged for what ("listening", "http"), empty until it has.
logged() {
  grep -o "msg=\"$2 on [^\"]*\"" "$1" 2>/dev/null | head -n 1 | sed 's/.* on //; s/"$//' || true
}
# The daemon whose log is $node_log is ready, asked on the address it logged.
node_ready() {
  local http
  http=$(logged "$node_log" http)
  [ -n "$http" ] && curl -gsf --max-time 2 "http://$http/readyz" >/dev/null 2>&1
}
protocol=()
view=()
for n in 0 1 2; do
  node_log="$RUN/node$n.log"
  wait_started "node$n" "${daemon_pids[$n]}" "$node_log" node_ready
  protocol+=("$(logged "$node_log" listening)")
  view+=("$(logged "$node_log" http)")
done

# With replicas a group moves to one of its followers (a switchover; the others have no copy).
if ((REPLICAS > 0)); then
  kept="each with its own data directory ($DATA/node0, node1, node2) and $REPLICAS follower(s) per group"
  move_to="node1   # a follower, as world.list names it"
else
  kept="sharing the data directory $DATA (no replicas)"
  move_to=node2
fi
cat <<EOT
A cluster of three daemons and etcd (http://127.0.0.1:$ETCD_PORT), $kept; logs in $RUN/.
  node0: protocol ${protocol[0]}   staging view http://${view[0]}/
  node1: protocol ${protocol[1]}   staging view http://${view[1]}/
  node2: protocol ${protocol[2]}   staging view http://${view[2]}/
Try:
  $BUILD/scenectl --port $BASE_PORT world.create world=match1.main node=auto
  $BUILD/scenectl --port $((BASE_PORT + 2)) transform.create world=match1.main name=car
  $BUILD/scenectl --port $((BASE_PORT + 4)) cluster.nodes
  $BUILD/scenectl --port $BASE_PORT world.list cluster=true   # owners, followers, in-sync sets
  $BUILD/scenectl --port $BASE_PORT world.move world=match1.main to=$move_to
Any daemon answers for any world: scenectl follows MOVED to the owner. The staging view's
Nodes panel shows each group's owner, followers and their lag. Ctrl-C stops everything.
EOT
# Only a child that ends on its own gets here: a signal runs on_signal, which exits.
wait -n "${daemon_pids[@]}" "$etcd_pid" || true
echo "cluster.sh: a process ended; stopping the rest (see $RUN/)" >&2
exit 1
