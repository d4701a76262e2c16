# shellcheck shell=bash disable=SC2034 # (etcd_pid, daemon_pid, daemon_port: for the scripts)
# Sourced by the cluster's benchmarks (bench-cluster.sh, bench-replicas*.sh, bench-catchup.sh,
# bench-switchover.sh, bench-takeover.sh): their work directory, local etcd, daemons and
# cleanup. BUILD names the directory of scened and scenectl.

# $1 the script's name: a temporary work directory in $work (kept and printed with KEEP=1);
# at exit, kill -9 of every process in pids, then the directory removed.
bench_init() {
  work=$(mktemp -d)
  pids=()
  trap bench_cleanup EXIT
  if [[ -n "${KEEP:-}" ]]; then echo "$1: work in $work" >&2; fi
}
bench_cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  [[ -n "${KEEP:-}" ]] || rm -rf "$work"
}

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
now_ms() { date +%s%3N; }
median() { sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }

# $1 member name, $2 data directory, $3 log: starts a one-member etcd on free ports (etcd_url,
# etcd_pid, in pids too) and waits until it is healthy, 10 s at most.
bench_etcd() {
  local eport epeer
  eport=$(free_port)
  epeer=$(free_port)
  etcd --name "$1" --data-dir "$2" --listen-client-urls "http://127.0.0.1:$eport" \
    --advertise-client-urls "http://127.0.0.1:$eport" --listen-peer-urls "http://127.0.0.1:$epeer" \
    --initial-advertise-peer-urls "http://127.0.0.1:$epeer" --initial-cluster "$1=http://127.0.0.1:$epeer" \
    --heartbeat-interval 10 --election-timeout 100 >"$3" 2>&1 &
  etcd_pid=$!
  pids+=($!)
  etcd_url="http://127.0.0.1:$eport"
  for _ in $(seq 200); do curl -sf "$etcd_url/health" >/dev/null 2>&1 && break; sleep 0.05; done
}

# $1 log, then scened's flags: starts scened (daemon_pid, in pids too) and waits, 10 s at most,
# until its log says on which port it listens (daemon_port).
bench_daemon() {
  "$BUILD/scened" "${@:2}" 2>"$1" &
  daemon_pid=$!
  pids+=($!)
  for _ in $(seq 200); do grep -qs 'listening on' "$1" && break; sleep 0.05; done
  daemon_port=$(grep -o 'listening on 127.0.0.1:[0-9]*' "$1" | head -1 | cut -d: -f2)
}

# $1 a count, then the daemons' ports: succeeds once each of them lists $1 live nodes in
# cluster.nodes, fails after 20 s.
bench_wait_nodes() {
  local p all
  for _ in $(seq 400); do
    all=1
    for p in "${@:2}"; do
      [[ $("$BUILD/scenectl" --port "$p" cluster.nodes 2>/dev/null | grep -o '"node"' | wc -l) -eq $1 ]] || all=0
    done
    ((all)) && return 0
    sleep 0.05
  done
  return 1
}
