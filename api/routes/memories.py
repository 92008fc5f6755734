"""Memories: remember, list, new version, forget (audited)."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, jsonify, request

from engram import memories, search
from engram.api.errors import ApiError
from engram.api.util import (
    actor,
    found_in_scope,
    in_callers_scope,
    json_body,
    limit_arg,
    page,
    scope_from,
    store,
)

bp = Blueprint("memories", __name__)


@bp.post("/v1/memories")
def remember() -> Any:
    new = memories.validate(json_body())
    return jsonify(memories.remember(store(), store().keyword, new, actor=actor())), 201


@bp.get("/v1/memories")
def list_() -> Any:
    scope = scope_from(request.args.get("project"), request.args.get("agentId"))
    query = request.args.get("query")
    limit = limit_arg()
    if query:
        found = search.search(
            store(),
            query,
            scope,
            limit=min(limit, 100),
            mode="bm25",
            kinds=("memory",),
            per_session=limit,
        )
        ids = [hit["id"] for hit in found["items"]]
        items = [m for m in (memories.get(store(), i) for i in ids) if m is not None]
        wanted = request.args.get("scope")
        return jsonify(page([m for m in items if not wanted or m["scope"] == wanted], None))
    evicted = (request.args.get("evicted") or "").lower()
    if evicted not in ("", "true", "false"):
        raise ApiError(
            422, "evicted must be true or false", details={"fields": {"evicted": "true or false"}}
        )
    items, cursor = memories.list_memories(
        store(),
        scope,
        limit,
        request.args.get("cursor"),
        request.args.get("scope") or None,
        evicted=evicted == "true",
    )
    return jsonify(page(items, cursor))


@bp.get("/v1/memories/<memory_id>")
def get(memory_id: str) -> Any:
    item = memories.get(store(), memory_id, with_versions=True)
    return jsonify(found_in_scope(item, "memory", memory_id))


@bp.patch("/v1/memories/<memory_id>")
def new_version(memory_id: str) -> Any:
    content = json_body().get("content")
    if not isinstance(content, str) or not content.strip():
        raise ApiError(
            422,
            "content is required",
            details={"fields": {"content": "required, a non-empty string"}},
        )
    if len(content) > memories.MAX_CONTENT_CHARS:
        raise ApiError(
            422,
            "content too long",
            details={"fields": {"content": f"at most {memories.MAX_CONTENT_CHARS} characters"}},
        )
    in_callers_scope(lambda: memories.get(store(), memory_id), "memory", memory_id)
    item = memories.update_content(store(), store().keyword, memory_id, content, actor=actor())
    if item is None:
        raise ApiError(404, f"no memory {memory_id!r}")
    return jsonify(item)


@bp.post("/v1/memories/<memory_id>/restore")
def restore(memory_id: str) -> Any:
    in_callers_scope(lambda: memories.get(store(), memory_id), "memory", memory_id)
    current = memories.get(store(), memory_id)
    if current is not None and not current.get("evictedAt"):
        raise ApiError(409, f"memory {memory_id!r} is not evicted: nothing to restore")
    item = memories.restore(store(), store().keyword, memory_id, actor=actor())
    if item is None:
        raise ApiError(404, f"no memory {memory_id!r}")
    return jsonify(item)


@bp.delete("/v1/memories/<memory_id>")
def forget(memory_id: str) -> Any:
    reason = request.args.get("reason")
    in_callers_scope(lambda: memories.get(store(), memory_id), "memory", memory_id)
    if not memories.forget(store(), store().keyword, memory_id, actor=actor(), reason=reason):
        raise ApiError(404, f"no memory {memory_id!r}")
    return jsonify({"forgotten": memory_id})


MAX_BULK = 500


@bp.post("/v1/memories/forget")
def forget_many() -> Any:
    """Forget several memories at once (the viewer's bulk forget; a POST, so a browser must send
    its CSRF token). Each is audited; ids not found (or outside the caller's scope) are named."""
    body = json_body()
    ids, reason = body.get("ids"), body.get("reason")
    if not isinstance(ids, list) or not ids or len(ids) > MAX_BULK:
        raise ApiError(
            422,
            "ids must be a non-empty list",
            details={"fields": {"ids": f"1-{MAX_BULK} memory ids"}},
        )
    forgotten, missing = [], []
    for memory_id in dict.fromkeys(ids):
        item = memories.get(store(), memory_id) if isinstance(memory_id, str) else None
        if item is None or not _in_scope(item):
            missing.append(memory_id)
        elif memories.forget(store(), store().keyword, memory_id, actor=actor(), reason=reason):
            forgotten.append(memory_id)
        else:
            missing.append(memory_id)
    return jsonify({"forgotten": forgotten, "missing": missing})


def _in_scope(item: dict[str, Any]) -> bool:
    """The memory is in the scope the caller named (``?project=``, ``?agentId=``), if any."""
    if not (request.args.get("project") or request.args.get("agentId")):
        return True
    try:
        found_in_scope(item, "memory", str(item.get("id")))
    except ApiError:
        return False
    return True
