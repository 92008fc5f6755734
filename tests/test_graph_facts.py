"""Facts between named things: names merged before they are kept, exclusive facts ending what
they contradict (never deleting it), and the LLM answer's validation."""

from __future__ import annotations

import json

import pytest

from engram.graph import facts
from engram.llm.graphing import parse_facts
from engram.store import Store


def test_names_merge_exactly_then_fuzzily_and_unlike_names_stay_apart() -> None:
    known = ["PostgreSQL", "orders-service", "Redis"]
    assert facts.merge_name("postgresql", known) == "PostgreSQL"
    assert facts.merge_name("Postgres", known) == "PostgreSQL"  # ratio 0.89
    assert facts.merge_name("orders service", known) == "orders-service"  # punctuation folded
    assert facts.merge_name("RabbitMQ", known) == "RabbitMQ"
    assert facts.merge_name("API", ["app"]) == "API"


def test_an_exclusive_fact_ends_what_it_contradicts_and_keeps_it(store: Store) -> None:
    with store.write() as conn:
        first = facts.record(
            conn,
            "shop",
            [
                facts.Fact("orders-service", "uses database", "MySQL", exclusive=True),
                facts.Fact("orders-service", "depends on", "payments-api"),
            ],
            [],
            by="openai:gpt-4o-mini",
            session_id="s1",
            at=1000.0,
        )
    assert first == {"added": 2, "same": 0, "replaced": 0}
    with store.write() as conn:
        known = facts.known_names(conn, "shop")
        second = facts.record(
            conn,
            "shop",
            [
                facts.Fact("Orders Service", "uses_database", "Postgres", exclusive=True),
                facts.Fact("orders-service", "depends on", "payments-api"),  # the same again
                facts.Fact("orders-service", "depends on", "auth-api"),  # not exclusive: both hold
            ],
            known,
            by="openai:gpt-4o-mini",
            session_id="s2",
            at=2000.0,
        )
    assert second == {"added": 2, "same": 1, "replaced": 1}
    with store.read() as conn:
        live = facts.about(conn, "shop", "orders service")
        every = facts.about(conn, "shop", "orders-service", history=True)
    assert {(f["relation"], f["object"]) for f in live} == {
        ("uses_database", "Postgres"),
        ("depends_on", "payments-api"),
        ("depends_on", "auth-api"),
    }
    ended = next(f for f in every if f["object"] == "MySQL")
    newer = next(f for f in every if f["object"] == "Postgres")
    assert ended["validTo"] == newer["validFrom"] and ended["replacedBy"] == newer["id"]
    assert ended["sessionId"] == "s1" and newer["sessionId"] == "s2"
    assert len(every) == 4  # nothing deleted


def test_parse_facts_validates_the_answer() -> None:
    good = {
        "facts": [
            {"subject": "web", "relation": "Deployed On", "object": "Fly.io", "exclusive": True}
        ]
    }
    assert parse_facts(json.dumps(good)) == [facts.Fact("web", "deployed_on", "Fly.io", True)]
    for bad, words in (
        ({"entities": []}, "keys are wrong"),
        ({"facts": "web uses redis"}, "must be a list"),
        ({"facts": [{"subject": "web", "relation": "", "object": "x"}]}, "non-empty"),
        ({"facts": [{"subject": "a", "relation": "r" * 80, "object": "b"}]}, "short verb phrase"),
        (
            {"facts": [{"subject": "a", "relation": "uses", "object": "b", "exclusive": "yes"}]},
            "true or false",
        ),
    ):
        with pytest.raises(ValueError, match=words):
            parse_facts(json.dumps(bad))


def test_the_facts_route_checks_its_query(api: object, project: str) -> None:
    from tests.support import Api

    assert isinstance(api, Api)
    assert api.get(f"/v1/graph/facts?project={project}") == (200, {"items": []})
    assert api.get("/v1/graph/facts?project=*")[0] == 422
    assert api.get(f"/v1/graph/facts?project={project}&history=maybe")[0] == 422


def test_known_names_are_merged_before_they_are_sent(store: Store) -> None:
    from engram.schema import graph_entities

    with store.write() as conn:
        facts.record(
            conn,
            "shop",
            [facts.Fact("billing", "uses", "PostgreSQL"), facts.Fact("reports", "uses", "Redis")],
            [],
            by="t",
        )
        for name in ("postgres", "redis", "celery"):  # the heuristic graph spells them its way
            conn.execute(
                graph_entities.insert().values(
                    project="shop",
                    type="package",
                    key=name,
                    alias=name,
                    name=name,
                    doc_count=3,
                    first_seen=0.0,
                    last_seen=0.0,
                )
            )
        names = facts.known_names(conn, "shop")
    assert sorted(names) == ["PostgreSQL", "Redis", "billing", "celery", "reports"]
