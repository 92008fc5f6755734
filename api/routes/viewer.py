"""The viewer: a page served by the gateway, its sign-in, and the live event stream.

The page is one HTML shell and small ES modules (``api/viewer/``), no build step; it reads the
same REST API as every client, authenticated by the cookie a one-time link gave it (see
``engram.webauth`` and ``api.auth``). Every URL it uses is relative, so it works under a path
prefix behind a reverse proxy. Each HTML response carries its own CSP nonce; nothing inline
runs without it and the page has no inline handlers.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Iterator
from html import escape
from importlib import resources
from typing import Any

from flask import Blueprint, Response, current_app, jsonify, request

from engram.activity import Feed
from engram.api.errors import ApiError
from engram.api.util import settings
from engram.webauth import COOKIE, ViewerAuth

bp = Blueprint("viewer", __name__)

PUBLIC = frozenset({"/", "/login"})
"""Viewer paths anyone may ask for (the page itself says to sign in); ``/static/`` too."""
HEARTBEAT_SECONDS = 10.0
STREAM_SECONDS = 300.0
"""A stream ends after this long; the browser reconnects at once with Last-Event-ID (the
waitress thread it held is freed and taken again, so a stuck client cannot keep one)."""
STATIC_TYPES = {
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
}


def is_public(path: str) -> bool:
    return path in PUBLIC or path.startswith("/static/")


def _auth() -> ViewerAuth:
    return current_app.extensions["engram.viewer_auth"]


def _feed() -> Feed:
    return current_app.extensions["engram.feed"]


def _csp(nonce: str) -> str:
    return (
        "default-src 'none'; "
        f"script-src 'nonce-{nonce}'; "
        "style-src 'self'; img-src 'self' data:; connect-src 'self'; "
        "base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
    )


def _html(body: str, status: int = 200, *, csrf: str | None = None) -> Response:
    nonce = secrets.token_urlsafe(18)
    meta = f'<meta name="engram-csrf" content="{escape(csrf)}">' if csrf else ""
    script = f'<script type="module" nonce="{nonce}" src="static/app.js"></script>' if csrf else ""
    page = (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<meta name="color-scheme" content="light dark">'
        f'{meta}<title>Engram</title><link rel="stylesheet" href="static/app.css">'
        f'<link rel="icon" href="static/icon.svg">{script}</head><body>{body}</body></html>'
    )
    response = Response(page, status=status, mimetype="text/html")
    response.headers["Content-Security-Policy"] = _csp(nonce)
    response.headers["Cache-Control"] = "no-store"
    return response


SIGN_IN = (
    '<main class="signin"><h1>Engram</h1>{message}<p>To open the viewer, run '
    "<code>engram open</code> on this machine (or use the one-time link "
    "<code>engram serve</code> printed at start). The link works once and for five "
    "minutes; it signs this browser in with a cookie, so the secret never reaches the page.</p>"
    "</main>"
)


@bp.get("/")
def page() -> Response:
    csrf = _auth().session(request.cookies.get(COOKIE))
    if csrf is None:
        return _html(SIGN_IN.format(message=""))
    shell = (
        '<a class="skip" href="#main">Skip to content</a>'
        '<header class="top"><span class="brand">Engram</span><nav id="nav"></nav>'
        '<span id="live" class="live" role="status" aria-live="polite">connecting…</span>'
        "</header>"
        '<main id="main" tabindex="-1"><p class="muted">Loading…</p></main>'
    )
    return _html(shell, csrf=csrf)


@bp.get("/login")
def login() -> Response:
    found = _auth().redeem(request.args.get("token", ""))
    if found is None:
        message = (
            '<p class="error" role="alert">This sign-in link was already used, has expired or '
            "is not one Engram made.</p>"
        )
        return _html(SIGN_IN.format(message=message), 403)
    cookie, _ = found
    response = Response(status=303)
    response.headers["Location"] = "./"  # relative: the viewer's own root behind any prefix
    response.headers["Referrer-Policy"] = "no-referrer"
    response.headers["Cache-Control"] = "no-store"
    # no Path: the cookie belongs to the directory of /login, i.e. the viewer's root
    response.set_cookie(
        COOKIE,
        cookie,
        max_age=int(settings().viewer_session_hours * 3600),
        path=None,
        httponly=True,
        samesite="Strict",
        secure=request.is_secure,
    )
    return response


@bp.get("/static/<path:name>")
def static(name: str) -> Response:
    suffix = name[name.rfind(".") :] if "." in name else ""
    if "/" in name or name.startswith(".") or suffix not in STATIC_TYPES:
        raise ApiError(404, f"no file {name!r}")
    try:
        data = resources.files("engram.api").joinpath("viewer").joinpath(name).read_bytes()
    except (FileNotFoundError, IsADirectoryError):
        raise ApiError(404, f"no file {name!r}") from None
    response = Response(data, mimetype=STATIC_TYPES[suffix])
    response.headers["Cache-Control"] = "no-cache"  # revalidated: an upgrade shows at once
    response.headers["X-Content-Type-Options"] = "nosniff"
    return response


@bp.post("/v1/viewer/links")
def new_link() -> Any:
    """A one-time sign-in link (bearer secret only: a browser session cannot make more)."""
    if request.headers.get("Authorization") is None:
        raise ApiError(403, "sign-in links are made with the bearer secret (engram open)")
    token = _auth().mint_link()
    return jsonify({"path": f"login?token={token}", "expiresInSeconds": 300}), 201


@bp.post("/v1/viewer/logout")
def logout() -> Response:
    _auth().end(request.cookies.get(COOKIE))
    response = jsonify({"signedOut": True})
    response.delete_cookie(COOKIE, path=None)
    return response


class StreamSlots:
    """At most ``n`` open streams per process (each holds a request thread)."""

    def __init__(self, n: int) -> None:
        self._free = threading.BoundedSemaphore(n)

    def take(self) -> bool:
        return self._free.acquire(blocking=False)

    def give(self) -> None:
        self._free.release()


class _Held:
    """A stream that gives its slot back when the server closes it, even unstarted."""

    def __init__(self, inner: Iterator[str], slots: StreamSlots) -> None:
        self._inner, self._slots, self._held = inner, slots, True

    def __iter__(self) -> _Held:
        return self

    def __next__(self) -> str:
        return next(self._inner)

    def close(self) -> None:
        close = getattr(self._inner, "close", None)
        if close is not None:
            close()
        if self._held:
            self._held = False
            self._slots.give()


@bp.get("/v1/events")
def events() -> Response:
    """Server-Sent Events: what happens, as it happens (engram.activity), with ids to resume."""
    raw = request.headers.get("Last-Event-ID") or request.args.get("lastEventId") or None
    last_id: int | None = None
    if raw is not None:
        if not raw.isdigit() or len(raw) > 18:
            raise ApiError(
                422,
                "Last-Event-ID must be an event id",
                details={"fields": {"lastEventId": "a non-negative integer"}},
            )
        last_id = int(raw)
    slots: StreamSlots = current_app.extensions["engram.stream_slots"]
    if not slots.take():
        error = ApiError(
            503,
            f"{settings().viewer_max_streams} live streams are open already "
            "(ENGRAM_VIEWER_MAX_STREAMS); close a viewer tab or raise the limit",
            code="too_many_streams",
        )
        raise error
    feed = _feed()

    def stream() -> Iterator[str]:
        yield "retry: 2000\n: connected\n\n"
        until = time.monotonic() + STREAM_SECONDS
        for event in feed.listen(last_id, HEARTBEAT_SECONDS, until):
            yield ": heartbeat\n\n" if event is None else event.sse()

    response = Response(_Held(stream(), slots), mimetype="text/event-stream")
    response.headers["Cache-Control"] = "no-store"
    response.headers["X-Accel-Buffering"] = "no"  # nginx: pass each event on at once
    return response
