#!/usr/bin/env bash
# Local single-node Kafka (KRaft, broker+controller in one JVM) for tests and benchmarks, on loopback.
# Usage: scripts/kafka.sh start|stop|status|restart
#   KAFKA_PORT (default 9092), KAFKA_CONTROLLER_PORT (default KAFKA_PORT+1),
#   KAFKA_HEAP (default -Xmx512m), KAFKA_START_TIMEOUT seconds (default 90).
# The broker jars are fetched once by Maven (scripts/kafka/pom.xml) into .cache/kafka; later starts
# need no network. Each start formats fresh storage in .cache/run/kafka-<port>/; stop removes it.
# restart is a crash and a restart on the same storage, what a crash torture needs: kill -9 of the JVM,
# then a new one on the data the dead one left (its unclean-shutdown recovery included).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
port="${KAFKA_PORT:-9092}"
controller_port="${KAFKA_CONTROLLER_PORT:-$((port + 1))}"
heap="${KAFKA_HEAP:--Xmx512m}"
start_timeout="${KAFKA_START_TIMEOUT:-90}"
pom="$root/scripts/kafka/pom.xml"
cache_dir="$root/.cache/kafka"
lib_dir="$cache_dir/lib"
stamp="$lib_dir/.pom.sha1"
run_dir="$root/.cache/run/kafka-$port"
pid_file="$run_dir/kafka.pid"
data_dir="$run_dir/data"

# shellcheck source=lib/engine.sh
source "$root/scripts/lib/engine.sh"

log() { echo "kafka.sh: $*" >&2; }

# Fetches again only when the pom changed since the last complete fetch.
ensure_jars() {
  local want
  want="$(sha1sum "$pom" | cut -d' ' -f1)"
  [[ -f "$stamp" && "$(<"$stamp")" == "$want" ]] && return
  log "fetching Kafka jars with Maven into $lib_dir (once)"
  local began=$SECONDS
  local tmp_lib="$cache_dir/lib.partial"
  rm -rf "$tmp_lib"
  mkdir -p "$cache_dir"
  mvn -B -ntp -Dstyle.color=never -f "$pom" -Dmaven.repo.local="$cache_dir/m2" \
    org.apache.maven.plugins:maven-dependency-plugin:3.8.1:copy-dependencies \
    -DincludeScope=runtime -DoutputDirectory="$tmp_lib" >"$cache_dir/fetch.log" 2>&1 \
    || { log "Maven fetch failed, see $cache_dir/fetch.log:"; tail -n 30 "$cache_dir/fetch.log" >&2; exit 1; }
  echo "$want" >"$tmp_lib/.pom.sha1"
  # Swap in whole so an interrupted fetch never leaves a half-filled lib that looks complete.
  rm -rf "$lib_dir"
  mv "$tmp_lib" "$lib_dir"
  log "fetched in $((SECONDS - began)) s"
}

