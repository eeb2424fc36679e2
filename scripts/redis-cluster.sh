#!/usr/bin/env bash
# Starts or stops N redis-server nodes on 127.0.0.1 only, for kvtier's G4
# tests and CI (docs/shared-tier.md). Ports PORT .. PORT+N-1 (a cluster's
# bus ports are those + 10000). N > 1: a Redis Cluster of N masters
# (redis-cli --cluster create), each serving on with a shard down.
#   redis-cluster.sh start N PORT [MAXMEMORY]   # prints the nodes' URLs, comma-separated
#   redis-cluster.sh stop N PORT                # stops them by PID, removes their directory
#   redis-cluster.sh kill PORT                  # SIGKILL one node (a crashed shard)
# Nodes live in $KVTIER_REDIS_DIR (default ${TMPDIR:-/tmp}/kvtier-redis-PORT),
# no persistence; MAXMEMORY (default 256mb) with allkeys-lru: Redis' own
# eviction is G4's capacity policy.
set -euo pipefail
usage() { echo "usage: $0 start N PORT [MAXMEMORY] | stop N PORT | kill PORT" >&2; exit 2; }
(($# >= 2)) || usage
action=$1
number() { [[ $1 =~ ^[0-9]+$ ]] || { echo "$0: '$1' is not a number" >&2; exit 2; }; }

if [[ $action == kill ]]; then
  number "$2"
  pidfile="${KVTIER_REDIS_DIR:-${TMPDIR:-/tmp}/kvtier-redis-$2}/$2.pid"
  # A node's pid file is in its base port's directory: look in every kvtier one.
  for candidate in "$pidfile" "${TMPDIR:-/tmp}"/kvtier-redis-*/"$2.pid"; do
    if [[ -f $candidate ]]; then kill -9 "$(cat "$candidate")"; rm -f "$candidate"; exit 0; fi
  done
  echo "$0: no node on port $2" >&2
  exit 1
fi

(($# >= 3)) || usage
nodes=$2
base=$3
number "$nodes"
number "$base"
((nodes >= 1 && nodes <= 16)) || { echo "$0: N must be in 1..16" >&2; exit 2; }
((base >= 1024 && base + nodes - 1 <= 55535)) || { echo "$0: PORT must leave room for the bus ports" >&2; exit 2; }
dir="${KVTIER_REDIS_DIR:-${TMPDIR:-/tmp}/kvtier-redis-$base}"

stop() {
  for ((i = 0; i < nodes; i++)); do
    local pidfile="$dir/$((base + i)).pid"
    [[ -f $pidfile ]] || continue
    local pid
    pid=$(cat "$pidfile")
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
  done
  rm -rf "$dir"
}

case $action in
  stop)
    stop
    ;;
  start)
    maxmemory=${4:-256mb}
    command -v redis-server >/dev/null || { echo "$0: redis-server is missing (scripts/install-deps.sh)" >&2; exit 1; }
    if [[ -d $dir ]]; then stop; fi
    mkdir -p "$dir"
    trap 'stop' ERR
    urls=()
    for ((i = 0; i < nodes; i++)); do
      port=$((base + i))
      args=(--port "$port" --bind 127.0.0.1 --protected-mode yes --daemonize yes --dir "$dir"
            --pidfile "$dir/$port.pid" --logfile "$dir/$port.log" --save "" --appendonly no
            --maxmemory "$maxmemory" --maxmemory-policy allkeys-lru)
      if ((nodes > 1)); then
        # A shard that dies leaves the others serving their slots (no replicas here).
        args+=(--cluster-enabled yes --cluster-config-file "$dir/nodes-$port.conf" --cluster-node-timeout 2000
               --cluster-require-full-coverage no)
      fi
      redis-server "${args[@]}"
      urls+=("redis://127.0.0.1:$port")
    done
    for ((i = 0; i < nodes; i++)); do
      port=$((base + i))
      # Up to 20 s: a loaded machine (sanitizer suites two at a time on 2 cores) starts it slowly.
      for _ in $(seq 400); do
        redis-cli -h 127.0.0.1 -p "$port" ping 2>/dev/null | grep -q PONG && break
        sleep 0.05
      done
      redis-cli -h 127.0.0.1 -p "$port" ping | grep -q PONG || {
        echo "$0: node $port did not start; its log:" >&2
        tail -n 5 "$dir/$port.log" >&2 || true
        exit 1
      }
    done
    if ((nodes > 1)); then
      members=()
      for ((i = 0; i < nodes; i++)); do members+=("127.0.0.1:$((base + i))"); done
      redis-cli --cluster create "${members[@]}" --cluster-replicas 0 --cluster-yes >"$dir/create.log" 2>&1 ||
        { cat "$dir/create.log" >&2; exit 1; }
      for _ in $(seq 200); do
        ok=1
        for ((i = 0; i < nodes; i++)); do
          redis-cli -h 127.0.0.1 -p "$((base + i))" cluster info | grep -q "cluster_state:ok" || ok=0
        done
        ((ok)) && break
        sleep 0.05
      done
      ((ok)) || { echo "$0: the cluster did not come up" >&2; exit 1; }
    fi
    trap - ERR
    (IFS=,; echo "${urls[*]}")
    ;;
  *)
    usage
    ;;
esac
