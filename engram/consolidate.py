"""Consolidation: durable memories distilled from a project's recent session summaries.

Scheduled (``ENGRAM_CONSOLIDATE_INTERVAL_SECONDS``, by beat in both modes), a run takes the
projects with sessions summarised since their last consolidation (``MAX_PROJECTS`` a run, the
longest waiting first) and reads each one's last ``RECENT_SESSIONS`` summaries. Heuristics
always run, with no LLM:

- **procedure**: a tool family (tests, builds, lint, type checks) run in at least
  ``MIN_SESSIONS`` of those sessions, with its most used invocation (the program and its
  subcommand, ``compress.family_invocations``): how this project is tested or built;
- **lesson**: an error seen in at least ``MIN_SESSIONS`` sessions, with how often it was
  resolved: what keeps breaking;
- **fact**: a file changed in at least ``MIN_SESSIONS`` sessions: where the work happens.

With an LLM provider set, the run also queues one LLM item per project (``engram.llm.work``,
served after session summaries), which reads the summaries and the memories consolidated so far
and proposes facts, preferences, lessons and procedures, each with the sessions it came from.

Either way a candidate becomes a memory with ``source = "consolidate"`` and its provenance in
``meta.consolidated`` (``kind``, ``key``, ``sources``: session ids, ``by``). A candidate whose
key (heuristics: the kind and its subject) or text matches a live consolidated memory of the
project is that memory again: unchanged text is left alone, changed text becomes a new version
(``memories.new_version``), never an edit in place.

**Decay**: a consolidated memory's strength is ``(1 + uses) * 0.5 ** (idle days / half-life)``
(``ENGRAM_MEMORY_HALF_LIFE_DAYS``), where a use is being returned by search or given to a
session (``memories.touch``) and idle counts from the last use or edit. Each run evicts those
below ``EVICT_BELOW`` — a memory never used goes after two half-lives, one used three times
after four: out of search and context, kept with its versions, listed by
``GET /v1/memories?evicted=true`` and restored by ``POST /v1/memories/<id>/restore`` — and
forgets for good those evicted longer than ``ENGRAM_MEMORY_EVICTION_GRACE_DAYS``. Only
consolidated memories decay: what a person or a memory file wrote stays until it is forgotten.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from sqlalchemy import func, select

from engram import heartbeat, memories
from engram.compress import family_invocations, project_relative
from engram.schema import memories as memories_table
from engram.schema import sessions
from engram.store import iso, loads, now

if TYPE_CHECKING:
    from sqlalchemy import Connection

    from engram.store import Store

SOURCE = "consolidate"
KINDS = ("fact", "preference", "lesson", "procedure")
RECENT_SESSIONS = 20
MIN_SESSIONS = 3
MAX_PROJECTS = 5
"""Projects consolidated per run: a run's work, and its LLM calls, stay bounded."""
MAX_PER_KIND = 5
FAMILIES = {"test": "tests", "build": "builds", "lint": "lint", "typecheck": "type checks"}
EVICT_BELOW = 0.25
DAY = 86400.0
MARK = "consolidate:"
"""Heartbeat name prefix: ``consolidate:<project>`` holds when its last summary was read."""


@dataclasses.dataclass(frozen=True)
class Candidate:
    kind: str
    text: str
    sources: tuple[str, ...]
    key: str = ""  # what makes it the same memory next run (heuristics); "" = its text
    replaces: str = ""  # a memory id the LLM says this one supersedes


def mark_name(project: str) -> str:
    """The heartbeat holding a project's consolidation mark (names are at most 64 characters)."""
    name = MARK + project
    return name if len(name) <= 64 else MARK + hashlib.sha1(project.encode()).hexdigest()


def normalise(text: str) -> str:
    return re.sub(r"\s+", " ", text.strip().lower()).rstrip(".")


def due_projects(conn: Connection, limit: int = MAX_PROJECTS) -> list[tuple[str, float]]:
    """(project, newest summary's end) for projects summarised since their last consolidation,
    the longest waiting first."""
    rows = conn.execute(
        select(sessions.c.project, func.max(sessions.c.ended_at))
        .where(sessions.c.summary_json.is_not(None), sessions.c.ended_at.is_not(None))
        .group_by(sessions.c.project)
    ).all()
    due = []
    for project, newest in rows:
        mark = heartbeat.last(conn, mark_name(project))
        read_to = float(mark[1].get("readTo", 0)) if mark else 0.0
        if float(newest) > read_to:
            due.append((project, float(newest), read_to))
    due.sort(key=lambda item: item[2])
    return [(project, newest) for project, newest, _ in due[:limit]]


