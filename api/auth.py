"""Request checks before any route: origin, bearer secret, JSON content type.

- ``/v1/livez`` and ``/v1/health`` are public, and so are the viewer's page, sign-in and static
  files (api/routes/viewer.py: the page asks to sign in); everything else needs
  ``Authorization: Bearer``, or, for ``/v1/`` from the viewer, its session cookie, with the
  session's CSRF token in ``X-Engram-CSRF`` on every write (engram.webauth).
- An ``Origin`` header, when present, must be a loopback origin or allow-listed: a web page the
  user happens to visit must not drive the API from their browser. Hosts are compared exactly
  (``http://127.0.0.1.evil.example`` is not loopback).
- A server bound to loopback answers only requests addressed to a loopback name (or one in
  ``ENGRAM_ALLOWED_HOSTS``): a page whose own name resolves to 127.0.0.1 (DNS rebinding) sends
  its own name as ``Host`` and is refused, public routes included.
- A write with a body must be ``application/json``: that also keeps browsers from sending it as a
  "simple" cross-site request.
"""

from __future__ import annotations

import hmac
from collections.abc import Callable

from flask import Flask, Response, g, request

from engram.api.errors import ApiError
from engram.client import is_loopback_host, is_loopback_url
from engram.settings import Settings
from engram.webauth import COOKIE, CSRF_HEADER, ViewerAuth, csrf_matches

PUBLIC_PATHS = frozenset({"/v1/livez", "/v1/health"})
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
CORS_METHODS = "GET, POST, PATCH, DELETE"
CORS_HEADERS = "Authorization, Content-Type"


def is_loopback_origin(origin: str) -> bool:
    return is_loopback_url(origin)


def host_name(host_header: str) -> str:
    """The name in a ``Host`` header, without its port (``[::1]:8737`` → ``::1``)."""
    host = host_header.strip().lower()
    if host.startswith("["):
        return host[1 : host.find("]")] if "]" in host else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def install(
    app: Flask,
    settings: Settings,
    secret: str,
    viewer: ViewerAuth | None = None,
    viewer_public: Callable[[str], bool] = lambda _path: False,
) -> None:
    expected = f"Bearer {secret}".encode()
    allowed = frozenset(o.rstrip("/") for o in settings.allowed_origins)
    hosts = frozenset(h.lower() for h in settings.allowed_hosts)
    check_host = bool(hosts) or is_loopback_host(settings.host)

    def origin_allowed(origin: str) -> bool:
        return is_loopback_origin(origin) or origin.rstrip("/") in allowed

    def host_allowed(host_header: str) -> bool:
        name = host_name(host_header)
        return is_loopback_host(name) or name in hosts

    @app.before_request
    def _check() -> Response | None:
        if check_host and not host_allowed(request.headers.get("Host", "")):
            raise ApiError(
                403,
                f"this server answers to loopback names; {request.headers.get('Host', '')!r} is "
                "not one (add it to ENGRAM_ALLOWED_HOSTS if a proxy uses it)",
                code="host_not_allowed",
            )
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
        if request.path in PUBLIC_PATHS or viewer_public(request.path):
            return None
        if (
            viewer is not None
            and "Authorization" not in request.headers
            and request.path.startswith("/v1/")
        ):
            _viewer_session()
        else:
            _bearer()
        if (
            request.method in {"POST", "PUT", "PATCH"}
            and (request.content_length or 0) > 0
            and request.mimetype != "application/json"
        ):
            raise ApiError(415, "request bodies must be application/json")
        return None

    def _viewer_session() -> None:
        """The viewer's cookie instead of the secret; a write must echo the session's CSRF
        token (a cross-site page can neither read it nor, SameSite=Strict, send the cookie)."""
        assert viewer is not None
        csrf = viewer.session(request.cookies.get(COOKIE))
        if csrf is None:
            _bearer()  # the usual 401
            return
        if request.method not in SAFE_METHODS and not csrf_matches(
            csrf, request.headers.get(CSRF_HEADER)
        ):
            raise ApiError(
                403,
                f"a change from the viewer must carry its {CSRF_HEADER} header; reload the page",
                code="csrf_failed",
            )
        g.engram_actor = "viewer"

    def _bearer() -> None:
        scheme, _, token = request.headers.get("Authorization", "").partition(" ")
        given = f"{scheme.capitalize()} {token.strip()}".encode()
        if not hmac.compare_digest(given, expected):
            raise ApiError(
                401,
                "missing or wrong bearer secret: send 'Authorization: Bearer "
                "<secret>' (the secret is in the config dir, see `engram status`)",
            )

    @app.after_request
    def _cors(response: Response) -> Response:
        origin = request.headers.get("Origin")
        if origin and origin_allowed(origin):
            response.headers["Access-Control-Allow-Origin"] = origin
            response.headers.add("Vary", "Origin")
        return response
