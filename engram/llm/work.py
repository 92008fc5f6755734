"""LLM work on the store: a bounded, durable backlog, worked through by ``drain``.

The backlog is four targets of the derive queue: ``llm_summary`` (one row per session summary,
``engram.llm.summaries``), ``llm_graph`` (the facts of that session, ``engram.llm.graphing``),
``llm_consolidate`` (one per project and consolidation run,
``engram.llm.consolidation``) and ``llm_compress`` (one per observation of an opted-in project,
``engram.llm.records``), each row written in the transaction that stored what it is about, so a
crash loses nothing. It is bounded twice: at most ``ENGRAM_LLM_BACKLOG_MAX`` rows per task (past
it new work is dropped, counted, and its heuristic result stands) and at most
``ENGRAM_LLM_MAX_AGE_HOURS`` old (older rows are dropped when reached). Work a spent budget
refused is not kept for tomorrow: the heuristic result stands and the row goes. Only work that
failed because the providers did (down, rate-limited, circuit open) is kept and tried again,
``MAX_ATTEMPTS`` times at most, backing off. Served in the order of ``TARGETS``.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

from engram import derive
from engram.backoff import backoff_seconds
from engram.llm.chain import LLM
from engram.llm.consolidation import consolidate_with_llm
from engram.llm.graphing import extract_with_llm
from engram.llm.records import compress_with_llm
from engram.llm.summaries import summarize_with_llm
from engram.summary import summary_doc_id

if TYPE_CHECKING:
    from engram.settings import Settings
    from engram.store import Store

log = logging.getLogger("engram.llm")

SUMMARY_TARGET = "llm_summary"
GRAPH_TARGET = "llm_graph"
CONSOLIDATE_TARGET = "llm_consolidate"
COMPRESS_TARGET = "llm_compress"
TARGETS = (SUMMARY_TARGET, GRAPH_TARGET, CONSOLIDATE_TARGET, COMPRESS_TARGET)
"""In the order they are served: session summaries, a session's facts (read after its
summary), a project's consolidation, then the rewrites of single observations."""
TASK_OF = {
    GRAPH_TARGET: "graph-extract",
    SUMMARY_TARGET: "summarize",
    CONSOLIDATE_TARGET: "consolidate",
    COMPRESS_TARGET: "compress",
}
LEASE_SECONDS = 600.0
"""A claimed row is someone's for this long: longer than one call with every retry."""
MAX_ATTEMPTS = 3
RETRY_FIRST_SECONDS, RETRY_MAX_SECONDS = 60.0, 1800.0


def queue_session(conn: Any, session_id: str, settings: Settings) -> list[str]:
    """Ask for the LLM summary of a session whose heuristic summary was just stored, and for
    the facts it establishes (call in its write transaction). Returns the tasks dropped because
    their backlog is full: their heuristic results stand."""
    doc_id = summary_doc_id(session_id)
    return [
        TASK_OF[target]
        for target in (SUMMARY_TARGET, GRAPH_TARGET)
        if not _queue(conn, target, doc_id, settings)
    ]


def compresses(settings: Settings, project: str) -> bool:
    """The project opted in to LLM compression (ENGRAM_LLM_COMPRESS_PROJECTS)."""
    chosen = settings.llm_compress_projects
    return bool(settings.llm_providers) and ("*" in chosen or project in chosen)


def queue_compress(conn: Any, observation_id: str, settings: Settings) -> bool:
    """Ask for the LLM's reading of an observation just stored (call in its write transaction).
    False when the backlog is full: the heuristic record stands."""
    return _queue(conn, COMPRESS_TARGET, observation_id, settings)


def queue_consolidation(conn: Any, newest_session_id: str, settings: Settings) -> bool:
    """Ask for the LLM's consolidation pass over a project, named by its newest summarised
    session (whose summary document carries the project). False when the backlog is full."""
    return _queue(conn, CONSOLIDATE_TARGET, summary_doc_id(newest_session_id), settings)


def _queue(conn: Any, target: str, doc_id: str, settings: Settings) -> bool:
    if derive.pending(conn, target) >= settings.llm_backlog_max:
        return False
    derive.enqueue(conn, doc_id, derive.UPSERT, targets=(target,))
    return True


def drain(store: Store, llm: LLM, settings: Settings, limit: int = 1) -> int:
    """Do up to ``limit`` queued LLM work items, summaries first; returns how many were claimed
    (0: none left that is due)."""
    with store.read() as conn:  # a kick with nothing due costs one read, not a write per target
        if not derive.due(conn, TARGETS):
            return 0
    for target in TARGETS:
        with store.write(background=True) as conn:
            changes = derive.claim(conn, target, limit, LEASE_SECONDS)
        if changes:
            break
    else:
        return 0
    task = TASK_OF[target]
    for change in changes:
        age_hours = (time.time() - change.enqueued_at) / 3600
        if change.doc is None or age_hours > settings.llm_max_age_hours:
            if change.doc is not None:
                llm.ledger.add("", "", task, dropped=1)
                log.info("LLM %s of %s dropped: %.1f h old", task, change.doc_id, age_hours)
            with store.write(background=True) as conn:
                derive.done(conn, target, [change])
            continue
        if target == SUMMARY_TARGET:
            what, retry = summarize_with_llm(store, llm, change.doc.session_id or "")
        elif target == GRAPH_TARGET:
            what, retry = extract_with_llm(store, llm, change.doc.session_id or "")
        elif target == CONSOLIDATE_TARGET:
            what, retry = consolidate_with_llm(store, llm, change.doc.project)
        else:
            what, retry = compress_with_llm(store, llm, change.doc_id)
        with store.write(background=True) as conn:
            if retry and change.attempts < MAX_ATTEMPTS:
                wait = backoff_seconds(change.attempts, RETRY_FIRST_SECONDS, RETRY_MAX_SECONDS)
                derive.failed(conn, target, [change], what, wait)
            else:
                derive.done(conn, target, [change])
    return len(changes)
