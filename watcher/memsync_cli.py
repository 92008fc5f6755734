"""``engram watch``: keep the store current from native memory files (CLAUDE.md, AGENTS.md, ...).

One pass (``--once``, for cron) or a daemon: a first full pass, then watchdog events, debounced
per file, each settled change posted as one ``POST /v1/sync/files``. The gateway owns the import
ledger, never-clobber and conflict copies; this side discovers, parses and posts, and refuses to
run half-blind: a watch it cannot add (the inotify limit) stops it with a clear message.

Heavy imports (watchdog, the parsers) stay inside the handlers: ``engram --help`` stays fast.
"""

from __future__ import annotations

import argparse
import getpass
import signal
import sys
import threading
from pathlib import Path
from typing import Any

from engram.watcher.daemon import DEBOUNCE_SECONDS, Daemon
from engram.watcher.syncer import STATE_FILE, Syncer, WatchState, run_once

EXIT_USAGE = 2

DESCRIPTION = """\
Import the agents' native memory files into Engram and keep them in sync (files -> Engram).

Sources, searched recursively under each PATH (.git, node_modules, .venv and build output are
skipped):
  claude-code  CLAUDE.md, CLAUDE.local.md, .claude/**/memory/*.md
  codex        AGENTS.md
  gemini       GEMINI.md
  cursor       .cursor/rules/**/*.mdc, .cursorrules
  copilot      .github/copilot-instructions.md, .github/instructions/**/*.instructions.md

Each file becomes facts: its sections and list items, with anchors made from their headings and
first words, so editing one line re-imports one fact. The gateway keeps an import ledger (one
row per file and fact, per watched root): an unchanged file writes nothing, a memory edited in
Engram since the last import is never overwritten (the sync logs a conflict, skips the file and
keeps the file's version as a copy in the 'sync-conflict' scope). Reconcile (make the file match
the Engram edit, or paste the copy into the memory), then run once with --force.

--once: one pass, one line per changed file and a summary; exit 1 if the gateway is unreachable
or a file was refused. Without --once: a daemon; a full pass, then every change is imported once
its writes settle; a deleted file retires its memories. Linux: one inotify watch per folder under
each PATH; if the limit (fs.inotify.max_user_watches) is reached it says so and exits 1 rather
than miss changes. Ctrl-C or SIGTERM stops it. See docs/memory-file-sync.md.
"""


def add_commands(sub: Any, common: Any, client_args: Any) -> dict[str, Any]:
    p = sub.add_parser(
        "watch",
        help="sync CLAUDE.md, AGENTS.md and other memory files",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    common(p)
    client_args(p)
    p.add_argument(
        "paths",
        nargs="+",
        metavar="PATH",
        help="folders to search (a repository checkout, ~/.claude, ...)",
    )
    p.add_argument(
        "--user", default=None, help="whose memories these are (default: the OS user name)"
    )
    p.add_argument(
        "--scope", default="project", help="scope of the imported memories (default: project)"
    )
    p.add_argument(
        "--project",
        default=None,
        help="project of every PATH (default: ENGRAM_PROJECT, else each PATH's git "
        "repository name)",
    )
    p.add_argument(
        "--once",
        action="store_true",
        help="one pass over every file, a summary, then exit (for cron and checks)",
    )
    p.add_argument(
        "--force",
        action="store_true",
        help="import even over memories edited in Engram since the last import "
        "(after reconciling a conflict)",
    )
    p.add_argument(
        "--debounce",
        type=float,
        default=DEBOUNCE_SECONDS,
        metavar="SECONDS",
        help=f"quiet time before a changed file is imported (default {DEBOUNCE_SECONDS})",
    )
    return {"watch": cmd_watch}


def cmd_watch(args: argparse.Namespace) -> int:
    from engram.agents.contract import project_for
    from engram.client import client_for
    from engram.settings import settings_for

    roots = [Path(p).expanduser() for p in args.paths]
    bad = [str(p) for p in roots if not p.is_dir()]
    if bad:
        print(
            f"engram: not a folder: {', '.join(bad)} (pass the folder holding the memory files)",
            file=sys.stderr,
        )
        return EXIT_USAGE
    settings = settings_for(args)
    roots = sorted({p.resolve() for p in roots})
    configured = args.project or settings.project
    syncer = Syncer(
        client_for(args, settings),
        user=args.user or getpass.getuser(),
        scope=args.scope,
        force=args.force,
        projects={root: project_for(str(root), configured) for root in roots},
        out=sys.stderr,
        state=WatchState(settings.data_dir / STATE_FILE),
    )
    if args.once:
        return run_once(syncer, roots)
    stop = threading.Event()
    daemon = Daemon(syncer, roots, debounce=args.debounce, out=sys.stderr)

    def stopping(*_: Any) -> None:
        stop.set()
        daemon.wake()

    previous = {sig: signal.signal(sig, stopping) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        return daemon.run(stop)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
