"""Capture: POST /v1/observe and the inbox (GET /v1/capture, POST /v1/capture/retry)."""

from __future__ import annotations

import logging
import time
from typing import Any

from flask import Blueprint, Response, current_app, jsonify, request
from sqlalchemy.exc import SQLAlchemyError

from engram import audit, inbox, metrics, sessions
from engram.api.errors import ApiError, error_response
from engram.api.util import actor, json_body, limit_arg, page, settings, store
from engram.errors import SessionConflict
from engram.events import InvalidEvent, validate_event

bp = Blueprint("capture", __name__)
log = logging.getLogger("engram.api")


RETRY_AFTER_SECONDS = 5


def _unavailable(code: str, message: str) -> Any:
    response, status = error_response(
        503, code, message, extra={"status": "rejected", "retryable": True}
    )
    response.headers["Retry-After"] = str(RETRY_AFTER_SECONDS)
    return response, status


def _dispatch(event_id: str) -> None:
    current_app.extensions["engram.dispatch"](event_id)


@bp.after_request
def _count(response: Response) -> Response:
    """Each /v1/observe answer, by outcome, for /metrics (refusals before the route too)."""
    if request.endpoint == "capture.observe":
        outcome = metrics.capture_outcome(response.status_code)
        if outcome is not None:
            current_app.extensions["engram.capture_answers"].add(outcome)
    return response


@bp.post("/v1/observe")
def observe() -> Any:
    # validate_event scrubs the whole body itself (the core's rule for what enters the inbox)
    body = json_body(extra={"status": "rejected"}, scrubbed=False)
    try:
        event = validate_event(
            body, max_field_chars=settings().max_field_chars, received_at=time.time()
        )
    except InvalidEvent as exc:
        return error_response(
            422,
            "validation_failed",
            "invalid observe payload",
            details={"fields": exc.fields},
            extra={"status": "rejected"},
        )
    with store().read() as conn:  # a session id belongs to one project: refuse before accepting
        try:
            sessions.check_owner(conn, event.session_id, event.project, event.agent_id)
        except SessionConflict as exc:
            return error_response(409, "session_conflict", str(exc), extra={"status": "rejected"})
    try:
        result = inbox.accept(store(), event, settings().inbox_max)
    except inbox.InboxFull as exc:
        return _unavailable("inbox_full", f"{exc}; spool the event and resend later")
    except SQLAlchemyError as exc:
        # Nothing was written (the transaction rolled back): the client keeps the event.
        log.error("capture inbox write failed: %s", exc)
        return _unavailable(
            "store_unavailable", "the store did not accept the event; spool it and resend later"
        )
    answer: dict[str, Any] = {
        "status": result.status,
        "eventId": result.event_id,
        "observationId": result.observation_id,
    }
    if result.is_new:
        _dispatch(result.event_id)
        return jsonify(answer), 201
    if result.state == inbox.RETRYING:
        return jsonify({**answer, "state": inbox.RETRYING}), 202
    return jsonify({**answer, "state": result.state}), 200


@bp.get("/v1/capture")
def capture_list() -> Any:
    state = request.args.get("state") or None
    if state is not None and state not in (*inbox.WAITING_STATES, inbox.DEAD):
        raise ApiError(
            422,
            "state must be pending, processing, retrying or dead",
            details={"fields": {"state": "unknown state"}},
        )
    items, cursor = inbox.list_entries(store(), limit_arg(), request.args.get("cursor"), state)
    with store().read() as conn:
        counts = inbox.counts(conn)
    return jsonify({**page(items, cursor), "counts": counts})


@bp.post("/v1/capture/retry")
def capture_retry() -> Any:
    body = json_body()
    event_id, everything = body.get("eventId"), body.get("all")
    if everything is True and event_id is None:
        ids = inbox.retry_dead(store())
    elif isinstance(event_id, str) and event_id and everything in (None, False):
        ids = inbox.retry_dead(store(), event_id)
        if not ids:
            raise ApiError(404, f"no dead letter with eventId {event_id!r}")
    else:
        raise ApiError(
            422,
            'send {"eventId": "..."} or {"all": true}',
            details={"fields": {"eventId": "string, or use all: true"}},
        )
    with store().write() as conn:
        for retried in ids:
            audit.record(conn, actor(), "capture.retry", "event", retried)
    for retried in ids:
        _dispatch(retried)
    return jsonify({"retried": len(ids), "eventIds": ids})
