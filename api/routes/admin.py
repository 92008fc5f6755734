"""Whole-store operations: export, import, audit trail."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, Response, jsonify, request, stream_with_context

from engram import audit, transfer
from engram.api.util import json_body, limit_arg, page, settings, store

bp = Blueprint("admin", __name__)


@bp.get("/v1/export")
def export() -> Any:
    """Streamed as it is read (``transfer.export_stream``): the gateway holds one page of rows,
    never the document."""
    return Response(
        stream_with_context(transfer.export_stream(store())), mimetype="application/json"
    )


def larger_body_for_import() -> None:
    """``POST /v1/import`` takes up to ENGRAM_MAX_IMPORT_BYTES (installed on the app before any
    check that reads a body)."""
    if request.endpoint == "admin.import_":
        request.max_content_length = settings().max_import_bytes


@bp.post("/v1/import")
def import_() -> Any:
    body = json_body()
    document = body.get("data", body if "sessions" in body or "memories" in body else None)
    strategy = body.get("strategy", "merge")
    counts = transfer.import_(store(), document, strategy)  # type: ignore[arg-type]
    return jsonify({"strategy": strategy, "imported": counts})


@bp.get("/v1/audit")
def audit_() -> Any:
    items, cursor = audit.list_entries(
        store(),
        limit_arg(),
        request.args.get("cursor"),
        request.args.get("targetId"),
        request.args.get("action"),
    )
    return jsonify(page(items, cursor))
