"""GET /metrics: the Prometheus exposition, read back with prometheus_client's own parser (a
second, independent reader of the format), from the embedded gateway and from real distributed
processes on Redis."""

from __future__ import annotations

import math
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from engram import metrics
from tests.support import Api, Cluster, observe_body, wait_for

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def parse(text: str) -> tuple[Samples, dict[str, str]]:
    """Every sample by (name, sorted labels), and each family's type."""
    samples: Samples = {}
    kinds: dict[str, str] = {}
    for family in text_string_to_metric_families(text):
        kinds[family.name] = family.type
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples, kinds


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples[(name, tuple(sorted(labels.items())))]


def scrape(api: Api) -> tuple[Samples, dict[str, str]]:
    response = api.client.get("/metrics", headers=api.headers)
    assert response.status_code == 200, response.get_data(as_text=True)
    assert response.headers["Content-Type"] == metrics.CONTENT_TYPE
    return parse(response.get_data(as_text=True))


def test_metrics_need_the_secret(api: Api) -> None:
    response = api.client.get("/metrics")
    assert response.status_code == 401
    assert response.get_json()["error"]["code"] == "unauthorized"


def test_capture_counts_inbox_and_latency_after_real_captures(api: Api, project: str) -> None:
    before, kinds = scrape(api)
    assert kinds["engram_capture_requests"] == "counter"  # the parser drops _total
    assert kinds["engram_capture_events"] == "gauge"
    accepted = [api.post("/v1/observe", observe_body(project, "s1", n)) for n in range(3)]
    assert [status for status, _ in accepted] == [201, 201, 201]
    assert api.post("/v1/observe", observe_body(project, "s1", 0))[0] == 200  # a replay
    assert api.post("/v1/observe", {"project": project})[0] == 422
    api.wait_drained()
    after, _ = scrape(api)

    def grew(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    total = "engram_capture_requests_total"
    assert grew(total, outcome="accepted") == 3
    assert grew(total, outcome="duplicate") == 1
    assert grew(total, outcome="rejected") == 1
    assert grew(total, outcome="unavailable") == 0
    assert grew("engram_capture_events", state="stored") == 3
    assert value(after, "engram_capture_events", state="dead") == 0
    assert value(after, "engram_inbox_events", state="pending") == 0
    assert value(after, "engram_inbox_oldest_waiting_seconds") == 0
    assert value(after, "engram_capture_stored_recent") >= 3
    p50 = value(after, "engram_capture_latency_seconds", quantile="0.5")
    p99 = value(after, "engram_capture_latency_seconds", quantile="0.99")
    assert 0 <= p50 <= p99 < 20  # stored within the drain above
    assert value(after, "engram_documents", kind="observation") >= 3
    assert value(after, "engram_schema_version") >= 17
    assert value(after, "engram_process_resident_bytes", process="server") > 20e6
    assert value(after, "engram_store_up") == 1


def test_latency_is_nan_with_nothing_stored_lately() -> None:
    assert math.isnan(metrics.quantile([], 0.5))
    assert metrics.quantile([0.3, 0.1, 0.2, 5.0], 0.5) == 0.2
    assert metrics.quantile([0.3, 0.1, 0.2, 5.0], 0.99) == 5.0
    families = metrics.families({"ok": True}, {}, [], {}, {})
    samples, _ = parse(metrics.render(families))
    assert math.isnan(value(samples, "engram_capture_latency_seconds", quantile="0.95"))


def test_label_values_are_escaped() -> None:
    family = metrics.Family("engram_problems", "gauge", "Problems").add(
        2, component='a "quoted"\\ name\nnext'
    )
    samples, _ = parse(metrics.render([family]))
    assert value(samples, "engram_problems", component='a "quoted"\\ name\nnext') == 2


def _scrape_url(cluster: Cluster) -> tuple[Samples, dict[str, str]]:
    secret = (Path(cluster.env["ENGRAM_CONFIG_DIR"]) / "secret").read_text().strip()
    request = urllib.request.Request(
        cluster.url + "/metrics", headers={"Authorization": f"Bearer {secret}"}
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return parse(response.read().decode())


@pytest.mark.slow
def test_distributed_queue_lengths_workers_and_problems(tmp_path: Path, redis_url: str) -> None:
    """A gateway with no worker: captures wait in the broker's capture queue and metrics say
    so; once a worker pool runs, the queue empties, the events are stored."""
    cluster = Cluster(tmp_path, ENGRAM_BROKER_URL=redis_url)
    try:
        cluster.serve()
        for n in range(4):
            status, body = cluster.request("POST", "/v1/observe", observe_body("m", "s1", n))
            assert status == 201, body
        samples, _ = _scrape_url(cluster)
        assert value(samples, "engram_queue_length", queue="capture") == 4
        assert value(samples, "engram_workers") == 0
        assert value(samples, "engram_up") == 0
        assert value(samples, "engram_problems", component="workers") == 1
        assert value(samples, "engram_inbox_events", state="pending") == 4
        assert value(samples, "engram_broker_up") == 1
        cluster.start("worker", "--concurrency", "1", "--name", "metrics@%h")

        def stored() -> Any:
            found, _ = _scrape_url(cluster)
            done = value(found, "engram_capture_events", state="stored") == 4
            # the pool answers the status broadcast once its start-up work is done
            return found if done and value(found, "engram_workers") >= 1 else None

        samples = wait_for(stored, 60, interval=0.5, message="4 events stored, a worker seen")
        assert value(samples, "engram_queue_length", queue="capture") == 0
        workers = [
            labels
            for (name, labels), _ in samples.items()
            if name == "engram_process_resident_bytes" and "worker" in dict(labels)["process"]
        ]
        assert workers, "the worker's own memory"
    finally:
        cluster.stop_all()
