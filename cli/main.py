"""The `engram` command line. Heavy imports happen inside each command, so `engram --help`
and the hook path stay fast."""

from __future__ import annotations

import argparse
import importlib
import json
import shutil
import sys
from pathlib import Path
from typing import Any

from engram import __version__
from engram.client import client_for
from engram.settings import Settings, SettingsError, settings_for

EXIT_OK, EXIT_FAILURE, EXIT_USAGE = 0, 1, 2
IMPORT_CHUNK_ITEMS = 200
"""Items `engram import` sends per request: the gateway parses and validates a request's JSON in
one go, holding the interpreter meanwhile (2,000 realistic observations are ~3 MB)."""

MCP_HELP = """\
Run Engram's MCP server over stdio, for an MCP client (Claude Code, Claude Desktop, Cursor, Codex,
Gemini CLI, Cline, Zed, Goose, ...) that starts it as a subprocess; `engram connect HOST` writes
the client's config. Tools call the gateway at ENGRAM_URL (default the local server) with the
secret from the config dir (sent only to loopback) or ENGRAM_SECRET; when no gateway answers, the
server opens the store itself so save and recall still work, and every result says which mode
answered ("gateway" or "local"). ENGRAM_MCP_TOOLS=core|all picks how many tools are listed.
docs/mcp.md has each client's config block and the tool reference."""

DESCRIPTION = """\
Engram: persistent, searchable memory for coding agents.

Start here:  engram serve        (embedded: one process, no other server needed)
Then:        engram demo         (seeds example sessions and shows recall)
             engram status       (what is wrong and how to fix it)
Connect:     engram connect claude-code --with-hooks   (or codex, cursor, ...: --list)
Settings come from ENGRAM_* variables and <config dir>/engram.env; see docs/configuration.md.
"""


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--data-dir",
        metavar="DIR",
        help="where the store lives (default: ENGRAM_DATA_DIR or the platform data dir)",
    )
    parser.add_argument(
        "--config-dir",
        metavar="DIR",
        help="where the secret and engram.env live (default: ENGRAM_CONFIG_DIR "
        "or the platform config dir)",
    )


