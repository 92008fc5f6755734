"""Context for questions about a conversation (LoCoMo's shape): a date the question names puts
the sessions recorded then first, and the reply to a turn that matched is shown with it, though
it shares no word with the question. The sessions go through the capture path
(engram.bench.context.fill); keyword and graph streams only."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from engram import context
from engram.bench import context as bench
from engram.drains import drain_graph
from engram.scope import Scope
from engram.store import Store, iso
from tests.conftest import make_settings

PROJECT = "talks"


def talk(sid: str, started: str, *turns: str) -> dict[str, object]:
    """A conversation: turns alternate between the person asking (a prompt) and the one
    answering (the agent's reply)."""
    events = [{"prompt": t} if n % 2 == 0 else {"response": t} for n, t in enumerate(turns)]
    return {"id": sid, "project": PROJECT, "started": started, "events": events}


TALKS = [
    talk(
        "talk-1",
        "2023-05-01T18:00:00Z",
        "Caroline: Melanie, what have you been painting lately?",
        "Melanie: I painted a sunrise over the lake; painting calms me after work.",
        "Caroline: Will Melanie paint another one?",
        "Melanie: Yes, I paint every weekend now, mostly landscapes.",
    ),
    talk(
        "talk-2",
        "2023-05-08T18:00:00Z",
        "Caroline: How was your Monday?",
        "Melanie: We spent it at the pottery workshop and I made a blue bowl.",
        "Caroline: That sounds lovely.",
        "Melanie: The kids want to go back next week.",
    ),
    talk(
        "talk-3",
        "2023-06-20T18:00:00Z",
        "Caroline: Did you go camping with the kids this summer?",
        "Yes! We went to the lake in July and watched the Perseid meteor shower.",
        "Caroline: Melanie, is the painting class still on?",
        "Melanie: It is, we paint still lifes there; I finished a painting of a vase.",
    ),
]


@pytest.fixture(scope="module")
def talks(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    settings = make_settings(tmp_path_factory.mktemp("talks"))
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    store = Store.open(settings.database_url)
    bench.fill(store, settings, TALKS)
    drain_graph(store)
    yield store
    store.close()


def sessions_shown(block: str) -> list[str]:
    return re.findall(r"^- Session (\S+) \(", block, re.M)


def relevant(store: Store, query: str) -> str:
    return context.build(store, Scope(PROJECT), query=query, budget_tokens=2000)["context"]


def test_search_alone_ranks_the_painting_talks_above_the_dated_one(talks: Store) -> None:
    """The premise of the next test: without a date, the talks that say "paint" most lead."""
    shown = sessions_shown(relevant(talks, "What did Melanie paint?"))
    assert shown[:2] != ["talk-2"] and shown[0] in {"talk-1", "talk-3"}


def test_a_date_the_question_names_puts_that_days_session_first(talks: Store) -> None:
    block = relevant(talks, "What did Melanie paint on 8 May, 2023?")
    shown = sessions_shown(block)
    # talk-2 holds no word of the question: it is there because it ran that day
    assert shown[0] == "talk-2", block
    assert "pottery workshop and I made a blue bowl" in block


def test_a_month_the_question_names_puts_that_months_sessions_first(talks: Store) -> None:
    shown = sessions_shown(relevant(talks, "What did Melanie paint in June 2023?"))
    assert shown[0] == "talk-3"


def test_a_date_no_session_ran_on_leaves_searchs_order(talks: Store) -> None:
    undated = sessions_shown(relevant(talks, "What did Melanie paint?"))
    assert sessions_shown(relevant(talks, "What did Melanie paint on 3 March, 2021?")) == undated


@pytest.mark.parametrize(
    ("named", "then_days", "painted_days"),
    [
        ("two weeks ago", 14, 1 / 24),  # a time counted back: about 10 to 19 days ago
        ("in the past week", 3, 35),  # a stretch up to now: about 10 days back to now
    ],
)
def test_a_time_named_from_now_puts_that_times_session_first(
    tmp_path: Path, named: str, then_days: float, painted_days: float
) -> None:
    """The session recorded at the time the question names leads, though the other says
    "paint" and it does not."""
    now = time.time()
    recent = [
        talk(
            "talk-then",
            iso(now - then_days * 86400),
            "How was your Monday?",
            "We spent it at the pottery workshop and I made a blue bowl.",
        ),
        talk(
            "talk-painting",
            iso(now - painted_days * 86400),
            "Caroline: Melanie, what have you been painting lately?",
            "Melanie: I painted a sunrise over the lake; painting calms me after work.",
        ),
    ]
    settings = make_settings(tmp_path)
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    store = Store.open(settings.database_url)
    try:
        bench.fill(store, settings, recent)
        assert sessions_shown(relevant(store, "What did Melanie paint?"))[0] == "talk-painting"
        # talk-then holds no word of the question: it is there because it ran then
        block = relevant(store, f"What did Melanie paint {named}?")
        assert sessions_shown(block)[0] == "talk-then", block
    finally:
        store.close()


def test_the_reply_to_a_matching_turn_is_shown_right_after_it(talks: Store) -> None:
    block = relevant(talks, "Where did Melanie go camping with her kids?")
    lines = block.splitlines()
    asked = lines.index("    Caroline: Did you go camping with the kids this summer?")
    # the reply shares no word with the question and is not the session's last answer
    replied = next(n for n, line in enumerate(lines) if "Perseid meteor shower" in line)
    assert asked < replied, block
    between = [line for line in lines[asked + 1 : replied] if line.startswith("  - [")]
    assert len(between) == 1 and between[0].startswith("  - [answer]"), block
