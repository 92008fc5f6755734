#!/usr/bin/env bash
# The whole check, exactly what CI runs: install with dev extras, start Redis and PostgreSQL if
# needed, lint, check formatting (`ruff format .` fixes it), type-check (mypy: every package),
# then every test (slow ones included, real servers and workers).
set -euo pipefail
cd "$(dirname "$0")/../.."

bash infra/dev/install.sh dev
while IFS= read -r line; do export "${line?}"; done < <(bash infra/dev/services.sh)

echo "==> ruff"
.venv/bin/ruff check .
.venv/bin/ruff format --check .   # `ruff format .` fixes it
echo "==> mypy"
.venv/bin/mypy
echo "==> pytest (Redis: $ENGRAM_TEST_REDIS_URL, PostgreSQL: ${ENGRAM_TEST_POSTGRES_URL%%@*}@…)"
set +e
.venv/bin/python -m pytest -q "$@"
status=$?
set -e
if [ "$status" = 5 ]; then
  echo "pytest collected no tests: that is a failure here" >&2
  exit 1
fi
exit "$status"
