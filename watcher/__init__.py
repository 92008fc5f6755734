"""Doors from files on disk into the gateway: Claude Code transcript import (``import-jsonl``)
and the transcript watcher driven by declarative schemas (``watch-transcripts``).

- ``delivery``: posts events and sessions, sorts each answer into accepted / duplicate /
  rejected (permanent) / transient; atomic JSON files; the dead-letter file.
- ``claude_import``: Claude Code transcripts as the events its live hooks would have sent.
- ``schema``: the transcript-watch configuration: match rules, field specs, actions.
- ``transcripts``: the watcher: incremental reads, per-file state, one writer per host.
- ``commands``: the CLI commands.

Every path uses ``agents.contract.event_id``, so a call captured by a hook and by a transcript is
one event and the gateway stores it once.
"""
