"""The context block: what a session should know, within a token budget.

With a query (a prompt, a question), most useful first: the memories search finds for it; the
sessions of the best hits in depth (what each asked, then the agent's answers, search's hits
and every other observation that speaks to the query, each with the lines that answer, read
from all it holds: the prompt, the edit's code, the command's output); the other hits, each
with its answering lines; the last session and its open items; the project profile. Without a
query (session start): the memories (relevant to the project profile, else the newest), the
last session, its open items, what recent sessions say is still open, what the sessions before
it asked, answered and left, the profile.

Every item cites its ids (session, observation) so the agent can ask for more through MCP;
hits whose titles differ only in numbers are folded into one. A memory or a summary line is
whole or absent; an excerpt loses lines from its end when the budget is short. Tokens are
estimated as ceil(characters / 4), the usual figure for English and code with BPE tokenizers;
the estimate is stated in the block's metadata.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from sqlalchemy import and_, func, or_, select

from engram import dates, memories, observations, search, sessions
from engram.analysis import STOP_WORDS, stem, words
from engram.compress import one_line
from engram.observations import scoped
from engram.schema import context_injections
from engram.schema import observations as observations_table
from engram.schema import sessions as sessions_table
from engram.scope import Scope
from engram.settings import STREAMS
from engram.store import Store, insert_ignore, iso, loads, now

if TYPE_CHECKING:
    from engram.vectors import Vectors

TOKEN_ESTIMATE = "ceil(chars/4)"
PROFILE_SAMPLE = 500
"""Recent observations read to build the project profile (top files, commands, concepts)."""


def estimate_tokens(text: str) -> int:
    return math.ceil(len(text) / 4)


def profile(store: Store, scope: Scope) -> dict[str, Any]:
    stmt = select(
        observations_table.c.files_read,
        observations_table.c.files_modified,
        observations_table.c.commands,
        observations_table.c.concepts,
    )
    count_obs = scoped(select(func.count()).select_from(observations_table), scope)
    count_sessions = scoped(select(func.count()).select_from(sessions_table), scope, sessions_table)
    stmt = (
        scoped(stmt, scope).order_by(observations_table.c.created_at.desc()).limit(PROFILE_SAMPLE)
    )
    files: Counter[str] = Counter()
    commands: Counter[str] = Counter()
    concepts: Counter[str] = Counter()
    with store.read() as conn:
        for row in conn.execute(stmt):
            files.update(loads(row.files_modified, []) * 2 + loads(row.files_read, []))
            commands.update(
                c.split(" ", 2)[0] if len(c) > 60 else c for c in loads(row.commands, [])
            )
            concepts.update(loads(row.concepts, []))
        n_obs = int(conn.execute(count_obs).scalar_one())
        n_sessions = int(conn.execute(count_sessions).scalar_one())
    return {
        "project": scope.project,
        "sessions": n_sessions,
        "observations": n_obs,
        "topFiles": [f for f, _ in files.most_common(8)],
        "topCommands": [c for c, _ in commands.most_common(5)],
        "concepts": [c for c, _ in concepts.most_common(8)],
    }


def profile_query(prof: dict[str, Any]) -> str:
    """What the project is about, as a query: its concepts and the names of its top files."""
    names = [f.rsplit("/", 1)[-1] for f in prof["topFiles"]]
    return " ".join([*prof["concepts"], *names])


def build(
    store: Store,
    scope: Scope,
    *,
    query: str | None = None,
    session_id: str | None = None,
    budget_tokens: int = 2000,
    vectors: Vectors | None = None,
    weights: Mapping[str, float] | None = None,
    rrf_k: int = search.RRF_K,
    fusion: str | None = None,
    session_support: float = search.SESSION_SUPPORT["context"],
    neighbour_support: float = search.NEIGHBOUR_SUPPORT["context"],
    feedback: float = search.FEEDBACK,
) -> dict[str, Any]:
    """The injection block as markdown plus the structured parts it was built from.

    With a ``query`` (a prompt, a question): the memories and the observations and session
    summaries that hybrid search finds for it, each with the part of its text that answers
    (``excerpt``), then the last session and the profile. Without one (session start): the
    memories most relevant to the project profile (the newest when nothing matches), the last
    session, its open items, what the recent sessions asked, decided and left, then the profile.
    Everything is filled most useful first until the budget is used; every item cites its id."""
    prof = profile(store, scope)
    wanted = query or profile_query(prof)
    per_item = max(MIN_ITEM_CHARS, min(MAX_ITEM_CHARS, budget_tokens * 4 // 5))

    def find(limit: int, kinds: tuple[str, ...], per_session: int = 3) -> list[dict[str, Any]]:
        if not wanted.strip():
            return []
        return list(
            search.search(
                store,
                wanted,
                scope,
                limit=limit,
                mode="hybrid",
                kinds=kinds,
                per_session=per_session,
                vectors=vectors,
                weights=weights,
                rrf_k=rrf_k,
                fusion=fusion,
                session_support=session_support,
                neighbour_support=neighbour_support,
                feedback=feedback,
                sure_first=False,  # a budget of several hits: see search.LEAD_FULL
            )["items"]
        )

    sections: list[tuple[str, list[Item]]] = []
    offered = [(m["id"], m["text"]) for m in find(8, ("memory",))]
    if not offered and not query:
        newest, _ = memories.list_memories(store, scope, limit=8)
        offered = [(m["id"], m["content"]) for m in newest]
    mem_items = [Item(f"- {text}") for _, text in offered]

    with store.read() as conn:
        last = sessions.last_summarised(conn, scope, exclude=session_id)
    last_section: list[tuple[str, list[Item]]] = []
    if last is not None:
        when = (iso(last.ended_at) or "")[:10]
        summary = loads(last.summary_json, {}) or {}
        last_section.append((f"## Last session ({when}, {last.id})", _summary_items(last.summary)))
        open_items = [Item(f"- Unresolved: {e}") for e in summary.get("unresolvedErrors", [])]
        if open_items:
            last_section.append((f"## Open items ({last.id})", open_items))

    if query:
        hits = find(RELEVANT_HITS, ("observation", "summary"), per_session=RELEVANT_PER_SESSION)
        if mem_items:
            sections.append(("## Memories", mem_items))
        terms = _terms(query)
        top = list(dict.fromkeys(h["sessionId"] for h in hits if h.get("sessionId")))
        top = _dated_first(store, scope, query, top)[:TOP_SESSIONS]
        session_items = _sessions_in_depth(store, top, hits, terms, budget_tokens * 4)
        rest = [h for h in hits if h.get("sessionId") not in top]
        relevant = session_items + _expand(rest, terms, per_item, skip_session=None)
        if relevant:
            sections.append(("## Relevant", relevant))
        sections += last_section
    else:
        if mem_items:
            sections.append(("## Memories", mem_items))
        sections += last_section
        still = _still_open(store, scope, exclude={session_id})
        if still:
            sections.append(("## Still open", still))
        earlier = _recent_sessions(store, scope, exclude={session_id, last.id if last else None})
        if earlier:
            sections.append(("## Earlier sessions", earlier))
    if prof["observations"]:
        # a project with nothing recorded has no profile worth a line of the agent's context
        sections.append(("## Project profile", [Item(line) for line in _profile_lines(prof)]))
    head = f"# Engram memory: {scope.project}"
    block = _fit(head, sections, budget_tokens, prof)
    _used(store, [i for i, text in offered if f"- {text}" in block["context"]])
    return block


def _used(store: Store, memory_ids: list[str]) -> None:
    """The memories a block gave a session count as used: their decay starts over."""
    due = memories.due_for_touch(memory_ids)
    if due:
        with store.write() as conn:
            memories.touch(conn, due)


def for_prompt(
    store: Store,
    scope: Scope,
    prompt: str,
    session_id: str,
    *,
    budget_tokens: int,
    vectors: Vectors | None = None,
    weights: Mapping[str, float] | None = None,
    rrf_k: int = search.RRF_K,
    fusion: str | None = None,
    session_support: float = search.SESSION_SUPPORT["context"],
    neighbour_support: float = search.NEIGHBOUR_SUPPORT["context"],
    feedback: float = search.FEEDBACK,
) -> dict[str, Any]:
    """What a prompt hook adds to the agent's context for this prompt: only what clears the
    relevance bar (two search streams agree on it and it shares the prompt's specific words,
    ``_relevant``), never from the session the
    prompt belongs to (the agent has that in front of it), and never what this session was given
    before (``context_injections``); the memories, then the best hits' sessions in depth, then
    the other hits, within ``budget_tokens``. An empty block when nothing clears the bar."""
    hits = [
        h
        for h in search.search(
            store,
            prompt,
            scope,
            limit=PROMPT_HITS,
            mode="hybrid",
            kinds=("memory", "observation", "summary"),
            per_session=RELEVANT_PER_SESSION,
            vectors=vectors,
            weights=weights,
            rrf_k=rrf_k,
            fusion=fusion,
            session_support=session_support,
            neighbour_support=neighbour_support,
            feedback=feedback,
            sure_first=False,
        )["items"]
        if h.get("sessionId") != session_id
    ]
    terms = _terms(prompt)
    specific = terms - GENERIC_TERMS
    # Without the vector stream (ENGRAM_EMBEDDER=none, or its index not ready) only the keyword
    # stream ranks most documents (the graph names few): one stream and the word test decide.
    semantic = any("vector" in (h.get("ranks") or {}) for h in hits)
    hits = [h for h in hits if _relevant(h, specific, 2 if semantic else 1)]
    with store.read() as conn:
        given = frozenset(
            conn.execute(
                select(context_injections.c.item_id).where(
                    context_injections.c.session_id == session_id
                )
            ).scalars()
        )
    sections: list[tuple[str, list[Item]]] = []
    mems = [
        Item(f"- {h['text']} ({h['id']})")
        for h in hits
        if h["kind"] == "memory" and h["id"] not in given
    ]
    if mems:
        sections.append(("## Memories", mems))
    found = [h for h in hits if h["kind"] != "memory" and h["id"] not in given]
    top = list(dict.fromkeys(h["sessionId"] for h in found if h.get("sessionId")))[:TOP_SESSIONS]
    relevant = _sessions_in_depth(store, top, found, terms, budget_tokens * 4, exclude=given)
    relevant += _expand([h for h in found if h.get("sessionId") not in top], terms, 400, None)
    if relevant:
        sections.append(("## Relevant", relevant))
    head = f"# Engram memory for this prompt: {scope.project}"
    block = _fit(head, sections, budget_tokens, {})
    cited = sorted(set(_CITED.findall(block["context"])))
    block["cited"] = cited
    block.pop("profile", None)
    if cited:
        with store.write() as conn:
            for item_id in cited:
                insert_ignore(
                    conn,
                    context_injections,
                    {"session_id": session_id, "item_id": item_id, "injected_at": now()},
                )
            memories.touch(conn, memories.due_for_touch([i for i in cited if i.startswith("mem_")]))
    return block


INJECTIONS_KEPT_SECONDS = 30 * 86400.0
"""How long what a session was given is remembered: a session is rarely prompted a month on."""
PRUNE_BATCH = 5000


def prune_injections(store: Store, at: float | None = None) -> int:
    """Forget what sessions were given more than ``INJECTIONS_KEPT_SECONDS`` ago (at most
    ``PRUNE_BATCH`` rows a call: the sweeper runs it each sweep, so the table stays bounded by
    a month of prompts without one long delete)."""
    cutoff = (now() if at is None else at) - INJECTIONS_KEPT_SECONDS
    t = context_injections
    with store.write(background=True) as conn:
        old = select(t.c.session_id, t.c.item_id).where(t.c.injected_at < cutoff)
        rows = conn.execute(old.limit(PRUNE_BATCH)).all()
        for row in rows:
            conn.execute(
                t.delete().where(t.c.session_id == row.session_id, t.c.item_id == row.item_id)
            )
    return len(rows)


RELEVANT_RANK = 10
"""A hit clears the per-prompt relevance bar when at least two streams rank it this high."""
_CITED = re.compile(r"\b((?:obs|mem|sum)_[0-9A-Za-z_.:-]{4,60})\)")


def _relevant(hit: dict[str, Any], specific: set[str], agreeing: int = 2) -> bool:
    """The per-prompt bar: ``agreeing`` streams rank the hit in their top ``RELEVANT_RANK``
    (two where the vector stream answered: words and meaning agree), and it shares with the
    prompt two of its specific words (not ``GENERIC_TERMS``), or one that names something (an
    identifier, a path, a number: ``getUser``, ``db.go``, ``LED-190``). In a small project every
    document is in every stream's top 10, so agreement alone let "thanks, looks good" pull
    300-500 tokens (19 of 30 unrelated prompts on the coding set)."""
    ranks = hit.get("ranks") or {}
    # the streams' own ranks: the vector stream's second pass (``feedback``) is not a new witness
    if sum(1 for s in STREAMS if ranks.get(s, RELEVANT_RANK + 1) <= RELEVANT_RANK) < agreeing:
        return False
    shared = specific & _terms(f"{hit.get('title') or ''}\n{hit.get('text') or ''}")
    return len(shared) >= 2 or any(_names_something(term) for term in shared)


def _names_something(term: str) -> bool:
    """A ticket number (``190`` of LED-190), a mixed identifier (``s3``, ``utf8``): not a
    bare ``2``."""
    return (term.isdigit() and len(term) >= 3) or (not term.isalpha() and not term.isdigit())


_GENERIC_WORDS = (
    "add run test tests fix error code file files use make change update new look looks "
    "good thanks thank ok okay continue please check try again now work works working "
    "write read show help want need let sure yes done next step start go also just like "
    "get set put can could would should will one two first last thing things way "
    "take pick break today tomorrow later "
    "py js ts tsx jsx go rs md json yaml yml toml txt sql sh html css"
)
GENERIC_TERMS = frozenset(stem(w) for w in _GENERIC_WORDS.split())
"""Words of almost every coding prompt: sharing them with a document says nothing."""


RELEVANT_HITS = 60
"""Observations and summaries searched for a query; the budget decides how many are shown."""
PROMPT_HITS = 24
"""Hits searched for a prompt hook: only those two streams rank in their top 10 clear the bar
(``_relevant``), so more cost the hook time (60 added 10-14 ms to its p50) and add nothing."""
RELEVANT_PER_SESSION = 8
"""Hits kept per session (search's default is 3): the session that holds the answer usually
holds several of the best hits."""
TOP_SESSIONS = 3
"""Sessions of the best hits shown in depth: their request, the agent's answers and every
observation that speaks to the query, not only the ones search ranked."""
SESSION_SHARE = (0.45, 0.25, 0.15)
"""Share of the budget each of the top sessions may take, in rank order."""
MIN_ITEM_CHARS, MAX_ITEM_CHARS = 240, 1400
"""Bounds on one item's excerpt: a fifth of the budget (in characters, ~4 to a token)."""
RECENT_SESSIONS = 8
"""Sessions before the last one whose request, decisions and outcome session start shows."""
LINE_CHARS = 400
"""Longest line of an excerpt: a prompt or an answer is split into sentences past it."""


@dataclasses.dataclass
class Item:
    """One entry of a section: its first line, and lines that may be dropped from the end when
    the budget is short (an excerpt; a memory or a summary line has none)."""

    head: str
    body: list[str] = dataclasses.field(default_factory=list)
    needs_body: bool = False
    """A heading ("Errors:") that says nothing without its first line."""


def _profile_lines(prof: dict[str, Any]) -> list[str]:
    lines = [f"- {prof['sessions']} sessions, {prof['observations']} observations recorded"]
    if prof["topFiles"]:
        lines.append("- Files most worked on: " + ", ".join(prof["topFiles"]))
    if prof["topCommands"]:
        lines.append("- Frequent commands: " + ", ".join(f"`{c}`" for c in prof["topCommands"]))
    if prof["concepts"]:
        lines.append("- Concepts: " + ", ".join(prof["concepts"]))
    return lines


DATED_SESSIONS = 2
"""Sessions recorded at a time the query names ("in January 2022", "on 8 May 2023", "two weeks
ago") shown in depth before the other hits' sessions."""


def _dated_first(store: Store, scope: Scope, query: str, ranked: list[str]) -> list[str]:
    """Search's sessions, with those that ran at a time the query names (``dates.named``: its
    dates, times counted back from now and stretches up to it) first: the dated ones search
    ranked (in its order), then others of those dates (oldest first), at most
    ``DATED_SESSIONS`` of them."""
    spans = dates.named(query, now())
    if not spans:
        return ranked
    t = sessions_table
    ends = func.coalesce(t.c.ended_at, t.c.started_at)
    within = or_(*(and_(t.c.started_at < end, ends >= start) for start, end in spans))
    with store.read() as conn:
        hit = set(conn.execute(select(t.c.id).where(t.c.id.in_(ranked), within)).scalars())
        first = [s for s in ranked if s in hit][:DATED_SESSIONS]
        if len(first) < DATED_SESSIONS:
            stmt = scoped(select(t.c.id), scope, t).where(within).order_by(t.c.started_at)
            others = conn.execute(stmt.limit(DATED_SESSIONS + len(first))).scalars()
            first += [s for s in others if s not in first][: DATED_SESSIONS - len(first)]
    return first + [s for s in ranked if s not in first]


def _lines(text: str | None) -> list[str]:
    return [line for line in (text or "").strip().splitlines() if line.strip()]


def _summary_items(text: str | None) -> list[Item]:
    """A summary's lines as items, a list's heading ("Commands:", "Errors:") with its entries
    (shown only with at least one of them)."""
    items: list[Item] = []
    for line in _lines(text):
        last = items[-1] if items else None
        if line.startswith("- ") and last is not None and last.head.endswith(":"):
            last.needs_body = True  # a list's heading: shown only with its first entry
            last.body.append(line)
        else:
            items.append(Item(line))  # a line that only ends in ":" stays a line
    return items


def _sessions_in_depth(
    store: Store,
    session_ids: list[str],
    hits: list[dict[str, Any]],
    terms: set[str],
    budget_chars: int,
    exclude: frozenset[str] = frozenset(),
) -> list[Item]:
    """One item per session (its observations in ``exclude`` left out): what it asked, then its observations that speak to the query —
    the agent's answers first (what changed, why, what is left), then search's hits in rank
    order, then any other observation holding query terms — each with the lines that answer,
    read from everything the observation holds (the prompt, the edit, the output)."""
    rank = {h["id"]: n for n, h in enumerate(hits)}
    items = []
    with store.read() as conn:
        rows = {sid: observations.for_session(conn, sid)[:SESSION_SCAN] for sid in session_ids}
        summaries = {
            r.id: r
            for r in conn.execute(
                select(sessions_table).where(sessions_table.c.id.in_(session_ids))
            )
        }
    for number, sid in enumerate(session_ids):
        row = summaries.get(sid)
        summary = loads(row.summary_json, {}) if row is not None else {}
        when = (iso(row.ended_at or row.started_at) if row is not None else "") or ""
        request = one_line((summary or {}).get("request") or "", 240)
        share = SESSION_SHARE[min(number, len(SESSION_SHARE) - 1)]
        limit = int(budget_chars * share)
        scored = []
        answers = [o.id for o in rows[sid] if _answer(o)]
        final = answers[-1] if answers else None
        contents = {obs.id: _content(obs) for obs in rows[sid] if obs.id not in exclude}
        held = {obs_id: terms & _terms(text) for obs_id, text in contents.items()}
        common = _common_terms(held.values())
        # in a conversation, the turn after a hit (the reply to a question that matched)
        # often holds the answer in other words: it comes right after that hit
        follows = {
            after.id: rank[before.id] + 0.5
            for before, after in zip(rows[sid], rows[sid][1:], strict=False)
            if before.id in rank and after.id not in rank and _turn(before) and _turn(after)
        }
        for obs in rows[sid]:
            if obs.id in exclude:
                continue
            content = contents[obs.id]
            hits_here = len(held[obs.id] - common)
            answer = _answer(obs)
            if not (hits_here or obs.id in rank or obs.id in follows or obs.id == final):
                continue
            # the session's last answer (what changed, why, what is left) first, then search's
            # hits in rank order, each followed by what came after
            # it, then the rest by query words held, answers first among equals
            order = (
                0 if obs.id == final else 1,
                rank.get(obs.id, follows.get(obs.id, len(rank) + 1)),
                -hits_here,
                0 if answer else 1,
            )
            scored.append((order, obs, content))
        body: list[str] = []
        used = 0
        for _, obs, content in sorted(scored, key=lambda s: s[0]):
            if used >= limit:
                break
            title = obs.title or ""
            lines = excerpt(content, terms, min(MAX_ITEM_CHARS, limit - used), skip=title)
            if not lines and not title:
                continue
            shown = f" {title}" if _title_adds(title, lines) else ""
            label = "answer" if title.startswith(sessions.AGENT_ANSWER) else obs.kind
            body.append(f"  - [{label}]{shown} ({obs.id})")
            body += [f"    {line}" for line in lines]
            used += len(title) + sum(len(line) + 5 for line in lines) + 20
        outcome = (summary or {}).get("outcome")
        if not body and exclude:
            continue  # everything it had to say was given already
        shown = " ".join(" ".join(body).split())
        if outcome and " ".join(outcome.split())[:60] not in shown:  # not the answer again
            body.append(f"  - Outcome: {outcome}")
        head = f"- Session {sid} ({when[:10]}): {request or 'no prompt recorded'}"
        items.append(Item(head, body))
    return items


def _answer(obs: Any) -> bool:
    """The agent's reply to a prompt (what it said it did and why)."""
    return bool(obs.kind == "session" and (obs.title or "").startswith(sessions.AGENT_ANSWER))


def _turn(obs: Any) -> bool:
    """A turn of the conversation: a prompt, or the agent's answer (not a tool call)."""
    return obs.kind == "prompt" or _answer(obs)


COMMON_SHARE = 0.5
"""A query word held by more than this share of a session's observations (a speaker's name,
the project's own name) says nothing about which of them answers."""


def _common_terms(held: Iterable[set[str]]) -> set[str]:
    sets = list(held)
    if len(sets) < 4:
        return set()
    counts = Counter(term for found in sets for term in found)
    return {term for term, n in counts.items() if n > COMMON_SHARE * len(sets)}


SESSION_SCAN = 400
"""Observations of one session read when it is shown in depth (a very long session's first)."""


def _content(obs: Any) -> str:
    """Everything an observation holds, as text: its compressed text, then the prompt, the
    tool's input and output in full (an edit's new code, a command's whole output)."""
    parts = [obs.text or ""]
    if obs.prompt:
        parts.append(obs.prompt)
    for raw in (obs.tool_input, obs.tool_output):
        value = loads(raw, raw) if isinstance(raw, str) else raw
        parts.extend(_strings_in(value))
    return "\n".join(p for p in parts if p)[:CONTENT_CHARS]


_NOT_CONTENT = frozenset({"filePath", "file_path", "path", "type", "mode", "cwd", "isImage"})
CONTENT_CHARS = 20_000
"""Bound on the text an excerpt is chosen from (a megabyte of output is scanned no further)."""


def _strings_in(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):  # paths and modes are in the title and text already
        return [s for k, v in value.items() if k not in _NOT_CONTENT for s in _strings_in(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings_in(v)]
    return []


def _expand(
    hits: list[dict[str, Any]], terms: set[str], per_item: int, skip_session: str | None
) -> list[Item]:
    """Search hits as items holding the part of their text that answers the query terms; hits
    whose title repeats one shown already are folded into it. The last session's summary is
    left out (its own section shows it)."""
    items: list[Item] = []
    seen: dict[str, Item] = {}
    for hit in hits:
        if hit["kind"] == "summary" and hit.get("sessionId") == skip_session:
            continue
        key = _fold_key(hit["title"] or "")
        if key in seen:
            folded = seen[key]
            folded.head = _bump_similar(folded.head)
            continue
        when = (hit.get("createdAt") or "")[:10]
        cite = ", ".join(x for x in (when, hit.get("sessionId"), hit["id"]) if x)
        if hit["kind"] == "summary":
            head = f"- [session summary] ({cite})"
            body = excerpt(hit["text"] or "", terms, per_item)
        else:
            title = hit["title"] or ""
            body = excerpt(hit["text"] or "", terms, per_item, skip=title)
            shown = f" {title}" if _title_adds(title, body) else ""
            head = f"- [{hit['kind']}]{shown} ({cite})"
        item = Item(head, [f"  {line}" for line in body])
        seen[key] = item
        items.append(item)
    return items


def _title_adds(title: str, lines: list[str]) -> bool:
    """Whether a title says something its excerpt does not: a prompt's or an answer's title is
    its first words again (cut short or whole), which the excerpt shows; the kind and the id
    say enough then."""
    core = title.removesuffix("…").strip()
    if not core or not lines:
        return bool(core)
    tail = " ".join(core.split())[-40:]
    return tail not in " ".join(" ".join(lines).split())


_SIMILAR = re.compile(r" \(\+(\d+) similar\)$")


def _bump_similar(head: str) -> str:
    found = _SIMILAR.search(head)
    count = int(found.group(1)) + 1 if found else 1
    return f"{_SIMILAR.sub('', head)} (+{count} similar)"


def _fold_key(title: str) -> str:
    """Titles that differ only in numbers, hashes or quoting fold together."""
    return re.sub(r"[0-9a-f]{7,}|\d+|[`'\"]", "", title.lower()).strip()


_CUES = re.compile(
    r"(?i)\b(because|since|so that|instead|decid|chose|root cause|caused|fix|fixed|the reason|"
    r"why|resolved|still|todo|left|workaround|must|never|always)\b"
)


def _terms(text: str) -> set[str]:
    return {stem(w) for w in words(text) if w not in STOP_WORDS and len(w) > 1}


def excerpt(text: str, terms: set[str], limit: int, skip: str = "") -> list[str]:
    """The lines of ``text`` that answer best, in their order, within ``limit`` characters:
    each line scores the query terms it holds (and a little for words that carry reasons:
    because, instead, fixed, ...); lines that score nothing come only after those that do. A
    line equal to ``skip`` (the title, shown already) is left out; long lines are split into
    sentences first."""
    seen = {" ".join(skip.split()).removeprefix("$ ")}
    lines = []
    for line in _units(text):
        key = " ".join(line.split()).removeprefix("$ ")  # a command and its echo are one line
        if key and key not in seen:  # compressed text and raw output repeat each other
            seen.add(key)
            lines.append(line)
    if not lines:
        return []
    scored = []
    for number, line in enumerate(lines):
        hits = len(terms & _terms(line))
        scored.append((hits + (0.5 if hits and _CUES.search(line) else 0.0), number))
    chosen: set[int] = set()
    used = 0
    for score, number in sorted(scored, key=lambda s: (-s[0], s[1])):
        cost = len(lines[number]) + 3
        if used + cost > limit:
            if score > 0:
                continue
            break
        chosen.add(number)
        used += cost
    out: list[str] = []
    previous = -1
    for number in sorted(chosen):
        if previous >= 0 and number != previous + 1:
            out.append("…")
        out.append(lines[number])
        previous = number
    return out


_SENTENCE = re.compile(r"(?<=[.!?;])\s+(?=[A-Z0-9`(\"'])")


def _units(text: str) -> list[str]:
    """Lines, with a long line split into sentences and anything still long cut."""
    out: list[str] = []
    for line in text.splitlines():
        line = line.rstrip()
        if len(line) <= LINE_CHARS:
            out.append(line)
            continue
        for sentence in _SENTENCE.split(line):
            out.append(one_line(sentence, LINE_CHARS))
    return out


_OPEN = re.compile(
    r"(?i)\b(still|not yet|left (?:to|open|for)|remain|remains|follow[- ]?up|todo|filed as|"
    r"need to decide|next step|skipped|workaround|until)\b"
)
"""Words with which an agent's last answer says what it left undone."""


def _still_open(store: Store, scope: Scope, exclude: set[str | None]) -> list[Item]:
    """What the recent sessions' last answers say is left (a flaky test skipped, a ticket filed,
    a decision pending), newest first, each with its session and date."""
    with store.read() as conn:
        rows = sessions.recent_summarised(conn, scope, RECENT_SESSIONS + 1 + len(exclude))
        rows = [r for r in rows if r.id not in exclude][: RECENT_SESSIONS + 1]
        answers = sessions.final_answers(conn, [r.id for r in rows], per_session=1)
    items = []
    for row in rows:
        when = (iso(row.ended_at) or "")[:10]
        for sentence in _units(answers.get(row.id, "")):
            if _OPEN.search(sentence):
                items.append(Item(f"- ({when}, {row.id}) {sentence.strip()}"))
    return items


def _recent_sessions(store: Store, scope: Scope, exclude: set[str | None]) -> list[Item]:
    """The sessions before the last, newest first: what was asked, what the agent answered at
    the end (what changed, why, what is left) and how it ended."""
    with store.read() as conn:
        rows = sessions.recent_summarised(conn, scope, RECENT_SESSIONS + len(exclude))
        rows = [r for r in rows if r.id not in exclude][:RECENT_SESSIONS]
        answers = sessions.final_answers(conn, [r.id for r in rows])
    items = []
    for row in rows:
        summary = loads(row.summary_json, {}) or {}
        when = (iso(row.ended_at) or "")[:10]
        request = one_line(summary.get("request") or "", 300)
        body = []
        if answers.get(row.id):
            body += [f"  {line}" for line in _units(answers[row.id])[:6]]
        if summary.get("outcome"):
            body.append(f"  Outcome: {summary['outcome']}")
        items.append(Item(f"- ({when}, {row.id}) {request or 'session'}", body))
    return items


def _fit(
    head: str, sections: list[tuple[str, list[Item]]], budget: int, prof: dict[str, Any]
) -> dict[str, Any]:
    """Items in order while they fit: an item's head whole or not at all, then as many of its
    body lines as fit; a section heading only with at least one item."""
    out = [head]
    used = estimate_tokens(head) + 1
    included = omitted = 0
    for heading, items in sections:
        cost_heading = estimate_tokens(heading) + 2
        block: list[str] = []
        for item in items:
            extra = cost_heading if not block else 0
            cost = estimate_tokens(item.head) + 1
            if item.needs_body and item.body:
                cost += estimate_tokens(item.body[0]) + 1
            if used + cost + extra > budget:
                omitted += 1
                continue
            used += cost + extra
            block.append(item.head)
            if item.needs_body:  # its first line is paid for
                used -= estimate_tokens(item.body[0]) + 1
            for line in item.body:
                line_cost = estimate_tokens(line) + 1
                if used + line_cost > budget:
                    break
                used += line_cost
                block.append(line)
        if block:
            out.append("")
            out.append(heading)
            out.extend(block)
            included += sum(1 for line in block if not line.startswith("  "))
    text = "\n".join(out) if included else ""
    return {
        "context": text,
        "tokens": estimate_tokens(text),
        "budgetTokens": budget,
        "tokenEstimate": TOKEN_ESTIMATE,
        "items": included,
        "omitted": omitted,
        "profile": prof,
    }
