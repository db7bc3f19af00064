#!/usr/bin/env bash
# Local Redis for tests and benchmarks, on loopback only, without persistence.
# Usage: scripts/redis.sh start|stop|status   (REDIS_PORT, default 6379)
# Installs Debian's redis-server when missing (needs root). State lives in .cache/run/redis-<port>/.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
port="${REDIS_PORT:-6379}"
run_dir="$root/.cache/run/redis-$port"
pid_file="$run_dir/redis.pid"

# shellcheck source=lib/engine.sh
source "$root/scripts/lib/engine.sh"

log() { echo "redis.sh: $*" >&2; }

ensure_installed() {
  command -v redis-server >/dev/null && return
  log "redis-server missing, installing it with apt-get"
  # The lock timeout waits for a concurrent apt run instead of failing at once.
  apt-get -o DPkg::Lock::Timeout=120 update -qq
  DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=120 install -y -qq redis-server >/dev/null
}

our_pid() {
  [[ -f "$pid_file" ]] || return 1
  local pid
  pid="$(<"$pid_file")"
  # A stale pid file may name a recycled pid: only a live redis-server counts as ours.
  [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null && [[ "$(cat "/proc/$pid/comm" 2>/dev/null)" == redis-server ]] || return 1
  echo "$pid"
}

answers_ping() {
  [[ "$(redis-cli -h 127.0.0.1 -p "$port" ping 2>/dev/null)" == PONG ]]
}

start() {
  local pid
  ensure_installed
  if pid="$(our_pid)"; then
    answers_ping || { log "pid $pid runs but does not answer PING on 127.0.0.1:$port"; exit 1; }
    log "already running (pid $pid) on 127.0.0.1:$port"
    return
  fi
  if answers_ping; then
    log "127.0.0.1:$port is served by a Redis this script did not start; pick another REDIS_PORT"
    exit 1
  fi
  rm -rf "$run_dir"
  mkdir -p "$run_dir"
  # No RDB snapshots and no AOF: test data is disposable.
  redis-server --bind 127.0.0.1 --port "$port" --protected-mode yes \
    --daemonize yes --pidfile "$pid_file" --logfile "$run_dir/redis.log" --dir "$run_dir" \
    --save '' --appendonly no
  for _ in $(seq 1 100); do
    if answers_ping && our_pid >/dev/null; then
      log "started (pid $(<"$pid_file")) on 127.0.0.1:$port"
      return
    fi
    sleep 0.1
  done
  log "no PING answer within 10 s; see $run_dir/redis.log:"
  tail -n 20 "$run_dir/redis.log" >&2 || true
  exit 1
}

stop() {
  local pid
  if pid="$(our_pid)"; then
    terminate_engine "$pid" 10
  fi
  # The log stays for a post-mortem; the next start clears it.
  rm -f "$pid_file"
}

status() {
  local pid
  if pid="$(our_pid)" && answers_ping; then
    echo "redis running (pid $pid) on 127.0.0.1:$port"
  else
    echo "redis not running on 127.0.0.1:$port (by this script)"
    return 1
  fi
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  status) status ;;
  *) echo "usage: $0 start|stop|status" >&2; exit 2 ;;
esac
