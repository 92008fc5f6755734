"""Does the context block carry the answer? ``engram bench <dataset> --context``.

A store is filled through the capture path any client uses (observe bodies in a host's shape,
validated, scrubbed and compressed as the gateway and a worker would; sessions started and ended
at the host's times and summarised; vectors and graph built), then, for each question, the
block a new session in that project would receive is built — with the question as the query (what
a prompt hook asks) and without one (what session start gets) — at each budget. Scored:

- ``any``: at least one of the question's answering phrases is in the block;
- ``all``: every one of them is;
- ``tokens``: the block's size (median), and ``full``: the share of the budget used (median).

Phrases are compared case-insensitively with runs of whitespace collapsed, so a phrase split
across lines in an output still counts.
"""

from __future__ import annotations

import dataclasses
import json
import re
import statistics
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from engram.bench.datasets import lme_time, locomo_time
from engram.bench.report import environment_note

DATA = Path(__file__).with_name("data")
CODING_SET = DATA / "coding-context-v1.json"
DEFAULT_BUDGETS = (500, 1000, 2000)
HOST = "claude-code"
"""The shape the coding set's events are sent in (Claude Code's hook payloads, normalised)."""
STEP_SECONDS = 47.0
"""Time between two events of a session (the host's timestamps)."""


@dataclasses.dataclass(frozen=True)
class Question:
    question_id: str
    project: str
    text: str
    answers: tuple[str, ...]
    sessions: tuple[str, ...]
    kind: str
    turns: bool = False
    """``answers`` are evidence turns (LongMemEval, LoCoMo): one counts as in the block when one
    of its sentences of five words or more is (the block holds excerpts, sentence by sentence),
    or the whole turn when it is shorter. Otherwise they are phrases, found verbatim."""


@dataclasses.dataclass(frozen=True)
class CodingSet:
    name: str
    sessions: list[dict[str, Any]]
    questions: list[Question]


class ContextDataError(ValueError):
    """The data set cannot be used; the message says where."""


def load_coding(path: Path = CODING_SET) -> CodingSet:
    """The coding set, checked: every answering phrase is in one of its gold sessions."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ContextDataError(f"cannot read {path}: {exc}") from None
    sessions = list(raw["sessions"])
    by_id = {s["id"]: s for s in sessions}
    questions = []
    for q in raw["questions"]:
        gold = tuple(q["sessions"])
        text = normalise(" ".join(_texts(by_id[s]) for s in gold if s in by_id))
        missing = [a for a in q["answers"] if normalise(a) not in text]
        if missing or any(s not in by_id for s in gold):
            raise ContextDataError(f"{path.name} {q['id']}: answer not in its sessions: {missing}")
        questions.append(
            Question(
                q["id"], q["project"], q["question"], tuple(q["answers"]), gold, q.get("type", "")
            )
        )
    return CodingSet(raw.get("name", path.stem), sessions, questions)


def _texts(session: dict[str, Any]) -> str:
    return " ".join(str(v) for event in session["events"] for v in event.values())


def normalise(text: str) -> str:
    return " ".join(text.lower().split())


# --- filling a store through the capture path ---------------------------------------------


def observe_bodies(session: dict[str, Any]) -> list[dict[str, Any]]:
    """The session's events as ``POST /v1/observe`` bodies (Claude Code's tools and hooks, as
    its adapter sends them), at the host's times."""
    started = _epoch(session["started"])
    root = f"/home/dev/src/{session['project']}"
    bodies = []
    for number, event in enumerate(session["events"]):
        body: dict[str, Any] = {
            "eventId": f"{session['id']}:{number}",
            "sessionId": session["id"],
            "project": session["project"],
            "host": HOST,
            "timestamp": started + number * STEP_SECONDS,
        }
        body.update(_shape(event, root))
        bodies.append(body)
    bodies.append(
        {
            "eventId": f"{session['id']}:end",
            "sessionId": session["id"],
            "project": session["project"],
            "host": HOST,
            "hookType": "SessionEnd",
            "eventKind": "session_end",
            "toolOutput": {"message": "exit"},
            "timestamp": started + len(session["events"]) * STEP_SECONDS,
        }
    )
    return bodies


