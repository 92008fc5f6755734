"""Benchmark loaders, normalised to documents and queries with gold unit ids.

A *unit* is what a level scores: a session id at session level, a turn id at turn level. Each
question has its own *haystack* (the documents it is searched against); retrievers keep
haystacks apart (bm25: one Scope project per haystack inside one index).

Session level indexes whole sessions as documents by default, as LongMemEval's official
session granularity does and as the reference figures in the data README are measured
(``session_docs="whole"``). ``session_docs="best-turn"`` indexes turns instead and ranks each
session by its best-ranked turn, which is how Engram's server (observations = turns) would
answer. Turn ids are ``<session id>_<1-based turn index>`` (LongMemEval's own ids) or the
LoCoMo dialog id ``D<session>:<turn>``. Documents carry their session's date and LongMemEval
questions the date they were asked, where the data says, so a question that names a time
("four weeks ago", "on 8 May 2023") is searched as the server searches it.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

LEVELS = ("session", "turn")
PROTOCOLS = ("official", "all-turns")
SESSION_DOCS = ("whole", "best-turn")
LOCOMO_CATEGORIES = {
    1: "multi-hop",
    2: "temporal",
    3: "open-domain",
    4: "single-hop",
    5: "adversarial",
}


class DatasetError(Exception):
    """The data is missing or cannot be used as asked (message is for the user)."""


@dataclasses.dataclass(frozen=True)
class Doc:
    doc_id: str  # unique in the dataset
    unit_id: str  # what this document counts as when scoring (session or turn id)
    haystack: str
    text: str
    session_id: str = ""  # the conversation session a turn belongs to; "" = the unit itself
    created_at: float | None = None  # when it was said (epoch seconds), when the dataset says
    speaker: str | None = None  # who said it (turns): search's neighbours lift the other party's

    @property
    def session(self) -> str:
        """The session the server would file this document under (search's session support
        ranks a hit by its session's other hits, as it does for observations)."""
        return self.session_id or self.unit_id


@dataclasses.dataclass(frozen=True)
class Query:
    query_id: str
    text: str
    haystack: str
    gold: frozenset[str]  # unit ids
    category: str
    now: float | None = None  # when it was asked (epoch seconds), when the dataset says


@dataclasses.dataclass
class Dataset:
    name: str
    level: str
    protocol: str
    docs: list[Doc]
    queries: list[Query]
    notes: list[str] = dataclasses.field(default_factory=list)
    skipped: dict[str, int] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class Turn:
    turn_id: str
    text: str
    indexed: bool  # under the protocol (official LongMemEval: user turns only)
    speaker: str | None = None  # who said it: user or assistant, LoCoMo's speaker's name


def _group(
    level: str,
    session_docs: str,
    haystack: str,
    sessions: Iterable[tuple[str, list[Turn]]],
    dated: Mapping[str, float] | None = None,
) -> list[Doc]:
    """Documents of one haystack: whole sessions, or turns (unit = turn or its session); each
    at its session's time when ``dated`` has it."""
    docs: list[Doc] = []
    for s_index, (session_id, turns) in enumerate(sessions):
        at = (dated or {}).get(session_id)
        kept = [t for t in turns if t.indexed and t.text.strip()]
        if level == "session" and session_docs == "whole":
            if kept:
                docs.append(
                    Doc(
                        f"{haystack}/{s_index}",
                        session_id,
                        haystack,
                        "\n".join(t.text for t in kept),
                        created_at=at,
                    )
                )
            continue
        for turn in kept:
            unit = session_id if level == "session" else turn.turn_id
            docs.append(
                Doc(
                    f"{haystack}/{s_index}/{turn.turn_id}",
                    unit,
                    haystack,
                    turn.text,
                    session_id,
                    at,
                    turn.speaker,
                )
            )
    return docs


def lme_time(stamp: str) -> datetime:
    """LongMemEval's "2023/05/20 (Sat) 07:47" (UTC)."""
    day, _, rest = stamp.partition(" (")
    clock = rest.partition(") ")[2] or "00:00"
    return datetime.strptime(f"{day} {clock}", "%Y/%m/%d %H:%M").replace(tzinfo=timezone.utc)


def locomo_time(stamp: str) -> datetime:
    """LoCoMo's "1:56 pm on 8 May, 2023" (UTC)."""
    parsed = datetime.strptime(stamp.replace(",", ""), "%I:%M %p on %d %B %Y")
    return parsed.replace(tzinfo=timezone.utc)


def _read_json(path: Path) -> Any:
    if not path.is_file():
        raise DatasetError(f"data file not found: {path}")
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as handle:
        return json.load(handle)


# LongMemEval -----------------------------------------------------------------------------


def load_longmemeval(
    path: Path, name: str, level: str, protocol: str, session_docs: str
) -> Dataset:
    """Official: user turns only; skip ``_abs`` questions and those without user-side
    evidence (an answer session counts as gold only if one of its user turns has_answer).
    All-turns: every turn; every question with gold at the level."""
    official = protocol == "official"
    docs: list[Doc] = []
    queries: list[Query] = []
    skipped = {"abstention": 0, "no evidence": 0}
    for item in _read_json(path):
        qid = item["question_id"]
        if official and qid.endswith("_abs"):
            skipped["abstention"] += 1
            continue
        sessions: list[tuple[str, list[Turn]]] = []
        gold_turns: set[str] = set()
        evidence_sessions: set[str] = set()
        for session_id, session in zip(
            item["haystack_session_ids"], item["haystack_sessions"], strict=True
        ):
            turns = []
            for t_index, turn in enumerate(session, start=1):
                indexed = turn["role"] == "user" or not official
                turn_id = f"{session_id}_{t_index}"
                turns.append(Turn(turn_id, turn["content"], indexed, turn["role"]))
                if indexed and turn.get("has_answer"):
                    gold_turns.add(turn_id)
                    evidence_sessions.add(session_id)
            sessions.append((session_id, turns))
        answer_sessions = set(item["answer_session_ids"])
        if level == "turn":
            gold = gold_turns
        else:
            gold = answer_sessions & evidence_sessions if official else answer_sessions
        if not gold:
            skipped["no evidence"] += 1
            continue
        dated = {
            sid: lme_time(stamp).timestamp()
            for sid, stamp in zip(item["haystack_session_ids"], item["haystack_dates"], strict=True)
        }
        docs.extend(_group(level, session_docs, qid, sessions, dated))
        asked = lme_time(item["question_date"]).timestamp() if item.get("question_date") else None
        queries.append(
            Query(qid, item["question"], qid, frozenset(gold), item.get("question_type", ""), asked)
        )
    side = "user-side " if official else ""
    reasons = {
        "abstention": "abstention (_abs)",
        "no evidence": f"without {side}evidence at {level} level",
    }
    skips = [f"{n} {reasons[k]}" for k, n in skipped.items() if n]
    notes = [f"{len(queries)} questions scored; skipped {' and '.join(skips) or 'none'}"]
    return Dataset(
        name, level, protocol, docs, queries, notes, {k: v for k, v in skipped.items() if v}
    )


# LoCoMo ------------------------------------------------------------------------------------

_DIALOG_ID = re.compile(r"D:?(\d+):(\d+)")


def normalise_evidence(raw: Iterable[str], known: set[str]) -> tuple[list[str], int, int]:
    """LoCoMo evidence as clean dialog ids: ``"D8:6; D9:17"`` and ``"D9:1 D4:4"`` are split,
    ``D30:05`` -> ``D30:5``, ``D:11:26`` -> ``D11:26``; ids not in the conversation (past the
    end of a session, bare ``D``) are dropped. Returns (ids, repaired, dropped)."""
    ids: list[str] = []
    repaired = dropped = 0
    for entry in raw:
        parts = [p for p in re.split(r"[;,\s]+", entry) if p]
        if len(parts) != 1:
            repaired += 1
        for part in parts:
            match = _DIALOG_ID.fullmatch(part)
            dialog_id = f"D{int(match.group(1))}:{int(match.group(2))}" if match else part
            if dialog_id not in known:
                dropped += 1
                continue
            if dialog_id != part:
                repaired += 1
            if dialog_id not in ids:
                ids.append(dialog_id)
    return ids, repaired, dropped


def _locomo_sessions(conversation: dict[str, Any]) -> list[tuple[str, list[Turn]]]:
    numbers = sorted(
        int(m.group(1)) for key in conversation if (m := re.fullmatch(r"session_(\d+)", key))
    )
    sessions = []
    for number in numbers:
        turns = []
        for turn in conversation[f"session_{number}"]:
            text = f"{turn['speaker']}: {turn['text']}"
            if turn.get("blip_caption"):
                text += f" [shares an image: {turn['blip_caption']}]"
            turns.append(Turn(turn["dia_id"], text, True, turn["speaker"]))
        sessions.append((f"S{number}", turns))
    return sessions


def load_locomo(path: Path, name: str, level: str, protocol: str, session_docs: str) -> Dataset:
    docs: list[Doc] = []
    queries: list[Query] = []
    repaired = dropped_ids = no_evidence = 0
    for conv in _read_json(path):
        haystack = conv["sample_id"]
        talk = conv["conversation"]
        sessions = _locomo_sessions(talk)
        dated = {
            sid: locomo_time(talk[f"session_{sid[1:]}_date_time"]).timestamp()
            for sid, _ in sessions
            if f"session_{sid[1:]}_date_time" in talk
        }
        docs.extend(_group(level, session_docs, haystack, sessions, dated))
        known = {t.turn_id for _, turns in sessions for t in turns}
        for q_index, qa in enumerate(conv["qa"]):
            ids, fixed, dropped = normalise_evidence(qa.get("evidence") or [], known)
            repaired, dropped_ids = repaired + fixed, dropped_ids + dropped
            if not ids:
                no_evidence += 1
                continue
            gold = {f"S{i[1:].split(':')[0]}" for i in ids} if level == "session" else set(ids)
            category = qa.get("category")
            label = f"{category} {LOCOMO_CATEGORIES.get(category, '?')}"
            queries.append(
                Query(f"{haystack}/q{q_index}", qa["question"], haystack, frozenset(gold), label)
            )
    notes = [
        f"{len(queries)} QAs scored; {no_evidence} dropped (no usable evidence); "
        f"{repaired} malformed evidence ids repaired, {dropped_ids} dropped (not in the "
        "conversation)"
    ]
    return Dataset(
        name,
        level,
        protocol,
        docs,
        queries,
        notes,
        {"no usable evidence": no_evidence} if no_evidence else {},
    )


# coding-agent-life -------------------------------------------------------------------------


def load_coding_agent_life(
    path: Path, name: str, level: str, protocol: str, session_docs: str
) -> Dataset:
    if level != "session":
        raise DatasetError(
            "coding-agent-life has session-level gold only (goldSessionIds); use --level session"
        )
    haystack = "coding-agent-life"
    docs = [
        Doc(
            f"{haystack}/{s['id']}",
            s["id"],
            haystack,
            s["content"],
            created_at=datetime.fromisoformat(s["timestamp"].replace("Z", "+00:00")).timestamp(),
        )
        for s in _read_json(path / "sessions.json")
    ]
    queries = [
        Query(q["id"], q["question"], haystack, frozenset(q["goldSessionIds"]), q.get("type", ""))
        for q in _read_json(path / "queries.json")
    ]
    return Dataset(
        name,
        level,
        protocol,
        docs,
        queries,
        [f"{len(queries)} queries scored over {len(docs)} sessions"],
    )


# coding-paraphrase (shipped in the package) -----------------------------------------------

PACKAGED = Path(__file__).parent / "data"


def load_coding_paraphrase(
    path: Path, name: str, level: str, protocol: str, session_docs: str
) -> Dataset:
    """The sessions of the context benchmark's coding set (every event one turn: the prompt,
    the command with its output, the edit, the answer) and questions asked in other words."""
    if level != "session":
        raise DatasetError(f"{name} has session-level gold only; use --level session")
    spec = _read_json(path)
    haystack = name
    sessions = [
        (
            s["id"],
            [
                Turn(
                    f"{s['id']}/{n}",
                    " ".join(str(v) for v in event.values()),
                    True,
                    "user" if "prompt" in event else "agent",  # as observations.speaker
                )
                for n, event in enumerate(s["events"])
            ],
        )
        for s in _read_json(path.parent / spec["sessions"])["sessions"]
    ]
    docs = _group(level, session_docs, haystack, sessions)
    queries = [
        Query(q["id"], q["question"], haystack, frozenset(q["gold"]), q["type"])
        for q in spec["questions"]
    ]
    note = f"{len(queries)} questions in other words over {len(sessions)} coding sessions"
    return Dataset(name, level, protocol, docs, queries, [note])


Loader = Callable[[Path, str, str, str, str], Dataset]

LOADERS: dict[str, tuple[str, Loader]] = {
    "longmemeval-s": ("longmemeval/longmemeval_s_cleaned_498.json.gz", load_longmemeval),
    "longmemeval-oracle": ("longmemeval/longmemeval_oracle.json.gz", load_longmemeval),
    "locomo": ("locomo/locomo10.json", load_locomo),
    "coding-agent-life": ("coding-agent-life-v1", load_coding_agent_life),
    "coding-paraphrase": (str(PACKAGED / "coding-paraphrase-v1.json"), load_coding_paraphrase),
}


def load(
    name: str,
    data_dir: Path,
    level: str = "session",
    protocol: str = "official",
    session_docs: str = "whole",
) -> Dataset:
    if name not in LOADERS:
        raise DatasetError(f"unknown dataset {name!r}; choose from {', '.join(LOADERS)}")
    relative, loader = LOADERS[name]
    if Path(relative).is_absolute():  # shipped in the package: no data dir needed
        return loader(Path(relative), name, level, protocol, session_docs)
    if not data_dir.is_dir():
        raise DatasetError(
            f"benchmark data dir not found: {data_dir} (pass --data-dir or set ENGRAM_BENCH_DATA)"
        )
    if not (data_dir / relative).exists():
        raise DatasetError(f"{name} is not in {data_dir}: {relative} is missing")
    return loader(data_dir / relative, name, level, protocol, session_docs)


def only_categories(dataset: Dataset, categories: Sequence[str]) -> Dataset:
    """The queries of ``categories`` only, and only the documents of their haystacks; a
    category the dataset does not have is an error that names the ones it has."""
    if not categories:
        return dataset
    known = sorted({q.category for q in dataset.queries})
    unknown = [c for c in categories if c not in known]
    if unknown:
        raise DatasetError(
            f"{dataset.name} has no category {', '.join(map(repr, unknown))}; "
            f"its categories: {', '.join(known)}"
        )
    queries = [q for q in dataset.queries if q.category in categories]
    return _only(
        dataset, queries, f"--category: only {', '.join(categories)} ({len(queries)} questions)"
    )


def limit_queries(dataset: Dataset, limit: int | None) -> Dataset:
    """The first ``limit`` queries and only the documents of their haystacks."""
    if limit is None or limit >= len(dataset.queries):
        return dataset
    return _only(
        dataset, dataset.queries[:limit], f"--limit: only the first {limit} of them are run"
    )


def _only(dataset: Dataset, queries: list[Query], note: str) -> Dataset:
    """``dataset`` with only ``queries`` and the documents of their haystacks, noted."""
    haystacks = {q.haystack for q in queries}
    docs = [d for d in dataset.docs if d.haystack in haystacks]
    return dataclasses.replace(dataset, queries=queries, docs=docs, notes=[*dataset.notes, note])
