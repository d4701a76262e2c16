#!/usr/bin/env bash
# An example cluster on one machine: a local etcd and three daemons sharing one data directory.
# Ctrl-C (or SIGTERM) stops them all: the daemons release their groups, then etcd stops.
#
#   scripts/cluster.sh            (make cluster does the same after building)
#   BASE_PORT=7878 ETCD_PORT=2379 DATA=build/cluster-data TTL=5 scripts/cluster.sh
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
BASE_PORT=${BASE_PORT:-7878}
ETCD_PORT=${ETCD_PORT:-2379}
DATA=${DATA:-build/cluster-data}
TTL=${TTL:-5}
RUN=${RUN:-build/cluster-run}
mkdir -p "$DATA" "$RUN"
command -v etcd >/dev/null || { echo "cluster.sh: etcd is not installed (scripts/install-deps.sh)" >&2; exit 1; }

pids=()
stop() {
  trap - INT TERM EXIT
  # The daemons first (each saves and releases its groups), then etcd.
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do kill -TERM "${pids[$i]}" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap stop INT TERM EXIT

etcd --name local --data-dir "$RUN/etcd" \
  --listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
  --listen-peer-urls "http://127.0.0.1:$((ETCD_PORT + 1))" \
  --initial-advertise-peer-urls "http://127.0.0.1:$((ETCD_PORT + 1))" \
  --initial-cluster "local=http://127.0.0.1:$((ETCD_PORT + 1))" \
  --heartbeat-interval 50 --election-timeout 500 >"$RUN/etcd.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do
  curl -sf "http://127.0.0.1:$ETCD_PORT/health" >/dev/null 2>&1 && break
  sleep 0.1
done

# Each daemon's staging view may open the others' /ws (a world is opened on its owner).
origins=""
for n in 0 1 2; do origins+="${origins:+,}http://127.0.0.1:$((BASE_PORT + 2 * n + 1))"; done
for n in 0 1 2; do
  port=$((BASE_PORT + 2 * n))
  "$BUILD/scened" --listen "127.0.0.1:$port" --http "127.0.0.1:$((port + 1))" \
    --cluster "http://127.0.0.1:$ETCD_PORT" --node "node$n" --data "$DATA" --lease-ttl "$TTL" \
    --ws-origins "$origins" >"$RUN/node$n.log" 2>&1 &
  pids+=($!)
done
for n in 0 1 2; do
  for _ in $(seq 100); do
    curl -sf "http://127.0.0.1:$((BASE_PORT + 2 * n + 1))/readyz" >/dev/null 2>&1 && break
    sleep 0.1
  done
done

cat <<EOT
A cluster of three daemons and etcd (http://127.0.0.1:$ETCD_PORT), data in $DATA, logs in $RUN/.
  node0: protocol 127.0.0.1:$BASE_PORT   staging view http://127.0.0.1:$((BASE_PORT + 1))/
  node1: protocol 127.0.0.1:$((BASE_PORT + 2))   staging view http://127.0.0.1:$((BASE_PORT + 3))/
  node2: protocol 127.0.0.1:$((BASE_PORT + 4))   staging view http://127.0.0.1:$((BASE_PORT + 5))/
Try:
  $BUILD/scenectl --port $BASE_PORT world.create world=match1.main node=auto
  $BUILD/scenectl --port $((BASE_PORT + 2)) transform.create world=match1.main name=car
  $BUILD/scenectl --port $((BASE_PORT + 4)) cluster.nodes
  $BUILD/scenectl --port $BASE_PORT world.list cluster=true
  $BUILD/scenectl --port $BASE_PORT world.move world=match1.main to=node2
Any daemon answers for any world: scenectl follows MOVED to the owner. Ctrl-C stops everything.
EOT
wait -n "${pids[@]}" || true
echo "cluster.sh: a process ended; stopping the rest (see $RUN/)" >&2