def _client_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--url", help="gateway URL (default: ENGRAM_URL or http://HOST:PORT)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="engram", description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--version", action="version", version=f"engram {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser(
        "serve",
        help="run the gateway (and, embedded, its worker)",
        description="Run the HTTP gateway under a production WSGI server "
        "(waitress). Without ENGRAM_BROKER_URL it also runs an in-process "
        "worker and scheduler: nothing else to start. Ctrl-C stops it cleanly.",
    )
    _common(p)
    p.add_argument("--host", help="address to bind (default 127.0.0.1: loopback only)")
    p.add_argument("--port", type=int, help="TCP port (default 8737; 0 picks a free one)")

    p = sub.add_parser(
        "worker",
        help="run a Celery worker pool (distributed mode)",
        description="Run a worker pool consuming the broker at ENGRAM_BROKER_URL. "
        "Start as many as you like, on any machine that reaches the broker and "
        "the store.",
    )
    _common(p)
    p.add_argument(
        "--concurrency",
        "-c",
        type=int,
        help="worker processes (default ENGRAM_WORKER_CONCURRENCY; for a pool of only the llm "
        "queue, ENGRAM_LLM_CONCURRENCY)",
    )
    p.add_argument(
        "--queues",
        "-Q",
        default="capture,maintenance,embed,graph,llm",
        help="comma-separated queues to consume: capture (observe), maintenance "
        "(summaries, the sweeper), embed (vectors), graph, llm (LLM work, with "
        "ENGRAM_LLM_PROVIDERS set) (default: all). Size pools per queue so capture never "
        "waits behind derived work, e.g. `-Q capture,maintenance -c 2`, one "
        "`-Q embed,graph -c 1` per machine and `-Q llm -c N` with N the provider's "
        "concurrency limit (docs/operations.md)",
    )
    p.add_argument(
        "--pool",
        default="auto",
        choices=("auto", "prefork", "threads", "solo"),
        help="Celery pool (default auto: threads when the worker embeds, so its "
        "threads share one model in one process, or takes only the llm queue, whose "
        "tasks wait on the network; prefork otherwise)",
    )
    p.add_argument(
        "--name",
        "-n",
        default=None,
        help="worker node name (default engram-<queues>@<host>, e.g. engram-capture-maintenance@"
        "box: the same after a restart, so Flower and `celery inspect ping` know it again; give "
        "two pools with the same queues on one host their own names; %%h is the host name)",
    )

    p = sub.add_parser(
        "beat",
        help="run the scheduler (inbox sweeper) for distributed mode",
        description="Run Celery beat: schedules the inbox sweeper that "
        "re-dispatches captures whose task was lost. Run exactly one.",
    )
    _common(p)

    p = sub.add_parser(
        "status",
        help="say what is wrong and how to fix it",
        description="Ask the gateway for its status and print it readably: "
        "store, broker, workers, inbox, dead letters, indexes.",
    )
    _common(p)
    _client_args(p)
    p.add_argument("--json", action="store_true", help="print the raw JSON report")

    p = sub.add_parser(
        "export",
        help="write the whole store as JSON",
        description="Export sessions, observations and memories as one JSON "
        "document (through the running gateway).",
    )
    _common(p)
    _client_args(p)
    p.add_argument("--output", "-o", metavar="FILE", help="file to write (default: stdout)")

    p = sub.add_parser(
        "import",
        help="load an export document",
        description="Import an export document through the running gateway.",
    )
    _common(p)
    _client_args(p)
    p.add_argument("file", metavar="FILE", help="export document ('-' for stdin)")
    p.add_argument(
        "--strategy",
        default="merge",
        choices=("merge", "replace", "skip"),
        help="merge: imported data wins, memories keep history; replace: empty the "
        "store first; skip: keep what exists (default merge)",
    )

    p = sub.add_parser(
        "demo",
        help="seed example coding sessions and show recall",
        description="Send a few realistic coding sessions through the capture "
        "path of a running gateway (or of one started for the demo), wait until "
        "they are stored, then search them. Uses the project 'engram-demo'.",
    )
    _common(p)
    _client_args(p)

    p = sub.add_parser(
        "mcp", help="run the MCP server over stdio (started by MCP clients)", description=MCP_HELP
    )
    _common(p)
    _client_args(p)
    p.add_argument(
        "--tools", choices=("core", "all"), help="tools to list (default ENGRAM_MCP_TOOLS, core)"
    )

    p = sub.add_parser(
        "usage",
        help="LLM spend by day and task, against the daily budget",
        description="What LLM work cost, read from the store's ledger (the llm_usage table "
        "every process counts into, from each response's usage): per UTC day, task, "
        "provider and model, the calls, bad answers, failures, calls the budget refused, "
        "work dropped (backlog full or too old), tokens and USD; then today against the "
        "daily limits. With no provider set (ENGRAM_LLM_PROVIDERS) nothing is ever spent.",
    )
    _common(p)
    p.add_argument(
        "--days", type=int, default=7, metavar="N", help="the last N days, today included (7)"
    )
    p.add_argument("--json", action="store_true", help="print the rows and today's budget as JSON")

    p = sub.add_parser(
        "open",
        help="open the web viewer in a browser (signed in by a one-time link)",
        description="Ask the running gateway for a one-time sign-in link and open it in this "
        "machine's browser. The link works once, for five minutes: it gives the browser an "
        "HttpOnly cookie (ENGRAM_VIEWER_SESSION_HOURS), so the bearer secret never reaches "
        "the page. With --print (or where no browser can be started) the link is only printed, "
        "to open elsewhere, e.g. through an SSH tunnel.",
    )
    _common(p)
    _client_args(p)
    p.add_argument("--print", action="store_true", help="print the link, do not start a browser")

    _add_bench_parser(sub)
    for module in COMMAND_MODULES:
        COMMANDS.update(importlib.import_module(module).add_commands(sub, _common, _client_args))
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not args.command:
        parser.print_help()
        return EXIT_USAGE
    from engram.client import GatewayError, Unreachable

    try:
        handler = COMMANDS[args.command]
        return handler(args)
    except SettingsError as exc:
        print(f"engram: configuration error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except Unreachable as exc:
        print(
            f"engram: the gateway is not answering ({exc}).\n"
            "  Start it with `engram serve`, or point --url / ENGRAM_URL at it.",
            file=sys.stderr,
        )
        return EXIT_FAILURE
    except GatewayError as exc:
        print(f"engram: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    except KeyboardInterrupt:
        return 130


def cmd_serve(args: argparse.Namespace) -> int:
    from engram.cli.server import serve, setup_logging

    settings = settings_for(args, host=args.host, port=args.port)
    setup_logging(settings.log_level, settings.log_format)
    try:
        return serve(settings)
    except OSError as exc:
        print(
            f"engram: cannot listen on {settings.host}:{settings.port}: {exc.strerror or exc}."
            "\n  Is another `engram serve` running? Pick another port with --port or "
            "ENGRAM_PORT.",
            file=sys.stderr,
        )
        return EXIT_FAILURE


def _distributed_only(settings: Settings, what: str) -> int | None:
    if settings.embedded:
        print(
            f"engram: `engram {what}` is for distributed mode and needs ENGRAM_BROKER_URL "
            "(e.g. redis://127.0.0.1:6379/0).\n  In the embedded default, `engram serve` "
            "runs its own worker and scheduler.",
            file=sys.stderr,
        )
        return EXIT_USAGE
    return None


def _celery_for(settings: Settings, queues: list[str] | None = None) -> Any:
    """Logging, dirs, migrations and the configured Celery app, for worker and beat."""
    from engram.cli.server import prepare_dirs, setup_logging
    from engram.memory import bound_heap
    from engram.store import Store
    from engram.tasks import runtime
    from engram.tasks.app import configure

    setup_logging(settings.log_level, settings.log_format)
    prepare_dirs(settings, private=True)
    bound_heap()
    Store.open(settings.database_url).close()  # migrate once, before a pool forks
    runtime.install(runtime.Services(settings, queues=queues))
    return configure(settings)


def default_node_name(queues: list[str]) -> str:
    """``engram-<queues>@%h``: stable across restarts (a pid in the name left Flower one dead
    worker per restart and no name a health check could ping), distinct per pool on a host."""
    return f"engram-{'-'.join(queues)}@%h"


def cmd_worker(args: argparse.Namespace) -> int:
    settings = settings_for(args)
    refused = _distributed_only(settings, "worker")
    if refused is not None:
        return refused
    from engram.tasks.app import ALL_QUEUES, EMBED_QUEUE, LEGACY_QUEUES, LLM_QUEUE

    queues = [q.strip() for q in args.queues.split(",") if q.strip()]
    unknown = sorted(set(queues) - set(ALL_QUEUES))
    if unknown or not queues:
        print(
            f"engram: unknown queue(s) {', '.join(unknown) or '(none given)'}; the queues are "
            f"{', '.join(q for q in ALL_QUEUES if q not in LEGACY_QUEUES)}",
            file=sys.stderr,
        )
        return EXIT_USAGE
    name = args.name or default_node_name(queues)
    if "capture" in queues:
        queues += [q for q in LEGACY_QUEUES if q not in queues]  # tasks an older gateway queued
    pool = args.pool
    if pool == "auto":
        # threads where the pool embeds (one model shared) or only waits on a provider (llm)
        embeds = EMBED_QUEUE in queues and settings.embedder != "none"
        pool = "threads" if embeds or queues == [LLM_QUEUE] else "prefork"
    # an llm-only pool runs as many calls at once as the provider allows
    concurrency = args.concurrency or (
        settings.llm_concurrency if queues == [LLM_QUEUE] else settings.worker_concurrency
    )
    _celery_for(settings, queues).worker_main(
        [
            "worker",
            "--loglevel",
            settings.log_level,
            "--pool",
            pool,
            "--concurrency",
            str(concurrency),
            "--queues",
            ",".join(queues),
            "--hostname",
            name,
            "--without-gossip",
            "--without-mingle",
        ]
    )
    return EXIT_OK


def cmd_beat(args: argparse.Namespace) -> int:
    settings = settings_for(args)
    refused = _distributed_only(settings, "beat")
    if refused is not None:
        return refused
    _celery_for(settings).start(
        [
            "beat",
            "--loglevel",
            settings.log_level,
            "--schedule",
            str(settings.data_dir / "beat-schedule"),
        ]
    )
    return EXIT_OK


def cmd_status(args: argparse.Namespace) -> int:
    from engram.client import Unreachable

    settings = settings_for(args)
    client = client_for(args, settings)
    spool, spool_waiting = local_spool(settings)
    try:
        status_code, report = client.request("GET", "/v1/status")
    except Unreachable:
        if spool:
            print(spool, file=sys.stderr)
        raise
    if status_code == 401:
        if client.sends_secret:
            print(
                f"engram: the gateway at {client.base_url} refused the secret.\n  Use the "
                f"secret in {settings.secret_file} or set ENGRAM_SECRET to the server's.",
                file=sys.stderr,
            )
        else:
            print(
                f"engram: no secret was sent to {client.base_url}: the one in the config dir "
                "is only sent to loopback URLs.\n  Set ENGRAM_SECRET to the server's secret.",
                file=sys.stderr,
            )
        return EXIT_FAILURE
    if args.json:
        print(json.dumps(report, indent=2))
        return EXIT_OK if report.get("ok") else EXIT_FAILURE
    print(render_status(report, client.base_url))
    if spool:
        print(spool)
    return EXIT_OK if report.get("ok") and not spool_waiting else EXIT_FAILURE


def local_spool(settings: Settings) -> tuple[str, int]:
    """What this machine's hook spool holds, when it holds or lost anything: the spool is on the
    agent's machine, not the gateway's, so the CLI reports it, not /v1/status."""
    from engram.agents.hook import spool_for

    spool = spool_for(settings)
    waiting, counters = len(spool.pending()), spool.counters()
    dropped = counters["droppedFull"] + counters["droppedExpired"] + counters["unreadable"]
    if not (waiting or dropped or counters["rejected"]):
        return "", 0
    return (
        f"\nHook spool ({settings.data_dir / 'spool'}): {waiting} waiting, {dropped} "
        f"dropped, {counters['rejected']} refused.\n    fix: `engram capture` shows why; "
        "`engram capture --drain` sends what waits."
    ), waiting


def render_status(report: dict[str, Any], url: str) -> str:
    verdict = "OK" if report.get("ok") else "NEEDS ATTENTION"
    lines = [
        f"Engram {report.get('version', '?')} at {url}: {verdict}",
        f"  mode:         {report.get('mode')}",
    ]
    store = report.get("store", {})
    lines.append(
        f"  store:        {'ok' if store.get('ok') else 'DOWN'} "
        f"({store.get('dialect', '?')}, schema v{store.get('schemaVersion', '?')})"
    )
    if not store.get("ok"):
        lines.append(f"                {store.get('error', '')}")
    # With the store down the report stops there: the rest cannot be known.
    broker = report.get("broker")
    if broker:
        lines.append(
            f"  broker:       {'ok' if broker.get('ok') else 'DOWN'} ({broker.get('url')})"
        )
    workers = report.get("workers")
    if workers is not None:
        lines.append(
            f"  workers:      {workers.get('alive', 0)} answering "
            f"{', '.join(workers.get('names', []))}".rstrip()
        )
    inbox = report.get("inbox")
    if inbox:
        lines.append(
            f"  inbox:        {inbox.get('waiting', 0)} waiting of "
            f"{inbox.get('capacity')} (pending {inbox.get('pending', 0)}, processing "
            f"{inbox.get('processing', 0)}, retrying {inbox.get('retrying', 0)})"
        )
        oldest = inbox.get("oldestWaitingSeconds") or 0
        if oldest:
            lines[-1] += f", oldest {oldest:.0f}s"
        lines.append(f"  dead letters: {report.get('deadLetters', 0)}")
    derived = report.get("derived") or {}
    if derived:
        lines.append(
            "  derived lag:  "
            + ", ".join(
                f"{target} {lag.get('pending', 0)} queued"
                + (f" (oldest {lag.get('lagSeconds', 0):.0f}s)" if lag.get("pending") else "")
                + (f", waiting for the {lag['waitingFor']} to end" if lag.get("waitingFor") else "")
                for target, lag in derived.items()
            )
        )
    memory = report.get("memory") or {}
    for who, mem in (memory.get("processes") or {}).items():
        lines.append(
            f"  memory:       {who} {mem.get('rssMb', 0):.0f} MB (peak "
            f"{mem.get('peakRssMb', 0):.0f}) of {memory.get('budgetMb')} MB"
        )
    llm = report.get("llm")
    if llm is not None:
        if not llm.get("providers"):
            lines.append(f"  llm:          {llm.get('state', 'off')}")
        else:
            spend, backlog = llm.get("budget") or {}, llm.get("backlog") or {}
            lines.append(
                f"  llm:          {', '.join(llm['providers'])}; today ${spend.get('usd', 0):.2f} "
                f"of ${spend.get('limitUsd', 0):.2f}, {spend.get('tokens', 0):,} of "
                f"{spend.get('limitTokens', 0):,} tokens ({spend.get('state')}); "
                f"{backlog.get('pending', 0)} waiting (`engram usage` for the days)"
            )
    sweeper = report.get("sweeper")
    if sweeper:
        ago = sweeper.get("lastSweepSecondsAgo")
        lines.append(
            f"  sweeper:      {'never ran' if ago is None else f'last ran {ago:.0f}s ago'}"
        )
    kw = report.get("indexes", {}).get("keyword", {})
    if kw:
        lines.append(
            f"  indexed:      {kw.get('observations', 0)} observations, "
            f"{kw.get('memories', 0)} memories, {kw.get('sessions', 0)} sessions "
            f"({kw.get('backend')}: {kw.get('keywordDocs', 0)} docs)"
        )
    graph = report.get("indexes", {}).get("graph")
    if graph:
        lines.append(
            f"  graph:        {graph.get('entities', 0)} entities, "
            f"{graph.get('edges', 0)} relations ({graph.get('pending', 0)} documents "
            "queued)"
        )
    vec = report.get("indexes", {}).get("vector", {})
    if vec.get("enabled") and vec.get("ok"):
        backfill = vec.get("backfill", {})
        progress = (
            ""
            if backfill.get("done")
            else f", back-fill {backfill.get('progress', 0) * 100:.0f}% ({vec.get('pending')} queued)"
        )
        lines.append(
            f"  vectors:      {vec.get('indexed', 0)} of {vec.get('documents', 0)} "
            f"docs in {vec.get('collection')}{progress}"
        )
    elif vec.get("enabled"):
        lines.append(f"  vectors:      OFF ({vec.get('problem')})")
    else:
        lines.append("  vectors:      off (ENGRAM_EMBEDDER=none)")
    ranker = report.get("reranker", {})
    if ranker.get("problem"):
        lines.append(f"  reranker:     OFF ({ranker['problem']})")
    elif ranker.get("kind") not in (None, "off"):
        reads = (
            f", reads {ranker['reads']} ({ranker['passageMs']} ms a passage, budget "
            f"{ranker['budgetMs']:g} ms)"
            if "reads" in ranker and "budgetMs" in ranker
            else ""
        )
        lines.append(
            f"  reranker:     {ranker.get('name', ranker['kind'])}, top {ranker.get('depth')}"
            f" of each search{reads}"
        )
    problems = report.get("problems", [])
    if problems:
        lines.append("")
        lines.append("Problems:")
        for problem in problems:
            lines.append(f"  - [{problem['component']}] {problem['problem']}")
            lines.append(f"    fix: {problem['fix']}")
    return "\n".join(lines)


def cmd_export(args: argparse.Namespace) -> int:
    """The gateway streams the document; it is written as it arrives (a store of any size),
    to ``--output`` through a ``.partial`` file that is checked, counted and then renamed."""
    from engram.transfer import ExportFile, InvalidImport

    settings = settings_for(args)
    client = client_for(args, settings)
    if not args.output:
        client.download("/v1/export", sys.stdout.buffer)
        sys.stdout.buffer.flush()
        return EXIT_OK
    target = Path(args.output)
    partial = target.with_name(target.name + ".partial")
    try:
        with partial.open("wb") as out:
            client.download("/v1/export", out)
        exported = ExportFile(partial)
        exported.check("merge")
    except (InvalidImport, ValueError) as exc:
        partial.unlink(missing_ok=True)
        print(
            f"engram: the export arrived incomplete or malformed ({exc}); run it again",
            file=sys.stderr,
        )
        return EXIT_FAILURE
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    partial.replace(target)
    counts = exported.counts
    print(
        f"exported {counts['sessions']} sessions, {counts['observations']} observations, "
        f"{counts['memories']} memories to {args.output}",
        file=sys.stderr,
    )
    return EXIT_OK


def cmd_import(args: argparse.Namespace) -> int:
    import tempfile

    from engram.transfer import ExportFile, InvalidImport

    settings = settings_for(args)
    with tempfile.TemporaryDirectory(prefix="engram-import-") as spool:
        path = Path(args.file)
        try:
            if args.file == "-":  # read twice (checked, then sent), so spooled to disk first
                path = Path(spool) / "stdin.json"
                with path.open("wb") as out:
                    shutil.copyfileobj(sys.stdin.buffer, out)
            export = ExportFile(path)
            total = export.check(args.strategy)  # whole, before anything is sent
        except OSError as exc:
            print(f"engram: cannot read {args.file}: {exc.strerror or exc}", file=sys.stderr)
            return EXIT_USAGE
        except InvalidImport as exc:
            problems = "; ".join(f"{k}: {v}" for k, v in list(exc.fields.items())[:5])
            print(f"engram: {args.file} is not an Engram export: {problems}", file=sys.stderr)
            return EXIT_USAGE
        except ValueError as exc:
            print(f"engram: {args.file} is not JSON: {exc}", file=sys.stderr)
            return EXIT_USAGE
        client = client_for(args, settings)
        counts: dict[str, int] = {}
        done = 0
        try:
            for part, strategy, size in export.parts(args.strategy, IMPORT_CHUNK_ITEMS):
                # Bounded requests: each is a few short transactions on the server, so capture
                # keeps flowing between them, and Ctrl-C stops between two.
                result = client.call("POST", "/v1/import", {"data": part, "strategy": strategy})
                for key, value in result["imported"].items():
                    counts[key] = counts.get(key, 0) + int(value)
                done += size
                if total > IMPORT_CHUNK_ITEMS:
                    print(f"  {done}/{total} items", file=sys.stderr)
        except KeyboardInterrupt:
            again = "merge" if args.strategy == "replace" else args.strategy
            print(
                f"engram: import stopped after {done}/{total} items (what was sent is stored); "
                f"run `engram import --strategy {again} {args.file}` to complete it",
                file=sys.stderr,
            )
            return 130
    print(
        f"imported ({args.strategy}): {counts['sessions']} sessions, "
        f"{counts['observations']} observations, {counts['memories']} memories; "
        f"{counts['updated']} updated, {counts['skipped']} skipped"
    )
    return EXIT_OK


def cmd_mcp(args: argparse.Namespace) -> int:
    overrides: dict[str, Any] = {}
    if args.url:
        overrides["url"] = args.url
    if args.tools:
        overrides["mcp_tools"] = args.tools
    settings = settings_for(args, **overrides)
    try:
        from engram.agents.mcp_server import serve_stdio
    except ImportError as exc:  # the `mcp` SDK is a dependency; a broken install says so
        print(
            f"engram mcp: the MCP SDK cannot be imported ({exc}); reinstall Engram "
            "(`make serve` or pip install -e .)",
            file=sys.stderr,
        )
        return EXIT_FAILURE
    from engram.cli.server import local_gateway

    return serve_stdio(settings, local_gateway)


def cmd_demo(args: argparse.Namespace) -> int:
    from engram.cli.demo import run_demo

    return run_demo(settings_for(args), args.url)


def _add_bench_parser(sub: Any) -> None:
    from engram.bench import options  # argparse only; the harness loads lazily in cmd_bench

    p = sub.add_parser(
        "bench",
        help="measure retrieval quality on public benchmarks",
        description=options.DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    options.add_arguments(p)


def cmd_open(args: argparse.Namespace) -> int:
    import webbrowser

    from engram.client import client_for

    settings = settings_for(args)
    client = client_for(args, settings, timeout=10.0)
    if not client.sends_secret:
        print(
            "engram: no secret to send to this gateway (the secret goes to loopback only unless "
            "ENGRAM_SECRET is set): set ENGRAM_SECRET, or run `engram open` on the gateway's "
            "machine",
            file=sys.stderr,
        )
        return EXIT_USAGE
    link = client.base_url + "/" + client.call("POST", "/v1/viewer/links")["path"]
    print(f"Engram viewer (one-time link, valid 5 minutes): {link}")
    if not args.print and not webbrowser.open(link):
        print("  (no browser could be started here: open the link yourself)")
    return EXIT_OK


def cmd_usage(args: argparse.Namespace) -> int:
    import time

    from engram.llm.chain import budget_from_settings
    from engram.store import Store

    if args.days < 1:
        print("engram: --days must be at least 1", file=sys.stderr)
        return EXIT_USAGE
    settings = settings_for(args)
    store = Store.open(settings.database_url)
    try:
        budget = budget_from_settings(settings, store)
        since = time.strftime("%Y-%m-%d", time.gmtime(time.time() - 86400 * (args.days - 1)))
        rows = budget.ledger.rows(since)
        today = budget.report()
    finally:
        store.close()
    if args.json:
        print(json.dumps({"rows": rows, "today": today}, indent=2))
        return EXIT_OK
    if not settings.llm_providers:
        print("LLM work is off (ENGRAM_LLM_PROVIDERS is empty): no call is made, nothing spent.")
    if not rows:
        print(f"No LLM work counted since {since}.")
    else:
        head = (
            "day",
            "task",
            "provider",
            "model",
            "calls",
            "bad",
            "failed",
            "refused",
            "dropped",
            "tokens in",
            "tokens out",
            "USD",
        )
        table = [
            (
                r["day"],
                r["task"],
                r["provider"] or "-",
                r["model"] or "-",
                r["calls"],
                r["invalid"],
                r["failures"],
                r["refused"],
                r["dropped"],
                f"{r['input_tokens']:,}",
                f"{r['output_tokens']:,}",
                f"{r['usd']:.4f}",
            )
            for r in rows
        ]
        widths = [max(len(str(x)) for x in column) for column in zip(head, *table, strict=True)]
        for line in (head, tuple("-" * w for w in widths), *table):
            print(
                "  ".join(
                    str(x).rjust(w) if i >= 4 else str(x).ljust(w)
                    for i, (x, w) in enumerate(zip(line, widths, strict=True))
                )
            )
    print(
        f"Today ({today['day']}, UTC): ${today['usd']:.4f} of ${today['limitUsd']:.2f}, "
        f"{today['tokens']:,} of {today['limitTokens']:,} tokens ({today['state']})"
    )
    for name, part in today["providers"].items():
        limits = []
        if part.get("limitUsd"):
            limits.append(f"of ${part['limitUsd']:.2f}")
        if part.get("limitTokens"):
            limits.append(f"of {part['limitTokens']:,} tokens")
        print(
            f"  {name}: ${part['usd']:.4f}, {part['tokens']:,} tokens {' '.join(limits)} "
            f"({part['state']})"
        )
    return EXIT_OK


def cmd_bench(args: argparse.Namespace) -> int:
    from engram.bench.command import main as bench_main

    return bench_main(args)


COMMAND_MODULES = (
    "engram.agents.capture",
    "engram.agents.connect",
    "engram.watcher.commands",
    "engram.watcher.memsync_cli",
    "engram.cli.doctor",
)
"""Modules adding commands of their own: each has ``add_commands(sub, common, client_args)``
(``common`` and ``client_args`` add the shared --data-dir/--config-dir and --url options) returning
{command name: handler(args) -> exit code}. Heavy imports stay inside the handlers."""

COMMANDS: dict[str, Any] = {
    "serve": cmd_serve,
    "worker": cmd_worker,
    "beat": cmd_beat,
    "status": cmd_status,
    "export": cmd_export,
    "import": cmd_import,
    "mcp": cmd_mcp,
    "demo": cmd_demo,
    "bench": cmd_bench,
    "usage": cmd_usage,
    "open": cmd_open,
}


if __name__ == "__main__":
    sys.exit(main())
