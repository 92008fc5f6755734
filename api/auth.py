"""Request checks before any route: origin, bearer secret, JSON content type.

- ``/v1/livez`` and ``/v1/health`` are public; everything else needs ``Authorization: Bearer``.
- An ``Origin`` header, when present, must be a loopback origin or allow-listed: a web page the
  user happens to visit must not drive the API from their browser.
- A write with a body must be ``application/json``: that also keeps browsers from sending it as a
  "simple" cross-site request.
"""

from __future__ import annotations

import hmac
from urllib.parse import urlsplit

from flask import Flask, Response, request

from engram.api.errors import ApiError

PUBLIC_PATHS = frozenset({"/v1/livez", "/v1/health"})
LOOPBACK_HOSTS = frozenset({"localhost", "127.0.0.1", "::1", "[::1]"})
CORS_METHODS = "GET, POST, PATCH, DELETE"
CORS_HEADERS = "Authorization, Content-Type"


def is_loopback_origin(origin: str) -> bool:
    host = urlsplit(origin).hostname or ""
    return host in LOOPBACK_HOSTS or host.startswith("127.") or host.endswith(".localhost")


def install(app: Flask, secret: str, allowed_origins: tuple[str, ...]) -> None:
    expected = f"Bearer {secret}".encode()
    allowed = frozenset(o.rstrip("/") for o in allowed_origins)

    def origin_allowed(origin: str) -> bool:
        return is_loopback_origin(origin) or origin.rstrip("/") in allowed

    @app.before_request
    def _check() -> Response | None:
        origin = request.headers.get("Origin")
        if origin and not origin_allowed(origin):
            raise ApiError(
                403,
                f"origin {origin!r} is not allowed; add it to ENGRAM_ALLOWED_ORIGINS",
                code="origin_not_allowed",
            )
        if (
            origin
            and request.method == "OPTIONS"
            and request.headers.get("Access-Control-Request-Method")
        ):
            # A CORS preflight from an allowed origin carries no credentials by design.
            preflight = Response(status=204)
            preflight.headers["Access-Control-Allow-Methods"] = CORS_METHODS
            preflight.headers["Access-Control-Allow-Headers"] = CORS_HEADERS
            preflight.headers["Access-Control-Max-Age"] = "600"
            return preflight
        if request.path in PUBLIC_PATHS:
            return None
        scheme, _, token = request.headers.get("Authorization", "").partition(" ")
        given = f"{scheme.capitalize()} {token.strip()}".encode()
        if not hmac.compare_digest(given, expected):
            raise ApiError(
                401,
                "missing or wrong bearer secret: send 'Authorization: Bearer "
                "<secret>' (the secret is in the config dir, see `engram status`)",
            )
        if (
            request.method in {"POST", "PUT", "PATCH"}
            and (request.content_length or 0) > 0
            and request.mimetype != "application/json"
        ):
            raise ApiError(415, "request bodies must be application/json")
        return None

    @app.after_request
    def _cors(response: Response) -> Response:
        origin = request.headers.get("Origin")
        if origin and origin_allowed(origin):
            response.headers["Access-Control-Allow-Origin"] = origin
            response.headers.add("Vary", "Origin")
        return response
