"""``engram doctor``: check this machine's Engram end to end, each finding with its fix.

It reads and asks; it never writes, migrates or starts anything. Each check is one function
returning findings; a check that cannot run (its dependency failed) says so instead of guessing.
Exit code: 0 when nothing failed (warnings allowed), 1 when something failed, 2 for bad usage —
for scripts and CI.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import stat
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from engram.settings import Settings, SettingsError, settings_for

OK, WARN, FAIL, INFO = "ok", "warn", "fail", "info"
DISK_FAIL_BYTES = 200 * 2**20
"""Less free space than this next to the store fails: SQLite's WAL and Chroma's files grow."""
DISK_WARN_BYTES = 2**30
INSPECT_TIMEOUT = 2.0
"""Seconds the workers are given to say which queues they consume."""
EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


@dataclasses.dataclass
class Finding:
    level: str
    component: str
    what: str
    fix: str = ""


Findings = list[Finding]


def _mode_open(path: Path) -> bool:
    """Group or others may read or write ``path``."""
    return bool(path.stat().st_mode & (stat.S_IRWXG | stat.S_IRWXO))


def check_dirs(settings: Settings) -> Findings:
    found: Findings = []
    for label, directory in (("data dir", settings.data_dir), ("config dir", settings.config_dir)):
        if not directory.exists():
            found.append(
                Finding(
                    WARN,
                    "dirs",
                    f"{label} {directory} does not exist yet",
                    "`engram serve` creates it (or pass --data-dir / --config-dir)",
                )
            )
        elif not os.access(directory, os.W_OK | os.X_OK):
            found.append(
                Finding(
                    FAIL,
                    "dirs",
                    f"{label} {directory} is not writable by this user",
                    f"chown it to this user, or point {label} elsewhere",
                )
            )
        elif _mode_open(directory):
            found.append(
                Finding(
                    WARN,
                    "dirs",
                    f"{label} {directory} is open to other users "
                    f"({stat.filemode(directory.stat().st_mode)})",
                    f"chmod 700 {directory}",
                )
            )
        else:
            found.append(Finding(OK, "dirs", f"{label} {directory} (owner only)"))
    secret = settings.secret_file
    if settings.secret:
        found.append(Finding(OK, "secret", "ENGRAM_SECRET is set"))
    elif not secret.exists():
        found.append(
            Finding(
                WARN,
                "secret",
                f"no secret yet at {secret}",
                "`engram serve` generates it on first start",
            )
        )
    elif _mode_open(secret):
        found.append(
            Finding(FAIL, "secret", f"{secret} is readable by other users", f"chmod 600 {secret}")
        )
    else:
        found.append(Finding(OK, "secret", f"{secret} (mode 0600)"))
    return found


def check_disk(settings: Settings) -> Findings:
    where = settings.data_dir if settings.data_dir.exists() else settings.data_dir.parent
    while not where.exists() and where != where.parent:
        where = where.parent
    free = shutil.disk_usage(where).free
    text = f"{free / 2**30:.1f} GB free at {where}"
    if free < DISK_FAIL_BYTES:
        return [
            Finding(
                FAIL, "disk", text, "free space: captures are refused when the store cannot grow"
            )
        ]
    if free < DISK_WARN_BYTES:
        return [Finding(WARN, "disk", text, "free space soon (the store, WAL and vectors grow)")]
    return [Finding(OK, "disk", text)]


def check_store(settings: Settings) -> Findings:
    from sqlalchemy import inspect
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import SQLAlchemyError

    from engram.db import MIGRATIONS, create_store_engine, schema_version
    from engram.status import redact_url

    url = make_url(settings.database_url)
    shown = redact_url(settings.database_url)
    if url.get_backend_name() == "sqlite" and url.database and not Path(url.database).exists():
        return [
            Finding(
                WARN,
                "store",
                f"no store yet at {url.database}",
                "`engram serve` creates it on first start",
            )
        ]
    latest = MIGRATIONS[-1][0]
    try:
        engine = create_store_engine(settings.database_url)
        try:
            if "schema_migrations" not in inspect(engine).get_table_names():
                return [
                    Finding(
                        WARN,
                        "store",
                        f"{shown} has no Engram tables yet",
                        "`engram serve` (or a worker) creates them at start",
                    )
                ]
            version = schema_version(engine)
        finally:
            engine.dispose()
    except ImportError as exc:
        return [
            Finding(
                FAIL,
                "store",
                f"{shown}: the driver {exc.name} is not installed",
                "pip install 'engram-memory[postgres]' (psycopg) for PostgreSQL",
            )
        ]
    except SQLAlchemyError as exc:
        return [
            Finding(
                FAIL,
                "store",
                f"{shown} does not answer: {str(exc).splitlines()[0]}",
                "check ENGRAM_DATABASE_URL and that the database server runs",
            )
        ]
    if version > latest:
        return [
            Finding(
                FAIL,
                "store",
                f"{shown} is at schema {version}, newer than this Engram knows ({latest})",
                "upgrade this Engram to the version that wrote the store",
            )
        ]
    if version < latest:
        return [
            Finding(
                WARN,
                "store",
                f"{shown} is at schema {version} of {latest}",
                "the next `engram serve` or `engram worker` start migrates it",
            )
        ]
    return [Finding(OK, "store", f"{shown}, schema {version}")]


def check_broker_and_workers(settings: Settings) -> Findings:
    if settings.embedded:
        return [Finding(OK, "broker", "embedded: in-process queue and worker (no Redis needed)")]
    from kombu.exceptions import OperationalError

    from engram.status import redact_url
    from engram.tasks.app import (
        CAPTURE_QUEUE,
        EMBED_QUEUE,
        GRAPH_QUEUE,
        LLM_QUEUE,
        MAINTENANCE_QUEUE,
        celery_app,
        configure,
    )

    configure(settings)
    shown = redact_url(settings.broker_url)
    try:
        with celery_app.connection_for_write() as conn:
            conn.ensure_connection(max_retries=1, timeout=2)
    except (OperationalError, OSError) as exc:
        return [
            Finding(
                FAIL,
                "broker",
                f"{shown} does not answer: {exc}",
                "start Redis or fix ENGRAM_BROKER_URL; captures wait in the inbox",
            )
        ]
    found = [Finding(OK, "broker", shown)]
    try:
        answers = celery_app.control.inspect(timeout=INSPECT_TIMEOUT).active_queues() or {}
    except (OperationalError, OSError) as exc:
        return [*found, Finding(FAIL, "workers", f"could not ask the workers: {exc}", "")]
    consumers: dict[str, list[str]] = {}
    for node, queues in answers.items():
        for queue in queues or []:
            consumers.setdefault(queue.get("name", "?"), []).append(node)
    needed = [(CAPTURE_QUEUE, FAIL), (MAINTENANCE_QUEUE, FAIL), (GRAPH_QUEUE, WARN)]
    if settings.embedder != "none":
        needed.append((EMBED_QUEUE, WARN))
    if settings.llm_providers:
        needed.append((LLM_QUEUE, WARN))
    for queue, level in needed:
        nodes = consumers.get(queue, [])
        if nodes:
            found.append(Finding(OK, "workers", f"queue {queue}: {', '.join(sorted(nodes))}"))
        else:
            found.append(
                Finding(
                    level,
                    "workers",
                    f"no worker consumes the {queue} queue",
                    f"run `engram worker -Q {queue}` (or a pool that includes it)",
                )
            )
    return found


def check_gateway(settings: Settings, args: argparse.Namespace) -> Findings:
    from engram import __version__
    from engram.client import Unreachable, client_for

    client = client_for(args, settings, timeout=10.0)
    try:
        status, report = client.request("GET", "/v1/status")
    except Unreachable as exc:
        fix = "start it: `engram serve`" + ("" if settings.embedded else " (the gateway)")
        return [Finding(FAIL, "gateway", f"not reachable: {exc}; hooks spool meanwhile", fix)]
    if status == 401:
        return [
            Finding(
                FAIL,
                "gateway",
                f"{client.base_url} refused this machine's secret",
                f"use the secret in {settings.secret_file}, or set ENGRAM_SECRET",
            )
        ]
    if status != 200 or not isinstance(report, dict):
        return [Finding(FAIL, "gateway", f"{client.base_url} answered {status} to /v1/status", "")]
    found = [Finding(OK, "gateway", f"{client.base_url} ({report.get('mode')})")]
    if report.get("version") != __version__:
        found.append(
            Finding(
                WARN,
                "versions",
                f"the gateway runs {report.get('version')}, this CLI is {__version__}",
                "upgrade both to the same version",
            )
        )
    for problem in report.get("problems", []):
        found.append(
            Finding(
                WARN,
                str(problem.get("component")),
                str(problem.get("problem")),
                str(problem.get("fix", "")),
            )
        )
    return found


def check_vectors(settings: Settings) -> Findings:
    if settings.embedder == "none":
        return [Finding(INFO, "vectors", "ENGRAM_EMBEDDER=none: search is keyword + graph")]
    found: Findings = []
    if settings.embedder == "local":
        from engram.embedders.base import EmbedderError
        from engram.embedders.local import default_model_path

        try:
            model = default_model_path()
            import onnxruntime  # noqa: F401 - is it importable
            import tokenizers  # noqa: F401
        except (EmbedderError, ImportError) as exc:
            found.append(
                Finding(
                    FAIL,
                    "vectors",
                    f"the local embedder cannot load: {exc}",
                    "pip install 'engram-memory[local]', or ENGRAM_EMBEDDER=none",
                )
            )
        else:
            found.append(Finding(OK, "vectors", f"local embedder model {model.name} installed"))
    if settings.chroma_url:
        import urllib.error
        import urllib.request

        url = settings.chroma_url.rstrip("/") + "/api/v2/heartbeat"
        try:
            with urllib.request.urlopen(url, timeout=5):
                found.append(Finding(OK, "chroma", f"server at {settings.chroma_url} answers"))
        except (urllib.error.URLError, OSError) as exc:
            found.append(
                Finding(
                    FAIL,
                    "chroma",
                    f"server at {settings.chroma_url} does not "
                    f"answer: {getattr(exc, 'reason', exc)}",
                    "start it (`chroma run "
                    "--path DIR`) or fix ENGRAM_CHROMA_URL; search runs without "
                    "vectors meanwhile",
                )
            )
    else:
        found.append(Finding(OK, "chroma", "embedded (PersistentClient in the data dir)"))
    return found


def check_hosts(settings: Settings) -> Findings:
    from engram.agents.connect import ConnectError, drifted

    try:
        hosts = drifted(settings)
    except ConnectError as exc:
        return [Finding(WARN, "hosts", str(exc), "fix or remove the file named")]
    if not hosts:
        return [
            Finding(
                INFO,
                "hosts",
                "no agent host connected",
                "`engram connect --list`, then `engram connect <host> --with-hooks`",
            )
        ]
    found: Findings = []
    for host, (hooks, stale) in sorted(hosts.items()):
        what = "MCP server + hooks" if hooks else "MCP server"
        if stale:
            found.append(
                Finding(
                    WARN,
                    "hosts",
                    f"{host}: Engram's entries are missing or out of date in {', '.join(stale)}",
                    f"`engram connect {host}"
                    f"{' --with-hooks' if hooks else ''}` (backs the files up first)",
                )
            )
        else:
            found.append(Finding(OK, "hosts", f"{host}: {what} connected"))
    return found


def check_spool(settings: Settings) -> Findings:
    from engram.agents.hook import spool_for

    spool = spool_for(settings)
    waiting, counters = len(spool.pending()), spool.counters()
    lost = counters["droppedFull"] + counters["droppedExpired"] + counters["unreadable"]
    if lost:
        return [
            Finding(
                WARN,
                "spool",
                f"the hook spool dropped {lost} events (full, expired or unreadable)",
                "`engram capture` shows why; keep the gateway running",
            )
        ]
    if waiting:
        return [
            Finding(
                WARN,
                "spool",
                f"{waiting} events wait in the hook spool",
                "`engram capture --drain` sends them once the gateway answers",
            )
        ]
    return [Finding(OK, "spool", "the hook spool is empty")]


def versions() -> Findings:
    from importlib.metadata import PackageNotFoundError, version

    from engram import __version__

    parts = [f"engram {__version__}", f"python {sys.version.split()[0]}"]
    for package in ("celery", "flask", "sqlalchemy", "chromadb", "mcp"):
        try:
            parts.append(f"{package} {version(package)}")
        except PackageNotFoundError:
            parts.append(f"{package} missing")
    return [Finding(INFO, "versions", ", ".join(parts))]


def run(args: argparse.Namespace) -> tuple[Findings, int]:
    try:
        settings = settings_for(args)
    except SettingsError as exc:
        return [
            Finding(FAIL, "config", str(exc), "fix the setting named (docs/configuration.md)")
        ], 0
    found = [
        Finding(
            OK,
            "config",
            f"settings parsed ({'embedded' if settings.embedded else 'distributed'} mode)",
        )
    ]
    checks: list[Callable[[], Findings]] = [
        lambda: check_dirs(settings),
        lambda: check_disk(settings),
        lambda: check_store(settings),
        lambda: check_broker_and_workers(settings),
        lambda: check_gateway(settings, args),
        lambda: check_vectors(settings),
        lambda: check_hosts(settings),
        lambda: check_spool(settings),
        versions,
    ]
    started = time.monotonic()
    for check in checks:
        found += check()
    return found, round((time.monotonic() - started) * 1000)


def render(found: Findings) -> str:
    marks = {OK: "ok  ", WARN: "WARN", FAIL: "FAIL", INFO: "info"}
    lines = []
    for f in found:
        lines.append(f"{marks[f.level]}  {f.component + ':':<10} {f.what}")
        if f.fix and f.level in (WARN, FAIL, INFO):
            lines.append(f"{'':<16} fix: {f.fix}")
    failed = sum(f.level == FAIL for f in found)
    warned = sum(f.level == WARN for f in found)
    lines.append("")
    lines.append(
        "All checks passed." if not (failed or warned) else f"{failed} failed, {warned} warning(s)."
    )
    return "\n".join(lines)


def cmd_doctor(args: argparse.Namespace) -> int:
    found, took_ms = run(args)
    if args.json:
        print(json.dumps({"findings": [dataclasses.asdict(f) for f in found], "ms": took_ms}))
    else:
        print(render(found))
    return EXIT_FAILED if any(f.level == FAIL for f in found) else EXIT_OK


def add_commands(sub: Any, common: Any, client_args: Any) -> dict[str, Any]:
    p = sub.add_parser(
        "doctor",
        help="check the whole set-up and say what to fix",
        description="Check configuration, data and config dirs and their permissions, disk, "
        "the store and its schema, the broker and which worker consumes each queue "
        "(distributed mode), the gateway and every problem its status names, the embedder "
        "and Chroma, the agent hosts `engram connect` wrote to (are Engram's MCP and hook "
        "entries still there?), the hook spool, and versions. Each finding comes with its fix. "
        "Reads only: it writes, migrates and starts nothing. Exit code 0 when nothing failed "
        "(warnings allowed), 1 when something failed.",
    )
    common(p)
    client_args(p)
    p.add_argument("--json", action="store_true", help="print the findings as JSON")
    return {"doctor": cmd_doctor}
