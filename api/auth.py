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

from flask import Flask, request

from api.errors import ApiError

PUBLIC_PATHS = frozenset({"/v1/livez", "/v1/health"})
LOOPBACK_HOSTS = frozenset({"localhost", "127.0.0.1", "::1", "[::1]"})


def is_loopback_origin(origin: str) -> bool:
    host = urlsplit(origin).hostname or ""
    return host in LOOPBACK_HOSTS or host.startswith("127.") or host.endswith(".localhost")


def install(app: Flask, secret: str, allowed_origins: tuple[str, ...]) -> None:
    expected = f"Bearer {secret}".encode()
    allowed = frozenset(o.rstrip("/") for o in allowed_origins)

    @app.before_request
    def _check() -> None:
        origin = request.headers.get("Origin")
        if origin and not (is_loopback_origin(origin) or origin.rstrip("/") in allowed):
            raise ApiError(403, f"origin {origin!r} is not allowed; add it to "
                           "ENGRAM_ALLOWED_ORIGINS", code="origin_not_allowed")
        if request.path in PUBLIC_PATHS:
            return
        given = request.headers.get("Authorization", "").encode()
        if not hmac.compare_digest(given, expected):
            raise ApiError(401, "missing or wrong bearer secret: send 'Authorization: Bearer "
                           "<secret>' (the secret is in the config dir, see `engram status`)")
        if request.method in {"POST", "PUT", "PATCH"} and (request.content_length or 0) > 0 \
                and request.mimetype != "application/json":
            raise ApiError(415, "request bodies must be application/json")
