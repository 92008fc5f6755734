"""How the hook CLI and its spool talk to the gateway: one JSON request with a hard deadline.

``http://`` goes over a plain socket (HTTP/1.1, ``Connection: close``): ``http.client`` and
``urllib`` import ``ssl`` and ``email`` and cost the hook ~25 ms before it sends a byte.
``https://`` (a remote team gateway) uses ``http.client``, imported only then.
"""

from __future__ import annotations

import json
import socket
import time
from urllib.parse import urlsplit

from engram.client import is_loopback_url

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

MAX_RESPONSE_BYTES = 8 * 1024 * 1024
PERMANENT = frozenset({400, 404, 413, 422})
"""Answers a resend will not change (malformed, unknown session, too large, invalid): the request
is kept as refused, never retried."""


class Unreachable(Exception):
    """No answer in time: refused, reset, timed out, or not HTTP."""


class Gateway:
    """The gateway at ``url``; the secret goes only to loopback unless it was set explicitly."""

    def __init__(self, url: str, secret: str | None, *, explicit_secret: bool) -> None:
        self.url = url.rstrip("/")
        parts = urlsplit(self.url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"gateway URL must be http(s)://host[:port], got {url!r}")
        self.scheme = parts.scheme
        self.host = parts.hostname
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        self.prefix = parts.path.rstrip("/")
        send = secret and (explicit_secret or is_loopback_url(self.url))
        self.secret = secret if send else None

    def send(self, method: str, path: str, body: Any, deadline: float) -> tuple[int, Any]:
        """(status, decoded JSON or None). Raises Unreachable when no HTTP answer came before
        ``deadline`` (a ``time.monotonic()`` value)."""
        data = b"" if body is None else json.dumps(body, ensure_ascii=False).encode("utf-8")
        headers = {"Host": f"{self.host}:{self.port}", "Accept": "application/json",
                   "Connection": "close", "Content-Length": str(len(data))}
        if body is not None:
            headers["Content-Type"] = "application/json"
        if self.secret:
            headers["Authorization"] = f"Bearer {self.secret}"
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise Unreachable("no time left")
        if self.scheme == "https":
            status, raw = self._https(method, self.prefix + path, data, headers, remaining)
        else:
            status, raw = self._plain(method, self.prefix + path, data, headers, deadline)
        try:
            return status, json.loads(raw) if raw else None
        except ValueError:
            return status, None

    def _plain(self, method: str, path: str, data: bytes, headers: dict[str, str],
               deadline: float) -> tuple[int, bytes]:
        head = f"{method} {path} HTTP/1.1\r\n" + "".join(
            f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n"
        chunks: list[bytes] = []
        try:
            with self._connect(deadline) as sock:
                sock.sendall(head.encode("latin-1") + data)
                size = 0
                while True:
                    sock.settimeout(max(deadline - time.monotonic(), 0.001))
                    chunk = sock.recv(65536)
                    if not chunk:
                        break
                    chunks.append(chunk)
                    size += len(chunk)
                    if size > MAX_RESPONSE_BYTES:
                        raise Unreachable("response too large")
        except OSError as exc:  # refused, reset, timed out (socket.timeout is an OSError)
            raise Unreachable(f"{self.url}: {exc}") from None
        return _parse_response(b"".join(chunks), self.url)

    def _connect(self, deadline: float) -> socket.socket:
        """An IP literal (the usual 127.0.0.1) connects without a resolver round trip."""
        timeout = max(deadline - time.monotonic(), 0.001)
        family = (socket.AF_INET6 if ":" in self.host else socket.AF_INET
                  if self.host.replace(".", "").isdigit() else None)
        if family is None:
            return socket.create_connection((self.host, self.port), timeout=timeout)
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.settimeout(timeout)
            sock.connect((self.host, self.port))
        except OSError:
            sock.close()
            raise
        return sock

    def _https(self, method: str, path: str, data: bytes, headers: dict[str, str],
               timeout: float) -> tuple[int, bytes]:
        import http.client

        conn = http.client.HTTPSConnection(self.host, self.port, timeout=timeout)
        try:
            conn.request(method, path, body=data or None, headers=headers)
            response = conn.getresponse()
            return response.status, response.read(MAX_RESPONSE_BYTES)
        except (OSError, http.client.HTTPException) as exc:
            raise Unreachable(f"{self.url}: {exc}") from None
        finally:
            conn.close()


def _parse_response(raw: bytes, url: str) -> tuple[int, bytes]:
    head, sep, body = raw.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    parts = lines[0].split(b" ", 2) if lines else []
    if not sep or len(parts) < 2 or not parts[0].startswith(b"HTTP/") or not parts[1].isdigit():
        raise Unreachable(f"{url}: not an HTTP answer")
    fields = {}
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        fields[name.strip().lower()] = value.strip()
    if fields.get(b"transfer-encoding", b"").lower() == b"chunked":
        body = _dechunk(body, url)
    elif b"content-length" in fields:
        length = int(fields[b"content-length"])
        if len(body) < length:
            raise Unreachable(f"{url}: answer cut short")
        body = body[:length]
    return int(parts[1]), body


def _dechunk(body: bytes, url: str) -> bytes:
    out: list[bytes] = []
    rest = body
    while True:
        size_line, sep, rest = rest.partition(b"\r\n")
        try:
            size = int(size_line.split(b";")[0], 16)
        except ValueError:
            raise Unreachable(f"{url}: bad chunked answer") from None
        if not sep or size == 0:
            return b"".join(out)
        out.append(rest[:size])
        rest = rest[size + 2:]
