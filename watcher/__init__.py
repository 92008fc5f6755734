"""``engram.watcher``: doors from files on disk into the gateway: Claude Code transcript import
(``import-jsonl``), the transcript watcher driven by declarative schemas (``watch-transcripts``)
and memory-file sync's client (``watch``).

- ``delivery``: posts events and sessions, sorts each answer into accepted / duplicate /
  rejected (permanent) / transient; atomic JSON files; the dead-letter file.
- ``claude_import``: Claude Code transcripts as the events its live hooks would have sent.
- ``schema``: the transcript-watch configuration: match rules, field specs, actions.
- ``transcripts``: the watcher: incremental reads, per-file state, one writer per host.
- ``commands``: the CLI commands.
- memory-file sync's client: ``memfiles`` finds memory files (CLAUDE.md, AGENTS.md, ...) and
  parses them into facts, ``syncer`` posts them to ``POST /v1/sync/files`` in one pass and keeps
  the state file, ``daemon`` watches the folders, ``memsync_cli`` is `engram watch`.

Every path uses ``engram.agents.contract.event_id``, so a call captured by a hook and by a
transcript is one event and the gateway stores it once.
"""
