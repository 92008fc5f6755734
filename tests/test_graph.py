"""The knowledge graph: heuristic extraction, exact contributions, scoped retrieval, the API."""

from __future__ import annotations

import time
from typing import Any

import pytest
from sqlalchemy import select

from engram import graph, observations
from engram.compress import compress
from engram.drains import drain_graph
from engram.events import Event
from engram.schema import graph_edges, graph_entities, graph_mentions, graph_session_members
from engram.scope import Scope, ScopeError, Window
from engram.store import Store
from tests.support import Api, wait_for
from tests.test_compress import HOST_FIXTURES, normalised

# --- extraction ---------------------------------------------------------------------------

Expected = set[tuple[str, str, str]]  # (type, key, role)

EXTRACTION: list[tuple[str, str, dict[str, Any], Expected, set[str]]] = [
    (
        "pytest failure",
        "Ran `pytest tests/test_client.py -q` (exit 1)\n$ pytest tests/test_client.py -q\n"
        "FAILED tests/test_client.py::test_retry - AssertionError: 0.1 != 0.5\n1 failed, 3 passed",
        {"commands": ["pytest tests/test_client.py -q"]},
        {
            ("file", "tests/test_client.py", "mentions"),
            ("error", "assertionerror", "mentions"),
            ("command", "pytest", "runs"),
            ("symbol", "test_retry", "mentions"),
        },
        {"test_client", "0.1", "failed"},
    ),
    (
        "absolute path inside the project, from the columns",
        "Edited acme/client.py\n- backoff = 0.1\n+ backoff = 0.5",
        {
            "project": "/home/dev/src/acme-api",
            "files_modified": ["/home/dev/src/acme-api/acme/client.py"],
            "files_read": ["./docs//retry.md"],
        },
        {("file", "acme/client.py", "edits"), ("file", "docs/retry.md", "reads")},
        {"/home/dev/src/acme-api/acme/client.py", "backoff"},
    ),
    (
        "imports and installs",
        "import os, sys\nfrom sqlalchemy.orm import Session\nimport numpy as np\n"
        "const _ = require('lodash');\nimport React from 'react'\nimport {a} from './local'\n"
        "$ pip install requests==2.31 'httpx[http2]>=0.27' -r requirements.txt && "
        "npm i @types/node@18 left-pad",
        {},
        {
            ("package", "os", "mentions"),
            ("package", "sqlalchemy", "mentions"),
            ("package", "numpy", "mentions"),
            ("package", "lodash", "mentions"),
            ("package", "react", "mentions"),
            ("package", "requests", "mentions"),
            ("package", "httpx", "mentions"),
            ("package", "@types/node", "mentions"),
            ("package", "left-pad", "mentions"),
            ("command", "pip install", "mentions"),
            ("command", "npm install", "mentions"),
            ("file", "requirements.txt", "mentions"),
        },
        {"./local", "local", "np", "2.31"},
    ),
    (
        "error types and codes",
        "sqlalchemy.exc.IntegrityError: UNIQUE constraint failed\nKeyError: 'x'\n"
        "error[E0308]: mismatched types\nerror TS2322: Type 'string'\nGET /api -> HTTP 404\n"
        "OSError: [Errno 2] ENOENT\nbash: rg: command not found",
        {},
        {
            ("error", "integrityerror", "mentions"),
            ("error", "keyerror", "mentions"),
            ("error", "e0308", "mentions"),
            ("error", "ts2322", "mentions"),
            ("error", "http 404", "mentions"),
            ("error", "enoent", "mentions"),
            ("error", "oserror", "mentions"),
            ("error", "command not found", "mentions"),
        },
        {"error", "unique", "sqlalchemy.exc.integrityerror"},
    ),
    (
        "symbols, not ids, domains or prose",
        "KeywordIndex.search calls drain_graph() and compress(); see engram.derive.claim and "
        "self.store, e.g. on github.com. Ids obs_e54b5c950961a603394187d7, "
        "toolu_01Jm5sK2pQ8rT1vW4xY7zA9b. The Parser is getUserById-ish.",
        {},
        {
            ("symbol", "keywordindex.search", "mentions"),
            ("symbol", "drain_graph", "mentions"),
            ("symbol", "compress", "mentions"),
            ("symbol", "engram.derive.claim", "mentions"),
            ("symbol", "getuserbyid", "mentions"),
        },
        {
            "github.com",
            "e.g",
            "self.store",
            "obs_e54b5c950961a603394187d7",
            "toolu_01jm5sk2pq8rt1vw4xy7za9b",
            "the",
            "parser",
        },
    ),
    (
        "shell lines: programs with their sub-commands, wrappers and builtins dropped",
        "$ cd app && git commit -m 'fix' | tee log; python -m pytest -q; FOO=1 make lint",
        {"concepts": ["git", "test"]},
        {
            ("command", "git commit", "mentions"),
            ("command", "tee", "mentions"),
            ("command", "pytest", "mentions"),
            ("command", "make lint", "mentions"),
            ("concept", "git", "mentions"),
            ("concept", "test", "mentions"),
        },
        {"cd", "python", "foo=1", "fix"},
    ),
    (
        "summary with code spans, Windows paths and URLs",
        "Request: add retry\nCommands:\n- `pytest -q tests/test_api.py`\n- `git push origin main`\n"
        "Files: C:\\Users\\me\\acme-api\\Makefile, .gitignore; see https://example.com/a/b.py",
        {"project": "acme-api"},
        {
            ("command", "pytest", "mentions"),
            ("command", "git push", "mentions"),
            ("file", "tests/test_api.py", "mentions"),
            ("file", "makefile", "mentions"),
            ("file", ".gitignore", "mentions"),
        },
        {"a/b.py", "b.py", "example.com", "/users/me/acme-api/makefile"},
    ),
]


