# Two entry points, as the README says: `make serve` and `make check`.
PYTHON ?= python3
VENV := .venv

.PHONY: serve install install-team team-up team-down check lint test

$(VENV)/bin/engram: pyproject.toml
	bash infra/dev/install.sh

install: $(VENV)/bin/engram

# A team deployment from a checkout (docs/operations.md): PostgreSQL driver, Flower, LLM clients.
install-team:
	bash infra/dev/install.sh team

# ... and its processes on this machine without Docker or systemd (infra/dev/team.sh).
team-up: install-team
	bash infra/dev/team.sh up

team-down:
	bash infra/dev/team.sh down

serve: install
	$(VENV)/bin/engram serve

# What CI runs (.ci/run): dev install, services, lint, types, the whole test suite.
check:
	bash infra/dev/check.sh

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
