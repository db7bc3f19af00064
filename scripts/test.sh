#!/usr/bin/env bash
# Body of `npm test`: type-check and start a real Redis and Kafka on test ports side by side, run every
# mocha spec, stop the engines this run started. Extra arguments go to mocha (e.g. --grep).
# Test ports differ from the defaults so a developer's own servers don't collide:
#   TEST_REDIS_PORT (default 6390), TEST_KAFKA_PORT (default 19092; its controller uses +1).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

export REDIS_PORT="${TEST_REDIS_PORT:-6390}"
export KAFKA_PORT="${TEST_KAFKA_PORT:-19092}"

# One run at a time per port pair: a second run would share, then lose, the first run's engines.
mkdir -p .cache/run
exec 9>".cache/run/test-$REDIS_PORT-$KAFKA_PORT.lock"
flock -n 9 || { echo "test.sh: waiting for another test run on these ports" >&2; flock 9; }

# Engines already running from an earlier `scripts/*.sh start` are reused and left running.
started=()
prepared=
stop_started() {
  local engine
  # An engine still starting would outlive its stop: let the start finish first.
  [[ -z "$prepared" ]] || wait "$prepared" 2>/dev/null || true
  for engine in "${started[@]}"; do bash "scripts/$engine.sh" stop || true; done
}
trap stop_started EXIT
for engine in redis kafka; do
  bash "scripts/$engine.sh" status >/dev/null || started=("$engine" "${started[@]}")
done

# The engines start, and the OpenAPI fuzzer's Python (Schemathesis, in a venv under .cache, for
# test/openapi/fuzz.e2e.spec.ts) installs, while the type-check and the client helpers' own suites
# (node --test, pytest, go test) run: on a fresh clone each of these waits mostly on the network or a
# JVM's start. 9>&- keeps the lock out of the engines: a leftover engine must not block later runs.
background() {
  local engine
  for engine in "${started[@]}"; do bash "scripts/$engine.sh" start 9>&-; done
  bash scripts/openapi-fuzz-venv.sh >/dev/null
}
background &
prepared=$!
npx tsc --noEmit
bash scripts/clients-test.sh
wait "$prepared" || { echo "test.sh: an engine or the fuzzer's venv did not come up" >&2; exit 1; }

# A real browser for the media-serving spec (Debian's chromium, driven by playwright-core).
if ! command -v chromium >/dev/null; then
  echo "test.sh: chromium missing, installing it with apt-get" >&2
  DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=120 install -y -qq chromium >/dev/null
fi

export REDIS_URL="redis://127.0.0.1:$REDIS_PORT"
export KAFKA_BROKERS="127.0.0.1:$KAFKA_PORT"
# Two lanes side by side, each a mocha process running its files one at a time: the specs that
# start several server processes and engines of their own (distributed roles, crash torture and
# soak, the bus through Kafka outages, the OpenAPI fuzzer), then three folders of long ones
# (billing's clock, the CLI, /updates) that even the lanes out, in one; every other spec in the
# other. One process keeps one of the two cores busy on average, as most specs wait on servers,
# receivers and timers: the lanes take 8 minutes here where one process takes 14. TEST_LANES=1 runs
# every spec file in one process, one after another. Specs that stop or restart an engine start a
# private one (test/support/redis-server.ts, their own Kafka port); the others use topics, groups,
# key prefixes and workspaces of their own on the shared engines.
# The globs are explicit so the run stays whole even if .mocharc.json drops its "spec".
heavy=('test/distributed/**/*.spec.ts' 'test/reliability/**/*.spec.ts' 'test/bus/**/*.spec.ts' 'test/openapi/fuzz.e2e.spec.ts'
  'test/billing/**/*.spec.ts' 'test/cli/**/*.spec.ts' 'test/updates/**/*.spec.ts')
if [[ "${TEST_LANES:-2}" == 1 ]]; then
  npx mocha 'test/**/*.spec.ts' "$@"
  exit
fi
ignored=()
for glob in "${heavy[@]}"; do ignored+=(--ignore "$glob"); done
# The heavy lane's report is printed whole once both are done, so the two never interleave.
heavy_log=".cache/run/heavy-lane-$REDIS_PORT-$KAFKA_PORT.log"
npx mocha "${heavy[@]}" "$@" >"$heavy_log" 2>&1 &
heavy_pid=$!
# The other lane prints as it runs and into a log, whose failures are repeated at the very end: a
# report cut to its tail (as CI keeps it) then still names them.
other_log=".cache/run/other-lane-$REDIS_PORT-$KAFKA_PORT.log"
status=0
npx mocha 'test/**/*.spec.ts' "${ignored[@]}" "$@" 2>&1 | tee "$other_log" || status=$?
heavy_status=0
wait "$heavy_pid" || heavy_status=$?
echo
echo "== the heavy lane (${heavy[*]})"
cat "$heavy_log"
if [[ "$status" -ne 0 ]]; then
  echo
  echo "== the other lane's failures (as printed above)"
  sed -e 's/\x1b\[[0-9;]*m//g' "$other_log" | sed -n '/^ *[0-9][0-9]* failing$/,$p'
fi
# Last, so a log's tail tells which lane failed.
outcome() { if [[ "$1" -eq 0 ]]; then echo "passed"; else echo "FAILED (exit $1)"; fi; }
echo "test.sh: the heavy lane $(outcome "$heavy_status"), the other lane $(outcome "$status")"
[[ "$status" -ne 0 ]] && exit "$status"
exit "$heavy_status"