@pytest.mark.parametrize(
    "body,columns,expected,absent", [c[1:] for c in EXTRACTION], ids=[c[0] for c in EXTRACTION]
)
def test_extraction(
    body: str, columns: dict[str, Any], expected: Expected, absent: set[str]
) -> None:
    found = graph.extract(body, **columns)
    got = {(e.type, e.key, e.role) for e in found}
    assert expected <= got, f"missing {expected - got}"
    assert not absent & {e.key for e in found}, f"junk {absent & {e.key for e in found}}"
    assert len({(e.type, e.key) for e in found}) == len(found)  # one entity per (type, key)


def test_extraction_is_capped_and_keeps_the_most_specific_first() -> None:
    body = " ".join(f"module_{chr(97 + i % 26)}{chr(97 + i // 26)}.py" for i in range(80))
    found = graph.extract(body + "\nValueError", files_modified=["src/core.py"])
    assert len(found) == graph.MAX_ENTITIES_PER_DOC
    assert (found[0].type, found[0].key, found[0].role) == ("file", "src/core.py", "edits")


@pytest.mark.parametrize(
    "fixture,expected",
    [
        ("claude-code-PostToolUse-Edit.json", {("file", "acme/client.py", "edits")}),
        (
            "claude-code-PostToolUse.json",
            {("file", "tests/test_client.py", "mentions"), ("command", "pytest", "runs")},
        ),
        ("claude-code-PostToolUseFailure.json", {("command", "make lint", "runs")}),
        (
            "codex-PostToolUse.json",
            {("file", "scripts/migrate.py", "mentions"), ("command", "python", "runs")},
        ),
    ],
)
def test_extraction_from_real_host_payloads(fixture: str, expected: Expected) -> None:
    payload = normalised(HOST_FIXTURES / fixture)
    c = compress(payload)
    found = graph.extract(
        observations.index_body(c),
        project=payload["project"],
        files_read=c.files_read,
        files_modified=c.files_modified,
        commands=c.commands,
        errors=c.errors,
        concepts=c.concepts,
    )
    assert expected <= {(e.type, e.key, e.role) for e in found}


# --- maintaining the graph ------------------------------------------------------------------

_SEQ = iter(range(1_000_000))


def observe(
    store: Store,
    project: str,
    session: str,
    tool: str,
    tool_input: Any,
    tool_output: Any = None,
    agent: str | None = None,
) -> str:
    """Store one observation the way the observe task does (its index write queues graph work)."""
    n = next(_SEQ)
    payload = {
        "eventId": f"{project}-{session}-{n}",
        "sessionId": session,
        "project": project,
        "host": "claude-code",
        "hookType": "PostToolUse",
        "toolName": tool,
        "toolInput": tool_input,
        "toolOutput": tool_output,
        "agentId": agent,
        "timestamp": 1_700_000_000.0 + n,
    }
    event = Event.from_payload(payload)
    with store.write() as conn:
        observations.store(conn, store.keyword, event, compress(payload))
    return event.observation_id


