#!/usr/bin/env bash
# A team deployment on one machine without Docker or systemd: the gateway, a capture pool, a
# derived pool (embed, graph), an llm pool when ENGRAM_LLM_PROVIDERS is set, the one scheduler,
# and Flower when FLOWER_BASIC_AUTH is set; each a background process with its log and pid file
# in ENGRAM_RUN_DIR (default ~/.local/state/engram/team).
#
#   make team-up        # installs the team extras, then: bash infra/dev/team.sh up
#   bash infra/dev/team.sh status
#   make team-down      # SIGTERM (warm shutdown: running tasks finish), SIGKILL after 90 s
#
# Needs ENGRAM_BROKER_URL (Redis) and ENGRAM_DATABASE_URL (PostgreSQL), from the environment or
# the config dir's engram.env, like every engram command. For several machines, run the pools
# there with infra/systemd/ or infra/docker-compose.yml (infra/README.md).
set -euo pipefail
cd "$(dirname "$0")/../.."

ENGRAM=${ENGRAM:-$(pwd)/.venv/bin/engram}
CELERY=${CELERY:-$(dirname "$ENGRAM")/celery}
RUN_DIR=${ENGRAM_RUN_DIR:-$HOME/.local/state/engram/team}
FLOWER_PORT=${FLOWER_PORT:-5555}
STOP_SECONDS=${STOP_SECONDS:-90}
PROCS=(gateway capture derived llm beat flower)

alive() { [ -f "$RUN_DIR/$1.pid" ] && kill -0 "$(cat "$RUN_DIR/$1.pid")" 2>/dev/null; }

start() {  # start NAME CMD...: in its own session, so `down` stops its children too
  local name=$1
  shift
  if alive "$name"; then
    echo "  $name already running (pid $(cat "$RUN_DIR/$name.pid"))"
    return
  fi
  setsid "$@" >>"$RUN_DIR/$name.log" 2>&1 </dev/null &
  echo $! >"$RUN_DIR/$name.pid"
  echo "  $name started (pid $!, log $RUN_DIR/$name.log)"
}

setting() {  # the value engram resolves for a setting (environment, then engram.env)
  "$(dirname "$ENGRAM")/python" -c "
from engram.settings import load_settings
value = getattr(load_settings(), '$1')
print(','.join(value) if isinstance(value, tuple) else (value or ''))"
}

up() {
  [ -x "$ENGRAM" ] || { echo "no $ENGRAM: run \`make install-team\` first" >&2; exit 1; }
  local broker database providers
  broker=$(setting broker_url)
  database=$(setting database_url)
  providers=$(setting llm_providers)
  if [ -z "$broker" ]; then
    echo "ENGRAM_BROKER_URL is not set: a team deployment needs Redis (e.g. redis://127.0.0.1:6379/0)." >&2
    echo "For one developer, \`make serve\` runs everything in one process instead." >&2
    exit 2
  fi
  case "$database" in
    postgresql*) ;;
    *) echo "warning: ENGRAM_DATABASE_URL is not PostgreSQL ($database): fine on one machine, but other machines cannot share it" >&2 ;;
  esac
  mkdir -p "$RUN_DIR"
  chmod 700 "$RUN_DIR"
  echo "==> starting Engram's team processes (logs and pids in $RUN_DIR)"
  start gateway "$ENGRAM" serve
  start capture "$ENGRAM" worker -Q capture,maintenance --name "engram-capture@%h"
  start derived "$ENGRAM" worker -Q embed,graph --concurrency 1 --name "engram-derived@%h"
  if [ -n "$providers" ]; then
    start llm "$ENGRAM" worker -Q llm --name "engram-llm@%h"
  fi
  start beat "$ENGRAM" beat
  if [ -n "${FLOWER_BASIC_AUTH:-}" ] && [ -x "$CELERY" ]; then
    start flower "$CELERY" --broker="$broker" flower --address=127.0.0.1 --port="$FLOWER_PORT" \
      --basic-auth="$FLOWER_BASIC_AUTH"
  else
    echo "  flower not started (set FLOWER_BASIC_AUTH=user:password to run it with a login)"
  fi
  echo "==> waiting until every queue has a worker and the gateway answers"
  local tries=0
  until "$ENGRAM" doctor >"$RUN_DIR/doctor.txt" 2>&1; do
    tries=$((tries + 1))
    if [ "$tries" -ge 60 ]; then
      cat "$RUN_DIR/doctor.txt"
      echo "not up after 60 s: see the findings above and the logs in $RUN_DIR" >&2
      exit 1
    fi
    sleep 1
  done
  grep -E "^(ok|WARN|FAIL)" "$RUN_DIR/doctor.txt" | grep -E "gateway|workers|store|broker" || true
  echo "==> up. \`engram status\` for health, \`bash infra/dev/team.sh down\` to stop."
}

down() {
  local name pid waited
  for name in "${PROCS[@]}"; do
    alive "$name" || { rm -f "$RUN_DIR/$name.pid"; continue; }
    pid=$(cat "$RUN_DIR/$name.pid")
    kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
  done
  for name in "${PROCS[@]}"; do
    [ -f "$RUN_DIR/$name.pid" ] || continue
    pid=$(cat "$RUN_DIR/$name.pid")
    waited=0
    while kill -0 "$pid" 2>/dev/null && [ "$waited" -lt "$STOP_SECONDS" ]; do
      sleep 1
      waited=$((waited + 1))
    done
    if kill -0 "$pid" 2>/dev/null; then
      echo "  $name did not stop in ${STOP_SECONDS}s: SIGKILL (its tasks are re-sent from the inbox)"
      kill -KILL -- "-$pid" 2>/dev/null || true
    fi
    rm -f "$RUN_DIR/$name.pid"
    echo "  $name stopped"
  done
}

status() {
  local name
  for name in "${PROCS[@]}"; do
    if alive "$name"; then
      echo "  $name running (pid $(cat "$RUN_DIR/$name.pid"))"
    elif [ -f "$RUN_DIR/$name.pid" ]; then
      echo "  $name DEAD (see $RUN_DIR/$name.log)"
    fi
  done
  "$ENGRAM" status || true
}

case "${1:-}" in
  up) up ;;
  down) down ;;
  status) status ;;
  *)
    echo "usage: $0 up|down|status" >&2
    exit 2
    ;;
esac