def _shape(event: dict[str, Any], root: str) -> dict[str, Any]:
    def path(rel: str) -> str:
        return rel if rel.startswith("/") else f"{root}/{rel}"

    tool = {"hookType": "PostToolUse", "eventKind": "tool_post"}
    if "prompt" in event:
        return {"hookType": "UserPromptSubmit", "eventKind": "prompt", "prompt": event["prompt"]}
    if "response" in event:
        return {
            "hookType": "Stop",
            "eventKind": "agent_response",
            "toolOutput": {"message": event["response"]},
        }
    if "bash" in event:
        return {
            **tool,
            "toolName": "Bash",
            "toolInput": {"command": event["bash"]},
            "toolOutput": {"stdout": event.get("out", ""), "stderr": "", "interrupted": False},
        }
    if "edit" in event:
        file = path(event["edit"])
        return {
            **tool,
            "toolName": "Edit",
            "toolInput": {
                "file_path": file,
                "old_string": event.get("old", ""),
                "new_string": event.get("new", ""),
            },
            "toolOutput": {"filePath": file},
        }
    if "write" in event:
        file = path(event["write"])
        return {
            **tool,
            "toolName": "Write",
            "toolInput": {"file_path": file, "content": event.get("content", "")},
            "toolOutput": {"type": "create", "filePath": file},
        }
    if "read" in event:
        file = path(event["read"])
        return {
            **tool,
            "toolName": "Read",
            "toolInput": {"file_path": file},
            "toolOutput": {"type": "text", "file": {"filePath": file, "content": event["out"]}},
        }
    if "grep" in event:
        return {
            **tool,
            "toolName": "Grep",
            "toolInput": {"pattern": event["grep"], "path": path(event.get("path", "."))},
            "toolOutput": {"mode": "content", "content": event.get("out", "")},
        }
    raise ContextDataError(f"unknown event shape: {sorted(event)}")


