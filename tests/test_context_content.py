"""The context block carries the answer, not titles: sessions of the coding set go through the
capture path (engram.bench.context.fill), and the block built for a later question holds the
lines that answer it, cites where they came from, and keeps to its budget."""

from __future__ import annotations

import re

import pytest

from engram import context
from engram.bench import context as bench
from engram.drains import drain_graph
from engram.scope import Scope
from engram.store import Store
from tests.conftest import make_settings

CODING = bench.load_coding()


@pytest.fixture(scope="module")
def filled(tmp_path_factory: pytest.TempPathFactory) -> Store:
    """The ledger-api sessions of the coding set, stored and summarised (keyword and graph
    streams; the vector stream is measured by `engram bench coding-context --context`)."""
    tmp = tmp_path_factory.mktemp("context")
    settings = make_settings(tmp)
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    store = Store.open(settings.database_url)
    bench.fill(store, settings, [s for s in CODING.sessions if s["project"] == "ledger-api"])
    drain_graph(store)
    return store


def question(qid: str) -> bench.Question:
    return next(q for q in CODING.questions if q.question_id == qid)


@pytest.mark.parametrize(
    "qid", [q.question_id for q in CODING.questions if q.project == "ledger-api"]
)
def test_the_block_for_a_question_holds_its_answer_within_budget(filled: Store, qid: str) -> None:
    q = question(qid)
    block = context.build(filled, Scope(q.project), query=q.text, budget_tokens=2000)
    text = bench.normalise(block["context"])
    found = [a for a in q.answers if bench.normalise(a) in text]
    # keyword and graph alone (no vectors here) find every ledger-api answer; the score over
    # all three projects, with vectors, is the benchmark's
    assert found, f"{q.text}: none of {q.answers} in\n{block['context']}"
    assert block["tokens"] <= 2000


def test_an_excerpt_cites_its_session_and_observation(filled: Store) -> None:
    q = question("q07")
    block = context.build(filled, Scope(q.project), query=q.text, budget_tokens=1000)["context"]
    assert re.search(r"^- Session ledger-08 \(2026-\d\d-\d\d\): ", block, re.M)
    assert re.search(r"^  - \[answer\] \(obs_[0-9a-f]{24}\)$", block, re.M)
    assert "had no defer rows.Close()" in block
    repeated = {line for line in block.splitlines() if block.splitlines().count(line) > 1}
    assert repeated <= {"    …", "  - Outcome: completed: tests passing", ""}


def test_a_short_budget_drops_excerpt_lines_never_cuts_one(filled: Store) -> None:
    """Every excerpt line of a small block is a whole line (or sentence) of what the store
    holds; the block shrinks by leaving lines out."""
    from engram.observations import for_session

    with filled.read() as conn:
        units = {
            " ".join(u.split())
            for sid in (s["id"] for s in CODING.sessions if s["project"] == "ledger-api")
            for row in for_session(conn, sid)
            for u in context._units(context._content(row))
        }
    q = question("q07")
    for budget in (120, 300, 600):
        block = context.build(filled, Scope(q.project), query=q.text, budget_tokens=budget)
        assert 0 < block["tokens"] <= budget
        for line in block["context"].splitlines():
            if line.startswith("    ") and line.strip() != "…":
                assert " ".join(line.split()) in units, line


def test_session_start_shows_what_earlier_sessions_asked_answered_and_left(filled: Store) -> None:
    block = context.build(filled, Scope("ledger-api"), budget_tokens=2000)["context"]
    assert "## Last session (2026-" in block and "## Earlier sessions" in block
    earlier = block.split("## Earlier sessions")[1]
    assert re.search(r"^- \(2026-\d\d-\d\d, ledger-0\d\) ", earlier, re.M)
    assert "  Outcome: " in earlier


def test_what_sessions_were_given_is_forgotten_after_a_month(filled: Store) -> None:
    from sqlalchemy import func, select

    from engram.schema import context_injections

    q = question("q07")
    given = context.for_prompt(filled, Scope(q.project), q.text, "s-month", budget_tokens=400)
    assert given["cited"]
    count = select(func.count()).select_from(context_injections)
    with filled.read() as conn:
        before = conn.execute(count).scalar_one()
    assert context.prune_injections(filled) == 0  # a fresh one stays
    later = 31 * 86400 + given_time(filled, "s-month")
    assert context.prune_injections(filled, at=later) == len(given["cited"])
    with filled.read() as conn:
        assert conn.execute(count).scalar_one() == before - len(given["cited"])
    # forgotten: the same prompt in the same session is given it again
    again = context.for_prompt(filled, Scope(q.project), q.text, "s-month", budget_tokens=400)
    assert again["cited"] == given["cited"]


