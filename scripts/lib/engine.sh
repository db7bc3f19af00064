# Shared by scripts/kafka.sh and scripts/redis.sh (sourced; they define log()).

# terminate_engine PID SECONDS: ask the process to stop, wait up to SECONDS for a clean exit, then kill it.
terminate_engine() {
  local pid="$1" seconds="$2"
  kill "$pid" 2>/dev/null || true
  for _ in $(seq 1 $((seconds * 10))); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  kill -0 "$pid" 2>/dev/null && kill -9 "$pid"
  log "stopped (pid $pid)"
}
