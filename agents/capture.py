"""`engram capture`: show the hook spool (what waits, what was dropped or refused) and send it.

Also `python -m engram.agents.capture --drain-quietly`, the detached child a hook starts to drain the
spool after the gateway took an event (no output; exits at once when another drain runs).
"""

from __future__ import annotations

import sys
import time
from typing import Any

from engram.wire import error_message

HOOK_HELP = """\
Run by an agent host on its hook events: reads the host's JSON payload on stdin, sends the event
to the gateway and prints what the host expects (the memory context at session start). Always
exits 0 and never holds the agent up longer than ENGRAM_HOOK_TIMEOUT_SECONDS; when the gateway
cannot take the event it is spooled (see `engram capture`). `engram connect HOST --with-hooks`
writes the hook config; docs/hosts.md lists every host and event."""


def add_commands(sub: Any, common: Any, client_args: Any) -> dict[str, Any]:
    p = sub.add_parser(
        "hook", help="capture one agent hook event (run by the host)", description=HOOK_HELP
    )
    p.add_argument(
        "host", metavar="HOST", help="the host, e.g. claude-code (`engram hook --help` lists them)"
    )
    p.add_argument(
        "event", metavar="EVENT", help="the host's own hook event name, e.g. PostToolUse"
    )

    p = sub.add_parser(
        "capture",
        help="show the offline spool of hook events; --drain sends it",
        description="Show what the hook CLI spooled while the gateway was down, "
        "slow or full: events waiting, events dropped (spool full or too old) "
        "and events the gateway refused for good, with the reason. --drain sends "
        "the waiting events now, in order (replays are safe: the gateway "
        "deduplicates on eventId).",
    )
    common(p)
    client_args(p)
    p.add_argument("--drain", action="store_true", help="send the waiting events now")
    p.add_argument(
        "--show",
        type=int,
        default=10,
        metavar="N",
        help="list the N oldest waiting and N newest refused events (default 10)",
    )
    return {"hook": cmd_hook, "capture": cmd_capture}


def cmd_hook(args: Any) -> int:
    from engram.agents.hook import main

    return main([args.host, args.event])


def cmd_capture(args: Any) -> int:
    from engram.agents.hook import gateway_for, spool_for
    from engram.settings import load_settings, settings_for

    settings = settings_for(args)
    if args.url:
        settings = load_settings(
            overrides={
                "data_dir": settings.data_dir,
                "config_dir": settings.config_dir,
                "url": args.url,
            }
        )
    spool = spool_for(settings)
    if args.drain:
        gateway = gateway_for(settings)
        total = len(spool.pending())
        if total == 0:
            print("spool: nothing waiting")
        else:
            print(f"draining {total} spooled request(s) to {gateway.url} ...", file=sys.stderr)

            def progress(done: int, of: int) -> None:
                if done % 100 == 0 or done == of:
                    print(f"  {done}/{of}", file=sys.stderr)

            counts = spool.drain(gateway, wait=True, progress=progress)
            assert counts is not None  # wait=True always gets the lock
            print(
                f"sent {counts['sent']}, already stored {counts['duplicates']}, refused "
                f"{counts['rejected']}, expired {counts['expired']}, unreadable "
                f"{counts['unreadable']}, still waiting {counts['left']}"
            )
            if counts["left"]:
                print(
                    f"engram: the gateway at {gateway.url} did not take every event; they "
                    "stay spooled.\n  Check it with `engram status`, then run `engram "
                    "capture --drain` again.",
                    file=sys.stderr,
                )
                return 1
    print(render(spool, settings.data_dir / "spool", args.show))
    return 0


def render(spool: Any, directory: Any, show: int) -> str:
    pending = spool.pending()
    counters = spool.counters()
    rejected = spool.rejected_records()
    lines = [
        f"Spool {directory}:",
        f"  waiting:  {len(pending)} request(s)",
        f"  dropped:  {counters['droppedFull']} (spool full, ENGRAM_SPOOL_MAX_BYTES), "
        f"{counters['droppedExpired']} (older than ENGRAM_SPOOL_MAX_AGE_HOURS), "
        f"{counters['unreadable']} (torn lines: a hook killed while writing)",
        f"  refused:  {counters['rejected']} (kept in {directory / 'rejected.jsonl'})",
    ]
    for record in pending[:show]:
        lines.append(f"    waiting  {_when(record.get('spooledAt'))}  {_describe(record)}")
    for record in rejected[-show:]:
        reason = error_message(int(record.get("status") or 0), record.get("answer"))
        lines.append(
            f"    refused  {_when(record.get('rejectedAt'))}  {_describe(record)}  {reason}"
        )
    if pending:
        lines.append(
            "Send them with `engram capture --drain` (a hook also drains the spool "
            "after the gateway takes an event)."
        )
    return "\n".join(lines)


def _describe(record: dict[str, Any]) -> str:
    body: dict[str, Any] = record["body"] if isinstance(record.get("body"), dict) else {}
    what = body.get("hookType") or record.get("path")
    tool = f" {body['toolName']}" if body.get("toolName") else ""
    return (
        f"{record.get('method')} {record.get('path')}  {body.get('host', '')} {what}{tool} "
        f"session {body.get('sessionId', '?')}"
    )


def _when(stamp: Any) -> str:
    if not isinstance(stamp, (int, float)):
        return "?"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(stamp))


def drain_quietly() -> int:
    """The detached drain a hook starts: no output, never waits for another drain."""
    from engram.agents.hook import gateway_for, spool_for
    from engram.settings import SettingsError, load_settings

    try:
        settings = load_settings()
        spool, gateway = spool_for(settings), gateway_for(settings)
        # A hook may append just as a running drain finds the spool empty and before it lets
        # go of the lock (its own drain then exits at once): look again after it is done.
        for _ in range(3):
            counts = spool.drain(gateway, wait=False)
            if counts is not None and counts["left"] or not spool.has_events():
                break
            time.sleep(0.2)
    except (SettingsError, ValueError, OSError):
        return 1  # the next hook or `engram capture --drain` tries again
    return 0


if __name__ == "__main__":
    if sys.argv[1:] == ["--drain-quietly"]:
        sys.exit(drain_quietly())
    print(
        "usage: python -m engram.agents.capture --drain-quietly  (use `engram capture`)",
        file=sys.stderr,
    )
    sys.exit(2)