def edit(
    store: Store,
    project: str,
    session: str,
    path: str,
    new: str = "x = 1",
    agent: str | None = None,
) -> str:
    return observe(
        store,
        project,
        session,
        "Edit",
        {"file_path": path, "old_string": "x = 0", "new_string": new},
        agent=agent,
    )


def run(
    store: Store, project: str, session: str, command: str, out: str = "", agent: str | None = None
) -> str:
    return observe(
        store,
        project,
        session,
        "Bash",
        {"command": command},
        {"stdout": out, "exit_code": 1 if "Error" in out else 0},
        agent=agent,
    )


def semantic_graph(store: Store) -> dict[str, set[tuple[Any, ...]]]:
    """The whole graph with entity ids replaced by what they stand for."""
    with store.read() as conn:
        names = {r.id: (r.project, r.type, r.key) for r in conn.execute(select(graph_entities))}
        return {
            "entities": {(*names[r.id], r.doc_count) for r in conn.execute(select(graph_entities))},
            "mentions": {
                (r.doc_id, names[r.entity_id], r.role, r.agent, r.session_id)
                for r in conn.execute(select(graph_mentions))
            },
            "edges": {
                (names[r.src], names[r.dst], r.relation, r.agent, r.weight)
                for r in conn.execute(select(graph_edges))
            },
            "members": {
                (r.session_id, r.agent, names[r.entity_id], r.refs, r.paired)
                for r in conn.execute(select(graph_session_members))
            },
        }


def raw_graph(store: Store) -> list[list[tuple[Any, ...]]]:
    with store.read() as conn:
        return [
            sorted(tuple(r) for r in conn.execute(select(t)))
            for t in (graph_entities, graph_mentions, graph_edges, graph_session_members)
        ]


def test_build_session_and_edits_relations(store: Store) -> None:
    edit(store, "p", "s1", "src/parser.py")
    run(store, "p", "s1", "pytest tests/test_parser.py", "ValueError: bad header")
    edit(store, "p", "s1", "src/lexer.py")
    assert drain_graph(store) == 3
    g = semantic_graph(store)
    parser, lexer = ("p", "file", "src/parser.py"), ("p", "file", "src/lexer.py")
    session, error = ("p", "session", "s1"), ("p", "error", "valueerror")
    assert (session, parser, "edits", "", 1) in g["edges"]
    assert (parser, session, "edited_in", "", 1) in g["edges"]
    assert {
        (parser, lexer, "same_session", "", 1),
        (lexer, error, "same_session", "", 1),
        (error, parser, "same_session", "", 1),
    } <= g["edges"]
    assert (("p", "file", "tests/test_parser.py"), error, "co_occurs", "", 1) in g["edges"]
    assert ("p", "session", "s1", 3) in g["entities"]
    with store.read() as conn:
        assert graph.stats(conn)["edges"] == len(g["edges"])


def test_apply_is_idempotent_and_a_delete_removes_exactly_its_contribution(store: Store) -> None:
    edit(store, "p", "s1", "src/parser.py")
    run(store, "p", "s1", "pytest tests/test_parser.py", "ValueError: bad header")
    edit(store, "p", "s2", "src/parser.py", agent="a1")
    drain_graph(store)
    before, before_raw = semantic_graph(store), raw_graph(store)
    assert before["edges"]

    # the same documents again (e.g. a re-index): the very same rows, ids included
    with store.write() as conn:
        docs = conn.execute(select(graph_mentions.c.doc_id).distinct()).scalars().all()
        from engram.derive import enqueue

        for doc_id in docs:
            enqueue(conn, doc_id, "upsert", ("graph",))
    assert drain_graph(store) == len(docs)
    assert raw_graph(store) == before_raw

    # add a document that shares entities, then forget it: back to exactly the graph before
    extra = run(
        store,
        "p",
        "s1",
        "pytest tests/test_parser.py src/parser.py",
        "KeyError: 'k'\nValueError: again",
    )
    drain_graph(store)
    during = semantic_graph(store)
    assert during != before and ("p", "error", "keyerror", 1) in during["entities"]
    assert observations.forget(store, store.keyword, extra, actor="test")
    drain_graph(store)
    assert semantic_graph(store) == before

    # forget everything: nothing is left
    with store.write() as conn:
        for doc_id in docs:
            store.keyword.delete(conn, doc_id)
    drain_graph(store)
    assert raw_graph(store) == [[], [], [], []]


