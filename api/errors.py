"""One error shape for the whole API: ``{"error": {"code", "message", "details"?}}``.

Every failure becomes that JSON here, including Werkzeug's HTTP errors and unexpected exceptions
(logged with their traceback, answered without it).
"""

from __future__ import annotations

import logging
from typing import Any

from flask import Flask, Response, jsonify
from werkzeug.exceptions import HTTPException

from engram.errors import FieldErrors, SessionConflict
from engram.pagination import BadCursor
from engram.wire import error_body

log = logging.getLogger("engram.api")

_HTTP_CODES = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    413: "payload_too_large",
    415: "unsupported_media_type",
    422: "validation_failed",
    429: "too_many_requests",
    500: "internal",
    503: "unavailable",
}


class ApiError(Exception):
    def __init__(
        self,
        status: int,
        message: str,
        *,
        code: str | None = None,
        details: dict[str, Any] | None = None,
        extra: dict[str, Any] | None = None,
    ):
        super().__init__(message)
        self.status = status
        self.code = code or _HTTP_CODES.get(status, "error")
        self.message = message
        self.details = details
        self.extra = extra or {}


def error_response(
    status: int,
    code: str,
    message: str,
    details: dict[str, Any] | None = None,
    extra: dict[str, Any] | None = None,
) -> tuple[Response, int]:
    return jsonify(error_body(code, message, details, extra)), status


def register(app: Flask) -> None:
    @app.errorhandler(ApiError)
    def _api_error(exc: ApiError) -> tuple[Response, int]:
        return error_response(exc.status, exc.code, exc.message, exc.details, exc.extra)

    @app.errorhandler(FieldErrors)
    def _field_errors(exc: FieldErrors) -> tuple[Response, int]:
        return error_response(422, "validation_failed", exc.what, {"fields": exc.fields})

    @app.errorhandler(SessionConflict)
    def _session_conflict(exc: SessionConflict) -> tuple[Response, int]:
        return error_response(409, "session_conflict", str(exc))

    @app.errorhandler(BadCursor)
    def _bad_cursor(exc: BadCursor) -> tuple[Response, int]:
        return error_response(400, "bad_cursor", str(exc))

    @app.errorhandler(HTTPException)
    def _http_error(exc: HTTPException) -> tuple[Response, int]:
        status = exc.code or 500
        return error_response(status, _HTTP_CODES.get(status, "error"), exc.description or exc.name)

    @app.errorhandler(Exception)
    def _unexpected(exc: Exception) -> tuple[Response, int]:
        log.exception("unhandled error")
        return error_response(
            500, "internal", f"internal error ({type(exc).__name__}); see the server log"
        )