def _epoch(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def fill(store: Any, settings: Any, sessions: Iterable[dict[str, Any]]) -> int:
    """Store every session's events as capture would, end and summarise each session; returns
    the number of observations stored."""
    from engram import observations
    from engram import sessions as sessions_mod
    from engram.compress import compress
    from engram.events import validate_event
    from engram.privacy import scrub
    from engram.summary import summarize_session

    stored = 0
    for session in sessions:
        bodies = observe_bodies(session)
        sessions_mod.start(
            store,
            session["id"],
            session["project"],
            host=HOST,
            agent_id=None,
            cwd=f"/home/dev/src/{session['project']}",
            at=bodies[0]["timestamp"],
        )
        for body in bodies:
            event = validate_event(
                body, max_field_chars=settings.max_field_chars, received_at=body["timestamp"]
            )
            compressed = compress(scrub(event.to_payload()))  # type: ignore[arg-type]
            with store.write() as conn:
                stored += bool(observations.store(conn, store.keyword, event, compressed))
        sessions_mod.end(store, session["id"], at=bodies[-1]["timestamp"])
        summarize_session(store, session["id"])
    return stored


def build_indexes(store: Any, vectors: Any) -> None:
    """Bring the graph and (when on) the vectors up to date with everything stored."""
    from engram.drains import drain_graph, drain_vectors

    drain_graph(store)
    if vectors is not None and vectors.enabled:
        while drain_vectors(store, vectors, batch=32, batches=50).more:
            pass


# --- scoring --------------------------------------------------------------------------------


@dataclasses.dataclass
class Cell:
    """One (budget, with or without the question) column over every question."""

    budget: int
    with_query: bool
    prompt_hook: bool = False
    """Built as a prompt hook asks (``context.for_prompt``): relevance bar, once per session."""
    any_hits: int = 0
    all_hits: int = 0
    questions: int = 0
    tokens: list[int] = dataclasses.field(default_factory=list)
    by_kind: dict[str, list[int]] = dataclasses.field(default_factory=dict)
    seconds: list[float] = dataclasses.field(default_factory=list)
    misses: list[str] = dataclasses.field(default_factory=list)

    def row(self) -> dict[str, Any]:
        n = max(self.questions, 1)
        return {
            "budget": self.budget,
            "query": "prompt hook"
            if self.prompt_hook
            else "question"
            if self.with_query
            else "none",
            "any": round(self.any_hits / n, 3),
            "all": round(self.all_hits / n, 3),
            "tokensMedian": statistics.median(self.tokens) if self.tokens else 0,
            "fullMedian": round(statistics.median(self.tokens) / self.budget, 2)
            if self.tokens
            else 0.0,
            "byType": {
                kind: round(sum(hits) / len(hits), 3) for kind, hits in sorted(self.by_kind.items())
            },
            "p50Ms": round(statistics.median(self.seconds) * 1000, 1) if self.seconds else 0.0,
            "questions": self.questions,
        }


def score(
    store: Any,
    vectors: Any,
    settings: Any,
    questions: Sequence[Question],
    budgets: Sequence[int] = DEFAULT_BUDGETS,
    progress: Callable[[str], None] | None = None,
) -> list[Cell]:
    """Build each question's block at each budget, with and without the question."""
    from engram import context
    from engram.scope import Scope

    cells = [Cell(b, q) for q in (True, False) for b in budgets]
    if settings.prompt_context_tokens:
        cells.append(Cell(settings.prompt_context_tokens, True, prompt_hook=True))
    for number, question in enumerate(questions, start=1):
        wanted = [normalise(a) for a in question.answers]
        for cell in cells:
            started = time.perf_counter()
            if cell.prompt_hook:  # a new session per question: nothing was given to it before
                block = context.for_prompt(
                    store,
                    Scope(question.project),
                    question.text,
                    f"bench-prompt-{question.question_id}",
                    budget_tokens=cell.budget,
                    vectors=vectors,
                    **settings.fusion_options("context"),
                )
            else:
                block = context.build(
                    store,
                    Scope(question.project),
                    query=question.text if cell.with_query else None,
                    session_id=f"bench-new-{question.question_id}",
                    budget_tokens=cell.budget,
                    vectors=vectors,
                    **settings.fusion_options("context"),
                )
            cell.seconds.append(time.perf_counter() - started)
            text = normalise(block["context"])
            found = [_present(a, text, question.turns) for a in wanted]
            cell.questions += 1
            cell.any_hits += any(found)
            cell.all_hits += all(found)
            cell.tokens.append(block["tokens"])
            cell.by_kind.setdefault(question.kind, []).append(int(any(found)))
            if not any(found):
                cell.misses.append(question.question_id)
        if progress and number % 10 == 0:
            progress(f"  {number}/{len(questions)} questions")
    return cells


def _present(answer: str, block: str, turn: bool) -> bool:
    if not turn:
        return answer in block
    sentences = [x.strip() for x in re.split(r"(?<=[.!?])\s+", answer) if x.strip()]
    long = [x for x in sentences if len(x.split()) >= 5]
    return any(x in block for x in long) if long else answer in block


# --- the public sets, as sessions ------------------------------------------------------------


def _iso(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:00Z")


def load_longmemeval(path: Path, limit: int | None) -> CodingSet:
    """Each question's haystack as one project of sessions (user turns as prompts, assistant
    turns as the agent's answers, at the haystack's dates); evidence = the turns that hold the
    answer (``has_answer``). Abstention questions (no evidence) are skipped."""
    import gzip

    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as handle:
        items = json.load(handle)
    sessions: list[dict[str, Any]] = []
    questions: list[Question] = []
    for item in items:
        if limit is not None and len(questions) >= limit:
            break
        qid = item["question_id"]
        evidence, gold = [], []
        project = f"lme-{qid}"
        for sid, date, turns in zip(
            item["haystack_session_ids"],
            item["haystack_dates"],
            item["haystack_sessions"],
            strict=True,
        ):
            events = []
            for turn in turns:
                key = "prompt" if turn["role"] == "user" else "response"
                events.append({key: turn["content"]})
                if turn.get("has_answer"):
                    evidence.append(turn["content"])
                    gold.append(f"{qid}:{sid}")
            if events:
                sessions.append(
                    {
                        "id": f"{qid}:{sid}"[:200],
                        "project": project,
                        "started": _iso(lme_time(date)),
                        "events": events,
                    }
                )
        if not evidence:
            continue
        questions.append(
            Question(
                qid,
                project,
                item["question"],
                tuple(evidence),
                tuple(dict.fromkeys(gold)),
                item.get("question_type", ""),
                turns=True,
            )
        )
    keep = {q.project for q in questions}
    return CodingSet(path.name, [x for x in sessions if x["project"] in keep], questions)


def load_locomo(path: Path, limit: int | None) -> CodingSet:
    """Each conversation as one project; its sessions at their dates; the first speaker's
    turns as prompts, the second's as answers, each "Speaker: text"; evidence = the dialog
    turns each QA names (malformed or unknown ids dropped)."""
    conversations = json.loads(path.read_text(encoding="utf-8"))
    sessions: list[dict[str, Any]] = []
    questions: list[Question] = []
    labels = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
    for conv in conversations:
        project = f"locomo-{conv['sample_id']}"
        talk = conv["conversation"]
        turns: dict[str, str] = {}
        for key in sorted(
            (k for k in talk if re.fullmatch(r"session_\d+", k)), key=lambda k: int(k[8:])
        ):
            events = []
            for turn in talk[key]:
                text = f"{turn['speaker']}: {turn['text']}"
                turns[turn["dia_id"]] = text
                role = "prompt" if turn["speaker"] == talk["speaker_a"] else "response"
                events.append({role: text})
            sessions.append(
                {
                    "id": f"{conv['sample_id']}:{key}",
                    "project": project,
                    "started": _iso(locomo_time(talk[f"{key}_date_time"])),
                    "events": events,
                }
            )
        for number, qa in enumerate(conv["qa"]):
            ids = re.findall(r"D\d+:\d+", " ".join(qa.get("evidence") or []))
            evidence = tuple(turns[i] for i in dict.fromkeys(ids) if i in turns)
            if not evidence:
                continue
            questions.append(
                Question(
                    f"{conv['sample_id']}/q{number}",
                    project,
                    qa["question"],
                    evidence,
                    (),
                    labels.get(qa.get("category"), "?"),
                    turns=True,
                )
            )
    if limit is not None:  # spread over the conversations: every n-th question
        step = max(1, len(questions) // limit)
        questions = questions[::step][:limit]
    return CodingSet(path.name, sessions, questions)


UNRELATED_PROMPTS = (
    "thanks, looks good",
    "write a haiku about autumn leaves",
    "run the tests",
    "ok, continue",
    "what time is it in Tokyo?",
    "explain what a monad is in one paragraph",
    "please commit this with a good message",
    "can you make the output more concise",
    "let's take a break and pick this up tomorrow",
    "tell me a joke about databases",
)
"""Prompts that share nothing with any stored session: the prompt hook should add nothing."""


def unrelated(store: Any, vectors: Any, settings: Any, projects: Iterable[str]) -> dict[str, Any]:
    """Each of ``UNRELATED_PROMPTS`` in each project, as a new session's prompt: how many got
    any context (each one is a false positive) and their median size."""
    from engram import context
    from engram.scope import Scope

    given: list[int] = []
    prompts = 0
    for project in sorted(set(projects)):
        for n, prompt in enumerate(UNRELATED_PROMPTS):
            prompts += 1
            block = context.for_prompt(
                store,
                Scope(project),
                prompt,
                f"bench-unrelated-{project}-{n}",
                budget_tokens=settings.prompt_context_tokens,
                vectors=vectors,
                **settings.fusion_options("context"),
            )
            if block["tokens"]:
                given.append(block["tokens"])
    return {
        "prompts": prompts,
        "answered": len(given),
        "tokensMedian": statistics.median(given) if given else 0,
    }


def run_coding(
    budgets: Sequence[int] = DEFAULT_BUDGETS,
    embedder: str = "local",
    progress: Callable[[str], None] | None = None,
    path: Path = CODING_SET,
    data: CodingSet | None = None,
    search: Mapping[str, str] | None = None,
    llm_env: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The whole benchmark on the coding set (or ``data``), in a throwaway data dir; ``search``:
    settings of the hybrid search (``ENGRAM_FUSION``, ...) other than the server's defaults;
    ``llm_env``: ``ENGRAM_LLM_*`` settings of a provider whose summaries (and facts) replace the
    heuristic summaries before scoring, as the server's LLM work would."""
    from engram.settings import load_settings
    from engram.store import Store
    from engram.vectors import Vectors

    data = data or load_coding(path)
    say = progress or (lambda _m: None)
    with tempfile.TemporaryDirectory(prefix="engram-context-bench-") as tmp:
        settings = load_settings(
            environ={
                "ENGRAM_DATA_DIR": f"{tmp}/data",
                "ENGRAM_CONFIG_DIR": f"{tmp}/config",
                "ENGRAM_EMBEDDER": embedder,
                "ENGRAM_LOG_LEVEL": "WARNING",
                **(search or {}),
                **(llm_env or {}),
            }
        )
        settings.data_dir.mkdir(parents=True, exist_ok=True)
        store = Store.open(settings.database_url)
        vectors = Vectors(settings, store) if embedder != "none" else None
        try:
            started = time.perf_counter()
            stored = fill(store, settings, data.sessions)
            llm_report = _llm_pass(store, settings, data.sessions, say) if llm_env else None
            build_indexes(store, vectors)
            say(
                f"stored {stored} observations of {len(data.sessions)} sessions and built the "
                f"indexes in {time.perf_counter() - started:.1f}s"
            )
            cells = score(store, vectors, settings, data.questions, budgets, say)
            false_positives = (
                unrelated(store, vectors, settings, (q.project for q in data.questions))
                if settings.prompt_context_tokens
                else None
            )
        finally:
            store.close()
    return {
        "dataset": data.name,
        "sessions": len(data.sessions),
        "observations": stored,
        "questions": len(data.questions),
        "embedder": embedder,
        "llm": llm_report,
        "cells": [c.row() for c in cells],
        "unrelated": false_positives,
        "misses": {
            f"{c.budget}/{'p' if c.prompt_hook else 'q' if c.with_query else '-'}": c.misses
            for c in cells
        },
    }


def _llm_pass(
    store: Any, settings: Any, sessions: Sequence[dict[str, Any]], say: Callable[[str], None]
) -> dict[str, Any]:
    """Each session's summary and facts by the configured provider (``engram.llm``)."""
    from engram.llm import Ledger, llm_from_settings
    from engram.llm.graphing import extract_with_llm
    from engram.llm.summaries import summarize_with_llm

    llm = llm_from_settings(settings, store)
    if llm is None:
        raise ContextDataError("--context-llm needs ENGRAM_LLM_PROVIDERS (and its settings) set")
    started = time.perf_counter()
    done: dict[str, int] = {}
    for n, session in enumerate(sessions, 1):
        for name, task in (("summaries", summarize_with_llm), ("facts", extract_with_llm)):
            what, _ = task(store, llm, session["id"])
            ok = what == "summarized" or what.startswith("facts")
            done[f"{name} {'ok' if ok else 'kept heuristic'}"] = (
                done.get(f"{name} {'ok' if ok else 'kept heuristic'}", 0) + 1
            )
        if n % 5 == 0 or n == len(sessions):
            say(
                f"[llm] {n}/{len(sessions)} sessions ({time.perf_counter() - started:.0f}s): {done}"
            )
    rows = Ledger(store).rows("0000")
    return {
        **done,
        "calls": sum(r["calls"] for r in rows),
        "invalid": sum(r["invalid"] for r in rows),
        "inputTokens": sum(r["input_tokens"] for r in rows),
        "outputTokens": sum(r["output_tokens"] for r in rows),
        "seconds": round(time.perf_counter() - started, 1),
    }


def render(result: dict[str, Any]) -> str:
    """A markdown table: rows = budget x query, columns = the scores."""
    kinds = sorted({k for c in result["cells"] for k in c["byType"]})
    head = ["budget", "query", "any", "all", "tokens (median)", "full", *kinds, "p50 ms"]
    lines = [
        f"# Context benchmark: {result['dataset']} ({result['sessions']} sessions, "
        f"{result['observations']} observations, {result['questions']} questions; "
        f"embedder {result['embedder']})",
        "",
        *([environment_note(result["environment"]), ""] if result.get("environment") else []),
        *([f"LLM pass: {json.dumps(result['llm'])}", ""] if result.get("llm") else []),
        "| " + " | ".join(head) + " |",
        "|" + "---|" * len(head),
    ]
    for c in result["cells"]:
        cells = [
            str(c["budget"]),
            c["query"],
            f"{c['any']:.2f}",
            f"{c['all']:.2f}",
            f"{c['tokensMedian']:.0f}",
            f"{c['fullMedian']:.2f}",
            *(f"{c['byType'].get(k, 0):.2f}" for k in kinds),
            f"{c['p50Ms']:.0f}",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    lines += [
        "",
        "any / all: the share of questions whose block holds at least one / every answering "
        "phrase; full: tokens used / budget; type columns: `any` per question type.",
    ]
    wrong = result.get("unrelated")
    if wrong:
        lines += [
            "",
            f"prompt hook, unrelated prompts: {wrong['answered']} of {wrong['prompts']} got "
            f"context (median {wrong['tokensMedian']:.0f} tokens when they did)",
        ]
    return "\n".join(lines)
