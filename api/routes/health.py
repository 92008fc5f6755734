"""Liveness, health (public, minimal), status (authenticated, complete) and its metrics."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, Response, current_app, jsonify

from engram import metrics, status
from engram.api.contract import openapi as openapi_document
from engram.api.util import reranker, settings, store

bp = Blueprint("health", __name__)


@bp.get("/v1/livez")
def livez() -> Any:
    return jsonify({"status": "ok"})


@bp.get("/v1/openapi.json")
def openapi() -> Any:
    """The REST contract as OpenAPI 3.1, generated from api/contract.py (what the gateway
    enforces)."""
    return jsonify(openapi_document(current_app.config["ENGRAM_VERSION"]))


@bp.get("/v1/health")
def health() -> Any:
    """Public and cheap (no broker or worker round trip): is the store answering?"""
    if not store().answers():
        return jsonify(
            {"status": "unavailable", "version": current_app.config["ENGRAM_VERSION"]}
        ), 503
    return jsonify({"status": "ok", "version": current_app.config["ENGRAM_VERSION"]})


@bp.get("/v1/status")
def status_() -> Any:
    return jsonify({**_report(), "version": current_app.config["ENGRAM_VERSION"]})


@bp.get("/metrics")
def metrics_() -> Any:
    """Prometheus text exposition (engram.metrics): the status report as numbers, the event
    ledger by state, recent accept-to-stored latency, queue lengths, this process's capture
    answers. Needs the bearer secret (a scraper's ``authorization`` credentials)."""
    report = _report()
    ledger: dict[str, int] = {}
    latencies: list[float] = []
    if report.get("store", {}).get("ok"):
        with store().read() as conn:
            ledger = metrics.ledger_states(conn)
            latencies = metrics.recent_latencies(conn)
    ext = current_app.extensions
    body = metrics.render(
        metrics.families(
            report,
            ledger,
            latencies,
            ext["engram.queue_probe"](),
            ext["engram.capture_answers"].snapshot(),
        )
    )
    return Response(body, mimetype="text/plain", content_type=metrics.CONTENT_TYPE)


def _report() -> dict[str, Any]:
    ext = current_app.extensions
    return status.collect(
        settings(),
        store(),
        ext["engram.broker_probe"],
        ext["engram.worker_probe"],
        ext.get("engram.vectors"),
        reranker(),
    )
