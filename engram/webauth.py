"""The viewer's sign-in: a one-time link becomes a browser session, the bearer secret never
reaches the browser.

Whoever holds the secret (``engram open``, ``engram serve`` at start) asks for a link: a random
token valid for ``LINK_SECONDS`` and redeemable once. Redeeming it (``GET <viewer>/login?token=``)
creates a session: a second random token, kept by the browser as an HttpOnly, SameSite=Strict
cookie, with its own CSRF token that writes must echo in a header. Only SHA-256 hashes of the
tokens are stored, in the store every gateway replica shares, so a link printed by one replica
can be redeemed at another, and once only.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import threading
import time

from sqlalchemy import delete, select, update

from engram.schema import viewer_tokens
from engram.store import Store, now

LINK_SECONDS = 300.0
COOKIE = "engram_viewer"
CSRF_HEADER = "X-Engram-CSRF"
CACHE_SECONDS = 30.0
"""A session checked in the store is trusted this long by the process (a sign-out elsewhere
takes at most this long to reach another replica)."""


def _hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


class ViewerAuth:
    def __init__(self, store: Store, session_hours: float) -> None:
        self._store = store
        self._session_seconds = session_hours * 3600.0
        self._cache: dict[str, tuple[str, float, float]] = {}  # hash -> csrf, expires, checked
        self._lock = threading.Lock()

    def mint_link(self) -> str:
        """A one-time token for ``login?token=``."""
        token = secrets.token_urlsafe(32)
        at = now()
        with self._store.write() as conn:
            conn.execute(delete(viewer_tokens).where(viewer_tokens.c.expires_at < at))
            conn.execute(
                viewer_tokens.insert().values(
                    token_hash=_hash(token),
                    kind="link",
                    created_at=at,
                    expires_at=at + LINK_SECONDS,
                )
            )
        return token

    def redeem(self, token: str) -> tuple[str, str] | None:
        """A session (cookie value, CSRF token) for an unused, unexpired link; None otherwise.
        A link is used up by its first redemption, successful or not for the caller."""
        if not token or len(token) > 200:
            return None
        at = now()
        cookie, csrf = secrets.token_urlsafe(32), secrets.token_urlsafe(24)
        with self._store.write() as conn:
            used = conn.execute(
                update(viewer_tokens)
                .where(
                    viewer_tokens.c.token_hash == _hash(token),
                    viewer_tokens.c.kind == "link",
                    viewer_tokens.c.used_at.is_(None),
                    viewer_tokens.c.expires_at > at,
                )
                .values(used_at=at)
            )
            if used.rowcount != 1:
                return None
            conn.execute(
                viewer_tokens.insert().values(
                    token_hash=_hash(cookie),
                    kind="session",
                    csrf=csrf,
                    created_at=at,
                    expires_at=at + self._session_seconds,
                )
            )
        return cookie, csrf

    def session(self, cookie: str | None) -> str | None:
        """The CSRF token of a live session, or None."""
        if not cookie or len(cookie) > 200:
            return None
        key, clock = _hash(cookie), time.monotonic()
        with self._lock:
            cached = self._cache.get(key)
        if cached is not None and clock - cached[2] < CACHE_SECONDS and cached[1] > now():
            return cached[0]
        with self._store.read() as conn:
            row = conn.execute(
                select(viewer_tokens.c.csrf, viewer_tokens.c.expires_at).where(
                    viewer_tokens.c.token_hash == key,
                    viewer_tokens.c.kind == "session",
                    viewer_tokens.c.expires_at > now(),
                )
            ).first()
        with self._lock:
            if row is None:
                self._cache.pop(key, None)
                return None
            if len(self._cache) > 1000:
                self._cache.clear()
            self._cache[key] = (str(row.csrf), float(row.expires_at), clock)
        return str(row.csrf)

    def end(self, cookie: str | None) -> None:
        """Sign out: the session's cookie no longer works (at once here, within
        ``CACHE_SECONDS`` at other replicas)."""
        if not cookie:
            return
        key = _hash(cookie)
        with self._lock:
            self._cache.pop(key, None)
        with self._store.write() as conn:
            conn.execute(delete(viewer_tokens).where(viewer_tokens.c.token_hash == key))


def csrf_matches(expected: str, given: str | None) -> bool:
    return bool(given) and hmac.compare_digest(expected.encode(), (given or "").encode())
