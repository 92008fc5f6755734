"""`engram hook <host> <event>`: what an agent host runs on each of its hook events.

Reads the host's payload on stdin, normalises it through the host's adapter, sends it to the
gateway and prints what the host expects on stdout (the context block at session start). It is on
the agent's hot path, so it imports only the standard library, the few stdlib-only core modules
(settings, client's URL check) and the one adapter it needs; the privacy scrubber loads only when
an event is spooled.

The hook never breaks the agent: whatever happens it exits 0 within
ENGRAM_HOOK_TIMEOUT_SECONDS (plus start-up), and prints nothing on stdout but the host's answer.
A gateway that is down, slow or answers 5xx/503 gets the event spooled for later; a payload that
cannot be used is reported on stderr and in ``<data dir>/spool/hook-errors.log`` (never silently
dropped); a spooled backlog is drained by a detached child after a successful send.
"""

from __future__ import annotations

import json
import os
import sys
import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from types import ModuleType
    from typing import Any

    from engram.agents.contract import HookEvent
    from engram.agents.spool import Spool
    from engram.agents.transport import GatewayLink
    from engram.settings import Settings

MAX_PAYLOAD_BYTES = 16 * 1024 * 1024
"""Largest stdin payload read; a host never sends more for one event."""

USAGE = """\
usage: engram hook HOST EVENT < payload.json

Run by an agent host on its hook events (`engram connect HOST --with-hooks` writes the config).
Reads the host's JSON payload on stdin, sends the event to the Engram gateway and prints what the
host expects (the memory context at session start). Always exits 0 and never holds the agent up
longer than ENGRAM_HOOK_TIMEOUT_SECONDS: when the gateway cannot take the event, it is kept in
the spool (`engram capture` shows it, `engram capture --drain` sends it).

  HOST   one of: {hosts}
  EVENT  the host's own hook event name, e.g. PostToolUse (Claude Code), afterShellExecution
         (Cursor), AfterTool (Gemini CLI); see docs/hosts.md
"""


def main(argv: list[str]) -> int:
    started, clock = time.time(), time.monotonic()
    if not argv or argv[0] in ("-h", "--help") or len(argv) != 2:
        from engram.agents.registry import with_hooks

        asked = argv[:1] in (["-h"], ["--help"])
        print(USAGE.format(hosts=", ".join(with_hooks())), file=sys.stdout if asked else sys.stderr)
        return 0 if asked else 2
    if sys.stdin is None or sys.stdin.isatty():
        print(
            "engram hook: expects the host's JSON payload on stdin (see `engram hook --help`)",
            file=sys.stderr,
        )
        return 2
    host, hook = argv
    try:
        out = run(host, hook, sys.stdin.buffer.read(MAX_PAYLOAD_BYTES + 1), started, clock)
    except Exception as exc:  # noqa: BLE001 - the last guard: a hook must never break the agent
        _report(None, host, hook, f"internal error: {type(exc).__name__}: {exc}")
        return 0
    if out:
        sys.stdout.write(out if out.endswith("\n") else out + "\n")
        sys.stdout.flush()
    return 0


def run(host: str, hook: str, raw: bytes, started: float, clock: float) -> str:
    """Handle one hook call; returns what to print on stdout."""
    from engram.agents.contract import BadPayload, valid_id
    from engram.agents.registry import adapter as load_adapter
    from engram.settings import SettingsError, load_settings

    try:
        settings = load_settings()
    except SettingsError as exc:
        _report(None, host, hook, f"configuration error: {exc}")
        return ""
    try:
        adapter = load_adapter(host)
    except LookupError as exc:  # an unknown host, one without hooks, a broken outside module
        _report(settings, host, hook, str(exc))
        return ""
    try:
        if len(raw) > MAX_PAYLOAD_BYTES:
            raise BadPayload(f"payload larger than {MAX_PAYLOAD_BYTES} bytes")
        try:
            payload = json.loads(raw) if raw.strip() else {}
        except ValueError as exc:
            raise BadPayload(f"stdin is not JSON: {exc}") from None
        if not isinstance(payload, dict):
            raise BadPayload("stdin must be one JSON object")
        valid_id(hook, "the EVENT argument")  # it goes into eventIds and the hookType
        event = adapter.normalise(hook, payload)
    except BadPayload as exc:
        _report(settings, host, hook, f"unusable payload: {exc}")
        return _respond(adapter, None, None)
    _complete(event, settings, started)
    if not _captured(event, settings):
        return _respond(adapter, event, None)
    deadline = clock + settings.hook_timeout_seconds
    context = deliver(event, settings, deadline, started)
    if event.kind == "prompt" and getattr(adapter, "PROMPT_CONTEXT", False):
        context = prompt_context(event, settings, deadline)
    return _respond(adapter, event, context)


