"""`engram demo`: realistic coding sessions sent through the real capture path, then recall.

Uses the running gateway when one answers; otherwise starts one in this process for the demo
(same data dir, same code path), and stops it afterwards.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from engram.client import Client, Unreachable
from engram.secret import client_secret
from engram.settings import Settings

PROJECT = "engram-demo"
WAIT_SECONDS = 30.0

SESSIONS: list[dict[str, Any]] = [
    {
        "prompt": "The login test fails with a 500 after the session refactor, fix it",
        "events": [
            (
                "Read",
                {"file_path": "src/auth/session.py"},
                "class SessionStore:\n    def get(self, sid): ...",
            ),
            (
                "Bash",
                {"command": "pytest tests/test_login.py -x"},
                {
                    "stdout": "FAILED tests/test_login.py::test_login_ok - KeyError: 'user_id'\n1 failed",
                    "exit_code": 1,
                },
            ),
            (
                "Edit",
                {
                    "file_path": "src/auth/session.py",
                    "old_string": "data['user_id']",
                    "new_string": "data.get('user_id')",
                },
                "ok",
            ),
            (
                "Bash",
                {"command": "pytest tests/test_login.py -x"},
                {"stdout": "3 passed in 0.41s", "exit_code": 0},
            ),
        ],
        "memory": "Session payloads may lack user_id for anonymous visitors: use .get(), "
        "never index directly (login 500 fixed on the session refactor).",
    },
    {
        "prompt": "Add a Redis cache in front of the product catalogue query",
        "events": [
            (
                "Grep",
                {"pattern": "def list_products", "path": "src/"},
                "src/catalog/queries.py:42:def list_products(db, category):",
            ),
            (
                "Write",
                {"file_path": "src/catalog/cache.py", "content": "import redis\nCACHE_TTL = 300\n"},
                "created",
            ),
            (
                "Bash",
                {"command": "docker compose up -d redis"},
                {"stdout": "Container redis  Started", "exit_code": 0},
            ),
            (
                "Bash",
                {"command": "pytest tests/test_catalog.py"},
                {"stdout": "5 passed", "exit_code": 0},
            ),
        ],
        "memory": "Catalogue cache: Redis with a 300 s TTL in src/catalog/cache.py; "
        "invalidate on product update.",
    },
    {
        "prompt": "CI is red: mypy complains about Optional in the billing module",
        "events": [
            (
                "Bash",
                {"command": "mypy src/billing"},
                {
                    "stdout": 'src/billing/invoice.py:17: error: Item "None" of "Optional[Customer]" '
                    'has no attribute "email"',
                    "exit_code": 1,
                },
            ),
            (
                "Edit",
                {
                    "file_path": "src/billing/invoice.py",
                    "old_string": "customer.email",
                    "new_string": "customer.email if customer else None",
                },
                "ok",
            ),
            (
                "Bash",
                {"command": "mypy src/billing"},
                {"stdout": "Success: no issues found", "exit_code": 0},
            ),
        ],
        "memory": None,
    },
]

QUERIES = ["login test KeyError user_id", "redis cache TTL", "mypy Optional error billing"]


def run_demo(settings: Settings, url: str | None, out: Any = print) -> int:
    base = url or settings.gateway_url
    client = Client(base, client_secret(settings), explicit_secret=bool(settings.secret))
    started = None
    try:
        client.request("GET", "/v1/livez")
    except Unreachable:
        started = _start_local(settings)
        base = started[0]
        client = Client(base, client_secret(settings))
        out(
            f"No gateway answered at {url or settings.gateway_url}; started one for the demo "
            f"at {base}."
        )
    try:
        return _run(client, out)
    finally:
        if started is not None:
            started[1]()


def _start_local(settings: Settings) -> tuple[str, Any]:
    import contextlib
    import threading

    from waitress.server import create_server

    from engram.cli.server import build_gateway

    gateway = build_gateway(settings)
    server = create_server(gateway.app, host="127.0.0.1", port=0, threads=4)

    def serve() -> None:
        with contextlib.suppress(OSError):  # close() shuts the sockets under the loop's select
            server.run()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()

    def stop() -> None:
        # the request threads finish what they serve first: closing the server under a request
        # still being answered printed an EBADF traceback from waitress
        server.task_dispatcher.shutdown()
        server.close()
        thread.join(5)
        gateway.close()

    return f"http://127.0.0.1:{server.effective_port}", stop


def _run(client: Client, out: Any) -> int:
    run = uuid.uuid4().hex[:8]
    sent = 0
    for number, spec in enumerate(SESSIONS, start=1):
        session_id = f"demo-{run}-{number}"
        client.call(
            "POST",
            "/v1/sessions",
            {"sessionId": session_id, "project": PROJECT, "host": "claude-code"},
        )
        client.call(
            "POST",
            "/v1/observe",
            {
                "eventId": f"{session_id}:prompt",
                "sessionId": session_id,
                "project": PROJECT,
                "host": "claude-code",
                "hookType": "UserPromptSubmit",
                "prompt": spec["prompt"],
            },
        )
        sent += 1
        for index, (tool, tool_input, tool_output) in enumerate(spec["events"]):
            client.call(
                "POST",
                "/v1/observe",
                {
                    "eventId": f"{session_id}:tool:{index}",
                    "sessionId": session_id,
                    "project": PROJECT,
                    "host": "claude-code",
                    "hookType": "PostToolUse",
                    "toolName": tool,
                    "toolInput": tool_input,
                    "toolOutput": tool_output,
                },
            )
            sent += 1
        if spec["memory"]:
            client.call("POST", "/v1/memories", {"content": spec["memory"], "project": PROJECT})
        client.call("POST", f"/v1/sessions/{session_id}/end")
        out(f"session {number}: {spec['prompt']}")
    out(f"Sent {sent} events through POST /v1/observe; waiting for the workers…")
    deadline = time.monotonic() + WAIT_SECONDS
    while time.monotonic() < deadline:
        waiting = client.call("GET", "/v1/capture?limit=1")["counts"]
        if not (waiting["pending"] or waiting["processing"] or waiting["retrying"]):
            break
        time.sleep(0.2)
    else:
        out("Workers did not finish in time; run `engram status` to see why.")
        return 1
    for query in QUERIES:
        result = client.call("POST", "/v1/search", {"query": query, "project": PROJECT, "limit": 3})
        out(f"\nsearch: {query!r}")
        for hit in result["items"]:
            out(f"  {hit['score']:6.2f}  [{hit['kind']}] {hit['title']}")
    context = client.call("POST", "/v1/context", {"project": PROJECT, "budgetTokens": 400})
    out(
        f"\nSession-start context for {PROJECT} ({context['tokens']} of "
        f"{context['budgetTokens']} tokens):\n"
    )
    out(context["context"])
    return 0