def recent_summaries(conn: Connection, project: str) -> list[dict[str, Any]]:
    """The project's last summarised sessions, newest first: id, ended (ISO), summary fields."""
    rows = conn.execute(
        select(sessions.c.id, sessions.c.ended_at, sessions.c.summary_json)
        .where(sessions.c.project == project, sessions.c.summary_json.is_not(None))
        .order_by(sessions.c.ended_at.desc())
        .limit(RECENT_SESSIONS)
    ).all()
    return [
        {"id": r.id, "ended": iso(r.ended_at), **(loads(r.summary_json, {}) or {})} for r in rows
    ]


def _telling(error: str) -> bool:
    """An error line that says what went wrong (not a bare ``FAIL`` or ``error``)."""
    words = re.findall(r"[A-Za-z]{2,}", error)
    return len(words) >= 2 and len(error) >= 12


def heuristic_candidates(summaries: Sequence[dict[str, Any]], project: str = "") -> list[Candidate]:
    """What the summaries repeat, as candidates (see the module's docstring)."""
    total = len(summaries)
    out: list[Candidate] = []
    by_family: dict[str, Counter[str]] = defaultdict(Counter)
    family_sessions: dict[str, set[str]] = defaultdict(set)
    error_sessions: dict[str, list[str]] = defaultdict(list)
    error_resolved: Counter[str] = Counter()
    file_sessions: dict[str, list[str]] = defaultdict(list)
    for summary in summaries:
        sid = summary["id"]
        invoked = {
            pair
            for command in summary.get("commands") or []
            for pair in family_invocations(command)
            if pair[0] in FAMILIES
        }
        for family, how in invoked:
            by_family[family][how] += 1
            family_sessions[family].add(sid)
        unresolved = set(summary.get("unresolvedErrors") or [])
        for error in dict.fromkeys(e for e in summary.get("errors") or [] if _telling(e)):
            error_sessions[error].append(sid)
            error_resolved[error] += error not in unresolved
        for path in dict.fromkeys(
            project_relative(p, project) for p in summary.get("filesChanged") or []
        ):
            file_sessions[path].append(sid)
    for family, commands in sorted(by_family.items()):
        used = family_sessions[family]
        if len(used) >= MIN_SESSIONS:
            command, _ = commands.most_common(1)[0]
            out.append(
                Candidate(
                    "procedure",
                    f"This project's {FAMILIES[family]} run with `{command}` "
                    f"(in {len(used)} of its last {total} sessions).",
                    tuple(sorted(used)),
                    key=f"procedure:{family}",
                )
            )
    errors = sorted(error_sessions.items(), key=lambda item: -len(item[1]))
    for error, seen in [e for e in errors if len(e[1]) >= MIN_SESSIONS][:MAX_PER_KIND]:
        resolved = error_resolved[error]
        out.append(
            Candidate(
                "lesson",
                f"`{error}` keeps coming back: in {len(seen)} of the last {total} sessions "
                f"(resolved in {resolved}).",
                tuple(seen),
                key=f"lesson:{normalise(error)[:200]}",
            )
        )
    files = sorted(file_sessions.items(), key=lambda item: -len(item[1]))
    for path, seen in [f for f in files if len(f[1]) >= MIN_SESSIONS][:MAX_PER_KIND]:
        out.append(
            Candidate(
                "fact",
                f"`{path}` is where much of the work happens: changed in {len(seen)} of the "
                f"last {total} sessions.",
                tuple(seen),
                key=f"fact:file:{path}",
            )
        )
    return out


def consolidated(conn: Connection, project: str) -> list[dict[str, Any]]:
    """The project's live consolidated memories, with their provenance."""
    rows = conn.execute(
        select(memories_table).where(
            memories_table.c.project == project,
            memories_table.c.source == SOURCE,
            memories_table.c.forgotten_at.is_(None),
        )
    ).all()
    return [memories.to_dict(r) for r in rows]


