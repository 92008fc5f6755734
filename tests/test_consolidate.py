"""Consolidation: heuristics over the realistic coding-context sessions (stored through the
capture path), and the LLM's pass through the official client against the local fake provider."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from engram import consolidate
from engram import memories as memories_api
from engram.bench.context import fill, load_coding
from engram.llm import Ledger, llm_from_settings
from engram.llm import work as llm_work
from engram.llm.consolidation import parse_consolidation
from engram.schema import memories, memory_versions
from engram.settings import Settings
from engram.store import Store
from tests.conftest import make_settings
from tests.fake_llm import FakeLLMServer
from tests.support import count_rows


@pytest.fixture
def filled(store: Store, settings: Settings) -> Store:
    fill(store, settings, load_coding().sessions)
    return store


def live(store: Store, project: str) -> list[dict[str, Any]]:
    with store.read() as conn:
        return consolidate.consolidated(conn, project)


def test_heuristics_distil_procedures_lessons_and_facts_from_repeated_work(filled: Store) -> None:
    report = consolidate.run(filled)
    assert set(report["projects"]) == {"ledger-api", "shopfront-web", "etl-orders"}
    ledger = live(filled, "ledger-api")
    kinds = {m["meta"]["consolidated"]["kind"] for m in ledger}
    assert "procedure" in kinds
    procedure = next(m for m in ledger if m["meta"]["consolidated"]["key"] == "procedure:test")
    assert procedure["content"].startswith("This project's tests run with `go test")
    assert procedure["source"] == "consolidate" and procedure["concepts"] == ["procedure"]
    sources = procedure["meta"]["consolidated"]["sources"]
    assert len(sources) >= consolidate.MIN_SESSIONS and all(
        s.startswith("ledger") or s for s in sources
    )
    assert procedure["meta"]["consolidated"]["by"] == "heuristic"
    # nothing new since: the next run has nothing to do and writes nothing
    before = count_rows(filled, memories)
    assert consolidate.run(filled)["projects"] == {}
    assert count_rows(filled, memories) == before


def test_a_changed_count_is_a_new_version_not_a_new_memory(
    filled: Store, settings: Settings
) -> None:
    consolidate.run(filled)
    procedure = next(
        m
        for m in live(filled, "ledger-api")
        if m["meta"]["consolidated"]["key"] == "procedure:test"
    )
    versions_before = count_rows(filled, memory_versions)
    extra = [s for s in load_coding().sessions if s["project"] == "ledger-api"][0]
    again = {**extra, "id": extra["id"] + "-again", "started": "2026-12-01T09:00:00Z"}
    fill(filled, settings, [again])
    counts = consolidate.run(filled)["projects"]["ledger-api"]
    assert counts["versioned"] >= 1
    after = next(m for m in live(filled, "ledger-api") if m["id"] == procedure["id"])
    assert after["version"] == procedure["version"] + 1 and after["content"] != procedure["content"]
    assert count_rows(filled, memory_versions) > versions_before
    keys = [m["meta"]["consolidated"]["key"] for m in live(filled, "ledger-api")]
    assert len(keys) == len(set(keys))  # still one memory per key


@pytest.fixture
def fake() -> Iterator[FakeLLMServer]:
    server = FakeLLMServer()
    yield server
    server.close()


def test_the_llm_pass_adds_memories_with_sources_and_versions_what_it_replaces(
    filled: Store, fake: FakeLLMServer, tmp_path: Path
) -> None:
    settings = make_settings(
        tmp_path,
        ENGRAM_LLM_PROVIDERS="openai",
        ENGRAM_LLM_OPENAI_BASE_URL=fake.openai_url,
        ENGRAM_LLM_MAX_RETRIES="0",
    )
    llm = llm_from_settings(settings, filled)
    assert llm is not None
    with filled.read() as conn:
        sessions = [s["id"] for s in consolidate.recent_summaries(conn, "ledger-api")]

    def queue(conn: Any, project: str, newest: str) -> bool:
        return llm_work.queue_consolidation(conn, newest, settings)

    consolidate.run(filled, queue)
    kept = live(filled, "ledger-api")
    replaced = kept[0]

    def answer(request: dict[str, Any]) -> str:
        prompt = request["body"]["messages"][1]["content"]
        if f"[{sessions[0]}]" not in prompt:
            return json.dumps({"memories": []})  # another project
        return json.dumps(
            {
                "memories": [
                    {
                        "kind": "preference",
                        "text": "The user wants table-driven Go tests.",
                        "sources": [sessions[0], "not-a-session"],
                        "replaces": None,
                    },
                    {
                        "kind": "procedure",
                        "text": "Run `make test` before pushing.",
                        "sources": [sessions[1]],
                        "replaces": replaced["id"],
                    },
                    {
                        "kind": "fact",
                        "text": "Unsupported: no session backs this.",
                        "sources": ["made-up"],
                        "replaces": None,
                    },
                ]
            }
        )

    fake.default = answer
    while llm_work.drain(filled, llm, settings):
        pass
    assert len(fake.requests) == 3  # one call per project of the run
    prompt = next(
        r["body"]["messages"][1]["content"]
        for r in fake.requests
        if f"[{sessions[0]}]" in r["body"]["messages"][1]["content"]
    )
    assert f"[{replaced['id']}]" in prompt  # the kept memories were shown
    after = {m["id"]: m for m in live(filled, "ledger-api")}
    preference = next(m for m in after.values() if m["content"].startswith("The user wants"))
    assert preference["meta"]["consolidated"]["sources"] == [sessions[0]]
    assert preference["meta"]["consolidated"]["by"].startswith("openai:")
    assert after[replaced["id"]]["content"] == "Run `make test` before pushing."
    assert after[replaced["id"]]["version"] == replaced["version"] + 1
    assert not any("Unsupported" in m["content"] for m in after.values())
    rows = {r["task"]: r for r in Ledger(filled).rows("0000")}
    assert rows["consolidate"]["calls"] == 3


def test_parse_consolidation_rejects_wrong_shapes() -> None:
    ok = parse_consolidation(
        json.dumps(
            {
                "memories": [
                    {"kind": "lesson", "text": " a  b ", "sources": ["s1"], "replaces": "m9"}
                ]
            }
        ),
        {"s1"},
        {"m1"},
    )
    assert ok == [consolidate.Candidate("lesson", "a b", ("s1",), replaces="")]
    for bad, words in (
        ({"facts": []}, "keys are wrong"),
        ({"memories": {}}, "must be a list"),
        ({"memories": [{"kind": "opinion", "text": "x", "sources": ["s1"]}]}, "kind must be"),
        ({"memories": [{"kind": "fact", "text": "", "sources": ["s1"]}]}, "non-empty"),
    ):
        with pytest.raises(ValueError, match=words):
            parse_consolidation(json.dumps(bad), {"s1"}, set())


def test_consolidation_is_scheduled_by_beat(settings: Settings) -> None:
    from engram.tasks.app import CONSOLIDATE_TASK, configure

    schedule = configure(settings).conf.beat_schedule
    entry = next(e for e in schedule.values() if e["task"] == CONSOLIDATE_TASK)
    assert entry["schedule"] == settings.consolidate_interval_seconds == 3600.0
    assert entry["options"]["queue"] == "maintenance"


def _age(store: Store, memory_id: str, days: float) -> None:
    """Make a memory look ``days`` idle (its last edit and use that long ago)."""
    at = consolidate.now() - days * consolidate.DAY
    with store.write() as conn:
        conn.execute(
            memories.update()
            .where(memories.c.id == memory_id)
            .values(updated_at=at, accessed_at=None)
        )


def test_unused_consolidated_memories_decay_are_evicted_restorable_then_forgotten(
    api: Any, project: str
) -> None:
    store = api.store
    made = memories_api.NewMemory(
        content="Deploys go through `make ship`.", project=project, source="consolidate"
    )
    with store.write() as conn:
        kept = memories_api.insert_memory(
            conn, store.keyword, made, meta={"consolidated": {"kind": "procedure", "key": "k"}}
        )
        own = memories_api.insert_memory(
            conn,
            store.keyword,
            memories_api.NewMemory(content="Deploys need a VPN.", project=project),
        )
    _age(store, kept["id"], 45)  # strength 0.5 ** 1.5 = 0.35: stays
    _age(store, own["id"], 400)  # a person's memory never decays
    assert consolidate.decay(store, 30, 30) == {"evicted": 0, "forgotten": 0}
    _age(store, kept["id"], 61)  # past two half-lives: 0.24
    assert consolidate.decay(store, 30, 30)["evicted"] == 1
    status, listed = api.get(f"/v1/memories?project={project}")
    assert [m["id"] for m in listed["items"]] == [own["id"]]
    evicted = api.get(f"/v1/memories?project={project}&evicted=true")[1]["items"]
    assert [m["id"] for m in evicted] == [kept["id"]] and evicted[0]["evictedAt"]
    hits = api.post("/v1/search", {"query": "make ship", "project": project})[1]["items"]
    assert kept["id"] not in [h["id"] for h in hits]
    assert api.post(f"/v1/memories/{own['id']}/restore")[0] == 409
    status, restored = api.post(f"/v1/memories/{kept['id']}/restore")
    assert status == 200 and "evictedAt" not in restored and restored["content"] == made.content
    hits = api.post("/v1/search", {"query": "make ship", "project": project})[1]["items"]
    assert hits and hits[0]["id"] == kept["id"]
    # found by search: used, so it is strong again
    assert api.get(f"/v1/memories/{kept['id']}")[1]["accessCount"] == 1
    assert consolidate.decay(store, 30, 30)["evicted"] == 0
    # evicted again and never restored: forgotten for good after the grace
    _age(store, kept["id"], 200)
    assert consolidate.decay(store, 30, 30)["evicted"] == 1
    later = consolidate.now() + 31 * consolidate.DAY
    assert consolidate.decay(store, 30, 30, at=later)["forgotten"] == 1
    assert api.get(f"/v1/memories/{kept['id']}")[0] == 404
    assert api.post(f"/v1/memories/{kept['id']}/restore")[0] == 404


def test_a_session_given_a_memory_uses_it(api: Any, project: str) -> None:
    status, memory = api.post("/v1/memories", {"project": project, "content": "Use pnpm, not npm."})
    assert status == 201 and memory["accessCount"] == 0
    started = api.post("/v1/sessions", {"sessionId": f"{project}-s", "project": project})[1]
    assert "Use pnpm, not npm." in started["context"]
    after = api.get(f"/v1/memories/{memory['id']}")[1]
    assert after["accessCount"] == 1 and after["accessedAt"]


def test_a_memory_returned_again_within_a_minute_is_not_written_again() -> None:
    ids = [f"mem_throttle_{n}" for n in range(2)]
    assert memories_api.due_for_touch([ids[0], ids[0], ids[1]], at=1000.0) == ids
    assert memories_api.due_for_touch(ids, at=1030.0) == []
    assert memories_api.due_for_touch([ids[1]], at=1061.0) == [ids[1]]