def test_emptied_edges_are_found_by_index_not_by_scanning_every_edge(store: Store) -> None:
    """graph.collect runs in every graph transaction, inside the write lock: a scan of every
    edge for the emptied ones (47 ms at 341,000 edges) made a live capture's wait grow with
    the graph. Its deletes must look the touched entities up in an index."""
    from sqlalchemy import event

    if not store.is_sqlite:
        pytest.skip("reads SQLite's query plan")
    edit(store, "p", "s1", "src/parser.py")
    extra = run(store, "p", "s1", "pytest tests/test_parser.py", "ValueError: bad header")
    drain_graph(store)
    seen: list[tuple[str, Any]] = []

    def record(conn, cursor, statement, parameters, context, executemany) -> None:  # type: ignore[no-untyped-def]
        if statement.startswith("DELETE FROM graph_edges"):
            seen.append((statement, parameters))

    event.listen(store.engine, "before_cursor_execute", record)
    try:
        assert observations.forget(store, store.keyword, extra, actor="test")
        drain_graph(store)
    finally:
        event.remove(store.engine, "before_cursor_execute", record)
    assert len(seen) == 2  # by source, then by destination
    with store.read() as conn:
        for statement, parameters in seen:
            plan = [
                str(r[-1])
                for r in conn.exec_driver_sql("EXPLAIN QUERY PLAN " + statement, parameters)
            ]
            assert not any(p.startswith("SCAN graph_edges") for p in plan), (statement, plan)


