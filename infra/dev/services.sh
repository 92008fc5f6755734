#!/usr/bin/env bash
# Make sure the services the tests use answer on loopback: Redis on 6379 and PostgreSQL on 5432.
# Starts them when installed but stopped; installs them from Debian's packages when missing
# (needs root, as on the CI machines). Prints the URLs the tests should use.
set -euo pipefail

log() { echo "==> $*" >&2; }
have() { command -v "$1" >/dev/null 2>&1; }
apt_install() {
  if [ "$(id -u)" != 0 ]; then echo "need root to install $*" >&2; exit 1; fi
  log "installing $* from Debian's packages"
  DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

redis_up() { have redis-cli && redis-cli -h 127.0.0.1 -p 6379 ping 2>/dev/null | grep -q PONG; }
if ! redis_up; then
  have redis-server || apt_install redis-server
  log "starting Redis on 127.0.0.1:6379"
  mkdir -p /var/lib/redis /var/log/redis 2>/dev/null || true
  redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no \
    --dir /tmp --logfile /tmp/engram-ci-redis.log
  for _ in $(seq 50); do redis_up && break; sleep 0.1; done
  redis_up || { echo "Redis did not start; see /tmp/engram-ci-redis.log" >&2; exit 1; }
fi

pg_up() { have pg_isready && pg_isready -h 127.0.0.1 -p 5432 -q; }
if ! pg_up; then
  have pg_ctlcluster || apt_install postgresql
  version=$(ls /etc/postgresql | sort -V | tail -n 1)
  log "starting PostgreSQL $version on 127.0.0.1:5432"
  pg_ctlcluster --skip-systemctl-redirect "$version" main start || true
  for _ in $(seq 100); do pg_up && break; sleep 0.1; done
  pg_up || { echo "PostgreSQL did not start" >&2; exit 1; }
fi
# The tests connect over TCP as postgres/postgres; make that password valid (a no-op where the
# server trusts local connections).
if [ "$(id -u)" = 0 ] && have runuser; then
  runuser -u postgres -- psql -q -c "ALTER USER postgres PASSWORD 'postgres'" >/dev/null 2>&1 || true
fi

echo "ENGRAM_TEST_REDIS_URL=redis://127.0.0.1:6379/14"
echo "ENGRAM_TEST_POSTGRES_URL=postgresql+psycopg://postgres:postgres@127.0.0.1:5432/postgres"