def apply(store: Store, project: str, candidates: Iterable[Candidate], by: str) -> dict[str, int]:
    """Write the candidates as memories (new, a new version, or left alone); counts of each."""
    counts = {"created": 0, "versioned": 0, "kept": 0}
    with store.write(background=True) as conn:
        live = consolidated(conn, project)
        by_key = {m["meta"]["consolidated"].get("key"): m for m in live if _key_of(m)}
        by_text = {normalise(m["content"]): m for m in live}
        by_id = {m["id"]: m for m in live}
        for candidate in candidates:
            same = (
                by_id.get(candidate.replaces)
                or (by_key.get(candidate.key) if candidate.key else None)
                or by_text.get(normalise(candidate.text))
            )
            meta = {
                "consolidated": {
                    "kind": candidate.kind,
                    "key": candidate.key,
                    "sources": list(candidate.sources),
                    "by": by,
                    "at": iso(now()),
                }
            }
            if same is None:
                made = memories.insert_memory(
                    conn,
                    store.keyword,
                    memories.NewMemory(
                        content=candidate.text,
                        project=project,
                        concepts=(candidate.kind,),
                        source=SOURCE,
                    ),
                    actor=SOURCE,
                    meta=meta,
                )
                by_text[normalise(candidate.text)] = made
                counts["created"] += 1
            elif normalise(same["content"]) == normalise(candidate.text):
                counts["kept"] += 1
            else:
                memories.new_version(
                    conn, store.keyword, same["id"], candidate.text, actor=SOURCE, meta=meta
                )
                counts["versioned"] += 1
    return counts


def _key_of(memory: dict[str, Any]) -> str:
    meta = memory.get("meta") or {}
    return str((meta.get("consolidated") or {}).get("key") or "")


def mark(store: Store, project: str, read_to: float, report: dict[str, Any]) -> None:
    with store.write(background=True) as conn:
        heartbeat.beat(conn, mark_name(project), {"readTo": read_to, **report})


def strength(memory: Any, half_life_days: float, at: float) -> float:
    """A memory row's strength now (see the module's docstring)."""
    last = max(memory.accessed_at or 0.0, memory.updated_at or 0.0)
    idle_days = max(at - last, 0.0) / DAY
    return float((1 + (memory.access_count or 0)) * 0.5 ** (idle_days / half_life_days))


def decay(
    store: Store, half_life_days: float, grace_days: float, at: float | None = None
) -> dict[str, int]:
    """Evict the consolidated memories that decayed; forget those evicted past the grace."""
    at = at or now()
    done = {"evicted": 0, "forgotten": 0}
    if half_life_days <= 0:
        return done
    table = memories_table
    with store.write(background=True) as conn:
        rows = conn.execute(
            select(table).where(table.c.source == SOURCE, table.c.forgotten_at.is_(None))
        ).all()
        for row in rows:
            if row.evicted_at is None:
                left = strength(row, half_life_days, at)
                if left < EVICT_BELOW:
                    idle = (at - max(row.accessed_at or 0.0, row.updated_at)) / DAY
                    why = f"decayed: strength {left:.2f} after {idle:.0f} idle days"
                    done["evicted"] += memories.evict_in(conn, store.keyword, row.id, why)
            elif at - row.evicted_at > grace_days * DAY:
                why = f"evicted {(at - row.evicted_at) / DAY:.0f} days ago and not restored"
                done["forgotten"] += memories.forget_in(
                    conn, store.keyword, row.id, actor="decay", reason=why
                )
    return done


def run(
    store: Store,
    queue_llm: Any = None,
    half_life_days: float = 0.0,
    grace_days: float = 30.0,
) -> dict[str, Any]:
    """One consolidation run over the due projects, then decay (``half_life_days`` 0: none).
    ``queue_llm(conn, project, newest summary session id)``, when given, queues the LLM's
    pass (``engram.llm.work``)."""
    with store.read() as conn:
        due = due_projects(conn)
    report: dict[str, Any] = {"projects": {}, "decay": decay(store, half_life_days, grace_days)}
    for project, newest in due:
        with store.read() as conn:
            summaries = recent_summaries(conn, project)
        counts = apply(store, project, heuristic_candidates(summaries, project), by="heuristic")
        if queue_llm is not None and summaries:
            with store.write(background=True) as conn:
                counts["llmQueued"] = int(bool(queue_llm(conn, project, summaries[0]["id"])))
        mark(store, project, newest, counts)
        report["projects"][project] = counts
    return report
