"""``engram.watcher``: doors from files on disk into the gateway: Claude Code transcript import
(``import-jsonl``), the transcript watcher driven by declarative schemas (``watch-transcripts``)
and memory-file sync's client (``watch``).

- ``delivery``: posts events and sessions, sorts each answer into accepted / duplicate /
  rejected (permanent) / transient; atomic JSON files; the dead-letter file.
- ``claude_import``: Claude Code transcripts as the events its live hooks would have sent.
- ``schema``: the transcript-watch configuration: match rules, field specs, actions.
- ``transcripts``: the watcher: incremental reads, per-file state, one writer per host.
- ``commands``: the CLI commands.
- ``memfiles`` and ``memsync_cli``: memory files (CLAUDE.md, AGENTS.md, ...) found, parsed into
  facts and posted to ``POST /v1/sync/files``; `engram watch`.

Every path uses ``engram.agents.contract.event_id``, so a call captured by a hook and by a
transcript is one event and the gateway stores it once.
"""