def test_session_pairing_is_capped_and_stays_exact(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    from engram.graph import maintain

    monkeypatch.setattr(maintain, "MAX_SESSION_PAIRED", 2)
    ids = {f"src/f{i}.py": edit(store, "p", "s1", f"src/f{i}.py") for i in range(4)}
    drain_graph(store)
    g = semantic_graph(store)
    paired = sorted(m[2][2] for m in g["members"] if m[4])
    assert len(paired) == 2 and len(g["members"]) == 4
    assert {(e[0][2], e[1][2]) for e in g["edges"] if e[2] == "same_session"} == {
        (paired[0], paired[1]),
        (paired[1], paired[0]),
    }
    with store.write() as conn:
        store.keyword.delete(conn, ids[paired[0]])
    drain_graph(store)
    g = semantic_graph(store)
    assert all(e[4] > 0 for e in g["edges"])
    assert not any(e[2] == "same_session" for e in g["edges"])  # its partner is alone now
    newcomer = edit(store, "p", "s1", "src/late.py")
    drain_graph(store)
    assert {
        (e[0][2], e[1][2]) for e in semantic_graph(store)["edges"] if e[2] == "same_session"
    } == {(paired[1], "src/late.py"), ("src/late.py", paired[1])}
    assert newcomer


# --- retrieval ------------------------------------------------------------------------------


def test_stream_ranks_the_rare_file_above_the_common_one(store: Store) -> None:
    for i in range(12):
        edit(store, "p", f"s{i}", "src/common.py")
    rare = edit(store, "p", "s-rare", "src/rare_module.py")
    both = observe(store, "p", "s-x", "Read", {"file_path": "src/common.py"})
    drain_graph(store)
    with store.read() as conn:
        hits = graph.stream(conn, "why did common.py and rare_module.py change", Scope("p"), 20)
        assert hits[0].doc_id == rare and hits[0].session_id == "s-rare"
        assert both in [h.doc_id for h in hits]
        assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
        assert graph.stream(conn, "nothing known here at all", Scope("p"), 10) == []
        assert graph.stream(conn, "rare_module.py", Scope("p"), 10, kinds=("memory",)) == []


def test_stream_keeps_to_the_time_window(store: Store) -> None:
    ids = [edit(store, "p", f"s-w{i}", "src/windowed.py") for i in range(4)]
    drain_graph(store)
    m = graph_mentions.c
    with store.read() as conn:
        at = dict(conn.execute(select(m.doc_id, m.created_at).where(m.doc_id.in_(ids))).all())
        times = [at[i] for i in ids]

        def found(window: Window) -> set[str]:
            return {
                h.doc_id for h in graph.stream(conn, "windowed.py", Scope("p"), 10, None, window)
            }

        assert found(Window()) == set(ids)
        assert found(Window(times[1], times[3])) == {ids[1], ids[2]}  # [since, until)
        assert found(Window(since=times[3])) == {ids[3]}
        assert found(Window(until=times[0])) == set()


def test_stream_reaches_neighbours_at_a_lower_weight(store: Store) -> None:
    direct = run(store, "p", "s1", "pytest tests/test_auth.py", "TokenExpiredError: expired")
    via = edit(store, "p", "s1", "src/auth/tokens.py")
    drain_graph(store)
    with store.read() as conn:
        hits = graph.stream(conn, "TokenExpiredError", Scope("p"), 10)
    assert [h.doc_id for h in hits] == [direct, via]
    assert hits[1].score < hits[0].score / 2


def test_scope_isolation(store: Store) -> None:
    mine = edit(store, "p", "s1", "src/shared_name.py", agent="a1")
    theirs = edit(store, "p", "s2", "src/shared_name.py", agent="a2")
    other_project = edit(store, "q", "s3", "src/shared_name.py")
    only_a2 = edit(store, "p", "s4", "src/secret_plan.py", agent="a2")
    shared = edit(store, "p", "s5", "src/common_ground.py")
    drain_graph(store)
    with store.read() as conn:

        def ids(scope: Scope, text: str) -> set[str]:
            return {h.doc_id for h in graph.stream(conn, text, scope, 50)}

        # (neighbours bring in other visible documents: the shared one, through "python")
        a1 = Scope("p", "a1")
        assert graph.stream(conn, "shared_name.py", a1, 50)[0].doc_id == mine
        for text in (
            "shared_name.py",
            "secret_plan.py",
            "common_ground.py python",
            "shared_name.py secret_plan.py",
        ):
            assert not ids(a1, text) & {theirs, only_a2, other_project}, text
            assert not ids(Scope("q"), text) - {other_project}, text
        assert ids(Scope("p", "a1"), "secret_plan.py") == set()
        assert shared in ids(Scope("p", "a1"), "common_ground.py")
        assert {mine, theirs} <= ids(Scope("p"), "shared_name.py")
        assert other_project not in ids(Scope("p"), "shared_name.py")
        assert ids(Scope("q"), "shared_name.py") == {other_project}
        assert {mine, theirs, other_project} <= ids(Scope("*"), "shared_name.py")
        assert ids(Scope("p", "a2"), "secret_plan.py") >= {only_a2}

        answer = graph.query(conn, Scope("p", "a1"), name="src/secret_plan.py")
        assert answer.entities == [] and answer.neighbours == [] and answer.hits == []
        answer = graph.query(conn, Scope("p", "a1"), name="shared_name.py", depth=2)
        assert [e["docCount"] for e in answer.entities] == [1]
        assert {h.doc_id for h in answer.hits} == {mine}
        names = {n["name"] for n in answer.neighbours}
        assert "s1" in names and not names & {"s2", "s3", "s4", "src/secret_plan.py"}
        answer = graph.query(conn, Scope("q"), text="secret_plan.py common_ground.py")
        assert answer.entities == []
    with pytest.raises(ScopeError):
        Scope.resolve(None)


def test_query_neighbourhood_two_hops(store: Store) -> None:
    run(store, "p", "s1", "pytest tests/test_db.py", "IntegrityError: duplicate key")
    edit(store, "p", "s1", "src/db/models.py")
    drain_graph(store)
    with store.read() as conn:
        one = graph.query(conn, Scope("p"), name="tests/test_db.py", depth=1)
        two = graph.query(conn, Scope("p"), name="tests/test_db.py", depth=2)
        session = graph.query(conn, Scope("p"), name="s1", type="session")
    assert [(e["type"], e["key"]) for e in one.entities] == [("file", "tests/test_db.py")]
    assert {(n["key"], n["relation"], n["depth"]) for n in one.neighbours} >= {
        ("integrityerror", "co_occurs", 1),
        ("pytest", "co_occurs", 1),
    }
    assert ("src/db/models.py", 2) in {(n["key"], n["depth"]) for n in two.neighbours}
    assert all(n["depth"] == 1 for n in one.neighbours)
    assert [e["name"] for e in session.entities] == ["s1"]
    assert {n["key"] for n in session.neighbours} == {"src/db/models.py"}
    assert len(session.hits) == 2


# --- end to end: the real embedded gateway and its worker -----------------------------------


def test_observe_then_graph_query_through_the_gateway(api: Api, project: str) -> None:
    session = f"{project}-s1"
    events = [
        {
            "toolName": "Edit",
            "toolInput": {
                "file_path": f"/home/dev/{project}/src/billing.py",
                "old_string": "a",
                "new_string": "b",
            },
        },
        {
            "toolName": "Bash",
            "toolInput": {"command": "pytest tests/test_billing.py"},
            "toolOutput": {"stdout": "ZeroDivisionError: division by zero", "exit_code": 1},
        },
    ]
    for n, extra in enumerate(events):
        status, body = api.post(
            "/v1/observe",
            {
                "eventId": f"{session}:{n}",
                "sessionId": session,
                "project": project,
                "host": "claude-code",
                "hookType": "PostToolUse",
                **extra,
            },
        )
        assert status == 201, body
    api.wait_drained()

    def found() -> Any:
        status, body = api.post("/v1/graph/query", {"project": project, "entity": "billing.py"})
        assert status == 200, body
        return body if body["entities"] and body["neighbours"] else None

    body = wait_for(found, 20, message="the graph task to drain")
    assert [(e["type"], e["key"]) for e in body["entities"]] == [("file", "src/billing.py")]
    relations = {(n["key"], n["relation"]) for n in body["neighbours"]}
    assert {(session, "edited_in"), ("zerodivisionerror", "same_session")} <= relations
    assert body["items"][0]["kind"] == "observation" and "billing" in body["items"][0]["text"]

    status, body = api.post(
        "/v1/graph/query", {"project": project, "query": "ZeroDivisionError in billing", "depth": 2}
    )
    assert status == 200 and {e["key"] for e in body["entities"]} >= {"zerodivisionerror"}
    status, body = api.post("/v1/graph/query", {"project": "elsewhere", "entity": "billing.py"})
    assert status == 200 and body == {"entities": [], "neighbours": [], "items": []}


@pytest.mark.parametrize(
    "body,fields",
    [
        ({"project": "p"}, {"entity"}),
        ({"project": "p", "entity": "", "depth": 3, "limit": 0}, {"entity", "depth", "limit"}),
        ({"project": "p", "entity": "x", "query": "y"}, {"query"}),
        (
            {"project": "p", "query": 5, "type": "planet", "depth": True, "limit": "10"},
            {"query", "type", "depth", "limit"},
        ),
    ],
)
def test_graph_query_validation(api: Api, body: dict[str, Any], fields: set[str]) -> None:
    status, answer = api.post("/v1/graph/query", body)
    assert status == 422
    assert answer["error"]["code"] == "validation_failed"
    assert set(answer["error"]["details"]["fields"]) == fields


def test_graph_query_without_project_fails_closed(api: Api) -> None:
    status, answer = api.post("/v1/graph/query", {"entity": "x.py"})
    assert status == 422 and answer["error"]["code"] == "scope_required"


def test_stream_is_fast_enough_for_a_small_store(store: Store) -> None:
    """A smoke bound (the 50k measurement is tests/benchmarks/bench_graph.py)."""
    for i in range(60):
        edit(store, "p", f"s{i % 6}", f"src/mod_{i % 15}.py")
    drain_graph(store)
    with store.read() as conn:
        graph.stream(conn, "mod_3.py", Scope("p"), 10)
        started = time.perf_counter()
        for _ in range(20):
            assert graph.stream(conn, "mod_3.py failing", Scope("p"), 10)
        assert (time.perf_counter() - started) / 20 < 0.05


def test_concurrent_graph_drains_do_not_deadlock(store: Store, caplog: Any) -> None:
    """Workers draining the graph at once (PostgreSQL): documents share entities, and batches
    applied side by side used to lock them in different orders (a deadlock: the batch failed
    and its documents were applied one by one, some set aside for 30 s)."""
    import logging
    import threading

    from engram import derive

    for n in range(120):
        run(
            store,
            "p",
            f"s{n % 6}",
            f"pytest tests/test_mod{n % 9}.py -q",
            f"FAILED tests/test_mod{n % 9}.py::test_case - ValueError: bad\\n1 failed",
        )
        edit(store, "p", f"s{n % 6}", f"src/mod{n % 9}.py", new=f"x = {n}")
    errors: list[BaseException] = []

    def drain() -> None:
        try:
            drain_graph(store, batch=10)
        except BaseException as exc:  # reported below
            errors.append(exc)

    caplog.set_level(logging.WARNING, logger="engram.drains")
    threads = [threading.Thread(target=drain) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert not errors
    assert not [r.getMessage() for r in caplog.records if r.name == "engram.drains"]
    with store.read() as conn:
        assert derive.last_error(conn, "graph") is None
        assert derive.pending(conn, "graph") == 0
