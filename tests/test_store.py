"""The store of record and its keyword index, on SQLite and (when configured) PostgreSQL."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Mapping
from pathlib import Path

import pytest
from sqlalchemy import select
from sqlalchemy import text as sql

from engram import analysis, inbox, keyword, memories, observations, sessions, summary
from engram.compress import compress
from engram.db import MIGRATIONS, migrate, schema_version
from engram.events import validate_event
from engram.keyword import Fts5Index, KeywordDoc, PostingsIndex
from engram.schema import capture_inbox, event_ledger, kw_docs
from engram.schema import observations as observations_table
from engram.scope import Scope, Window
from engram.store import Store
from tests.support import count_rows


def _event(project: str, session: str, n: int, text: str, agent: str | None = None):  # noqa: ANN202
    return validate_event(
        {
            "eventId": f"{session}:{n}",
            "sessionId": session,
            "project": project,
            "host": "raw",
            "hookType": "PostToolUse",
            "toolName": "Bash",
            "toolInput": {"command": text},
            "toolOutput": text,
            "agentId": agent,
        },
        max_field_chars=10_000,
        received_at=time.time(),
    )


def _accept_and_store(store: Store, event) -> None:  # noqa: ANN001
    assert inbox.accept(store, event, 100).is_new
    claim = inbox.claim(store, event.event_id, 30)
    assert claim is not None
    with store.write() as conn:
        observations.store(conn, store.keyword, claim.event, compress(claim.event.to_payload()))


def test_migrations_are_idempotent(store: Store) -> None:
    assert schema_version(store.engine) == MIGRATIONS[-1][0]
    assert migrate(store.engine) == []


def test_keyword_backend_matches_dialect(store: Store) -> None:
    expected = Fts5Index if store.is_sqlite else PostingsIndex
    assert isinstance(store.keyword.backend, expected)


def test_search_stems_splits_identifiers_and_uses_synonyms(store: Store) -> None:
    docs = {
        "d-stem": "the deployment scripts were failing on staging",
        "d-camel": "renamed getUserById in the accounts service",
        "d-syn": "the database migration locked the orders table",
        "d-other": "updated the README badges",
        "d-file": "pinned the base image in the Dockerfile",
    }
    with store.write() as conn:
        for doc_id, body in docs.items():
            store.keyword.upsert(conn, KeywordDoc(doc_id, "observation", "p", body, time.time()))
    with store.read() as conn:

        def top(query: str) -> str:
            return store.keyword.search(conn, query, Scope("p"), 5)[0].doc_id

        assert top("deploy script fails") == "d-stem"
        assert top("user by id") == "d-camel"
        assert top("db migration") == "d-syn"
        # a question about docker finds the session that only edited the Dockerfile
        assert top("the docker fix") == "d-file"
        assert store.keyword.search(conn, "kubernetes", Scope("p"), 5) == []
        # user text is never read as query syntax
        assert (
            store.keyword.search(conn, 'README" OR "x* NEAR(', Scope("p"), 5)[0].doc_id == "d-other"
        )


def test_coverage_weighs_the_query_words_a_document_holds_by_their_rarity(store: Store) -> None:
    """The share of the query's terms each document holds, each term weighted by log(1 + N /
    (1 + df)) over the whole index (every project), stemmed and identifiers split as indexed."""
    docs = {
        "common": "the worker retried the job",
        "rare": "the invoice rounding bug in getTotalCents",
        "both": "the worker fixed invoice rounding",
        **{f"filler-{n}": f"the worker ran job {n}" for n in range(6)},
    }
    with store.write() as conn:
        for doc_id, body in docs.items():
            project = "other" if doc_id.startswith("filler") else "p"
            store.keyword.upsert(conn, KeywordDoc(doc_id, "observation", project, body, 1.0))
    query = "Why did the worker's invoice rounding fail in total cents?"
    with store.read() as conn:
        n_docs, df = store.keyword.frequencies(conn, {"worker": "worker", "invoic": "invoice"})
        weights = keyword.term_weights(conn, store.keyword, query)
        covered = keyword.coverage(conn, weights, ["common", "rare", "both", "gone"])
    assert n_docs == 9 and df == {"worker": 8, "invoic": 2}
    assert weights["worker"] == pytest.approx(math.log(1 + 9 / 9))
    words = {analysis.stem(w) for w in analysis.words(query)}
    frequency = {t: sum(t in analysis.index_terms(b) for b in docs.values()) for t in words}
    weight = {t: math.log(1 + 9 / (1 + f)) for t, f in frequency.items()}

    def share(doc_id: str) -> float:
        held = set(analysis.index_terms(docs[doc_id]))
        return sum(w for t, w in weight.items() if t in held) / sum(weight.values())

    assert set(covered) == {"common", "rare", "both"}  # a document the index lacks is left out
    for doc_id, value in covered.items():
        assert value == pytest.approx(share(doc_id))
    # the rare words (invoice, rounding, total, cents via getTotalCents) outweigh the common one
    assert covered["rare"] > covered["both"] > covered["common"] > 0
    with store.read() as conn:
        assert keyword.term_weights(conn, store.keyword, "?!") == {}
        assert keyword.coverage(conn, {}, ["rare"]) == {}
        assert keyword.coverage(conn, weights, []) == {}


def test_a_documents_neighbour_is_the_other_partys_turn_recorded_just_before_it(
    store: Store,
) -> None:
    """By time, then by the order they were indexed (turns of one conversation share its time);
    only the same kind in the same session; only where the other party said it (a turn after
    its own speaker's, or next to one without a speaker, has none); none without a session."""
    docs = [
        ("a1", "observation", "A", 10.0, "user"),
        ("a2", "observation", "A", 20.0, "agent"),
        ("a3", "observation", "A", 20.0, "agent"),  # same time as a2: indexed after it
        ("a4", "observation", "A", 30.0, "user"),
        ("a5", "observation", "A", 40.0, None),  # no speaker: no one's neighbour, none of its own
        ("a6", "observation", "A", 50.0, "user"),
        ("a-sum", "summary", "A", 35.0, "agent"),  # another kind: not a neighbour of a5
        ("b1", "observation", "B", 21.0, "user"),  # another session, between a2 and a4 in time
        ("d1", "observation", "D", 10.0, "user"),  # a store of the user's turns alone
        ("d2", "observation", "D", 11.0, "user"),
        ("e1", "observation", "E", 10.0, "Caroline"),  # two people talking
        ("e2", "observation", "E", 11.0, "Melanie"),
        ("e3", "observation", "E", 12.0, "Caroline"),
        ("lone", "observation", "C", 5.0, "user"),
        ("none", "memory", None, 20.0, None),
    ]
    with store.write() as conn:
        for doc_id, kind, session, at, speaker in docs:
            store.keyword.upsert(
                conn,
                KeywordDoc(
                    doc_id, kind, "p", f"text {doc_id}", at, session_id=session, speaker=speaker
                ),
            )
    asked = ["a1", "a2", "a3", "a4", "a5", "a6", "a-sum", "d1", "d2", "e2", "e3", "lone", "none"]
    with store.read() as conn:
        beside = keyword.neighbours(conn, [*asked, "x"])
        assert keyword.neighbours(conn, []) == {}
    assert beside == {
        "a1": (),
        "a2": ("a1",),
        "a3": (),  # after a2, its own speaker's
        "a4": ("a3",),
        "a5": (),
        "a6": (),  # after a5, which has no speaker
        "a-sum": (),
        "d1": (),
        "d2": (),
        "e2": ("e1",),
        "e3": ("e2",),
        "lone": (),
    }


def test_observations_are_filed_by_who_said_them_and_old_ones_are_given_theirs(
    store: Store, tmp_path: Path
) -> None:
    """A prompt is the user's, whatever the agent did or said is the agent's (``neighbours``
    tell the two apart); an import files them by the same rule, and migration 19 gives documents
    indexed before it theirs; summaries and memories have none."""
    from engram import transfer

    prompt = validate_event(
        {
            "eventId": "s1:0",
            "sessionId": "s1",
            "project": "p",
            "host": "raw",
            "hookType": "UserPromptSubmit",
            "eventKind": "prompt",
            "prompt": "why does the billing service refuse connections?",
        },
        max_field_chars=10_000,
        received_at=time.time(),
    )
    for event in (prompt, _event("p", "s1", 1, "curl localhost:8443 refused")):
        _accept_and_store(store, event)
    with store.write() as conn:
        store.keyword.upsert(
            conn, KeywordDoc("sum_s1", "summary", "p", "fixed it", 9.0, None, "s1")
        )

    def speakers(of: Store = store) -> dict[str, str | None]:
        with of.read() as conn:
            rows = conn.execute(select(kw_docs.c.doc_id, kw_docs.c.kind, kw_docs.c.speaker))
            return {r.kind if r.kind == "summary" else r.doc_id: r.speaker for r in rows}

    with store.read() as conn:
        kinds = dict(conn.execute(select(observations_table.c.id, observations_table.c.kind)).all())
    by_kind = {kinds[k]: v for k, v in speakers().items() if k in kinds}
    assert by_kind == {"prompt": "user", "command": "agent"}
    assert speakers()["summary"] is None
    before = speakers()
    with store.write() as conn:  # back to the shape before migration 19
        conn.execute(sql("ALTER TABLE kw_docs DROP COLUMN speaker"))
        conn.execute(sql("DELETE FROM schema_migrations WHERE version = 19"))
    assert migrate(store.engine) == [19]
    assert speakers() == before
    target = Store.open(f"sqlite:///{tmp_path / 'target.db'}")
    try:
        transfer.import_(target, transfer.export(store), "skip")
        assert speakers(target) == {k: v for k, v in before.items() if k in kinds}
    finally:
        target.close()


def test_held_terms_are_the_index_terms_among_those_asked() -> None:
    """``held_terms`` stems only the words that can stem to an asked term, and finds exactly what
    stemming every word would (Snowball's stems that begin unlike their word included)."""
    texts = [
        "Traceback: ConnectionRefusedError in getUserById while retrying the migrations",
        "The dying worker kept lying about tying up the queue; skies were clear, news was old",
        "pytest tests/test_cart.py::test_totals -x  FAILED  AssertionError: 3 != 4",
        "",
    ]
    queries = [
        "why was the connection refused when we retried?",
        "die lie tie sky news",
        "which cart test failed its totals assertion",
        "user id by get",
    ]
    for query in queries:
        terms = {analysis.stem(w) for w in analysis.words(query)}
        for text in texts:
            assert analysis.held_terms(text, terms) == set(analysis.index_terms(text)) & terms
    assert analysis.held_terms(texts[1], {"die", "lie", "tie"}) == {"die", "lie", "tie"}


def test_document_frequencies_are_counted_once_until_the_index_moves() -> None:
    """Only terms not remembered are counted; all are forgotten when the index has grown by
    more than ``DF_DRIFT`` since, and a term no document holds is remembered as 0."""
    asked: list[list[str]] = []

    def count(terms: Mapping[str, str]) -> dict[str, int]:
        asked.append(sorted(terms))
        return {term: 7 for term in terms if term != "absent"}

    remembered = keyword.RememberedFrequencies()
    assert remembered.get(100, {"a": "a", "absent": "absent"}, count) == {"a": 7, "absent": 0}
    assert remembered.get(105, {"a": "a", "b": "b", "absent": "absent"}, count) == {
        "a": 7,
        "b": 7,
        "absent": 0,
    }
    assert asked == [["a", "absent"], ["b"]]
    remembered.get(111, {"a": "a"}, count)  # 11 % more documents: counted again
    assert asked[-1] == ["a"]


def test_words_most_documents_hold_are_left_out_of_the_match_with_the_same_hits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """FTS5 scores a word that half the documents or more hold at nothing (its IDF floored at
    1e-6), so the query asks without it: the same hits in the same order as the whole query at
    every depth; asked again whole when the other words match fewer documents than asked."""
    store = Store.open(f"sqlite:///{tmp_path / 'words.db'}")
    texts = [
        *(f"banana run {n} passed" for n in range(8)),  # "banana": 10 of 14 documents
        "banana failed: zebra crossing timeout in the fixture",
        "banana zebra zebra stripes",
        "a zebra note, nothing else",
        "the deploy went out on friday",
        "cache invalidation notes",
        "release checklist",
    ]
    backend = store.keyword.backend
    assert isinstance(backend, Fts5Index)
    asked: list[str] = []
    ranked = Fts5Index._ranked

    def spy(conn, expression: str, limit: int):  # noqa: ANN001, ANN202
        asked.append(expression)
        return ranked(conn, expression, limit)

    scope = Scope(project="p")
    with store.write() as conn:
        for n, body in enumerate(texts):
            store.keyword.upsert(conn, KeywordDoc(f"d{n}", "observation", "p", body, 0.0))
    with store.read() as conn:
        for limit in range(1, len(texts) + 1):
            whole = ranked(
                conn, backend.match_expression(backend.query_groups("zebra banana"), scope), limit
            )
            monkeypatch.setattr(Fts5Index, "_ranked", staticmethod(spy))
            asked.clear()
            hits = store.keyword.search(conn, "zebra banana", scope, limit)
            monkeypatch.setattr(Fts5Index, "_ranked", staticmethod(ranked))
            assert [h.doc_id for h in hits] == [h.doc_id for h in whole]
            assert [h.score for h in hits] == pytest.approx([h.score for h in whole], abs=1e-4)
            assert '"zebra"' in asked[0] and '"banana"' not in asked[0]
            # three documents hold "zebra": deeper than that, the whole query is asked as well
            assert len(asked) == (1 if limit <= 3 else 2)
        assert '"banana"' in asked[-1]
        # a query of common words alone is asked as it is
        asked.clear()
        monkeypatch.setattr(Fts5Index, "_ranked", staticmethod(spy))
        assert len(store.keyword.search(conn, "banana", scope, 3)) == 3
        assert len(asked) == 1 and '"banana"' in asked[0]
    store.close()


def test_scope_is_applied_inside_the_index(store: Store) -> None:
    """Another project's or agent's documents never take a top-k slot: with 30 better-matching
    documents elsewhere, the in-scope one is still returned with limit 1."""
    with store.write() as conn:
        for n in range(30):
            store.keyword.upsert(
                conn,
                KeywordDoc(
                    f"other-{n}",
                    "observation",
                    "other",
                    "cache cache cache invalidation",
                    time.time(),
                ),
            )
            store.keyword.upsert(
                conn,
                KeywordDoc(
                    f"agent-{n}",
                    "observation",
                    "mine",
                    "cache cache cache invalidation",
                    time.time(),
                    agent_id="bob",
                ),
            )
        store.keyword.upsert(
            conn,
            KeywordDoc(
                "mine-1",
                "observation",
                "mine",
                "cache invalidation is hard, said alice",
                time.time(),
                agent_id="alice",
            ),
        )
        store.keyword.upsert(
            conn, KeywordDoc("shared", "memory", "", "global cache rule", time.time())
        )
    with store.read() as conn:
        hits = store.keyword.search(conn, "cache invalidation", Scope("mine", "alice"), 1)
        assert [h.doc_id for h in hits] == ["mine-1"]
        hits = store.keyword.search(conn, "cache", Scope("mine", "alice"), 10)
        assert {h.doc_id for h in hits} == {"mine-1", "shared"}
        assert len(store.keyword.search(conn, "cache", Scope("*"), 100)) == 62


def test_a_time_window_is_applied_inside_the_index(store: Store) -> None:
    """A window narrows before the cut: 30 better matches outside it never take the one slot
    of the document inside it; the window is [since, until)."""
    day = 86_400.0
    with store.write() as conn:
        for n in range(30):
            store.keyword.upsert(
                conn,
                KeywordDoc(f"old-{n}", "observation", "p", "retry retry retry backoff", n * 10.0),
            )
        store.keyword.upsert(
            conn, KeywordDoc("june", "observation", "p", "a retry with jittered backoff", day * 200)
        )
        store.keyword.upsert(
            conn, KeywordDoc("july", "memory", "p", "retry budget, then backoff", day * 230)
        )
    with store.read() as conn:

        def found(window: Window, limit: int = 1) -> set[str]:
            hits = store.keyword.search(conn, "retry backoff", Scope("p"), limit, window=window)
            return {h.doc_id for h in hits}

        assert found(Window(day * 199, day * 201)) == {"june"}
        assert found(Window(since=day * 199), 5) == {"july", "june"}
        assert found(Window(until=day * 200), 40) == {f"old-{n}" for n in range(30)}
        assert found(Window(day * 200, day * 230), 5) == {"june"}  # since in, until out
        assert found(Window(day * 300, day * 400), 5) == set()
        assert (
            store.keyword.search(
                conn, "retry", Scope("p"), 5, kinds=("memory",), window=Window(since=day)
            )[0].doc_id
            == "july"
        )
        assert len(store.keyword.search(conn, "retry", Scope("p"), 40, window=Window())) == 32


def test_observation_store_is_idempotent_and_retires_the_inbox(store: Store) -> None:
    event = _event("p", "s1", 1, "pytest -x tests/unit")
    _accept_and_store(store, event)
    # a second delivery of the same event finds nothing to claim ...
    assert inbox.claim(store, event.event_id, 30) is None
    # ... and even a forced second store writes no second row or index entry
    with store.write() as conn:
        assert not observations.store(conn, store.keyword, event, compress(event.to_payload()))
    assert count_rows(store, observations_table) == 1
    assert count_rows(store, capture_inbox) == 0
    with store.read() as conn:
        assert store.keyword.count(conn) == 1
        state = conn.execute(select(event_ledger.c.state)).scalar_one()
    assert state == "stored"
    assert inbox.accept(store, event, 100).status == "duplicate"


def test_claim_fail_backoff_and_dead_letter(store: Store) -> None:
    event = _event("p", "s2", 1, "make build")
    inbox.accept(store, event, 100)
    delays = []
    for attempt in range(1, 4):
        claim = inbox.claim(store, event.event_id, 30)
        assert claim is not None and claim.attempts == attempt
        # a live claim cannot be taken twice
        assert inbox.claim(store, event.event_id, 30) is None
        delays.append(inbox.fail(store, event.event_id, "boom", attempt, 3, 2.0, 5.0))
    assert delays == [2.0, 4.0, None]
    with store.read() as conn:
        assert inbox.counts(conn)["dead"] == 1
    assert inbox.accept(store, event, 100).state == "dead"
    assert inbox.retry_dead(store) == [event.event_id]
    assert inbox.claim(store, event.event_id, 30).attempts == 1  # type: ignore[union-attr]


def test_sweeper_finds_lost_and_expired_work(store: Store) -> None:
    fresh, lost, claimed = (_event("p", "s3", n, "ls") for n in range(3))
    for event in (fresh, lost, claimed):
        inbox.accept(store, event, 100)
    assert inbox.claim(store, claimed.event_id, 0.01) is not None  # its worker died at once
    with store.write() as conn:
        conn.execute(
            capture_inbox.update()
            .where(capture_inbox.c.event_id.in_([fresh.event_id, lost.event_id]))
            .values(dispatched_at=time.time() - 120)
        )
    time.sleep(0.02)
    # an expired claim is sent once per expiry, not at every sweep
    assert inbox.dispatch_expired_claims(store, 100) == [claimed.event_id]
    assert inbox.dispatch_expired_claims(store, 100) == []
    # the broker still holds fresh's task (it waits its turn): only lost's is sent again
    assert inbox.dispatch_missing(store, {fresh.event_id}, {}, 10, 100) == [lost.event_id]
    # just re-dispatched: within the grace period, whatever the broker says
    assert inbox.dispatch_missing(store, set(), {}, 10, 100) == [fresh.event_id]
    assert inbox.dispatch_missing(store, set(), {}, 10, 100) == []
    with store.read() as conn:
        assert inbox.unclaimed_count(conn) == 2
    assert len(inbox.dispatch_all_waiting(store)) == 3


def test_dispatch_missing_is_bounded_and_oldest_first(store: Store) -> None:
    events = [_event("p", "s4", n, "bd") for n in range(5)]
    for event in events:
        inbox.accept(store, event, 100)
    with store.write() as conn:
        conn.execute(capture_inbox.update().values(dispatched_at=time.time() - 120))
    first = inbox.dispatch_missing(store, set(), {}, 10, 3)
    assert first == [e.event_id for e in events[:3]]  # oldest first, at most the limit
    assert inbox.dispatch_missing(store, set(), {}, 10, 3) == [e.event_id for e in events[3:]]
    assert inbox.dispatch_missing(store, set(), {}, 10, 3) == []  # each sent once
    with store.write() as conn:
        conn.execute(capture_inbox.update().values(dispatched_at=time.time() - 120))
    assert set(inbox.dispatch_missing(store, set(first), {}, 10, 10)) == (
        {e.event_id for e in events} - set(first)
    )


def test_a_delivered_task_is_held_while_its_worker_can_be_alive(store: Store) -> None:
    taken, abandoned, waiting_retry, overdue_retry = (_event("p", "s5", n, "dl") for n in range(4))
    for event in (taken, abandoned, waiting_retry, overdue_retry):
        inbox.accept(store, event, 100)
    at = time.time()
    with store.write() as conn:
        conn.execute(capture_inbox.update().values(dispatched_at=at - 120))
        conn.execute(
            capture_inbox.update()
            .where(capture_inbox.c.event_id.in_([waiting_retry.event_id, overdue_retry.event_id]))
            .values(state="retrying")
        )
        conn.execute(
            capture_inbox.update()
            .where(capture_inbox.c.event_id == waiting_retry.event_id)
            .values(next_attempt_at=at + 200)
        )
        conn.execute(
            capture_inbox.update()
            .where(capture_inbox.c.event_id == overdue_retry.event_id)
            .values(next_attempt_at=at - 60)
        )
    delivered = {
        taken.event_id: at - 1,  # a live worker is about to claim it
        abandoned.event_id: at - 100,  # delivered long ago and never claimed
        waiting_retry.event_id: at - 100,  # its countdown runs until at + 200
        overdue_retry.event_id: at - 100,
    }  # due a minute ago and never claimed
    assert sorted(inbox.dispatch_missing(store, set(), delivered, 10, 100)) == sorted(
        [abandoned.event_id, overdue_retry.event_id]
    )


def test_inbox_capacity(store: Store) -> None:
    for n in range(2):
        inbox.accept(store, _event("p", "s4", n, "x"), 2)
    try:
        inbox.accept(store, _event("p", "s4", 9, "x"), 2)
    except inbox.InboxFull:
        pass
    else:
        raise AssertionError("a full inbox must refuse new events")
    assert count_rows(store, event_ledger) == 2


def test_memory_versions_only_current_is_indexed(store: Store) -> None:
    new = memories.validate({"project": "p", "content": "staging runs on port 8000"})
    memory = memories.remember(store, store.keyword, new)
    memories.update_content(store, store.keyword, memory["id"], "staging runs on port 9000")
    with store.read() as conn:
        hits = store.keyword.search(conn, "staging port", Scope("p"), 10)
    assert [h.doc_id for h in hits] == [memory["id"]]
    assert memories.get(store, memory["id"])["content"] == "staging runs on port 9000"  # type: ignore[index]
    assert memories.forget(store, store.keyword, memory["id"])
    with store.read() as conn:
        assert store.keyword.search(conn, "staging port", Scope("p"), 10) == []
    assert memories.get(store, memory["id"]) is None


def test_summary_is_stored_and_searchable(store: Store) -> None:
    for n, command in enumerate(["pytest tests/test_cart.py", "git commit -m cart"]):
        _accept_and_store(store, _event("p", "s5", n, command))
    sessions.end(store, "s5")
    made = summary.summarize_session(store, "s5")
    assert made is not None and "pytest tests/test_cart.py" in made["commands"]
    with store.read() as conn:
        hits = store.keyword.search(conn, "cart", Scope("p"), 10, kinds=("summary",))
    assert [h.session_id for h in hits] == ["s5"]


def test_replace_import_keeps_forgotten_events_known(store: Store) -> None:
    from engram import transfer

    event = _event("p", "s6", 1, "rm -rf build")
    _accept_and_store(store, event)
    assert observations.forget(store, store.keyword, event.observation_id, actor="test")
    transfer.import_(
        store, {"version": 1, "sessions": [], "observations": [], "memories": []}, "replace"
    )
    assert inbox.accept(store, event, 100).state == "forgotten"


def test_migration_rebuilds_an_old_fts5_index(tmp_path) -> None:  # noqa: ANN001
    """A store made before the FTS5 scope column keeps every indexed document, now scoped."""
    import sqlite3

    from engram.db import create_store_engine, migrate

    path = tmp_path / "old.db"
    engine = create_store_engine(f"sqlite:///{path}")
    # The schema as migrations 1-3 left it, with the one-column FTS5 table of that time.
    from engram import schema

    with engine.begin() as conn:
        schema.metadata.create_all(conn)
        conn.exec_driver_sql(
            "CREATE VIRTUAL TABLE kw_fts USING fts5(body, "
            "tokenize='porter unicode61 remove_diacritics 2')"
        )
        for version in range(1, 4):
            conn.exec_driver_sql("INSERT INTO schema_migrations VALUES (?, 'old', 0)", (version,))
        conn.exec_driver_sql(
            "INSERT INTO kw_docs (id, doc_id, kind, project, length, "
            "created_at) VALUES (1, 'obs_old', 'observation', 'p', 5, 0)"
        )
        conn.exec_driver_sql("INSERT INTO kw_fts (rowid, body) VALUES (1, 'legacy flux capacitor')")
    engine.dispose()
    assert sqlite3.connect(path).execute("SELECT count(*) FROM kw_fts").fetchone() == (1,)

    store = Store.open(f"sqlite:///{path}")
    try:
        assert schema_version(store.engine) == MIGRATIONS[-1][0]
        with store.read() as conn:
            assert [h.doc_id for h in store.keyword.search(conn, "capacitor", Scope("p"), 5)] == [
                "obs_old"
            ]
            assert store.keyword.search(conn, "capacitor", Scope("other"), 5) == []
        assert migrate(store.engine) == []
    finally:
        store.close()


def test_query_words_that_stem_alike_make_one_group() -> None:
    from engram.analysis import query_groups

    groups = query_groups("tests test_read testing database db")
    assert groups == [("tests", "test", "spec", "pytest"), ("read",), ("database", "db")]


def test_release_claims_makes_a_dead_process_claims_claimable_at_once(store: Store) -> None:
    event = _event("p", "s7", 1, "make test")
    inbox.accept(store, event, 100)
    first = inbox.claim(store, event.event_id, 3600)  # its process then dies, lease far off
    assert first is not None and inbox.claim(store, event.event_id, 3600) is None
    assert inbox.release_claims(store) == 1
    again = inbox.claim(store, event.event_id, 3600)
    assert again is not None and again.attempts == 2  # the lost attempt stays counted


def test_import_in_small_batches_is_whole_and_repeatable(store: Store, tmp_path) -> None:  # noqa: ANN001
    from engram import transfer

    for n in range(7):
        _accept_and_store(store, _event("imp", f"si{n % 3}", n, f"import marker {n}"))
    document = transfer.export(store)
    target = Store.open(f"sqlite:///{tmp_path / 'target.db'}")
    try:
        counts = transfer.import_(target, document, "skip", batch=2)
        assert (counts["sessions"], counts["observations"]) == (3, 7)
        assert transfer.export(target)["observations"] == document["observations"]
        # a re-run (as after an import cut short) adds nothing and doubles nothing
        again = transfer.import_(target, document, "skip", batch=2)
        assert (again["observations"], again["skipped"]) == (0, 10)
    finally:
        target.close()


def test_an_import_counts_as_bulk_work_while_it_runs_and_briefly_after(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The embedded vector lane waits while ``Store.bulk_running``: an import marks itself for
    its whole duration, and for a quiet spell after, the gap before a chunked import's next
    request."""
    from engram import transfer
    from engram.store import BulkMark

    _accept_and_store(store, _event("bulk", "sb", 0, "one row to export"))
    document = transfer.export(store)
    target = Store.open(f"sqlite:///{tmp_path / 'bulk-target.db'}")
    seen: list[bool] = []
    real_step = transfer._import_observation

    def watching(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        seen.append(target.bulk_running())
        return real_step(*args, **kwargs)

    monkeypatch.setattr(transfer, "_import_observation", watching)
    try:
        assert not target.bulk_running()
        transfer.import_(target, document, "merge")
        assert seen == [True]
        assert target.bulk_running()  # the quiet spell after the last request
        monkeypatch.setattr(BulkMark, "QUIET_SECONDS", 0.05)
        time.sleep(0.1)
        assert not target.bulk_running()
        with target.bulk():  # running counts however long ago the last one ended
            time.sleep(0.1)
            assert target.bulk_running()
    finally:
        target.close()


def test_the_write_lock_serves_writers_in_order_and_live_ones_first() -> None:
    """A thread that writes in a loop cannot keep taking the lock back from a waiting one, and
    a waiting live writer (a hook's capture) goes before waiting background ones (an import)."""
    import threading

    from engram.store import WriteLock

    lock, order = WriteLock(), []
    holder_has_it = threading.Event()

    def looping_import() -> None:
        for n in range(3):
            with lock.hold(background=True):
                if n == 0:
                    holder_has_it.set()
                    time.sleep(0.3)  # the others queue up meanwhile
                order.append(f"import{n}")

    def one_write(name: str, background: bool, delay: float) -> None:
        holder_has_it.wait(5)
        time.sleep(delay)
        with lock.hold(background=background):
            order.append(name)

    threads = [
        threading.Thread(target=looping_import),
        threading.Thread(target=one_write, args=("graph", True, 0.05)),
        threading.Thread(target=one_write, args=("hook", False, 0.15)),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    # the hook asked last but is live; the graph batch asked before the import's next batch
    assert order == ["import0", "hook", "graph", "import1", "import2"]


def test_export_streams_pages_and_keeps_every_memory_version(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rows are read a page at a time and memories' versions per page of memories: with pages
    of 2, nothing is lost, doubled or attached to the wrong memory; one item per line."""
    from engram import transfer

    monkeypatch.setattr(transfer, "EXPORT_PAGE", 2)
    monkeypatch.setattr(transfer, "EXPORT_CHUNK_CHARS", 100)
    for n in range(5):
        _accept_and_store(store, _event("exp", f"se{n % 2}", n, f"export marker {n}"))
    made = []
    for n in range(5):
        new = memories.validate({"content": f"fact {n} v1", "project": "exp"})
        made.append(memories.remember(store, store.keyword, new)["id"])
    for n in (1, 3, 4):
        memories.update_content(store, store.keyword, made[n], f"fact {n} v2")
    pieces = list(transfer.export_stream(store))
    assert len(pieces) > 5  # handed over in pieces, not as one text
    text = "".join(pieces)
    document = json.loads(text)
    assert len(document["sessions"]) == 2 and len(document["observations"]) == 5
    assert text.count("export marker") >= 5 and text.count('\n{"id": "') >= 12
    versions = {m["id"]: [v["content"] for v in m["versions"]] for m in document["memories"]}
    assert versions == {
        made[n]: [f"fact {n} v1"] + ([f"fact {n} v2"] if n in (1, 3, 4) else []) for n in range(5)
    }