def _respond(adapter: ModuleType, event: HookEvent | None, context: str | None) -> str:
    if event is None:  # an unusable payload still gets the host's neutral answer
        respond_neutral = getattr(adapter, "respond_neutral", None)
        return str(respond_neutral()) if respond_neutral else ""
    return str(adapter.respond(event, context))


def _complete(event: HookEvent, settings: Settings, started: float) -> None:
    """Fill what the adapter could not: cwd (the hook runs in the workspace), project, session
    (per host process when the host has no session id), time (the hook's clock), and bound the
    tool output."""
    from engram.agents.contract import project_for

    event.cwd = event.cwd or os.getcwd()
    event.project = event.project or project_for(event.cwd, settings.project)
    if not event.session_id:
        event.session_id = f"{event.host}-{os.getppid()}"
    if event.timestamp is None:
        event.timestamp = started
    limit = settings.capture_max_output_chars
    output = event.tool_output
    if output is not None:
        text = (
            output
            if isinstance(output, str)
            else json.dumps(output, ensure_ascii=False, default=str)
        )
        if len(text) > limit:
            keep = max(limit // 2 - 40, 1)
            event.tool_output = (
                f"{text[:keep]}\n… [{len(text) - 2 * keep} chars omitted] …\n{text[-keep:]}"
            )


def _captured(event: HookEvent, settings: Settings) -> bool:
    """Capture filters: tool-name globs, deny wins. Events without a tool always pass."""
    name = event.tool_name
    if not name:
        return True
    from fnmatch import fnmatchcase

    if any(fnmatchcase(name, pattern) for pattern in settings.capture_deny):
        return False
    return any(fnmatchcase(name, pattern) for pattern in settings.capture_allow)


def requests_for(event: HookEvent, fallback_time: float) -> list[dict[str, Any]]:
    """The gateway requests an event makes, in order. Session start announces the session (the
    answer carries the context block); session end stores the event, then ends the session."""
    from engram.agents.contract import event_id, observe_body

    if event.kind == "session_start":
        return [
            {
                "method": "POST",
                "path": "/v1/sessions",
                "body": {
                    "sessionId": event.session_id,
                    "project": event.project,
                    "cwd": event.cwd,
                    "host": event.host,
                    "timestamp": event.timestamp,
                },
            }
        ]
    observe = {
        "method": "POST",
        "path": "/v1/observe",
        "body": observe_body(event, event_id(event, fallback_time)),
    }
    if event.kind == "session_end":
        end = {
            "method": "POST",
            "path": f"/v1/sessions/{event.session_id}/end",
            "body": {
                "project": event.project,
                "host": event.host,
                "cwd": event.cwd,
                "timestamp": event.timestamp,
            },
        }
        return [observe, end]
    return [observe]


def deliver(event: HookEvent, settings: Settings, deadline: float, started: float) -> str | None:
    """Send the event's requests before ``deadline``; spool what the gateway could not take.
    Returns the context block when the gateway answered a session start with one."""
    from engram.wire import PERMANENT, Unreachable, error_message

    requests = requests_for(event, started)
    waiting = _spool_waiting(settings)  # once: a stat and a listdir on every hook
    if waiting and event.kind != "session_start":
        # Older events wait in the spool: this one goes behind them, or a session could end
        # (and be summarised) before its spooled events arrive. A session start still asks the
        # gateway directly, for its context; its timestamp keeps a late replay harmless.
        spool_for(settings).append(requests)
        _drain_in_background()
        return None
    try:
        gateway = gateway_for(settings)
    except ValueError as exc:
        _report(settings, event.host, event.hook, f"configuration error: {exc}")
        spool_for(settings).append(requests)
        return None
    context = None
    for index, request in enumerate(requests):
        try:
            status, answer = gateway.send(
                request["method"], request["path"], request["body"], deadline
            )
        except Unreachable:
            status, answer = 0, None
        if 200 <= status < 300:
            if isinstance(answer, dict) and isinstance(answer.get("context"), str):
                context = answer["context"]
            continue
        if status in PERMANENT:
            _report(
                settings,
                event.host,
                event.hook,
                f"the gateway refused the event "
                f"({error_message(status, answer)}); kept in the spool's rejected list "
                "(`engram capture`)",
            )
            spool_for(settings).reject(request, status, answer)
            continue
        # down, slow, 401, 503 (inbox full), 5xx: keep this and the rest for later
        spool_for(settings).append(requests[index:])
        if status == 401:
            _report(
                settings,
                event.host,
                event.hook,
                "the gateway refused the secret (HTTP "
                "401); the event was spooled. Set ENGRAM_SECRET to the server's secret.",
            )
        return context
    if waiting:  # the gateway answers again: send what waited (a session start got here)
        _drain_in_background()
    return context


def prompt_context(event: HookEvent, settings: Settings, deadline: float) -> str | None:
    """What the gateway adds for this prompt (``POST /v1/context`` with ``forPrompt``), or None:
    nothing cleared its relevance bar, it is off (ENGRAM_PROMPT_CONTEXT_TOKENS=0), or the
    gateway did not answer in time. A read: never spooled, never retried."""
    from engram.wire import Unreachable

    if not event.prompt or not settings.prompt_context_tokens:
        return None
    body = {
        "project": event.project,
        "sessionId": event.session_id,
        "query": event.prompt[:PROMPT_QUERY_CHARS],
        "forPrompt": True,
    }
    try:
        status, answer = gateway_for(settings).send("POST", "/v1/context", body, deadline)
    except (Unreachable, ValueError):
        return None
    if status != 200 or not isinstance(answer, dict):
        return None
    context = answer.get("context")
    return context if isinstance(context, str) and context else None


PROMPT_QUERY_CHARS = 2000
"""The prompt's head is the query: a pasted log past it adds nothing search needs."""


def _spool_waiting(settings: Settings) -> bool:
    """Whether the spool holds anything, in one or two stat calls (loading the spool module
    would cost every successful hook ~2 ms)."""
    directory = settings.data_dir / "spool"
    try:
        if os.stat(directory / "events.jsonl").st_size > 0:
            return True
    except FileNotFoundError:
        pass
    try:
        return any(name.startswith("draining-") for name in os.listdir(directory))
    except FileNotFoundError:
        return False


def gateway_for(settings: Settings) -> GatewayLink:
    from engram.agents.transport import GatewayLink

    secret = settings.secret
    if not secret:
        try:
            secret = settings.secret_file.read_text(encoding="utf-8").strip()
        except OSError:
            secret = ""
    return GatewayLink(settings.gateway_url, secret or None, explicit_secret=bool(settings.secret))


def spool_for(settings: Settings) -> Spool:
    from engram.agents.spool import Spool

    return Spool(
        settings.data_dir / "spool", settings.spool_max_bytes, settings.spool_max_age_hours * 3600
    )


def _drain_in_background() -> None:
    """A detached child drains the backlog; this hook returns at once. The child exits at once
    when another drain holds the lock. ``posix_spawn`` rather than ``subprocess``, whose import
    alone costs the hook ~3 ms."""
    argv = [sys.executable, "-m", "engram.agents.capture", "--drain-quietly"]
    spawn = getattr(os, "posix_spawn", None)
    if spawn is None:  # Windows
        import subprocess

        subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,  # noqa: S603
            stderr=subprocess.DEVNULL,
            close_fds=True,
            creationflags=getattr(subprocess, "DETACHED_PROCESS", 0),
        )
        return
    null = [(os.POSIX_SPAWN_OPEN, fd, os.devnull, os.O_RDWR, 0) for fd in (0, 1, 2)]
    spawn(sys.executable, argv, os.environ, file_actions=null, setsid=True)


def _report(settings: Settings | None, host: str, hook: str, message: str) -> None:
    """One line on stderr (hosts show it in their hook logs) and in hook-errors.log."""
    line = f"engram hook {host} {hook}: {message}"
    print(line, file=sys.stderr)
    if settings is None:
        return
    try:
        directory = settings.data_dir / "spool"
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(directory / "hook-errors.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        with os.fdopen(fd, "a", encoding="utf-8") as log:
            log.write(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} {line}\n")
    except OSError as exc:
        print(f"engram hook: cannot write the hook error log: {exc}", file=sys.stderr)