our_pid() {
  [[ -f "$pid_file" ]] || return 1
  local pid
  pid="$(<"$pid_file")"
  # A stale pid file may name a recycled pid: only a live kafka.Kafka JVM counts as ours.
  [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null && tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q ' kafka\.Kafka ' || return 1
  echo "$pid"
}

port_open() {
  (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

java_cmd=(java -cp "$lib_dir/*" -Djava.awt.headless=true -Dlog4j.configuration="file:$run_dir/log4j.properties")

write_config() {
  cat >"$run_dir/server.properties" <<EOF
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:$controller_port
listeners=PLAINTEXT://127.0.0.1:$port,CONTROLLER://127.0.0.1:$controller_port
advertised.listeners=PLAINTEXT://127.0.0.1:$port
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
log.dirs=$data_dir
num.partitions=4
offsets.topic.replication.factor=1
# Fewer offsets partitions than the default 50: the first consumer group is ready much sooner.
offsets.topic.num.partitions=4
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
group.initial.rebalance.delay.ms=0
# A broker restarted after kill -9 registers only once its dead predecessor's session has expired
# (9 s by default): shorter, so a crash torture's Kafka comes back sooner; still four heartbeats long.
broker.heartbeat.interval.ms=1000
broker.session.timeout.ms=4000
# The machine is small and shared.
num.network.threads=2
num.io.threads=2
EOF
  cat >"$run_dir/log4j.properties" <<EOF
log4j.rootLogger=INFO, file
log4j.appender.file=org.apache.log4j.FileAppender
log4j.appender.file.File=$run_dir/server.log
log4j.appender.file.layout=org.apache.log4j.PatternLayout
log4j.appender.file.layout.ConversionPattern=[%d] %p %m (%c)%n
EOF
}

# Ready means what the tests need: kafkajs itself connects and sees the broker.
wait_ready() {
  local pid="$1"
  [[ -f "$root/node_modules/kafkajs/package.json" ]] || { log "node_modules/kafkajs missing: run npm ci first"; exit 1; }
  (cd "$root" && node -e '
    const { Kafka, logLevel } = require("kafkajs");
    const [broker, pid, timeoutS] = process.argv.slice(1);
    const deadline = Date.now() + Number(timeoutS) * 1000;
    const alive = () => { try { process.kill(Number(pid), 0); return true; } catch { return false; } };
    const probe = async () => {
      const admin = new Kafka({ brokers: [broker], logLevel: logLevel.NOTHING, retry: { retries: 0 } }).admin();
      try { await admin.connect(); return (await admin.describeCluster()).brokers.length > 0; }
      catch { return false; }
      finally { await admin.disconnect().catch(() => {}); }
    };
    (async () => {
      while (Date.now() < deadline && alive()) {
        if (await probe()) process.exit(0);
        await new Promise((r) => setTimeout(r, 250));
      }
      process.exit(1);
    })();
  ' "127.0.0.1:$port" "$pid" "$start_timeout")
}

start() {
  local pid
  if pid="$(our_pid)"; then
    wait_ready "$pid" || { log "pid $pid runs but does not answer on 127.0.0.1:$port"; exit 1; }
    log "already running (pid $pid) on 127.0.0.1:$port"
    return
  fi
  local p
  for p in "$port" "$controller_port"; do
    if port_open "$p"; then
      log "127.0.0.1:$p is in use by a process this script did not start; pick another KAFKA_PORT"
      exit 1
    fi
  done
  ensure_jars
  rm -rf "$run_dir"
  mkdir -p "$data_dir"
  write_config
  local cluster_id
  # A Kafka cluster id is 16 random bytes in unpadded base64url; it may start with "-", hence --cluster-id=.
  cluster_id="$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=')"
  "${java_cmd[@]}" kafka.tools.StorageTool format --cluster-id="$cluster_id" --config "$run_dir/server.properties" >"$run_dir/format.log" 2>&1 \
    || { log "storage format failed:"; cat "$run_dir/format.log" >&2; exit 1; }
  launch
}

# Runs the broker on the formatted storage in $data_dir and waits until kafkajs sees it.
launch() {
  local pid
  # $heap unquoted on purpose: KAFKA_HEAP may hold several JVM options.
  nohup "${java_cmd[@]}" $heap -XX:+UseSerialGC kafka.Kafka "$run_dir/server.properties" </dev/null >>"$run_dir/stdout.log" 2>&1 &
  pid=$!
  echo "$pid" >"$pid_file"
  if wait_ready "$pid"; then
    log "started (pid $pid) on 127.0.0.1:$port, controller on 127.0.0.1:$controller_port"
  else
    log "not ready within ${start_timeout}s; last lines of $run_dir/server.log:"
    tail -n 30 "$run_dir/server.log" "$run_dir/stdout.log" >&2 || true
    stop
    exit 1
  fi
}

# kill -9 of the running broker, then a new one on the same storage.
restart() {
  local pid
  [[ -f "$data_dir/meta.properties" ]] || { log "no formatted storage in $data_dir: start first"; exit 1; }
  if pid="$(our_pid)"; then
    kill -9 "$pid"
    while kill -0 "$pid" 2>/dev/null; do sleep 0.05; done
    log "killed (pid $pid) with SIGKILL"
  fi
  launch
}

stop() {
  local pid
  if pid="$(our_pid)"; then
    # A clean KRaft shutdown takes a few seconds; don't wait forever on a wedged JVM.
    terminate_engine "$pid" 30
  fi
  # Logs stay for a post-mortem; the next start clears them.
  rm -rf "$data_dir" "$pid_file"
}

status() {
  local pid
  if pid="$(our_pid)"; then
    echo "kafka running (pid $pid) on 127.0.0.1:$port"
  else
    echo "kafka not running on 127.0.0.1:$port (by this script)"
    return 1
  fi
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  status) status ;;
  restart) restart ;;
  *) echo "usage: $0 start|stop|status|restart" >&2; exit 2 ;;
esac