def given_time(store: Store, session_id: str) -> float:
    from sqlalchemy import func, select

    from engram.schema import context_injections as t

    with store.read() as conn:
        return float(
            conn.execute(
                select(func.max(t.c.injected_at)).where(t.c.session_id == session_id)
            ).scalar_one()
        )


def test_a_prompt_gets_context_from_keyword_search_alone_and_filler_gets_none(
    filled: Store,
) -> None:
    """Without vectors (this store: keyword and graph) the prompt bar is the keyword stream's
    top ranks and the shared specific words; before, it also wanted the graph, so a prompt that
    names no file or symbol got nothing (the coding set's prompt hook: 0.28 -> 0.88). Prompts
    that share only filler words still get nothing."""
    answered = 0
    asked = [q for q in CODING.questions if q.project == "ledger-api"]
    for q in asked:
        block = context.for_prompt(
            filled, Scope(q.project), q.text, f"prompt-{q.question_id}", budget_tokens=600
        )
        text = bench.normalise(block["context"])
        answered += any(bench.normalise(a) in text for a in q.answers)
        assert block["tokens"] <= 600
    assert answered >= 0.75 * len(asked), f"{answered} of {len(asked)}"
    for n, prompt in enumerate(bench.UNRELATED_PROMPTS):
        block = context.for_prompt(
            filled, Scope("ledger-api"), prompt, f"filler-{n}", budget_tokens=600
        )
        assert block["tokens"] == 0, (prompt, block["context"])


def test_a_summary_list_heading_is_never_shown_without_an_entry() -> None:
    summary = (
        "Request: a long request " + "word " * 40 + "\nErrors:\n- FAIL TestLedgerTotals (resolved)"
    )
    items = context._summary_items(summary)
    assert [(i.head, i.body) for i in items][1] == (
        "Errors:",
        ["- FAIL TestLedgerTotals (resolved)"],
    )
    for budget in range(10, 80):
        text = context._fit("# h", [("## Last session", items)], budget, {})["context"]
        lines = text.splitlines()
        if "Errors:" in lines:
            assert lines[lines.index("Errors:") + 1].startswith("- FAIL"), text
    # a budget that fits the heading's line but not its entry leaves both out
    fits_heading = (
        context.estimate_tokens("# h") + 1 + context.estimate_tokens("## Last session") + 2 + 3
    )
    assert (
        "Errors:"
        not in context._fit("# h", [("## Last session", items[1:])], fits_heading, {})["context"]
    )


def test_a_summary_line_ending_in_a_colon_is_kept() -> None:
    """Only a line followed by its entries is a list's heading; a request that ends in ":" is
    shown like any other line."""
    items = context._summary_items("Request: fix the two failing tests:\nOutcome: completed")
    assert [(i.head, i.body, i.needs_body) for i in items] == [
        ("Request: fix the two failing tests:", [], False),
        ("Outcome: completed", [], False),
    ]
    text = context._fit("# h", [("## Last session", items)], 200, {})["context"]
    assert "Request: fix the two failing tests:" in text


def test_the_prompt_bar_counts_the_streams_own_ranks_not_the_feedback_pass() -> None:
    """Agreement is two streams' own top ranks: the vector stream's second pass (``feedback``,
    its query moved toward the first hit) is not a second witness."""
    hit = {"title": "Ledger totals", "text": "TestLedgerTotals fails on rounding in ledger.go"}
    specific = context._terms("why does the ledger rounding break") - context.GENERIC_TERMS
    assert context._relevant({**hit, "ranks": {"bm25": 2, "vector": 4}}, specific)
    assert not context._relevant({**hit, "ranks": {"bm25": 2, "feedback": 1}}, specific)
    assert not context._relevant({**hit, "ranks": {"bm25": 2, "vector": 11}}, specific)
    assert context._relevant({**hit, "ranks": {"bm25": 2, "vector": 11}}, specific, agreeing=1)
