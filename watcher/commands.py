"""CLI commands of the watcher package: ``engram import-jsonl`` and ``engram watch-transcripts``.

Heavy imports stay inside the handlers (``engram --help`` stays fast).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import signal
import sys
import threading
from pathlib import Path
from typing import Any

EXIT_OK, EXIT_FAILURE, EXIT_USAGE = 0, 1, 2
CONFIG_FILE = "transcript-watch.json"
STATE_FILE = "transcript-watch-state.json"
CONNECTED_FILE = "connected.json"

GATEWAY_DOWN = (
    "  Start it with `engram serve`, or point --url / ENGRAM_URL at it; a re-run "
    "continues where this one stopped."
)


def add_commands(sub: Any, common: Any, client_args: Any) -> dict[str, Any]:
    p = sub.add_parser(
        "import-jsonl",
        help="import Claude Code transcripts (JSONL)",
        description="Send Claude Code transcripts through the capture path: prompts, tool "
        "calls and final answers, with the ids the live hooks use, so nothing is stored twice. "
        "A session the gateway already has from the live hooks gets only its tool calls. "
        "Safe to re-run: only what is new is stored. Progress goes to stderr.",
    )
    common(p)
    client_args(p)
    p.add_argument(
        "paths",
        nargs="*",
        metavar="PATH",
        help="transcript files or folders (searched recursively for *.jsonl; "
        "default ~/.claude/projects)",
    )
    p.add_argument(
        "--rescan",
        action="store_true",
        help="read every file again, even those unchanged since the last import",
    )
    p.add_argument(
        "--include-live",
        action="store_true",
        help="also import files modified in the last two minutes (by default "
        "skipped: their session is probably still running)",
    )

    p = sub.add_parser(
        "watch-transcripts",
        help="tail agent transcripts with declarative schemas",
        description="Follow the JSONL transcripts named by a transcript-watch configuration and "
        "send what its schemas map them to. Runs until Ctrl-C, or one pass with --once.",
    )
    common(p)
    client_args(p)
    p.add_argument(
        "--config",
        metavar="FILE",
        help="configuration (default ENGRAM_TRANSCRIPT_WATCH_CONFIG or "
        f"<config dir>/{CONFIG_FILE})",
    )
    p.add_argument(
        "--state",
        metavar="FILE",
        help=f"state file (default: the configuration's stateFile, else <data dir>/{STATE_FILE})",
    )
    p.add_argument(
        "--once",
        action="store_true",
        help="one pass over all matching files, then exit (for cron and tests)",
    )
    p.add_argument(
        "--status",
        action="store_true",
        help="print per-file offsets, pending calls and dead letters, then exit",
    )
    return {"import-jsonl": cmd_import_jsonl, "watch-transcripts": cmd_watch_transcripts}


def _settings_and_client(args: argparse.Namespace) -> tuple[Any, Any]:
    from engram.client import client_for
    from engram.settings import settings_for

    settings = settings_for(args)
    return settings, client_for(args, settings)


# --- import-jsonl ------------------------------------------------------------------------------


def cmd_import_jsonl(args: argparse.Namespace) -> int:
    from engram.watcher.claude_import import transcript_files
    from engram.watcher.delivery import Delivery
    from engram.watcher.importer import Importer, ImportStopped, default_root

    roots = [Path(p).expanduser() for p in args.paths] or [default_root()]
    missing = [str(p) for p in roots if not p.exists()]
    if missing:
        hint = "" if args.paths else " (no Claude Code transcripts here; pass a path)"
        print(f"engram: no such file or folder: {', '.join(missing)}{hint}", file=sys.stderr)
        return EXIT_USAGE
    files = list(transcript_files(roots))
    if not files:
        print(f"engram: no *.jsonl files under {', '.join(map(str, roots))}", file=sys.stderr)
        return EXIT_OK
    settings, client = _settings_and_client(args)
    importer = Importer(
        Delivery(client),
        settings.data_dir,
        settings.project,
        use_ledger=not args.rescan,
        include_live=args.include_live,
    )
    try:
        totals = importer.run(files)
    except ImportStopped as exc:
        totals = importer.totals
        print(f"engram: import stopped: {exc}.\n{GATEWAY_DOWN}", file=sys.stderr)
        print(f"engram: so far: {totals.line()}", file=sys.stderr)
        return EXIT_FAILURE
    for rejection in totals.rejections[:20]:
        print(f"engram: rejected: {rejection}", file=sys.stderr)
    reasons = [f"{totals.skipped_unchanged} unchanged"] if totals.skipped_unchanged else []
    if totals.skipped_live:
        reasons.append(f"{totals.skipped_live} still being written")
    skipped = f" ({', '.join(reasons)}, skipped)" if reasons else ""
    print(f"imported {totals.files} files{skipped}: {totals.line()}", file=sys.stderr)
    return EXIT_FAILURE if totals.rejected else EXIT_OK


# --- watch-transcripts -------------------------------------------------------------------------


def connected_hosts(settings: Any) -> frozenset[str]:
    """Hosts whose native hooks are connected: they capture their main sessions themselves."""
    # agents.connect grows hooks_connected(settings); until then read its file here.
    hooks_connected = getattr(
        importlib.import_module("engram.agents.connect"), "hooks_connected", None
    )
    if callable(hooks_connected):
        return frozenset(hooks_connected(settings))
    path = Path(settings.config_dir) / CONNECTED_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return frozenset()
    except (OSError, ValueError) as exc:
        print(f"engram: ignoring unreadable {path}: {exc}", file=sys.stderr)
        return frozenset()
    if not isinstance(data, dict):
        return frozenset()
    return frozenset(
        host for host, entry in data.items() if isinstance(entry, dict) and entry.get("hooks")
    )


def _config_path(args: argparse.Namespace, settings: Any) -> Path:
    chosen = args.config or settings.transcript_watch_config
    return Path(chosen).expanduser() if chosen else Path(settings.config_dir) / CONFIG_FILE


def _state_path(args: argparse.Namespace, settings: Any, config: Any) -> Path:
    chosen = args.state or config.state_file
    return Path(chosen).expanduser() if chosen else Path(settings.data_dir) / STATE_FILE


def cmd_watch_transcripts(args: argparse.Namespace) -> int:
    from engram.settings import settings_for
    from engram.watcher.delivery import DEAD_LETTER_FILE
    from engram.watcher.schema import ConfigError, load_config

    settings = settings_for(args)
    try:
        config = load_config(_config_path(args, settings))
    except ConfigError as exc:
        print(f"engram: invalid transcript-watch configuration: {exc}", file=sys.stderr)
        return EXIT_USAGE
    state_path = _state_path(args, settings, config)
    dead_letters = Path(settings.data_dir) / DEAD_LETTER_FILE
    if args.status:
        print(render_status(state_path, dead_letters))
        return EXIT_OK
    from engram.client import client_for
    from engram.watcher.delivery import Delivery
    from engram.watcher.transcripts import TranscriptWatcher, run_forever

    watcher = TranscriptWatcher(
        config,
        Delivery(client_for(args, settings)),
        state_path=state_path,
        dead_letter_path=dead_letters,
        project=settings.project,
        hooks_connected=connected_hosts(settings),
    )
    if args.once:
        totals = watcher.pass_once()
        print(
            f"watch-transcripts: {totals['files']} files, {totals['lines']} lines read"
            + (f", {totals['stalled']} waiting for the gateway" if totals["stalled"] else ""),
            file=sys.stderr,
        )
        return EXIT_FAILURE if totals["stalled"] else EXIT_OK
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    print(
        f"watch-transcripts: following {len(config.watches)} watches from {config.source} "
        f"(state {state_path}); Ctrl-C stops",
        file=sys.stderr,
    )
    with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C is the normal way to stop
        run_forever(watcher, settings.transcript_poll_seconds, stop)
    watcher.save()
    print("watch-transcripts: stopped", file=sys.stderr)
    return EXIT_OK


def render_status(state_path: Path, dead_letters: Path) -> str:
    from engram.watcher.transcripts import read_state

    state = read_state(state_path)
    lines = [f"state: {state_path}"]
    if not state["files"]:
        lines.append("  no files read yet")
    for path, entry in sorted(state["files"].items()):
        try:
            size: Any = Path(path).stat().st_size
        except OSError:
            size = "gone"
        pending = entry.get("pending") or {}
        lines.append(
            f"  {path}\n    watch {entry.get('watch')}, offset {entry.get('offset')} of {size}, "
            f"session {entry.get('sessionId') or '-'}"
            + (" (subagent)" if entry.get("subagent") else "")
            + f"\n    sent {entry.get('sent', 0)} ({entry.get('duplicates', 0)} duplicate), "
            f"pending calls {len(pending)}"
            + (f" [{', '.join(list(pending)[:5])}]" if pending else "")
            + f", dead letters {entry.get('deadLetters', 0)}, "
            f"covered by hooks {entry.get('coveredByHooks', 0)}"
        )
    count = 0
    if dead_letters.exists():
        with open(dead_letters, encoding="utf-8") as handle:
            count = sum(1 for _ in handle)
    lines.append(f"dead letters: {count} in {dead_letters}")
    return "\n".join(lines)
